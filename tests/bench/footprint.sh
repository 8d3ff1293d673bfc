#!/bin/bash
# The whole controller profile on a big cluster: FP_NODES Nodes (~3 KB each),
# FP_CLAIMS allocated ResourceClaims, FP_POLICIES ClusterPolicies with a
# kernelModule (defaults 5000 / 5000 / 3), the 3 gated DaemonSets per policy.
#   cold start: `gpukmm --profile controller` started → the first moment the
#     cluster is correct (tests/lib/chaos_check.sh: every Module rendered, status
#     observedGeneration/kmmStatus/Ready right)
#   footprint: sum of VmRSS and of Pss (smaps_rollup: shared library pages split
#     between the processes) of the supervisor + every service, after the start
#     and again after the churn. Target: ≤ 30 MB total (a Go controller-runtime
#     operator requests 64 MiB and uses 40–120 MB)
#   CPU per 1,000 watch events: FP_EVENTS Node label patches (each one watch
#     event to the watcher, relayed to the consumers), user+sys CPU of every
#     process of the profile, side by side with kubesim's own CPU serving them
# Writes $BUILD/bench/footprint.json.
set -u
BUILD=${BUILD:-build}
: "${GPUKMM_SRC:=$PWD}" "${GPUKMM_BIN:=$PWD/$BUILD/bin}" "${GPUKMM_TBIN:=$PWD/$BUILD/tests/bin}"
export GPUKMM_SRC GPUKMM_BIN GPUKMM_TBIN
. "$GPUKMM_SRC/tests/lib/kubesim.sh"
NODES=${FP_NODES:-5000}
CLAIMS=${FP_CLAIMS:-5000}
POLICIES=${FP_POLICIES:-3}
EVENTS=${FP_EVENTS:-5000}
NS=intel-gpu-base-operator
OUT="$BUILD/bench/footprint.json"
mkdir -p "$BUILD/bench"
T=$(mktemp -d "${TMPDIR:-/tmp}/gk-footprint.XXXXXX") || exit 1
chmod 700 "$T"
SUP=
cleanup() {
	if [ -n "$SUP" ]; then
		kill -TERM "$SUP" 2>/dev/null
		for _ in $(seq 1 100); do kill -0 "$SUP" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$SUP" 2>/dev/null
		wait "$SUP" 2>/dev/null
	fi
	kubesim_stop
	rm -rf "$T"
}
KUBESIM_NO_TRAP=1
trap cleanup EXIT
kubesim_start || exit 1
k apply -f "$GPUKMM_SRC/deploy/namespace/namespace.yaml" -f "$GPUKMM_SRC/deploy/crd/intel.com_clusterpolicies.yaml" -f "$GPUKMM_SRC/deploy/crd/gpukmm.io_nodereportrequests.yaml" \
	-f "$GPUKMM_SRC/tests/fixtures/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml" >/dev/null || exit 1
k wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com crd/nodereportrequests.gpukmm.io crd/modules.kmm.sigs.x-k8s.io >/dev/null
kraw POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench"}}' >/dev/null
t0=$SECONDS
"$GPUKMM_TBIN/watch_bench" gen "$KUBESIM_URL" "$NODES" 0 >/dev/null &
g1=$!
"$GPUKMM_TBIN/watch_bench" claims "$KUBESIM_URL" bench "$CLAIMS" &
g2=$!
wait $g1 && wait $g2 || { echo "populating failed"; exit 1; }
for i in $(seq 1 "$POLICIES"); do
	p=bench-$i
	kraw POST /apis/intel.com/v1alpha1/clusterpolicies "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"$p\"},\"spec\":{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"moduleName\":\"xe\",\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":\"registry.example.com/xe:$i\"}]}}}" >/dev/null
	for ds in device-plugin gpu-dra xpu-manager; do
		kraw POST "/apis/apps/v1/namespaces/$NS/daemonsets" "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"$p-$ds\",\"namespace\":\"$NS\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"$p-$ds\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"$p-$ds\"}},\"spec\":{\"nodeSelector\":{\"intel.feature.node.kubernetes.io/gpu\":\"true\"},\"containers\":[{\"name\":\"c\",\"image\":\"img\"}]}}}}" >/dev/null
	done
