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
#
# RBAC: with KUBESIM_RBAC=1 (or --rbac among the flags) kubesim authorizes every
# request by the stored Roles/ClusterRoles and bindings (tools/kubesim/authz.c) and
# serves HTTPS (kubectl sends a bearer token over TLS only): a fresh CA and serving
# certificate in $KUBESIM_DIR ($KUBESIM_CA), and an admin token (group
# system:masters) in $KUBESIM_ADMIN_TOKEN that k, kraw and kcurl send unless told
# otherwise (KUBECTL_FLAGS="--token T", KRAW_TOKEN=T; KRAW_TOKEN= sends none).
#   kubesim_rbac_apply [NS]                  the shipped deploy/rbac, its operator
#                                            namespace renamed to NS (created if absent)
#   kubesim_sa_token NS NAME                 a token of that ServiceAccount (TokenRequest)
#   kubesim_sa_kubeconfig FILE NS NAME       a kubeconfig with it (without RBAC: any token)
#   kubesim_admin_kubeconfig FILE            one with the admin token
# $KUBESIM_ARGS: the flags kubesim was started with (a restart passes them again).
#   kcurl ARGS...                            curl with the CA and the admin token
#   kwatch FIFO PATH                         a watch streamed into FIFO (curl's pid: KWATCH_PID)
#   kubesim_denials [USER-REGEX]             the 403s kubesim answered (to that user), one per line
#   kubesim_kubeconfigs DIR NS               DIR/{kubeconfig,node-kubeconfig,kmm-kubeconfig}
#   kubesim_rbac_verdict NS [EXPECTED]       ok/not ok: none of NS's ServiceAccounts was refused
# A script run by hand from the source tree (not by tests/run.sh, which exports them)
# gets GPUKMM_SRC, GPUKMM_BIN and GPUKMM_TBIN defaulted here, below $BUILD (build).

: "${BUILD:=build}" "${GPUKMM_SRC:=$PWD}" "${GPUKMM_BIN:=$GPUKMM_SRC/$BUILD/bin}" "${GPUKMM_TBIN:=$GPUKMM_SRC/$BUILD/tests/bin}"
export GPUKMM_SRC GPUKMM_BIN GPUKMM_TBIN
case ":$PATH:" in *":$GPUKMM_SRC/tests/bin:"*) ;; *) PATH="$GPUKMM_SRC/tests/bin:$PATH" ;; esac # jq -e failing on no output (tests/bin/jq)
. "$GPUKMM_SRC/tests/lib/nap.sh" # nap SECONDS: a sleep without a process
KUBESIM_BIN=${KUBESIM_BIN:-$GPUKMM_BIN/kubesim}
KUBECTL=${KUBECTL:-kubectl}
KUBESIM_CLIENTS=()

# A CA and a serving certificate for 127.0.0.1 in DIR (ca.crt, tls.crt, tls.key).
kubesim_tls_certs() { # DIR
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=kubesim-ca \
		-keyout "$1/ca.key" -out "$1/ca.crt" 2>/dev/null &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
			-keyout "$1/tls.key" -out "$1/tls.csr" 2>/dev/null &&
		printf 'subjectAltName=IP:127.0.0.1\n' >"$1/tls.ext" &&
		openssl x509 -req -in "$1/tls.csr" -CA "$1/ca.crt" -CAkey "$1/ca.key" -CAcreateserial -days 2 \
			-extfile "$1/tls.ext" -out "$1/tls.crt" 2>/dev/null
}

