#!/bin/bash
# gpukmm-opmgr and Kueue, end to end (kubesim under RBAC + watcher + opmgr + fake
# statusd, real kubectl): enableKueue before Kueue is installed says so in the
# status and writes nothing; the Kueue CRDs applied (tests/fixtures/crds): the
# ResourceFlavor, one ClusterQueue per equalResources entry with an even share
# of the GPU nodes' allocatable (dp mode) and the LocalQueues; a GPU node added:
# the quotas follow (same objects); a queue dropped from the spec: its
# ClusterQueue and LocalQueue go; dra mode: the quotas count the devices of the
# gpu.intel.com ResourceSlices (another driver's do not count); enableKueue off:
# every Kueue object goes; on again, then the policy deleted: the Kueue objects
# go in the teardown, the finalizer is released, nothing is left.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/opmgr.sh

MM_WATCHER_FLAGS="--discovery-interval 1"
op_setup --pod-ready-ms 200
CPP=/apis/intel.com/v1alpha1/clusterpolicies/gpu
KQ=/apis/kueue.x-k8s.io/v1beta2
# node NAME CPU MEMORY [I915]: a node with that allocatable (no GPU when I915 is empty)
node() {
	local gpu=""
	[ -n "${4:-}" ] && gpu=",\"gpu.intel.com/i915\":\"$4\""
	kraw POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",\"labels\":{\"kubernetes.io/arch\":\"amd64\"}},\"status\":{\"allocatable\":{\"cpu\":\"$2\",\"memory\":\"$3\"$gpu},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}" >/dev/null
}
node n1 8 16Gi 2
node n2 8000m 16Gi 2
node cpu-only 64 256Gi
for ns in team-a team-b; do k create namespace $ns >/dev/null; done
# quota NAME RESOURCE: a ClusterQueue's nominal quota of that resource
quota_is() { [ "$(quota "$1" "$2")" = "$3" ]; }
quota() { obj $KQ/clusterqueues/$1 | jq -r ".spec.resourceGroups[0].flavors[0].resources[] | select(.name == \"$2\") | .nominalQuota"; }
cq_both() { quotas_are queue-a "$1" && quotas_are queue-b "$1"; }
shares() { [ "$(quota queue-a "$1")" = "$2" ] && [ "$(quota queue-b "$1")" = "$3" ]; } # shares RESOURCE A B
lqs() { obj_jq $KQ/namespaces/team-a/localqueues/lq-a '.spec.clusterQueue == "queue-a"' && obj_jq $KQ/namespaces/team-b/localqueues/lq-b '.spec.clusterQueue == "queue-b"'; }
b_gone() { obj_gone $KQ/clusterqueues/queue-b && obj_gone $KQ/namespaces/team-b/localqueues/lq-b; }
a_gone() { obj_gone $KQ/clusterqueues/queue-a && obj_gone $KQ/namespaces/team-a/localqueues/lq-a && obj_gone $KQ/resourceflavors/gpu.intel.com-kueue-flavor; }
quotas_are() { # quotas_are NAME 'resource=value ...' (and nothing else)
	local want=$1 got
	shift
	got=$(obj $KQ/clusterqueues/$want | jq -r '[.spec.resourceGroups[0].flavors[0].resources[] | "\(.name)=\(.nominalQuota)"] | join(" ")')
	[ "$got" = "$1" ] || { echo "# $want: $got" >&2; return 1; }
}
k apply -f - >/dev/null <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: gpu}
spec:
  resourceRegistration: dp
  enableKueue: true
  kueue:
    equalResources:
    - {name: queue-a, localQueues: [{name: lq-a, namespace: team-a}]}
    - {name: queue-b, localQueues: [{name: lq-b, namespace: team-b}]}
Y
op_start
check "opmgr synced" wait_for "opmgr synced" 20 op_synced
check "Kueue not installed: the status says so" wait_for "absent msg" 20 op_report_has \
	'.errors | index("Kueue is not installed (kueue.x-k8s.io/v1beta2 resourceflavors, clusterqueues, localqueues not served): enableKueue has no effect") != null'
check "Kueue not installed: the device plugin is deployed all the same" wait_for dp 20 ds_is gpu-device-plugin '.kind == "DaemonSet"'

# ---- Kueue installed: the flavor, the queues with an even share of the GPU nodes ----------
k apply -f tests/fixtures/crds/resourceflavors.kueue.x-k8s.io.yaml -f tests/fixtures/crds/clusterqueues.kueue.x-k8s.io.yaml \
	-f tests/fixtures/crds/localqueues.kueue.x-k8s.io.yaml >/dev/null
check "ResourceFlavor created" wait_for flavor 20 obj_jq $KQ/resourceflavors/gpu.intel.com-kueue-flavor \
	'.metadata.labels == {"app":"gpu.intel.com-kueue-queue","owner":"gpu","app.kubernetes.io/managed-by":"gpukmm"}'
check "ClusterQueues: half of the GPU nodes' i915, cpu and memory each (the cpu-only node not counted)" \
	wait_for quotas 20 cq_both 'cpu=8 gpu.intel.com/i915=2 memory=17179869184'
