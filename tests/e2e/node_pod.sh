#!/bin/bash
# The node pod as shipped (deploy/node/daemonset.yaml): its two containers' arguments and
# environment, only paths and ports changed, run as two supervisors against kubesim under
# the shipped RBAC, with a controller statusd applying what they hand in:
#  - "report" (statusd --mode node, the node ServiceAccount's kubeconfig and the pod's
#    report token) starts; "prober" (no credential of any kind given to it) sends its
#    reports to it through the report container's runtime directory ($GPUKMM_STATUSD);
#  - the Node gets its gpukmm.io labels and report annotation from the controller;
#  - /metrics of both containers over HTTPS, each scraper's token reviewed by the report
#    container's statusd (the prober's supervisor through --metrics-reviewer ipc://...):
#    a bound scraper 200 (the prober's page has the prober's families), no token 401;
#  - both supervisors stop cleanly; no API call of the shipped RBAC refused.
# The prober probes this machine's real root (the shipped args have no --root).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/proc.sh
NS=intel-gpu-base-operator
NODE=node-pod-1
D=$(mktemp -d "${TMPDIR:-/tmp}/nodepod.XXXXXX") || exit 1
chmod 700 "$D"
FAILED=0 RPID= PPID_= SD_PID=
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; FAILED=1; }
check() { # NAME TIMEOUT CMD...
	local n=$1 t=$2
	shift 2
	if wait_until "$t" "$@" >/dev/null 2>&1; then ok "$n"; else nok "$n"; fi
}
teardown() {
	local p
	for p in PPID_ RPID; do
		stop_var "$p" 15
		[ "$STOP_RC" = 0 ] || nok "the $p supervisor exits 0 on SIGTERM (rc $STOP_RC)"
	done
	stop_var SD_PID 10
	kubesim_rbac_verdict "$NS" || FAILED=1
	kubesim_stop >/dev/null 2>&1
	san_check "$D"/*.log || FAILED=1
	[ "$FAILED" = 0 ] || log_tails 30 "$D"/*.log
	rm -rf "$D"
	exit $FAILED
}

printf '%s\n' 'prometheus,prometheus,uid-1,"monitoring"' >"$D/users.csv"
KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start --token-auth-file "$D/users.csv" || { echo "not ok - kubesim starts"; exit 1; }
trap teardown EXIT
k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml \
	-f deploy/crd/gpukmm.io_nodereportrequests.yaml >"$D/apply.log" 2>&1
k wait --for condition=established --timeout=20s crd/nodereportrequests.gpukmm.io >>"$D/apply.log" 2>&1
kubesim_kubeconfigs "$D" "$NS" || nok "the shipped RBAC and the ServiceAccounts' kubeconfigs"
k create clusterrolebinding scrapers --clusterrole=gpukmm-metrics-reader --group=monitoring >>"$D/apply.log" 2>&1
kraw POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$NODE\",\"labels\":{\"kubernetes.io/arch\":\"amd64\"}}}" >/dev/null
kubesim_pod_token "$NS" gpukmm-node "$NODE" "gpukmm-node-$NODE" gpukmm.io/node-report "$D/report-token" ||
	nok "the pod's report token"

# A container of the DaemonSet: its args (one per line) then "ENV NAME=VALUE" lines, the
# paths below $D: each runtime dir $D/run-CONTAINER, the report container's as the prober
# mounts it (/run/gpukmm-report) too; every listener on 127.0.0.1:0; text logs.
shipped_node() { # CONTAINER
	python3 - "$D" "$1" "$NODE" "$NS" <<'PY'
import sys, yaml
d, name, node, ns = sys.argv[1:5]
o = next(x for x in yaml.safe_load_all(open("deploy/node/daemonset.yaml")) if x)
c = next(c for c in o["spec"]["template"]["spec"]["containers"] if c["name"] == name)
def path(v):
    return v.replace("/run/gpukmm-report", f"{d}/run-report").replace("/run/gpukmm", f"{d}/run-{name}")
for a in c["args"]:
    k = a.split("=", 1)[0]
    a = {"--http-listen": f"{k}=127.0.0.1:0", "--metrics-listen": f"{k}=127.0.0.1:0", "--log-format": None}.get(k, a)
    if a:
        print(path(a))
for e in c.get("env", []):
    v = {"NODE_NAME": node, "OPERATOR_NAMESPACE": ns}.get(e["name"], e.get("value"))
    print(f"ENV {e['name']}={path(v)}")
PY
}
start() { # CONTAINER EXTRA-ENV... -- EXTRA-ARGS...: that container's supervisor; its pid on stdout
	local c=$1 args=() envs=() l
	shift
	while read -r l; do
		case $l in ENV\ *) envs+=("${l#ENV }") ;; *) args+=("$l") ;; esac
	done < <(shipped_node "$c")
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	env "${envs[@]}" GPUKMM_LOG_LEVEL=info "$GPUKMM_BIN/gpukmm" "${args[@]}" "$@" >"$D/$c.log" 2>&1 &
	echo $!
}
# the report container runs with the node ServiceAccount's kubeconfig instead of the
# in-cluster token mount, and its report token where the kubelet would project it
RPID=$(start report "GPUKMM_REPORT_TOKEN_FILE=$D/report-token" -- --kubeconfig "$D/node-kubeconfig")
check "the report container is ready (statusd --mode node alone)" 30 grep -q 'ready: 1/1 required services ready' "$D/report.log"
PPID_=$(start prober)
check "the prober container is ready (the prober alone)" 30 grep -q 'ready: 1/1 required services ready' "$D/prober.log"
check "the prober gets no credential (no token file, kubeconfig or report token in its environment)" 1 \
	bash -c "! tr '\0' '\n' </proc/$(pgrep -P "$PPID_" -x gpukmm-prober)/environ | grep -qE '^(GPUKMM_TOKEN_FILE|KUBECONFIG|GPUKMM_REPORT_TOKEN_FILE)='"
"$GPUKMM_BIN/gpukmm-statusd" --mode controller --kubeconfig "$D/kubeconfig" --namespace "$NS" \
	--listen "ipc://$D/ctrl-statusd.sock" >>"$D/ctrl-statusd.log" 2>&1 &
SD_PID=$!
node_has() { kraw GET "/api/v1/nodes/$NODE" | jq -e ".metadata | $1" >/dev/null; }
check "the prober's report reaches the report container, the controller writes the Node" 30 node_has \
	"(.labels[\"gpukmm.io/gpu.present\"] != null) and ((.annotations[\"gpukmm.io/node-report\"] | fromjson | .nodeName) == \"$NODE\")"

port_of() { grep -o 'metrics: listening on 127.0.0.1:[0-9]*' "$D/$1.log" 2>/dev/null | head -1 | grep -o '[0-9]*$'; }
scrape() { # CONTAINER OUT [TOKEN]: HTTP code, the body in OUT
	curl -sk -o "$2" -w '%{http_code}' ${3:+-H "Authorization: Bearer $3"} "https://127.0.0.1:$(port_of "$1")/metrics"
}
for c in report prober; do
	check "$c container: /metrics listens (HTTPS)" 10 port_of "$c"
	check "$c container: a bound scraper's token gets the page (200)" 15 \
		eval "[ \"\$(scrape $c $D/$c.metrics prometheus)\" = 200 ]"
	[ "$(scrape "$c" "$D/$c.401")" = 401 ] && ok "$c container: no token, 401" || nok "$c container: no token, 401"
done
has() { [ "$(scrape "$1" "$D/$1.metrics" prometheus)" = 200 ] && grep -q "^$2{" "$D/$1.metrics"; } # (families come with heartbeats)
check "the prober container's page has the prober's families" 15 has prober gpukmm_prober_probes_total
check "the report container's page has the node statusd's" 15 has report gpukmm_statusd_writes_total
exit $FAILED
