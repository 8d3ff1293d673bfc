#!/bin/bash
# The safety rule end to end (ARCHITECTURE.md §4, issue #15): gpukmm-watcher, -modmgr and
# -gater against kubesim. A ClusterPolicy is deleted while a GPU ResourceClaim is allocated:
# its Module and its finalizer must stay. Then the API fails and lies in every way the
# watcher reads it — discovery 404s shorter than the debounce (KMM, resource.k8s.io),
# lists answered 200 with {}, null, a Status or truncated JSON after a forced relist,
# a Module and a claim that fail conversion, the claim freed while the claims' list lies —
# and a sampler reading the API every ~0.1 s sees the Module's UID never change and the
# finalizer never go, while the status says why the deletion waits. A KMM discovery blip
# does not ungate a DaemonSet. Last, the lists tell the truth again and the finalizer
# patches meet twelve 409s in a row: the deletion completes in seconds (a 409 is re-read
# and retried on the conflict spacing, not on the failure backoff that grows to 1000 s),
# the conflicts are logged and an Event says so.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/gater.sh

# fast discovery, a debounce well above the blips below, watches that end every 1-2 s
# (so a forced 410 relists promptly)
MM_WATCHER_FLAGS="--discovery-interval 0.5 --discovery-confirm 8 --watch-timeout 1"
gt_setup
MPATH="/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$MM_NS/modules/gpu-gpu"
CPATH="/apis/intel.com/v1alpha1/clusterpolicies/gpu"
faults() { kraw PUT /kubesim/faults "$1" >/dev/null && [ "$(kraw_code)" = 200 ]; }
wlog() { grep -c "$1" "$MM_DIR/watcher.log"; }
report_seen() { grep "\"component\":\"modmgr\",\"policy\":\"gpu\"" "$MM_DIR/reports" | grep -qF "$1"; }

mk_ds "$MM_NS" gpu-device-plugin '{"kubernetes.io/arch":"amd64"}'
gt_start_gater
apply_cp gpu dra "$KM_BASIC"
check "Module created" wait_for module 20 module_exists
check "finalizer taken" wait_for finalizer 10 cp_has_finalizer
check "device plugin gated" wait_for gated 20 gated "$MM_NS" gpu-device-plugin
UID0=$(module_field .metadata.uid)

