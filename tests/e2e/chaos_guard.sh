#!/bin/bash
# Chaos aimed at the guard (ARCHITECTURE.md §4, issue #15): two leader-elected
# controllers (`gpukmm --profile controller`: watcher, modmgr, gater, opmgr, statusd)
# against kubesim. Policy gpu-a (dra) has GPU ResourceClaims allocated, gpu-b (dp) has
# pods requesting gpu.intel.com/i915 running; both policies are deleted, so only the
# guard keeps their Modules (and gpu-a's DRA driver, opmgr's). Policy gpu-c lives on with its device plugin gated. Then, for
# CHAOS_GUARD_SECONDS, the API fails and lies (kubesim's fault vocabulary: discovery
# 404 blips and lying 200s, lists answered {}, null, a Status or truncated JSON after
# forced relists, 5xx/403 on lists and watches, cut watches, 410s, 409s on the
# finalizer patches, latency, refused connections) while services and supervisors
# are killed -9 and the leader is killed. A sampler reads the API every 0.2 s (GETs,
# which no fault touches) the whole time: the three Modules' UIDs never change, no
# finalizer goes, gpu-a's DRA driver DaemonSet is neither deleted nor replaced, gpu-c's
# device plugin stays gated. Then the faults stop, the claims
# and the pods are released, and the two deletions must complete.
#   make check: a short run (CHAOS_GUARD_SECONDS, default 20)
#   make chaos: CHAOS_LONG=1, 300 s; CHAOS_SEED=N repeats a run; CHAOS_KEEP=1 keeps the logs
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/controller.sh
NS=intel-gpu-base-operator
LONG=${CHAOS_LONG:-}
DUR=${CHAOS_GUARD_SECONDS:-$([ -n "$LONG" ] && echo 300 || echo 20)}
SEED=${CHAOS_SEED:-$(($(date +%s) % 100000))}
RANDOM=$SEED
D=$(mktemp -d "${TMPDIR:-/tmp}/gpukmm-chaosg.XXXXXX") || exit 1
chmod 700 "$D"
FAILED=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; FAILED=1; }
check() { local n=$1; shift; if "$@"; then ok "$n"; else nok "$n"; return 1; fi; }

