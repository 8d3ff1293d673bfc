#!/bin/bash
# gpukmm-modmgr while the API server is slow on Event writes (kubesim latency
# injection, 4 s per Event write): Events are written in the background, so a
# policy change right behind another is still reconciled at once (a blocking
# Event write would hold the loop, and this second change, for 4 s).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/modmgr.sh

mm_setup || { echo "not ok - setup"; exit 1; }
apply_cp gpu dra "$KM_BASIC"
check "Module created" wait_for "module" 20 module_exists
kraw PUT /kubesim/faults '{"rules":[{"verb":"create","resource":"events","rate":1,"latencyMs":4000},
	{"verb":"patch","resource":"events","rate":1,"latencyMs":4000},
	{"verb":"get","resource":"events","rate":1,"latencyMs":4000}]}' >/dev/null
# first change: the Module is patched and an Event write (4 s) starts
cp_patch '{"spec":{"nodeSelector":{"gpu":"yes"}}}'
check "first change reconciled" wait_for "first" 10 module_jq '.spec.selector.gpu == "yes"'
# second change right behind it: must not wait for the Event write
t0=$(date +%s%N)
cp_patch '{"spec":{"nodeSelector":{"gpu":"no"}}}'
check "second change reconciled while the Event write hangs" wait_for "second" 10 module_jq '.spec.selector.gpu == "no"'
dt=$((($(date +%s%N) - t0) / 1000000))
echo "# second change reconciled after $dt ms (Event writes take 4000 ms)"
check "second change reconciled in under 3 s, before the 4 s Event write could end ($dt ms)" test "$dt" -lt 3000
kraw PUT /kubesim/faults '{"rules":[]}' >/dev/null
check "the Events still get written (in the background)" \
	wait_for "events" 15 in_shell "kraw GET /api/v1/namespaces/default/events | jq -e '[.items[] | select(.involvedObject.name == \"gpu\")] | length > 0' >/dev/null"
mm_stop_modmgr TERM
check "modmgr exits 0 with Event writes possibly in flight" test $? = 0
exit $MM_FAILED
