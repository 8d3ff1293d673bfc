#!/bin/bash
# gpukmm-statusd across a failover (issue #15 item 3): a statusd that loses the
# leadership and wins it back writes nothing from the reports it heard in its
# earlier term, even though the leader in between changed the status; it writes
# again from what the components report in its new term, nothing when that
# equals the status, and then the conditions keep their lastTransitionTime.
# kubesim + gpukmm-watcher (leader-elected) + gpukmm-statusd A; the leader in
# between is a second gpukmm-statusd B writing without an election. The
# component reports are sent with gpukmmctl ipc call, stamped with the term.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/statusd.sh

MM_NO_START=1
MM_WATCHER_FLAGS="--leader-elect --retry-period 1 --lease-name gpukmm-controller"
sd_setup
CTL="$GPUKMM_BIN/gpukmmctl"
SD_SOCK="ipc://$MM_DIR/sd.sock"
B_SOCK="ipc://$MM_DIR/sd-b.sock"
B_PID=
sd_start() { sd_start_watching --debounce-ms 100 --grace-ms 60000; }
# report SOCK COMPONENT-JSON-FIELDS TERM
report() { sd_report_in "$3" "{\"policy\":\"gpu\",\"generation\":1,$2}" "$1"; }
term() { sd_term; }
leading() { [ "$(term)" != 0 ]; }
following() { [ "$(term)" = 0 ]; }
st_has() { cp_json | jq -e ".status | $1" >/dev/null; }
cond() { cp_json | jq -r ".status.conditions[] | select(.type==\"$1\") | .$2"; }
a_writes() { sd_counter "$SD_PID" statusd_writes; }
LEASE=/apis/coordination.k8s.io/v1/namespaces/$MM_NS/leases/gpukmm-controller
MM_READY='"component":"modmgr","kmm_status":"2/2"'
GT_READY='"component":"gater","device_plugin_status":"2/2","dra_status":"N/A","xpu_manager_status":"N/A"'
MM_HALF='"component":"modmgr","kmm_status":"1/2","errors":["module loader not fully available (1/2)"]'
GT_HALF='"component":"gater","device_plugin_status":"1/2","dra_status":"N/A","xpu_manager_status":"N/A"'
OP_READY='"component":"opmgr","device_plugin_status":"2/2","dra_status":"N/A","xpu_manager_status":"N/A"'
OP_HALF='"component":"opmgr","device_plugin_status":"1/2","dra_status":"N/A","xpu_manager_status":"N/A"'

apply_cp gpu dp "$KM_BASIC"
mm_start_watcher
sd_start
check "A's watcher leads" wait_for "leader" 20 leading
T1=$(term)
check "statusd A answers Report" wait_for "statusd up" 10 report "$SD_SOCK" "$MM_READY" "$T1"
report "$SD_SOCK" "$GT_READY" "$T1"
report "$SD_SOCK" "$OP_READY" "$T1"
check "A writes Ready True from the reports of its term $T1" wait_for ready 10 \
	st_has '.kmmStatus == "2/2" and .devicePluginStatus == "2/2" and (.conditions[] | select(.type=="Ready") | .status == "True")'

