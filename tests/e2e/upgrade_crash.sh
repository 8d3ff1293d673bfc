#!/bin/bash
# Rolling driver upgrades (issue #19) are crash-safe: kill -9 of gpukmm-upgrader at
# every step of a node's upgrade, kill -9 of the leading controller and a clean
# leadership change mid-rollout resume from what the API holds (the node's state
# label, our cordon annotation, the drain's start), through the real processes
# (tests/lib/upgrade.sh's cluster) and two leader-elected controller profiles.
# 1.0 -> 2.0 on 3 nodes (maxParallel 1, maxUnavailable 1); each node is held in a
# step by the cluster, not by timing, while its upgrader is killed:
#   gpu-3  cordoned by the admin (picked first); its report keeps saying 1.0, so it
#          waits in loading (after its version label moved): kill -9 of the upgrader
#   gpu-1  a pod whose budget refuses its eviction: it waits in draining (cordoned
#          by us, evictions refused): kill -9 of the upgrader, then kill -9 of the
#          leading controller (the other takes the Lease over)
#   gpu-2  SR-IOV VFs active: it waits in unloading: kill -9 of the upgrader, then
#          the leader stops cleanly (SIGTERM) and the other takes over
# After each kill: the step is kept (no node released, no second node started, the
# drain's start time not reset), the new process acts on it (evicts again, finishes
# once the cluster lets it). All along (sampled every 100 ms): never more than 1
# node without the driver or in a step. At the end: every node on 2.0 by its own
# report, the admin's cordon of gpu-3 kept, ours lifted, no annotation of ours
# left, a pod on a node not draining never evicted early.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/upgrade.sh
kubesim_need_kubectl || exit 0
NODES="gpu-1 gpu-2 gpu-3"
# shellcheck disable=SC2086
up_init upgrade-crash $NODES
ctrl_start A "" info
check "controller A is ready and leads" 60 eval 'ctrl_ready A && [ "$(leader)" = A ]'
ctrl_start B "" info
check "controller B is ready (standby)" 60 ctrl_ready B
up_policy 1.0
check "first install: every node on 1.0 by its own report" 60 up_all_on 1.0

# ---- the holds ------------------------------------------------------------------------------------------
k create namespace work >>"$D/kubectl.log" 2>&1
rs_uid=$(budgeted_rs work db 1 "minAvailable: 1" 2>>"$D/kubectl.log")
gpu_pod() { # NAME NODE APP
	kraw POST /api/v1/namespaces/work/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$1\",
		\"namespace\":\"work\",\"labels\":{\"app\":\"$3\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",
		\"kind\":\"ReplicaSet\",\"name\":\"db\",\"uid\":\"$rs_uid\",\"controller\":true}]},\"spec\":{\"nodeName\":\"$2\",
		\"containers\":[{\"name\":\"c\",\"image\":\"$3\",\"resources\":{\"limits\":{\"gpu.intel.com/xe\":\"1\"}}}]}}" >/dev/null
}
gpu_pod db gpu-1 db
gpu_pod job gpu-2 job
pod_there() { kraw GET "/api/v1/namespaces/work/pods/$1" | jq -e '.kind == "Pod" and .metadata.deletionTimestamp == null' >/dev/null; }
check "the db pod runs on gpu-1, its budget allows no disruption; a job pod on gpu-2" 30 eval \
	'[ "$(k get pdb -n work db -o jsonpath={.status.disruptionsAllowed})" = 0 ] && pod_there job'
np_pin gpu-2 oot-vfs@1.0 || nok "gpu-2's root with SR-IOV VFs"
np_pin gpu-3 oot-idle@1.0 || nok "gpu-3's root pinned to 1.0"
check "gpu-2's report says xe cannot be unloaded (VFs)" 40 node_is gpu-2 \
	'(.metadata.annotations["gpukmm.io/node-report"] | fromjson | .canUnload) == "false"'
k cordon gpu-3 >>"$D/kubectl.log" 2>&1