kubesim_start() {
	KUBESIM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/kubesim.XXXXXX") || return 1
	mkfifo "$KUBESIM_DIR/ready" || return 1
	local a extra=() rbac=${KUBESIM_RBAC:-}
	for a in "$@"; do [ "$a" = --rbac ] && rbac=1; done
	KUBESIM_CA= KUBESIM_ADMIN_TOKEN=
	if [ "$rbac" = 1 ]; then
		kubesim_tls_certs "$KUBESIM_DIR" || { echo "# kubesim: no test certificates (openssl)" >&2; return 1; }
		KUBESIM_CA=$KUBESIM_DIR/ca.crt KUBESIM_ADMIN_TOKEN=admin-$RANDOM$RANDOM$RANDOM
		echo "$KUBESIM_ADMIN_TOKEN" >"$KUBESIM_DIR/admin-token"
		extra=(--tls-cert "$KUBESIM_DIR/tls.crt" --tls-key "$KUBESIM_DIR/tls.key" --token-file "$KUBESIM_DIR/admin-token")
		case " $* " in *" --rbac "*) ;; *) extra+=(--rbac) ;; esac
	fi
	export KUBESIM_CA KUBESIM_ADMIN_TOKEN
	# shellcheck disable=SC2206 # KUBESIM_FLAGS: words
	KUBESIM_ARGS=("${extra[@]}" ${KUBESIM_FLAGS:-} "$@") # what a script restarting kubesim passes again
	"$KUBESIM_BIN" --listen 127.0.0.1:0 "${KUBESIM_ARGS[@]}" >"$KUBESIM_DIR/ready" 2>"$KUBESIM_DIR/kubesim.log" &
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
			nap 0.1
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
	local user={} ca=
	[ -n "${2:-}" ] && user="{token: $2}"
	[ -n "${KUBESIM_CA:-}" ] && ca=", certificate-authority: \"$KUBESIM_CA\""
	printf '%s\n' "apiVersion: v1" "kind: Config" "clusters: [{name: sim, cluster: {server: \"$KUBESIM_URL\"$ca}}]" \
		"users: [{name: u, user: $user}]" "contexts: [{name: sim, context: {cluster: sim, user: u}}]" \
		"current-context: sim" >"$1"
}

# curl against kubesim with its CA and (unless KRAW_TOKEN says otherwise) the admin token.
kcurl() {
	local tok=${KRAW_TOKEN-${KUBESIM_ADMIN_TOKEN:-}} args=()
	[ -n "${KUBESIM_CA:-}" ] && args+=(--cacert "$KUBESIM_CA")
	[ -n "$tok" ] && args+=(-H "Authorization: Bearer $tok")
	curl "${args[@]}" "$@"
}

# kwatch FIFO PATH: a watch of kubesim (PATH with ?watch=1...) streamed by curl into FIFO
# (made anew), with kcurl's CA and token; curl's own pid in KWATCH_PID (to kill it). The
# script's follower and sampler read their watch of the Nodes this way.
kwatch() {
	local tok=${KRAW_TOKEN-${KUBESIM_ADMIN_TOKEN:-}}
	rm -f "$1" && mkfifo "$1" || return 1
	curl -sN ${KUBESIM_CA:+--cacert "$KUBESIM_CA"} ${tok:+-H "Authorization: Bearer $tok"} \
		"${KUBESIM_URL:?kubesim not running}$2" >"$1" 2>/dev/null &
	KWATCH_PID=$!
}

# A kubeconfig for ServiceAccount NS/NAME: its token under RBAC, else just a token.
kubesim_sa_kubeconfig() { # FILE NS NAME
	local t=$3
	if [ -n "${KUBESIM_ADMIN_TOKEN:-}" ]; then t=$(kubesim_sa_token "$2" "$3") || return 1; fi
	kubesim_kubeconfig "$1" "$t"
}
# The admin's kubeconfig (for what stands in for other operators: fake-kmm).
kubesim_admin_kubeconfig() { kubesim_kubeconfig "$1" "${KUBESIM_ADMIN_TOKEN:-admin}"; }

kubesim_sa_token() { # NS NAME: a day-long token of that ServiceAccount
	kcurl -sS -X POST -H 'Content-Type: application/json' \
		--data '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":86400}}' \
		"$KUBESIM_URL/api/v1/namespaces/$1/serviceaccounts/$2/token" | jq -re '.status.token'
}

# What the kubelet gives a DaemonSet pod on NODE: a Pod object bound to the node
# (NAME, ServiceAccount SA, both created when missing) and a token of it for the
# audience AUD in FILE (the node profile's report token: kubesim names the node in
# it as authentication.kubernetes.io/node-name).
kubesim_pod_token() { # NS SA NODE NAME AUD FILE (each write retried: kraw_until)
	kraw_until "201 409" POST "/api/v1/namespaces/$1/serviceaccounts" \
		"{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{\"name\":\"$2\"}}" >/dev/null &&
	kraw_until "201 409" POST "/api/v1/namespaces/$1/pods" "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$4\"},
		\"spec\":{\"nodeName\":\"$3\",\"serviceAccountName\":\"$2\",\"containers\":[{\"name\":\"c\",\"image\":\"gpukmm\"}]}}" >/dev/null &&
	kraw_until 201 POST "/api/v1/namespaces/$1/serviceaccounts/$2/token" "{\"apiVersion\":\"authentication.k8s.io/v1\",
		\"kind\":\"TokenRequest\",\"spec\":{\"audiences\":[\"$5\"],\"expirationSeconds\":86400,
		\"boundObjectRef\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"$4\"}}}" | jq -re '.status.token' >"$6.new" &&
		mv "$6.new" "$6"
}

