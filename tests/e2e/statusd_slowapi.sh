#!/bin/bash
# gpukmm-statusd while the API server is slow on writes (kubesim latency
# injection of several seconds on status patches / NodeReportRequest creates): the service loop
# never waits for the API — Report/ReportNode are answered at once, heartbeats
# keep coming (their counters move while the write is in flight) — the final
# state converges to the last report, 409s are re-read and retried, an equal
# status writes nothing, and SIGTERM with a write in flight exits 0 at once.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/statusd.sh

MM_NO_START=1 MM_NO_KMM=1 sd_setup
CTL="$GPUKMM_BIN/gpukmmctl"
SLOW_MS=3500 # under statusd's 4 s per-call bound: the write completes
slow_patch() { faults "{\"verb\":\"patch\",\"resource\":\"$1\",\"rate\":1,\"latencyMs\":$SLOW_MS}"; }
# fast: answered within 1.5 s (a loop blocked on a 3.5 s write would not)
report() { "$CTL" ipc call "ipc://$MM_DIR/sd.sock" gpukmm.Status.Report "$1" --timeout-ms "${2:-1500}" >/dev/null 2>&1; }
report_node() { "$CTL" ipc call "ipc://$MM_DIR/nsd.sock" gpukmm.Status.ReportNode "$1" --timeout-ms "${2:-1500}" >/dev/null 2>&1; }
kmm() { printf '{"component":"modmgr","policy":"gpu","generation":1,"kmm_status":"%s"}' "$1"; }
st_has() { cp_json | jq -e ".status | $1" >/dev/null; }
# a heartbeat taken while the write is in flight: reports counted, no write finished yet
in_flight_hb() { sd_counters "$1" | jq -e --argjson r "$2" --argjson w "$3" \
	'.statusd_reports >= $r and .statusd_writes == $w and .statusd_pending > 0' >/dev/null; }

# ---- controller mode ------------------------------------------------------------------------
apply_cp gpu dra "$KM_BASIC"
"$GPUKMM_BIN/gpukmm-statusd" --mode controller --kubeconfig "$MM_DIR/kubeconfig" --listen "ipc://$MM_DIR/sd.sock" \
	--debounce-ms 100 --grace-ms 1500 --control "$SD_CONTROL" --heartbeat-ms 200 >>"$MM_DIR/statusd-slow.log" 2>&1 &
SD_PID=$!
check "statusd answers Report" wait_for "statusd up" 10 report "$(kmm 0/2)" 3000
check "status written (fast API)" wait_for first 10 st_has '.kmmStatus == "0/2"'
check "idle" sd_idle_after "$SD_PID" statusd_writes 0
w0=$(sd_counter "$SD_PID" statusd_writes)
r0=$(sd_counter "$SD_PID" statusd_reports)
slow_patch clusterpolicies
t0=$(date +%s%N)
report "$(kmm 1/2)"
slow=0
for v in 1/2 2/2 2/2; do report "$(kmm "$v")" || slow=1; done
dt=$(ms_since "$t0")
echo "# 4 Reports answered in $dt ms while the status write takes $SLOW_MS ms"
check "Reports answered while a status write hangs" test "$slow" = 0
check "heartbeats while the write is in flight (reports counted, write pending)" \
	wait_for heartbeat 3 in_flight_hb "$SD_PID" $((r0 + 4)) "$w0"
