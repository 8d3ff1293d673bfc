#!/bin/bash
# gpukmm-modmgr through the whole status path, against KMM's own admission:
# kubesim + fake-kmm (registers KMM's validating webhook for Modules) +
# gpukmm-watcher + gpukmm-modmgr + the real gpukmm-statusd (controller mode).
# gpukmm's own ClusterPolicy webhook is NOT installed, so a policy only KMM
# rejects reaches modmgr (issue #6):
#   - a KMM admission denial appears verbatim in the ClusterPolicy's status.errors;
#   - a second pass and a modmgr restart write nothing;
#   - 409 and 5xx storms converge, retried with backoff (requests counted: no hot loop);
#   - version toggle (KMM refuses it in place) with kill -9 between delete and recreate.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/modmgr.sh

MM_NO_START=1 mm_setup || { echo "not ok - setup"; exit 1; }
# the real statusd instead of the fake one, on the same socket
kill -KILL "$MM_STATUSD_PID" 2>/dev/null # a test double: no clean stop needed
wait "$MM_STATUSD_PID" 2>/dev/null
"$GPUKMM_BIN/gpukmm-statusd" --mode controller --kubeconfig "$MM_DIR/kubeconfig" --listen "ipc://$MM_DIR/statusd.sock" \
	--debounce-ms 50 --grace-ms 200 >>"$MM_DIR/statusd.log" 2>&1 &
MM_STATUSD_PID=$!
"$GPUKMM_BIN/fake-kmm" --kubeconfig "$MM_DIR/kmm-kubeconfig" --load-delay-ms 50 --unload-delay-ms 50 \
	--url-file "$MM_DIR/fk.url" >>"$MM_DIR/fakekmm.log" 2>&1 &
FK_PID=$!
trap 'kill $FK_PID 2>/dev/null; wait $FK_PID 2>/dev/null; mm_teardown' EXIT
check "fake-kmm up (KMM's Module webhook registered)" wait_for "fake-kmm url" 20 test -s "$MM_DIR/fk.url"
mm_start_watcher
mm_start_modmgr
check "modmgr synced" wait_for "modmgr synced" 20 grep -q "view rebuilt from snapshot" "$MM_DIR/modmgr.log"

st_has() { cp_json "${2:-gpu}" | jq -e ".status | $1" >/dev/null; }
faults() { kraw GET /kubesim/stats | jq -r "[.faults[\"$1\"] // {} | to_entries[] | select(.key==\"modules\") | .value] | add // 0"; }
cp_writes() { kraw GET /kubesim/stats | jq -r '(.writesByResource.clusterpolicies // 0) + (.writesByResource["clusterpolicies/status"] // 0)'; }

# ---- a denial only KMM makes surfaces verbatim ------------------------------------
# A build-only mapping: the ClusterPolicy CRD accepts it (upstream's webhook too,
# reference §10.1); KMM refuses a mapping without containerImage.
KMSG='failed to validate kernel mappings: missing spec.moduleLoader.container.kernelMappings[0].containerImage'
apply_cp gpu dra '{"moduleName":"xe","kernelMappings":[{"regexp":"^.+$","build":{"dockerfileConfigMap":{"name":"xe-dockerfile"}}}]}'
check "KMM denial in status.errors, verbatim, wrapped in upstream's message" wait_for "denial" 20 \
	st_has "(.errors // []) | map(startswith(\"failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: \") and contains(\"$KMSG\")) | any"
check "Degraded condition says why" st_has '(.conditions // []) | map(select(.type=="Degraded" and .status=="True")) | length == 1'
check "no Module was created" module_gone
# gpukmmctl validate (= our webhook) would have refused it with our message
printf '{"apiVersion":"intel.com/v1alpha1","kind":"ClusterPolicy","metadata":{"name":"gpu"},"spec":{"resourceRegistration":"dra","kernelModule":{"moduleName":"xe","kernelMappings":[{"regexp":"^.+$","build":{"dockerfileConfigMap":{"name":"xe-dockerfile"}}}]}}}' >"$MM_DIR/bo.json"
"$GPUKMM_BIN/gpukmmctl" validate "$MM_DIR/bo.json" >"$MM_DIR/bo.out" 2>&1
check "gpukmmctl validate catches it first (exit 1)" test $? = 1

# a second policy whose Module name + namespace is too long for KMM
apply_cp long-policy-name0 dra "$KM_BASIC"
check "KMM's name-length denial verbatim" wait_for "long" 20 st_has \
	'(.errors // []) | map(contains("module name and namespace have a combined length of 44 characters, which exceeds the maximum of 41 when version is set")) | any' long-policy-name0

# (its Module creates keep failing: remove it so its retries do not count below)
kraw DELETE /apis/intel.com/v1alpha1/clusterpolicies/long-policy-name0 >/dev/null
check "the refused policy can be deleted (no Module, finalizer released)" wait_for "cp gone" 20 cp_gone long-policy-name0

# fix the first one: the error goes, the Module appears
cp_patch '{"spec":{"kernelModule":{"kernelMappings":[{"regexp":"^.+$","containerImage":"registry.example.com/xe-driver:1.0"}]}}}'
check "fixed policy: Module created" wait_for module 20 module_exists
check "fixed policy: the denial is gone from status.errors" wait_for "no errors" 20 st_has '(.errors // []) | length == 0'

