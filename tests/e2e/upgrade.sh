#!/bin/bash
# Rolling driver upgrades (issue #19) end to end, through the real processes: a
# controller profile (gpukmm-upgrader among its services), fake-kmm as KMM, one node
# profile per GPU node, kubesim under the shipped RBAC with its DaemonSet
# controller, kubelet and disruption controller, a GPU workload under a budget.
#   1. first install of a versioned Module with autoUpgrade: the nodes are labelled
#      by gpukmm-upgrader (no admin step) and load 1.0
#   2. 1.0 -> 2.0 on 4 nodes: node by node (sampled all along: never more than
#      maxParallel = 1 node without the driver or in a step), the admin's cordon of
#      gpu-3 kept, the trainers evicted through the Eviction API (budget honoured),
#      our cordons lifted, every node on 2.0 by its own report; time per node and the
#      rollout's API writes (kubesim's count) printed
#   3. 2.0 -> 3.0 with SR-IOV VFs active on gpu-2 (it waits in unloading, the reason
#      in status.upgrade and the condition, until the VFs are gone) and gpu-4 skipped
#      (gpukmm.io/upgrade-skip), then taken once the label goes
#   4. 3.0 -> 4.0 with a pod that may not be evicted on gpu-1: it fails after the
#      drain timeout (uncordoned, its driver untouched), the rollout halts at
#      maxUnavailable (Upgraded=False UpgradeHalted naming the node and why,
#      Degraded), then the retry (the failed state removed) finishes it
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/upgrade.sh
kubesim_need_kubectl || exit 0
NODES="gpu-1 gpu-2 gpu-3 gpu-4"
# shellcheck disable=SC2086
up_init upgrade $NODES
ctrl_start A nolease
check "the controller is ready" 60 ctrl_ready A

# ---- 1. first install: the upgrader labels the nodes -------------------------------------------------
up_policy 1.0
installed() { local x; for x in $NODES; do version_on "$x" 1.0 && loaded_version "$x" 1.0 && reports "$x" 1.0 || return 1; done; }
check "first install: every node labelled 1.0 by gpukmm-upgrader and on 1.0 by its own report" 90 installed
check "Upgraded=True UpgradeComplete, status.upgrade 4/4 on 1.0" 40 eval 'upgraded_is True UpgradeComplete &&
	cp_is ".status.upgrade | .targetVersion == \"1.0\" and .nodes == 4 and .upToDate == 4 and .pending == 0"'
check "the label's Event on gpu-1 (UpgradeLabelled), no drain for a first install" 10 eval '[ "$(events_of gpu-1)" = UpgradeLabelled ]'
dp_on() { kraw GET "/api/v1/namespaces/$NS/pods?labelSelector=app%3Dintel-gpu-plugin&fieldSelector=spec.nodeName%3D$1" |
	jq -e '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length == 1' >/dev/null; }
dp_everywhere() { local x; for x in $NODES; do dp_on "$x" || return 1; done; }
check "the device plugin runs on every node" 60 dp_everywhere

# ---- 2. 1.0 -> 2.0, node by node -------------------------------------------------------------------------
up_workload 4
trainers() { [ "$(kraw GET /api/v1/namespaces/work/pods?labelSelector=app%3Dtrainer | jq '[.items[] | select(.status.phase == "Running")] | length')" = 4 ]; }
check "4 GPU trainers run (one per node), the budget allows 1 disruption" 60 eval 'trainers &&
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
check "Upgraded=True UpgradeComplete 4/4 on 2.0" 40 eval 'upgraded_is True UpgradeComplete &&
	cp_is ".status.upgrade | .targetVersion == \"2.0\" and .upToDate == 4 and .draining + .unloading + .loading + .failed == 0"'
after=$(agent_writes gpukmm-upgrader)
samples=$(up_samples)
[ "$samples" -gt 50 ] && ok "the sampler ran all along ($samples samples)" || nok "the sampler ran all along ($samples samples)"
m=$(up_sampler_max nodriver)
[ "$m" -le 1 ] && ok "never more than maxParallel = 1 node without the driver (max seen $m)" ||
	nok "never more than maxParallel = 1 node without the driver (max seen $m)"
