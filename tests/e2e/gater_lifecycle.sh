#!/bin/bash
# gpukmm-gater end to end, the removal paths and the API failing: the opt-in
# label moved, kernelModule removed → key removed (other keys kept), KMM
# uninstalled → key removed and modmgr's error reported (not repeated by the
# gater), KMM reinstalled → gated again without a restart, 409 storms and 503s,
# the policy deleted → keys removed and the report says deleted.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/gater.sh

MM_WATCHER_FLAGS="--discovery-interval 1 --discovery-confirm 2"
gt_setup

# DaemonSets that exist before the policy (the operator deployed them)
mk_ds "$MM_NS" gpu-device-plugin '{"kubernetes.io/arch":"amd64","rack":"r1"}'
mk_ds "$MM_NS" gpu-xpu-manager '{"kubernetes.io/arch":"amd64"}'
mk_ds "$MM_NS" gpu-gpu-dra '{"kubernetes.io/arch":"amd64"}'
mk_ds apps my-gpu-app '{"role":"gpu"}' '{"gpukmm.io/gate":"gpu"}'
gt_start_gater
check "gater synced" wait_for "gater synced" 20 gt_synced

apply_cp gpu dp "$KM_BASIC"
for d in gpu-device-plugin gpu-xpu-manager gpu-gpu-dra; do
	check "$d gated" wait_for "$d gated" 20 gated "$MM_NS" "$d"
done
check "opt-in DaemonSet gated" wait_for "app gated" 20 gated apps my-gpu-app

# ---- the opt-in label moved to a policy that does not exist: that (absent) policy's pass
# runs and writes nothing; the DaemonSet is no longer gpu's, so gpu's key is left as
# it is (the gater never edits a DaemonSet it does not gate: the user owns it now)
w0=$(ds_writes)
kraw PATCH "/apis/apps/v1/namespaces/apps/daemonsets/my-gpu-app" '{"metadata":{"labels":{"gpukmm.io/gate":"nosuch"}}}' \
	application/merge-patch+json >/dev/null
check "label moved: the new (absent) policy's pass ran" wait_for "nosuch pass" 20 gt_report_has '.deleted == true' nosuch
left_alone() { [ "$(ds_writes)" = "$((w0 + 1))" ] && gated apps my-gpu-app; }
check "label moved: nothing written (only the label patch), the DaemonSet left as it is" left_alone

# ---- kernelModule removed → key removed everywhere ----------------------------------------
cp_patch '{"spec":{"kernelModule":null}}'
for d in gpu-device-plugin gpu-xpu-manager gpu-gpu-dra; do
	check "kernelModule removed: $d ungated" wait_for "$d ungated" 20 ungated "$MM_NS" "$d"
done
check "kernelModule removed: other keys still there" ds_jq "$MM_NS" gpu-device-plugin \
	'.spec.template.spec.nodeSelector == {"kubernetes.io/arch":"amd64","rack":"r1"}'
check "report: nothing gated" wait_for "no gated" 10 gt_report_has '(.gatedDaemonsets // []) == []'

# ---- back on, then KMM uninstalled → key removed, error reported (by modmgr, once) ----------
cp_patch "{\"spec\":{\"kernelModule\":$KM_BASIC}}"
check "kernelModule back: gated again" wait_for "regated" 20 gated "$MM_NS" gpu-device-plugin
kraw DELETE /apis/apiextensions.k8s.io/v1/customresourcedefinitions/modules.kmm.sigs.x-k8s.io >/dev/null
check "KMM uninstalled: key removed" wait_for "ungated" 30 ungated "$MM_NS" gpu-device-plugin
check "KMM uninstalled: dra key removed" wait_for "ungated" 10 ungated "$MM_NS" gpu-gpu-dra
check "KMM uninstalled: the error is reported (modmgr)" wait_for "kmm error" 20 \
	mm_report_has '.errors | index("KMM is not installed in the cluster.")'
check "KMM uninstalled: the gater does not repeat it" gt_report_has '(.errors | length) == 0'
mm_install_kmm
check "KMM reinstalled: gated again without a restart" wait_for "regated" 30 gated "$MM_NS" gpu-device-plugin

# ---- API faults: 409 storms converge (re-read, backoff), 503 is reported and then clears ----
kraw PUT /kubesim/faults '{"seed":5,"rules":[{"verb":"patch","resource":"daemonsets","rate":0.7,"code":409}]}' >/dev/null
cp_patch '{"spec":{"kernelModule":null}}'
all_ungated() { ungated "$MM_NS" gpu-device-plugin && ungated "$MM_NS" gpu-gpu-dra && ungated "$MM_NS" gpu-xpu-manager; }
check "409 storm (70% of patches): converges, every key removed" wait_for "ungated under 409s" 30 all_ungated
check "409s are re-read and retried, not reported as errors" gt_report_has '(.errors | length) == 0'
kraw PUT /kubesim/faults '{"seed":5,"rules":[{"verb":"patch","resource":"daemonsets","rate":1.0,"code":503}]}' >/dev/null
cp_patch "{\"spec\":{\"kernelModule\":$KM_BASIC}}"
check "503 on every patch: the error is reported" wait_for "503 error" 20 \
	gt_report_has '.errors | map(startswith("failed to gate DaemonSet '"$MM_NS"'/")) | any'
kraw PUT /kubesim/faults '{}' >/dev/null
check "API healthy again: gated (retried with backoff)" wait_for "regated" 30 gated "$MM_NS" gpu-device-plugin
check "API healthy again: the error disappears" wait_for "error cleared" 20 gt_report_has '(.errors | length) == 0'

# ---- the policy deleted → keys removed, report {deleted} -----------------------------------
kraw DELETE /apis/intel.com/v1alpha1/clusterpolicies/gpu >/dev/null
check "policy deleted: device plugin ungated" wait_for "ungated" 30 ungated "$MM_NS" gpu-device-plugin
check "policy deleted: report says deleted" wait_for deleted 30 gt_report_has '.deleted == true'

gt_stop_gater TERM
check "gater exits 0" test $? = 0
exit $MM_FAILED
