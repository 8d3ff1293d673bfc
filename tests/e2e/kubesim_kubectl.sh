#!/bin/bash
# kubesim against the real kubectl (version pinned by /version = 1.32 through the
# dispatcher; every other installed version: kubesim_kubectl_versions.sh): CRDs, CRUD, apply (client- and server-side), label/annotate/cordon,
# watch, wait, output formats, describe.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
FIX=tests/fixtures

kubesim_need_kubectl || exit 0
kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
echo "ok - kubesim starts on an ephemeral port ($KUBESIM_URL)"

out=$(k version -o json 2>&1)
check "kubectl sees server minor 32" grep -q '"minor": "32"' <<<"$out"

# --- CRDs through the API
check "apply KMM Module CRD" k apply -f $FIX/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml
check "apply test CRD" k apply -f $FIX/kubesim/widget-crd.yaml
check "wait CRD established" k wait --for condition=established --timeout=10s crd/widgets.test.gpukmm.io
check "CRD in api-resources" bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache api-resources | grep -q '^widgets'"
check "CEL skip logged once" test "$(grep -c 'CEL) rule' "$KUBESIM_DIR/kubesim.log")" -ge 1
check "server-side apply of the large KMM CRD" k apply --server-side -f $FIX/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml

# --- nodes: apply, label, annotate, cordon
cat >"$KUBESIM_DIR/node.yaml" <<'Y'
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {zone: z1}
status:
  nodeInfo: {kernelVersion: 6.8.0-45-generic}
Y
check "apply node" k apply -f "$KUBESIM_DIR/node.yaml"
out=$(k apply -f "$KUBESIM_DIR/node.yaml" 2>&1)
check "second apply is unchanged" grep -q unchanged <<<"$out"
check "label node" k label node node-a gpu=yes
check "annotate node" k annotate node node-a note=hello
check "cordon node" k cordon node-a
check "cordon sets spec.unschedulable" test "$(k get node node-a -o jsonpath='{.spec.unschedulable}')" = true
check "uncordon node" k uncordon node-a
check "jsonpath kernelVersion" test "$(k get node node-a -o jsonpath='{.status.nodeInfo.kernelVersion}')" = 6.8.0-45-generic
out=$(k get nodes 2>&1)
check "get nodes prints NAME STATUS ROLES AGE VERSION (server-side Table)" grep -qE '^NAME +STATUS +ROLES +AGE +VERSION' <<<"$out"
check "get nodes row" grep -qE '^node-a +(Unknown|Ready|NotReady)' <<<"$out"
out=$(k get crd modules.kmm.sigs.x-k8s.io 2>&1)
check "get crd prints CREATED AT" grep -qE '^NAME +CREATED AT' <<<"$out"
check "label selector get" test "$(k get nodes -l 'gpu in (yes,maybe),zone!=z2' -o name)" = node/node-a
check "label selector notin excludes" test -z "$(k get nodes -l 'gpu notin (yes)' -o name 2>/dev/null)"
check "get -o yaml" bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache get node node-a -o yaml | grep -q 'note: hello'"
check "describe node" bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache describe node node-a | grep -q 'gpu=yes'"
check "get --raw /api/v1/nodes" bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache get --raw /api/v1/nodes | grep -q '\"kind\":\"NodeList\"'"

# --- custom resources
check "create widget" k apply -f $FIX/kubesim/widget.yaml
check "get widget by short name" k get wd w1
check "merge patch widget" k patch widget w1 --type merge -p '{"spec":{"size":5}}'
check "generation bumped by spec change" test "$(k get widget w1 -o jsonpath='{.metadata.generation}')" = 2
check "json patch widget" k patch widget w1 --type json -p '[{"op":"replace","path":"/spec/size","value":6}]'
check "status patch through subresource" k patch widget w1 --subresource=status --type merge -p '{"status":{"phase":"Ready"}}'
check "status kept, generation unchanged by status" test "$(k get widget w1 -o jsonpath='{.status.phase}/{.metadata.generation}')" = Ready/3
check "apply --server-side widget" k apply --server-side -f $FIX/kubesim/widget.yaml --force-conflicts
check "wait --for=jsonpath" k wait --for=jsonpath='{.status.phase}'=Ready --timeout=5s widget/w1

