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
