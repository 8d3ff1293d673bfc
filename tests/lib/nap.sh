# nap SECONDS: sleeps without a process. A poll loop's `sleep 0.1` is a fork and an exec
# each round; many loops, several per script and two scripts at a time, spent more of the
# 2 cores than the services they wait on. read -t on a pipe that nobody writes (ours, opened
# read-write once per shell; a subshell inherits it) times out after SECONDS instead.
# Sourced by tests/lib/proc.sh and kubesim.sh.
nap() {
	local _
	if [ -z "${NAP_FD:-}" ] || ! { true >&"$NAP_FD"; } 2>/dev/null; then
		exec {NAP_FD}<> <(:)
	fi
	read -r -t "$1" -u "$NAP_FD" _
	return 0
}

# poll_nap MS START: the pause of a poll loop whose check began at START ($EPOCHREALTIME):
# MS milliseconds, or twice what the check took when that is longer (at most 1 s). A check
# that runs kubectl (about 0.12 s of CPU each) polled every 0.1 s kept a core half busy
# while the services it waited for shared the other; now a loop spends at most a third of
# its time checking, and a cheap check is polled as often as before.
poll_nap() {
	local now=${EPOCHREALTIME//[!0-9]/} t0=${2//[!0-9]/} us=$(($1 * 1000)) s
	local took=$(((now - t0) * 2))
	[ "$took" -gt "$us" ] && us=$took
	[ "$us" -gt 1000000 ] && us=1000000
	printf -v s '%d.%06d' $((us / 1000000)) $((us % 1000000))
	nap "$s"
}

# read_line FD SECONDS VAR: the next whole line of FD in VAR, waiting at most SECONDS.
# Returns 0 (a line), 2 (none whole yet) or 1 (end of input; a last line without its
# newline is dropped: a stream cut there). bash's `read -t` returns what it had read of a
# line when its time is up, and the rest comes with the next read as a line of its own:
# a loop that reads a stream with a timeout split the lines the timeout cut. Here that
# part is kept (per FD) and put in front of the rest.
declare -gA READ_LINE_PART=()
read_line() {
	local _l _rc
	IFS= read -r -t "$2" -u "$1" _l
	_rc=$?
	if [ "$_rc" = 0 ]; then
		printf -v "$3" '%s' "${READ_LINE_PART[$1]:-}$_l"
		READ_LINE_PART[$1]=
		return 0
	fi
	if [ "$_rc" -gt 128 ]; then
		READ_LINE_PART[$1]+=$_l
		return 2
	fi
	READ_LINE_PART[$1]=
	return 1
}
