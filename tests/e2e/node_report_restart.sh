#!/bin/bash
# A node's report reaches its Node after the outages the chaos test mixes, each
# alone here: a node profile (real prober on a fake root + node-mode statusd,
# tests/lib/nodeprofile.sh) and a controller-mode statusd (no watcher: it leads)
# under the shipped RBAC.
#  1. The node statusd killed -9 while its newest report waits behind the previous
#     request (409: the controller is down). The restarted statusd holds no report
#     (memory only) and the prober's state is unchanged: the prober restates it
#     every interval, so the Node still ends up saying what the node runs.
#  2. The controller's DELETE of an applied request answered 409: the request is
#     still there. It is retried, not forgotten (the watch says nothing of an
#     unchanged object; a forgotten request would stay, and the node's creates
#     would meet it, 409, for good).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/nodeprofile.sh
. tests/lib/controller.sh
. tests/lib/metrics.sh
NS=intel-gpu-base-operator
D=$(mktemp -d "${TMPDIR:-/tmp}/gpukmm-nrr.XXXXXX") || exit 1
chmod 700 "$D"
FAILED=0 SDP=
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; FAILED=1; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else nok "$name"; fi; }
cleanup() {
	np_stop_all
	stop_pid "$SDP"
	kubesim_rbac_verdict "$NS" || FAILED=1
	kubesim_stop >/dev/null 2>&1
	san_check "$D"/*.log "$D"/np/*.log
	[ "$FAILED" = 0 ] || log_tails 40 "$D"/*.log "$D"/np/*.log
	rm -rf "$D"
}
trap cleanup EXIT

KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start --state-dir "$D/state" || { nok "kubesim starts"; exit 1; }
ctrl_cluster || { nok "the shipped RBAC and the ServiceAccounts' kubeconfigs"; exit 1; }
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-1","labels":{"kubernetes.io/arch":"amd64"}}}' >/dev/null
np_init "$D" "$D/node-kubeconfig" "$NS"
export NP_LOG_LEVEL=${NP_LOG_LEVEL:-info} # the node statusd's 409 is said at info
np_start gpu-1 6.8.0-45-generic || nok "the node profile starts"
sd_start() {
	"$GPUKMM_BIN/gpukmm-statusd" --mode controller --kubeconfig "$D/kubeconfig" --listen "ipc://$D/sd.sock" \
		--namespace "$NS" --log-level info >>"$D/statusd-ctrl.log" 2>&1 &
	SDP=$!
}
src() { kraw GET /api/v1/nodes/gpu-1 | jq -r '.metadata.labels["gpukmm.io/xe.source"] // "no label"'; }
src_is() { [ "$(src)" = "$1" ]; }
requests() { kraw GET "/apis/gpukmm.io/v1alpha1/namespaces/$NS/nodereportrequests" | jq -r '.items | length'; }
requests_are() { [ "$(requests)" = "$1" ]; }
node_log_says() { grep -qF -- "$1" "$NP_DIR/node-gpu-1.log"; }
prober_unchanged() {
	"$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$NP_DIR/gpu-1/run" --json --timeout-ms 2000 2>/dev/null |
		jq -r "$METRICS_FLAT"' [.services[]? | select(.name == "prober") | .metrics | flat] | add | .prober_reports_unchanged // 0'
}
node_statusd_pid() {
	local p
	for p in $(sup_child_pids "$NP_DIR/gpu-1/run"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = gpukmm-statusd ] && echo "$p"
	done
}

sd_start
check "the node's first report is applied (xe not loaded)" wait_until 30 src_is none
check "... and its request consumed" wait_until 30 requests_are 0

# ---- 1. the node statusd killed while its newest report waits ---------------------------
stop_pid "$SDP"; SDP=
check "the controller statusd stops (SIGTERM, exit $STOP_RC)" test "$STOP_RC" = 0
np_pin gpu-1 oot-idle # KMM loads xe
check "the node hands in its new report (xe loaded); it waits: no controller" wait_until 30 requests_are 1
np_pin gpu-1 oot-avail # ... and unloads it again
check "the next report meets the pending request (409) and waits" wait_until 30 node_log_says "still pending"
# the root's flip may be probed half-way (a report of its own): the kill comes once the
# prober's heartbeat shows two more probes that found nothing new
u0=$(prober_unchanged)
check "the prober's report settled (unchanged probes: $u0 -> 2 more)" wait_until 30 eval '[ "$(prober_unchanged)" -ge $((u0 + 2)) ]'
pid=$(node_statusd_pid)
check "the node statusd is found ($pid)" test -n "$pid"
kill -KILL $pid 2>/dev/null
check "the supervisor restarts the node statusd" wait_until 30 eval '[ -n "$(node_statusd_pid)" ] && [ "$(node_statusd_pid)" != "$pid" ]'
sd_start
# the controller applies the request that waited (xe loaded: the past), then the one
# the restarted node statusd hands in (not seen apart: the second may follow at once).
# The requests are read first: the controller writes the Node before it deletes one.
check "the Node ends up saying what the node runs now (xe not loaded), no request left" \
	wait_until 30 eval 'requests_are 0 && src_is none'
writes=$(grep -c "Node gpu-1: gpukmm.io labels and report written" "$D/statusd-ctrl.log")
check "... after the controller applied the request that waited (Node written 3 times: $writes)" test "$writes" = 3

# ---- 2. the controller's DELETE answered 409 -----------------------------------------------
faults() { kraw GET /kubesim/stats | jq -r '.faultsInjected // 0'; }
f0=$(faults)
kraw PUT /kubesim/faults '{"rules": [{"verb": "delete", "resource": "nodereportrequests", "rate": 1, "code": 409, "times": 2}]}' >/dev/null
np_pin gpu-1 oot-idle
check "a report applied while its request's DELETE answers 409 (twice)" wait_until 30 src_is oot
check "the request is deleted on a retry, not left behind" wait_until 30 requests_are 0
check "... after both 409s ($f0 -> $(faults) faults injected)" test "$(faults)" = $((f0 + 2))
kraw PUT /kubesim/faults '{"rules": []}' >/dev/null
np_pin gpu-1 oot-avail
check "the node's next report goes through (no 409 from a forgotten request)" wait_until 30 eval 'requests_are 0 && src_is none'

stop_pid "$SDP"; SDP=
check "the controller statusd exits 0 on SIGTERM" test "$STOP_RC" = 0
NP_CHECK=1 np_stop_all
exit $FAILED