# --- schema: defaults, violations, unknown fields (kubectl sends fieldValidation=Strict)
check "defaults applied on create" test "$(k get widget w1 -o jsonpath='{.spec.color}/{.spec.nested.level}')" = green/low
cat >"$KUBESIM_DIR/bad.yaml" <<'Y'
apiVersion: test.gpukmm.io/v1
kind: Widget
metadata: {name: bad, namespace: default}
spec: {size: 200, color: pink}
Y
out=$(k apply -f "$KUBESIM_DIR/bad.yaml" 2>&1)
check "schema violation printed by kubectl" grep -q 'spec.color: Unsupported value: "pink"' <<<"$out"
check "maximum violation printed" grep -q 'spec.size: Invalid value: 200' <<<"$out"
printf 'apiVersion: test.gpukmm.io/v1\nkind: Widget\nmetadata: {name: unk, namespace: default}\nspec: {size: 1, bogus: 1}\n' >"$KUBESIM_DIR/unk.yaml"
out=$(k apply -f "$KUBESIM_DIR/unk.yaml" 2>&1)
check "unknown field rejected under Strict" grep -q 'strict decoding error: unknown field "spec.bogus"' <<<"$out"
out=$(k apply --validate=warn -f "$KUBESIM_DIR/unk.yaml" 2>&1)
check "unknown field warned and pruned under Warn" bash -c "grep -q 'Warning: unknown field \"spec.bogus\"' <<<'$out'"
check "pruned field not stored" test -z "$(k get widget unk -o jsonpath='{.spec.bogus}')"

# --- kubectl create (protobuf bodies)
check "kubectl create namespace" k create namespace created-ns
check "kubectl create configmap" k create configmap cm1 -n created-ns --from-literal=k=v
check "configmap data decoded" test "$(k get cm cm1 -n created-ns -o jsonpath='{.data.k}')" = v
check "kubectl create secret generic" k create secret generic s1 --from-literal=p=q
check "secret data base64" test "$(k get secret s1 -o jsonpath='{.data.p}')" = cQ==
check "kubectl delete namespace removes it" k delete namespace created-ns --wait=true --timeout=10s

# --- watch sees ADDED/MODIFIED/DELETED
k get widgets -w --output-watch-events -o json --request-timeout=0 >"$KUBESIM_DIR/watch.out" 2>&1 &
wpid=$!
wait_for 5 grep -q -E '"type": ?"ADDED"' "$KUBESIM_DIR/watch.out"
k label widget w1 extra=1 >/dev/null
k delete widget w1 >/dev/null &
check "wait --for=delete" k wait --for=delete widget/w1 --timeout=10s
wait_for 5 grep -q -E '"type": ?"DELETED"' "$KUBESIM_DIR/watch.out"
kill $wpid 2>/dev/null; wait $wpid 2>/dev/null
check "get -w saw ADDED" grep -q -E '"type": ?"ADDED"' "$KUBESIM_DIR/watch.out"
check "get -w saw MODIFIED" grep -q -E '"type": ?"MODIFIED"' "$KUBESIM_DIR/watch.out"
check "get -w saw DELETED" grep -q -E '"type": ?"DELETED"' "$KUBESIM_DIR/watch.out"

