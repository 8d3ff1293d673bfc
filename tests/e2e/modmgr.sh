#!/bin/bash
# gpukmm-modmgr end to end: kubesim + gpukmm-watcher + gpukmm-modmgr + a fake
# statusd, real processes over real sockets. Module status counts are set
# through the status subresource, as KMM would.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/modmgr.sh

mm_setup || { echo "not ok - setup"; exit 1; }
check "modmgr builds its view from the watcher's snapshot" \
	wait_for "modmgr synced" 20 grep -q "view rebuilt from snapshot" "$MM_DIR/modmgr.log"

# ---- create -------------------------------------------------------------------
apply_cp gpu dra "$KM_BASIC"
check "Module <cp>-gpu created in the operator namespace" wait_for "module" 20 module_exists
check "Module has one controller ownerReference to the ClusterPolicy" \
	test "$(module_field '[.metadata.ownerReferences[] | select(.controller==true and .kind=="ClusterPolicy")] | length')" = 1
check "Module renders moduleName xe" test "$(module_field '.spec.moduleLoader.container.modprobe.moduleName')" = xe
check "our finalizer is on the ClusterPolicy" wait_for finalizer 10 cp_has_finalizer
check "report kmmStatus 0/0 for a fresh Module" wait_for report 10 report_has '.kmmStatus == "0/0"'
check "Event ModuleCreated on the ClusterPolicy" wait_for event 10 event_seen ModuleCreated

# ---- status counts --------------------------------------------------------------
module_set_counts 1 2
check "kmmStatus follows the Module status (1/2)" wait_for "1/2" 10 report_has '.kmmStatus == "1/2"'
check "not fully available error, exact string" report_has \
	'.errors | index("module loader not fully available (1/2) for modules.kmm.sigs.x-k8s.io/gpu-gpu")'
module_set_counts 2 2
check "error disappears once available" wait_for "2/2" 10 report_has '.kmmStatus == "2/2" and (.errors | length == 0)'
check "ModuleLoaded condition True" report_has '.conditions[0].type == "ModuleLoaded" and .conditions[0].status == "True"'

# ---- idempotence -----------------------------------------------------------------
w0=$(writes)
n0=$(report_count)
mm_stop_modmgr TERM
check "modmgr exits 0 on SIGTERM" test $? = 0
mm_start_modmgr
check "restarted modmgr reports again" wait_for "report after restart" 20 reports_more_than "$n0"
check "a restart writes nothing (writes $w0 -> $(writes))" test "$(writes)" = "$w0"

# ---- update ----------------------------------------------------------------------
mw=$(module_writes)
cp_patch '{"spec":{"nodeSelector":{"gpu":"yes"}}}'
check "spec change patches the Module" wait_for selector 10 module_jq '.spec.selector.gpu == "yes"' 
module_writes_are() { test "$(module_writes)" = "$1"; } # re-evaluated on each poll
check "one Module write per real change" wait_for count 5 module_writes_are $((mw + 1))
cp_patch '{"spec":{"nodeSelector":null}}'
check "removed selector key really disappears" wait_for "selector key removed" 10 module_jq '.spec.selector | has("gpu") | not' 

# ---- version toggle: kill -9 between delete and recreate -----------------------------
# The recreate follows the delete within milliseconds; to crash in between, the
# API refuses Module creates for a while (fault injection), then modmgr is killed.
uid0=$(module_field .metadata.uid)
kraw PUT /kubesim/faults '{"seed":3,"rules":[{"verb":"create","resource":"modules","rate":1.0,"code":500}]}' >/dev/null
cp_patch '{"spec":{"kernelModule":{"version":"1.0"}}}'
check "version toggle deletes the Module (KMM cannot patch it)" wait_for "Module deleted for the version toggle" 10 module_gone
check "kmmStatus Recreating reported" wait_for Recreating 10 grep -q '"kmmStatus":"Recreating"' "$MM_DIR/reports"
check "the failed create surfaces the API error" wait_for "create error" 10 report_has \
	'any(.errors[]; startswith("failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: "))'
mm_stop_modmgr KILL
kraw PUT /kubesim/faults '{}' >/dev/null
mm_start_modmgr
check "after the crash the Module is recreated with the version" wait_for recreate 20 module_jq '.spec.moduleLoader.container.version == "1.0"' 
check "recreated Module has a new uid" test "$(module_field .metadata.uid)" != "$uid0"

# ---- faults: 409 and 5xx are retried with backoff --------------------------------------
kraw PUT /kubesim/faults '{"seed":7,"rules":[{"verb":"patch","resource":"modules","rate":1.0,"code":409}]}' >/dev/null
cp_patch '{"spec":{"nodeSelector":{"zone":"a"}}}'
check "409s are retried (backoff visible in the log)" wait_for "retry log" 10 grep -q "pass failed, retrying" "$MM_DIR/modmgr.log"
kraw PUT /kubesim/faults '{"seed":7,"rules":[{"verb":"*","resource":"modules","rate":0.5,"code":503}]}' >/dev/null
check "converges through 5xx faults" wait_for "zone=a" 30 module_jq '.spec.selector.zone == "a"' 
kraw PUT /kubesim/faults '{}' >/dev/null

# ---- ResourceClaim guard ------------------------------------------------------------------
mk_namespace user
kraw POST /apis/resource.k8s.io/v1/namespaces/user/resourceclaims \
	'{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c1","namespace":"user"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.intel.com"}}]}}}' >/dev/null
kraw PATCH /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/c1/status \
	'{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.intel.com","pool":"node-pool","device":"gpu-0"}]}}}}' \
	application/merge-patch+json >/dev/null
cp_patch '{"spec":{"kernelModule":null}}'
check "allocated claim blocks the deletion (exact error)" wait_for blocked 10 report_has \
	'.errors | index("allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/gpu-gpu deletion")'
check "Module still there while the claim is allocated" module_exists
kraw DELETE /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/c1 >/dev/null
check "claim released: Module deleted" wait_for "module deleted" 15 module_gone
check "kmmStatus N/A once the Module is gone" wait_for "N/A" 10 report_has '.kmmStatus == "N/A"'
check "our finalizer released when no Module is left" wait_for "finalizer removed" 10 cp_lacks_finalizer

# ---- dp-mode pod guard, and ClusterPolicy deletion through the finalizer ------------------
apply_cp dpp dp "$KM_BASIC"
check "dp policy gets its Module" wait_for "dpp module" 20 module_exists dpp
kraw POST /api/v1/namespaces/user/pods \
	'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","namespace":"user"},"spec":{"containers":[{"name":"c","image":"busybox","resources":{"limits":{"gpu.intel.com/i915":"1"}}}]}}' >/dev/null
kraw DELETE /apis/intel.com/v1alpha1/clusterpolicies/dpp >/dev/null
check "GPU pod blocks the deletion of a deleted policy's Module" wait_for "pod blocked" 10 report_has \
	'.errors | index("pods requesting gpu.intel.com resources blocking modules.kmm.sigs.x-k8s.io/dpp-gpu deletion")' dpp
check "policy held by our finalizer meanwhile" cp_jq '.metadata.deletionTimestamp != null' dpp
kraw DELETE /api/v1/namespaces/user/pods/p1 >/dev/null
check "pod gone: Module deleted" wait_for "dpp module deleted" 15 module_gone dpp
check "then the finalizer is released and the policy disappears" wait_for "dpp gone" 15 cp_gone dpp

mm_stop_modmgr TERM
check "modmgr exits 0 at the end" test $? = 0
exit $MM_FAILED
