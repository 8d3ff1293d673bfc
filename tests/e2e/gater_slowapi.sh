#!/bin/bash
# gpukmm-gater while the API server is slow on DaemonSet writes (kubesim
# latency injection of several seconds on every DaemonSet patch): the service
# loop never waits for the API — heartbeats keep coming and bus events are
# handled while the writes are in flight — the DaemonSets are written
# concurrently (one call in flight per DaemonSet, not one after the other),
# the report waits for them and lists them all, and SIGTERM with writes in
# flight exits 0 at once.
set -u
# writes are counted: kubesim's DaemonSet controller writing status meanwhile would
# turn the gater's resourceVersion-checked patches into 409 retries
KUBESIM_FLAGS="--controllers=*,-daemonset"
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/gater.sh
. tests/lib/statusd.sh

MM_WATCHER_FLAGS="--discovery-interval 1"
sd_setup
mk_namespace apps
gt_opt_in apps # the admin lets the gater gate DaemonSets there (deploy/rbac/gate-daemonsets.yaml)
SLOW_MS=5000 # under the gater's 15 s per-call bound: the writes complete
N=5
# the gater's counters from its latest heartbeat (fake supervisor Control)
hb() { sd_counters "$GT_GATER_PID" | jq -e "$1" >/dev/null; }
idle() { hb '.gater_writes_inflight == 0 and .gater_queue_depth == 0'; }
all_gated() { local i; for i in $(seq 1 "$N"); do gated apps "app$i" || return 1; done; }

GT_GATER_FLAGS="--control $SD_CONTROL --heartbeat-ms 200"
mk_ds "$MM_NS" gpu-device-plugin '{"kubernetes.io/arch":"amd64"}'
gt_start_gater
check "gater synced" wait_for "gater synced" 20 gt_synced
apply_cp gpu dp "$KM_BASIC"
check "gated (fast API)" wait_for "dp gated" 20 gated "$MM_NS" gpu-device-plugin
check "heartbeats: one write, now idle" wait_for idle 10 hb '.gater_writes_total == 1 and .gater_writes_inflight == 0'

# ---- every DaemonSet patch takes SLOW_MS: N opt-in DaemonSets appear at once ---------------------
faults "{\"verb\":\"patch\",\"resource\":\"daemonsets\",\"rate\":1,\"latencyMs\":$SLOW_MS}"
t0=$(date +%s%N)
for i in $(seq 1 "$N"); do mk_ds apps "app$i" '{"role":"gpu"}' '{"gpukmm.io/gate":"gpu"}'; done
check "a heartbeat while the writes are in flight" wait_for inflight 3 hb '.gater_writes_inflight > 0'
ev0=$(sd_counter "$GT_GATER_PID" gater_events_received_total)
mk_ds "$MM_NS" gpu-node-exporter '{"role":"cpu"}' # watched (operator namespace), gated by nothing
check "bus events handled and heartbeats sent while the writes hang" wait_for "events while writing" 3 \
	hb ".gater_events_received_total > $ev0 and .gater_writes_inflight > 0"
check "all $N DaemonSets gated" wait_for "all gated" 30 all_gated
dt=$(ms_since "$t0")
echo "# $N DaemonSets gated in $dt ms with $SLOW_MS ms per patch (one after the other would take >= $((N * SLOW_MS)) ms); $(uptime)"
check "written concurrently: under 3 x $SLOW_MS ms ($dt ms)" test "$dt" -lt $((3 * SLOW_MS))
check "the report lists all of them once written" wait_for report 10 gt_report_has '(.gatedDaemonsets | length) == '$((N + 1))
check "and the gater goes idle" wait_for idle 10 idle
check "one write per DaemonSet" hb ".gater_writes_total == $((N + 1))"
check "the bystander untouched" ds_jq "$MM_NS" gpu-node-exporter '.spec.template.spec.nodeSelector == {"role":"cpu"}'

# ---- SIGTERM with writes in flight: exit 0 at once (the calls are cancelled) ---------------------
cp_patch '{"spec":{"kernelModule":null}}'
check "writes in flight again" wait_for inflight 5 hb '.gater_writes_inflight > 0'
stops_at_once "with $SLOW_MS ms DaemonSet writes in flight" gt_stop_gater TERM
faults ""
exit $MM_FAILED