done
echo "# $NODES nodes + $CLAIMS claims + $POLICIES policies created in $((SECONDS - t0)) s"
cat >"$T/kubeconfig" <<EOK
apiVersion: v1
kind: Config
current-context: sim
clusters: [{name: sim, cluster: {server: "$KUBESIM_URL"}}]
contexts: [{name: sim, context: {cluster: sim}}]
EOK

# the controller profile as deployed (deploy/controller/config.json), minus the
# webhook's TLS files: it serves plain HTTP here (same code, no handshake)
GATER=; [ -x "$GPUKMM_BIN/gpukmm-gater" ] && GATER=1
svcs='{"name": "watcher", "credentials": true, "args": ["--leader-elect"]}, {"name": "modmgr", "credentials": true},'
[ -n "$GATER" ] && svcs="$svcs {\"name\": \"gater\", \"credentials\": true},"
svcs="$svcs {\"name\": \"statusd\", \"credentials\": true, \"args\": [\"--grace-ms\", \"2000\"]},
 {\"name\": \"webhook\", \"args\": [\"--insecure-http\", \"--listen\", \"127.0.0.1:0\"]}"
echo "{\"services\": [$svcs]}" >"$T/controller.json"
ms() { date +%s%3N; }
start_ms=$(ms)
OPERATOR_NAMESPACE=$NS GPUKMM_LOG_LEVEL=${FP_LOG_LEVEL:-warn} "$GPUKMM_BIN/gpukmm" --profile controller --config "$T/controller.json" \
	--runtime-dir "$T/run" --kubeconfig "$T/kubeconfig" >"$T/controller.log" 2>&1 &
SUP=$!
export CHAOS_GATER=$GATER
correct() { bash "$GPUKMM_SRC/tests/lib/chaos_check.sh" "$KUBESIM_URL" "$NS" >"$T/check.log" 2>&1; }
# a cheap test polled fast (one list of policies, one of Modules): every policy's
# status computed for its generation, its Module there; the full checker then
# confirms the state was correct (else the time is taken when it says so)
looks_done() {
	local cps mods
	cps=$(kraw GET /apis/intel.com/v1alpha1/clusterpolicies) && mods=$(kraw GET "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules") &&
		jq -e --argjson n "$POLICIES" --argjson m "$(jq '.items | length' <<<"$mods")" \
			'[.items[] | select(.status.observedGeneration == .metadata.generation and .status.kmmStatus != null)] | length == $n and $m == $n' \
			<<<"$cps" >/dev/null 2>&1
}
deadline=$((SECONDS + 600))
until looks_done; do
	[ $SECONDS -lt $deadline ] && kill -0 "$SUP" 2>/dev/null || { echo "never correct"; tail "$T/controller.log"; exit 1; }
	sleep 0.02
done
seen_ms=$(ms)
until correct; do
	[ $SECONDS -lt $deadline ] && kill -0 "$SUP" 2>/dev/null || { echo "never correct:"; cat "$T/check.log"; tail "$T/controller.log"; exit 1; }
	seen_ms=
	sleep 0.1
done
seen_ms=${seen_ms:-$(ms)}
cold_ms=$(( seen_ms - start_ms ))
[ -n "${FP_LOG_LEVEL:-}" ] && { echo "# start $start_ms"; cut -c1-220 "$T/controller.log"; }
echo "# cold start to the first correct status: $cold_ms ms"

pids() {
	echo "$SUP"
	"$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$T/run" --json --timeout-ms 3000 2>/dev/null |
		jq -r '.. | objects | select(has("pid")) | .pid | select(. > 0)'
}
mem() { # prints "rss_kb pss_kb"
	local p r=0 s=0 v
	for p in $(pids); do
		v=$(awk '/^VmRSS/{print $2}' "/proc/$p/status" 2>/dev/null); r=$((r + ${v:-0}))
		v=$(awk '/^Pss:/{print $2}' "/proc/$p/smaps_rollup" 2>/dev/null); s=$((s + ${v:-0}))
	done
	echo "$r $s"
}
cpu_ticks() { # user+sys clock ticks of PIDs
	local p t=0 v
	for p in "$@"; do
		v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null); t=$((t + ${v:-0}))
	done
	echo $t
}
per_proc() {
	local p
	for p in $(pids); do
		printf '%s=%s ' "$(tr '\0' ' ' <"/proc/$p/cmdline" | awk '{print $1}' | xargs basename)" \
			"$(awk '/^VmRSS/{print $2}' "/proc/$p/status")"
	done
}
sleep 2 # settle: let the start-up work finish before measuring (not synchronisation)
read -r rss0 pss0 <<<"$(mem)"
echo "# after start: RSS $((rss0 / 1024)) MB, PSS $((pss0 / 1024)) MB ($(per_proc))"