m=$(up_sampler_max active)
[ "$m" -le 1 ] && ok "never more than 1 node in an upgrade step (max seen $m)" || nok "never more than 1 node in an upgrade step (max seen $m)"
check "the admin's cordon of gpu-3 survives the upgrade (and is not marked ours)" 5 node_is gpu-3 \
	'.spec.unschedulable == true and .metadata.annotations["gpukmm.io/upgrade-cordoned"] == null'
uncordoned() { local x; for x in "$@"; do node_is "$x" '(.spec.unschedulable // false) == false and
	([.metadata.annotations // {} | keys[] | select(startswith("gpukmm.io/upgrade-"))] | length == 0)' || return 1; done; }
check "our cordons are lifted: gpu-1, gpu-2, gpu-4 schedulable, no annotation of ours left" 5 uncordoned gpu-1 gpu-2 gpu-4
gone=0
for p in $FIRST_TRAINERS; do kraw GET "/api/v1/namespaces/work/pods/$p" | jq -e '.kind == "Pod"' >/dev/null 2>&1 || gone=$((gone + 1)); done
[ "$gone" = 4 ] && ok "every trainer that ran at the start was evicted" || nok "every trainer that ran at the start was evicted ($gone of 4)"
check "the evictions went through the Eviction API (pods/eviction), no pod deleted directly" 5 eval \
	'jq -e "(.[\"create pods/eviction\"] // 0) >= 4 and .[\"delete pods\"] == null" <<<"$(agent_writes gpukmm-upgrader)"'
check "gpu-1's Events: every step once" 5 eval '[ "$(events_of gpu-1)" = "UpgradeLabelled,UpgradeStarted,UpgradeDrained,UpgradeVersionMoved,Upgraded" ]'
check "the device plugin is back on every node" 60 dp_everywhere
echo "# rollout 1.0 -> 2.0 of 4 nodes: ${rollout_s}s"
for n in $NODES; do
	s=$(event_time "$n" UpgradeStarted) e=$(event_time "$n" Upgraded)
	[ -n "$s" ] && [ -n "$e" ] && echo "#   $n: $((e - s))s from UpgradeStarted to Upgraded"
done
echo "#   the upgrader's API writes (kubesim): before $before, after $after"
jq -rn --argjson a "$before" --argjson b "$after" '$b | to_entries[] | "#     \(.key): \(.value - ($a[.key] // 0))"'

# ---- 3. VFs active on gpu-2, gpu-4 skipped ---------------------------------------------------------------------
k label node gpu-4 gpukmm.io/upgrade-skip=true >>"$D/kubectl.log" 2>&1
np_pin gpu-2 oot-vfs || nok "gpu-2's root with SR-IOV VFs"
check "gpu-2's report says xe cannot be unloaded (VFs)" 40 node_is gpu-2 \
	'(.metadata.annotations["gpukmm.io/node-report"] | fromjson | .canUnload) == "false"'
up_policy 3.0
check "gpu-2 waits in unloading: status.upgrade names the VFs" 120 cp_is \
	'[.status.upgrade.problems[]? | select(.node == "gpu-2" and .state == "unloading" and .reason == "UnloadBlocked" and
	  (.message | test("SR-IOV VFs active")))] | length == 1'
check "... and the Upgraded condition says it too" 20 cp_is \
	'.status.conditions[] | select(.type == "Upgraded") | .reason == "Upgrading" and (.message | test("gpu-2 \\(unloading: xe cannot be unloaded yet: .*VFs"))'
check "gpu-2 still on 2.0 with its driver loaded" 5 eval 'version_on gpu-2 2.0 && loaded_version gpu-2 2.0'
np_unpin gpu-2
check "the VFs gone: gpu-1, gpu-2, gpu-3 on 3.0" 180 all_done 3.0 gpu-1 gpu-2 gpu-3
check "gpu-4 skipped: still on 2.0, never started" 5 eval 'version_on gpu-4 2.0 && state_is gpu-4 done'
check "Upgraded=True, 3/4 on 3.0, 1 skipped" 40 eval 'upgraded_is True UpgradeComplete &&
	cp_is ".status.upgrade | .upToDate == 3 and .skipped == 1 and .pending == 0"'
k label node gpu-4 gpukmm.io/upgrade-skip- >>"$D/kubectl.log" 2>&1
check "the skip label removed: gpu-4 on 3.0" 120 all_done 3.0 gpu-4

# ---- 4. a pod that may not be evicted: fail, halt, retry ------------------------------------------------------
k apply -f - >>"$D/kubectl.log" 2>&1 <<Y
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db, namespace: work}
spec: {minAvailable: 1, selector: {matchLabels: {app: db}}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: db, namespace: work}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: db}]}
Y
db_uid=$(k get rs -n work db -o jsonpath='{.metadata.uid}')
kraw POST /api/v1/namespaces/work/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"db\",\"namespace\":\"work\",
	\"labels\":{\"app\":\"db\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"db\",
	\"uid\":\"$db_uid\",\"controller\":true}]},\"spec\":{\"nodeName\":\"gpu-1\",\"containers\":[{\"name\":\"c\",\"image\":\"db\",
	\"resources\":{\"limits\":{\"gpu.intel.com/xe\":\"1\"}}}]}}" >/dev/null