kubesim_rbac_apply() { # [NS]: deploy/rbac as shipped, the operator namespace renamed to NS
	local ns=${1:-intel-gpu-base-operator}
	k get ns "$ns" >/dev/null 2>&1 || k create ns "$ns" >/dev/null || return 1
	"$KUBECTL" kustomize "$GPUKMM_SRC/deploy/rbac" | sed "s/intel-gpu-base-operator/$ns/g" | k apply -f - >/dev/null
}

kubesim_denials() { # [USER-REGEX]
	kcurl -s "$KUBESIM_URL/kubesim/rbac" | jq -r --arg u "${1:-.}" '.denials[]? | select(test("User \"" + $u))'
}

# The ServiceAccounts' kubeconfigs of a test cluster in DIR: kubeconfig (gpukmm-controller),
# node-kubeconfig (gpukmm-node), kmm-kubeconfig (the admin: fake-kmm stands in for KMM);
# under RBAC the shipped deploy/rbac is applied first (operator namespace NS).
kubesim_kubeconfigs() { # DIR NS
	{ [ -z "${KUBESIM_ADMIN_TOKEN:-}" ] || kubesim_rbac_apply "$2"; } &&
		kubesim_sa_kubeconfig "$1/kubeconfig" "$2" gpukmm-controller &&
		kubesim_sa_kubeconfig "$1/node-kubeconfig" "$2" gpukmm-node &&
		kubesim_admin_kubeconfig "$1/kmm-kubeconfig"
}

# Under RBAC: "ok"/"not ok" that no API call of NS's ServiceAccounts was refused (a
# verb missing from deploy/rbac shows up here), but those matching EXPECTED (a regex of
# the denials a script provoked on purpose); the refusals as comments. 1 when some were.
kubesim_rbac_verdict() { # NS [EXPECTED]
	[ -n "${KUBESIM_ADMIN_TOKEN:-}" ] && [ -n "${KUBESIM_PID:-}" ] || return 0
	local d
	d=$(kubesim_denials "system:serviceaccount:$1:" | grep -Ev "${2:-^\$}")
	if [ -z "$d" ]; then
		echo "ok - RBAC: no API call of the services was refused"
		return 0
	fi
	echo "not ok - RBAC: no API call of the services was refused"
	sed 's/^/#   /' <<<"$d"
	return 1
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
	KUBECONFIG=/dev/null "$KUBECTL" --server "${KUBESIM_URL:?kubesim not running}" \
		--cache-dir "${KUBESIM_DIR:?kubesim not running}/kcache" \
		${KUBESIM_CA:+--certificate-authority "$KUBESIM_CA"} ${KUBESIM_ADMIN_TOKEN:+--token "$KUBESIM_ADMIN_TOKEN"} \
		${KUBECTL_FLAGS:-} "$@"
}

