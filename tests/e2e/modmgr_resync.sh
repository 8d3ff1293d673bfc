#!/bin/bash
# gpukmm-modmgr end to end, the moving parts around it: KMM installed after
# start (discovery re-checked, no restart), statusd refusing reports (retried),
# the watcher killed and restarted (modmgr sees the bus gap, resyncs by
# snapshot, counts it in its heartbeat counters and carries on).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/statusd.sh

MM_NO_KMM=1
MM_WATCHER_FLAGS="--discovery-interval 1 --discovery-confirm 2"
MM_STATUSD_FLAGS="--fail-first 2"
MM_NO_START=1 sd_setup
MM_MODMGR_FLAGS="--control $SD_CONTROL --heartbeat-ms 200"
mm_start_watcher
mm_start_modmgr
mc() { sd_counter "$MM_MODMGR_PID" "$1"; }
log_count() { grep -c "$1" "$MM_DIR/modmgr.log"; }
# the heartbeat's bus counters agree with the log: one "view rebuilt" line per snapshot
# counted, one "bus gap" line per gap counted, and at least $1 snapshots / $2 gaps
bus_counters_are() {
	local c
	c=$(sd_counters "$MM_MODMGR_PID")
	jq -e --argjson s "$(log_count "view rebuilt from snapshot")" --argjson g "$(log_count "bus gap on")" \
		--argjson smin "$1" --argjson gmin "$2" \
		'.modmgr_snapshots_total == $s and .modmgr_bus_gaps_total == $g and $s >= $smin and $g >= $gmin and
		 .modmgr_events_received_total > 0' <<<"$c" >/dev/null
}
check "modmgr synced" wait_for "modmgr synced" 20 grep -q "view rebuilt from snapshot" "$MM_DIR/modmgr.log"

# ---- KMM absent ----------------------------------------------------------------
apply_cp gpu dra "$KM_BASIC"
check "KMM absent: exact error reported (after statusd refused the first reports)" \
	wait_for "kmm error" 20 report_has '.errors | index("KMM is not installed in the cluster.")'
check "KMM absent: kmmStatus left untouched" report_has 'has("kmmStatus") | not'
check "KMM absent: no finalizer taken" cp_lacks_finalizer

# ---- KMM installed while running ---------------------------------------------------
mm_install_kmm
check "KMM installed later: Module created without a restart" wait_for "module" 20 module_exists
check "KMM installed later: the error is gone" wait_for "error cleared" 10 report_has '(.errors | length) == 0'
check "KMM installed later: finalizer taken" wait_for finalizer 10 cp_has_finalizer

# ---- watcher crash -------------------------------------------------------------------
check "heartbeats: bus counters (snapshots, gaps, events) match the log" wait_for "bus counters" 10 \
	bus_counters_are 1 0
s0=$(log_count "view rebuilt from snapshot") g0=$(log_count "bus gap on")
kill -KILL "$MM_WATCHER_PID"; wait "$MM_WATCHER_PID" 2>/dev/null; MM_WATCHER_PID=
cp_patch '{"spec":{"nodeSelector":{"while":"down"}}}'
mm_start_watcher
check "watcher restarted: the change made while it was down is applied" wait_for "patched" 30 \
	module_jq '.spec.selector.while == "down"'
check "watcher restarted: modmgr saw a bus gap and rebuilt its view (counted: modmgr_bus_gaps_total, modmgr_snapshots_total)" \
	wait_for "resync counted" 10 bus_counters_are $((s0 + 1)) $((g0 + 1))
cp_patch '{"spec":{"nodeSelector":{"after":"restart"}}}'
check "and later changes still flow" wait_for "patched again" 20 module_jq '.spec.selector.after == "restart"'
check "modmgr still running" kill -0 "$MM_MODMGR_PID"

# ---- KMM uninstalled: status says so ------------------------------------------------------
kraw DELETE /apis/apiextensions.k8s.io/v1/customresourcedefinitions/modules.kmm.sigs.x-k8s.io >/dev/null
check "KMM uninstalled: status says so" wait_for "kmm gone" 20 report_has '.errors | index("KMM is not installed in the cluster.")'

mm_stop_modmgr TERM
check "modmgr exits 0" test $? = 0
exit $MM_FAILED
