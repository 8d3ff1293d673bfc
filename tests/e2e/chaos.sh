#!/bin/bash
# Chaos: two controller supervisors (`gpukmm --profile controller`, leader
# election on one Lease) and one `gpukmm --profile node` per GPU node (prober on
# a fake root + node-mode statusd, tests/lib/nodeprofile.sh) run against kubesim
# + fake-kmm. While a driver changes the policies (add/remove kernelModule, image
# changes, version toggles, policies deleted and recreated, GPU ResourceClaims
# allocated/freed, nodes joining and cordoned), kill -9 random services of every
# supervisor, whole supervisors (restarted like systemd / the DaemonSet would),
# and the current leader (the other controller must take the Lease over), inject
# API faults through kubesim (5xx, 429, 409, cut watches, forced 410, latency) and
# restart kubesim on its --state-dir. Then the faults stop, the claims are freed,
# and within a deadline the cluster must equal what a fresh, calm computation
# gives, status.nodes included (tests/lib/chaos_check.sh reads only the API
# server); finally a freshly started controller must find nothing to write.
#   make check: short run (CHAOS_SECONDS, default 15)
#   make chaos: CHAOS_LONG=1, 300 s of chaos; CHAOS_SEED=N repeats a run;
#   CHAOS_KEEP=1 keeps the logs; CHAOS_FRESH_LOG_LEVEL=debug for the fresh controller
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/nodeprofile.sh
. tests/lib/controller.sh
. tests/lib/metrics.sh
# The DaemonSets here stand in for an operator's (their own nodeSelector key must
# survive the gater): gpukmm-opmgr, which would adopt and re-render them, is left
# out (its own chaos-free tests: opmgr*.sh).
export CTRL_NO_OPMGR=1
NS=intel-gpu-base-operator
LONG=${CHAOS_LONG:-}
DUR=${CHAOS_SECONDS:-$([ -n "$LONG" ] && echo 300 || echo 15)}
CONVERGE=${CHAOS_CONVERGE_SECONDS:-$([ -n "$LONG" ] && echo 180 || echo 60)}
SEED=${CHAOS_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$SEED
CHECK="$GPUKMM_SRC/tests/lib/chaos_check.sh"
CHAOS_GATER=; [ -x "$GPUKMM_BIN/gpukmm-gater" ] && CHAOS_GATER=1
CHAOS_NODES=1
MAX_NODES=$([ -n "$LONG" ] && echo 8 || echo 5)
export CHAOS_GATER CHAOS_NODES
D=$(mktemp -d "${TMPDIR:-/tmp}/gpukmm-chaos.XXXXXX") || exit 1
chmod 700 "$D"
FAILED=0
FK_PID=
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; FAILED=1; }

