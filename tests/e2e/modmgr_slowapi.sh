#!/bin/bash
# gpukmm-modmgr while the API server is slow on Module writes (kubesim latency
# injection of several seconds on every Module patch): the writes run on the
# service loop without blocking it — heartbeats keep coming and bus events keep
# being consumed while a patch is in flight, another policy's Module is created
# meanwhile, the slow change lands, 409s on the patch are re-read and retried
# until they stop, and SIGTERM with a patch in flight exits 0 at once.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/statusd.sh

MM_NO_START=1 sd_setup
SLOW_MS=4000
MM_MODMGR_FLAGS="--control $SD_CONTROL --heartbeat-ms 200"
mm_start_watcher
mm_start_modmgr
mc() { sd_counter "$MM_MODMGR_PID" "$1"; }
mc_is() { [ "$(mc "$1")" = "$2" ]; }
mc_ge() { [ "$(mc "$1")" -ge "$2" ]; }
# a heartbeat taken while a pass waits for its patch: pass in flight, no patch finished,
# and bus events received since $1
in_flight_hb() { sd_counters "$MM_MODMGR_PID" | jq -e --argjson p "$1" --argjson ev "$2" \
	'.modmgr_passes_inflight > 0 and .modmgr_module_patches_total == $p and .modmgr_events_received_total > $ev' >/dev/null; }

apply_cp gpu dra "$KM_BASIC"
check "Module created (fast API)" wait_for module 20 module_exists
check "heartbeats arrive" wait_for hb 10 mc_ge modmgr_module_creates_total 1
p0=$(mc modmgr_module_patches_total)

faults "{\"verb\":\"patch\",\"resource\":\"modules\",\"rate\":1,\"latencyMs\":$SLOW_MS}"
t0=$(date +%s%N)
cp_patch '{"spec":{"nodeSelector":{"gpu":"slow"}}}'
check "a Module patch in flight" wait_for inflight 3 mc_ge modmgr_passes_inflight 1
ev0=$(mc modmgr_events_received_total)
# another policy while gpu's patch hangs: its Module is a create (not slowed)
apply_cp other dra "$KM_BASIC"
check "another policy's Module is created while the patch hangs" wait_for other 3 module_exists other
dt=$(ms_since "$t0")
echo "# other-gpu created $dt ms after the slow change (Module patches take $SLOW_MS ms)"
check "... before the slow patch could end ($dt ms < $SLOW_MS)" test "$dt" -lt "$SLOW_MS"
check "heartbeats while the patch is in flight (bus events consumed, patch pending)" \
	wait_for heartbeat 3 in_flight_hb "$p0" "$ev0"
check "the slow change lands" wait_for slow 15 module_jq '.spec.selector.gpu == "slow"'
check "and the pass ends" wait_for done 5 mc_is modmgr_passes_inflight 0

# 409 on every Module patch: re-read and retried with backoff until the API lets it through
faults '{"verb":"patch","resource":"modules","rate":1,"code":409}'
c0=$(mc modmgr_conflicts_total)
cp_patch '{"spec":{"nodeSelector":{"gpu":"conflict"}}}'
conflicted() { [ "$(mc modmgr_conflicts_total)" -ge $((c0 + 3)) ]; }
check "409s are re-read and retried" wait_for conflicts 10 conflicted
check "nothing written during the 409s" module_jq '.spec.selector.gpu == "slow"'
faults ""
check "written once the conflicts stop" wait_for after409 10 module_jq '.spec.selector.gpu == "conflict"'

# SIGTERM with a patch in flight
faults "{\"verb\":\"patch\",\"resource\":\"modules\",\"rate\":1,\"latencyMs\":$SLOW_MS}"
cp_patch '{"spec":{"nodeSelector":{"gpu":"term"}}}'
check "a patch in flight before SIGTERM" wait_for inflight2 3 mc_ge modmgr_passes_inflight 1
t0=$(date +%s%N)
mm_stop_modmgr TERM
rc=$?
dt=$(ms_since "$t0")
echo "# modmgr stopped in $dt ms with a $SLOW_MS ms patch in flight"
check "SIGTERM with a patch in flight: exit 0 ($rc)" test "$rc" = 0
check "and at once (under 2 s, not after the patch)" test "$dt" -lt 2000
faults ""
exit $MM_FAILED
