#!/bin/bash
# `kubectl drain NODE --ignore-daemonsets --delete-emptydir-data` against kubesim, end
# to end with the real kubectl: cordon, DaemonSet pods left (a GPU-requesting device
# plugin among them), evictions through pods/eviction, a PodDisruptionBudget answering
# 429 until a replacement pod is Ready (kubectl retries), pods deleted gracefully and
# gone once the kubelet stopped them, `node/… drained`, uncordon. Then the eviction
# API's answers raw, and graceful deletion with kubectl delete.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
kubesim_need_kubectl || exit 0
KUBESIM_NO_TRAP=1
DRAIN=
cleanup() { [ -n "$DRAIN" ] && kill "$DRAIN" 2>/dev/null && wait "$DRAIN" 2>/dev/null; kubesim_stop; }
trap cleanup EXIT
kubesim_start --pod-ready-ms 200 --pod-stop-ms 300 || { echo "not ok - kubesim starts"; exit 1; }

k apply -f - >/dev/null <<'Y'
apiVersion: v1
kind: Node
metadata: {name: gpu-1}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-2}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: trainer, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec: {containers: [{name: c, image: trainer}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: trainer, namespace: default}
spec: {minAvailable: 2, selector: {matchLabels: {app: trainer}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gpu-device-plugin, namespace: default}
spec:
  selector: {matchLabels: {app: dp}}
  template:
    metadata: {labels: {app: dp}}
    spec: {containers: [{name: plugin, image: intel-gpu-plugin, resources: {limits: {gpu.intel.com/xe: "1"}}}]}
Y
rs_uid=$(k get rs trainer -o jsonpath='{.metadata.uid}')
trainer() { # NAME NODE [extra spec]
	k apply -f - >/dev/null <<Y
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: default
  labels: {app: trainer}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: trainer, uid: $rs_uid, controller: true}]
spec: {nodeName: $2, containers: [{name: c, image: trainer, resources: {limits: {gpu.intel.com/xe: "1"}}}] ${3:-}}
Y
}
trainer t1 gpu-1 ", volumes: [{name: scratch, emptyDir: {}}]"
trainer t2 gpu-1
trainer t3 gpu-2
pdb_allows() { test "$(k get pdb trainer -o jsonpath='{.status.disruptionsAllowed}')" = "$1"; }
check "3 trainers Ready: the budget allows 1 disruption" wait_for 10 pdb_allows 1
dp=$(k get pods -l app=dp --field-selector spec.nodeName=gpu-1 -o name)
check "the device plugin runs on gpu-1" test -n "$dp"

KUBECONFIG=/dev/null "$KUBECTL" --server "$KUBESIM_URL" --cache-dir "$KUBESIM_DIR/kcache" \
	drain gpu-1 --ignore-daemonsets --delete-emptydir-data --timeout=60s >"$KUBESIM_DIR/drain.log" 2>&1 &
DRAIN=$!
cordoned() { test "$(k get node gpu-1 -o jsonpath='{.spec.unschedulable}')" = true; }
check "drain cordons gpu-1" wait_for 10 cordoned
check "the second eviction gets 429 and kubectl says it retries" wait_for 20 grep -q \
	"(will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget." "$KUBESIM_DIR/drain.log"
on_gpu1() { test "$(k get pods -l app=trainer --field-selector spec.nodeName=gpu-1 -o name | wc -l)" = "$1"; }
check "one trainer evicted (gone after its graceful stop)" wait_for 10 on_gpu1 1
check "the device plugin stays on the cordoned node" test "$(k get "$dp" -o jsonpath='{.status.phase}')" = Running
check "drain still waiting on the budget" kill -0 "$DRAIN"
# the ReplicaSet's replacement (kubesim has no ReplicaSet controller: the test is it)
trainer t4 gpu-2
wait "$DRAIN"
rc=$?
DRAIN=
sed 's/^/#   /' "$KUBESIM_DIR/drain.log"
check "kubectl drain exits 0" test $rc = 0
check "kubectl drain prints node/gpu-1 drained" grep -q '^node/gpu-1 drained' "$KUBESIM_DIR/drain.log"
check "it ignored the DaemonSet pod" grep -q "Warning: ignoring DaemonSet-managed Pods: default/${dp#pod/}" "$KUBESIM_DIR/drain.log"
check "no trainer left on gpu-1" test -z "$(k get pods -l app=trainer --field-selector spec.nodeName=gpu-1 -o name)"
check "the device plugin still there" test "$(k get pods -l app=dp --field-selector spec.nodeName=gpu-1 -o name)" = "$dp"
k uncordon gpu-1 >/dev/null
check "kubectl uncordon" test -z "$(k get node gpu-1 -o jsonpath='{.spec.unschedulable}')"