cleanup() {
	local c
	touch "$D/sampler.stop"
	[ -n "${SAMPLER:-}" ] && wait "$SAMPLER" 2>/dev/null
	for c in "${!SUP[@]}"; do stop_pid "${SUP[$c]}"; done
	SUP=()
	kubesim_rbac_verdict "$NS" || FAILED=1
	kubesim_stop >/dev/null 2>&1
	san_check "$D"/*.log
	[ "$FAILED" = 0 ] || log_tails 30 "$D"/*.log
	[ -n "${CHAOS_KEEP:-}" ] && echo "# kept $D" || rm -rf "$D"
}
trap cleanup EXIT

# ---- the cluster ------------------------------------------------------------------
# under the shipped RBAC, each profile with its ServiceAccount's token
KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start --pod-ready-ms 100 --pod-stop-ms 100 || { nok "kubesim starts"; exit 1; }
echo "# seed $SEED, ${DUR}s of chaos"
ctrl_cluster || { nok "the shipped RBAC and the ServiceAccounts' kubeconfigs"; exit 1; }
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-1","labels":{"kubernetes.io/arch":"amd64"}}}' >/dev/null
kraw POST "/apis/apps/v1/namespaces/$NS/daemonsets" "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"gpu-c-device-plugin\",\"namespace\":\"$NS\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"dp\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"dp\"}},\"spec\":{\"nodeSelector\":{\"kubernetes.io/arch\":\"amd64\"},\"containers\":[{\"name\":\"c\",\"image\":\"img\"}]}}}}" >/dev/null
KM='{"moduleName":"xe","kernelMappings":[{"regexp":"^.+$","containerImage":"registry.example.com/xe:1"}]}'
mkpolicy() { # NAME MODE
	kraw POST /apis/intel.com/v1alpha1/clusterpolicies "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"$1\"},\"spec\":{\"resourceRegistration\":\"$2\",\"kernelModule\":$KM}}" >/dev/null
}
pod_new() {
	kraw POST /api/v1/namespaces/user/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$1\",\"namespace\":\"user\"},\"spec\":{\"nodeName\":\"gpu-1\",\"containers\":[{\"name\":\"c\",\"image\":\"img\",\"resources\":{\"requests\":{\"gpu.intel.com/i915\":\"1\"},\"limits\":{\"gpu.intel.com/i915\":\"1\"}}}]}}" >/dev/null
}
mpath() { echo "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$1-gpu"; }
cpath() { echo "/apis/intel.com/v1alpha1/clusterpolicies/$1"; }
KEY="kmm.node.kubernetes.io/$NS.gpu-c-gpu.ready"

# watches end every 2-4 s (a forced 410 relists soon); discovery every second, an
# absence believed after 10 s of it: the blips below stay far shorter
CTRL_WATCHER_ARGS='"--watch-timeout", "2", "--discovery-interval", "1", "--discovery-confirm", "10"'
ctrl_start A
ctrl_start B
wait_until 60 ctrl_ready A && wait_until 60 ctrl_ready B && ok "two controllers ready" || { nok "two controllers ready"; exit 1; }
wait_until 30 has_leader || nok "a controller takes the Lease"
for p in gpu-a gpu-c; do mkpolicy "$p" dra; done
mkpolicy gpu-b dp
have_modules() { local p; for p in gpu-a gpu-b gpu-c; do [ "$(kraw GET "$(mpath $p)" | jq -r .kind)" = Module ] || return 1; done; }
have_finalizers() { local p; for p in gpu-a gpu-b gpu-c; do kraw GET "$(cpath $p)" | jq -e '.metadata.finalizers // [] | index("gpukmm.io/module-protection") != null' >/dev/null || return 1; done; }
c_final() { kraw GET "$(cpath gpu-c)" | jq -e '.metadata.finalizers // [] | index("gpukmm.io/module-protection") != null' >/dev/null; }
c_gated() { kraw GET "/apis/apps/v1/namespaces/$NS/daemonsets/gpu-c-device-plugin" | jq -e --arg k "$KEY" '.spec.template.spec.nodeSelector[$k] == ""' >/dev/null; }
check "three Modules created" wait_until 30 have_modules
check "three finalizers taken" wait_until 20 have_finalizers
check "gpu-c's device plugin gated" wait_until 20 c_gated
DRAP="/apis/apps/v1/namespaces/$NS/daemonsets/gpu-a-gpu-dra"
check "gpu-a's DRA driver deployed (opmgr)" wait_until 30 eval '[ "$(kraw GET "$DRAP" | jq -r .kind)" = DaemonSet ]'
declare -A UID0=()
for p in gpu-a gpu-b gpu-c; do UID0[$p]=$(kraw GET "$(mpath $p)" | jq -r .metadata.uid); done
DRA_UID=$(kraw GET "$DRAP" | jq -r .metadata.uid)
for i in 1 2 3; do claim_alloc user "claim-$i"; pod_new "pod-$i"; done
# both watchers have seen them before the deletions (they publish in the order they saw)
all_seen() {
	local c
	for c in A B; do
		watcher_has "ipc://$D/run-$c/watcher.sock" resourceclaim user claim-3 &&
			watcher_has "ipc://$D/run-$c/watcher.sock" pod user pod-3 || return 1
	done
}
wait_until 20 all_seen || nok "the watchers see the claims and the GPU pods"
kraw DELETE "$(cpath gpu-a)" >/dev/null
kraw DELETE "$(cpath gpu-b)" >/dev/null
blocked() { # POLICY WHAT: its status says the deletion is blocked by WHAT
	kraw GET "$(cpath "$1")" | jq -e --arg w "$2" '[.status.errors[]? | select(contains($w))] | length > 0' >/dev/null
}
check "gpu-a's deletion is blocked by the claims (status)" wait_until 30 blocked gpu-a "allocated GPU ResourceClaims blocking"
check "gpu-b's deletion is blocked by the GPU pods (status)" wait_until 30 blocked gpu-b "pods requesting gpu.intel.com resources blocking"
check "gpu-a's DRA driver stays: opmgr's guard (status)" wait_until 30 blocked gpu-a "blocking the removal of the DRA driver gpu-a-gpu-dra"

# ---- the sampler --------------------------------------------------------------------
VIOL="$D/violations"
: >"$VIOL"
# one curl for the eight objects, one jq to judge them: a sample every ~0.2 s
URLS=()
for p in gpu-a gpu-b gpu-c; do URLS+=("$KUBESIM_URL$(mpath $p)" "$KUBESIM_URL$(cpath $p)"); done
URLS+=("$KUBESIM_URL/apis/apps/v1/namespaces/$NS/daemonsets/gpu-c-device-plugin" "$KUBESIM_URL$DRAP")
JUDGE='
	def uid($m; $want; $n): if $m.kind == "Module" then (if $m.metadata.uid == $want then empty else "\($n)-gpu replaced: uid \($m.metadata.uid)" end)
		elif $m.reason == "NotFound" then "\($n)-gpu deleted" else empty end;
	def fin($c; $n): if $c.kind == "ClusterPolicy" then
			(if (($c.metadata.finalizers // []) | index("gpukmm.io/module-protection")) != null then empty else "\($n): finalizer gone" end)
		elif $c.reason == "NotFound" then "\($n) gone" else empty end;
	def dra($d): if $d.kind == "DaemonSet" then
			(if $d.metadata.uid != $dra then "gpu-a-gpu-dra replaced: uid \($d.metadata.uid)"
			 elif $d.metadata.deletionTimestamp then "gpu-a-gpu-dra being deleted" else empty end)
		elif $d.reason == "NotFound" then "gpu-a-gpu-dra deleted" else empty end;
	if length != 8 then empty else "sample",
	uid(.[0]; $a; "gpu-a"), fin(.[1]; "gpu-a"), uid(.[2]; $b; "gpu-b"), fin(.[3]; "gpu-b"), uid(.[4]; $c; "gpu-c"), fin(.[5]; "gpu-c"),
	(if .[6].kind == "DaemonSet" and (.[6].spec.template.spec.nodeSelector[$k] != "") then "gpu-c-device-plugin ungated" else empty end),
	dra(.[7])
	end'
(
	while [ ! -e "$D/sampler.stop" ]; do
		kcurl -s --max-time 2 -w '\n' "${URLS[@]}" 2>/dev/null |
			jq -rs --arg a "${UID0[gpu-a]}" --arg b "${UID0[gpu-b]}" --arg c "${UID0[gpu-c]}" --arg k "$KEY" --arg dra "$DRA_UID" "$JUDGE" 2>/dev/null |
			sed "s/^/$(date +%T.%N) /" >"$D/sample"
		grep -v ' sample$' "$D/sample" >>"$VIOL"
		grep -q ' sample$' "$D/sample" && echo x >>"$D/samples"
		sleep 0.2
	done
) &
SAMPLER=$!

# ---- the chaos ---------------------------------------------------------------------
FAULTS=0 KILLS=0 SUPKILLS=0 LEADERKILLS=0 DISC=0 LIES=0
LAST_DISC=-100
faults_set() { kraw PUT /kubesim/faults "$1" >/dev/null && FAULTS=$((FAULTS + 1)); }
pick() { local a=("$@"); echo "${a[$((RANDOM % ${#a[@]}))]}"; }
lie_body() { pick '{}' 'null' '{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}' '{"kind":"List","metadata":{"resourceVersion":"1"},"items":[{"metadata":{' '[]'; }
json_str() { jq -Rn --arg b "$1" '$b'; }
random_faults() {
	local res gv code
	res=$(pick modules resourceclaims clusterpolicies pods daemonsets)
	case $((RANDOM % 8)) in
	0 | 1) # discovery: at most one blip per 12 s (> the 10 s debounce), so a blip never
	       # joins the next into an absence long enough to be believed
		[ $((SECONDS - LAST_DISC)) -lt 12 ] && return 0
		LAST_DISC=$SECONDS DISC=$((DISC + 1))
		gv=$(pick kmm.sigs.x-k8s.io/v1beta1 resource.k8s.io/v1 intel.com/v1alpha1)
		if ((RANDOM % 2)); then
			faults_set "{\"seed\": $RANDOM, \"rules\": [{\"verb\": \"discovery\", \"path\": \"/apis/$gv\", \"code\": 404, \"times\": $((1 + RANDOM % 4))}]}"
		else
			faults_set "{\"seed\": $RANDOM, \"rules\": [{\"verb\": \"discovery\", \"path\": \"/apis/$gv\", \"rate\": 0.7, \"code\": 200, \"body\": $(json_str "$(lie_body)")}]}"
		fi ;;
	2 | 3) LIES=$((LIES + 1)) # a forced relist that lies
		faults_set "{\"seed\": $RANDOM, \"rules\": [{\"verb\": \"watch\", \"resource\": \"$res\", \"code\": 410}, {\"verb\": \"list\", \"resource\": \"$res\", \"rate\": 0.8, \"code\": 200, \"body\": $(json_str "$(lie_body)")}]}" ;;
	4) code=$(pick 500 503 403 429)
	   faults_set "{\"seed\": $RANDOM, \"rules\": [{\"verb\": \"list\", \"resource\": \"$res\", \"rate\": 0.6, \"code\": $code, \"retryAfter\": 1}, {\"verb\": \"watch\", \"resource\": \"$res\", \"rate\": 0.6, \"code\": $code, \"retryAfter\": 1}]}" ;;
	5) faults_set "{\"seed\": $RANDOM, \"rules\": [{\"verb\": \"patch\", \"resource\": \"clusterpolicies\", \"rate\": 0.6, \"code\": 409}, {\"verb\": \"patch\", \"resource\": \"modules\", \"rate\": 0.5, \"code\": 409}]}" ;;
	6) faults_set "{\"seed\": $RANDOM, \"watch\": {\"closeAfterEvents\": $((1 + RANDOM % 3)), \"force410\": $((RANDOM % 3))}, \"latencyMs\": $((RANDOM % 150))}" ;;
	7) faults_set "{\"seed\": $RANDOM, \"refuseConnectionsSeconds\": 1}" ;;
	esac
}
kill_child() {
	local c pid
	c=$(pick A B)
	pid=$(sup_child_pids "$D/run-$c" | shuf -n1 --random-source=<(yes "$RANDOM"))
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && KILLS=$((KILLS + 1))
}
restart9() { # CONTROLLER: like its pod's node dying, then started again (a new identity)
	sup_kill9 "${SUP[$1]}" "$D/run-$1" || nok "children of a killed supervisor exit (PDEATHSIG)"
	ctrl_start "$1"
}
end=$((SECONDS + DUR)) mid=$((SECONDS + DUR / 2))
while [ $SECONDS -lt $end ]; do
	if [ $SECONDS -ge $mid ] && [ $LEADERKILLS = 0 ]; then
		l=$(leader)
		[ -n "$l" ] && restart9 "$l" && LEADERKILLS=$((LEADERKILLS + 1))
		continue
	fi
	r=$((RANDOM % 100))
	if [ $r -lt 55 ]; then random_faults
	elif [ $r -lt 62 ]; then kraw PUT /kubesim/faults '{}' >/dev/null
	elif [ $r -lt 88 ]; then kill_child
	elif [ $r -lt 94 ]; then restart9 "$(pick A B)"; SUPKILLS=$((SUPKILLS + 1))
	else l=$(leader); [ -n "$l" ] && restart9 "$l" && LEADERKILLS=$((LEADERKILLS + 1))
	fi
	sleep 0.$((2 + RANDOM % 6))
done
kraw PUT /kubesim/faults '{}' >/dev/null
echo "# $(date -u +%T.%N | cut -c1-12) chaos over: faults cleared ($(kraw_code))"
echo "# $FAULTS fault sets ($DISC discovery, $LIES lying relists), $KILLS services killed -9, $SUPKILLS supervisor kills, $LEADERKILLS leader kills, $(wc -l <"$D/samples") full samples"
for c in A B; do kill -0 "${SUP[$c]}" 2>/dev/null || { nok "controller $c is running after the chaos"; ctrl_start "$c"; }; done
check "the guarded state holds: both deletions still blocked a while after the chaos" wait_until 30 \
	eval 'blocked gpu-a "allocated GPU ResourceClaims blocking" && blocked gpu-b "pods requesting gpu.intel.com resources blocking"'
touch "$D/sampler.stop"
wait "$SAMPLER" 2>/dev/null
SAMPLER=
NS_SAMPLES=$(wc -l <"$D/samples")
check "the sampler read all eight objects ($NS_SAMPLES times, at least once a second) and never saw a Module or gpu-a's DRA driver replaced or deleted, a finalizer gone or gpu-c ungated (seed $SEED)" \
	eval '[ "$NS_SAMPLES" -ge "$DUR" ] && [ ! -s "$VIOL" ]'
[ -s "$VIOL" ] && sed 's/^/#   /' "$VIOL" | head -10

# ---- release: the deletions complete ---------------------------------------------------
for i in 1 2 3; do
	kraw DELETE "/apis/resource.k8s.io/v1/namespaces/user/resourceclaims/claim-$i" >/dev/null
	kraw DELETE "/api/v1/namespaces/user/pods/pod-$i" >/dev/null
done
echo "# $(date -u +%T.%N | cut -c1-12) claims and pods released"
gone() { [ "$(kraw GET "$1" | jq -r .kind)" != "$2" ]; }
left() { # POLICY PATH...: what is still there and what the policy's status says
	local p=$1 x
	shift
	for x in "$@"; do
		kraw GET "$x" | jq -r --arg x "$x" 'select(.kind != "Status") |
			"#   still there: \($x) (finalizers \(.metadata.finalizers // [] | join(",")), deletionTimestamp \(.metadata.deletionTimestamp // "none"))"'
	done
	kraw GET "$(cpath "$p")" | jq -r '.status.errors[]? // empty' | sed 's/^/#   status: /'
	echo "#   faults: $(kraw GET /kubesim/faults | jq -c .)"
}
check "claims freed: gpu-a's Module and DRA driver deleted and gpu-a gone" wait_until 60 \
	eval 'gone "$(mpath gpu-a)" Module && gone "$DRAP" DaemonSet && gone "$(cpath gpu-a)" ClusterPolicy' ||
	left gpu-a "$(mpath gpu-a)" "$DRAP" "$(cpath gpu-a)"
check "pods gone: gpu-b's Module deleted and gpu-b gone" wait_until 60 eval 'gone "$(mpath gpu-b)" Module && gone "$(cpath gpu-b)" ClusterPolicy' ||
	left gpu-b "$(mpath gpu-b)" "$(cpath gpu-b)"
check "gpu-c untouched: same Module, finalizer, device plugin gated" eval \
	'[ "$(kraw GET "$(mpath gpu-c)" | jq -r .metadata.uid)" = "${UID0[gpu-c]}" ] && c_final && c_gated'
for c in A B; do
	ctrl_stop "$c"
	[ "$STOP_RC" = 0 ] && ok "controller $c stops cleanly on SIGTERM" || nok "controller $c exit code $STOP_RC on SIGTERM"
done
exit $FAILED
