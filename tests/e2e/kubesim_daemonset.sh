#!/bin/bash
# kubesim's DaemonSet controller and kubelet with the real kubectl: pods on the nodes
# that should run them (nodeSelector, taints), `kubectl get ds` counts, `kubectl
# rollout status` / `rollout restart`, node labels, NoExecute taints and cordons,
# a GPU-requesting DaemonSet pod, a pod that never gets Ready, deletion, and
# --controllers turning the controller off.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
kubesim_need_kubectl || exit 0
kubesim_start --pod-ready-ms 200 --pod-stop-ms 100 || { echo "not ok - kubesim starts"; exit 1; }

for n in gpu-1 gpu-2 gpu-3 cpu-1; do
	gpu=true; [ "$n" = cpu-1 ] && gpu=false
	k apply -f - >/dev/null <<Y
apiVersion: v1
kind: Node
metadata: {name: $n, labels: {intel.feature.node.kubernetes.io/gpu: "$gpu"}}
Y
done
k apply -f - >/dev/null <<'Y'
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: device-plugin, namespace: default}
spec:
  selector: {matchLabels: {app: dp}}
  template:
    metadata: {labels: {app: dp}}
    spec:
      nodeSelector: {intel.feature.node.kubernetes.io/gpu: "true"}
      containers:
      - name: plugin
        image: intel/intel-gpu-plugin:0.32.0
        resources: {limits: {gpu.intel.com/xe: "1"}}
Y
ds_status() { # desired/current/ready/updated/available (absent = 0, as the API omits zeros)
	k get ds device-plugin -o json | jq -r '.status | [.desiredNumberScheduled, .currentNumberScheduled,
		.numberReady, .updatedNumberScheduled, .numberAvailable] | map(. // 0 | tostring) | join("/")'
}
status_is() { test "$(ds_status)" = "$1"; }
check "3 GPU nodes: 3/3 ready and available (kubectl rollout status)" k rollout status ds/device-plugin --timeout=20s
check "status desired/current/ready/updated/available 3/3/3/3/3" status_is 3/3/3/3/3
out=$(k get ds device-plugin --no-headers)
check "kubectl get ds prints DESIRED CURRENT READY UP-TO-DATE AVAILABLE" \
	grep -Eq '^device-plugin +3 +3 +3 +3 +3 +intel.feature.node.kubernetes.io/gpu=true' <<<"$out"
check "no pod on the node without a GPU" test -z "$(k get pods --field-selector spec.nodeName=cpu-1 -o name)"
pod=$(k get pods --field-selector spec.nodeName=gpu-1 -o name)
check "one pod on gpu-1, named after the DaemonSet" grep -q '^pod/device-plugin-' <<<"$pod"
check "its owner is the DaemonSet (controller reference)" \
	test "$(k get "$pod" -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}')" = DaemonSet/device-plugin/true
check "it requests the GPU resource of the template" \
	test "$(k get "$pod" -o jsonpath='{.spec.containers[0].resources.limits.gpu\.intel\.com/xe}')" = 1
check "it is Running and Ready" test "$(k get "$pod" -o jsonpath='{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}')" = Running/True
check "kubectl wait --for=condition=Ready on it" k wait --for=condition=Ready "$pod" --timeout=5s

# node label removed: its pod goes, desired drops
k label node gpu-2 intel.feature.node.kubernetes.io/gpu- >/dev/null
check "label removed from gpu-2: 2 desired, its pod gone" wait_for 10 status_is 2/2/2/2/2
no_pods() { test -z "$(k get pods "$@" -o name)"; }
check "no pod left on gpu-2" wait_for 10 no_pods --field-selector spec.nodeName=gpu-2
k label node gpu-2 intel.feature.node.kubernetes.io/gpu=true >/dev/null
check "label back: 3 again" wait_for 10 status_is 3/3/3/3/3

# cordon keeps DaemonSet pods (they tolerate unschedulable); NoExecute evicts them
k cordon gpu-3 >/dev/null
k taint node gpu-3 node.kubernetes.io/unschedulable=:NoSchedule >/dev/null
check "the controllers handled the cordon" wait_for 10 kubesim_settled "$(kubesim_rv)"
check "cordoned gpu-3 keeps its pod" status_is 3/3/3/3/3
k taint node gpu-3 maintenance=now:NoExecute >/dev/null
check "NoExecute taint on gpu-3: its pod goes" wait_for 10 status_is 2/2/2/2/2
k taint node gpu-3 maintenance- node.kubernetes.io/unschedulable- >/dev/null
k uncordon gpu-3 >/dev/null
check "taints removed: back to 3" wait_for 10 status_is 3/3/3/3/3

# template change: a rolling update to the new revision
h0=$(k get "$pod" -o jsonpath='{.metadata.labels.controller-revision-hash}')
k rollout restart ds/device-plugin >/dev/null
check "kubectl rollout restart: rollout status completes" k rollout status ds/device-plugin --timeout=30s
h1=$(k get pods -l app=dp -o jsonpath='{.items[*].metadata.labels.controller-revision-hash}' | tr ' ' '\n' | sort -u)
check "every pod on the new revision ($h1, was $h0)" test "$(wc -l <<<"$h1")" = 1 -a "$h1" != "$h0"
check "observedGeneration follows the template's generation" \
	test "$(k get ds device-plugin -o jsonpath='{.status.observedGeneration}')" = "$(k get ds device-plugin -o jsonpath='{.metadata.generation}')"

# a pod that never gets Ready
k patch ds device-plugin --type merge -p '{"spec":{"template":{"metadata":{"annotations":{"kubesim.gpukmm.io/ready":"false"}}},"updateStrategy":{"rollingUpdate":{"maxUnavailable":3}}}}' >/dev/null
check "annotation ready=false: 3 scheduled, 0 ready" wait_for 15 status_is 3/3/0/3/0
check "kubectl get ds shows READY 0 of DESIRED 3" bash -c "KUBECONFIG=/dev/null $KUBECTL --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache get ds device-plugin --no-headers | grep -Eq '^device-plugin +3 +3 +0 +3 +0 '"

# deletion: the pods are collected
k delete ds device-plugin --wait=true >/dev/null
check "DaemonSet deleted: its pods are gone" wait_for 10 no_pods -l app=dp
kubesim_stop

# --controllers without the DaemonSet controller: nothing happens to DaemonSets
kubesim_start --controllers '*,-daemonset' || { echo "not ok - kubesim starts"; exit 1; }
k apply -f - >/dev/null <<'Y'
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: quiet, namespace: default}
spec:
  selector: {matchLabels: {app: q}}
  template:
    metadata: {labels: {app: q}}
    spec: {containers: [{name: c, image: i}]}
Y
check "the other controllers handled the DaemonSet" wait_for 10 kubesim_settled "$(kubesim_rv)"
check "--controllers '*,-daemonset': no pods, no status" test -z "$(k get pods -o name)$(k get ds quiet -o jsonpath='{.status}')"
check "--controllers with an unknown name exits 2" bash -c "'$KUBESIM_BIN' --listen 127.0.0.1:0 --controllers scheduler >/dev/null 2>&1; test \$? = 2"
kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
