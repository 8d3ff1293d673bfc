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
#   mappings40k  40,000 kernelMappings (validate)
#   mappings30k  30,000 kernelMappings (under the value budget: parsed and validated)
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

python3 tests/lib/webhook_reviews.py "$T" array mappings40k mappings30k legal || exit 1
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
	local okn=0 allowedn=0 refusedn=0
	for i in $(seq 1 "$n"); do
		[ "$(cat "$T/code.$name.$i")" != 000 ] && okn=$((okn + 1))
		jq -e '.response.allowed == true' "$T/out.$name.$i" >/dev/null 2>&1 && allowedn=$((allowedn + 1))
		jq -e '.response.status.code == 429' "$T/out.$name.$i" >/dev/null 2>&1 && refusedn=$((refusedn + 1))
	done
	[ "$n" -gt 1 ] && ans="$ans [allowed $allowedn, busy (429) $refusedn]"
	kill -0 "$PID" 2>/dev/null && alive=yes || alive=NO
	stop_webhook
	printf '# %-10s %6d ms  peak RSS %6d KiB  answered %d/%d  %s\n' "$name" "$ms" "$hwm" "$okn" "$n" "$ans"
	echo "{\"case\":\"$name\",\"parallel\":$n,\"ms\":$ms,\"peak_rss_kb\":$hwm,\"answered\":$okn,\"alive\":\"$alive\",\"answer\":$(jq -Rn --arg a "$ans" '$a')}" >>"$T/results"
}
echo "# idle RSS $idle KiB; payloads: array $(stat -c %s "$T/array.json") B, mappings40k $(stat -c %s "$T/mappings40k.json") B, legal $(stat -c %s "$T/legal.json") B"
run array array 1
run arrayx40 array 40
run mappings40k mappings40k 1
run mappings30k mappings30k 1
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
