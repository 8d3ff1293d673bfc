#!/bin/bash
# Rolling driver upgrades (issue #19) end to end, through the real processes: a
# controller profile (gpukmm-upgrader among its services), fake-kmm as KMM, one node
# profile per GPU node, kubesim under the shipped RBAC with its DaemonSet
# controller, kubelet and disruption controller, a GPU workload under a budget.
#   1. first install of a versioned Module with autoUpgrade: the nodes are labelled
#      by gpukmm-upgrader (no admin step) and load 1.0
#   2. 1.0 -> 2.0 on 3 nodes: node by node (sampled all along: never more than
#      maxParallel = 1 node without the driver or in a step), the admin's cordon of
#      gpu-3 kept, the trainers evicted through the Eviction API (budget honoured),
#      our cordons lifted, every node on 2.0 by its own report; time per node and the
#      rollout's API writes (kubesim's count) printed
# A rollout that waits (a failed read, active VFs, a skipped node):
# upgrade_wait.sh; one that fails and halts: upgrade_halt.sh.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/upgrade.sh
kubesim_need_kubectl || exit 0
NODES="gpu-1 gpu-2 gpu-3"
# shellcheck disable=SC2086
up_init upgrade $NODES
ctrl_start A nolease
check "the controller is ready" 60 ctrl_ready A

# ---- 1. first install: the upgrader labels the nodes -------------------------------------------------
up_policy 1.0
check "first install: every node labelled 1.0 by gpukmm-upgrader and on 1.0 by its own report" 60 up_all_on 1.0
check "Upgraded=True UpgradeComplete, status.upgrade 3/3 on 1.0" 40 eval 'upgraded_is True UpgradeComplete &&
	cp_is ".status.upgrade | .targetVersion == \"1.0\" and .nodes == 3 and .upToDate == 3 and .pending == 0"'
check "the label's Event on gpu-1 (UpgradeLabelled), no drain for a first install" 10 eval '[ "$(events_of gpu-1)" = UpgradeLabelled ]'
dp_on() { kraw GET "/api/v1/namespaces/$NS/pods?labelSelector=app%3Dintel-gpu-plugin&fieldSelector=spec.nodeName%3D$1" |
	jq -e '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length == 1' >/dev/null; }
dp_everywhere() { local x; for x in $NODES; do dp_on "$x" || return 1; done; }
check "the device plugin runs on every node" 60 dp_everywhere

# ---- 2. 1.0 -> 2.0, node by node -------------------------------------------------------------------------
up_workload 3
trainers() { [ "$(kraw GET /api/v1/namespaces/work/pods?labelSelector=app%3Dtrainer | jq '[.items[] | select(.status.phase == "Running")] | length')" = 3 ]; }
check "3 GPU trainers run (one per node), the budget allows 1 disruption" 60 eval 'trainers &&
	[ "$(k get pdb -n work trainer -o jsonpath={.status.disruptionsAllowed})" = 1 ]'
FIRST_TRAINERS=$(kraw GET /api/v1/namespaces/work/pods?labelSelector=app%3Dtrainer | jq -r '[.items[].metadata.name] | sort | join(" ")')
k cordon gpu-3 >>"$D/kubectl.log" 2>&1
up_sampler_start
before=$(agent_writes gpukmm-upgrader)
t0=$SECONDS
up_policy 2.0
# shellcheck disable=SC2086
check "2.0: every node upgraded, on 2.0 by its own report" 240 all_done 2.0 $NODES
rollout_s=$((SECONDS - t0))
check "Upgraded=True UpgradeComplete 3/3 on 2.0" 40 eval 'upgraded_is True UpgradeComplete &&
	cp_is ".status.upgrade | .targetVersion == \"2.0\" and .upToDate == 3 and .draining + .unloading + .loading + .failed == 0"'
after=$(agent_writes gpukmm-upgrader)
samples=$(up_samples)
# (how many samples depends on the machine's load; what matters is that it saw the rollout)
seen=$(up_sampler_max active)
[ "$samples" -ge 10 ] && [ "$seen" -ge 1 ] && ok "the sampler watched the rollout ($samples samples, a node in a step seen)" ||
	nok "the sampler watched the rollout ($samples samples, max nodes in a step seen $seen)"
m=$(up_sampler_max nodriver)
[ "$m" -le 1 ] && ok "never more than maxParallel = 1 node without the driver (max seen $m)" ||
	nok "never more than maxParallel = 1 node without the driver (max seen $m)"
m=$(up_sampler_max active)
[ "$m" -le 1 ] && ok "never more than 1 node in an upgrade step (max seen $m)" || nok "never more than 1 node in an upgrade step (max seen $m)"
check "the admin's cordon of gpu-3 survives the upgrade (and is not marked ours)" 5 node_is gpu-3 \
	'.spec.unschedulable == true and .metadata.annotations["gpukmm.io/upgrade-cordoned"] == null'
uncordoned() { local x; for x in "$@"; do node_is "$x" '(.spec.unschedulable // false) == false and
	([.metadata.annotations // {} | keys[] | select(startswith("gpukmm.io/upgrade-"))] | length == 0)' || return 1; done; }
check "our cordons are lifted: gpu-1, gpu-2 schedulable, no annotation of ours left" 5 uncordoned gpu-1 gpu-2
gone=0
for p in $FIRST_TRAINERS; do kraw GET "/api/v1/namespaces/work/pods/$p" | jq -e '.kind == "Pod"' >/dev/null 2>&1 || gone=$((gone + 1)); done
[ "$gone" = 3 ] && ok "every trainer that ran at the start was evicted" || nok "every trainer that ran at the start was evicted ($gone of 3)"
check "the evictions went through the Eviction API (pods/eviction), no pod deleted directly" 5 eval \
	'jq -e "(.[\"create pods/eviction\"] // 0) >= 3 and .[\"delete pods\"] == null" <<<"$(agent_writes gpukmm-upgrader)"'
check "gpu-1's Events: every step once" 5 eval '[ "$(events_of gpu-1)" = "UpgradeLabelled,UpgradeStarted,UpgradeDrained,UpgradeVersionMoved,Upgraded" ]'
check "the device plugin is back on every node" 60 dp_everywhere
echo "# rollout 1.0 -> 2.0 of 3 nodes: ${rollout_s}s"
for n in $NODES; do
	s=$(event_time "$n" UpgradeStarted) e=$(event_time "$n" Upgraded)
	[ -n "$s" ] && [ -n "$e" ] && echo "#   $n: $((e - s))s from UpgradeStarted to Upgraded"
done
echo "#   the upgrader's API writes (kubesim): before $before, after $after"
jq -rn --argjson a "$before" --argjson b "$after" '$b | to_entries[] | "#     \(.key): \(.value - ($a[.key] // 0))"'
