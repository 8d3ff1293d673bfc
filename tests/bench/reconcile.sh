#!/bin/bash
# Reconcile latency and API efficiency of gpukmm-modmgr (DESIGN §8 benchmarks).
# One run, side by side on the same kubesim:
#   e2e      ClusterPolicy spec change → watcher → bus → modmgr → Module patch
#   baseline the same lib/policy + lib/kube work in one process, no IPC
# each measured two ways:
#   isolated      each change written BENCH_GAP_MS (default 5) ms after the
#                 previous one was seen: the latency of one change, what the
#                 target is about (e2e/baseline ≤ 1.5, e2e p99 < 20 ms)
#   back to back  each change written as soon as the previous one was seen, so
#                 it overlaps the previous change's tail (modmgr's status report
#                 and Event bookkeeping, the watch echo of its own patch)
# Also writes per change (target 1), writes caused by a no-op resync (a modmgr
# restart; target 0), and, in a separate shorter isolated run that also
# subscribes to the watcher bus and watches the policies itself, when each
# change reaches a watch of the API ("api": the server's share, the same for
# the in-process controller) and the bus ("bus" = API → watcher → bus; the rest
# is modmgr's pass, its patch and the watch back).
# The bus subscription wakes this benchmark's own process on every event, so
# it is kept out of the timed runs. Writes $BUILD/bench/reconcile.json.
# BENCH_N changes per run (default 1000). BENCH_NODES / BENCH_CLAIMS (default
# 0) Nodes and allocated ResourceClaims are created before the processes start,
# so that the watcher lists and relays them (issue #21: the targets hold at 15k
# nodes + 15k claims too); kubesim then runs without RBAC (the generator speaks
# plain HTTP), as in footprint.sh. Prints PASS/MISS against the targets.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/modmgr.sh
N=${BENCH_N:-1000}
GAP=${BENCH_GAP_MS:-5}
NSPLIT=$(( N < 1000 ? N : N / 5 ))
OUT=${BUILD:-build}/bench/reconcile.json
LAT=${GPUKMM_TBIN:-${BUILD:-build}/tests/bin}/reconcile_lat

MM_MODMGR_FLAGS="--kube-qps -1 --log-level warn"
MM_WATCHER_FLAGS="--log-level warn"
NODES=${BENCH_NODES:-0}
CLAIMS=${BENCH_CLAIMS:-0}
if [ "$NODES" -gt 0 ] || [ "$CLAIMS" -gt 0 ]; then
	MM_RBAC=0
fi
MM_NO_START=1 mm_setup --log-level warn || exit 1
if [ "$NODES" -gt 0 ] || [ "$CLAIMS" -gt 0 ]; then
	t0=$SECONDS
	"${GPUKMM_TBIN:-${BUILD:-build}/tests/bin}/watch_bench" gen "$KUBESIM_URL" "$NODES" 0 >/dev/null &&
		"${GPUKMM_TBIN:-${BUILD:-build}/tests/bin}/watch_bench" claims "$KUBESIM_URL" "$MM_NS" "$CLAIMS" >/dev/null ||
		{ echo "populating failed"; MM_FAILED=1; exit 1; }
	echo "# $NODES nodes + $CLAIMS claims created in $((SECONDS - t0)) s"
fi
mm_start_watcher
mm_start_modmgr
apply_cp bench dra "$KM_BASIC"
wait_for "Module bench-gpu" 30 module_exists bench || exit 1

# lat N MODE GAP [--events URL]: one run of reconcile_lat, its JSON on stdout
lat() {
	"$LAT" --kubeconfig "$MM_DIR/kubeconfig" --namespace "$MM_NS" --policy bench --n "$1" --mode "$2" \
		--gap-ms "$3" "${@:4}" || { echo "$2 run (gap $3 ms) failed" >&2; return 1; }
}
e2e=$(lat "$N" e2e "$GAP") && e2e_b2b=$(lat "$N" e2e 0) &&
	split=$(lat "$NSPLIT" e2e "$GAP" --events "ipc://$MM_DIR/events.sock") || { MM_FAILED=1; exit 1; }