check "ClusterQueue: empty namespaceSelector, the flavor, owned by the policy" obj_jq $KQ/clusterqueues/queue-a \
	'.spec.namespaceSelector == {} and .spec.resourceGroups[0].flavors[0].name == "gpu.intel.com-kueue-flavor"
	 and (.spec.resourceGroups[0].coveredResources | sort) == ["cpu","gpu.intel.com/i915","memory"]
	 and .metadata.ownerReferences[0].kind == "ClusterPolicy" and .metadata.ownerReferences[0].controller == true'
check "LocalQueues in their namespaces, pointing at their ClusterQueue" wait_for lqs 20 lqs
kubectl_cqs() { [ "$(k get clusterqueues -o name | sort | tr '\n' ' ')" = "clusterqueue.kueue.x-k8s.io/queue-a clusterqueue.kueue.x-k8s.io/queue-b " ]; }
check "kubectl get clusterqueues lists both" kubectl_cqs
check "the Kueue message gone from the status" wait_for "no msg" 20 op_report_has '.errors == null or .errors == []'

# ---- the cluster grows: the quotas follow, same objects --------------------------------
uid_a=$(obj $KQ/clusterqueues/queue-a | jq -r .metadata.uid)
node n3 8 16Gi 4
check "a GPU node added: quotas 4 i915, 12 cpu, 24Gi each" wait_for grown 20 cq_both 'cpu=12 gpu.intel.com/i915=4 memory=25769803776'
check "patched in place (same uid)" obj_jq $KQ/clusterqueues/queue-a ".metadata.uid == \"$uid_a\""
kraw PATCH /api/v1/nodes/n3/status '{"status":{"allocatable":{"gpu.intel.com/i915":"1"}}}' application/merge-patch+json >/dev/null
check "a node's allocatable changed: 5 i915 → 3 and 2 (the remainder to the first queue)" wait_for shrunk 20 shares gpu.intel.com/i915 3 2

# ---- a queue dropped from the spec ---------------------------------------------------------
kraw PATCH $CPP '{"spec":{"kueue":{"equalResources":[{"name":"queue-a","localQueues":[{"name":"lq-a","namespace":"team-a"}]}]}}}' application/merge-patch+json >/dev/null
check "queue-b dropped: its ClusterQueue and LocalQueue deleted" wait_for "b gone" 20 b_gone
check "queue-a gets the whole cluster" wait_for whole 20 quotas_are queue-a 'cpu=24 gpu.intel.com/i915=5 memory=51539607552'

# ---- dra mode: the devices of the gpu.intel.com ResourceSlices --------------------------------
slice() { # slice NAME DRIVER NODE DEVICES
	local devs="" i
	for i in $(seq 1 "$4"); do devs="$devs${devs:+,}{\"name\":\"gpu-$i\",\"attributes\":{\"model\":{\"string\":\"x\"}}}"; done
	kraw POST /apis/resource.k8s.io/v1/resourceslices "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"$1\"},\"spec\":{\"driver\":\"$2\",\"nodeName\":\"$3\",\"pool\":{\"name\":\"$3\",\"generation\":1,\"resourceSliceCount\":1},\"devices\":[$devs]}}" >/dev/null
}
slice n1-gpu gpu.intel.com n1 2
slice n2-gpu gpu.intel.com n2 1
slice n1-other other.example.com n1 7
kraw PATCH $CPP '{"spec":{"resourceRegistration":"dra"}}' application/merge-patch+json >/dev/null
check "dra: quotas from the slices' devices (3) and their nodes' cpu and memory" wait_for dra 20 quotas_are queue-a 'cpu=16 dra.gpu.intel.com=3 memory=34359738368'
slice n3-gpu gpu.intel.com n3 4
check "dra: a slice added, the quota follows" wait_for "dra grown" 20 quota_is queue-a dra.gpu.intel.com 7

# ---- enableKueue off, on ---------------------------------------------------------------------------
kraw PATCH $CPP '{"spec":{"enableKueue":false}}' application/merge-patch+json >/dev/null
check "enableKueue off: queues and flavor deleted" wait_for "kueue off" 20 a_gone
kraw PATCH $CPP '{"spec":{"enableKueue":true}}' application/merge-patch+json >/dev/null
check "enableKueue on again: the queue is back" wait_for "kueue on" 20 obj_jq $KQ/namespaces/team-a/localqueues/lq-a '.spec.clusterQueue == "queue-a"'

# ---- the policy deleted: the Kueue objects go in the teardown ------------------------------------
k delete clusterpolicy gpu --wait=false >/dev/null 2>&1
check "deleted policy: finalizer released, the policy is gone" wait_for "cp gone" 30 obj_gone $CPP
check "no Kueue object left" op_none_left "" $KQ/resourceflavors $KQ/clusterqueues $KQ/localqueues
op_stop TERM
check "opmgr exits 0 on SIGTERM" test $? = 0
exit $MM_FAILED