# the upgrader of controller C: its pid / running again with another pid and Ready
up_pid() {
	"$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$D/run-$1" --json --timeout-ms 1000 2>/dev/null |
		jq -r '[.. | objects | select(.name? == "upgrader" and (.pid // 0) > 0) | .pid][0] // empty'
}
up_back() { local p; p=$(up_pid "$1"); [ -n "$p" ] && [ "$p" != "$2" ] && ctrl_ready "$1"; }
# the fresh reads of the nodes in a step the upgraders of controller C made (one per leadership: its picks wait for it)
confirms() { grep -c "read the nodes in an upgrade step afresh" "$D/controller-$1.log"; }
kill_upgrader() { # CONTROLLER WHAT
	KU_C=$1 KU_P=$(up_pid "$1") KU_N=$(confirms "$1")
	[ -n "$KU_P" ] && kill -KILL "$KU_P" && ok "kill -9 of gpukmm-upgrader ($2)" || nok "kill -9 of gpukmm-upgrader ($2): no pid"
	check "the supervisor runs gpukmm-upgrader again; it leads and read the nodes in a step afresh" 30 eval \
		'up_back "$KU_C" "$KU_P" && [ "$(confirms "$KU_C")" -gt "$KU_N" ]'
}
active_nodes() { kraw GET /api/v1/nodes | jq -r --arg s "$STATE" '[.items[] | select(.metadata.labels[$s] == "draining" or
	.metadata.labels[$s] == "unloading" or .metadata.labels[$s] == "loading") | .metadata.name] | sort | join(",")'; }
ours() { node_is "$1" '.spec.unschedulable == true and .metadata.annotations["gpukmm.io/upgrade-cordoned"] == "true"'; }
started_of() { kraw GET "/api/v1/nodes/$1" | jq -r '.metadata.annotations["gpukmm.io/upgrade-started"] // empty'; }
problem_is() { # NODE STATE REGEX: status.upgrade names the node's wait
	cp_is "[.status.upgrade.problems[]? | select(.node == \"$1\" and .state == \"$2\" and (.message | test(\"$3\")))] | length == 1"
}
other() { [ "$1" = A ] && echo B || echo A; }

up_sampler_start
up_policy 2.0

# ---- gpu-3 (the admin's cordon) in loading: kill -9 ----------------------------------------------------
check "gpu-3 (cordoned by the admin) first: its version label moved to 2.0, waits in loading (its report says 1.0)" 90 eval \
	'state_is gpu-3 loading && version_on gpu-3 2.0 && problem_is gpu-3 loading "reports version 1.0"'
kill_upgrader "$(leader)" "gpu-3 in loading, after its version label moved"
check "after the restart: gpu-3 still loading, status.upgrade says why" 30 eval \
	'state_is gpu-3 loading && problem_is gpu-3 loading "reports version 1.0"'
a=$(active_nodes)
[ "$a" = gpu-3 ] && ok "only gpu-3 in a step (no second node started)" || nok "only gpu-3 in a step ($a)"
check "the admin's cordon of gpu-3 kept (not marked ours)" 5 node_is gpu-3 \
	'.spec.unschedulable == true and .metadata.annotations["gpukmm.io/upgrade-cordoned"] == null'
np_unpin gpu-3
check "gpu-3 on 2.0 by its own report once it loads it" 60 all_done 2.0 gpu-3
check "gpu-3 still cordoned (the admin's), no annotation of ours" 5 node_is gpu-3 \
	'.spec.unschedulable == true and ([.metadata.annotations // {} | keys[] | select(startswith("gpukmm.io/upgrade-"))] | length == 0)'

# ---- gpu-1 draining, its eviction refused: kill -9 of the upgrader, then of the leader ----------------------
check "gpu-1 next: cordoned by us, draining, its eviction refused by the budget" 60 eval \
	'state_is gpu-1 draining && ours gpu-1 && problem_is gpu-1 draining "work/db: Cannot evict pod"'
s1=$(started_of gpu-1)
e0=$(evictions)
kill_upgrader "$(leader)" "gpu-1 draining, during its eviction"
check "the new process evicts again (the budget still refuses)" 30 eval '[ "$(evictions)" -gt "$e0" ]'
check "gpu-1 still draining and cordoned by us, its drain's start kept ($s1)" 5 eval \
	'state_is gpu-1 draining && ours gpu-1 && [ "$(started_of gpu-1)" = "$s1" ]'
a=$(active_nodes)
[ "$a" = gpu-1 ] && ok "only gpu-1 in a step; the job pod on gpu-2 not evicted" ||
	nok "only gpu-1 in a step ($a)"
pod_there job || nok "the job pod on gpu-2 not evicted"
L=$(leader) O=$(other "$(leader)")
c=$(confirms "$O")
sup_kill9 "${SUP[$L]}" "$D/run-$L" || nok "the children of the killed controller $L exit"
unset "SUP[$L]"
ok "kill -9 of the leading controller $L (gpu-1 draining)"
check "controller $O takes the Lease over; its upgrader read the nodes in a step afresh" 30 eval \
	'[ "$(leader)" = "$O" ] && [ "$(confirms "$O")" -gt "$c" ]'