# kraw METHOD PATH [BODY [CONTENT-TYPE]]: raw request, prints the body; the HTTP code
# goes to $KUBESIM_DIR/code and is echoed by kraw_code (000: no response). Both (and k)
# fail loudly when kubesim is not running (no KUBESIM_DIR: a path at the filesystem root
# otherwise). The request is made by kreq ($GPUKMM_TBIN, tests/bin/kreq.c: a third to a half of
# curl's CPU, and the polls make thousands), or by curl with $KRAW_FLAGS (curl's flags).
kraw() {
	local method=$1 path=$2 body=${3:-} ctype=${4:-application/json}
	local url=${KUBESIM_URL:?kubesim not running}$path code=${KUBESIM_DIR:?kubesim not running}/code
	local args=(-X "$method")
	[ -n "$body" ] && args+=(-H "Content-Type: $ctype" --data-binary "$body")
	if [ -n "${KRAW_FLAGS:-}" ]; then
		# shellcheck disable=SC2086 # KRAW_FLAGS: words
		kcurl -sS -o - -w '%{stderr}%{http_code}' "${args[@]}" $KRAW_FLAGS "$url" 2>"$code"
		return
	fi
	[ -n "${KUBESIM_CA:-}" ] && args+=(--cacert "$KUBESIM_CA")
	KREQ_BEARER=${KRAW_TOKEN-${KUBESIM_ADMIN_TOKEN:-}} "$GPUKMM_TBIN/kreq" "${args[@]}" "$url" 2>"$code"
}
kraw_code() { cat "${KUBESIM_DIR:?kubesim not running}/code"; }
kraw_is() { # "CODES" METHOD PATH ...: one kraw, its code one of CODES (its body in KRAW_OUT)
	local codes=" $1 "
	shift
	KRAW_OUT=$(kraw "$@")
	[[ $codes == *" $(kraw_code | tail -c 3) "* ]]
}
# kraw_until "CODES" METHOD PATH [BODY [CONTENT-TYPE]]: kraw_is again (wait_until of
# tests/lib/proc.sh, for up to KRAW_UNTIL_S, default 20 s) until the HTTP code is one of
# CODES: the test's own setup writes as a user would retry them, while faults are
# injected or kubesim restarts (the code of a refused connection is 000). Prints the
# last body.
kraw_until() {
	local rc=0
	wait_until "${KRAW_UNTIL_S:-20}" kraw_is "$@" || rc=1
	printf '%s' "$KRAW_OUT"
	return $rc
}

# kubesim_settled [RV]: kubesim's controllers have handled every change up to RV
# (default: the server's resourceVersion now) and have no write pending; for
# checking that a change made nothing happen: `wait_for 10 kubesim_settled $rv`.
kubesim_rv() { kraw GET /api/v1/namespaces?limit=1 | jq -r .metadata.resourceVersion; }
kubesim_settled() {
	local rv=${1:-$(kubesim_rv)}
	kraw GET /kubesim/stats | jq -e --argjson rv "$rv" '.controllers.seen >= $rv and (.controllers.busy | not)' >/dev/null
}

# budgeted_rs NS NAME REPLICAS BUDGET: a ReplicaSet NAME of REPLICAS pods (label app=NAME, image
# NAME) and a PodDisruptionBudget NAME over them (BUDGET: its rule, e.g. "minAvailable: 1");
# prints the ReplicaSet's uid. kubectl's own output goes to stderr.
budgeted_rs() {
	k apply -f - >&2 <<Y || return 1
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: $2, namespace: $1}
spec:
  replicas: $3
  selector: {matchLabels: {app: $2}}
  template:
    metadata: {labels: {app: $2}}
    spec: {containers: [{name: c, image: $2}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: $2, namespace: $1}
spec: {$4, selector: {matchLabels: {app: $2}}}
Y
	k get rs -n "$1" "$2" -o jsonpath='{.metadata.uid}'
}

# in_shell STRING: STRING evaluated in a subshell of the calling script, which sees its
# functions (kraw, kcurl ...) and variables. `bash -c` sees neither: a check written as
# `bash -c "kraw ... | jq -e ..."` ran nothing and, with jq 1.6, passed on the empty output.
in_shell() { (eval "$1"); }

# wait_for SECONDS COMMAND...: polls COMMAND every 0.1 s (or twice as long as it took: poll_nap)
# until it succeeds.
wait_for() {
	local deadline=$((SECONDS + $1)) t0
	shift
	while [ $SECONDS -lt $deadline ]; do
		t0=$EPOCHREALTIME
		"$@" >/dev/null 2>&1 && return 0
		poll_nap 100 "$t0"
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

# claim_alloc NS NAME [VERSION]: a GPU ResourceClaim, allocated (what the scheduler does).
claim_alloc() {
	local v=${3:-v1} req="{\"name\":\"gpu\",\"deviceClassName\":\"gpu.intel.com\"}"
	case $v in v1beta2 | v1) req="{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"gpu.intel.com\"}}" ;; esac
	kraw POST "/apis/resource.k8s.io/$v/namespaces/$1/resourceclaims" \
		"{\"apiVersion\":\"resource.k8s.io/$v\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"$2\",\"namespace\":\"$1\"},\"spec\":{\"devices\":{\"requests\":[$req]}}}" >/dev/null &&
		kraw PATCH "/apis/resource.k8s.io/$v/namespaces/$1/resourceclaims/$2/status" \
			'{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.intel.com","pool":"gpu-1","device":"gpu-0"}]}}}}' \
			application/merge-patch+json >/dev/null
}
