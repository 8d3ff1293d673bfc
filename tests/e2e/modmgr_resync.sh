#!/bin/bash
# gpukmm-modmgr end to end, the moving parts around it: KMM installed after
# start (discovery re-checked, no restart), statusd refusing reports (retried),
# the watcher killed and restarted (modmgr resyncs by snapshot and carries on).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/modmgr.sh

MM_NO_KMM=1
MM_WATCHER_FLAGS="--discovery-interval 1"
MM_STATUSD_FLAGS="--fail-first 2"
mm_setup || { echo "not ok - setup"; exit 1; }
check "modmgr synced" wait_for "modmgr synced" 20 grep -q "view rebuilt from snapshot" "$MM_DIR/modmgr.log"

# ---- KMM absent ----------------------------------------------------------------
apply_cp gpu dra "$KM_BASIC"
check "KMM absent: exact error reported (after statusd refused the first reports)" \
	wait_for "kmm error" 20 report_has '.errors | index("KMM is not installed in the cluster.")'
check "KMM absent: kmmStatus left untouched" report_has 'has("kmmStatus") | not'
check "KMM absent: no finalizer taken" cp_lacks_finalizer

# ---- KMM installed while running ---------------------------------------------------
mm_install_kmm
check "KMM installed later: Module created without a restart" wait_for "module" 20 module_exists
check "KMM installed later: the error is gone" wait_for "error cleared" 10 report_has '(.errors | length) == 0'
check "KMM installed later: finalizer taken" wait_for finalizer 10 cp_has_finalizer

# ---- watcher crash -------------------------------------------------------------------
kill -KILL "$MM_WATCHER_PID"; wait "$MM_WATCHER_PID" 2>/dev/null; MM_WATCHER_PID=
cp_patch '{"spec":{"nodeSelector":{"while":"down"}}}'
mm_start_watcher
check "watcher restarted: the change made while it was down is applied" wait_for "patched" 30 \
	module_jq '.spec.selector.while == "down"'
cp_patch '{"spec":{"nodeSelector":{"after":"restart"}}}'
check "and later changes still flow" wait_for "patched again" 20 module_jq '.spec.selector.after == "restart"'
check "modmgr still running" kill -0 "$MM_MODMGR_PID"

# ---- KMM uninstalled: status says so ------------------------------------------------------
kraw DELETE /apis/apiextensions.k8s.io/v1/customresourcedefinitions/modules.kmm.sigs.x-k8s.io >/dev/null
check "KMM uninstalled: status says so" wait_for "kmm gone" 20 report_has '.errors | index("KMM is not installed in the cluster.")'

mm_stop_modmgr TERM
check "modmgr exits 0" test $? = 0
exit $MM_FAILED
