#!/bin/bash
# Server-side apply field ownership against the real kubectl: conflicts printed by
# kubectl with the API server's message, --force-conflicts, per-item ownership of
# map lists (containers by name), fields an applier stops applying removed, and
# Update entries for client-side apply, kubectl edit, kubectl label.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh

kubesim_need_kubectl || exit 0
kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
D=$KUBESIM_DIR
# mf OBJ MANAGER: that manager's fieldsV1 (JSON)
mf() { k get "$1" --show-managed-fields -o jsonpath="{.metadata.managedFields[?(@.manager==\"$2\")].fieldsV1}"; }

# --- client-side apply, then a server-side apply that changes its field
cat >"$D/cm.yaml" <<'Y'
apiVersion: v1
kind: ConfigMap
metadata: {name: c1, namespace: default}
data: {a: "1", b: "1"}
Y
check "client-side apply" k apply -f "$D/cm.yaml"
check "client-side apply recorded as Update by kubectl-client-side-apply" \
	test "$(k get cm c1 --show-managed-fields -o jsonpath='{.metadata.managedFields[0].manager}/{.metadata.managedFields[0].operation}')" = kubectl-client-side-apply/Update
sed 's/a: "1"/a: "2"/' "$D/cm.yaml" >"$D/cm2.yaml"
out=$(k apply --server-side -f "$D/cm2.yaml" 2>&1)
rc=$?
check "server-side apply changing a client-side field fails" test $rc -ne 0
check "kubectl prints the API server's conflict message" \
	grep -qx 'error: Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.a' <<<"$out"
check "kubectl adds its --force-conflicts advice" grep -q -- '--force-conflicts' <<<"$out"
check "value unchanged after the conflict" test "$(k get cm c1 -o jsonpath='{.data.a}')" = 1
check "--force-conflicts takes the field" k apply --server-side --force-conflicts -f "$D/cm2.yaml"
check "forced value stored" test "$(k get cm c1 -o jsonpath='{.data.a}')" = 2
check "the client-side manager lost .data.a, kept .data.b" \
	bash -c 'f=$(KUBECONFIG=/dev/null kubectl --server '"$KUBESIM_URL"' --cache-dir '"$D"'/kcache get cm c1 --show-managed-fields -o jsonpath="{.metadata.managedFields[?(@.manager==\"kubectl-client-side-apply\")].fieldsV1.f:data}"); grep -q "f:b" <<<"$f" && ! grep -q "f:a" <<<"$f"'
check "raw 409 Status: reason Conflict, FieldManagerConflict cause" bash -c "
	curl -sS -X PATCH -H 'Content-Type: application/apply-patch+yaml' --data-binary @$D/cm.yaml \
		'$KUBESIM_URL/api/v1/namespaces/default/configmaps/c1?fieldManager=other' |
	grep -q '\"reason\":\"Conflict\".*\"causes\":\[{\"reason\":\"FieldManagerConflict\",\"message\":\"conflict with \\\\\"kubectl\\\\\"\",\"field\":\".data.a\"}\]'"

# --- containers are owned one by one (map list keyed by name)
cat >"$D/pa.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec:
  containers:
  - {name: a, image: "img:1", env: [{name: E1, value: "1"}]}
Y
cat >"$D/pb.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec:
  containers:
  - {name: b, image: "img:1"}
Y
check "m1 applies container a" k apply --server-side --field-manager=m1 -f "$D/pa.yaml"
check "m2 applies container b without conflict" k apply --server-side --field-manager=m2 -f "$D/pb.yaml"
check "both containers kept" test "$(k get pod p1 -o jsonpath='{.spec.containers[*].name}')" = "a b"
check "m2 owns k:{\"name\":\"b\"} only" bash -c "f=\$(KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $D/kcache get pod p1 --show-managed-fields -o jsonpath='{.metadata.managedFields[?(@.manager==\"m2\")].fieldsV1}'); grep -q 'k:{\\\\\"name\\\\\":\\\\\"b\\\\\"}' <<<\"\$f\" && ! grep -q '\\\\\"a\\\\\"' <<<\"\$f\""
sed 's/img:1/img:2/' "$D/pa.yaml" >"$D/pa2.yaml"
out=$(k apply --server-side --field-manager=m2 -f "$D/pa2.yaml" 2>&1)
check "m2 changing a's image: conflict with m1 on that field" \
	grep -qx 'error: Apply failed with 1 conflict: conflict with "m1": .spec.containers\[name="a"\].image' <<<"$out"

# --- kubectl edit and kubectl label are Update managers
KUBE_EDITOR="sed -i s/img:1/img:3/" k edit pod p1 >/dev/null 2>&1
check "kubectl edit recorded as kubectl-edit Update owning the image it changed" \
	bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $D/kcache get pod p1 --show-managed-fields -o jsonpath='{.metadata.managedFields[?(@.manager==\"kubectl-edit\")].operation}' | grep -qx Update"
out=$(k apply --server-side --field-manager=m1 -f "$D/pa.yaml" 2>&1)
check "m1 re-applying its image now conflicts with kubectl-edit (using v1)" \
	grep -q 'conflict with "kubectl-edit" using v1: .spec.containers\[name="a"\].image' <<<"$out"
check "kubectl label" k label pod p1 tier=x
check "kubectl label recorded as kubectl-label Update" \
	bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $D/kcache get pod p1 --show-managed-fields -o jsonpath='{.metadata.managedFields[?(@.manager==\"kubectl-label\")].fieldsV1}' | grep -q 'f:tier'"

# --- a plain update (PUT) with fieldManager is an Update too
obj=$(k get cm c1 -o json | sed 's/"b": "1"/"b": "9"/')
curl -sf -X PUT -H 'Content-Type: application/json' --data-binary "$obj" \
	"$KUBESIM_URL/api/v1/namespaces/default/configmaps/c1?fieldManager=putter" >/dev/null
check "PUT ?fieldManager=putter recorded as an Update owning .data.b" \
	bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $D/kcache get cm c1 --show-managed-fields -o jsonpath='{.metadata.managedFields[?(@.manager==\"putter\")].operation} {.metadata.managedFields[?(@.manager==\"putter\")].fieldsV1}' | grep -q '^Update .*f:b'"

# --- an applier that stops applying a field removes it (nobody else owns it)
cat >"$D/pa3.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec:
  containers:
  - {name: a, image: "img:3"}
Y
check "m1 applies a without env" k apply --server-side --field-manager=m1 -f "$D/pa3.yaml"
check "env m1 no longer applies is removed" test -z "$(k get pod p1 -o jsonpath='{.spec.containers[?(@.name=="a")].env}')"
check "container b (m2's) kept" test "$(k get pod p1 -o jsonpath='{.spec.containers[*].name}')" = "a b"

kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
