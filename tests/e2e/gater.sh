#!/bin/bash
# gpukmm-gater end to end (kubesim + watcher + modmgr + fake statusd, real
# processes): upstream's gating scenarios (§8.1 item 9) on real DaemonSets, a
# DaemonSet created after the policy, the opt-in label in another namespace,
# other controllers' changes surviving, kernelModule removed / KMM uninstalled
# → key removed (and modmgr's error reported), report values, a restart that
# writes nothing, SIGTERM exit 0.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/modmgr.sh
. tests/lib/gater.sh

MM_WATCHER_FLAGS="--discovery-interval 1"
mm_setup || { echo "not ok - setup"; exit 1; }
trap gt_teardown EXIT
mk_namespace apps
KEY="${GT_KEY_PREFIX}gpu-gpu.ready"

# DaemonSets that exist before the policy (the operator deployed them)
mk_ds "$MM_NS" gpu-device-plugin '{"kubernetes.io/arch":"amd64","zone":"a"}'
mk_ds "$MM_NS" gpu-xpu-manager '{"kubernetes.io/arch":"amd64"}'
mk_ds "$MM_NS" gpu-node-exporter '{"kubernetes.io/arch":"amd64"}'
mk_ds apps my-gpu-app '{"role":"gpu"}' '{"gpukmm.io/gate":"gpu"}'
mk_ds apps other-app '{"role":"gpu"}' '{"gpukmm.io/gate":"other"}'
w_created=$(ds_writes)
gt_start_gater
check "gater synced" wait_for "gater synced" 20 grep -q "view rebuilt from snapshot" "$MM_DIR/gater.log"

# ---- §8.1 item 9: no kernelModule → no key -------------------------------------------
apply_cp gpu dp
check "kernelModule nil: report sent" wait_for "report" 20 gt_report_has '.devicePluginStatus == "0/0"'
check "kernelModule nil: device plugin not gated" ungated "$MM_NS" gpu-device-plugin
check "kernelModule nil: nothing written" test "$(ds_writes)" = "$w_created"

# ---- kernelModule set → key on the three (that exist) and the opt-in one --------------
cp_patch "{\"spec\":{\"kernelModule\":$KM_BASIC}}"
check "kernelModule set: device plugin gated" wait_for "dp gated" 20 gated "$MM_NS" gpu-device-plugin
check "kernelModule set: xpu manager gated" wait_for "xpu gated" 10 gated "$MM_NS" gpu-xpu-manager
check "kernelModule set: opt-in DaemonSet in another namespace gated" wait_for "app gated" 10 gated apps my-gpu-app
check "the other keys of the selector survive" ds_jq "$MM_NS" gpu-device-plugin \
	'.spec.template.spec.nodeSelector == {"kubernetes.io/arch":"amd64","zone":"a","'"$KEY"'":""}'
check "other DaemonSets of the namespace untouched" ungated "$MM_NS" gpu-node-exporter
check "a DaemonSet opted in for another policy untouched" ds_jq apps other-app \
	'.spec.template.spec.nodeSelector == {"role":"gpu"}'
check "the Module selector has no ready label (§8.1 item 9)" wait_for module 20 \
	module_jq '.spec.selector | keys | map(select(startswith("kmm.node.kubernetes.io"))) | length == 0'
check "report lists the gated DaemonSets" wait_for "gated list" 10 gt_report_has \
	"(.gatedDaemonsets | sort) == [\"apps/my-gpu-app\",\"$MM_NS/gpu-device-plugin\",\"$MM_NS/gpu-xpu-manager\"]"
check "report: DRA N/A (no DaemonSet)" gt_report_has '.draStatus == "N/A" and .xpuManagerStatus == "0/0"'

# ---- a DaemonSet created after the policy ------------------------------------------------
mk_ds "$MM_NS" gpu-gpu-dra '{"kubernetes.io/arch":"amd64"}'
check "DaemonSet created later is gated when it appears" wait_for "dra gated" 20 gated "$MM_NS" gpu-gpu-dra