# ---- the eviction API, raw ----------------------------------------------------------
trainer t5 gpu-1
check "t3, t4, t5 Ready: 1 disruption allowed" wait_for 10 pdb_allows 1
ev() { kraw POST "/api/v1/namespaces/default/pods/$1/eviction" "{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":\"$1\",\"namespace\":\"default\"}}"; }
k get pod t3 -w --output-watch-events -o json >"$KUBESIM_DIR/t3.watch" 2>/dev/null &
WATCH=$!
KUBESIM_CLIENTS+=("$WATCH")
seen() { jq -se --arg t "$1" 'map(select(.type == $t)) | length >= 1' "$KUBESIM_DIR/t3.watch"; }
check "watching t3" wait_for 10 seen ADDED
out=$(ev t3)
check "eviction within the budget: 201 Success" test "$(kraw_code)/$(jq -r .status <<<"$out")" = 201/Success
check "the pod is deleted gracefully (30 s grace), then gone" wait_for 10 seen DELETED
check "the watch saw it Terminating with its grace period first" \
	jq -se 'map(select(.type == "MODIFIED" and .object.metadata.deletionGracePeriodSeconds == 30)) | length >= 1' "$KUBESIM_DIR/t3.watch"
kill "$WATCH" 2>/dev/null
healthy() { test "$(k get pdb trainer -o jsonpath='{.status.currentHealthy}')" = "$1"; }
check "t3 no longer counts as healthy" wait_for 10 healthy 2
out=$(ev t4)
check "budget exhausted: 429 TooManyRequests with the API server's message" \
	test "$(kraw_code)/$(jq -r '.reason + "/" + .message' <<<"$out")" = "429/TooManyRequests/Cannot evict pod as it would violate the pod's disruption budget."
check "the cause names the budget" test "$(jq -r '.details.causes[0].reason + ": " + .details.causes[0].message' <<<"$out")" = \
	"DisruptionBudget: The disruption budget trainer needs 2 healthy pods and has 2 currently"
out=$(ev nope)
check "evicting a missing pod: 404" test "$(kraw_code)" = 404
check "pods/eviction in discovery (policy/v1 Eviction)" bash -c \
	"curl -s $KUBESIM_URL/api/v1 | jq -e '.resources[] | select(.name == \"pods/eviction\" and .group == \"policy\" and .kind == \"Eviction\")'"

# ---- graceful deletion with kubectl delete ------------------------------------------
trainer g1 gpu-2
running() { test "$(k get pod "$1" -o jsonpath='{.status.phase}')" = Running; }
check "g1 Running" wait_for 10 running g1
k get pod g1 -w --output-watch-events -o json >"$KUBESIM_DIR/g1.watch" 2>/dev/null &
WATCH=$!
KUBESIM_CLIENTS+=("$WATCH")
g1_seen() { jq -se --arg t "$1" 'map(select(.type == $t)) | length >= 1' "$KUBESIM_DIR/g1.watch"; }
check "watching g1" wait_for 10 g1_seen ADDED
k delete pod g1 --wait=false >/dev/null
check "kubectl delete: the pod is gone once the kubelet stopped it" wait_for 10 g1_seen DELETED
check "after showing Terminating with its grace period" jq -se \
	'map(select(.type == "MODIFIED" and .object.metadata.deletionGracePeriodSeconds == 30)) | length >= 1' "$KUBESIM_DIR/g1.watch"
kill "$WATCH" 2>/dev/null
trainer g2 gpu-2
check "g2 Running" wait_for 10 running g2
check "kubectl delete --grace-period=0 --force: gone at once" k delete pod g2 --grace-period=0 --force --wait=false
check "g2 gone" bash -c "! KUBECONFIG=/dev/null $KUBECTL --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache get pod g2"
kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
