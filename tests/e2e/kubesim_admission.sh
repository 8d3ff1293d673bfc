#!/bin/bash
# kubesim admission webhooks (HTTPS with caBundle verification, service references
# mapped with --service-url, JSONPatch mutation, denial messages, failurePolicy),
# kubesim's own HTTPS + bearer token, --state-dir persistence across a restart, and
# runtime fault injection with /kubesim/stats.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
TBIN=${GPUKMM_TBIN:-build/tests/bin}
command -v kubectl >/dev/null || { echo "ok - kubectl absent (skipped)"; exit 0; }

WORK=$(mktemp -d)
WPID=""
cleanup() {
	[ -n "$WPID" ] && kill "$WPID" 2>/dev/null && wait "$WPID" 2>/dev/null
	kubesim_stop
	rm -rf "$WORK"
}
trap cleanup EXIT
export KUBESIM_NO_TRAP=1

# --- a CA and a server certificate for 127.0.0.1
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=test-ca \
	-keyout "$WORK/ca.key" -out "$WORK/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
	-keyout "$WORK/srv.key" -out "$WORK/srv.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$WORK/ext"
openssl x509 -req -in "$WORK/srv.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -CAcreateserial -days 1 \
	-extfile "$WORK/ext" -out "$WORK/srv.crt" 2>/dev/null
check "test certificates generated" test -s "$WORK/srv.crt"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=other-ca \
	-keyout "$WORK/other.key" -out "$WORK/other.crt" 2>/dev/null

# --- the webhook server (HTTPS)
mkfifo "$WORK/wready"
"$TBIN/kubesim_webhook" --tls-cert "$WORK/srv.crt" --tls-key "$WORK/srv.key" >"$WORK/wready" 2>"$WORK/webhook.log" &
WPID=$!
read -r -t 10 wline <"$WORK/wready"
WPORT=${wline##* }
check "webhook server ready" test -n "$WPORT"

# --- kubesim over HTTPS with a token and a state dir
echo "t0ken-$$" >"$WORK/token"
kubesim_start --tls-cert "$WORK/srv.crt" --tls-key "$WORK/srv.key" --token-file "$WORK/token" \
	--state-dir "$WORK/state" --service-url "default/policy-webhook=https://127.0.0.1:$WPORT" \
	--service-addr "default/named-webhook=127.0.0.1:$WPORT" ||
	{ echo "not ok - kubesim starts with TLS"; exit 1; }
check "ready line says https" bash -c "[[ $KUBESIM_URL == https://127.0.0.1:* ]]"
KUBECTL_FLAGS="--certificate-authority $WORK/ca.crt --token t0ken-$$"
check "kubectl over TLS with token" k get ns default
out=$(KUBECTL_FLAGS="--certificate-authority $WORK/ca.crt --token wrong" k get ns 2>&1)
check "wrong token is Unauthorized" grep -q Unauthorized <<<"$out"
out=$(KUBECTL_FLAGS="--certificate-authority $WORK/other.crt --token t0ken-$$" k get ns 2>&1)
check "TLS verification fails with the wrong CA" grep -qi 'certificate' <<<"$out"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.crt" "$KUBESIM_URL/api/v1/nodes")
check "no token: 401" test "$code" = 401
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.crt" "$KUBESIM_URL/healthz")
check "healthz needs no token" test "$code" = 200
# token rotation: the server re-reads a changed --token-file
echo "r0tated-$$" >"$WORK/token.new" && mv "$WORK/token.new" "$WORK/token"
out=$(k get ns default 2>&1)
check "old token refused after the token file rotated" grep -q Unauthorized <<<"$out"
out=$(KUBECTL_FLAGS="--certificate-authority $WORK/ca.crt --token r0tated-$$" k get ns default -o name 2>&1)
check "rotated token accepted" test "$out" = namespace/default
echo "t0ken-$$" >"$WORK/token.new" && mv "$WORK/token.new" "$WORK/token"
check "rotated back" k get ns default

CA64=$(base64 -w0 "$WORK/ca.crt")
OTHER64=$(base64 -w0 "$WORK/other.crt")
k apply -f - >/dev/null <<Y
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutate}
webhooks:
- name: mutate.test.gpukmm.io
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: "https://127.0.0.1:$WPORT/mutate", caBundle: "$CA64"}
  rules: [{apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE, UPDATE]}]
  objectSelector: {matchExpressions: [{key: skip, operator: DoesNotExist}]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validate}
webhooks:
- name: deny.test.gpukmm.io
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {namespace: default, name: policy-webhook, path: /validate}
    caBundle: "$CA64"
  rules: [{apiGroups: ["*"], apiVersions: ["*"], resources: ["*"], operations: ["*"]}]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: default}}
Y
check "webhook configurations created" k get validatingwebhookconfigurations validate
cm() { printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: default, labels: {%s}}\n' "$1" "$2"; }
out=$(cm ok1 'a: b' | k apply -f - 2>&1)
check "allowed object created" grep -q created <<<"$out"
check "webhook warning shown by kubectl" grep -q 'validated by the test webhook' <<<"$out"
check "mutating webhook JSONPatch applied" test "$(k get cm ok1 -o jsonpath='{.metadata.labels.mutated}')" = yes
out=$(cm bad1 'deny: "yes"' | k apply -f - 2>&1)
check "denial message like the API server" grep -q 'admission webhook "deny.test.gpukmm.io" denied the request: label deny=yes is forbidden' <<<"$out"
check "denied object not stored" bash -c "! KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kc $KUBECTL_FLAGS get cm bad1 >/dev/null 2>&1"
out=$(k label cm ok1 deny=yes 2>&1)
check "UPDATE goes through validation too" grep -q 'denied the request' <<<"$out"
cm skip1 'skip: "1"' | k apply -f - >/dev/null
check "objectSelector excludes from the mutating webhook" test -z "$(k get cm skip1 -o jsonpath='{.metadata.labels.mutated}')"