e1=$(evictions)
check "the new leader evicts on gpu-1 (the budget still refuses)" 30 eval '[ "$(evictions)" -gt "$e1" ]'
check "gpu-1 still draining and cordoned by us, its drain's start kept" 5 eval \
	'state_is gpu-1 draining && ours gpu-1 && [ "$(started_of gpu-1)" = "$s1" ]'
a=$(active_nodes)
[ "$a" = gpu-1 ] && ok "only gpu-1 in a step after the leader change" || nok "only gpu-1 in a step after the leader change ($a)"
pod_there job && ok "the job pod on gpu-2 still not evicted" || nok "the job pod on gpu-2 still not evicted"
ctrl_start "$L" "" info
check "controller $L back (standby)" 60 ctrl_ready "$L"
k delete pdb -n work db >>"$D/kubectl.log" 2>&1
check "the budget gone: gpu-1 on 2.0 by its own report, the db pod evicted" 90 eval 'all_done 2.0 gpu-1 && ! pod_there db'
check "gpu-1 uncordoned, no annotation of ours" 5 node_is gpu-1 '(.spec.unschedulable // false) == false and
	([.metadata.annotations // {} | keys[] | select(startswith("gpukmm.io/upgrade-"))] | length == 0)'

# ---- gpu-2 unloading (VFs): kill -9 of the upgrader, then a clean leader change -----------------------------
check "gpu-2 next: drained (the job pod evicted), waits in unloading for its VFs" 60 eval \
	'state_is gpu-2 unloading && ours gpu-2 && ! pod_there job && problem_is gpu-2 unloading "SR-IOV VFs active"'
kill_upgrader "$(leader)" "gpu-2 unloading"
check "after the restart: gpu-2 still unloading on 1.0, its driver loaded, status.upgrade says why" 30 eval \
	'state_is gpu-2 unloading && problem_is gpu-2 unloading "SR-IOV VFs active" && version_on gpu-2 1.0 && loaded_version gpu-2 1.0'
L=$(leader) O=$(other "$(leader)")
c=$(confirms "$O")
ctrl_stop "$L"
[ "$STOP_RC" = 0 ] && ok "the leading controller $L stops cleanly (gpu-2 unloading)" || nok "the leading controller $L stops cleanly (exit $STOP_RC)"
check "controller $O takes the Lease over; its upgrader read the nodes in a step afresh" 30 eval \
	'[ "$(leader)" = "$O" ] && [ "$(confirms "$O")" -gt "$c" ]'
check "gpu-2 still unloading on 1.0 with its driver loaded, cordoned by us" 5 eval \
	'state_is gpu-2 unloading && version_on gpu-2 1.0 && loaded_version gpu-2 1.0 && ours gpu-2'
np_unpin gpu-2
check "the VFs gone: gpu-2 on 2.0 by its own report" 90 all_done 2.0 gpu-2

# ---- the end --------------------------------------------------------------------------------------------------
# shellcheck disable=SC2086
check "every node on 2.0 by its own report" 5 all_done 2.0 $NODES
check "Upgraded=True UpgradeComplete 3/3 on 2.0" 40 eval 'upgraded_is True UpgradeComplete &&
	cp_is ".status.upgrade | .upToDate == 3 and .draining + .unloading + .loading + .failed == 0"'
check "the admin's cordon of gpu-3 survives it all" 5 node_is gpu-3 '.spec.unschedulable == true'
check "gpu-1, gpu-2 schedulable, no annotation of ours on any node" 5 eval 'kraw GET /api/v1/nodes | jq -e "
	[.items[] | select(.metadata.name == \"gpu-1\" or .metadata.name == \"gpu-2\") | .spec.unschedulable // false] == [false, false] and
	([.items[] | .metadata.annotations // {} | keys[] | select(startswith(\"gpukmm.io/upgrade-\"))] | length == 0)" >/dev/null'
seen=$(up_sampler_max active)
[ "$(up_samples)" -ge 10 ] && [ "$seen" -ge 1 ] && ok "the sampler watched the rollout ($(up_samples) samples)" ||
	nok "the sampler watched the rollout ($(up_samples) samples, max in a step $seen)"
m=$(up_sampler_max nodriver)
[ "$m" -le 1 ] && ok "all along: never more than maxParallel = 1 node without the driver (max seen $m)" ||
	nok "all along: never more than maxParallel = 1 node without the driver (max seen $m)"
m=$(up_sampler_max active)
[ "$m" -le 1 ] && ok "all along: never more than 1 node in an upgrade step (max seen $m)" ||
	nok "all along: never more than 1 node in an upgrade step (max seen $m)"
