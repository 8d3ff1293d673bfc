#!/bin/bash
# A version added to (or dropped from) kernelModule recreates the KMM Module (KMM's
# webhook refuses that change in place). The operands gated on the Module's ready
# label hold the driver open, so KMM's unload of the old Module fails while they
# run (fake-kmm models it: "Module xe is in use"): before this test the recreation
# waited for ever on "being deleted". Through the real processes (a controller
# profile with gpukmm-opmgr, fake-kmm, kubesim's DaemonSet controller and kubelet):
# while modmgr's status says Recreating, opmgr's device plugin gets the ready
# label's DoesNotExist affinity and the gater gives an opted-in DaemonSet of
# another operator a ready-key value no node carries; both leave every node, KMM
# unloads, the new Module is created, and the operands come back where KMM loads it.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/scenario.sh
kubesim_need_kubectl || exit 0
NS=intel-gpu-base-operator
CP=gpu
MOD=$CP-gpu
KEY="kmm.node.kubernetes.io/$NS.$MOD.ready"
KV=6.8.0-45-generic
sc_init recreate
sc_kmm_cluster 200 200
node gpu-1 "$KV"
node gpu-2 "$KV"

# another operator's DaemonSet, opted in to the gate (namespace apps bound for the gater)
k create namespace apps >>"$D/kubectl.log" 2>&1
k -n apps create rolebinding gpukmm-gate-daemonsets --clusterrole=gpukmm-gate-daemonsets \
	--serviceaccount="$NS:gpukmm-controller" >>"$D/kubectl.log" 2>&1
k apply -f - >>"$D/kubectl.log" 2>&1 <<Y
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: telemetry, namespace: apps, labels: {gpukmm.io/gate: $CP}}
spec:
  selector: {matchLabels: {app: telemetry}}
  template:
    metadata: {labels: {app: telemetry}}
    spec:
      nodeSelector: {kubernetes.io/arch: amd64}
      containers: [{name: c, image: registry.example.com/telemetry:1}]
Y
ctrl_start A nolease
check "the controller is ready" 60 ctrl_ready A
policy() { # VERSION (or ""): the policy, kernelModule with that version
	k apply -f - >>"$D/kubectl.log" 2>&1 <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: $CP}
spec:
  resourceRegistration: dp
  kernelModule:
    ${1:+version: \"$1\"}
    kernelMappings:
    - regexp: '^6\.8\.0-[0-9]+-generic\$'
      containerImage: registry.example.com/gpu/xe-oot-kmd:1.3-\${KERNEL_FULL_VERSION}
Y
}
policy ""
module_is() { kraw GET "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$MOD" | jq -e "$1" >/dev/null; }
pods_on() { # NAMESPACE APP: the nodes its Running pods are on, sorted
	k get pods -n "$1" -l "app=$2" --field-selector status.phase=Running -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' 2>/dev/null |
		sort | paste -sd, -
}
sel_value() { k get ds -n apps telemetry -o json | jq -r --arg k "$KEY" '.spec.template.spec.nodeSelector[$k] // "(absent)"'; }
check "KMM loads xe on gpu-1 and gpu-2" 40 eval 'loaded_on gpu-1 && loaded_on gpu-2'
check "the device plugin runs on both nodes (gated by opmgr's node selector)" 40 eval \
	'[ "$(pods_on "$NS" intel-gpu-plugin)" = gpu-1,gpu-2 ]'
check "the other operator's DaemonSet is gated (\"\") and runs on both nodes" 40 eval \
	'[ "$(sel_value)" = "" ] && [ "$(pods_on apps telemetry)" = gpu-1,gpu-2 ]'

# ---- a version added: the Module is recreated, the operands leave first --------------------------
uid0=$(kraw GET "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$MOD" | jq -r .metadata.uid)
# (the hold lasts only until the new Module is there: watched, not sampled)
rv=$(kubesim_rv)
kcurl -sN "$KUBESIM_URL/apis/apps/v1/namespaces/apps/daemonsets?watch=1&timeoutSeconds=300&resourceVersion=$rv" >"$D/ds.watch" 2>/dev/null &
W1=$!
kcurl -sN "$KUBESIM_URL/api/v1/namespaces/apps/pods?watch=1&timeoutSeconds=300&resourceVersion=$rv" >"$D/pods.watch" 2>/dev/null &
W2=$!
policy 1.0
check "status: the Module is being recreated" 30 cp_is \
	'.status.conditions[] | select(.type == "ModuleLoaded") | .reason == "Recreating"'
check "the device plugin leaves every node (the ready label's DoesNotExist affinity)" 40 eval \
	'[ -z "$(pods_on "$NS" intel-gpu-plugin)" ]'
held() { jq -e -s --arg k "$KEY" 'any(.[]; .object.spec.template.spec.nodeSelector[$k] == "module-recreating")' "$D/ds.watch" >/dev/null; }
left() { # its pods on both nodes deleted
	[ "$(jq -r -s '[.[] | select(.type == "DELETED" and .object.metadata.labels.app == "telemetry") | .object.spec.nodeName] |
		unique | join(",")' "$D/pods.watch")" = gpu-1,gpu-2 ]
}
check "... so does the other operator's DaemonSet: the gater gives it the ready-key value module-recreating" 40 held
check "... and its pods leave both nodes" 40 left
check "KMM unloads the old Module everywhere; the new one, with version 1.0, is created" 60 eval \
	"unloaded_on gpu-1 && unloaded_on gpu-2 && module_is '.metadata.uid != \"$uid0\" and .spec.moduleLoader.container.version == \"1.0\" and .metadata.deletionTimestamp == null'"
# (no node carries the Module's version label: the versioned Module loads nowhere until an upgrade labels them)
check "the recreation is over: the status no longer says Recreating" 30 cp_is \
	'.status.conditions[] | select(.type == "ModuleLoaded") | .reason != "Recreating"'
check "the other operator's DaemonSet is gated on \"\" again (no node is ready: no pod)" 30 eval \
	'[ "$(sel_value)" = "" ] && [ -z "$(pods_on apps telemetry)" ]'
kill "$W1" "$W2" 2>/dev/null
wait "$W1" "$W2" 2>/dev/null

# ---- the version dropped again: recreated, loaded, the operands back --------------------------------
uid1=$(kraw GET "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$MOD" | jq -r .metadata.uid)
policy ""
check "the unversioned Module is created in place of the versioned one" 60 module_is \
	".metadata.uid != \"$uid1\" and (.spec.moduleLoader.container.version // \"\") == \"\" and .metadata.deletionTimestamp == null"
check "KMM loads xe on gpu-1 and gpu-2 again" 60 eval 'loaded_on gpu-1 && loaded_on gpu-2'
check "the device plugin and the other operator's DaemonSet are back on both nodes" 60 eval \
	'[ "$(pods_on "$NS" intel-gpu-plugin)" = gpu-1,gpu-2 ] && [ "$(sel_value)" = "" ] && [ "$(pods_on apps telemetry)" = gpu-1,gpu-2 ]'
check "the policy is Ready" 40 cp_is '.status.conditions[] | select(.type == "Ready") | .status == "True"'
