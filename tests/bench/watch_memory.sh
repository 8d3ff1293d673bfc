#!/bin/bash
# gpukmm-watcher memory: RSS once it has synced a cluster of NODES realistic Nodes
# (~3 KB of JSON each) and CLAIMS allocated ResourceClaims (default 5000 + 5000,
# WATCH_MEM_NODES / WATCH_MEM_CLAIMS), next to the bytes of JSON the API served
# for them. Target: under 20 MB. Writes $BUILD/bench/watch_memory.json.
set -u
BUILD=${BUILD:-build}
: "${GPUKMM_SRC:=$PWD}" "${GPUKMM_BIN:=$PWD/$BUILD/bin}" "${GPUKMM_TBIN:=$PWD/$BUILD/tests/bin}"
. "$GPUKMM_SRC/tests/lib/kubesim.sh"
NODES=${WATCH_MEM_NODES:-5000}
CLAIMS=${WATCH_MEM_CLAIMS:-5000}
OUT="$BUILD/bench/watch_memory.json"
mkdir -p "$BUILD/bench"
T=$(mktemp -d "${TMPDIR:-/tmp}/gk-wmem.XXXXXX") || exit 1
chmod 700 "$T"
WPID=
cleanup() {
	[ -n "$WPID" ] && kill -KILL "$WPID" 2>/dev/null && wait "$WPID" 2>/dev/null
	kubesim_stop
	rm -rf "$T"
}
KUBESIM_NO_TRAP=1
trap cleanup EXIT
kubesim_start || exit 1
kraw POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench"}}' >/dev/null
t0=$SECONDS
"$GPUKMM_TBIN/watch_bench" gen "$KUBESIM_URL" "$NODES" 0 >/dev/null &
g1=$!
"$GPUKMM_TBIN/watch_bench" claims "$KUBESIM_URL" bench "$CLAIMS" &
g2=$!
wait $g1 && wait $g2 || { echo "populating failed"; exit 1; }
echo "# $NODES nodes + $CLAIMS claims created in $((SECONDS - t0)) s"
json_bytes=$(( $(kraw GET /api/v1/nodes | wc -c) + $(kraw GET /apis/resource.k8s.io/v1/resourceclaims | wc -c) ))

cat >"$T/kubeconfig" <<EOK
apiVersion: v1
kind: Config
current-context: sim
clusters: [{name: sim, cluster: {server: "$KUBESIM_URL"}}]
contexts: [{name: sim, context: {cluster: sim}}]
EOK
"$GPUKMM_BIN/gpukmm-watcher" --kubeconfig "$T/kubeconfig" --listen "ipc://$T/w.sock" \
	--events "ipc://$T/e.sock" --qps -1 2>"$T/watcher.log" &
WPID=$!
synced() {
	"$GPUKMM_BIN/gpukmmctl" ipc call "ipc://$T/w.sock" gpukmm.Watcher.Snapshot '{"topics":["discovery"]}' \
		--timeout-ms 5000 2>/dev/null | grep -q '"synced":true'
}
t0=$SECONDS
wait_for 300 synced || { echo "watcher did not sync"; tail "$T/watcher.log"; exit 1; }
sync_s=$((SECONDS - t0))
# RSS once synced, before any consumer asked for a full snapshot
rss_sync=$(awk '/^VmRSS/{print $2}' "/proc/$WPID/status")
counts=$("$GPUKMM_BIN/gpukmmctl" ipc call "ipc://$T/w.sock" gpukmm.Watcher.Snapshot '{"topics":["node","resourceclaim"]}' |
	python3 -c 'import json,sys; j=json.load(sys.stdin); print(len(j.get("nodes",[])), len(j.get("resource_claims",[])))')
rss=$(awk '/^VmRSS/{print $2}' "/proc/$WPID/status")
hwm=$(awk '/^VmHWM/{print $2}' "/proc/$WPID/status")
anon=$(awk '/^RssAnon/{print $2}' "/proc/$WPID/status")
file=$(awk '/^RssFile/{print $2}' "/proc/$WPID/status")
python3 - "$OUT" "$rss" "$hwm" "$json_bytes" "$counts" "$sync_s" "$anon" "$file" "$rss_sync" <<'EOP'
import json, sys
out, rss, hwm, jb, counts, sync = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(), int(sys.argv[6])
anon, file, rss_sync = int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])
s = ("watcher with %s nodes + %s claims cached: RSS %.1f MB = %.1f MB own (anon) + %.1f MB shared libraries (target < 20 MB); "
     "%.1f MB before the first full snapshot; peak %.1f MB; %.1f MB of API JSON; synced in %d s"
     % (counts[0], counts[1], rss / 1024, anon / 1024, file / 1024, rss_sync / 1024, hwm / 1024, jb / 1e6, sync))
open(out, "w").write(json.dumps({"name": "watch_memory", "summary": s, "rss_kb": rss, "peak_rss_kb": hwm, "rss_synced_kb": rss_sync,
                                 "rss_anon_kb": anon, "rss_file_kb": file,
                                 "nodes": int(counts[0]), "claims": int(counts[1]), "api_json_bytes": jb,
                                 "sync_seconds": sync}) + "\n")
print(s)
EOP