# ---- the sampler: the API every ~0.1 s (GETs: no fault rule below touches them), one curl
# and one jq a sample; it must read the objects at least once every 2 s through the faults ----
VIOL="$MM_DIR/violations"
: >"$VIOL"
: >"$MM_DIR/samples"
JUDGE='if length != 2 then "?" else
	(.[0] | if .kind == "Module" then .metadata.uid elif .reason == "NotFound" then "gone" else "?" end) as $u |
	(.[1] | if .kind == "ClusterPolicy" then ((.metadata.finalizers // []) | index("gpukmm.io/module-protection") != null)
		elif .kind == "Status" then "policy gone" else "?" end) as $f |
	(if $u != $uid and $u != "?" then "Module uid \($u) (was \($uid))" else empty end),
	(if $f == false then "finalizer gone" elif $f == "policy gone" then "ClusterPolicy gone" else empty end),
	(if $u == $uid and $f == true then "sample" else empty end) end'
SAMPLE_T0=$SECONDS
(
	while [ ! -e "$MM_DIR/sampler.stop" ]; do
		kcurl -s --max-time 2 -w '\n' "$KUBESIM_URL$MPATH" "$KUBESIM_URL$CPATH" 2>/dev/null |
			jq -rs --arg uid "$UID0" "$JUDGE" 2>/dev/null | sed "s/^/$(date +%T.%N) /" >"$MM_DIR/sample"
		grep -v ' sample$\| ?$' "$MM_DIR/sample" >>"$VIOL"
		grep -q ' sample$' "$MM_DIR/sample" && echo x >>"$MM_DIR/samples"
		sleep 0.1
	done
) &
SAMPLER=$!
no_violation() { [ ! -s "$VIOL" ]; }

# ---- a KMM discovery blip while the policy lives: nothing ungated, no error ----
a0=$(wlog "kmm.sigs.x-k8s.io/v1beta1 answered absent") w0=$(ds_writes)
faults '{"rules":[{"verb":"discovery","path":"/apis/kmm.sigs.x-k8s.io/v1beta1","code":404,"times":4}]}'
check "KMM discovery answers 404 four times (under the 8 s debounce)" wait_for blip 10 \
	eval '[ "$(wlog "kmm.sigs.x-k8s.io/v1beta1 answered absent")" -gt "$a0" ]'
check "…the watcher confirms KMM again" wait_for confirmed 10 grep -q "module state confirmed again" "$MM_DIR/watcher.log"
untouched() { gated "$MM_NS" gpu-device-plugin && [ "$(ds_writes)" = "$w0" ]; }
check "…the device plugin stayed gated (no DaemonSet write at all)" untouched
check "…no 'KMM is not installed' reported" bash -c "! grep -q 'KMM is not installed' '$MM_DIR/reports'"
faults '{}'

# ---- the policy deleted while a GPU claim is allocated: blocked ----
claim_alloc apps c1
# the claim must be seen before the deletion (the watcher publishes in the order it saw)
wait_for "claim seen" 10 watcher_has "ipc://$MM_DIR/watcher.sock" resourceclaim apps c1
kraw DELETE "$CPATH" >/dev/null
check "deletion blocked by the allocated claim (status says so)" wait_for blocked 20 \
	mm_report_has '.errors | index("allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/gpu-gpu deletion")'

# ---- discovery blips: KMM, resource.k8s.io ----
for gt in kmm.sigs.x-k8s.io/v1beta1:module resource.k8s.io/v1:resourceclaim; do
	gv=${gt%:*} topic=${gt#*:}
	a0=$(wlog "$gv answered absent") c0=$(wlog "$topic state confirmed again")
	faults "{\"rules\":[{\"verb\":\"discovery\",\"path\":\"/apis/$gv\",\"code\":404,\"times\":4}]}"
	check "$gv discovery: four 404s" wait_for "$gv blip" 10 eval '[ "$(wlog "$gv answered absent")" -gt "$a0" ]'
	# (the blip lasts ~2 s: the sampler watches through it, until the watcher vouches again)
	check "…the $topic state confirmed again after it" wait_for "$gv confirmed" 15 \
		eval '[ "$(wlog "$topic state confirmed again")" -gt "$c0" ]'
	check "…nothing deleted, the finalizer kept" no_violation
done
check "the status said why while KMM was unconfirmed" report_seen \
	"deletion of ClusterPolicy gpu waits: the state of KMM Module $MM_NS/gpu-gpu could not be confirmed (kmm.sigs.x-k8s.io/v1beta1 was served, but is absent"

# ---- lists that lie (a forced relist answered 200 with something that is not a list;
# every shape is in kube_watch_test: two per kind here, each failure backs the
# watch off further, 0.8 s doubling; the claims' lie is the section after the next) ----
for res in modules clusterpolicies; do
	for body in '{}' '{"kind":"List","items":['; do
		b0=$(wlog "$res.*list failed")
		faults "{\"rules\":[{\"verb\":\"watch\",\"resource\":\"$res\",\"code\":410},{\"verb\":\"list\",\"resource\":\"$res\",\"code\":200,\"body\":$(jq -Rn --arg b "$body" '$b')}]}"
		check "$res listed as $body: a failed list, not an empty cluster" wait_for "$res lie" 15 \
			eval '[ "$(wlog "$res.*list failed")" -gt "$b0" ]'
	done
	faults '{}'
	check "…$res: nothing deleted, the finalizer kept" no_violation
done

# ---- objects that fail conversion: unreadable, not absent ----
lie_list() { # RESOURCE KIND GROUP/VERSION ITEM-JSON: a forced relist answers a list of that one item
	local body
	body=$(jq -cn --arg k "$2List" --arg av "$3" --argjson it "$4" \
		'{kind: $k, apiVersion: $av, metadata: {resourceVersion: "1"}, items: [$it]}')
	faults "{\"rules\":[{\"verb\":\"watch\",\"resource\":\"$1\",\"code\":410},{\"verb\":\"list\",\"resource\":\"$1\",\"code\":200,\"body\":$(jq -Rn --arg b "$body" '$b')}]}"
}
u0=$(wlog "cannot convert")
lie_list modules Module kmm.sigs.x-k8s.io/v1beta1 "{\"apiVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"kind\":\"Module\",\"metadata\":{\"name\":\"gpu-gpu\",\"namespace\":\"$MM_NS\",\"uid\":\"$UID0\",\"resourceVersion\":\"1\"},\"spec\":\"not an object\"}"
check "a Module that fails conversion is marked unreadable" wait_for unreadable 40 eval '[ "$(wlog "cannot convert")" -gt "$u0" ]'
check "…the status names it" wait_for "status unreadable" 15 report_seen "KMM Module $MM_NS/gpu-gpu could not be read: spec: expected object, got string"
faults '{}'
check "…readable again once the list is" wait_for readable 40 grep -q "modules/gpu-gpu: readable again\|module $MM_NS/gpu-gpu: readable again" "$MM_DIR/watcher.log"
check "…nothing deleted, the finalizer kept" no_violation

# ---- the claim freed while the claims' list lies: the deletion waits for the truth ----
faults '{"rules":[{"verb":"watch","resource":"resourceclaims","code":410},{"verb":"list","resource":"resourceclaims","code":200,"body":"{}"}]}'
b0=$(wlog "resourceclaims.*list failed")
check "the claims' list lies" wait_for "claims lie" 40 eval '[ "$(wlog "resourceclaims.*list failed")" -gt "$b0" ]'
kraw DELETE /apis/resource.k8s.io/v1/namespaces/apps/resourceclaims/c1 >/dev/null
check "claim freed while the claims' list lies: the status says the deletion waits for the claims" \
	wait_for "claims unconfirmed" 15 report_seen "deletion waits: GPU ResourceClaims could not be confirmed"
check "…nothing deleted" no_violation

# ---- the truth again, and twelve 409s on the finalizer patch: done in seconds ----
touch "$MM_DIR/sampler.stop"
wait "$SAMPLER" 2>/dev/null
SAMPLE_S=$((SECONDS - SAMPLE_T0))
check "the sampler read the objects ($(wc -l <"$MM_DIR/samples") good samples in $SAMPLE_S s) and saw no violation during the faults" \
	eval '[ "$(wc -l <"$MM_DIR/samples")" -ge $((SAMPLE_S / 2)) ] && [ "$(wc -l <"$MM_DIR/samples")" -ge 10 ] && no_violation'
[ -s "$VIOL" ] && sed 's/^/#   /' "$VIOL" | head -5
c0=$(wlog "resourceclaim state confirmed again")
faults '{"rules":[{"verb":"patch","resource":"clusterpolicies","code":409,"times":12}]}'
# (the claims' relist comes after the watch's backoff, 0.8 s doubling over the failures)
check "the claims are read again" wait_for "claims confirmed" 40 eval '[ "$(wlog "resourceclaim state confirmed again")" -gt "$c0" ]'
t0=$SECONDS
check "the Module is deleted once the claims are confirmed free" wait_for "module gone" 20 module_gone
t1=$SECONDS
check "the finalizer is removed through twelve 409s within 10 s (not the failure backoff)" wait_for "cp gone" 10 cp_gone
echo "# finalizer removed $((SECONDS - t1)) s after the Module was gone (12 conflicts)"
check "…each conflict logged" bash -c "[ \$(grep -c 'conflict (409' '$MM_DIR/modmgr.log') -ge 12 ]"
check "…and an Event after a streak" wait_for event 10 event_seen Conflict
check "…no failure backoff (no 'pass failed')" bash -c "! grep -q 'pass failed' '$MM_DIR/modmgr.log'"
faults '{}'
check "the device plugin is ungated once the policy is gone" wait_for ungated 20 ungated "$MM_NS" gpu-device-plugin
gt_stop_gater TERM
check "gater exits 0" test $? = 0
mm_stop_modmgr TERM
check "modmgr exits 0" test $? = 0
exit $MM_FAILED