# ---- status values follow the DaemonSet's rollout --------------------------------------
kraw PATCH "/apis/apps/v1/namespaces/$MM_NS/daemonsets/gpu-device-plugin/status" \
	'{"status":{"numberReady":1,"desiredNumberScheduled":2}}' application/merge-patch+json >/dev/null
check "devicePluginStatus numberReady/desiredNumberScheduled" wait_for "1/2" 20 gt_report_has '.devicePluginStatus == "1/2"'

# ---- another controller changes other keys and the image: both survive, our key stays ----
w0=$(ds_writes)
n0=$(gt_report_count)
kraw PATCH "/apis/apps/v1/namespaces/$MM_NS/daemonsets/gpu-device-plugin" \
	'{"spec":{"template":{"spec":{"nodeSelector":{"zone":null,"rack":"r1"},"containers":[{"name":"c","image":"img:2"}]}}}}' \
	application/merge-patch+json >/dev/null
check "gater saw the change" wait_for "report after change" 20 reports_more_than_gt "$n0"
check "their keys and image survive, ours stays" ds_jq "$MM_NS" gpu-device-plugin \
	'.spec.template.spec.nodeSelector == {"kubernetes.io/arch":"amd64","rack":"r1","'"$KEY"'":""} and .spec.template.spec.containers[0].image == "img:2"'
check "no write of ours for a change that left our key in place" test "$(ds_writes)" = "$((w0 + 1))"
# an operator re-rendering the DaemonSet without our key (full update): the key comes back
ds_json "$MM_NS" gpu-xpu-manager | jq -c 'del(.spec.template.spec.nodeSelector["'"$KEY"'"]) | .spec.template.spec.containers[0].image = "xpu:2"' >"$MM_DIR/xpu.json"
kraw PUT "/apis/apps/v1/namespaces/$MM_NS/daemonsets/gpu-xpu-manager" "$(cat "$MM_DIR/xpu.json")" >/dev/null
check "key removed by a full update comes back, their image kept" wait_for "xpu re-gated" 20 ds_jq "$MM_NS" gpu-xpu-manager \
	'.spec.template.spec.nodeSelector["'"$KEY"'"] == "" and .spec.template.spec.containers[0].image == "xpu:2"'

# ---- restart writes nothing ----------------------------------------------------------------
gt_stop_gater TERM
check "gater exits 0 on SIGTERM" test $? = 0
w0=$(ds_writes)
n0=$(gt_report_count)
gt_start_gater
check "restarted gater reports again" wait_for "report after restart" 20 reports_more_than_gt "$n0"
check "restart of the gater writes nothing ($w0 -> $(ds_writes))" test "$(ds_writes)" = "$w0"

# ---- opt-out: the label moved to another policy → that policy decides (no such policy: ungated)
kraw PATCH "/apis/apps/v1/namespaces/apps/daemonsets/my-gpu-app" '{"metadata":{"labels":{"gpukmm.io/gate":"nosuch"}}}' \
	application/merge-patch+json >/dev/null
check "label moved: the old policy's key stays until that policy lets go" gated apps my-gpu-app

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
check "409 storm (70% of patches): converges, every key removed" wait_for "ungated under 409s" 30 bash -c \
	"$(declare -f ds_json ungated ds_jq kraw); KUBESIM_URL=$KUBESIM_URL KUBESIM_DIR=$KUBESIM_DIR GT_KEY_PREFIX=$GT_KEY_PREFIX;
	 ungated $MM_NS gpu-device-plugin && ungated $MM_NS gpu-gpu-dra && ungated $MM_NS gpu-xpu-manager"
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
check "policy deleted: opt-in DaemonSet ungated" wait_for "ungated" 30 ungated "$MM_NS" gpu-device-plugin
check "policy deleted: report says deleted" wait_for deleted 30 gt_report_has '.deleted == true'

gt_stop_gater TERM
check "gater exits 0" test $? = 0
exit $MM_FAILED
