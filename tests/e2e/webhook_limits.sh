#!/bin/bash
# gpukmm-webhook's bounds (issue #15 item 5): a review with more JSON values than
# it parses, or nested too deep, is refused while it arrives (an AdmissionReview
# with code 413 and the reason, the tree never built: the peak RSS stays flat),
# also 40 at once; a review the CRD's maxItems refuses is answered with the API
# server's words; the largest legal review is allowed; bodies held at once have a
# budget (past it: 429). Plain HTTP (--insecure-http): the body path is the same
# as with TLS (webhook_tls.sh). Times are measured by `make bench B=webhook`,
# not here.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/proc.sh
WH="$GPUKMM_BIN/gpukmm-webhook"
T=$(mktemp -d)
PID= CPID= SLOW=
cleanup() {
	[ -n "$SLOW" ] && kill "$SLOW" 2>/dev/null && wait "$SLOW" 2>/dev/null
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ -n "$CPID" ] && kill "$CPID" 2>/dev/null && wait "$CPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
fails=0
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else nok "$what"; fi; }
jqt() { jq -e "$@" >/dev/null; }

python3 tests/lib/webhook_reviews.py "$T" array deep mappings30k legal || { nok "reviews generated"; exit 1; }
CONTROL="ipc://$T/control.sock"
"$GPUKMM_TBIN/fake_control" --listen "$CONTROL" >"$T/control.log" 2>&1 &
CPID=$!
. tests/lib/metrics.sh
counter() { ctl_metrics "$CONTROL" "$PID" | jq -r --arg n "$1" '.[$n] // 0'; }
counter_is() { [ "$(counter "$1")" "$2" "$3" ]; }
start() {
	rm -f "$T/port"
	"$WH" --insecure-http --listen 127.0.0.1:0 --port-file "$T/port" --control "$CONTROL" --heartbeat-ms 100 "$@" \
		2>>"$T/log" &
	PID=$!
	wait_until 10 test -s "$T/port" || { nok "webhook starts"; cat "$T/log"; exit 1; }
	URL="http://127.0.0.1:$(cat "$T/port")/validate-intel-com-v1alpha1-clusterpolicy"
	idle=$(awk '/^VmRSS/{print $2}' "/proc/$PID/status")
}
stop() { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=; }
post() { # file [out] [curl args]: prints the HTTP code
	local f=$1 out=${2:-$T/body}
	shift
	[ $# -gt 0 ] && shift
	curl -sS --max-time 60 -o "$out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$f" "$@" "$URL"
}
# the answer in $1 is a denial of review-uid with status code $2 and message $3
denied() {
	jq -e --arg m "$3" --argjson c "$2" '.response.uid == "review-uid" and .response.allowed == false and
		.response.status.code == $c and .response.status.message == $m' "$1" >/dev/null ||
		{ echo "# got: $(head -c 300 "$1")"; return 1; }
}
# the webhook's peak RSS grew by less than $1 MiB over its idle RSS
grew_less() {
	local hwm
	hwm=$(awk '/^VmHWM/{print $2}' "/proc/$PID/status")
	echo "# peak RSS $hwm KiB, idle $idle KiB"
	[ $((hwm - idle)) -lt $(($1 * 1024)) ]
}
VALUES_MSG='AdmissionReview too large to review: more than 100000 JSON values (the largest ClusterPolicy the CRD admits has about 27000)'

start
code=$(post "$T/array.json")
check "1.45M-element review (2.9 MB): answered ($code), refused with code 413 and the reason" \
	denied "$T/body" 413 "$VALUES_MSG"
check "its tree was never built: peak RSS grew less than 16 MiB (it took 116 MiB)" grew_less 16
code=$(post "$T/deep.json")
check "a review nested 70 levels deep: refused with code 413" \
	denied "$T/body" 413 "AdmissionReview too large to review: nested deeper than 64 levels"
printf '[%s0]' "$(head -c 200004 /dev/zero | tr '\0' '0' | sed 's/00/0,/g')" >"$T/nouid.json"
code=$(post "$T/nouid.json")
check "without a uid to answer: plain 413 with the reason ($code)" \
	bash -c "[ '$code' = 413 ] && grep -qF 'more than 100000 JSON values' '$T/body'"
check "webhook_refused counts them" wait_until 5 counter_is webhook_refused -ge 3
pids=()
for i in $(seq 1 40); do post "$T/array.json" "$T/par.$i" >"$T/code.$i" & pids+=($!); done
wait "${pids[@]}"
answered() { local i; for i in $(seq 1 40); do jq -e '.response.allowed == false and (.response.status.code == 413 or .response.status.code == 429)' "$T/par.$i" >/dev/null || return 1; done; }
check "40 of them at once: each refused (413, or 429 past the buffer budget)" answered
check "and the peak RSS still grew less than 32 MiB (40 x 2.9 MB bodies: 237 MB before)" grew_less 32
check "webhook alive" kill -0 "$PID"
stop

start
code=$(post "$T/mappings30k.json")
check "30,000 kernelMappings: parsed, refused with the API server's maxItems message" \
	jqt '.response.allowed == false and .response.status.message == "spec.kernelModule.kernelMappings: Too many: 30000: must have at most 128 items"' "$T/body"
code=$(post "$T/legal.json")
check "the largest review the CRD admits (UPDATE, $(stat -c %s "$T/legal.json") bytes) is allowed" \
	jqt '.response.allowed == true' "$T/body"
stop

# the budget of bodies held at once: one slow upload holds it, the next is refused
python3 -c '
import json, sys
r = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "review-uid", "operation": "CREATE",
     "object": {"apiVersion": "intel.com/v1alpha1", "kind": "ClusterPolicy", "metadata": {"name": "gpu", "annotations": {"a": "x" * 200000}},
                "spec": {"resourceRegistration": "dp"}}}}
json.dump(r, open(sys.argv[1], "w"))' "$T/200k.json"
start --max-body-bytes 250000 --max-buffered-bytes 300000
curl -sS --max-time 60 -o /dev/null -H 'Content-Type: application/json' --data-binary "@$T/200k.json" --limit-rate 10k "$URL" &
SLOW=$!
check "a slow 200 KB upload holds 200 KB of the 300 KB budget" wait_until 10 counter_is webhook_buffered_bytes -gt 200000
code=$(post "$T/200k.json")
check "the next 200 KB review: refused with code 429 while it does ($code)" \
	denied "$T/body" 429 "the webhook is receiving other reviews up to its budget (300000 bytes): retry later"
kill "$SLOW"; wait "$SLOW" 2>/dev/null; SLOW=
check "the slow client gone, its budget is back" wait_until 10 counter_is webhook_buffered_bytes -eq 0
code=$(post "$T/200k.json")
check "and the same review is allowed ($code)" jqt '.response.allowed == true' "$T/body"
kill -TERM "$PID"; wait "$PID"; rc=$?; PID=
check "SIGTERM: clean exit ($rc)" test "$rc" = 0
exit $((fails > 0))
