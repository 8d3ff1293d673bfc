#!/bin/bash
# Rolling driver upgrades (issue #19): a node that fails and a rollout that halts,
# through the real processes (tests/lib/upgrade.sh's cluster: kubesim with its
# DaemonSet controller, kubelet and disruption controller, fake-kmm, a node
# profile per GPU node). 1.0 -> 2.0 on 3 nodes with a pod on gpu-1 that its
# budget does not let go (minAvailable 1 of 1): gpu-1 fails after the drain
# timeout (the budget's refusal as the reason, its driver untouched, our cordon
# lifted, a Warning Event), the rollout halts at maxUnavailable = 1
# (Upgraded=False UpgradeHalted naming the node and why, Degraded=True, no node
# left in a step, the other nodes not started); the retry (the budget relaxed,
# the failed state removed) finishes it and Degraded goes back to False.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/upgrade.sh
kubesim_need_kubectl || exit 0
NODES="gpu-1 gpu-2 gpu-3"
# shellcheck disable=SC2086
up_init upgrade-halt $NODES
up_install 1.0
k create namespace work >>"$D/kubectl.log" 2>&1
db_uid=$(budgeted_rs work db 1 "minAvailable: 1" 2>>"$D/kubectl.log")
kraw POST /api/v1/namespaces/work/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"db\",\"namespace\":\"work\",
	\"labels\":{\"app\":\"db\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"db\",
	\"uid\":\"$db_uid\",\"controller\":true}]},\"spec\":{\"nodeName\":\"gpu-1\",\"containers\":[{\"name\":\"c\",\"image\":\"db\",
	\"resources\":{\"limits\":{\"gpu.intel.com/xe\":\"1\"}}}]}}" >/dev/null
check "the db pod runs on gpu-1; its budget allows no disruption" 30 eval \
	'[ "$(k get pdb -n work db -o jsonpath={.status.disruptionsAllowed})" = 0 ] && [ "$(k get pdb -n work db -o jsonpath={.status.currentHealthy})" = 1 ]'
up_sampler_start
up_policy 2.0 "drain: {timeoutSeconds: 6}"
check "gpu-1 fails after the drain timeout: state failed, the budget's refusal as the reason" 60 node_is gpu-1 \
	".metadata.labels[\"$STATE\"] == \"failed\" and
	 (.metadata.annotations[\"gpukmm.io/upgrade-reason\"] | test(\"drain timed out after 6s.*work/db: Cannot evict pod as it would violate the pod's disruption budget\"))"
check "the rollout halts at maxUnavailable: Upgraded=False UpgradeHalted names gpu-1 and why" 40 eval \
	'upgraded_is False UpgradeHalted && cp_is "(.status.conditions[] | select(.type == \"Upgraded\") | .message |
		test(\"gpu-1 \\\\(UpgradeFailed: drain timed out\")) and .status.upgrade.halted == true and .status.upgrade.failed == 1"'
check "Degraded=True UpgradeHalted" 5 cp_is '.status.conditions[] | select(.type == "Degraded") | .status == "True" and .reason == "UpgradeHalted"'
halted_nodes=$(kraw GET /api/v1/nodes | jq -r --arg s "$STATE" '[.items[] | select(.metadata.labels[$s] == "draining" or
	.metadata.labels[$s] == "unloading" or .metadata.labels[$s] == "loading") | .metadata.name] | join(",")')
[ -z "$halted_nodes" ] && ok "halted: no node in a step" || nok "halted: no node in a step ($halted_nodes)"
check "gpu-1: driver untouched (1.0 loaded), our cordon lifted, the db pod still there" 5 eval \
	'version_on gpu-1 1.0 && loaded_version gpu-1 1.0 && node_is gpu-1 "(.spec.unschedulable // false) == false" &&
	 kraw GET /api/v1/namespaces/work/pods/db | jq -e ".kind == \"Pod\"" >/dev/null'
check "the others not started: gpu-2 and gpu-3 on 1.0" 5 eval 'version_on gpu-2 1.0 && version_on gpu-3 1.0 &&
	! node_is gpu-2 ".metadata.labels[\"$STATE\"] != null and .metadata.labels[\"$STATE\"] != \"done\"" &&
	! node_is gpu-3 ".metadata.labels[\"$STATE\"] != null and .metadata.labels[\"$STATE\"] != \"done\""'
check "gpu-1's UpgradeFailed Event (Warning)" 5 eval '[ "$(events_of gpu-1 | tr , "\n" | tail -1)" = UpgradeFailed ] &&
	kraw GET "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dgpu-1" |
	jq -e "[.items[] | select(.reason == \"UpgradeFailed\" and .type == \"Warning\")] | length >= 1" >/dev/null'
# retry: the budget relaxed, the failed state removed
k delete pdb -n work db >>"$D/kubectl.log" 2>&1
k label node gpu-1 "$STATE-" >>"$D/kubectl.log" 2>&1
# shellcheck disable=SC2086
check "retried: every node on 2.0 by its own report" 90 all_done 2.0 $NODES
check "Upgraded=True UpgradeComplete 3/3 on 2.0, Degraded=False" 40 eval 'upgraded_is True UpgradeComplete &&
	cp_is "(.status.conditions[] | select(.type == \"Degraded\") | .status == \"False\") and .status.upgrade.upToDate == 3"'
m=$(up_sampler_max nodriver)
[ "$m" -le 1 ] && ok "all along: never more than 1 node without the driver (max $m, $(up_samples) samples)" ||
	nok "all along: never more than 1 node without the driver (max $m)"