check "status converges to the last report with the API still slow" wait_for converge 25 st_has '.kmmStatus == "2/2"'
check "and statusd goes idle" sd_idle_after "$SD_PID" statusd_writes "$w0" 15
faults ""
w1=$(sd_counter "$SD_PID" statusd_writes)
p1=$(sd_counter "$SD_PID" statusd_passes)
report "$(kmm 2/2)"
check "an equal report is evaluated" sd_idle_after "$SD_PID" statusd_passes "$p1"
check "and writes nothing" test "$(sd_counter "$SD_PID" statusd_writes)" = "$w1"
# 409 on every status patch: re-read and retried (with backoff) until the API lets it through
faults '{"verb":"patch","resource":"clusterpolicies","rate":1,"code":409}'
report "$(kmm 1/2)"
conflicted() { [ "$(sd_counter "$SD_PID" statusd_conflicts)" -ge 3 ]; }
check "409s are retried" wait_for conflicts 10 conflicted
check "status not written during the 409s" st_has '.kmmStatus == "2/2"'
w409=$(sd_counter "$SD_PID" statusd_writes)
faults ""
check "written once the conflicts stop" wait_for after409 10 st_has '.kmmStatus == "1/2"'
# the write is on the API before statusd's heartbeat counts it: wait for the count
# (and idle) so the next check's baseline is not one behind
sd_idle_after "$SD_PID" statusd_writes "$w409" 10 >/dev/null
slow_patch clusterpolicies
report "$(kmm 0/2)"
wp=$(sd_counter "$SD_PID" statusd_writes)
check "a write in flight" wait_for inflight 3 in_flight_hb "$SD_PID" 0 "$wp"
stops_at_once "with a $SLOW_MS ms status write in flight" sd_stop
faults ""

# ---- node mode ------------------------------------------------------------------------------
# (the node hands its report in as a NodeReportRequest; a controller statusd applies it)
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"team":"a"}}}' >/dev/null
kubesim_pod_token "$MM_NS" gpukmm-node n1 gpukmm-node-n1 gpukmm.io/node-report "$MM_DIR/tok1" || notok "n1's pod token"
"$GPUKMM_BIN/gpukmm-statusd" --mode controller --kubeconfig "$MM_DIR/kubeconfig" --listen "ipc://$MM_DIR/sd.sock" \
	--debounce-ms 100 >>"$MM_DIR/statusd-ctrl2.log" 2>&1 &
SD_PID=$!
NODE_NAME=n1 "$GPUKMM_BIN/gpukmm-statusd" --mode node --kubeconfig "$MM_DIR/node-kubeconfig" --listen "ipc://$MM_DIR/nsd.sock" \
	--namespace "$MM_NS" --report-token-file "$MM_DIR/tok1" \
	--debounce-ms 50 --control "$SD_CONTROL" --heartbeat-ms 200 >>"$MM_DIR/statusd-node-slow.log" 2>&1 &
NSD_PID=$!
slow_create() { faults "{\"verb\":\"create\",\"resource\":\"nodereportrequests\",\"rate\":1,\"latencyMs\":$SLOW_MS}"; }
nrep() { printf '{"node_name":"n1","kernel_version":"%s","module_name":"xe","gpus":[{"address":"0000:03:00.0"}]}' "$1"; }
node_kver() { kraw GET /api/v1/nodes/n1 | jq -e --arg v "$1" '(.metadata.annotations["gpukmm.io/node-report"] | fromjson | .kernelVersion) == $v' >/dev/null; }
check "node statusd answers ReportNode" wait_for "node statusd up" 10 report_node "$(nrep 6.1)" 3000
check "Node written (fast API)" wait_for nfirst 10 node_kver 6.1
check "node statusd idle" sd_idle_after "$NSD_PID" statusd_writes 0
w0=$(sd_counter "$NSD_PID" statusd_writes)
r0=$(sd_counter "$NSD_PID" statusd_reports)
slow_create
slow=0
for v in 6.2 6.3 6.4 6.8; do report_node "$(nrep "$v")" || slow=1; done
check "ReportNode answered while a request create hangs" test "$slow" = 0
check "heartbeats while the create is in flight" wait_for nheartbeat 3 in_flight_hb "$NSD_PID" $((r0 + 4)) "$w0"
check "Node converges to the last report with the API still slow" wait_for nconverge 25 node_kver 6.8
check "node statusd goes idle" sd_idle_after "$NSD_PID" statusd_writes "$w0" 15
report_node "$(nrep 6.9)"
wp=$(sd_counter "$NSD_PID" statusd_writes)
check "a create in flight" wait_for ninflight 3 in_flight_hb "$NSD_PID" 0 "$wp"
stops_at_once "(node mode) with a $SLOW_MS ms request create in flight" nsd_stop
faults ""
sd_stop TERM
check "the controller statusd exits 0" test $? = 0
exit ${MM_FAILED:-0}
