#!/bin/bash
# kubesim load benchmark: 5,000 nodes created, patched and 10% deleted by one writer
# while 10 watchers follow (list + watch + resume), then each watcher checks its state
# against a final list. Writes $BUILD/bench/kubesim_load.json and prints it.
# Side by side in one run: the same writer with 0 watchers (write cost alone), so the
# ratio shows what watch fan-out costs the writer.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
BUILD=${BUILD:-build}
export GPUKMM_BIN=${GPUKMM_BIN:-$PWD/$BUILD/bin}
TBIN=${GPUKMM_TBIN:-$PWD/$BUILD/tests/bin}
NODES=${KUBESIM_BENCH_NODES:-5000}
WATCHERS=${KUBESIM_BENCH_WATCHERS:-10}
. tests/lib/kubesim.sh
mkdir -p "$BUILD/bench"
export KUBESIM_NO_TRAP=1
trap 'kubesim_stop' EXIT

kubesim_start --history 100000 || exit 1
base=$("$TBIN/kubesim_load" "$KUBESIM_URL" "$NODES" 1 30) || echo "# baseline run reported a problem" >&2
kubesim_stop
kubesim_start --history 100000 || exit 1
rss0=$(awk '/VmRSS/{print $2}' /proc/$KUBESIM_PID/status)
load=$("$TBIN/kubesim_load" "$KUBESIM_URL" "$NODES" "$WATCHERS" 30)
rc=$?
rss1=$(awk '/VmRSS/{print $2}' /proc/$KUBESIM_PID/status)
kubesim_stop
w1=$(sed -n 's/.*"writesPerSecond":\([0-9.]*\).*/\1/p' <<<"$base")
wn=$(sed -n 's/.*"writesPerSecond":\([0-9.]*\).*/\1/p' <<<"$load")
ratio=$(awk -v a="$wn" -v b="$w1" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "null" }')
ev=$(sed -n 's/.*"eventsPerSecond":\([0-9.]*\).*/\1/p' <<<"$load")
ok=$(sed -n 's/.*"consistent":\([a-z]*\).*/\1/p' <<<"$load")
summary="$NODES nodes, $WATCHERS watchers: ${ev:-?} events/s received, ${wn:-?} writes/s (x$ratio vs 1 watcher), consistent=${ok:-?}; kubesim RSS ${rss0:-0} -> ${rss1:-0} KiB"
printf '{"name":"kubesim_load","summary":"%s","benchmark":"kubesim_load","oneWatcher":%s,"loaded":%s,"writeRateRatio_%dwatchers_vs_1":%s,"rssKiB":{"start":%s,"end":%s}}\n' \
	"$summary" "$base" "$load" "$WATCHERS" "$ratio" "${rss0:-0}" "${rss1:-0}" | tee "$BUILD/bench/kubesim_load.json"
exit $rc