check "the db pod runs on gpu-1; its budget allows no disruption" 30 eval \
	'[ "$(k get pdb -n work db -o jsonpath={.status.disruptionsAllowed})" = 0 ] && [ "$(k get pdb -n work db -o jsonpath={.status.currentHealthy})" = 1 ]'
up_policy 4.0 "drain: {timeoutSeconds: 8}"
check "gpu-1 fails after the drain timeout: state failed, the budget's refusal as the reason" 120 node_is gpu-1 \
	".metadata.labels[\"$STATE\"] == \"failed\" and
	 (.metadata.annotations[\"gpukmm.io/upgrade-reason\"] | test(\"drain timed out after 8s.*work/db: Cannot evict pod as it would violate the pod's disruption budget\"))"
check "the rollout halts at maxUnavailable: Upgraded=False UpgradeHalted names gpu-1 and DrainTimeout's message" 40 eval \
	'upgraded_is False UpgradeHalted && cp_is "(.status.conditions[] | select(.type == \"Upgraded\") | .message |
		test(\"gpu-1 \\\\(UpgradeFailed: drain timed out\")) and .status.upgrade.halted == true and .status.upgrade.failed == 1"'
check "Degraded=True UpgradeHalted" 5 cp_is '.status.conditions[] | select(.type == "Degraded") | .status == "True" and .reason == "UpgradeHalted"'
halted_nodes=$(kraw GET /api/v1/nodes | jq -r --arg s "$STATE" '[.items[] | select(.metadata.labels[$s] == "draining" or
	.metadata.labels[$s] == "unloading" or .metadata.labels[$s] == "loading") | .metadata.name] | join(",")')
[ -z "$halted_nodes" ] && ok "halted: no node in a step" || nok "halted: no node in a step ($halted_nodes)"
check "gpu-1: driver untouched (3.0 loaded), our cordon lifted, the db pod still there" 5 eval \
	'version_on gpu-1 3.0 && loaded_version gpu-1 3.0 && node_is gpu-1 "(.spec.unschedulable // false) == false" &&
	 kraw GET /api/v1/namespaces/work/pods/db | jq -e ".kind == \"Pod\"" >/dev/null'
check "gpu-1's UpgradeFailed Event (Warning)" 5 eval '[ "$(events_of gpu-1 | tr , "\n" | tail -1)" = UpgradeFailed ]'
# retry: the budget relaxed, the failed state removed
k delete pdb -n work db >>"$D/kubectl.log" 2>&1
k label node gpu-1 "$STATE-" >>"$D/kubectl.log" 2>&1
# shellcheck disable=SC2086
check "retried: every node on 4.0" 240 all_done 4.0 $NODES
check "Upgraded=True UpgradeComplete 4/4 on 4.0, Degraded=False" 40 eval 'upgraded_is True UpgradeComplete &&
	cp_is "(.status.conditions[] | select(.type == \"Degraded\") | .status == \"False\") and .status.upgrade.upToDate == 4"'
m=$(up_sampler_max nodriver)
[ "$m" -le 1 ] && ok "all along: never more than 1 node without the driver (max $m, $(up_samples) samples)" ||
	nok "all along: never more than 1 node without the driver (max $m)"
check "the admin's cordon of gpu-3 still there" 5 node_is gpu-3 '.spec.unschedulable == true'
