#!/bin/bash
# Configuration errors end before anything starts, or in one service, never in
# a restart storm (issue #17):
#   - `gpukmm --check` (and a real start) with a webhook certificate that does not
#     exist, a key of another certificate, a kubeconfig that does not exist or a
#     $KUBECONFIG list naming a missing CA: exit 2 naming the file;
#   - a service that exits 2 (a usage error) is started once, reported "failed"
#     with the reason, and the healthy service next to it keeps running;
#   - services without "credentials" see no KUBECONFIG, no token path, no cloud
#     credential variable, and HOME=/nonexistent; services with them get the list.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/proc.sh
BIN=$GPUKMM_BIN
TBIN=${GPUKMM_TBIN:-$GPUKMM_SRC/build/tests/bin}
D=$(mktemp -d "${TMPDIR:-/tmp}/supconf.XXXXXX") || exit 1
SPID=
FAILED=0
cleanup() { stop_pid "$SPID" 10; rm -rf "$D"; }
trap cleanup EXIT
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; FAILED=1; [ -n "${2:-}" ] && sed 's/^/#   /' "$2" | tail -n 20; }
expect2() { # NAME WANT ARGS...: gpukmm ARGS exits 2 and says WANT
	local name=$1 want=$2
	shift 2
	"$BIN/gpukmm" "$@" >"$D/out" 2>&1
	local rc=$?
	if [ $rc = 2 ] && grep -qF -- "$want" "$D/out"; then ok "$name"; else notok "$name (rc $rc)" "$D/out"; fi
}

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/k1" -out "$D/c1" -days 1 -subj /CN=a 2>/dev/null &&
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/k2" -out "$D/c2" -days 1 -subj /CN=b 2>/dev/null ||
	{ echo "not ok - openssl"; exit 1; }
printf 'apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\ncontexts: [{name: a, context: {cluster: c}}]\n' >"$D/kc"
printf 'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://h", certificate-authority: no-ca.crt}}]\n' >"$D/kc-noca"

# ---- --check and start: every file an option names ------------------------------------
expect2 "--check: a webhook certificate that does not exist is exit 2, naming it" \
	"--webhook-tls-cert $D/missing.crt: No such file" \
	--profile controller --check --kubeconfig "$D/kc" --webhook-tls-cert "$D/missing.crt" --webhook-tls-key "$D/k1"
expect2 "--check: a key of another certificate is exit 2" "$D/k2 does not match the certificate in $D/c1" \
	--profile controller --check --kubeconfig "$D/kc" --webhook-tls-cert "$D/c1" --webhook-tls-key "$D/k2"
expect2 "--check: a kubeconfig that does not exist is exit 2, naming it" "$D/nokc" \
	--profile controller --check --kubeconfig "$D/nokc"
KUBECONFIG="$D/kc-noca:$D/kc" expect2 "--check: \$KUBECONFIG naming a missing CA is exit 2, naming it" "$D/no-ca.crt" \
	--profile controller --check
expect2 "start (not --check): a missing certificate is exit 2 before anything starts" "$D/missing.crt" \
	--profile controller --runtime-dir "$D/run0" --kubeconfig "$D/kc" \
	--webhook-tls-cert "$D/missing.crt" --webhook-tls-key "$D/k1"
[ -e "$D/run0" ] && notok "nothing was started (no runtime dir)" || ok "nothing was started (no runtime dir)"
"$BIN/gpukmm" --profile controller --check --kubeconfig "$D/kc" --webhook-tls-cert "$D/c1" --webhook-tls-key "$D/k1" \
	>"$D/out" 2>&1 && grep -q '^webhook ' "$D/out" && ok "--check: good files, exit 0, the webhook in the table" ||
	notok "--check: good files, exit 0" "$D/out"

# ---- a usage error is not restarted; what services without credentials see --------------
cat >"$D/conf.json" <<J
{"intensity": {"max_restarts": 3, "window_ms": 60000}, "services": [
  {"name": "good", "binary": "$TBIN/sup_testsvc", "args": ["--mode", "ready"], "credentials": true},
  {"name": "bad", "binary": "$TBIN/sup_testsvc", "args": ["--no-such-flag"], "backoff": {"initial_ms": 10, "max_ms": 10}},
  {"name": "plain", "binary": "/bin/sh", "args": ["-c", "env > $D/plain.env; exec sleep 600"],
   "ready": {"required": false}},
  {"name": "cred", "binary": "/bin/sh", "args": ["-c", "env > $D/cred.env; exec sleep 600"],
   "ready": {"required": false}, "credentials": true}
]}
J
mkdir -p "$D/home/.kube" && cp "$D/kc" "$D/home/.kube/config"
HOME=$D/home KUBECONFIG="$D/kc:$D/kc-noca" AWS_SECRET_ACCESS_KEY=secret GOOGLE_APPLICATION_CREDENTIALS=/g \
	GPUKMM_LOG_LEVEL=info "$BIN/gpukmm" --config "$D/conf.json" --runtime-dir "$D/run" --token-file "$D/c1" \
	>"$D/sup.log" 2>&1 &
SPID=$!
failed_once() { grep -q 'service bad: exited with code 2, a usage or configuration error: not restarted' "$D/sup.log"; }
wait_until 20 failed_once && ok "exit 2: reported as a usage error, not restarted" ||
	notok "exit 2: reported as a usage error" "$D/sup.log"
wait_until 20 grep -q 'service good: ready' "$D/sup.log" && ok "the healthy service is ready" ||
	notok "the healthy service is ready" "$D/sup.log"
"$BIN/gpukmmctl" status --runtime-dir "$D/run" --json >"$D/status.json" 2>"$D/status.err"
jq -e '.services[] | select(.name == "bad") | .state == "failed" and .restarts == 0 and .last_exit_code == 2' \
	"$D/status.json" >/dev/null && ok "service table: bad is failed, exit code 2, 0 restarts" ||
	notok "service table: bad is failed, exit code 2, 0 restarts" "$D/status.json"
n=$(grep -c 'service bad: started' "$D/sup.log")
[ "$n" = 1 ] && ok "started once ($n)" || notok "started once ($n)" "$D/sup.log"
kill -0 "$SPID" 2>/dev/null && ok "the supervisor keeps running (no escalation)" || notok "the supervisor keeps running" "$D/sup.log"
wait_until 10 test -s "$D/plain.env" && wait_until 10 test -s "$D/cred.env"
if grep -q '^HOME=/nonexistent$' "$D/plain.env" && ! grep -qE '^(KUBECONFIG|GPUKMM_TOKEN_FILE|AWS_|GOOGLE_)' "$D/plain.env"; then
	ok "no credentials: HOME=/nonexistent, no KUBECONFIG, token path or cloud credentials"
else
	notok "no credentials: HOME=/nonexistent, no KUBECONFIG, token path or cloud credentials" "$D/plain.env"
fi
if grep -qx "KUBECONFIG=$D/kc:$D/kc-noca" "$D/cred.env" && grep -qx "GPUKMM_TOKEN_FILE=$D/c1" "$D/cred.env" &&
	grep -qx "HOME=$D/home" "$D/cred.env"; then
	ok "credentials: the \$KUBECONFIG list, the token file, HOME"
else
	notok "credentials: the \$KUBECONFIG list, the token file, HOME" "$D/cred.env"
fi
stop_pid "$SPID" 10
SPID=
exit $FAILED
