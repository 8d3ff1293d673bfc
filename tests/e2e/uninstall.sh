#!/bin/bash
# Issue #17: uninstalling, on kubesim under the shipped RBAC (which holds CRD deletion
# while custom resources keep finalizers, and a terminating namespace while its content
# does, as a real API server does).
#   1. `kubectl delete -k deploy/default` with a ClusterPolicy in place: the controller is
#      gone first, the policy keeps gpukmm's finalizer, the CRD hangs in Terminating
#      (InstanceDeletionInProgress) and kubectl times out: the hang the documented order
#      avoids.
#   2. `gpukmmctl uninstall` with the controller stopped: says so, deletes nothing.
#   3. With the controller running and a GPU ResourceClaim allocated: the policy is
#      deleted, its KMM Module is not (the claim guard), the command says what holds it
#      and stops after --timeout with the CRD, the namespace and the Module still there.
#   4. The claim released: the controller deletes the Module and releases the policy,
#      gpukmmctl removes everything labelled part-of=gpukmm, the CRD and the namespace
#      are gone, nothing is left Terminating.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/proc.sh
. tests/lib/shipped.sh
kubesim_need_kubectl || exit 0
NS=intel-gpu-base-operator
CP=gpu-kmm
FAILED=0
D=$(mktemp -d "${TMPDIR:-/tmp}/uninstall.XXXXXX") || exit 1
chmod 700 "$D"
SUP= WSUP= FK=
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; FAILED=1; }
check() { # NAME TIMEOUT_S CMD...
	local n=$1 t=$2
	shift 2
	if wait_until "$t" "$@" >/dev/null 2>&1; then ok "$n"; else notok "$n"; fi
}
stop_all() {
	stop_pid "$SUP" 10
	SUP=
	stop_pid "$WSUP" 10
	WSUP=
	stop_pid "$FK" 10
	FK=
}
teardown() {
	stop_all
	san_check "$D"/*.log || FAILED=1
	[ "$FAILED" = 0 ] || log_tails 30 "$D"/*.log
	kubesim_stop
	rm -rf "$D"
	exit $FAILED
}
trap teardown EXIT

# A cluster with gpukmm installed as the README says, one controller replica (its two
# containers as shipped), KMM (fake-kmm), a GPU node, and a ClusterPolicy whose KMM
# Module exists and which holds gpukmm's finalizer.
install() { # RUN
	local r=$D/$1
	trace() { echo "# install $1: $2 failed" >&2; return 1; }
	mkdir -p "$r/webhook-certs"
	mapfile -t WARGS < <(D=$r shipped_args webhook)
	"$GPUKMM_BIN/gpukmm" "${WARGS[@]}" >"$D/webhook-$1.log" 2>&1 &
	WSUP=$!
	wait_until 20 eval '[ -n "$(shipped_webhook_port $WSUP)" ]' || trace "$1" "the webhook's port"
	KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start \
		--service-addr "$NS/gpukmm-webhook-service=127.0.0.1:$(shipped_webhook_port "$WSUP")" || trace "$1" kubesim
	shipped_render default "$r/apply.yaml"
	k apply -f "$r/apply.yaml" -f tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml >"$D/apply-$1.log" 2>&1 &&
		k wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com \
			crd/modules.kmm.sigs.x-k8s.io >>"$D/apply-$1.log" 2>&1 || trace "$1" "kubectl apply"
	kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-1","labels":{"kubernetes.io/arch":"amd64","intel.feature.node.kubernetes.io/gpu":"true"}},"status":{"nodeInfo":{"kernelVersion":"6.8.0-45-generic"},"conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null
	kubesim_sa_kubeconfig "$r/kubeconfig" "$NS" gpukmm-controller && kubesim_admin_kubeconfig "$r/admin-kubeconfig" ||
		trace "$1" kubeconfigs
	"$GPUKMM_BIN/fake-kmm" --kubeconfig "$r/admin-kubeconfig" --load-delay-ms 100 --unload-delay-ms 100 \
		>>"$D/fake-kmm-$1.log" 2>&1 &
	FK=$!
	start_ctrl "$1"
	wait_until 60 eval 'k apply -f deploy/examples/clusterpolicy-kmm.yaml >/dev/null 2>&1' || trace "$1" "the policy"
	wait_until 60 eval "k -n $NS get module $CP-gpu >/dev/null 2>&1 &&
		k get clusterpolicy $CP -o jsonpath='{.metadata.finalizers}' | grep -q gpukmm.io/module-protection" ||
		trace "$1" "the Module and the finalizer"
}
start_ctrl() { # RUN
	local r=$D/$1
	mapfile -t ARGS < <(D=$r shipped_args gpukmm)
	"$GPUKMM_BIN/gpukmm" "${ARGS[@]}" --kubeconfig "$r/kubeconfig" >>"$D/gpukmm-$1.log" 2>&1 &
	SUP=$!
}
uninstall() { # ARGS...: gpukmmctl uninstall as the cluster admin; its output in $D/out, its exit code returned
	KUBECONFIG=$D/$RUN/admin-kubeconfig "$GPUKMM_BIN/gpukmmctl" uninstall "$@" >"$D/out" 2>&1
}
terminating() { [ -n "$(k get "$1" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]; }

# ---- 1. kubectl delete -k deploy/default: the controller goes first, the CRD hangs ----------------
RUN=naive
if install naive; then ok "installed: policy $CP with its KMM Module and gpukmm's finalizer"; else notok "installed"; exit 1; fi
stop_all # the Deployment's pods go (kubesim runs no pods: stopped by hand)
out=$(k delete -f "$D/naive/apply.yaml" --timeout=5s 2>&1)
rc=$?
grep -i 'timed out\|error' <<<"$out" | head -3 | sed 's/^/#   /'
check "kubectl delete of the install does not finish (times out)" 1 test "$rc" -ne 0
check "the ClusterPolicy CRD hangs in Terminating: InstanceDeletionInProgress" 1 eval \
	"terminating crd/clusterpolicies.intel.com && [ \"\$(k get crd clusterpolicies.intel.com -o jsonpath='{.status.conditions[?(@.type==\"Terminating\")].reason}')\" = InstanceDeletionInProgress ]"
check "... held by the policy, which keeps gpukmm's finalizer with nobody left to release it" 1 eval \
	"terminating clusterpolicy/$CP && k get clusterpolicy $CP -o jsonpath='{.metadata.finalizers}' | grep -q gpukmm.io/module-protection"
kubesim_stop

# ---- 2. gpukmmctl uninstall without a controller --------------------------------------------------
RUN=stopped
if install stopped; then ok "installed again"; else notok "installed again"; exit 1; fi
stop_pid "$SUP" 10
SUP=
uninstall --timeout 60s
rc=$?
sed 's/^/#   /' "$D/out"
check "gpukmmctl uninstall: the controller does not run: exit 1, and it says so" 1 eval \
	"[ $rc = 1 ] && grep -q 'controller: NOT running' '$D/out'"
check "... and nothing was deleted (the policy is not even marked)" 1 eval \
	"! terminating clusterpolicy/$CP && k get crd clusterpolicies.intel.com && k get ns $NS"

# ---- 3. the controller runs, a GPU is allocated: the guard holds, the command says why ---------------
lease() { kraw GET "/apis/coordination.k8s.io/v1/namespaces/$NS/leases/gpukmm-controller" | jq -r '"\(.spec.holderIdentity // "") \(.spec.renewTime // "")"'; }
LEASE0=$(lease)
start_ctrl stopped
kraw POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"user"}}' >/dev/null
kraw POST /apis/resource.k8s.io/v1/namespaces/user/resourceclaims \
	'{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"job","namespace":"user"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.intel.com"}}]}}}' >/dev/null
kraw PATCH /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/job/status \
	'{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.intel.com","pool":"gpu-1","device":"gpu-0"}]}}}}' \
	application/merge-patch+json >/dev/null
# back = every required service of the new supervisor ready and the Lease taken and renewed
# since the restart (not a count of services nor a line an earlier start may have logged)
check "the controller is back (its Lease renewed)" 60 eval \
	'"$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$D/stopped/run-gpukmm" --timeout-ms 1000 &&
	 l=$(lease) && [ -n "${l%% *}" ] && [ "$l" != "$LEASE0" ]'
uninstall --timeout 8s
rc=$?
sed 's/^/#   /' "$D/out"
check "gpukmmctl uninstall while a GPU ResourceClaim is allocated: exit 1 after --timeout" 1 test "$rc" = 1
check "... it said what holds the policy: the deletion blocked by the allocated claim" 1 eval \
	"grep -q \"$CP: held: DeletionBlocked\" '$D/out' && grep -q 'allocated GPU ResourceClaims' '$D/out'"
check "... the KMM Module was not deleted, the policy keeps its finalizer (the guard)" 1 eval \
	"k -n $NS get module $CP-gpu && terminating clusterpolicy/$CP &&
	 k get clusterpolicy $CP -o jsonpath='{.metadata.finalizers}' | grep -q gpukmm.io/module-protection"
check "... and nothing else was deleted: CRD, namespace, controller, webhook configurations" 1 eval \
	"! terminating crd/clusterpolicies.intel.com && k get ns $NS && k -n $NS get deploy gpukmm-controller &&
	 k get validatingwebhookconfiguration gpukmm-validating-webhook-configuration"

# ---- 4. the GPU released: the uninstall completes -----------------------------------------------------
kraw DELETE /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/job >/dev/null
T0=$SECONDS
uninstall --timeout 120s
rc=$?
sed 's/^/#   /' "$D/out"
check "gpukmmctl uninstall: exit 0, uninstalled ($((SECONDS - T0)) s)" 1 eval "[ $rc = 0 ] && grep -qx uninstalled '$D/out'"
check "the controller deleted the KMM Module itself (Event ModuleDeleted), under its guard" 1 eval \
	"! k -n $NS get module $CP-gpu 2>/dev/null &&
	 k -n default get events --field-selector reason=ModuleDeleted -o name | grep -q ."
check "nothing left: the CRD, the namespace, the webhook configurations, the cluster roles" 1 eval \
	"! k get crd clusterpolicies.intel.com 2>/dev/null && ! k get ns $NS 2>/dev/null &&
	 ! k get mutatingwebhookconfiguration gpukmm-mutating-webhook-configuration 2>/dev/null &&
	 [ -z \"\$(k get clusterroles,clusterrolebindings -l app.kubernetes.io/part-of=gpukmm -o name)\" ]"
check "the order: policies, then the webhook configurations and the CRD, the namespace last" 1 eval \
	"grep -n 'every ClusterPolicy is gone\|deleted mutatingwebhookconfigurations\|deleted customresourcedefinitions\|deleted namespaces' '$D/out' |
	 cut -d: -f1 | sort -n -c"