# no-op resync: a restarted manager rebuilds its view and must write nothing
w0=$(writes); n0=$(report_count bench)
mm_stop_modmgr TERM
mm_start_modmgr
wait_for "report after restart" 20 reports_more_than "$n0" bench
noop=$(( $(writes) - w0 ))

# baseline: the manager is stopped so only the in-process controller writes
mm_stop_modmgr TERM
base=$(lat "$N" baseline "$GAP") && base_b2b=$(lat "$N" baseline 0) || { MM_FAILED=1; exit 1; }

summary=$(jq -rn --argjson e "$e2e" --argjson b "$base" --argjson e0 "$e2e_b2b" --argjson b0 "$base_b2b" \
	--argjson s "$split" --argjson noop "$noop" --argjson nodes "$NODES" --argjson claims "$CLAIMS" '
	def r2: . * 100 | round / 100;
	def pf: if . then "PASS" else "MISS" end;
	"\($nodes) nodes/\($claims) claims: \(($e.p50_ms / $b.p50_ms <= 1.5 and $e.p99_ms / $b.p99_ms <= 1.5 and $e.p99_ms < 20) | pf) | isolated changes (\($e.gap_ms) ms apart): e2e p50 \($e.p50_ms) ms p99 \($e.p99_ms) ms; in-process p50 \($b.p50_ms) ms p99 \($b.p99_ms) ms; ratio p50 \($e.p50_ms / $b.p50_ms | r2) p99 \($e.p99_ms / $b.p99_ms | r2) (target <= 1.5, p99 < 20 ms) | back to back: e2e p50 \($e0.p50_ms) ms p99 \($e0.p99_ms) ms; in-process p50 \($b0.p50_ms) ms p99 \($b0.p99_ms) ms; ratio p50 \($e0.p50_ms / $b0.p50_ms | r2) p99 \($e0.p99_ms / $b0.p99_ms | r2) | writes/change \($e.writes_per_change) isolated, \($e0.writes_per_change) back to back; no-op resync writes \($noop) | e2e split (\($s.n) isolated changes): on a watch of the API p50 \($s.api_p50_ms // "?") ms p99 \($s.api_p99_ms // "?") ms, on the watcher bus p50 \($s.bus_p50_ms // "?") ms p99 \($s.bus_p99_ms // "?") ms, seen patched p50 \($s.p50_ms) ms p99 \($s.p99_ms) ms"')
# the summary on the first line (tests/bench/run.sh reads it)
jq -nc --arg summary "$summary" --argjson e2e "$e2e" --argjson base "$base" --argjson e0 "$e2e_b2b" \
	--argjson b0 "$base_b2b" --argjson split "$split" --argjson noop "$noop" --argjson nodes "$NODES" \
	--argjson claims "$CLAIMS" '{
	name: "reconcile", summary: $summary,
	isolated: {e2e: $e2e, baseline: $base, ratio_p50: ($e2e.p50_ms / $base.p50_ms),
		   ratio_p99: ($e2e.p99_ms / $base.p99_ms)},
	back_to_back: {e2e: $e0, baseline: $b0, ratio_p50: ($e0.p50_ms / $b0.p50_ms),
		       ratio_p99: ($e0.p99_ms / $b0.p99_ms)},
	split: $split,
	writes_per_change: $e2e.writes_per_change, noop_resync_writes: $noop,
	nodes: $nodes, claims: $claims,
	pass: (($e2e.p50_ms / $base.p50_ms) <= 1.5 and ($e2e.p99_ms / $base.p99_ms) <= 1.5 and $e2e.p99_ms < 20),
	targets: {ratio: 1.5, p99_ms: 20, writes_per_change: 1, noop_resync_writes: 0}}' >"$OUT"
echo "reconcile: $summary"