# wrong caBundle: TLS verification of the webhook fails, failurePolicy Fail (default) rejects
k patch mutatingwebhookconfiguration mutate --type json -p "[{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$OTHER64\"}]" >/dev/null
out=$(cm ca1 'a: b' | k apply -f - 2>&1)
check "untrusted webhook certificate fails the request" grep -q 'failed calling webhook "mutate.test.gpukmm.io"' <<<"$out"
k patch mutatingwebhookconfiguration mutate --type json -p '[{"op":"add","path":"/webhooks/0/failurePolicy","value":"Ignore"}]' >/dev/null
out=$(cm ca2 'a: b' | k apply -f - 2>&1)
check "failurePolicy Ignore lets it through" grep -q created <<<"$out"
k delete mutatingwebhookconfiguration mutate >/dev/null
k delete validatingwebhookconfiguration validate >/dev/null

# --service-addr: called as the API server calls a Service, https://NAME.NS.svc:PORT/path,
# the name verified: the test certificate names only 127.0.0.1, so the call fails
k apply -f - >/dev/null <<Y
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: named}
webhooks:
- name: named.test.gpukmm.io
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {namespace: default, name: named-webhook, path: /validate, port: 8443}
    caBundle: "$CA64"
  rules: [{apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}]
Y
out=$(cm named1 'a: b' | k apply -f - 2>&1)
check "--service-addr: the Service's DNS name is called and verified (a certificate for 127.0.0.1 only fails)" \
	grep -q 'failed calling webhook "named.test.gpukmm.io": failed to call webhook: Post "https://named-webhook.default.svc:8443/validate"' <<<"$out"
echo "#   $out"
k delete validatingwebhookconfiguration named >/dev/null

# --- faults at runtime, counted in stats
kr() { curl -s --cacert "$WORK/ca.crt" -H "Authorization: Bearer t0ken-$$" "$@"; }
kr -X PUT -d '{"seed":3,"rules":[{"verb":"list","resource":"configmaps","rate":1,"code":503}]}' "$KUBESIM_URL/kubesim/faults" >/dev/null
out=$(k get cm 2>&1)
check "injected 503 reaches kubectl" grep -qi 'unavailable\|503\|injected' <<<"$out"
kr -X PUT -d '{"rules":[{"verb":"create","resource":"configmaps","rate":1,"code":429,"retryAfter":1}]}' "$KUBESIM_URL/kubesim/faults" >/dev/null
code=$(kr -o /dev/null -D "$WORK/h" -w '%{http_code}' -X POST -H 'Content-Type: application/json' -d '{"metadata":{"name":"r"}}' "$KUBESIM_URL/api/v1/namespaces/default/configmaps")
check "429 with Retry-After" bash -c "[ $code = 429 ] && grep -qi '^retry-after: 1' $WORK/h"
kr -X PUT -d '{}' "$KUBESIM_URL/kubesim/faults" >/dev/null
stats=$(kr "$KUBESIM_URL/kubesim/stats")
check "stats count injected faults" grep -q '"faultsInjected":[1-9]' <<<"$stats"
check "stats count writes per resource" grep -q '"writesByResource":{[^}]*"configmaps":[1-9]' <<<"$stats"

# --- state survives a restart
k apply -f - >/dev/null <<'Y'
apiVersion: v1
kind: Node
metadata: {name: persisted, labels: {keep: "me"}}
Y
uid1=$(k get node persisted -o jsonpath='{.metadata.uid}')
rv1=$(k get node persisted -o jsonpath='{.metadata.resourceVersion}')
kubesim_stop_keep() { KUBESIM_KEEP=1 kubesim_stop; }
kubesim_stop_keep
check "state file written on SIGTERM" test -s "$WORK/state/state.json"
check "state file mode 0600" test "$(stat -c %a "$WORK/state/state.json")" = 600
kubesim_start --tls-cert "$WORK/srv.crt" --tls-key "$WORK/srv.key" --token-file "$WORK/token" --state-dir "$WORK/state" ||
	{ echo "not ok - kubesim restarts"; exit 1; }
check "object survives restart with its uid" test "$(k get node persisted -o jsonpath='{.metadata.uid}')" = "$uid1"
check "resourceVersion kept" test "$(k get node persisted -o jsonpath='{.metadata.resourceVersion}')" = "$rv1"
code=$(kr -o "$WORK/w" -w '%{http_code}' "$KUBESIM_URL/api/v1/nodes?watch=1&resourceVersion=$((rv1 - 1))&timeoutSeconds=1")
check "watch from history before the restart gets 410 Expired" grep -q '"code":410' "$WORK/w"
k label node persisted more=yes >/dev/null
rv2=$(k get node persisted -o jsonpath='{.metadata.resourceVersion}')
check "resourceVersion keeps growing after restart" test "$rv2" -gt "$rv1"
