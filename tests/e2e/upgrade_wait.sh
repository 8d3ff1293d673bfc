#!/bin/bash
# Rolling driver upgrades (issue #19): a rollout that waits rather than acts on
# what it has not confirmed (the safety rule), through the real processes
# (tests/lib/upgrade.sh's cluster: kubesim with its DaemonSet controller, kubelet
# and disruption controller, fake-kmm, a node profile per GPU node, GPU trainers
# under a budget). 1.0 -> 2.0 on 3 nodes with, from the start:
#   - every pod list of the API server failing (500): the node being drained stays
#     in draining with the failed list as its reason in status.upgrade; nothing is
#     evicted, no version label moves, no driver is unloaded; once the lists
#     work the drain goes on
#   - SR-IOV VFs active on gpu-2 (its node report says xe cannot be unloaded): it
#     waits in unloading, the reason in status.upgrade and the Upgraded
#     condition, its driver untouched, until the VFs are gone
#   - gpu-3 skipped (gpukmm.io/upgrade-skip): left on 1.0 and counted as skipped,
#     taken once the label goes
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/upgrade.sh
kubesim_need_kubectl || exit 0
# shellcheck disable=SC2086
up_init upgrade-wait gpu-1 gpu-2 gpu-3
up_install 1.0
up_workload 3
check "3 GPU trainers run" 60 eval '[ "$(kraw GET /api/v1/namespaces/work/pods?labelSelector=app%3Dtrainer |
	jq "[.items[] | select(.status.phase == \"Running\")] | length")" = 3 ]'
k label node gpu-3 gpukmm.io/upgrade-skip=true >>"$D/kubectl.log" 2>&1
np_pin gpu-2 oot-vfs@1.0 || nok "gpu-2's root with SR-IOV VFs"
check "gpu-2's report says xe cannot be unloaded (VFs)" 40 node_is gpu-2 \
	'(.metadata.annotations["gpukmm.io/node-report"] | fromjson | .canUnload) == "false"'

# ---- pod lists fail: no eviction on a failed read ----------------------------------------------------
kraw PUT /kubesim/faults '{"seed": 1, "rules": [{"verb": "list", "resource": "pods", "rate": 1.0, "code": 500}]}' >/dev/null ||
	nok "kubesim takes the faults"
up_policy 2.0
draining_node() { kraw GET /api/v1/nodes | jq -r --arg s "$STATE" '[.items[] | select(.metadata.labels[$s] == "draining") | .metadata.name] | join(" ")'; }
check "a node is draining and status.upgrade says its pod list failed" 60 cp_is \
	'[.status.upgrade.problems[]? | select(.state == "draining" and (.message | test("listing the node.s pods failed")))] | length == 1'
DN=$(draining_node)
[ -n "$DN" ] && [ "$DN" != gpu-3 ] && ok "one node in draining ($DN), not the skipped one" || nok "one node in draining (\"$DN\"), not the skipped one"
# the drainer lists once a round: let several rounds fail before judging
f0=$(kraw GET /kubesim/stats | jq '.faultsInjected')
check "several failed pod lists later" 30 eval '[ "$(kraw GET /kubesim/stats | jq ".faultsInjected")" -ge $((f0 + 3)) ]'
[ "$(evictions)" = 0 ] && ok "no eviction while the pod lists fail" || nok "no eviction while the pod lists fail ($(evictions))"
on_1() { local x; for x in gpu-1 gpu-2 gpu-3; do version_on "$x" 1.0 && loaded_version "$x" 1.0 || return 1; done; }
check "no version label moved, every driver still loaded" 5 on_1
check "still draining" 5 state_is "$DN" draining
kraw PUT /kubesim/faults '{"rules": []}' >/dev/null

# ---- the lists work: on to active VFs ---------------------------------------------------------------------
check "gpu-2 waits in unloading: status.upgrade names the VFs" 90 cp_is \
	'[.status.upgrade.problems[]? | select(.node == "gpu-2" and .state == "unloading" and .reason == "UnloadBlocked" and
	  (.message | test("SR-IOV VFs active")))] | length == 1'
check "... and the Upgraded condition says it too" 20 cp_is \
	'.status.conditions[] | select(.type == "Upgraded") | .reason == "Upgrading" and (.message | test("gpu-2 \\(unloading: xe cannot be unloaded yet: .*VFs"))'
[ "$(evictions)" -ge 1 ] && ok "the drains evicted once the lists worked ($(evictions) evictions)" || nok "the drains evicted once the lists worked"
check "gpu-2 still on 1.0 with its driver loaded" 5 eval 'version_on gpu-2 1.0 && loaded_version gpu-2 1.0'
np_unpin gpu-2
check "the VFs gone: gpu-1 and gpu-2 on 2.0 by their own report" 90 all_done 2.0 gpu-1 gpu-2
check "gpu-3 skipped: still on 1.0, never started" 5 eval 'version_on gpu-3 1.0 && loaded_version gpu-3 1.0 &&
	node_is gpu-3 ".metadata.labels[\"$STATE\"] != \"draining\" and (.spec.unschedulable // false) == false"'
check "Upgraded=True, 2/3 on 2.0, 1 skipped" 40 eval 'upgraded_is True UpgradeComplete &&
	cp_is ".status.upgrade | .upToDate == 2 and .skipped == 1 and .pending == 0"'
k label node gpu-3 gpukmm.io/upgrade-skip- >>"$D/kubectl.log" 2>&1
check "the skip label removed: gpu-3 on 2.0" 90 all_done 2.0 gpu-3
check "Upgraded=True 3/3 on 2.0" 40 eval 'upgraded_is True UpgradeComplete && cp_is ".status.upgrade.upToDate == 3"'
