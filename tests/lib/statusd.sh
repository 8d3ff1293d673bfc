# Shell helpers for the statusd end-to-end tests: source after tests/lib/modmgr.sh.
#
#   sd_control_start              a fake supervisor Control (tests/bin/fake_control) on
#                                 $SD_CONTROL; give statusd --control "$SD_CONTROL" --heartbeat-ms 200
#   sd_counter PID NAME           the counter NAME of the statusd process PID (0 when not yet known)
#   sd_idle_after PID NAME N [S]  wait (S seconds, default 10) until counter NAME > N and the
#                                 process has nothing pending (statusd_pending 0), both seen in
#                                 the same heartbeat: what NAME counts has been fully processed
# The fake is stopped by sd_control_stop (call it from the EXIT trap).
# For the slow-API tests:
#   faults 'RULE-JSON,...'       kubesim fault rules ("" = none)
#   ms_since T0                  ms since T0 (date +%s%N)
#   stops_at_once WHAT CMD...    CMD stops a process (returns its exit code): checks exit 0, under 2 s

SD_CONTROL_PID=
sd_control_start() {
	SD_CONTROL="ipc://$MM_DIR/control.sock"
	"$GPUKMM_TBIN/fake_control" --listen "$SD_CONTROL" >>"$MM_DIR/control.log" 2>&1 &
	SD_CONTROL_PID=$!
}
sd_control_stop() {
	[ -n "$SD_CONTROL_PID" ] || return 0
	kill -TERM "$SD_CONTROL_PID" 2>/dev/null
	wait "$SD_CONTROL_PID" 2>/dev/null
	SD_CONTROL_PID=
}
sd_counters() { # PID -> {"name":value,...} of its latest heartbeat
	"$GPUKMM_BIN/gpukmmctl" ipc call "$SD_CONTROL" gpukmm.Control.List '{}' --timeout-ms 2000 2>/dev/null |
		jq -c --argjson pid "$1" '[.services[]? | select(.pid == $pid) | .counters[]? | {(.name): (.value | tonumber)}] | add // {}'
}
sd_counter() { sd_counters "$1" | jq -r --arg n "$2" '.[$n] // 0'; }
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
