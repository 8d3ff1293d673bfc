#!/bin/bash
# gpukmm-webhook under hostile and worst legal AdmissionReviews (plain HTTP,
# --insecure-http: the TLS cost is not what is measured). For each case: the
# answer (HTTP code, allowed, first line of the message), the wall time and
# the webhook's peak RSS (VmHWM; one webhook process per case),
# against the budgets:
#   time: well inside the API server's 10 s webhook timeout (budget 2 s for one
#         review, 5 s for 40 in parallel);
#   peak RSS: 64 MiB (the controller pod's 256 Mi is shared by every service).
# Cases:
#   array      a 2.9 MB review whose object holds a 1.45M-element array
#   array x40  the same, 40 in parallel
#   mappings   40,000 kernelMappings (validate)
#   legal      the largest review the CRD admits: every list at its maxItems, every
#              limited string at its maxLength, object + oldObject (validate)
#   legal x40  the same, 40 in parallel
# Writes $BUILD/bench/webhook.json.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
BUILD=${BUILD:-build}
BIN=${GPUKMM_BIN:-$PWD/$BUILD/bin}
mkdir -p "$BUILD/bench"
T=$(mktemp -d "${TMPDIR:-/tmp}/gk-whbench.XXXXXX") || exit 1
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
BUDGET_MS=2000 BUDGET_PAR_MS=5000 BUDGET_RSS_KB=$((64 * 1024))

