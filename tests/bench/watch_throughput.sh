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
#
# Fairness: all three read the same bytes through the same server path. The
# CPU seconds kubesim + proxy spend during the curl run are reported: when they
# are close to curl's wall time the server, not curl, set the "I/O limit". So a
# second pair is measured with kubesim out of the way: the stream is captured
# once and the proxy serves those exact bytes from a file to curl and to ours
# ("replay": the consumers' own cost). One untimed pass first warms kubesim. The targets are judged on the live run
# (the issue's definition); the replay ratio is reported next to it.
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
import http.client, http.server, os, re, sys, urllib.parse
up = urllib.parse.urlparse(sys.argv[1]); rv0 = sys.argv[2]; replay = sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def chunked(self, read):  # the body as HTTP chunks, then the end of the stream
        while True:
            b = read(262144)
            if not b:
                break
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True
    def do_GET(self):
        path = self.path
        if re.search(r"[?&]watch=(1|true)", path):
            path = re.sub(r"resourceVersion=[^&]*", "resourceVersion=" + rv0, path)
            if os.path.exists(replay):  # the captured stream, kubesim not involved
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                with open(replay, "rb") as f:
                    self.chunked(f.read)
                return
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
        self.chunked(r.read1)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
EOP
mkfifo "$T/pport"
python3 "$T/proxy.py" "$KUBESIM_URL" "$RV0" "$T/replay" >"$T/pport" &
PROXY=$!
read -r -t 10 PPORT <"$T/pport" || { echo "proxy did not start"; exit 1; }
PURL="http://127.0.0.1:$PPORT"
close_after() { kraw PUT /kubesim/faults "{\"watch\":{\"closeAfterEvents\":$N}}" >/dev/null; }
jget() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# CPU seconds (user + system) of kubesim and the proxy so far
server_cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{t += $14 + $15} END {printf "%.3f", t / hz}' \
		"/proc/$KUBESIM_PID/stat" "/proc/$PROXY/stat"
}
WURL="$PURL/api/v1/nodes?watch=1&resourceVersion=$RV0&allowWatchBookmarks=true"

# the stream once, untimed: warms kubesim and the proxy for every timed run
# below, and is the replay file for the second pair
close_after
curl -sN -o "$T/stream" "$WURL" || { echo "capture failed"; exit 1; }

# (a) curl: the raw stream to /dev/null
close_after
c0=$(server_cpu)
read -r cbytes curl_s < <(curl -sN -o /dev/null -w '%{size_download} %{time_total}\n' "$WURL")
server_s=$(python3 -c "print('%.3f' % ($(server_cpu) - $c0))")
echo "# curl: $cbytes bytes in $curl_s s; kubesim + proxy used $server_s s of CPU meanwhile"
# (b) ours
close_after
ours=$("$GPUKMM_TBIN/watch_bench" consume "$PURL" "$RV0" "$N") || { echo "consume failed: $ours"; exit 1; }
echo "# ours: $ours"
ours_s=$(jget "$ours" seconds)
ours_rss=$(jget "$ours" rss_kb)
ours_cpu=$(jget "$ours" cpu_seconds)
# (c) kubectl: its list prints NODES names, then one line per event
close_after
kres=$(KUBECONFIG=/dev/null kubectl --server "$PURL" --cache-dir "$T/kc" get nodes -w -o name 2>"$T/kubectl.err" |
	"$GPUKMM_TBIN/watch_bench" lines "$NODES" "$N")
echo "# kubectl: $kres"
kubectl_s=$(jget "$kres" seconds)

# replay: the same bytes from a file (kubesim out of the way), curl then ours
mv "$T/stream" "$T/replay"
read -r rbytes rcurl_s < <(curl -sN -o /dev/null -w '%{size_download} %{time_total}\n' "$WURL")
rours=$("$GPUKMM_TBIN/watch_bench" consume "$PURL" "$RV0" "$N") || { echo "replay consume failed: $rours"; exit 1; }
echo "# replay: curl $rbytes bytes in $rcurl_s s; ours: $rours"
rours_s=$(jget "$rours" seconds)
rm -f "$T/replay"

python3 - "$OUT" "$N" "$cbytes" "$curl_s" "$ours_s" "$kubectl_s" "$ours_rss" "$server_s" "$rcurl_s" "$rours_s" \
	"$(cut -d' ' -f1-3 /proc/loadavg)" "$ours_cpu" <<'EOP'
import json, sys
out, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
curl, ours, kub, rss = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
server, rcurl, rours, load = float(sys.argv[8]), float(sys.argv[9]), float(sys.argv[10]), sys.argv[11]
ours_cpu = float(sys.argv[12])
eps = lambda s: n / s if s > 0 else 0
s = ("%d Node events (%.0f MB): ours %.0f ev/s, curl %.0f ev/s, kubectl %.0f ev/s; "
     "ours/curl time %.2fx (target <= 3), kubectl/ours time %.2fx (target > 1); "
     "server CPU during curl %.0f%% of its time; replay without kubesim: ours/curl %.2fx; "
     "ours CPU %.1f us/event; load %s"
     % (n, size / 1e6, eps(ours), eps(curl), eps(kub), ours / curl, kub / ours if ours > 0 else 0,
        100 * server / curl if curl > 0 else 0, rours / rcurl if rcurl > 0 else 0, 1e6 * ours_cpu / n, load))
r = {"name": "watch_throughput", "summary": s, "events": n, "bytes": size,
     "seconds": {"curl": curl, "ours": ours, "kubectl": kub},
     "events_per_s": {"curl": eps(curl), "ours": eps(ours), "kubectl": eps(kub)},
     "ratio_ours_over_curl": ours / curl, "ratio_kubectl_over_ours": kub / ours if ours > 0 else 0,
     "server_cpu_seconds_during_curl": server,
     "replay": {"seconds": {"curl": rcurl, "ours": rours},
                "events_per_s": {"curl": eps(rcurl), "ours": eps(rours)},
                "ratio_ours_over_curl": rours / rcurl if rcurl > 0 else 0},
     "ours_cpu_seconds": ours_cpu, "loadavg": load, "ours_rss_kb": rss}
open(out, "w").write(json.dumps(r) + "\n")
print(s)
EOP
