#!/bin/bash
# Moving over from the Go operator without a reload: kubesim holds what
# upstream left (the ClusterPolicy with its finalizer gpu.intel.com/
# clusterpolicy-protection, the KMM Module owned by the policy under an old
# uid, the device plugin and XPU Manager DaemonSets and the OTel ConfigMap as
# upstream renders them: no managed-by label, no owner reference). gpukmm
# (watcher + modmgr + opmgr) adopts them in place: same uids (zero
# recreations), the DaemonSets' pod templates untouched (same generation: no
# rollout), only metadata patched; the Module is kept as it is; deleting the
# policy then removes upstream's finalizer too (it would stay forever with the
# Go operator gone). (A Module owned under an OLD uid — the policy deleted and
# created again — is adopted too: policy_render_test diff/owner_references; the
# API server's garbage collector may win that race, kubesim's does at once.)
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/opmgr.sh

MM_WATCHER_FLAGS="--discovery-interval 1"
op_setup
CPP=/apis/intel.com/v1alpha1/clusterpolicies/gpu
NSP=/api/v1/namespaces/$MM_NS
MODP=/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$MM_NS/modules/gpu-gpu
cat >"$MM_DIR/cp.yaml" <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: gpu, finalizers: [gpu.intel.com/clusterpolicy-protection]}
spec:
  resourceRegistration: dp
  resourceMonitoring: true
  logLevel: 1
  kernelModule:
    moduleName: xe
    kernelMappings: [{regexp: '^.+$', containerImage: 'registry.example.com/xe:1.0'}]
Y
k apply -f "$MM_DIR/cp.yaml" >/dev/null
UID_CP=$(obj $CPP | jq -r .metadata.uid)
# what upstream rendered for this policy: our rendering (the same pod templates)
# without our label and owner references; the Module owned by the policy
"$GPUKMM_BIN/gpukmmctl" render --all --namespace "$MM_NS" --dra-version none "$MM_DIR/cp.yaml" >"$MM_DIR/all.json"
jq -c '.items[] | del(.metadata.labels["app.kubernetes.io/managed-by"]) | del(.metadata.ownerReferences)' \
	"$MM_DIR/all.json" | while read -r o; do
	kind=$(jq -r .kind <<<"$o")
	case $kind in
	Module) o=$(jq -c '.metadata.ownerReferences = [{"apiVersion":"intel.com/v1alpha1","kind":"ClusterPolicy","name":"gpu","uid":"'"$UID_CP"'","controller":true,"blockOwnerDeletion":true}]' <<<"$o")
		kraw POST "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$MM_NS/modules" "$o" >/dev/null ;;
	DaemonSet) kraw POST "$DSP" "$o" >/dev/null ;;
	ConfigMap) kraw POST "$NSP/configmaps" "$o" >/dev/null ;;
	esac
done
before() { obj "$1" | jq -c '{uid: .metadata.uid, gen: .metadata.generation, tmpl: .spec.template}'; }
B_DP=$(before "$DSP/gpu-device-plugin")
B_XPU=$(before "$DSP/gpu-xpu-manager")
B_MOD=$(obj $MODP | jq -r .metadata.uid)
B_CM=$(obj "$NSP/configmaps/gpu-xpumanager-otel-config" | jq -r .metadata.uid)
check "upstream's objects are there" test -n "$B_MOD" -a "$(jq -r .uid <<<"$B_DP")" != null
mm_start_modmgr
op_start
check "device plugin adopted (our label)" wait_for adopt-dp 20 ds_is gpu-device-plugin '.metadata.labels["app.kubernetes.io/managed-by"] == "gpukmm"'
check "XPU Manager adopted" wait_for adopt-xpu 20 ds_is gpu-xpu-manager \
	".metadata.ownerReferences[0].uid == \"$UID_CP\" and .metadata.labels[\"app.kubernetes.io/managed-by\"] == \"gpukmm\""
check "Module kept, owned by the policy" wait_for adopt-mod 20 obj_jq $MODP \
	".metadata.ownerReferences | length == 1 and .[0].uid == \"$UID_CP\""
check "zero recreations: DaemonSets, Module, ConfigMap keep their uids" bash -c "
	[ \"\$(jq -r .uid <<<'$B_DP')\" = \"$(ds gpu-device-plugin | jq -r .metadata.uid)\" ] &&
	[ \"\$(jq -r .uid <<<'$B_XPU')\" = \"$(ds gpu-xpu-manager | jq -r .metadata.uid)\" ] &&
	[ '$B_MOD' = \"$(obj $MODP | jq -r .metadata.uid)\" ] &&
	[ '$B_CM' = \"$(obj "$NSP/configmaps/gpu-xpumanager-otel-config" | jq -r .metadata.uid)\" ]"
check "no rollout: the pod templates and generations are unchanged" bash -c "
	[ '$B_DP' = '$(before "$DSP/gpu-device-plugin")' ] && [ '$B_XPU' = '$(before "$DSP/gpu-xpu-manager")' ]"
check "no FAILED_PRECONDITION on the Module" bash -c "! grep -q 'already owned by another' '$MM_DIR/modmgr.log'"
check "our finalizers added beside upstream's" wait_for fins 20 obj_jq $CPP \
	'(.metadata.finalizers | index("gpu.intel.com/clusterpolicy-protection") != null) and (.metadata.finalizers | index("gpukmm.io/operand-protection") != null)'
# deletion: upstream's finalizer goes too (KMM has no controller here: the Module goes at once)
k delete clusterpolicy gpu --wait=false >/dev/null 2>&1
check "deleted policy: operands gone, then the Module, then the policy (upstream's finalizer removed)" \
	wait_for "cp gone" 30 obj_gone $CPP
check "nothing left: DaemonSets, ConfigMap, Module" in_shell "
	$(declare -f kraw obj obj_jq obj_gone); obj_gone $DSP/gpu-device-plugin && obj_gone $DSP/gpu-xpu-manager &&
	obj_gone $NSP/configmaps/gpu-xpumanager-otel-config && obj_gone $MODP"
op_stop TERM
check "opmgr exits 0 on SIGTERM" test $? = 0
exit $MM_FAILED
