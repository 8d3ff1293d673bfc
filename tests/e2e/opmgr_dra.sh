#!/bin/bash
# gpukmm-opmgr in dra mode (kubesim's default release; OP_KUBESIM_FLAGS=
# "--kube-version 1.32" and the like for the others — on 1.31-1.33 the claim
# guard needs claims watched at the served version, else opmgr fails closed and
# the DRA driver stays): the DRA driver
# and its dependencies as upstream renders them (in the served version), the
# XPU Manager's monitor claim; dra -> dp while the claims' list lies (a claim
# made meanwhile is invisible: an absence that is not confirmed) keeps the DRA
# driver and says why; once the claims are read again the allocated claim keeps
# it (upstream's guard, the error says so) until the claim goes; dp -> dra
# again; the policy deleted through twelve 409s on its finalizer patch: nothing left behind.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/opmgr.sh

# watches that end every 1-2 s (a forced 410 relists promptly)
MM_WATCHER_FLAGS="--discovery-interval 1 --watch-timeout 1"
op_setup ${OP_KUBESIM_FLAGS:-}
# the newest served version of a resource.k8s.io resource (as the watcher finds it)
served() {
	local v
	for v in v1 v1beta2 v1beta1 v1alpha3; do
		kraw GET "/apis/resource.k8s.io/$v" | jq -e --arg r "$1" '[.resources[]?.name] | index($r) != null' >/dev/null 2>&1 &&
			{ echo "$v"; return; }
	done
}
if ! k api-resources --api-group=resource.k8s.io 2>/dev/null | grep -q '^deviceclasses' ||
	! k api-resources --api-group=resource.k8s.io 2>/dev/null | grep -q '^resourceclaimtemplates'; then
	echo "ok - kubesim does not serve DeviceClass / ResourceClaimTemplate # skip"
	exit 0
fi
DRAV=$(served deviceclasses)
CPP=/apis/intel.com/v1alpha1/clusterpolicies/gpu
RP=/apis/resource.k8s.io/$DRAV
RBP=/apis/rbac.authorization.k8s.io/v1
VP=/apis/admissionregistration.k8s.io/v1
NSP=/api/v1/namespaces/$MM_NS
echo "# resource.k8s.io $DRAV"
k apply -f - >/dev/null <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: gpu}
spec: {resourceRegistration: dra, resourceMonitoring: true, dra: {manageBinding: true}}
Y
op_start
check "opmgr synced" wait_for "opmgr synced" 20 op_synced
check "DRA kubelet plugin DaemonSet" wait_for dra-ds 20 ds_is gpu-gpu-dra \
	'.spec.template.spec.serviceAccountName == "gpu-gpu-dra" and .spec.template.spec.containers[0].args == ["-v=0","--healthcheck-port=51516","--manage-binding=true"]'
check "its ServiceAccount, ClusterRole and binding" wait_for dra-rbac 20 in_shell "
	$(declare -f kraw obj obj_jq); obj_jq $NSP/serviceaccounts/gpu-gpu-dra .metadata.uid &&
	obj_jq $RBP/clusterroles/gpu-gpu-dra '.rules | length == 3' &&
	obj_jq $RBP/clusterrolebindings/gpu-gpu-dra '.subjects[0].name == \"gpu-gpu-dra\"'"
check "DeviceClasses gpu.intel.com and gpu-vfio.intel.com" wait_for classes 20 in_shell "
	$(declare -f kraw obj obj_jq); obj_jq $RP/deviceclasses/gpu.intel.com '.spec.selectors | length == 1' &&
	obj_jq $RP/deviceclasses/gpu-vfio.intel.com '.spec.selectors | length == 1'"
check "ValidatingAdmissionPolicy and binding" wait_for vap 20 in_shell "
	$(declare -f kraw obj obj_jq); obj_jq $VP/validatingadmissionpolicies/gpu-gpu-dra '.spec.failurePolicy == \"Fail\"' &&
	obj_jq $VP/validatingadmissionpolicybindings/gpu-gpu-dra '.spec.policyName == \"gpu-gpu-dra\"'"
check "XPU Manager claims the GPUs through the monitor claim template" wait_for xpu 20 in_shell "
	$(declare -f kraw obj obj_jq ds_is); DSP=$DSP; obj_jq $RP/namespaces/$MM_NS/resourceclaimtemplates/gpu-monitor-claim .metadata.uid &&
	ds_is gpu-xpu-manager '.spec.template.spec.resourceClaims == [{\"name\":\"monitor-claim\",\"resourceClaimTemplateName\":\"gpu-monitor-claim\"}]'"
