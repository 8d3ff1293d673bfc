#!/bin/bash
# Issue #20 end to end, through the real processes and the real kubectl: a
# controller profile, one node profile per GPU node (one of them a Secure Boot
# node: its prober reports Secure Boot on), kubesim, fake-kmm as KMM (its
# admission webhook registered, signing and Secure Boot modelled).
#   1. the policy without sign: KMM loads xe on the plain node; the Secure Boot
#      node refuses the unsigned module; status.nodes names it SecureBootUnsigned,
#      pointing at spec.kernelModule.sign, and Ready=False says so
#   2. the admin adds the key Secrets and kernelModule.sign (+ a module parameter):
#      the Module gets them (through KMM's admission), KMM signs the image
#      (NeedsSigning, SignimageCreated, Exists, SignimageSucceeded) and loads it
#      on the Secure Boot node; its prober sees the OoT xe; Ready=True
# Every process must stop cleanly at the end.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/scenario.sh
NS=intel-gpu-base-operator
CP=gpu-sb
MOD=$CP-gpu
KEY="kmm.node.kubernetes.io/$NS.$MOD.ready"
KV=6.8.0-45-generic
sc_init secureboot
module_is() { kraw GET "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$MOD" | jq -e "$1" >/dev/null; }
events() { kraw GET "/api/v1/namespaces/$NS/events" | jq -c --arg m "$MOD" '[.items[] | select(.involvedObject.name == $m and .involvedObject.kind == "ModuleBuildSignConfig") | .reason] | sort'; }
problem_is() { # NODE REASON MESSAGE
	cp_is "[.status.nodes.problems[]? | select(.node == \"$1\")] == [{\"node\":\"$1\",\"reason\":\"$2\",\"message\":\"$3\"}]"
}
policy() { # the example's shape on one kernel family; $1: extra kernelModule members
	cat <<Y | k apply -f - >>"$D/kubectl.log" 2>&1
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: $CP}
spec:
  resourceRegistration: dp
  useNFDLabeling: true
  kernelModule:
    kernelMappings:
    - regexp: '^6\.8\.0-[0-9]+-generic\$'
      containerImage: registry.example.com/gpu/xe-oot-kmd-signed:1.3-\${KERNEL_FULL_VERSION}
$1
Y
}

sc_kmm_cluster 200 200 --sign-delay-ms 500
node gpu-plain "$KV"
node gpu-sb "$KV"
np_init "$D" "$D/node-kubeconfig" "$NS"
np_flavor gpu-sb sb
np_start gpu-plain "$KV" && np_start gpu-sb "$KV" || nok "node profiles start"
np_follow_start
ctrl_start A nolease
check "the controller is ready" 60 ctrl_ready A
check "the Secure Boot node's report says so" 40 node_is gpu-sb \
	'(.metadata.annotations["gpukmm.io/node-report"] | fromjson | .secureBoot) == "true"'

# ---- 1. unsigned: the Secure Boot node refuses the module ----------------------------------
policy ""
check "unsigned: KMM loads xe on the plain node" 40 loaded_on gpu-plain
check "unsigned: kmmStatus 1/2 (the Secure Boot node is desired, never available)" 40 cp_is '.status.kmmStatus == "1/2"'
check "unsigned: the Secure Boot node has no ready label" 5 eval '! loaded_on gpu-sb'
check "unsigned: status.nodes names gpu-sb SecureBootUnsigned, pointing at kernelModule.sign" 40 problem_is gpu-sb \
	SecureBootUnsigned "Secure Boot on and module unsigned: set spec.kernelModule.sign so that KMM signs it"
check "unsigned: Ready=False; ModuleLoaded=False names the node and kernelModule.sign" 40 cp_is \
	'(.status.conditions[] | select(.type == "Ready") | .status == "False") and
	 (.status.conditions[] | select(.type == "ModuleLoaded") | .status == "False"
	  and (.message | endswith("node gpu-sb: Secure Boot on and module unsigned: set spec.kernelModule.sign so that KMM signs it")))'
check "unsigned: no sign job" 5 eval '[ "$(events)" = "[]" ]'

# ---- 2. the admin signs: keys as Secrets, kernelModule.sign ------------------------------------
openssl req -x509 -new -nodes -utf8 -sha256 -days 1 -batch -subj /CN=gpukmm-test-mok -outform DER \
	-out "$D/mok.der" -keyout "$D/mok.priv" >/dev/null 2>&1
k -n "$NS" create secret generic secureboot-key --from-file=key="$D/mok.priv" >>"$D/kubectl.log" 2>&1
k -n "$NS" create secret generic secureboot-cert --from-file=cert="$D/mok.der" >>"$D/kubectl.log" 2>&1
policy "    parameters: [force_probe=e20b]
    sign:
      keySecret: {name: secureboot-key}
      certSecret: {name: secureboot-cert}
      unsignedImage: registry.example.com/gpu/xe-oot-kmd:1.3-\${KERNEL_FULL_VERSION}"
check "signed: the Module carries sign (default filesToSign) and the parameter, through KMM's admission" 30 module_is \
	'.spec.moduleLoader.container.sign == {"keySecret":{"name":"secureboot-key"},"certSecret":{"name":"secureboot-cert"},
	  "unsignedImage":"registry.example.com/gpu/xe-oot-kmd:1.3-${KERNEL_FULL_VERSION}",
	  "filesToSign":["/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko"]}
	 and .spec.moduleLoader.container.modprobe.parameters == ["force_probe=e20b"]'
check "signed: KMM signs the image (NeedsSigning, then Exists)" 30 module_is \
	".metadata.annotations[\"fake-kmm.gpukmm.io/image.$KV\"] == \"Exists registry.example.com/gpu/xe-oot-kmd-signed:1.3-$KV\""
check "signed: KMM's events for the sign job" 20 eval '[ "$(events)" = "[\"SignimageCreated\",\"SignimageSucceeded\"]" ]'
check "signed: the Secure Boot node loads the signed module" 40 loaded_on gpu-sb
check "signed: its prober sees the OoT xe (xe.source=oot)" 40 node_is gpu-sb '.metadata.labels["gpukmm.io/xe.source"] == "oot"'
check "signed: kmmStatus 2/2, ootLoaded 2, no problem node, Ready=True" 60 cp_is \
	'.status.kmmStatus == "2/2" and .status.nodes.ootLoaded == 2 and .status.nodes.problemNodes == 0
	 and (.status.conditions[] | select(.type == "Ready") | .status == "True")
	 and .status.observedGeneration == .metadata.generation'
