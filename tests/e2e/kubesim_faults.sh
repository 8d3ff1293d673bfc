#!/bin/bash
# kubesim fault injection set at runtime through /kubesim/faults, each fault seen by
# a client and counted in /kubesim/stats: error codes per verb/resource (500, 409,
# 429 + Retry-After, 503), latency, watch streams closed after N events or T s, a
# forced 410 on the next watch only, refused connections for T s.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh

kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
faults() { KRAW_FLAGS= kraw PUT /kubesim/faults "$1" >/dev/null && [ "$(kraw_code)" = 200 ]; }
stat() { kraw GET /kubesim/stats | python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {}, {'d': d}))" "$1"; }
for n in a b c; do kraw POST /api/v1/nodes "{\"metadata\":{\"name\":\"$n\"}}" >/dev/null; done

check "500 rule on list nodes" faults '{"rules":[{"verb":"list","resource":"nodes","rate":1,"code":500}]}'
out=$(kraw GET /api/v1/nodes)
check "list nodes answered 500 with an InternalError Status" bash -c "[ $(kraw_code) = 500 ] && grep -q '\"reason\":\"InternalError\"' <<<'$out'"
check "get of one node is not affected (rule is per verb)" curl -sf -o /dev/null "$KUBESIM_URL/api/v1/nodes/a"
check "409 rule on create configmaps" faults '{"rules":[{"verb":"create","resource":"configmaps","rate":1,"code":409}]}'
kraw POST /api/v1/namespaces/default/configmaps '{"metadata":{"name":"x"}}' >/dev/null
check "create configmap answered 409" test "$(kraw_code)" = 409
check "429 with Retry-After" faults '{"rules":[{"verb":"get","resource":"*","rate":1,"code":429,"retryAfter":7}]}'
check "Retry-After: 7 header" bash -c "curl -sD - -o /dev/null $KUBESIM_URL/api/v1/nodes/a | grep -qi '^retry-after: 7'"
check "stats: faultsInjected counts every injected fault" test "$(stat 'd["faultsInjected"]')" -ge 3

check "latency 400 ms on every request" faults '{"latencyMs":400}'
t0=$(date +%s%N); curl -sf "$KUBESIM_URL/api/v1/nodes/a" >/dev/null; t1=$(date +%s%N)
check "a request takes at least the injected latency" test $(((t1 - t0) / 1000000)) -ge 400

check "close watches after 2 events" faults '{"watch":{"closeAfterEvents":2}}'
out=$(curl -sN --max-time 20 "$KUBESIM_URL/api/v1/nodes?watch=1&timeoutSeconds=15")
check "watch stream ended by the server after 2 events (3 nodes exist; the initial ADDED events count)" test "$(grep -c '"type":"ADDED"' <<<"$out")" = 2
check "close watches after 1 s" faults '{"watch":{"closeAfterSeconds":1}}'
s0=$SECONDS
curl -sN --max-time 20 "$KUBESIM_URL/api/v1/nodes?watch=1&timeoutSeconds=15" >/dev/null
check "idle watch closed by the server long before its timeoutSeconds" test $((SECONDS - s0)) -lt 10
check "force 410 on the next watch" faults '{"watch":{"force410":1}}'
out=$(curl -sN --max-time 10 "$KUBESIM_URL/api/v1/nodes?watch=1&resourceVersion=1&timeoutSeconds=1")
check "that watch gets an in-stream ERROR 410 Expired" grep -q '"type":"ERROR".*"code":410' <<<"$out"
out=$(curl -sN --max-time 10 "$KUBESIM_URL/api/v1/nodes?watch=1&resourceVersion=1&timeoutSeconds=1")
check "the following watch does not" bash -c "! grep -q '\"code\":410' <<<'$out'"
check "stats: watch-410 counted" test "$(stat 'd["faults"]["watch-410"]["nodes"]')" = 1

check "refuse connections for 2 s" faults '{"refuseConnectionsSeconds":2}'
check "a connection during the window fails" bash -c "! curl -sf --max-time 5 $KUBESIM_URL/healthz >/dev/null"
check "connections accepted again after the window" wait_for 10 curl -sf "$KUBESIM_URL/healthz"
check "stats: refused connections counted" test "$(stat 'd["connectionsRefused"]')" -ge 1
faults '{}'
check "faults cleared: list works" bash -c "curl -sf $KUBESIM_URL/api/v1/nodes >/dev/null"
kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