cleanup() {
	local c
	for c in "${!SUP[@]}"; do stop_pid "${SUP[$c]}"; done
	SUP=()
	np_stop_all
	[ -n "$FK_PID" ] && stop_pid "$FK_PID"
	FK_PID=
	kubesim_rbac_verdict "$NS" || FAILED=1 # (since kubesim's last restart: its record is in memory)
	kubesim_stop >/dev/null 2>&1
	san_check "$D"/*.log "$D"/np/*.log
	[ "$FAILED" = 0 ] || log_tails 30 "$D"/*.log "$D"/np/*.log
	[ -n "${CHAOS_KEEP:-}" ] && echo "# kept $D" || rm -rf "$D"
}
trap cleanup EXIT

# ---- the cluster ------------------------------------------------------------------
# under the shipped RBAC: each profile with its ServiceAccount's token (they survive
# kubesim's restarts: its signing key is in the state dir), fake-kmm as the admin
KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start --state-dir "$D/state" || { nok "kubesim starts"; exit 1; }
echo "# seed $SEED, ${DUR}s of chaos, converge within ${CONVERGE}s, gater: ${CHAOS_GATER:-not built}, up to $MAX_NODES GPU nodes"
ctrl_cluster || { nok "the shipped RBAC and the ServiceAccounts' kubeconfigs"; exit 1; }
# (the Node and its node profile's pod token are the driver's own writes: retried while
# faults are injected, else a node profile runs without its Node or not at all)
mknode() { # NAME KERNEL
	kraw_until "201 409" POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",\"labels\":{\"kubernetes.io/arch\":\"amd64\",\"intel.feature.node.kubernetes.io/gpu\":\"true\"}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" >/dev/null &&
	kraw_until 200 PATCH "/api/v1/nodes/$1/status" "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" application/merge-patch+json >/dev/null
}
KERNELS=(6.8.0-45-generic 5.14.0-427.13.1.el9_4.x86_64 6.8.0-50-generic)
np_init "$D" "$D/node-kubeconfig" "$NS"
addnode() { # NAME KERNEL: the Node and its node profile
	mknode "$1" "$2" || nok "Node $1 created"
	np_start "$1" "$2" || nok "node profile of $1 starts"
}
POLICIES=(chaos-a chaos-b)
for p in "${POLICIES[@]}"; do
	for ds in device-plugin gpu-dra xpu-manager; do
		kraw POST "/apis/apps/v1/namespaces/$NS/daemonsets" "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"$p-$ds\",\"namespace\":\"$NS\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"$p-$ds\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"$p-$ds\"}},\"spec\":{\"nodeSelector\":{\"intel.feature.node.kubernetes.io/gpu\":\"true\"},\"containers\":[{\"name\":\"c\",\"image\":\"img\"}]}}}}" >/dev/null
	done
done

fk_start() {
	"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/kmm-kubeconfig" --load-delay-ms 100 --unload-delay-ms 100 \
		--log-level warn 2>>"$D/fake-kmm.log" &
	FK_PID=$!
}
fk_start
for i in 1 2 3; do addnode "gpu-$i" "${KERNELS[$((i % 3))]}"; done
NEXT_NODE=4
np_follow_start

# the controller profile without the webhook (its ephemeral port would change on
# every restart; admission is covered by the demo and the webhook tests), twice,
# leader-elected (tests/lib/controller.sh)
ctrl_start A
ctrl_start B
wait_until 60 ctrl_ready A && wait_until 60 ctrl_ready B && ok "two controllers ready" || { nok "two controllers ready"; exit 1; }
wait_until 30 has_leader && ok "one controller leads (Lease held by $(holder))" || nok "a controller takes the Lease"

# ---- the driver -------------------------------------------------------------------
KM() { # IMAGE_TAG VERSION(or "")
	local v=${2:+,\"version\":\"$2\"}
	echo "{\"moduleName\":\"xe\",\"kernelMappings\":[{\"regexp\":\"^6\\\\.8\\\\.0-[0-9]+-generic\$\",\"containerImage\":\"registry.example.com/xe:$1-\${KERNEL_FULL_VERSION}\"},{\"regexp\":\"^5\\\\.14\\\\.\",\"containerImage\":\"registry.example.com/xe-rhel:$1\"}]$v}"
}
cp_path() { echo "/apis/intel.com/v1alpha1/clusterpolicies/$1"; }
mkpolicy() {
	kraw POST /apis/intel.com/v1alpha1/clusterpolicies "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"$1\"},\"spec\":{\"resourceRegistration\":\"dp\",\"kernelModule\":$(KM v1 "")}}" >/dev/null
}
for p in "${POLICIES[@]}"; do mkpolicy "$p"; done
# a version cannot be added to or dropped from a Module in place: the driver
# toggles it freely (modmgr recreates), but keeps a policy's version-label
# (ordered upgrade) out of scope: nodes are not labelled, so a versioned Module
# loads nowhere — the checker then wants Ready=False with 0/0
declare -A VER=()
CLAIMS=0 KILLS=0 FAULTS=0 RESTARTS=0 SUPKILLS=0 NODESUPKILLS=0 LEADERKILLS=0 ACTIONS=0
claim_new() {
	claim_alloc user "claim-$RANDOM"
	CLAIMS=$((CLAIMS + 1))
}
claims_list() { kraw GET /apis/resource.k8s.io/v1/namespaces/user/resourceclaims | jq -r '.items[]?.metadata.name' 2>/dev/null; }
claim_free_one() {
	local c
	c=$(claims_list | shuf -n1 --random-source=<(yes "$RANDOM"))
	[ -n "$c" ] && kraw DELETE "/apis/resource.k8s.io/v1/namespaces/user/resourceclaims/$c" >/dev/null
}
sup_dirs() { # the runtime dirs of every running supervisor
	local c n
	for c in "${!SUP[@]}"; do echo "$D/run-$c"; done
	for n in $(np_nodes); do echo "$NP_DIR/$n/run"; done
}
kill_child() { # any service of any supervisor, controller or node
	local pids pid
	pids=$(sup_child_pids $(sup_dirs))
	[ -n "$pids" ] || return 0
	pid=$(shuf -n1 --random-source=<(yes "$RANDOM") <<<"$pids")
	kill -KILL "$pid" 2>/dev/null && KILLS=$((KILLS + 1))
}
kill9() { # PID RUNTIME_DIR: sup_kill9, its children must die with it (PR_SET_PDEATHSIG)
	sup_kill9 "$1" "$2" || nok "children of a killed supervisor exit (PDEATHSIG)"
}
kill_controller() { # CONTROLLER: kill -9 it, start it again (a new identity)
	kill9 "${SUP[$1]}" "$D/run-$1"
	ctrl_start "$1"
	SUPKILLS=$((SUPKILLS + 1))
}
kill_node_sup() { # a random node supervisor: kill -9, start again
	local n
	n=$(np_nodes | shuf -n1 --random-source=<(yes "$RANDOM"))
	[ -n "$n" ] || return 0
	kill9 "${NP_PID[$n]}" "$NP_DIR/$n/run"
	np_start "$n"
	NODESUPKILLS=$((NODESUPKILLS + 1))
}
FAILOVERS=() LATE_FAILOVERS=0
kill_leader() { # kill -9 the leading controller: the other must take the Lease over
	local l o t0
	l=$(leader)
	[ -n "$l" ] || return 0
	o=$([ "$l" = A ] && echo B || echo A)
	t0=$(date +%s%N)
	kill9 "${SUP[$l]}" "$D/run-$l"
	LEADERKILLS=$((LEADERKILLS + 1))
	# the Lease lasts 4 s; under API faults a takeover may take longer: give it 20 s
	if wait_until 20 eval "[ \"\$(holder)\" = ctrl-$o-${GEN[$o]} ]"; then
		FAILOVERS+=($(( ($(date +%s%N) - t0) / 1000000 )))
	else
		LATE_FAILOVERS=$((LATE_FAILOVERS + 1))
	fi
	ctrl_start "$l"
}
faults_set() { kraw PUT /kubesim/faults "$1" >/dev/null && FAULTS=$((FAULTS + 1)); }
faults_clear() { kraw PUT /kubesim/faults '{"rules": []}' >/dev/null; }
random_faults() {
	local codes=(500 503 429 409) c rate
	c=${codes[$((RANDOM % 4))]}
	rate=0.$((1 + RANDOM % 5))
	case $((RANDOM % 4)) in
	0) faults_set "{\"seed\": $RANDOM, \"rules\": [{\"verb\": \"*\", \"resource\": \"*\", \"rate\": $rate, \"code\": $c, \"retryAfter\": 1}]}" ;;
	1) faults_set "{\"seed\": $RANDOM, \"rules\": [{\"verb\": \"patch\", \"resource\": \"*\", \"rate\": 0.5, \"code\": 409}, {\"verb\": \"update\", \"resource\": \"*\", \"rate\": 0.5, \"code\": 409}]}" ;;
	2) faults_set "{\"seed\": $RANDOM, \"watch\": {\"closeAfterEvents\": $((1 + RANDOM % 5))}}" ;;
	3) faults_set "{\"seed\": $RANDOM, \"watch\": {\"force410\": 1}, \"latencyMs\": $((RANDOM % 200))}" ;;
	esac
}
kubesim_restart() {
	local port=$KUBESIM_PORT line=""
	kill -TERM "$KUBESIM_PID"; wait "$KUBESIM_PID" 2>/dev/null
	rm -f "$KUBESIM_DIR/ready"; mkfifo "$KUBESIM_DIR/ready"
	"$KUBESIM_BIN" --listen "127.0.0.1:$port" "${KUBESIM_ARGS[@]}" >"$KUBESIM_DIR/ready" 2>>"$KUBESIM_DIR/kubesim.log" &
	KUBESIM_PID=$!
	read -r -t 20 line <"$KUBESIM_DIR/ready" || { nok "kubesim restarts on port $port"; return 1; }
	RESTARTS=$((RESTARTS + 1))
}
policy_action() {
	local p=${POLICIES[$((RANDOM % 2))]} km exists
	exists=$(kraw GET "$(cp_path "$p")" | jq -r '.kind // empty')
	if [ "$exists" != ClusterPolicy ]; then mkpolicy "$p"; VER[$p]=; return; fi
	case $((RANDOM % 7)) in
	0 | 1) km=$(KM "v$((RANDOM % 3))" "${VER[$p]:-}")
	   kraw PATCH "$(cp_path "$p")" "{\"spec\":{\"kernelModule\":$km}}" application/merge-patch+json >/dev/null ;;
	2) kraw PATCH "$(cp_path "$p")" '{"spec":{"kernelModule":null}}' application/merge-patch+json >/dev/null ;;
	3) if [ -n "${VER[$p]:-}" ]; then VER[$p]=; else VER[$p]=1.$((RANDOM % 3)); fi
	   kraw PATCH "$(cp_path "$p")" "{\"spec\":{\"kernelModule\":$(KM v1 "${VER[$p]}")}}" application/merge-patch+json >/dev/null ;;
	4) kraw DELETE "$(cp_path "$p")" >/dev/null ;;
	5) claim_new ;;
	6) claim_free_one ;;
	esac
}
node_action() {
	case $((RANDOM % 3)) in
	0) [ $NEXT_NODE -le "$MAX_NODES" ] && addnode "gpu-$NEXT_NODE" "${KERNELS[$((RANDOM % 3))]}" && NEXT_NODE=$((NEXT_NODE + 1)) ;;
	1) kraw PATCH "/api/v1/nodes/gpu-$((1 + RANDOM % 3))" '{"spec":{"unschedulable":true}}' application/merge-patch+json >/dev/null ;;
	2) kraw PATCH "/api/v1/nodes/gpu-$((1 + RANDOM % 3))" '{"spec":{"unschedulable":null}}' application/merge-patch+json >/dev/null ;;
	esac
}

T_SETUP=$SECONDS
end=$((SECONDS + DUR))
mid=$((SECONDS + DUR / 2))
while [ $SECONDS -lt $end ]; do
	ACTIONS=$((ACTIONS + 1))
	# every run, however short, has at least one leader failover and one node
	# supervisor kill (from the middle on)
	if [ $SECONDS -ge $mid ] && [ $LEADERKILLS = 0 ]; then kill_leader; continue; fi
	if [ $SECONDS -ge $mid ] && [ $NODESUPKILLS = 0 ]; then kill_node_sup; continue; fi
	r=$((RANDOM % 100))
	if [ $r -lt 45 ]; then policy_action
	elif [ $r -lt 53 ]; then node_action
	elif [ $r -lt 71 ]; then kill_child
	elif [ $r -lt 83 ]; then random_faults
	elif [ $r -lt 88 ]; then faults_clear
	elif [ $r -lt 91 ]; then kubesim_restart
	elif [ $r -lt 94 ]; then kill_node_sup
	elif [ $r -lt 97 ]; then kill_leader
	else kill_controller "$( ((RANDOM % 2)) && echo A || echo B)"
	fi
	sleep 0.$((1 + RANDOM % 4))
done

# ---- calm: no faults, no claims, every node schedulable -----------------------------
faults_clear
for c in A B; do
	kill -0 "${SUP[$c]}" 2>/dev/null && ok "controller $c survived the chaos (or its restarts)" ||
		{ nok "controller $c is running after the chaos"; tail -5 "$D/controller-$c.log" | sed 's/^/#   /'; ctrl_start "$c"; }
done
for n in $(np_nodes); do
	kill -0 "${NP_PID[$n]}" 2>/dev/null || { nok "node supervisor $n is running after the chaos"; np_start "$n"; }
done
for c in $(claims_list); do kraw DELETE "/apis/resource.k8s.io/v1/namespaces/user/resourceclaims/$c" >/dev/null; done
for n in $(kraw GET /api/v1/nodes | jq -r '.items[].metadata.name'); do
	kraw PATCH "/api/v1/nodes/$n" '{"spec":{"unschedulable":null}}' application/merge-patch+json >/dev/null
done
fo=none
[ ${#FAILOVERS[@]} -gt 0 ] && fo=$(printf '%s\n' "${FAILOVERS[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%d ms median, %d ms max", a[int((NR+1)/2)], a[NR]}')
echo "# $ACTIONS driver steps: $KILLS services killed -9, $SUPKILLS controller supervisor kills, $LEADERKILLS leader kills" \
	"(takeover by the other controller: ${#FAILOVERS[@]} within 20 s, $fo; $LATE_FAILOVERS later), $NODESUPKILLS node supervisor kills," \
	"$FAULTS fault sets, $RESTARTS kubesim restarts, $CLAIMS claims allocated, $(np_nodes | wc -l) GPU nodes"
t0=$SECONDS
last=
until last=$(bash "$CHECK" "$KUBESIM_URL" "$NS" 2>&1); do
	if [ $((SECONDS - t0)) -ge "$CONVERGE" ]; then break; fi
	sleep 1
done
div=$(grep -c '^DIVERGE' <<<"$last")
echo "# divergences after ${CONVERGE}s at most: $div"
if [ "$div" = 0 ]; then
	ok "cluster equals the calm computation $((SECONDS - t0))s after the faults stopped (seed $SEED)"
	echo "# time to converge: $((SECONDS - t0)) s (setup took ${T_SETUP} s, chaos ${DUR} s)"
else
	nok "cluster converges after the chaos (seed $SEED): $div divergences"
	sed 's/^/#   /' <<<"$last"
	echo "#   policies: $(kraw GET /apis/intel.com/v1alpha1/clusterpolicies | jq -c '[.items[] | {n: .metadata.name, g: .metadata.generation, km: (.spec.kernelModule != null), v: .spec.kernelModule.version, st: .status}]' | head -c 3000)"
	echo "#   lease holder: $(holder)"
	for c in A B; do "$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$D/run-$c" 2>&1 | sed "s/^/#   $c: /"; done
fi
wait_until 10 has_leader && ok "after the chaos one controller leads ($(holder))" || nok "a controller leads after the chaos (holder '$(holder)')"

# ---- a fresh controller agrees: it writes nothing ---------------------------------
for c in A B; do
	ctrl_stop "$c"
	[ "$STOP_RC" = 0 ] && ok "controller $c stops cleanly on SIGTERM after the chaos" || nok "controller $c exit code $STOP_RC on SIGTERM"
done
own='[.modules, .clusterpolicies, .daemonsets, .nodes] | map(. // 0)'
w0=$(kraw GET /kubesim/stats | jq -c '.writesByResource')
# one controller, no leader election: the calm run's view of the final cluster
ctrl_start F nolease "${CHAOS_FRESH_LOG_LEVEL:-}"
wait_until 60 ctrl_ready F && ok "a fresh controller starts" || nok "a fresh controller starts"
NPOL=$(kraw GET /apis/intel.com/v1alpha1/clusterpolicies | jq '.items | length')
# Nothing to wait for but the services' own word that they are done: one pass per
# policy in modmgr and the gater, one report per policy from each accepted by
# statusd, statusd past its grace period (it re-evaluates everything then) and
# idle (statusd_pending 0) — all in one Control.List answer of the supervisor.
fresh_done() {
	"$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$D/run-F" --json --timeout-ms 2000 2>/dev/null | jq -e \
		--argjson p "$NPOL" --argjson gater "$([ -n "$CHAOS_GATER" ] && echo 1 || echo 0)" '
		'"$METRICS_FLAT"'
		[.services[]? | {(.name): ((.metrics | flat) + {up: ((.uptime_ms // .uptimeMs // 0) | tonumber)})}] | add
		| (.modmgr.modmgr_passes_total // 0) >= $p
		and ($gater == 0 or (.gater.gater_passes_total // 0) >= $p)
		and (.statusd.statusd_reports // 0) >= $p * (1 + $gater)
		and .statusd.up > 2500 and .statusd.statusd_pending == 0' >/dev/null
}
wait_until 60 fresh_done && ok "the fresh controller's services report their first passes done and statusd idle" ||
	nok "the fresh controller's first passes (counters: $("$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$D/run-F" --json 2>/dev/null | jq -c "$METRICS_FLAT"' [.services[]? | {(.name): (.metrics | flat)}]'))"
w1=$(kraw GET /kubesim/stats | jq -c '.writesByResource')
if [ "$(jq -c "$own" <<<"$w0")" = "$(jq -c "$own" <<<"$w1")" ]; then
	ok "the fresh controller finds nothing to write (modules, clusterpolicies + status, daemonsets, nodes)"
else
	nok "the fresh controller writes: before $w0, after $w1"
fi
bash "$CHECK" "$KUBESIM_URL" "$NS" >"$D/check2.log" 2>&1 && ok "still no divergence after the fresh start" ||
	{ nok "divergence after the fresh start"; sed 's/^/#   /' "$D/check2.log"; }
ctrl_stop F
[ "$STOP_RC" = 0 ] && ok "fresh controller stops cleanly" || nok "fresh controller exit code $STOP_RC"
np_follow_stop
bad= cnt=0
for n in $(np_nodes); do
	np_stop "$n"
	cnt=$((cnt + 1))
	[ "$NP_RC" = 0 ] || bad="$bad $n:$NP_RC"
done
[ -z "$bad" ] && ok "all $cnt node supervisors stop cleanly on SIGTERM" || nok "node supervisors stop cleanly on SIGTERM (node:exit code$bad)"
exit $FAILED
