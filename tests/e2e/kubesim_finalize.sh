#!/bin/bash
# Deletions that hang on finalizers, as on a real cluster (issue #17's uninstall):
# deleting the ClusterPolicy CRD while a policy still carries gpukmm's finalizer and no
# controller runs leaves the CRD Terminating (InstanceDeletionInProgress) and `kubectl
# delete` times out; new policies are refused; the CRD goes once the finalizer is
# released. A namespace with a finalized object stays Terminating with the namespace
# controller's conditions naming it, until it is released.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
kubesim_need_kubectl || exit 0
kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
CRD=clusterpolicies.intel.com

k apply -f deploy/crd/intel.com_clusterpolicies.yaml >/dev/null
k wait --for condition=established --timeout=10s crd/$CRD >/dev/null
policy() { # NAME: a policy as the controller leaves it (its finalizer added)
	k apply -f - <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: $1, finalizers: [gpukmm.io/module-protection]}
spec: {resourceRegistration: dp}
Y
}
policy gpu >/dev/null
check "a ClusterPolicy holding gpukmm's finalizer" test "$(k get clusterpolicy gpu -o jsonpath='{.metadata.finalizers[0]}')" = gpukmm.io/module-protection

# ---- the uninstall without a controller: the CRD hangs ---------------------------------------
out=$(k delete -f deploy/crd/intel.com_clusterpolicies.yaml --timeout=3s 2>&1)
rc=$?
sed 's/^/#   /' <<<"$out"
check "kubectl delete of the CRD does not finish (the hang)" test $rc -ne 0
cond() { k get crd $CRD -o jsonpath='{.status.conditions[?(@.type=="Terminating")].status}/{.status.conditions[?(@.type=="Terminating")].reason}'; }
check "the CRD stays, Terminating: InstanceDeletionInProgress" test "$(cond)" = True/InstanceDeletionInProgress
check "with the cleanup finalizer" test "$(k get crd $CRD -o jsonpath='{.metadata.finalizers[0]}')" = customresourcecleanup.apiextensions.k8s.io
check "the policy is marked for deletion, held by its finalizer" \
	test -n "$(k get clusterpolicy gpu -o jsonpath='{.metadata.deletionTimestamp}')"
out=$(policy late 2>&1)
check "no new policy meanwhile (create not allowed while ... terminating)" \
	grep -q "create not allowed while custom resource definition is terminating" <<<"$out"
# ---- the finalizer released (what the controller does on uninstall): the CRD goes --------------
k patch clusterpolicy gpu --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
check "finalizer released: the CRD is gone" k wait --for=delete crd/$CRD --timeout=10s
check "and the kind is no longer served" bash -c \
	"! KUBECONFIG=/dev/null $KUBECTL --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache api-resources --api-group=intel.com --no-headers | grep -q clusterpolicies"

# ---- a namespace with a finalized object ------------------------------------------------------
k apply -f tests/fixtures/kubesim/widget-crd.yaml >/dev/null
k wait --for condition=established --timeout=10s crd/widgets.test.gpukmm.io >/dev/null
k create namespace gpu-operator >/dev/null
k apply -f - >/dev/null <<'Y'
apiVersion: test.gpukmm.io/v1
kind: Widget
metadata: {name: held, namespace: gpu-operator, finalizers: [example.com/hold]}
spec: {size: 1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: plain, namespace: gpu-operator}
Y
out=$(k delete namespace gpu-operator --timeout=3s 2>&1)
check "kubectl delete namespace does not finish" test $? -ne 0
ns_cond() { k get ns gpu-operator -o jsonpath="{.status.conditions[?(@.type==\"$1\")].message}"; }
check "the namespace stays Terminating" test "$(k get ns gpu-operator -o jsonpath='{.status.phase}')" = Terminating
check "NamespaceContentRemaining names the widget" \
	test "$(ns_cond NamespaceContentRemaining)" = "Some resources are remaining: widgets.test.gpukmm.io has 1 resource instances"
check "NamespaceFinalizersRemaining names the finalizer" \
	test "$(ns_cond NamespaceFinalizersRemaining)" = "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
check "the content without finalizers is gone" bash -c \
	"! KUBECONFIG=/dev/null $KUBECTL --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache -n gpu-operator get cm plain"
k -n gpu-operator patch widget held --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null
check "finalizer released: the namespace is gone" k wait --for=delete ns/gpu-operator --timeout=10s
kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
