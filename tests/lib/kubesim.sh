# Shell helpers for tests that need a Kubernetes API server: source this file.
#
#   . "$GPUKMM_SRC/tests/lib/kubesim.sh"
#   kubesim_start [extra kubesim flags...]   # temp dir, ephemeral port, waits for the ready line
#                                            # ($KUBESIM_FLAGS: flags for every start of a script)
#   k get nodes                              # real kubectl against it (KUBECONFIG=/dev/null)
#   kraw GET /api/v1/nodes                   # curl against it (prints the body)
#   kubesim_stop                             # SIGTERM, waits, removes the temp dir
#   wait_for 10 kubesim_settled "$(kubesim_rv)"  # kubesim's controllers caught up
#
# Exports KUBESIM_URL (http://127.0.0.1:PORT), KUBESIM_PORT, KUBESIM_PID, KUBESIM_DIR
# (temp dir: kubesim.log, kubectl cache). kubesim_start installs an EXIT trap that
# stops kubesim unless the caller set KUBESIM_NO_TRAP=1 (then call kubesim_stop).
# Functions return non-zero on failure; they never exit the caller.
# KUBESIM_CLIENTS+=(PID): a process the script started against kubesim; kubesim_stop
# SIGKILLs those still running first (a script that judges how one stops does that before).
#   kubesim_kubeconfig FILE [TOKEN]          a kubeconfig for it (context sim, the token if given)
# A script run by hand from the source tree (not by tests/run.sh, which exports them)
# gets GPUKMM_SRC, GPUKMM_BIN and GPUKMM_TBIN defaulted here, below $BUILD (build).

: "${BUILD:=build}" "${GPUKMM_SRC:=$PWD}" "${GPUKMM_BIN:=$GPUKMM_SRC/$BUILD/bin}" "${GPUKMM_TBIN:=$GPUKMM_SRC/$BUILD/tests/bin}"
export GPUKMM_SRC GPUKMM_BIN GPUKMM_TBIN
KUBESIM_BIN=${KUBESIM_BIN:-$GPUKMM_BIN/kubesim}
KUBECTL=${KUBECTL:-kubectl}
KUBESIM_CLIENTS=()

kubesim_start() {
	KUBESIM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/kubesim.XXXXXX") || return 1
	mkfifo "$KUBESIM_DIR/ready" || return 1
	"$KUBESIM_BIN" --listen 127.0.0.1:0 ${KUBESIM_FLAGS:-} "$@" >"$KUBESIM_DIR/ready" 2>"$KUBESIM_DIR/kubesim.log" &
	KUBESIM_PID=$!
	local line=""
	if ! read -r -t 20 line <"$KUBESIM_DIR/ready"; then
		echo "# kubesim did not start; log:" >&2
		sed 's/^/#   /' "$KUBESIM_DIR/kubesim.log" >&2
		kill "$KUBESIM_PID" 2>/dev/null
		wait "$KUBESIM_PID" 2>/dev/null
		return 1
	fi
	case $line in
	"kubesim: listening on "*) KUBESIM_URL=${line#kubesim: listening on } ;;
	*) echo "# kubesim: unexpected ready line: $line" >&2; return 1 ;;
	esac
	KUBESIM_PORT=${KUBESIM_URL##*:}
	export KUBESIM_URL KUBESIM_PORT KUBESIM_PID KUBESIM_DIR
	if [ -z "${KUBESIM_NO_TRAP:-}" ]; then
		trap 'kubesim_stop' EXIT
	fi
	return 0
}

# Stops kubesim (SIGTERM, then SIGKILL after 10 s) and removes its temp dir unless
# KUBESIM_KEEP=1. Returns kubesim's exit status.
kubesim_stop() {
	local rc=0 p
	for p in "${KUBESIM_CLIENTS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	KUBESIM_CLIENTS=()
	if [ -n "${KUBESIM_PID:-}" ]; then
		kill -TERM "$KUBESIM_PID" 2>/dev/null
		local i
		for i in $(seq 1 100); do
			kill -0 "$KUBESIM_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$KUBESIM_PID" 2>/dev/null
		wait "$KUBESIM_PID" 2>/dev/null
		rc=$?
		KUBESIM_PID=
	fi
	if [ -n "${KUBESIM_DIR:-}" ] && [ -z "${KUBESIM_KEEP:-}" ]; then
		rm -rf "$KUBESIM_DIR"
		KUBESIM_DIR=
	fi
	return $rc
}

kubesim_kubeconfig() { # FILE [TOKEN]
	local user={}
	[ -n "${2:-}" ] && user="{token: $2}"
	printf '%s\n' "apiVersion: v1" "kind: Config" "clusters: [{name: sim, cluster: {server: \"$KUBESIM_URL\"}}]" \
		"users: [{name: u, user: $user}]" "contexts: [{name: sim, context: {cluster: sim, user: u}}]" \
		"current-context: sim" >"$1"
}

# Script tests that drive kubectl: `kubesim_need_kubectl || exit 0` prints the skip
# lines and returns 1 when kubectl is not installed.
kubesim_need_kubectl() {
	command -v "$KUBECTL" >/dev/null 2>&1 && return 0
	echo "skip - kubectl not installed"
	echo "ok - kubectl absent (nothing to check)"
	return 1
}

# kubectl against kubesim; extra global flags via KUBECTL_FLAGS (e.g. a token).
k() {
	KUBECONFIG=/dev/null "$KUBECTL" --server "$KUBESIM_URL" --cache-dir "$KUBESIM_DIR/kcache" \
		${KUBECTL_FLAGS:-} "$@"
}

# kraw METHOD PATH [BODY [CONTENT-TYPE]]: raw request, prints the body; the HTTP code
# goes to $KRAW_CODE_FILE (default $KUBESIM_DIR/code) and is echoed by kraw_code.
kraw() {
	local method=$1 path=$2 body=${3:-} ctype=${4:-application/json}
	local args=(-sS -X "$method" -o - -w '%{stderr}%{http_code}' ${KRAW_FLAGS:-})
	[ -n "$body" ] && args+=(-H "Content-Type: $ctype" --data-binary "$body")
	curl "${args[@]}" "$KUBESIM_URL$path" 2>"$KUBESIM_DIR/code"
}
kraw_code() { cat "$KUBESIM_DIR/code"; }

# kubesim_settled [RV]: kubesim's controllers have handled every change up to RV
# (default: the server's resourceVersion now) and have no write pending; for
# checking that a change made nothing happen: `wait_for 10 kubesim_settled $rv`.
kubesim_rv() { kraw GET /api/v1/namespaces?limit=1 | jq -r .metadata.resourceVersion; }
kubesim_settled() {
	local rv=${1:-$(kubesim_rv)}
	kraw GET /kubesim/stats | jq -e --argjson rv "$rv" '.controllers.seen >= $rv and (.controllers.busy | not)' >/dev/null
}

# wait_for SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	while [ $SECONDS -lt $deadline ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	"$@" >/dev/null 2>&1
}

# TAP-ish helper: check NAME COMMAND... runs COMMAND (stdout discarded, stderr kept
# for the log) and prints "ok - NAME" or "not ok - NAME".
check() {
	local name=$1
	shift
	if "$@" >/dev/null; then
		echo "ok - $name"
	else
		echo "not ok - $name"
	fi
}
