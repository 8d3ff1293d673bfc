#!/bin/bash
# /metrics as a Prometheus in the cluster meets it, on the controller pod as shipped
# (deploy/controller/deployment.yaml: the "gpukmm" container's --metrics-listen, HTTPS)
# and on two node profiles, against kubesim enforcing the shipped RBAC (TokenReview;
# SubjectAccessReview by its RBAC authorizer) and fake-kmm:
#  - who may read: no token or an unknown one 401, a token not bound to
#    gpukmm-metrics-reader 403, one bound to it 200; a review the API server fails is a
#    503 and is not kept; the probe port has no /metrics; statusd's reviews need only
#    the shipped RBAC (no call refused)
#  - `promtool check metrics` is clean on the controller's and a node's page, and every
#    service contributes families to them
#  - the domain metrics say what the status says (KMM 2/2, Ready, GPU nodes by module
#    source, operands, a blocked deletion and its end); API, reconcile, watch and
#    admission metrics move
#  - `promtool check rules` and `promtool test rules` on deploy/prometheus/prometheusrule.yaml
#  - every metric the dashboard and the rules name is on those pages (the webhook
#    container's too: served here on loopback with --metrics-insecure, since in the
#    shipped pod nobody there can review a token)
# promtool comes with Debian's prometheus package (tools/deps.sh): without it this fails.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/nodeprofile.sh
NS=intel-gpu-base-operator
CP=gpu-kmm
FAILED=0
D=$(mktemp -d "${TMPDIR:-/tmp}/metrics.XXXXXX") || exit 1
chmod 700 "$D"
SUP_PID= WSUP_PID= FK_PID=
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; FAILED=1; }
check() { local n=$1; shift; if "$@" >/dev/null 2>&1; then ok "$n"; else notok "$n"; fi; }
teardown() {
	stop_pid "$SUP_PID" 10
	[ "$STOP_RC" = 0 ] || notok "the controller exits 0 on SIGTERM (rc $STOP_RC)"
	stop_pid "$WSUP_PID" 10
	[ "$STOP_RC" = 0 ] || notok "the webhook container's supervisor exits 0 on SIGTERM (rc $STOP_RC)"
	NP_CHECK=1 np_stop_all >"$D/np-stop.out" # (not in a pipe: wait needs its own children)
	grep '^not ok' "$D/np-stop.out" && FAILED=1
	stop_pid "$FK_PID" 10
	kubesim_rbac_verdict "$NS" || FAILED=1
	san_check "$D"/*.log "$D"/np/*.log || FAILED=1
	[ "$FAILED" = 0 ] || log_tails 40 "$D"/*.log "$D"/np/*.log
	kubesim_stop
	rm -rf "$D"
	exit $FAILED
}
if ! command -v promtool >/dev/null 2>&1; then
	echo "not ok - promtool installed (Debian's prometheus package: make deps)"
	exit 1
fi

# under the shipped RBAC; the scrapers: "prometheus" bound to gpukmm-metrics-reader as
# deploy/prometheus binds Prometheus, "prometheus-2" too, "nobody" not
printf '%s\n' 'prometheus,prometheus,uid-1,"monitoring"' 'prometheus-2,prometheus-2,uid-2,"monitoring"' \
	'nobody,nobody,uid-3,"viewers"' >"$D/users.csv"
KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start --token-auth-file "$D/users.csv" || { echo "not ok - kubesim starts"; exit 1; }
trap teardown EXIT
export KUBECTL KUBESIM_URL KUBESIM_DIR
. tests/lib/shipped.sh
shipped_ca || { echo "not ok - openssl test CA"; exit 1; }
check "namespace, CRDs, the shipped RBAC, nodes, fake-kmm and the policy's DaemonSets" shipped_cluster
check "the scrapers' group bound to gpukmm-metrics-reader" \
	k create clusterrolebinding scrapers --clusterrole=gpukmm-metrics-reader --group=monitoring

mapfile -t ARGS < <(shipped_args gpukmm)
mapfile -t WARGS < <(shipped_args webhook)
check "the shipped Deployment serves /metrics with --metrics-listen (HTTPS, no --metrics-insecure)" bash -c \
	"printf '%s\n' ${ARGS[*]} | grep -q '^--metrics-listen=' && ! printf '%s\n' ${ARGS[*]} ${WARGS[*]} | grep -q insecure"
"$GPUKMM_BIN/gpukmm" "${ARGS[@]}" --kubeconfig "$D/kubeconfig" >"$D/gpukmm.log" 2>&1 &
SUP_PID=$!
"$GPUKMM_BIN/gpukmm" "${WARGS[@]}" --metrics-insecure --metrics-listen 127.0.0.1:0 >"$D/gpukmm-webhook.log" 2>&1 &
WSUP_PID=$!
np_init "$D" "$D/node-kubeconfig" "$NS"
NP_LOG_LEVEL=info NP_SUP_ARGS="--metrics-listen 127.0.0.1:0" np_start gpu-1 6.8.0-45-generic
NP_LOG_LEVEL=info NP_SUP_ARGS="--metrics-listen 127.0.0.1:0" np_start gpu-2 5.14.0-427.13.1.el9_4.x86_64
np_follow_start
check "controller ready" wait_until 60 grep -q 'ready: 7/7 required services ready' "$D/gpukmm.log"
check "webhook container ready" wait_until 60 grep -q 'ready: 1/1 required services ready' "$D/gpukmm-webhook.log"
check "webhook configurations applied" wait_until 10 shipped_webhooks "$WSUP_PID"
listen_port() { grep -o 'metrics: listening on 127.0.0.1:[0-9]*' "$1" 2>/dev/null | head -1 | grep -o '[0-9]*$'; }
MPORT=$(listen_port "$D/gpukmm.log")
WPORT=$(listen_port "$D/gpukmm-webhook.log")
HPORT=$(grep -o 'http: listening on 127.0.0.1:[0-9]*' "$D/gpukmm.log" | head -1 | grep -o '[0-9]*$')
wait_until 20 listen_port "$D/np/node-gpu-1.log" >/dev/null
NPORT=$(listen_port "$D/np/node-gpu-1.log")
scrape() { # PORT TOKEN OUT: prints the HTTP code
	local t=()
	[ -n "$2" ] && t=(--oauth2-bearer "$2")
	curl -sk -o "$3" -w '%{http_code}' "${t[@]}" "https://127.0.0.1:$1/metrics"
}
code_is() { [ "$(scrape "$1" "$2" "$D/out")" = "$3" ]; }

# ---- the cluster at work: the admin applies the policy, KMM loads the driver -----------
bad=$(sed 's/^  name: gpu-kmm$/  name: gpu-kmm-name-far-too-long/' deploy/examples/clusterpolicy-kmm.yaml)
k apply -f - <<<"$bad" >/dev/null 2>&1
check "kubectl apply -f deploy/examples/clusterpolicy-kmm.yaml" k apply -f deploy/examples/clusterpolicy-kmm.yaml
for d in device-plugin gpu-dra xpu-manager; do
	kraw PATCH "/apis/apps/v1/namespaces/$NS/daemonsets/$CP-$d/status" \
		'{"status":{"desiredNumberScheduled":2,"numberReady":2,"numberAvailable":2}}' application/merge-patch+json >/dev/null
done
st() { k get clusterpolicy "$CP" -o json | jq -e "$1"; }
check "status: KMM 2/2, OoT xe on both GPU nodes" wait_until 60 st \
	'.status.kmmStatus == "2/2" and .status.nodes.ootLoaded == 2 and .status.devicePluginStatus == "2/2"'

# ---- who may read /metrics ----------------------------------------------------------------
check "controller: no token: 401" code_is "$MPORT" "" 401
check "controller: a token the API server does not know: 401" code_is "$MPORT" not-a-token 401
check "controller: a token not bound to gpukmm-metrics-reader: 403" code_is "$MPORT" nobody 403
check "controller: an allowed token: 200" code_is "$MPORT" prometheus 200
check "controller: plain HTTP is not served on the metrics port" bash -c \
	"[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$MPORT/metrics)\" != 200 ]"
check "controller: the probe port has no /metrics (404)" bash -c \
	"[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$HPORT/metrics)\" = 404 ]"
kraw PUT /kubesim/faults '{"rules":[{"verb":"create","resource":"tokenreviews","rate":1,"code":500}]}' >/dev/null
check "controller: the API server fails the TokenReview: 503" code_is "$MPORT" prometheus-2 503
check "controller: a known verdict is still served from the cache meanwhile" code_is "$MPORT" prometheus 200
kraw PUT /kubesim/faults '{"rules":[]}' >/dev/null
check "controller: the failed review was not kept: 200 once the API server answers" code_is "$MPORT" prometheus-2 200
check "node: no token 401, a token without the right 403, an allowed one 200" bash -c \
	"$(declare -f scrape code_is); D=$D; code_is $NPORT '' 401 && code_is $NPORT nobody 403 && code_is $NPORT prometheus 200"

# ---- a blocked deletion: a GPU in use, the policy drops kernelModule --------------------------
kraw POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"user"}}' >/dev/null
kraw POST /apis/resource.k8s.io/v1/namespaces/user/resourceclaims \
	'{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"job","namespace":"user"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.intel.com"}}]}}}' >/dev/null
kraw PATCH /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/job/status \
	'{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.intel.com","pool":"gpu-1","device":"gpu-0"}]}}}}' \
	application/merge-patch+json >/dev/null
k patch clusterpolicy "$CP" --type json -p '[{"op":"remove","path":"/spec/kernelModule"}]' >/dev/null
page() { scrape "$MPORT" prometheus "$D/controller.prom" >/dev/null; }
has() { page && grep -qxF "$1" "$D/controller.prom"; }
check "gpukmm_policy_condition_reason says DeletionBlocked while the claim is allocated" wait_until 30 has \
	"gpukmm_policy_condition_reason{service=\"statusd\",policy=\"$CP\",type=\"ModuleLoaded\",reason=\"DeletionBlocked\"} 1"
cp "$D/controller.prom" "$D/blocked.prom"
kraw DELETE /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/job >/dev/null
gone() { page && ! grep -q 'reason="DeletionBlocked"' "$D/controller.prom"; }
check "... and stops saying it once the GPU is released" wait_until 30 gone
# (the nodes' own reports say the unload before the policy comes back: else the wait below
# could pass on the reports from before it, and the status change under the checks after)
check "KMM unloaded xe: no node reports the out-of-tree module" wait_until 60 st '.status.nodes.ootLoaded == 0'
k apply -f deploy/examples/clusterpolicy-kmm.yaml >/dev/null
check "status back: KMM 2/2, Ready" wait_until 60 st \
	'.status.kmmStatus == "2/2" and .status.nodes.ootLoaded == 2 and (.status.conditions[] | select(.type == "Ready") | .status == "True")'

# ---- the pages: promtool, every service, the values --------------------------------------------
# (a service's numbers reach the page with its next heartbeat: wait for the status's)
check "the page follows the status (Ready True, 2 GPU nodes with the OoT module)" wait_until 20 bash -c \
	"$(declare -f scrape page has); D=$D MPORT=$MPORT; has 'gpukmm_policy_condition{service=\"statusd\",policy=\"$CP\",type=\"Ready\",status=\"True\"} 1' &&
	 grep -qxF 'gpukmm_policy_gpu_nodes{service=\"statusd\",policy=\"$CP\",module_source=\"oot\"} 2' $D/controller.prom"
node_oot() {
	scrape "$NPORT" prometheus "$D/node.prom" >/dev/null &&
		grep -qxF 'gpukmm_node_module_loaded{service="prober",module="xe",source="oot"} 1' "$D/node.prom"
}
check "node: out-of-tree xe loaded (KMM's, again)" wait_until 20 node_oot
promtool_clean() { local out; out=$(promtool check metrics <"$1" 2>&1) && [ -z "$out" ] || { echo "$out" | sed 's/^/#   /' >&2; return 1; }; }
check "promtool check metrics: the controller's page is clean" promtool_clean "$D/controller.prom"
check "promtool check metrics: the page with a blocked deletion is clean" promtool_clean "$D/blocked.prom"
check "promtool check metrics: a node's page is clean" promtool_clean "$D/node.prom"
curl -s "http://127.0.0.1:$WPORT/metrics" >"$D/webhook.prom"
check "promtool check metrics: the webhook container's page is clean" promtool_clean "$D/webhook.prom"
for s in watcher modmgr gater statusd; do
	check "controller: $s's families are on the page" grep -q "{service=\"$s\"" "$D/controller.prom"
done
check "webhook container: the webhook's families are on its page" grep -q '{service="webhook"' "$D/webhook.prom"
for s in prober statusd; do
	check "node: $s's families are on the page" grep -q "{service=\"$s\"" "$D/node.prom"
done
val() { awk -v s="$2" '$1 == s { print $2; f = 1 } END { if (!f) print "absent" }' "$1"; }
eq() { [ "$(val "$1" "$2")" = "$3" ]; }
gt() { local v; v=$(val "$1" "$2"); [ "$v" != absent ] && awk -v v="$v" -v m="$3" 'BEGIN { exit !(v > m) }'; }
C=$D/controller.prom P="policy=\"$CP\""
# (the wait above saw two series on one page; under ASan a page once still lacked these two:
# read the page again until they are on it as well)
check "KMM desired 2, available 2" wait_until 20 in_shell "page && eq $C 'gpukmm_policy_kmm_desired_nodes{service=\"statusd\",$P}' 2 && eq $C 'gpukmm_policy_kmm_available_nodes{service=\"statusd\",$P}' 2"
check "Ready True" eq "$C" "gpukmm_policy_condition{service=\"statusd\",$P,type=\"Ready\",status=\"True\"}" 1
check "GPU nodes: 2 with the out-of-tree module, none without" bash -c "$(declare -f val eq); eq $C 'gpukmm_policy_gpu_nodes{service=\"statusd\",$P,module_source=\"oot\"}' 2 && eq $C 'gpukmm_policy_gpu_nodes{service=\"statusd\",$P,module_source=\"none\"}' 0"
check "operand device-plugin: 2 of 2 pods ready" bash -c "$(declare -f val eq); eq $C 'gpukmm_policy_operand_ready_pods{service=\"statusd\",$P,operand=\"device-plugin\"}' 2 && eq $C 'gpukmm_policy_operand_desired_pods{service=\"statusd\",$P,operand=\"device-plugin\"}' 2"
check "the leader says so" eq "$C" 'gpukmm_leader{service="watcher"}' 1
check "API requests timed (the watcher's lists)" gt "$C" 'gpukmm_api_request_duration_seconds_count{service="watcher",verb="LIST",code="200"}' 0
check "the watcher's client-side limit stood down: kubesim shows API Priority and Fairness" eq "$C" 'gpukmm_api_client_throttled_seconds_total{service="watcher"}' 0
check "API writes counted (modmgr's Module create)" gt "$C" 'gpukmm_api_requests_total{service="modmgr",verb="POST",code="201"}' 0
check "reconcile passes timed (modmgr, gater)" bash -c "$(declare -f val gt); gt $C 'gpukmm_reconcile_duration_seconds_count{service=\"modmgr\",result=\"success\"}' 0 && gt $C 'gpukmm_reconcile_duration_seconds_count{service=\"gater\",result=\"success\"}' 0"
check "watch relists counted per resource" gt "$C" 'gpukmm_watch_relists_total{service="watcher",resource="nodes"}' 0
check "admissions by result: the too-long name denied, the policy allowed" bash -c "$(declare -f val gt); gt $D/webhook.prom 'gpukmm_webhook_admissions_total{service=\"webhook\",webhook=\"validating\",result=\"denied\"}' 0 && gt $D/webhook.prom 'gpukmm_webhook_admissions_total{service=\"webhook\",webhook=\"validating\",result=\"allowed\"}' 0"
check "admission latency observed" gt "$D/webhook.prom" 'gpukmm_webhook_admission_duration_seconds_count{service="webhook",webhook="validating"}' 0
check "webhook certificate expiry in the future" gt "$D/webhook.prom" 'gpukmm_webhook_cert_expiry_timestamp_seconds{service="webhook"}' "$(date +%s)"
check "token reviews counted: allowed, denied, unauthenticated, error" bash -c "$(declare -f val gt); for r in allowed denied unauthenticated error; do gt $C \"gpukmm_metrics_reviews_total{result=\\\"\$r\\\"}\" 0 || exit 1; done"
V=$("$GPUKMM_BIN/gpukmm" --version | awk '{print $2}')
check "build_info carries the version --version prints ($V)" grep -qxF "gpukmm_build_info{version=\"$V\"} 1" "$C"
check "node: 1 GPU (physical function), no VF" bash -c "$(declare -f val eq); eq $D/node.prom 'gpukmm_node_gpus{service=\"prober\",function=\"pf\"}' 1 && eq $D/node.prom 'gpukmm_node_gpus{service=\"prober\",function=\"vf\"}' 0"

# ---- the alerts -------------------------------------------------------------------------------
mkdir -p "$D/rules"
python3 -c 'import sys, yaml; d = next(x for x in yaml.safe_load_all(open(sys.argv[1])) if x); yaml.safe_dump(d["spec"], open(sys.argv[2], "w"), sort_keys=False)' \
	deploy/prometheus/prometheusrule.yaml "$D/rules/gpukmm.rules.yaml"
cp tests/prometheus/alerts_test.yaml "$D/rules/"
check "promtool check rules deploy/prometheus/prometheusrule.yaml" promtool check rules "$D/rules/gpukmm.rules.yaml"
check "promtool test rules tests/prometheus/alerts_test.yaml" promtool test rules "$D/rules/alerts_test.yaml"

# ---- every metric the dashboard and the rules name, on a live page ------------------------------
names_ok() {
	python3 - "$D/controller.prom" "$D/node.prom" "$D/blocked.prom" "$D/webhook.prom" <<'EOF'
import json, re, sys, yaml
have = set()
for page in sys.argv[1:]:
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", open(page).read(), re.M):
        have.add(m.group(1))
        if m.group(2) == "histogram":
            have.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
def exprs(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k in ("expr", "query", "definition") and isinstance(v, str):
                yield v
            else:
                yield from exprs(v)
    elif isinstance(o, list):
        for v in o:
            yield from exprs(v)
used = {}
for src, doc in (("dashboard", json.load(open("deploy/prometheus/grafana-dashboard.json"))),
                 ("rules", next(x for x in yaml.safe_load_all(open("deploy/prometheus/prometheusrule.yaml")) if x))):
    for e in exprs(doc):
        for n in re.findall(r"\bgpukmm_[a-zA-Z0-9_]+", e):
            used.setdefault(n, set()).add(src)
missing = sorted(n for n in used if n not in have)
for n in missing:
    print(f"#   {n} ({', '.join(sorted(used[n]))}) is on no live page", file=sys.stderr)
print(f"# {len(used)} metric names in the dashboard and the rules, {len(have)} on the pages", file=sys.stderr)
sys.exit(1 if missing or len(used) < 20 else 0)
EOF
}
check "every metric named by the dashboard and the alerts is exported by a running controller or node" names_ok