# the claims' watch ends in 410 and their relist answers 200 with {} (not a list: a failed
# list, the cache kept, the claims unconfirmed); a workload's claim made meanwhile holds a
# GPU the watcher cannot see
mk_namespace apps
RCV=$(served resourceclaims)
faults() { kraw PUT /kubesim/faults "$1" >/dev/null && [ "$(kraw_code)" = 200 ]; }
lfail() { grep -c "resourceclaims.*list failed" "$MM_DIR/watcher.log"; }
b0=$(lfail)
faults '{"rules":[{"verb":"watch","resource":"resourceclaims","code":410},{"verb":"list","resource":"resourceclaims","code":200,"body":"{}"}]}'
check "the claims' list lies" wait_for "claims lie" 20 eval '[ "$(lfail)" -gt "$b0" ]'
kraw POST "/apis/resource.k8s.io/$RCV/namespaces/apps/resourceclaims" '{"metadata":{"name":"c1"},"spec":{}}' >/dev/null
kraw PATCH "/apis/resource.k8s.io/$RCV/namespaces/apps/resourceclaims/c1/status" \
	'{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.intel.com","pool":"n1","device":"gpu-0"}]}}}}' \
	application/merge-patch+json >/dev/null
kraw PATCH $CPP '{"spec":{"resourceRegistration":"dp"}}' application/merge-patch+json >/dev/null
check "dp while the claims cannot be read: the DRA driver stays, the status says why" wait_for unconfirmed 20 in_shell "
	$(declare -f kraw obj obj_jq ds_is op_last_report op_report_has); DSP=$DSP; MM_DIR=$MM_DIR
	op_report_has '.errors | map(test(\"^GPU ResourceClaims that could not be confirmed .* blocking the removal of the DRA driver gpu-gpu-dra\")) | any'"
check "…the device plugin came, the DRA driver is still there" wait_for "dp came" 20 in_shell "
	$(declare -f kraw obj obj_jq ds_is); DSP=$DSP; ds_is gpu-device-plugin .metadata.uid &&
	ds_is gpu-gpu-dra '.metadata.uid and .metadata.deletionTimestamp == null'"
faults '{}'
check "dp while a claim holds a GPU: the device plugin comes, the DRA driver stays" wait_for guard 20 in_shell "
	$(declare -f kraw obj obj_jq ds_is op_last_report op_report_has); DSP=$DSP; MM_DIR=$MM_DIR
	ds_is gpu-device-plugin .metadata.uid && ds_is gpu-gpu-dra .metadata.uid &&
	op_report_has '.errors | index(\"allocated GPU ResourceClaims blocking the removal of the DRA driver gpu-gpu-dra\") != null'"
check "the XPU Manager moves to the extended resource" wait_for xpu-dp 20 ds_is gpu-xpu-manager \
	'(.spec.template.spec.resourceClaims == null) and .spec.template.spec.containers[0].resources.limits["gpu.intel.com/monitoring"] == "1"'
kraw DELETE "/apis/resource.k8s.io/$RCV/namespaces/apps/resourceclaims/c1" >/dev/null
check "claim released: the DRA driver and everything it had go" wait_for "dra gone" 30 in_shell "
	$(declare -f kraw obj obj_jq obj_gone ds_gone); DSP=$DSP; ds_gone gpu-gpu-dra && obj_gone $RP/deviceclasses/gpu.intel.com &&
	obj_gone $RBP/clusterroles/gpu-gpu-dra && obj_gone $VP/validatingadmissionpolicies/gpu-gpu-dra &&
	obj_gone $RP/namespaces/$MM_NS/resourceclaimtemplates/gpu-monitor-claim"
kraw PATCH $CPP '{"spec":{"resourceRegistration":"dra"}}' application/merge-patch+json >/dev/null
check "back to dra: the DRA driver again, the device plugin goes" wait_for "dra back" 30 in_shell "
	$(declare -f kraw obj obj_jq obj_gone ds_gone ds_is); DSP=$DSP; ds_is gpu-gpu-dra .metadata.uid && ds_gone gpu-device-plugin"
# the finalizer patch meets twelve 409s (issue #15 item 6): retried on the conflict spacing,
# each said, not on the failure backoff
faults '{"rules":[{"verb":"patch","resource":"clusterpolicies","code":409,"times":12}]}'
k delete clusterpolicy gpu --wait=false >/dev/null 2>&1
check "policy deleted: nothing left" wait_for "all gone" 30 in_shell "
	$(declare -f kraw obj obj_jq obj_gone ds_gone); DSP=$DSP; obj_gone $CPP && ds_gone gpu-gpu-dra && ds_gone gpu-xpu-manager &&
	obj_gone $RP/deviceclasses/gpu-vfio.intel.com && obj_gone $RBP/clusterrolebindings/gpu-gpu-dra && obj_gone $NSP/serviceaccounts/gpu-gpu-dra"
check "…through twelve 409s on its finalizer patch, each logged" \
	eval '[ "$(op_counter "conflict (409) writing its finalizers")" -ge 12 ]'
faults '{}'
op_stop TERM
check "opmgr exits 0 on SIGTERM" test $? = 0
exit $MM_FAILED
