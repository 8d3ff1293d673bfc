#!/bin/bash
# Watch throughput, side by side in one run on one kubesim history:
#   N Node MODIFIED events (default 100000, WATCH_BENCH_N) replayed from the same
#   resourceVersion to (a) curl → /dev/null, (b) lib/kube watch + lib/kobj typed
#   conversion + typed cache + lib/ipc bus publish (tests/bin/watch_bench consume),
#   (c) kubectl get nodes -w -o name.
# kubectl always lists first and watches from the list's resourceVersion, so all
# three go through one small proxy that rewrites a watch's resourceVersion to the
# start of the history (the same hop for everybody). kubesim ends each stream
# after exactly N events (fault watch.closeAfterEvents). Times: whole transfer for
# curl and ours, first event → last event for kubectl (its start-up and list
# excluded, which favours kubectl). Writes $BUILD/bench/watch_throughput.json.
set -u
BUILD=${BUILD:-build}
: "${GPUKMM_SRC:=$PWD}" "${GPUKMM_BIN:=$PWD/$BUILD/bin}" "${GPUKMM_TBIN:=$PWD/$BUILD/tests/bin}"
. "$GPUKMM_SRC/tests/lib/kubesim.sh"
N=${WATCH_BENCH_N:-100000}
NODES=${WATCH_BENCH_NODES:-1000}
GENS=${WATCH_BENCH_GENS:-4}
OUT="$BUILD/bench/watch_throughput.json"
mkdir -p "$BUILD/bench"

T=$(mktemp -d "${TMPDIR:-/tmp}/gk-wbench.XXXXXX") || exit 1
PROXY=
cleanup() {
	[ -n "$PROXY" ] && kill "$PROXY" 2>/dev/null && wait "$PROXY" 2>/dev/null
	kubesim_stop
	rm -rf "$T"
}
KUBESIM_NO_TRAP=1
trap cleanup EXIT
kubesim_start --history $((N + NODES + 1000)) --bookmark-ms 3600000 || exit 1

# history: NODES nodes, then N modifications from GENS writers in parallel
"$GPUKMM_TBIN/watch_bench" gen "$KUBESIM_URL" "$NODES" 0 >"$T/gen0" || exit 1
RV0=$(awk '/^rv0/{print $2}' "$T/gen0")
per=$((N / GENS))
pids=()
t0=$SECONDS
for g in $(seq 1 "$GENS"); do
	"$GPUKMM_TBIN/watch_bench" patch "$KUBESIM_URL" "$NODES" "$per" "$g" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "generation failed"; exit 1; }; done
N=$((per * GENS))
echo "# history: $NODES nodes + $N modifications written in $((SECONDS - t0)) s"

# the rewriting proxy (resourceVersion of watches → RV0), plain python3
cat >"$T/proxy.py" <<'EOP'
import http.client, http.server, re, sys, urllib.parse
up = urllib.parse.urlparse(sys.argv[1]); rv0 = sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        path = self.path
        if re.search(r"[?&]watch=(1|true)", path):
            path = re.sub(r"resourceVersion=[^&]*", "resourceVersion=" + rv0, path)
        c = http.client.HTTPConnection(up.hostname, up.port)
        hdr = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        c.request("GET", path, headers=hdr)
        r = c.getresponse()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while True:
            b = r.read1(262144)
            if not b:
                break
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
EOP
mkfifo "$T/pport"
python3 "$T/proxy.py" "$KUBESIM_URL" "$RV0" >"$T/pport" &
PROXY=$!
read -r -t 10 PPORT <"$T/pport" || { echo "proxy did not start"; exit 1; }
PURL="http://127.0.0.1:$PPORT"
close_after() { kraw PUT /kubesim/faults "{\"watch\":{\"closeAfterEvents\":$N}}" >/dev/null; }
jget() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# (a) curl: the raw stream to /dev/null
close_after
read -r cbytes curl_s < <(curl -sN -o /dev/null -w '%{size_download} %{time_total}\n' \
	"$PURL/api/v1/nodes?watch=1&resourceVersion=$RV0&allowWatchBookmarks=true")
# (b) ours
close_after
ours=$("$GPUKMM_TBIN/watch_bench" consume "$PURL" "$RV0" "$N") || { echo "consume failed: $ours"; exit 1; }
echo "# ours: $ours"
ours_s=$(jget "$ours" seconds)
ours_rss=$(jget "$ours" rss_kb)
# (c) kubectl: its list prints NODES names, then one line per event
close_after
kres=$(KUBECONFIG=/dev/null kubectl --server "$PURL" --cache-dir "$T/kc" get nodes -w -o name 2>"$T/kubectl.err" |
	"$GPUKMM_TBIN/watch_bench" lines "$NODES" "$N")
echo "# kubectl: $kres"
kubectl_s=$(jget "$kres" seconds)

python3 - "$OUT" "$N" "$cbytes" "$curl_s" "$ours_s" "$kubectl_s" "$ours_rss" <<'EOP'
import json, sys
out, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
curl, ours, kub, rss = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
eps = lambda s: n / s if s > 0 else 0
s = ("%d Node events (%.0f MB): ours %.0f ev/s, curl %.0f ev/s, kubectl %.0f ev/s; "
     "ours/curl time %.2fx (target <= 3), kubectl/ours time %.2fx (target > 1)"
     % (n, size / 1e6, eps(ours), eps(curl), eps(kub), ours / curl, kub / ours if ours > 0 else 0))
r = {"name": "watch_throughput", "summary": s, "events": n, "bytes": size,
     "seconds": {"curl": curl, "ours": ours, "kubectl": kub},
     "events_per_s": {"curl": eps(curl), "ours": eps(ours), "kubectl": eps(kub)},
     "ratio_ours_over_curl": ours / curl, "ratio_kubectl_over_ours": kub / ours if ours > 0 else 0,
     "ours_rss_kb": rss}
open(out, "w").write(json.dumps(r) + "\n")
print(s)
EOP
