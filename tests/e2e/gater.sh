#!/bin/bash
# gpukmm-gater end to end (kubesim + watcher + modmgr + fake statusd, real
# processes): upstream's gating scenarios (§8.1 item 9) on real DaemonSets, a
# DaemonSet created after the policy, the opt-in label in another namespace,
# other controllers' changes surviving, report values, a restart that writes
# nothing, SIGTERM exit 0. (Removal paths: gater_lifecycle.sh.)
set -u
# the DaemonSets' status is written by hand below: without kubesim's DaemonSet controller
KUBESIM_FLAGS="--controllers=*,-daemonset"
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/gater.sh

MM_WATCHER_FLAGS="--discovery-interval 1"
gt_setup
KEY="${GT_KEY_PREFIX}gpu-gpu.ready"

# DaemonSets that exist before the policy (the operator deployed them)
mk_ds "$MM_NS" gpu-device-plugin '{"kubernetes.io/arch":"amd64","zone":"a"}'
mk_ds "$MM_NS" gpu-xpu-manager '{"kubernetes.io/arch":"amd64"}'
mk_ds "$MM_NS" gpu-node-exporter '{"kubernetes.io/arch":"amd64"}'
mk_ds apps my-gpu-app '{"role":"gpu"}' '{"gpukmm.io/gate":"gpu"}'
mk_ds apps other-app '{"role":"gpu"}' '{"gpukmm.io/gate":"other"}'
w_created=$(ds_writes)
gt_start_gater
check "gater synced" wait_for "gater synced" 20 gt_synced

# ---- §8.1 item 9: no kernelModule → no key -------------------------------------------
apply_cp gpu dp
check "kernelModule nil: report sent (without the operand counts: gpukmm-opmgr's)" wait_for "report" 20 gt_report_has \
	'.policy == "gpu" and (has("devicePluginStatus") | not)'
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

# ---- a DaemonSet created after the policy ------------------------------------------------
mk_ds "$MM_NS" gpu-gpu-dra '{"kubernetes.io/arch":"amd64"}'
check "DaemonSet created later is gated when it appears" wait_for "dra gated" 20 gated "$MM_NS" gpu-gpu-dra


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

# ---- crashes: the watcher killed (the gater resyncs by snapshot), the gater killed ----------
kill -KILL "$MM_WATCHER_PID"; wait "$MM_WATCHER_PID" 2>/dev/null; MM_WATCHER_PID=
cp_patch '{"spec":{"kernelModule":null}}'
mm_start_watcher
check "watcher killed and restarted: the change made while it was down is applied" \
	wait_for "ungated after watcher restart" 30 ungated "$MM_NS" gpu-device-plugin
check "gater still running after the watcher crash" kill -0 "$GT_GATER_PID"
gt_stop_gater KILL
cp_patch "{\"spec\":{\"kernelModule\":$KM_BASIC}}"
gt_start_gater
check "gater killed (SIGKILL) and restarted: catches up" wait_for "regated" 30 gated "$MM_NS" gpu-device-plugin
gt_stop_gater TERM
check "gater exits 0 on SIGTERM" test $? = 0
exit $MM_FAILED