# ---- idempotence: a second pass and a restart write nothing ----------------------------
settled() { st_has ".observedGeneration == $(cp_json | jq '.metadata.generation')"; }
wait_for "settled" 10 settled
# fake-kmm's own writes to a new Module (finalizer, status) must be done before counting
wait_for "fake-kmm settled" 10 grep -q "gpu-gpu: status matching=0" "$MM_DIR/fakekmm.log"
mw=$(module_writes)
g=$(cp_json | jq '.metadata.generation')
cp_patch '{"spec":{"logLevel":3}}' # a pass runs (new generation), the Module does not change
check "second pass ran (observedGeneration $((g + 1)) through modmgr -> statusd)" wait_for "gen" 20 st_has ".observedGeneration == $((g + 1))"
check "second pass wrote no Module ($mw -> $(module_writes))" test "$(module_writes)" = "$mw"
w0=$(writes)
# SIGTERM with a deadline: a stop that hangs must fail here, not hang the suite
kill -TERM "$MM_MODMGR_PID"
check "modmgr exits on SIGTERM" wait_for "modmgr exit" 10 bash -c "! kill -0 $MM_MODMGR_PID"
mm_stop_modmgr KILL
n0=$(grep -c "view rebuilt from snapshot" "$MM_DIR/modmgr.log")
mm_start_modmgr
resynced() { [ "$(grep -c "view rebuilt from snapshot" "$MM_DIR/modmgr.log")" -gt "$n0" ]; }
check "restarted modmgr resynced" wait_for "resynced" 20 resynced
cp_patch '{"spec":{"logLevel":2}}' # proves the restarted modmgr's passes reach statusd
check "restarted modmgr reports (observedGeneration $((g + 2)))" wait_for "gen" 20 st_has ".observedGeneration == $((g + 2))"
# our patch + statusd's observedGeneration write; nothing from modmgr
check "restart wrote no Module and no finalizer ($w0 -> $(writes))" test "$(module_writes)" = "$mw" -a "$(writes)" -le $((w0 + 2))

# ---- 409 storm: retried with backoff, converges ----------------------------------------
kraw PUT /kubesim/faults '{"seed":5,"rules":[{"verb":"patch","resource":"modules","rate":1.0,"code":409}]}' >/dev/null
f0=$(faults patch)
cp_patch '{"spec":{"nodeSelector":{"zone":"a"}}}'
at_least() { [ "$($1 $2)" -ge "$3" ]; } # at_least COUNTER ARG N
wait_for "409s" 10 at_least faults patch $((f0 + 3))
t0=$SECONDS
sleep 3 # the storm lasts a fixed time: what is counted is how often modmgr tries meanwhile
n409=$(($(faults patch) - f0))
kraw PUT /kubesim/faults '{}' >/dev/null
# base 5 ms doubling: ~10 tries in the first 3 s, then one every few seconds; a hot loop makes thousands
check "409 storm: retried, with backoff ($n409 tries in $((SECONDS - t0 + 0))+ s)" test "$n409" -ge 3 -a "$n409" -le 25
check "409 storm: converges once the conflicts stop" wait_for "zone=a" 30 module_jq '.spec.selector.zone == "a"'

# ---- 5xx storm on every Module call ----------------------------------------------------------
kraw PUT /kubesim/faults '{"seed":9,"rules":[{"verb":"*","resource":"modules","rate":1.0,"code":503}]}' >/dev/null
injected() { kraw GET /kubesim/stats | jq -r '.faultsInjected'; }
s0=$(injected)
cp_patch '{"spec":{"nodeSelector":{"zone":"b"}}}'
wait_for "503s" 10 at_least injected - $((s0 + 3))
sleep 3 # as above
n503=$(($(injected) - s0))
check "5xx storm: the API error reaches status.errors" wait_for "503 in status" 10 st_has \
	'(.errors // []) | map(startswith("failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: ")) | any'
kraw PUT /kubesim/faults '{}' >/dev/null
check "5xx storm: retried, with backoff ($n503 failed requests)" test "$n503" -ge 3 -a "$n503" -le 25
check "5xx storm: converges" wait_for "zone=b" 30 module_jq '.spec.selector.zone == "b"'
check "5xx storm: the error clears" wait_for "no errors" 20 st_has '(.errors // []) | length == 0'

# ---- version toggle: KMM refuses it in place; kill -9 between delete and recreate -------------
uid0=$(module_field '.metadata.uid')
kraw PUT /kubesim/faults '{"seed":3,"rules":[{"verb":"create","resource":"modules","rate":1.0,"code":500}]}' >/dev/null
cp_patch '{"spec":{"kernelModule":{"version":"1.0"}}}'
check "toggle: Module deleted (not patched: KMM would refuse)" wait_for gone 30 module_gone
check "toggle: the refused create is in the ClusterPolicy status" wait_for "create error" 20 st_has \
	'(.errors // []) | map(startswith("failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: ")) | any'
mm_stop_modmgr KILL
kraw PUT /kubesim/faults '{}' >/dev/null
mm_start_modmgr
check "after kill -9: Module recreated with the version" wait_for "version" 30 module_jq '.spec.moduleLoader.container.version == "1.0"'
check "recreated Module has a new uid" test "$(module_field '.metadata.uid')" != "$uid0"
check "fake-kmm never saw an in-place version switch" bash -c "! grep -q 'cannot update to or from an empty version' '$MM_DIR/modmgr.log'"
converged() { st_has '((.errors // []) | length == 0) and .kmmStatus == "0/0"'; }
wait_for "no errors" 20 converged || echo "# status: $(cp_json | jq -c .status)"
check "status converges: no errors" converged
check "statusd and fake-kmm ran clean" bash -c "! grep -qE 'Sanitizer|runtime error' '$MM_DIR/statusd.log' '$MM_DIR/fakekmm.log' '$MM_DIR/modmgr.log'"
exit $MM_FAILED
