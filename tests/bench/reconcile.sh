#!/bin/bash
# Reconcile latency and API efficiency of gpukmm-modmgr (DESIGN §8 benchmarks).
# One run, side by side on the same kubesim:
#   e2e      ClusterPolicy spec change → watcher → bus → modmgr → Module patch
#   baseline the same lib/policy + lib/kube work in one process, no IPC
# Writes $GPUKMM_BENCH/reconcile.json; prints p50/p99 of both and the ratios
# (target: e2e/baseline ≤ 1.5, e2e p99 < 20 ms), writes per change (target 1)
# and writes caused by a no-op resync (a modmgr restart; target 0). The e2e
# run also times each change's arrival on the watcher bus: "bus" is API →
# watcher → bus, the rest is modmgr's pass, its patch and the watch back.
# BENCH_N changes (default 1000).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/modmgr.sh
N=${BENCH_N:-1000}
OUT=${BUILD:-build}/bench/reconcile.json
LAT=${GPUKMM_TBIN:-${BUILD:-build}/tests/bin}/reconcile_lat

MM_MODMGR_FLAGS="--kube-qps -1 --log-level warn"
MM_WATCHER_FLAGS="--log-level warn"
mm_setup --log-level warn || exit 1
apply_cp bench dra "$KM_BASIC"
wait_for "Module bench-gpu" 30 module_exists bench || exit 1

e2e=$("$LAT" --kubeconfig "$MM_DIR/kubeconfig" --namespace "$MM_NS" --policy bench --n "$N" --mode e2e \
	--events "ipc://$MM_DIR/events.sock") || {
	echo "e2e run failed: $e2e"; MM_FAILED=1; exit 1; }

# no-op resync: a restarted manager rebuilds its view and must write nothing
w0=$(writes); n0=$(report_count bench)
mm_stop_modmgr TERM
mm_start_modmgr
wait_for "report after restart" 20 reports_more_than "$n0" bench
noop=$(( $(writes) - w0 ))

# baseline: the manager is stopped so only the in-process controller writes
mm_stop_modmgr TERM
base=$("$LAT" --kubeconfig "$MM_DIR/kubeconfig" --namespace "$MM_NS" --policy bench --n "$N" --mode baseline) || {
	echo "baseline run failed: $base"; MM_FAILED=1; exit 1; }

summary=$(jq -rn --argjson e "$e2e" --argjson b "$base" --argjson noop "$noop" \
	'"e2e p50 \($e.p50_ms) ms p99 \($e.p99_ms) ms; in-process p50 \($b.p50_ms) ms p99 \($b.p99_ms) ms; ratio p50 \(($e.p50_ms / $b.p50_ms * 100 | round) / 100) p99 \(($e.p99_ms / $b.p99_ms * 100 | round) / 100) (target <= 1.5, p99 < 20 ms); writes/change \($e.writes_per_change); no-op resync writes \($noop); e2e split: change on the watcher bus p50 \($e.bus_p50_ms // "?") ms p99 \($e.bus_p99_ms // "?") ms"')
# the summary on the first line (tests/bench/run.sh reads it)
jq -nc --arg summary "$summary" --argjson e2e "$e2e" --argjson base "$base" --argjson noop "$noop" '{
	name: "reconcile", summary: $summary, e2e: $e2e, baseline: $base,
	ratio_p50: ($e2e.p50_ms / $base.p50_ms), ratio_p99: ($e2e.p99_ms / $base.p99_ms),
	writes_per_change: $e2e.writes_per_change, noop_resync_writes: $noop,
	targets: {ratio: 1.5, p99_ms: 20, writes_per_change: 1, noop_resync_writes: 0}}' >"$OUT"
echo "reconcile: $summary"