# --- get -w prints server-side Table rows (kubectl asks the watch for as=Table too):
# one header, then one row per event, columns like the list
k get nodes -w --request-timeout=0 >"$KUBESIM_DIR/wnodes.out" 2>&1 &
wpid=$!
wait_for 5 grep -qE '^node-a ' "$KUBESIM_DIR/wnodes.out"
k label node node-a watched=yes >/dev/null
k create -f - >/dev/null <<'Y'
apiVersion: v1
kind: Node
metadata: {name: node-w}
status: {nodeInfo: {kubeletVersion: v1.32.1}}
Y
k delete node node-w >/dev/null
wait_for 5 test "$(grep -cE '^node-w ' "$KUBESIM_DIR/wnodes.out")" -ge 2
kill $wpid 2>/dev/null; wait $wpid 2>/dev/null
check "get nodes -w: one header NAME STATUS ROLES AGE VERSION" test "$(grep -cE '^NAME +STATUS +ROLES +AGE +VERSION$' "$KUBESIM_DIR/wnodes.out")" = 1
check "get nodes -w: node-a row on its label change" test "$(grep -cE '^node-a +Unknown +<none> +[0-9]+s' "$KUBESIM_DIR/wnodes.out")" -ge 2
check "get nodes -w: node-w added and deleted rows with VERSION column" test "$(grep -cE '^node-w +Unknown +<none> +[0-9]+s +v1\.32\.1$' "$KUBESIM_DIR/wnodes.out")" = 2
check "get nodes -w: no raw JSON or decode error" bash -c "! grep -qiE '[{]|error|unable' $KUBESIM_DIR/wnodes.out"
check "apply ClusterPolicy CRD + example" k apply -f deploy/crd/intel.com_clusterpolicies.yaml
k wait --for condition=established --timeout=10s crd/clusterpolicies.intel.com >/dev/null
check "apply ClusterPolicy example" k apply -f deploy/examples/clusterpolicy-intree.yaml
k get clusterpolicy -w --output-watch-events --request-timeout=0 >"$KUBESIM_DIR/wcp.out" 2>&1 &
wpid=$!
wait_for 5 grep -qE '^ADDED +gpu-dp ' "$KUBESIM_DIR/wcp.out"
k patch clusterpolicy gpu-dp --subresource=status --type merge \
	-p '{"status":{"devicePluginStatus":"Ready","conditions":[{"type":"Ready","status":"True","reason":"AllGood","lastTransitionTime":"2026-01-01T00:00:00Z","message":"m"}]}}' >/dev/null
wait_for 5 grep -qE '^MODIFIED +gpu-dp ' "$KUBESIM_DIR/wcp.out"
kill $wpid 2>/dev/null; wait $wpid 2>/dev/null
check "get clusterpolicy -w: header with the CRD's printer columns" grep -qE '^EVENT +NAME +DP +DRA +XPU +KMM +READY +REASON +AGE$' "$KUBESIM_DIR/wcp.out"
check "get clusterpolicy -w: MODIFIED row shows the new status columns" grep -qE '^MODIFIED +gpu-dp +Ready +.*True +AllGood +[0-9]+s$' "$KUBESIM_DIR/wcp.out"
check "get clusterpolicy -w: one header" test "$(grep -c '^EVENT' "$KUBESIM_DIR/wcp.out")" = 1
out=$(KRAW_FLAGS="-H Accept:application/json;as=Table;v=v1;g=meta.k8s.io --max-time 2" kraw GET "/api/v1/nodes?watch=1&includeObject=Object" 2>/dev/null)
check "raw Table watch: first event has columnDefinitions and the full object" bash -c "head -1 <<<'$out' | grep -q '\"kind\":\"Table\".*\"columnDefinitions\":\\[.*\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Node\"'"

# --- every built-in kind of the issue is served, in discovery and through kubectl
ar=$(k api-resources --no-headers 2>&1)
for r in namespaces nodes pods configmaps secrets events serviceaccounts daemonsets leases resourceclaims customresourcedefinitions; do
	check "api-resources lists $r" grep -qE "^$r " <<<"$ar"
done
check "apply ServiceAccount, Lease, ResourceClaim, Event" k apply -f - <<'Y'
apiVersion: v1
kind: ServiceAccount
metadata: {name: sa1, namespace: default}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: l1, namespace: default}
spec: {holderIdentity: me, leaseDurationSeconds: 15}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: rc1, namespace: default}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.intel.com}}]}}
---
apiVersion: v1
kind: Event
metadata: {name: e1, namespace: default}
involvedObject: {kind: Node, name: node-a}
reason: Tested
message: hello
type: Normal
Y
check "get them back" test "$(k get sa/sa1 lease/l1 resourceclaim/rc1 event/e1 -o name | wc -l)" = 4
check "lease holder stored" test "$(k get lease l1 -o jsonpath='{.spec.holderIdentity}')" = me

# --- conditions
k apply -f - >/dev/null <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec: {nodeName: node-a, containers: [{name: c, image: busybox}]}
Y
k patch pod p1 --subresource=status --type merge -p '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null
check "wait --for=condition=Ready" k wait --for=condition=Ready pod/p1 --timeout=5s
check "field selector spec.nodeName" test "$(k get pods --field-selector spec.nodeName=node-a -o name)" = pod/p1
check "delete pod" k delete pod p1
check "deleted pod is gone (NotFound)" bash -c "! KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache get pod p1 2>&1 | grep -qv NotFound"

kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
