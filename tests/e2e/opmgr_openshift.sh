#!/bin/bash
# gpukmm-opmgr on OpenShift (security.openshift.io served, found at run time):
# per operand a ServiceAccount, a SecurityContextConstraints with upstream's
# content, a ClusterRole granting `use` on it and its binding; the device
# plugin runs as its ServiceAccount, the XPU Manager also with SELinux spc_t;
# monitoring off removes the XPU Manager's SCC plumbing; deleting the policy
# removes everything.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/opmgr.sh

MM_WATCHER_FLAGS="--discovery-interval 1"
op_setup
k apply -f tests/fixtures/operand-crds/securitycontextconstraints.security.openshift.io.yaml >/dev/null
CPP=/apis/intel.com/v1alpha1/clusterpolicies/gpu
SCCP=/apis/security.openshift.io/v1/securitycontextconstraints
RBP=/apis/rbac.authorization.k8s.io/v1
NSP=/api/v1/namespaces/$MM_NS
k apply -f - >/dev/null <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: gpu}
spec: {resourceRegistration: dp, resourceMonitoring: true}
Y
op_start
check "opmgr synced" wait_for "opmgr synced" 20 op_synced
check "device plugin SCC (hostPath, emptyDir)" wait_for scc 20 obj_jq $SCCP/gpu-gpu-dp-scc \
	'.volumes == ["hostPath","emptyDir"] and .allowHostDirVolumePlugin == true and .requiredDropCapabilities == ["ALL"]'
check "XPU Manager SCC (SYS_ADMIN, configMap)" wait_for scc-xpu 20 obj_jq $SCCP/gpu-xpu-manager-scc \
	'.allowedCapabilities == ["SYS_ADMIN"] and .volumes == ["hostPath","configMap"]'
check "role grants use of the SCC" wait_for role 20 obj_jq $RBP/clusterroles/gpu-gpu-dp-scc-role \
	'.rules == [{"apiGroups":["security.openshift.io"],"resources":["securitycontextconstraints"],"resourceNames":["gpu-gpu-dp-scc"],"verbs":["use"]}]'
check "binding to the operand's ServiceAccount" wait_for binding 20 obj_jq $RBP/clusterrolebindings/gpu-gpu-dp-scc-binding \
	".subjects == [{\"kind\":\"ServiceAccount\",\"name\":\"gpu-gpu-dp-sa\",\"namespace\":\"$MM_NS\"}]"
check "ServiceAccounts created" wait_for sa 20 in_shell "$(declare -f kraw obj obj_jq); obj_jq $NSP/serviceaccounts/gpu-gpu-dp-sa .metadata.uid && obj_jq $NSP/serviceaccounts/gpu-xpu-manager-sa .metadata.uid"
check "device plugin runs as its ServiceAccount" wait_for dp-sa 20 ds_is gpu-device-plugin '.spec.template.spec.serviceAccountName == "gpu-gpu-dp-sa"'
check "XPU Manager: its ServiceAccount and SELinux spc_t" wait_for xpu-sa 20 ds_is gpu-xpu-manager \
	'.spec.template.spec.serviceAccountName == "gpu-xpu-manager-sa" and .spec.template.spec.containers[0].securityContext.seLinuxOptions == {"type":"spc_t"}'
kraw PATCH $CPP '{"spec":{"resourceMonitoring":false}}' application/merge-patch+json >/dev/null
check "monitoring off: the XPU Manager's SCC, role, binding and SA go" wait_for "xpu scc gone" 20 in_shell "
	$(declare -f kraw obj obj_jq obj_gone); obj_gone $SCCP/gpu-xpu-manager-scc && obj_gone $RBP/clusterroles/gpu-xpu-manager-scc-role &&
	obj_gone $RBP/clusterrolebindings/gpu-xpu-manager-scc-binding && obj_gone $NSP/serviceaccounts/gpu-xpu-manager-sa"
check "the device plugin's stay" obj_jq $SCCP/gpu-gpu-dp-scc .metadata.uid
k delete clusterpolicy gpu --wait=false >/dev/null 2>&1
check "policy deleted: everything gone" wait_for "all gone" 30 in_shell "
	$(declare -f kraw obj obj_jq obj_gone); obj_gone $CPP && obj_gone $SCCP/gpu-gpu-dp-scc && obj_gone $RBP/clusterroles/gpu-gpu-dp-scc-role &&
	obj_gone $RBP/clusterrolebindings/gpu-gpu-dp-scc-binding && obj_gone $NSP/serviceaccounts/gpu-gpu-dp-sa && obj_gone $DSP/gpu-device-plugin"
op_stop TERM
check "opmgr exits 0 on SIGTERM" test $? = 0
exit $MM_FAILED
