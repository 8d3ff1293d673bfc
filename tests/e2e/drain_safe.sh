#!/bin/bash
# Drain-safe gating (issue #19) through the real processes and the real kubectl
# drain: a controller profile, fake-kmm as KMM (which models the drain deadlock:
# it drops a cordoned node and unloads, the unload fails while a pod on the node
# holds the GPU — a GPU workload, or the device plugin that the ready label gates
# and that drain leaves alone — and the ready label stays), kubesim with its
# DaemonSet controller, kubelet and disruption controller (PodDisruptionBudgets).
# `kubectl drain` of a GPU node with the driver loaded, a GPU workload under a
# budget and the device plugin on it completes; the driver stays (loaded, ready
# label, KMM never even tries to unload it), the device plugin keeps running
# there; uncordon changes nothing either. Without the Module's toleration of the
# cordon (before this issue) KMM starts an unload that fails for ever.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/scenario.sh
kubesim_need_kubectl || exit 0
NS=intel-gpu-base-operator
CP=gpu
MOD=$CP-gpu
KEY="kmm.node.kubernetes.io/$NS.$MOD.ready"
LOADED="fake-kmm.gpukmm.io/loaded.$NS.$MOD"
FAILED_UNLOAD="fake-kmm.gpukmm.io/unload-failed.$NS.$MOD"
KV=6.8.0-45-generic
sc_init drain
sc_kmm_cluster 200 200
node gpu-1 "$KV"
node gpu-2 "$KV"
ctrl_start A nolease
check "the controller is ready" 60 ctrl_ready A
k apply -f - >>"$D/kubectl.log" 2>&1 <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: $CP}
spec:
  resourceRegistration: dp
  useNFDLabeling: true
  kernelModule:
    kernelMappings:
    - regexp: '^6\.8\.0-[0-9]+-generic\$'
      containerImage: registry.example.com/gpu/xe-oot-kmd:1.3-\${KERNEL_FULL_VERSION}
Y
check "KMM loads xe on gpu-1 and gpu-2" 40 eval 'loaded_on gpu-1 && loaded_on gpu-2'
module_is() { kraw GET "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$MOD" | jq -e "$1" >/dev/null; }
check "the Module tolerates the cordon (drain-safe)" 20 module_is \
	'.spec.tolerations | index({"key":"node.kubernetes.io/unschedulable","operator":"Exists","effect":"NoSchedule"}) != null'
dp_on() { k get pods -n "$NS" -l app=intel-gpu-plugin --field-selector "spec.nodeName=$1,status.phase=Running" -o name 2>/dev/null | grep -q .; }
check "the device plugin runs on gpu-1 (its DaemonSet gated on the ready label)" 40 dp_on gpu-1

# a GPU workload on each node, one disruption allowed by its budget
k create namespace work >>"$D/kubectl.log" 2>&1
rs_uid=$(budgeted_rs work trainer 2 "minAvailable: 1" 2>>"$D/kubectl.log")
for i in 1 2; do
	k apply -f - >>"$D/kubectl.log" 2>&1 <<Y
apiVersion: v1
kind: Pod
metadata:
  name: t$i
  namespace: work
  labels: {app: trainer}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: trainer, uid: $rs_uid, controller: true}]
spec: {nodeName: gpu-$i, containers: [{name: c, image: trainer, resources: {limits: {gpu.intel.com/xe: "1"}}}]}
Y
done
pdb_allows() { [ "$(k get pdb -n work trainer -o jsonpath='{.status.disruptionsAllowed}')" = 1 ]; }
check "the trainers run: the budget allows 1 disruption" 30 pdb_allows

# ---- kubectl drain with the driver loaded ---------------------------------------------------
if k drain gpu-1 --ignore-daemonsets --delete-emptydir-data --timeout=60s >"$D/drain.log" 2>&1; then
	ok "kubectl drain gpu-1 completes"
else
	nok "kubectl drain gpu-1 completes"
	sed 's/^/#   /' "$D/drain.log"
fi
check "the trainer left gpu-1 through the Eviction API" 20 eval '! k get pod -n work t1 >/dev/null 2>&1'
# a barrier: once fake-kmm has loaded a node that joins after the drain, it has seen the cordon
node gpu-3 "$KV"
check "fake-kmm has seen the cordon (a node that joined after it loaded)" 40 loaded_on gpu-3
check "the driver stays on the drained node (fake-kmm's loaded record)" 5 node_is gpu-1 ".metadata.annotations[\"$LOADED\"] == \"$KV\""
check "its ready label stays" 5 loaded_on gpu-1
check "KMM never tried to unload it (no failing unloader)" 5 node_is gpu-1 ".metadata.annotations[\"$FAILED_UNLOAD\"] == null"
check "the cordoned node stays in the Module's targets (3 matching, 3 available)" 20 module_is \
	'.status.moduleLoader | .nodesMatchingSelectorNumber == 3 and .availableNumber == 3'
check "the device plugin keeps running on the drained node" 5 dp_on gpu-1
k uncordon gpu-1 >>"$D/kubectl.log" 2>&1
check "uncordoned: still loaded, nothing unloaded" 5 eval "loaded_on gpu-1 && node_is gpu-1 '.metadata.annotations[\"$FAILED_UNLOAD\"] == null'"
check "the policy stays Ready" 40 cp_is '.status.conditions[] | select(.type == "Ready") | .status == "True"'

# ---- the policy deleted: the operands go, then KMM unloads everywhere ------------------------
# opmgr's teardown deletes the DaemonSets (their pods are collected), releases the policy to
# modmgr, which deletes the Module; KMM's unload runs once no operand pod holds the driver
# (ARCHITECTURE §5 "The operands leave before KMM unloads").
k delete rs -n work trainer --cascade=foreground --wait=false >>"$D/kubectl.log" 2>&1
k delete pod -n work --all --wait=false >>"$D/kubectl.log" 2>&1
check "the trainers are gone" 30 eval '[ -z "$(k get pods -n work -o name 2>/dev/null)" ]'
k delete clusterpolicy "$CP" --wait=false >>"$D/kubectl.log" 2>&1
check "policy deleted: the operands' pods, the Module and every ready label are gone (KMM unloaded)" 60 eval \
	"! k get clusterpolicy $CP >/dev/null 2>&1 && ! k -n $NS get module $MOD >/dev/null 2>&1 &&
	 [ -z \"\$(k get nodes -l '$KEY' -o name)\" ] && [ -z \"\$(k get pods -n $NS -o name)\" ]"