python3 - "$T" <<'EOP'
import json, sys
t = sys.argv[1]
def review(obj, old=None, op="CREATE"):
    req = {"uid": "bench-uid", "kind": {"group": "intel.com", "version": "v1alpha1", "kind": "ClusterPolicy"},
           "operation": op, "object": obj}
    if old is not None:
        req["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
def cp(spec, name="gpu"):
    return {"apiVersion": "intel.com/v1alpha1", "kind": "ClusterPolicy", "metadata": {"name": name}, "spec": spec}
def write(name, j):
    with open(f"{t}/{name}.json", "w") as f:
        json.dump(j, f, separators=(",", ":"))
# 1.45M small values in an array, ~2.9 MB
write("array", review(cp({"resourceRegistration": "dp", "x": [0] * 1450000})))
# 40,000 kernelMappings
maps = [{"regexp": "^6\\.%d$" % i, "containerImage": "r.io/xe:%d" % i} for i in range(40000)]
write("mappings", review(cp({"resourceRegistration": "dp", "kernelModule": {"kernelMappings": maps}})))
# the largest legal policy: limits as the CRD says (read from it, so the bench follows the CRD)
import yaml
crd = yaml.safe_load(open("deploy/crd/intel.com_clusterpolicies.yaml"))
sp = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
km = sp["kernelModule"]["properties"]
mp = km["kernelMappings"]["items"]["properties"]
eq = sp["kueue"]["properties"]["equalResources"]
L = {"maps": km["kernelMappings"].get("maxItems"), "args": mp["build"]["properties"]["buildArgs"].get("maxItems"),
     "secrets": mp["build"]["properties"]["secrets"].get("maxItems"), "intree": mp["inTreeModulesToRemove"].get("maxItems"),
     "order": km["modulesLoadingOrder"].get("maxItems"), "ids": sp["dp"]["properties"]["allowIDs"].get("maxItems"),
     "tol": sp["tolerations"].get("maxItems"), "eq": eq.get("maxItems"),
     "lq": eq["items"]["properties"]["localQueues"].get("maxItems"), "rx": mp["regexp"].get("maxLength"),
     "img": mp["containerImage"].get("maxLength"), "sel": sp["nodeSelector"].get("maxProperties")}
if None in L.values():
    # a CRD without limits (the code before them): the sizes of the worst case measured after
    dflt = {"maps": 128, "args": 32, "secrets": 16, "intree": 16, "order": 16, "ids": 256, "tol": 64,
            "eq": 32, "lq": 64, "rx": 1024, "img": 1024, "sel": 64}
    L = {k: (v if v is not None else dflt[k]) for k, v in L.items()}
img = "registry.example.com/" + "a" * (L["img"] - len("registry.example.com/") - len(":${KERNEL_FULL_VERSION}")) + ":${KERNEL_FULL_VERSION}"
rx = "^(" + "|".join("6\\.%d\\.[0-9]+-[0-9]+-generic" % i for i in range(200)) + ")$"
rx = rx[: L["rx"] - 2] + ")$" if len(rx) > L["rx"] else rx
mapping = {"regexp": rx, "containerImage": img,
           "build": {"dockerfileConfigMap": {"name": "df"},
                     "buildArgs": [{"name": "A%d" % i, "value": "v" * 64} for i in range(L["args"])],
                     "secrets": [{"name": "s%d" % i} for i in range(L["secrets"])]},
           "inTreeModulesToRemove": ["m%d" % i for i in range(L["intree"])], "registryTLS": {"insecure": True}}
spec = {"resourceRegistration": "dp",
        "dp": {"plugin": "intel/plugin:1.0", "allowIDs": ["0x%04x" % i for i in range(L["ids"])]},
        "nodeSelector": {"k%d" % i: "v" for i in range(L["sel"])},
        "tolerations": [{"key": "k%d" % i, "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 3}
                        for i in range(L["tol"])],
        "kueue": {"equalResources": [{"name": "q%d" % i, "localQueues": [{"name": "l%d" % j, "namespace": "n%d" % j}
                                                                         for j in range(L["lq"])]} for i in range(L["eq"])]},
        "kernelModule": {"moduleName": "xe", "kernelMappings": [mapping] * L["maps"],
                         "modulesLoadingOrder": ["xe"] + ["m%d" % i for i in range(L["order"] - 1)]}}
write("legal", review(cp(spec), cp(spec), "UPDATE"))
print("# limits: " + ", ".join("%s %d" % kv for kv in sorted(L.items())))
EOP
[ -s "$T/legal.json" ] || { echo "payloads not generated"; exit 1; }

# one webhook process per case: freed memory is not given back to the system,
# so a case's peak would hide the next one's
start_webhook() {
	rm -f "$T/port"
	"$BIN/gpukmm-webhook" --insecure-http --listen 127.0.0.1:0 --port-file "$T/port" 2>>"$T/log" &
	PID=$!
	for _ in $(seq 1 200); do [ -s "$T/port" ] && break; sleep 0.05; done
	[ -s "$T/port" ] || { echo "webhook did not start"; cat "$T/log"; exit 1; }
	URL="http://127.0.0.1:$(cat "$T/port")/validate-intel-com-v1alpha1-clusterpolicy"
}
stop_webhook() { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=; }
start_webhook
idle=$(awk '/^VmRSS/{print $2}' "/proc/$PID/status")
stop_webhook

# run CASE FILE N: N parallel POSTs; sets ms, hwm, ans (of the first), alive
run() {
	local name=$1 f=$2 n=$3 t0 i pids=()
	start_webhook
	t0=$(date +%s%N)
	for i in $(seq 1 "$n"); do
		curl -sS --max-time 60 -o "$T/out.$name.$i" -w '%{http_code}' -H 'Content-Type: application/json' \
			--data-binary "@$T/$f.json" "$URL" >"$T/code.$name.$i" 2>"$T/err.$name.$i" &
		pids+=($!)
	done
	wait "${pids[@]}"
	ms=$((($(date +%s%N) - t0) / 1000000))
	hwm=$(awk '/^VmHWM/{print $2}' "/proc/$PID/status" 2>/dev/null || echo 0)
	local code allowed msg
	code=$(cat "$T/code.$name.1")
	allowed=$(jq -r '.response.allowed | tostring' "$T/out.$name.1" 2>/dev/null || echo -)
	msg=$(jq -r '.response.status.message // empty' "$T/out.$name.1" 2>/dev/null | head -1 | cut -c1-100)
	[ -z "$msg" ] && msg=$(head -c 100 "$T/out.$name.1" | tr '\n' ' ')
	ans="HTTP $code allowed=$allowed: $msg"
	local okn=0
	for i in $(seq 1 "$n"); do [ "$(cat "$T/code.$name.$i")" != 000 ] && okn=$((okn + 1)); done
	kill -0 "$PID" 2>/dev/null && alive=yes || alive=NO
	stop_webhook
	printf '# %-10s %6d ms  peak RSS %6d KiB  answered %d/%d  %s\n' "$name" "$ms" "$hwm" "$okn" "$n" "$ans"
	echo "{\"case\":\"$name\",\"parallel\":$n,\"ms\":$ms,\"peak_rss_kb\":$hwm,\"answered\":$okn,\"alive\":\"$alive\",\"answer\":$(jq -Rn --arg a "$ans" '$a')}" >>"$T/results"
}
echo "# idle RSS $idle KiB; payloads: array $(stat -c %s "$T/array.json") B, mappings $(stat -c %s "$T/mappings.json") B, legal $(stat -c %s "$T/legal.json") B"
run array array 1
run arrayx40 array 40
run mappings mappings 1
run legal legal 1
run legalx40 legal 40
worst_ms=$(jq -s '[.[] | select(.parallel == 1) | .ms] | max' "$T/results")
worst_par=$(jq -s '[.[] | select(.parallel > 1) | .ms] | max' "$T/results")
worst_rss=$(jq -s '[.[] | .peak_rss_kb] | max' "$T/results")
verdict() { [ "$1" -le "$2" ] && echo within || echo OVER; }
summary="one review: worst $worst_ms ms (budget $BUDGET_MS: $(verdict "$worst_ms" $BUDGET_MS)); 40 in parallel: worst $worst_par ms (budget $BUDGET_PAR_MS: $(verdict "$worst_par" $BUDGET_PAR_MS)); peak RSS $((worst_rss / 1024)) MiB (budget $((BUDGET_RSS_KB / 1024)): $(verdict "$worst_rss" $BUDGET_RSS_KB)); idle $((idle / 1024)) MiB"
jq -s --arg s "$summary" --argjson idle "$idle" \
	'{name: "webhook", summary: $s, idle_rss_kb: $idle, budgets: {ms: '$BUDGET_MS', parallel_ms: '$BUDGET_PAR_MS', peak_rss_kb: '$BUDGET_RSS_KB'}, cases: .}' \
	"$T/results" >"$BUILD/bench/webhook.json"
echo "$summary"
