#!/bin/bash
# kubesim fault injection set at runtime through /kubesim/faults, each fault seen by
# a client and counted in /kubesim/stats: error codes per verb/resource (500, 409,
# 429 + Retry-After, 503), latency, watch streams closed after N events or T s, a
# forced 410 on the next watch only, refused connections for T s; rules matching a
# path prefix (discovery documents included), answering with a given body (a lying
# 200: {}, null, a Status, truncated JSON), spent after N faults.
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
# ---- path prefixes, discovery, lying bodies, spent rules ----
check "one 404 for the apps/v1 discovery document" faults '{"rules":[{"verb":"discovery","path":"/apis/apps/v1","code":404,"times":1}]}'
kraw GET /apis/apps/v1 >/dev/null
check "discovery of apps/v1 answered 404" test "$(kraw_code)" = 404
check "the rule is spent: the next discovery of apps/v1 answers 200" bash -c "curl -sf $KUBESIM_URL/apis/apps/v1 | grep -q APIResourceList"
check "other discovery documents untouched" bash -c "curl -sf $KUBESIM_URL/api/v1 | grep -q APIResourceList"
check "stats: the discovery fault counted" test "$(stat 'd["faults"]["discovery"]["-"]')" = 1
lies_with() { local out; out=$(kraw GET /api/v1/nodes); [ "$(kraw_code)" = 200 ] && [ "$out" = "$1" ]; }
for body in '{}' 'null' '{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}' '{"kind":"NodeList","items":[{"meta'; do
	faults "{\"rules\":[{\"verb\":\"list\",\"path\":\"/api/v1/nodes\",\"code\":200,\"body\":$(jq -Rn --arg b "$body" '$b')}]}"
	check "lying 200 for list nodes with body $body" lies_with "$body"
done
check "a lying answer leaves get alone" bash -c "curl -sf $KUBESIM_URL/api/v1/nodes/a | jq -e '.metadata.name == \"a\"' >/dev/null"
reads_back() { kraw GET /kubesim/faults | jq -e '.rules[0].path == "/api/v1/nodes" and (.rules[0].body | startswith("{\"kind\":\"NodeList\""))' >/dev/null; }
check "the rule reads back with its path and body" reads_back
check "a path prefix covers every version and resource under it" faults '{"rules":[{"path":"/apis/apps/","code":503}]}'
kraw GET /apis/apps/v1/daemonsets >/dev/null; c1=$(kraw_code)
kraw GET /apis/apps/v1 >/dev/null; c2=$(kraw_code)
kraw GET /api/v1/nodes >/dev/null; c3=$(kraw_code)
check "…daemonsets 503, apps/v1 discovery 503, nodes 200 ($c1 $c2 $c3)" test "$c1 $c2 $c3" = "503 503 200"
check "a 2xx without a body is refused" bash -c "! curl -sf -X PUT -d '{\"rules\":[{\"code\":200}]}' $KUBESIM_URL/kubesim/faults >/dev/null"
faults '{}'
check "faults cleared: list works" bash -c "curl -sf $KUBESIM_URL/api/v1/nodes >/dev/null"
kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
