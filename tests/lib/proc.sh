# Process helpers shared by tests/lib/controller.sh and tests/lib/nodeprofile.sh.
#   stop_pid PID [SECONDS]     SIGTERM, SIGKILL after SECONDS (default 30); STOP_RC = exit code
#   wait_until SECONDS CMD...  poll CMD every 0.2 s until it succeeds (1 on timeout)
STOP_RC=0
stop_pid() {
	# (30 s: a supervisor stops its services one by one, up to 5 s each, then
	# SIGKILLs and says so in its exit code — its verdict is what we check)
	local p=$1 n=$((${2:-30} * 10)) i
	STOP_RC=0
	[ -n "$p" ] || return 0
	kill -TERM "$p" 2>/dev/null
	for i in $(seq 1 "$n"); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	STOP_RC=$?
}
wait_until() {
	local end=$((SECONDS + $1)); shift
	until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done
}