# ---- another instance takes the Lease; it writes a different status --------------------------
# (a read-modify-write with the Lease's resourceVersion: A's watcher renews it
# every second, so the write is tried again on a 409)
take_lease() {
	local now
	now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
	kraw GET "$LEASE" | jq -c --arg now "$now" '.spec.holderIdentity = "someone-else" | .spec.leaseDurationSeconds = 3600 |
		.spec.acquireTime = $now | .spec.renewTime = $now | .spec.leaseTransitions = ((.spec.leaseTransitions // 0) + 1)' >"$MM_DIR/lease.json"
	kraw PUT "$LEASE" "$(cat "$MM_DIR/lease.json")" >/dev/null
	[ "$(kraw_code)" = 200 ]
}
check "another instance takes the Lease" wait_for "lease taken" 20 take_lease
check "A's watcher follows" wait_for "follower" 20 following
"$GPUKMM_BIN/gpukmm-statusd" --mode controller --kubeconfig "$MM_DIR/kubeconfig" --listen "$B_SOCK" \
	--debounce-ms 100 --grace-ms 60000 >>"$MM_DIR/statusd-b.log" 2>&1 &
B_PID=$!
check "the other leader's statusd (B) answers Report" wait_for "statusd B up" 10 report "$B_SOCK" "$MM_HALF" 0
report "$B_SOCK" "$GT_HALF" 0
report "$B_SOCK" "$OP_HALF" 0
check "B writes what its components say: 1/2, an error, Ready False" wait_for half 10 \
	st_has '.kmmStatus == "1/2" and .devicePluginStatus == "1/2" and (.errors | length) == 1 and (.conditions[] | select(.type=="Ready") | .status == "False")'
stop_var B_PID TERM
BEFORE=$(cp_json | jq -c .status)
t_ready=$(cond Ready lastTransitionTime)
t_deg=$(cond Degraded lastTransitionTime)

# ---- the Lease comes back to A: a new term ----------------------------------------------------
w0=$(a_writes) # A follows: nothing written since its Ready True
kraw DELETE "$LEASE" >/dev/null
check "A's watcher leads again" wait_for "leader again" 20 leading
T2=$(term)
check "in a new term ($T1 -> $T2)" test "$T2" != "$T1"
# an unrelated change to the policy, on the same bus after the leadership event:
# once A has evaluated it, it has evaluated the leadership change too
e0=$(sd_counter "$SD_PID" statusd_events)
cp_patch '{"metadata":{"labels":{"touched":"yes"}}}'
check "A saw both events and is idle" sd_idle_after "$SD_PID" statusd_events "$e0"
check "A wrote nothing from the reports of its earlier term ($w0 -> $(a_writes) writes)" test "$(a_writes)" = "$w0"
check "the status is B's, untouched" test "$(cp_json | jq -c .status)" = "$BEFORE"

# ---- the components report in the new term ------------------------------------------------------
r0=$(sd_counter "$SD_PID" statusd_reports)
report "$SD_SOCK" "$MM_HALF" "$T2"
report "$SD_SOCK" "$GT_HALF" "$T2"
report "$SD_SOCK" "$OP_HALF" "$T2"
check "A processed the reports of term $T2" sd_idle_after "$SD_PID" statusd_reports $((r0 + 2))
check "they say what the status says: nothing written ($w0 -> $(a_writes))" test "$(a_writes)" = "$w0"
check "Ready and Degraded keep their lastTransitionTime across the failover" \
	test "$(cond Ready lastTransitionTime)/$(cond Degraded lastTransitionTime)" = "$t_ready/$t_deg"
# a report of the earlier term arriving late is not used
o0=$(sd_counter "$SD_PID" statusd_other_term)
report "$SD_SOCK" "$MM_READY" "$T1"
check "a late report of term $T1 is counted as another term's" wait_for "other term" 10 \
	bash -c "[ \"\$(. tests/lib/statusd.sh; SD_CONTROL='$SD_CONTROL' GPUKMM_BIN='$GPUKMM_BIN' sd_counter $SD_PID statusd_other_term)\" -gt $o0 ]"
check "and not written" test "$(cp_json | jq -c .status)" = "$BEFORE"
# the next transition must get a later (second-resolution) timestamp than B's
later_second() { [[ "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$t_ready" ]]; }
check "the clock is past B's transition second" wait_for "a later second" 5 later_second
report "$SD_SOCK" "$MM_READY" "$T2"
report "$SD_SOCK" "$GT_READY" "$T2"
report "$SD_SOCK" "$OP_READY" "$T2"
check "a change reported in term $T2 is written: Ready True" wait_for ready2 10 \
	st_has '.kmmStatus == "2/2" and .devicePluginStatus == "2/2" and (has("errors") | not) and (.conditions[] | select(.type=="Ready") | .status == "True")'
check "Ready's lastTransitionTime moved with it" test "$(cond Ready lastTransitionTime)" != "$t_ready"
sd_stop TERM
check "statusd A exits 0 on SIGTERM" test $? = 0