# churn: EVENTS Node label patches, 2 writers
all=$(pids)
c0=$(cpu_ticks $all); k0=$(cpu_ticks "$KUBESIM_PID")
ev0=$(kraw GET /kubesim/stats | jq '.watchEvents')
t1=$(ms)
"$GPUKMM_TBIN/watch_bench" patch "$KUBESIM_URL" "$NODES" $((EVENTS / 2)) 0 >/dev/null &
w1=$!
"$GPUKMM_TBIN/watch_bench" patch "$KUBESIM_URL" "$NODES" $((EVENTS / 2)) 1 >/dev/null &
w2=$!
wait $w1 $w2
# the watcher has seen them all once kubesim has sent every event and the
# cluster is still correct; then a short drain for the consumers' last passes
quiet() { local a b; a=$(kraw GET /kubesim/stats | jq '.watchEvents'); sleep 0.5; b=$(kraw GET /kubesim/stats | jq '.watchEvents'); [ "$a" = "$b" ]; }
until quiet; do :; done
churn_ms=$(( $(ms) - t1 ))
c1=$(cpu_ticks $all); k1=$(cpu_ticks "$KUBESIM_PID")
correct || { echo "not correct after the churn:"; cat "$T/check.log"; exit 1; }
ev1=$(kraw GET /kubesim/stats | jq '.watchEvents')
hz=$(getconf CLK_TCK)
read -r rss1 pss1 <<<"$(mem)"
echo "# after $EVENTS node events: RSS $((rss1 / 1024)) MB, PSS $((pss1 / 1024)) MB ($(per_proc))"
python3 - "$OUT" "$NODES" "$CLAIMS" "$POLICIES" "$cold_ms" "$rss0" "$pss0" "$rss1" "$pss1" "$EVENTS" \
	$((c1 - c0)) $((k1 - k0)) "$hz" $((ev1 - ev0)) "$churn_ms" "$(per_proc)" <<'EOP'
import json, sys
a = sys.argv[1:]
out = a[0]
nodes, claims, pol, cold, rss0, pss0, rss1, pss1, events, cpu, kcpu, hz, wev, churn = map(int, a[1:15])
per = a[15]
cpu_ms = cpu * 1000 / hz
k_ms = kcpu * 1000 / hz
mb = lambda kb: kb / 1024
r = {
    "name": "footprint",
    "nodes": nodes, "claims": claims, "policies": pol,
    "cold_start_ms": cold,
    "rss_kb_after_start": rss0, "pss_kb_after_start": pss0,
    "rss_kb_after_churn": rss1, "pss_kb_after_churn": pss1,
    "per_process_rss_kb": per,
    "node_events": events, "watch_events_served": wev, "churn_ms": churn,
    "cpu_ms_profile": cpu_ms, "cpu_ms_kubesim": k_ms,
    "cpu_ms_per_1000_events": cpu_ms * 1000 / events,
    "target_mb": 30,
}
r["summary"] = ("%d nodes/%d claims/%d policies: controller total PSS %.1f MB (%.2fx of the 30 MB target; "
                "VmRSS summed %.1f MB counts shared libraries once per process); cold start to correct status %.1f s; "
                "CPU %.0f ms per 1000 watch events (kubesim serving them %.0f ms, ratio %.2f)") % (
    nodes, claims, pol, mb(max(pss0, pss1)), mb(max(pss0, pss1)) / 30, mb(max(rss0, rss1)), cold / 1000,
    cpu_ms * 1000 / events, k_ms * 1000 / events, (cpu_ms / k_ms) if k_ms else 0)
with open(out, "w") as f:
    f.write(json.dumps(r, separators=(",", ":")) + "\n")
print(r["summary"])
EOP
