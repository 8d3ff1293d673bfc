# Shell helpers for the statusd end-to-end tests, on tests/lib/modmgr.sh (sourced here).
#
#   sd_setup                      mm_setup (as the MM_* variables say; "not ok - setup" and
#                                 exit when it fails), sd_control_start, sd_teardown as the
#                                 EXIT trap
#   SD_PID / NSD_PID              the gpukmm-statusd (controller / node mode) a script starts
#   sd_stop [SIG] / nsd_stop [SIG]   stop it (default TERM): its exit code
#   sd_teardown                   SIGKILL SD_PID, SIGTERM NSD_PID (SIGKILL after 10 s),
#                                 sd_control_stop, mm_teardown
#   sd_control_start              a fake supervisor Control (tests/bin/fake_control) on
#                                 $SD_CONTROL; give statusd --control "$SD_CONTROL" --heartbeat-ms 200
#   sd_counter PID NAME           the counter NAME of the statusd process PID (0 when not yet known)
#   sd_idle_after PID NAME N [S]  wait (S seconds, default 10) until counter NAME > N and the
#                                 process has nothing pending (statusd_pending 0), both seen in
#                                 the same heartbeat: what NAME counts has been fully processed
# The fake is stopped by sd_control_stop (call it from the EXIT trap).
# With the watcher (MM_WATCHER_FLAGS="--leader-elect ..."):
#   sd_start_watching FLAGS...   a controller-mode statusd on $SD_SOCK following the watcher
#                                (its control: $SD_CONTROL; log statusd-ctrl.log); SD_PID
#   sd_term                      the watcher's leadership term (0: not leading)
#   sd_report_in TERM JSON [SOCK]   a component report made in TERM (default socket $SD_SOCK)
# For the slow-API tests:
#   faults 'RULE-JSON,...'       kubesim fault rules ("" = none)
#   ms_since T0                  ms since T0 (date +%s%N)
#   stops_at_once WHAT CMD...    CMD stops a process (returns its exit code): checks exit 0, under 2 s

. "${GPUKMM_SRC:-.}/tests/lib/modmgr.sh"
. "$GPUKMM_SRC/tests/lib/metrics.sh"
SD_CONTROL_PID= SD_PID= NSD_PID=
sd_control_start() {
	SD_CONTROL="ipc://$MM_DIR/control.sock"
	"$GPUKMM_TBIN/fake_control" --listen "$SD_CONTROL" >>"$MM_DIR/control.log" 2>&1 &
	SD_CONTROL_PID=$!
}
sd_control_stop() { stop_var SD_CONTROL_PID; }
sd_setup() {
	mm_setup || { echo "not ok - setup"; exit 1; }
	sd_control_start
	trap sd_teardown EXIT
}
sd_stop() { stop_var SD_PID "${1:-TERM}"; }
nsd_stop() { stop_var NSD_PID "${1:-TERM}"; }
sd_teardown() {
	sd_stop KILL
	stop_pid "$NSD_PID" 10
	NSD_PID=
	sd_control_stop
	mm_teardown
}
sd_counters() { ctl_metrics "$SD_CONTROL" "$1"; } # PID -> {"name":value,...} of its latest heartbeat (tests/lib/metrics.sh)
sd_counter() { sd_counters "$1" | jq -r --arg n "$2" '.[$n] // 0'; }
sd_start_watching() {
	SD_SOCK=${SD_SOCK:-ipc://$MM_DIR/sd.sock}
	"$GPUKMM_BIN/gpukmm-statusd" --mode controller --kubeconfig "$MM_DIR/kubeconfig" --listen "$SD_SOCK" \
		--watcher "ipc://$MM_DIR/watcher.sock" --events "ipc://$MM_DIR/events.sock" \
		--control "$SD_CONTROL" --heartbeat-ms 200 --log-level debug "$@" >>"$MM_DIR/statusd-ctrl.log" 2>&1 &
	SD_PID=$!
}
sd_term() {
	"$GPUKMM_BIN/gpukmmctl" ipc call "ipc://$MM_DIR/watcher.sock" gpukmm.Watcher.Snapshot '{"topics":["leadership"]}' \
		--timeout-ms 3000 2>/dev/null | jq -r '.leadership.term // "0"'
}
sd_report_in() {
	"$GPUKMM_BIN/gpukmmctl" ipc call "${3:-$SD_SOCK}" gpukmm.Status.Report \
		"$(jq -c --arg t "${1:-0}" '. + {leader_term: $t}' <<<"$2")" --timeout-ms 3000 >/dev/null 2>&1
}
_sd_idle_check() { sd_counters "$1" | jq -e --arg n "$2" --argjson v "$3" '(.[$n] // 0) > $v and .statusd_pending == 0' >/dev/null; }
sd_idle_after() { wait_for "statusd $2 > $3 and idle" "${4:-10}" _sd_idle_check "$1" "$2" "$3"; }

faults() { kraw PUT /kubesim/faults "{\"rules\":[$1]}" >/dev/null; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
stops_at_once() {
	local what=$1 t0 rc dt
	shift
	t0=$(date +%s%N)
	"$@"
	rc=$?
	dt=$(ms_since "$t0")
	echo "# stopped in $dt ms $what"
	check "SIGTERM $what: exit 0 ($rc)" test "$rc" = 0
	check "and at once (under 2 s, not after the API: $dt ms)" test "$dt" -lt 2000
}
