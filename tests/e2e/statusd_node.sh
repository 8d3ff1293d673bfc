#!/bin/bash
# gpukmm-statusd node mode end to end: kubesim + gpukmm-statusd --mode node;
# NodeReports sent with gpukmmctl ipc call, the Node read back raw.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/statusd.sh

MM_NO_START=1 MM_NO_KMM=1 sd_setup
CTL="$GPUKMM_BIN/gpukmmctl"
SD_SOCK="ipc://$MM_DIR/nsd.sock"
sd_start() {
	NODE_NAME=n1 "$GPUKMM_BIN/gpukmm-statusd" --mode node --kubeconfig "$MM_DIR/node-kubeconfig" --listen "$SD_SOCK" \
		--debounce-ms 50 --control "$SD_CONTROL" --heartbeat-ms 200 >>"$MM_DIR/statusd-node.log" 2>&1 &
	SD_PID=$!
}
report() { "$CTL" ipc call "$SD_SOCK" gpukmm.Status.ReportNode "$1" --timeout-ms 3000 >/dev/null 2>&1; }
node_json() { kraw GET /api/v1/nodes/n1; }
node_has() { node_json | jq -e ".metadata | $1" >/dev/null; }
node_writes() { kraw GET /kubesim/stats | jq -r '.writesByResource.nodes // 0'; }

kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"kubernetes.io/arch":"amd64","team":"a"},"annotations":{"keep":"me"}}}' >/dev/null
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2","labels":{"team":"b"}}}' >/dev/null
check "node mode without a node name refuses to start" bash -c "! env -u NODE_NAME '$GPUKMM_BIN/gpukmm-statusd' --mode node --kubeconfig '$MM_DIR/node-kubeconfig' --listen 'ipc://$MM_DIR/x.sock' 2>/dev/null"
sd_start
R1='{"node_name":"n1","kernel_version":"6.8.0","module_name":"xe","gpus":[{"address":"0000:03:00.0","sriov_numvfs":0},{"address":"0000:04:00.0"}],"module":{"name":"xe","loaded":true,"source":"SOURCE_OOT"}}'
check "statusd answers ReportNode" wait_for "statusd up" 10 report "$R1"
check "labels appear" wait_for labels 10 node_has '.labels["gpukmm.io/gpu.present"] == "true" and .labels["gpukmm.io/gpu.count"] == "2" and .labels["gpukmm.io/xe.source"] == "oot" and .labels["gpukmm.io/sriov.vfs-active"] == "false"'
check "annotation carries the report JSON" node_has '(.annotations["gpukmm.io/node-report"] | fromjson | .kernel_version) == "6.8.0"'
check "other labels and annotations untouched" node_has '.labels.team == "a" and .labels["kubernetes.io/arch"] == "amd64" and .annotations.keep == "me"'
n2_labels() { kraw GET /api/v1/nodes/n2 | jq -c '.metadata.labels | keys'; }
check "other nodes untouched" test "$(n2_labels)" = '["team"]'
R2='{"node_name":"n1","kernel_version":"6.8.0","module_name":"xe","gpus":[{"address":"0000:03:00.0","sriov_numvfs":4}],"module":{"name":"xe","loaded":true,"source":"SOURCE_IN_TREE"}}'
report "$R2"
check "labels change with the report" wait_for change 10 node_has '.labels["gpukmm.io/sriov.vfs-active"] == "true" and .labels["gpukmm.io/gpu.count"] == "1" and .labels["gpukmm.io/xe.source"] == "in-tree"'
w0=$(node_writes)
r0=$(sd_counter "$SD_PID" statusd_reports)
report "$R2"; report "$R2"
check "statusd processed both reports" sd_idle_after "$SD_PID" statusd_reports $((r0 + 1))
check "same report writes nothing ($w0 -> $(node_writes))" test "$(node_writes)" = "$w0"
sd_stop KILL
sd_start
check "restarted after kill -9 answers" wait_for "statusd up" 10 report "$R2"
check "restarted statusd processed the report" sd_idle_after "$SD_PID" statusd_reports 0
check "kill + restart writes nothing ($w0 -> $(node_writes))" test "$(node_writes)" = "$w0"
check "controller-only Report refused in node mode" bash -c "'$CTL' ipc call '$SD_SOCK' gpukmm.Status.Report '{\"component\":\"modmgr\",\"policy\":\"p\"}' 2>&1 | grep -q FAILED_PRECONDITION"
sd_stop TERM
check "statusd exits 0 on SIGTERM" test $? = 0
