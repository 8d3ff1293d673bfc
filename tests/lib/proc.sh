# Process helpers for the test libraries (controller.sh, nodeprofile.sh, modmgr.sh and
# those sourced after it) and the scripts:
#   stop_pid PID [SECONDS]     SIGTERM, SIGKILL after SECONDS (default 30); STOP_RC = exit code
#   stop_var VAR [SIG]         send SIG (default TERM) to the pid held in variable VAR, wait
#                              for it and empty VAR; returns its exit code (0: VAR was empty)
#   wait_until SECONDS CMD...  poll CMD every 0.2 s until it succeeds (1 on timeout)
#   san_check FILE...          when any FILE (a process log) holds a sanitizer report: a
#                              "not ok" line and the reports as comments, returns 1
#   log_tails N FILE...        the last N lines of each FILE, as comments
#   ok NAME / notok NAME       a TAP-ish line; notok also sets FAILED=1 (the script exits $FAILED)
#   checkf NAME CMD...         ok or notok by CMD's exit status (its output discarded)
#   watcher_has SOCKET TOPIC NS NAME   the gpukmm-watcher serving SOCKET (ipc:// URL) has the object
#                              (what a test waits for before a change that must be seen after it:
#                              the watcher publishes in the order it saw)
#   nap SECONDS                a sleep without a process (tests/lib/nap.sh)
. "${GPUKMM_SRC:-.}/tests/lib/nap.sh"
STOP_RC=0
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; FAILED=1; }
checkf() { local n=$1; shift; if "$@" >/dev/null 2>&1; then ok "$n"; else notok "$n"; fi; }
stop_pid() {
	# (30 s: a supervisor stops its services one by one, up to 5 s each, then
	# SIGKILLs and says so in its exit code — its verdict is what we check)
	local p=$1 n=$((${2:-30} * 10)) i
	STOP_RC=0
	[ -n "$p" ] || return 0
	kill -TERM "$p" 2>/dev/null
	for i in $(seq 1 "$n"); do kill -0 "$p" 2>/dev/null || break; nap 0.1; done
	kill -KILL "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	STOP_RC=$?
}
stop_var() {
	local p=${!1:-} rc
	[ -n "$p" ] || return 0
	kill "-${2:-TERM}" "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	rc=$?
	printf -v "$1" ''
	return $rc
}
wait_until() {
	local end=$((SECONDS + $1)) t0=$EPOCHREALTIME; shift
	until "$@"; do [ $SECONDS -ge $end ] && return 1; poll_nap 200 "$t0"; t0=$EPOCHREALTIME; done
}
san_check() {
	grep -qE 'Sanitizer|runtime error' "$@" 2>/dev/null || return 0
	echo "not ok - no sanitizer report in any process log"
	grep -h -B2 -A20 -E 'Sanitizer|runtime error' "$@" 2>/dev/null | head -80 | sed 's/^/#   /'
	return 1
}
log_tails() {
	local n=$1 f
	shift
	for f in "$@"; do
		[ -f "$f" ] || continue
		echo "# ---- $f (last $n lines)"
		tail -"$n" "$f" | sed 's/^/#   /'
	done
}
watcher_has() {
	"$GPUKMM_BIN/gpukmmctl" ipc call "$1" gpukmm.Watcher.Get \
		"{\"topic\":\"$2\",\"namespace\":\"$3\",\"name\":\"$4\"}" --timeout-ms 2000 >/dev/null 2>&1
}
