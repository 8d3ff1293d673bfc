#!/bin/bash
# Issue #17: the install as a cluster admin does it, on kubesim under the shipped RBAC.
#   - `kubectl apply -k deploy/default` (every kind kubesim serves) alone: the
#     webhook configurations are there but nothing serves them yet, so a
#     ClusterPolicy write is refused (failurePolicy Fail);
#   - the controller Deployment's two replicas, each its two containers as shipped
#     (tests/lib/shipped.sh: "gpukmm" with the ServiceAccount's token, "webhook"
#     with none), sharing a certificate directory per pod as the emptyDir does;
#   - gpukmm-certd of the leader fills the shipped Secret (a CA of its own, the
#     serving certificate for gpukmm-webhook-service.<ns>.svc) and sets both webhook
#     configurations' caBundle; the follower writes nothing; both webhooks serve
#     the Secret's certificate, ready within seconds;
#   - kubesim calls the webhook as the API server does (the Service's DNS name
#     verified against caBundle, kubesim --service-addr): a ClusterPolicy is
#     defaulted and admitted, a bad one denied;
#   - re-applying deploy/default keeps the certificate and the caBundle;
#   - a rotation (the controllers restarted with a certificate due for renewal and
#     short waits): the new CA reaches the caBundle before the new certificate
#     serves, every ClusterPolicy write meanwhile is admitted, both replicas end on
#     the new certificate and the old CA leaves the caBundle;
#   - every call of the services was allowed by the shipped RBAC, each a row of
#     its API-CALL table (deploy_check.py --exercised).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/proc.sh
. tests/lib/metrics.sh
kubesim_need_kubectl || exit 0
NS=intel-gpu-base-operator
SVC=gpukmm-webhook-service.$NS.svc
FAILED=0
D=$(mktemp -d "${TMPDIR:-/tmp}/install.XXXXXX") || exit 1
chmod 700 "$D"
declare -A SUP WSUP
LOOP_PID= SAMPLER_PID=
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; FAILED=1; }
check() { # NAME TIMEOUT_S CMD...
	local n=$1 t=$2
	shift 2
	if wait_until "$t" "$@" >/dev/null 2>&1; then ok "$n"; else notok "$n"; fi
}
teardown() {
	stop_var SAMPLER_PID
	stop_var LOOP_PID
	local r
	for r in "${!SUP[@]}"; do stop_pid "${SUP[$r]}" 10; done
	for r in "${!WSUP[@]}"; do stop_pid "${WSUP[$r]}" 10; done
	san_check "$D"/*.log || FAILED=1
	[ "$FAILED" = 0 ] || log_tails 40 "$D"/*.log
	kubesim_stop
	rm -rf "$D"
	exit $FAILED
}
trap teardown EXIT

# ---- the webhook containers first: their ports are what the Service resolves to ------------
. tests/lib/shipped.sh
declare -A PORT
for r in a b; do
	mkdir -p "$D/$r/webhook-certs"
	mapfile -t WARGS < <(D=$D/$r shipped_args webhook)
	"$GPUKMM_BIN/gpukmm" "${WARGS[@]}" >"$D/webhook-$r.log" 2>&1 &
	WSUP[$r]=$!
	wait_until 20 eval "[ -n \"\$(shipped_webhook_port ${WSUP[$r]})\" ]"
	PORT[$r]=$(shipped_webhook_port "${WSUP[$r]}")
done
echo "# webhook container: gpukmm ${WARGS[*]}"
check "the webhook containers start without a certificate: waiting for it, not ready" 10 eval \
	"grep -q 'waiting for the serving certificate' '$D/webhook-a.log' && ! grep -q 'ready: 1/1' '$D/webhook-a.log'"

# ---- the cluster: kubesim (RBAC) calls the Service at replica a's webhook ----------------------
KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start --service-addr "$NS/gpukmm-webhook-service=127.0.0.1:${PORT[a]}" ||
	{ notok "kubesim starts"; exit 1; }
shipped_render default "$D/apply.yaml"
check "kubectl apply -k deploy/default (as far as kubesim serves it)" 1 eval 'k apply -f "$D/apply.yaml" >"$D/apply.log" 2>&1'
check "ClusterPolicy CRD established" 20 k wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com
policy() { # NAME: a policy with kernelModule but no moduleName (the webhook defaults it)
	k apply -f - <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: $1}
spec:
  resourceRegistration: dp
  kernelModule:
    kernelMappings:
    - {regexp: '^6\.8\.0-[0-9]+-generic\$', containerImage: 'registry.example.com/xe:\${KERNEL_FULL_VERSION}'}
Y
}
out=$(policy early 2>&1)
echo "#   $out"
check "before the controller runs a ClusterPolicy write is refused (failurePolicy Fail, nobody serves it)" 1 \
	grep -q 'failed calling webhook' <<<"$out"

# ---- the controller replicas, as shipped -------------------------------------------------------
kubesim_sa_kubeconfig "$D/kubeconfig" "$NS" gpukmm-controller || { notok "the controller's token"; exit 1; }
start_ctrl() { # REPLICA [ENV=VALUE...]
	local r=$1
	shift
	mapfile -t ARGS < <(D=$D/$r shipped_args gpukmm)
	env "$@" "$GPUKMM_BIN/gpukmm" "${ARGS[@]}" --kubeconfig "$D/kubeconfig" >>"$D/gpukmm-$r.log" 2>&1 &
	SUP[$r]=$!
}
T0=$SECONDS
start_ctrl a
start_ctrl b
echo "# container gpukmm: gpukmm ${ARGS[*]}"
sec() { kraw GET "/api/v1/namespaces/$NS/secrets/gpukmm-webhook-cert"; }
secret_key() { sec | jq -r --arg k "$1" '.data[$k] // empty' | base64 -d; }
check "certd fills the shipped Secret: a CA and the serving certificate" 60 eval \
	"sec | jq -e '.data[\"tls.crt\"] and .data[\"tls.key\"] and .data[\"ca.crt\"]'"
secret_key tls.crt >"$D/tls.pem"
secret_key ca.crt >"$D/ca.pem"
check "the certificate is for $SVC, signed by the Secret's CA (openssl verify)" 1 \
	openssl verify -CAfile "$D/ca.pem" -verify_hostname "$SVC" -purpose sslserver "$D/tls.pem"
cab() { # KIND: the caBundle of our configuration of that kind, decoded
	kraw GET "/apis/admissionregistration.k8s.io/v1/${1}webhookconfigurations/gpukmm-$1-webhook-configuration" |
		jq -r '.webhooks[0].clientConfig.caBundle // empty' | base64 -d
}
bundles_are_ca() { [ "$(cab mutating)" = "$(secret_key ca.crt)" ] && [ "$(cab validating)" = "$(secret_key ca.crt)" ]; }
check "both webhook configurations' caBundle is the Secret's ca.crt" 30 bundles_are_ca
served_fp() { # PORT: SHA-256 fingerprint of the certificate served there (SNI: the Service's name)
	openssl s_client -connect "127.0.0.1:$1" -servername "$SVC" </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 2>/dev/null
}
fp() { openssl x509 -noout -fingerprint -sha256 <<<"$1"; }
serves() { [ "$(served_fp "$1")" = "$(fp "$2")" ] && [ -n "$2" ]; }
for r in a b; do
	check "replica $r: its webhook container is ready and serves the Secret's certificate" 60 eval \
		"grep -q 'ready: 1/1 required services ready' '$D/webhook-$r.log' && serves ${PORT[$r]} \"\$(secret_key tls.crt)\""
done
echo "# both webhooks serving $((SECONDS - T0)) s after the controllers started"
out=""
admitted() { out=$(policy "$1" 2>&1) && k get clusterpolicy "$1" -o json | jq -e '.spec.kernelModule.moduleName == "xe"'; }
check "a ClusterPolicy is admitted through the real webhook (HTTPS, caBundle, the Service's name) and defaulted" 30 \
	admitted gpu
echo "# first policy admitted $((SECONDS - T0)) s after the controllers started"
out=$(policy gpu-policy-whose-module-name-is-too-long 2>&1)
check "a bad ClusterPolicy is denied with the webhook's message" 1 grep -q 'denied the request' <<<"$out"
echo "#   $(head -c 300 <<<"$out")"
ctl() { echo "ipc://$D/$1/run-gpukmm/control.sock"; }
certd_metric() { # REPLICA NAME
	local p
	p=$(pgrep -P "${SUP[$1]}" -x gpukmm-certd) || return 1
	ctl_metrics "$(ctl "$1")" "$p" | jq -r --arg n "$2" '.[$n] // 0'
}
leader=$(k -n "$NS" get lease gpukmm-controller -o jsonpath='{.spec.holderIdentity}')
L=a F=b
[ "$(certd_metric a certd_secret_writes)" -gt 0 ] 2>/dev/null || { L=b F=a; }
check "only the leader's certd wrote (replica $L: Secret and caBundle writes; replica $F: none)" 10 eval \
	"[ \"\$(certd_metric $L certd_secret_writes)\" -ge 1 ] && [ \"\$(certd_metric $L certd_cabundle_writes)\" -ge 2 ] &&
	 [ \"\$(certd_metric $F certd_secret_writes)\" = 0 ] && [ \"\$(certd_metric $F certd_cabundle_writes)\" = 0 ] &&
	 [ \"\$(certd_metric $F certd_files_written)\" -ge 1 ]"
echo "# leader: $leader (replica $L)"

# ---- an upgrade re-applies the manifests: the certificate and the caBundle stay ---------------------
before=$(secret_key tls.crt)
k apply -f "$D/apply.yaml" >>"$D/apply.log" 2>&1
check "re-applying deploy/default keeps the Secret's certificate and both caBundles" 1 eval \
	"[ \"\$(secret_key tls.crt)\" = \"\$before\" ] && bundles_are_ca"

# ---- a rotation ------------------------------------------------------------------------------------
# restarted with a certificate due: validity 100 days, renew 99 days before expiry
for r in a b; do stop_pid "${SUP[$r]}" 10; done
old_ca=$(secret_key ca.crt)
old_fp=$(fp "$(secret_key tls.crt)")
# every 0.2 s: the certificate replica a serves, and whether the mutating caBundle trusts it
sample() {
	local i=0
	while :; do
		openssl s_client -connect "127.0.0.1:${PORT[a]}" -servername "$SVC" </dev/null 2>/dev/null |
			openssl x509 >"$D/served.pem" 2>/dev/null
		cab mutating >"$D/cab.pem"
		n=$(grep -c 'BEGIN CERTIFICATE' "$D/cab.pem")
		if openssl verify -CAfile "$D/cab.pem" "$D/served.pem" >/dev/null 2>&1; then v=trusted; else v=UNTRUSTED; fi
		echo "$(openssl x509 -noout -fingerprint -sha256 <"$D/served.pem" 2>/dev/null) cas=$n $v"
		i=$((i + 1))
		sleep 0.2
	done
}
sample >"$D/samples" 2>/dev/null &
SAMPLER_PID=$!
# ClusterPolicy writes all along (each one an UPDATE through both webhooks)
writes() {
	local i=0
	while :; do
		i=$((i + 1))
		if k annotate clusterpolicy gpu "rotation=$i" --overwrite >/dev/null 2>"$D/write.err"; then
			echo ok
		else
			echo "refused: $(head -c 300 "$D/write.err")"
		fi
	done
}
writes >"$D/writes" 2>/dev/null &
LOOP_PID=$!
# (grace 6 s: a follower reads the Secret within 1 s, its webhook checks its files every 2 s)
ROT=(GPUKMM_CERTD_VALIDITY=100d GPUKMM_CERTD_RENEW_BEFORE=99d GPUKMM_CERTD_PROPAGATION=3s GPUKMM_CERTD_GRACE=6s
	GPUKMM_CERTD_SYNC=1s)
start_ctrl a "${ROT[@]}"
start_ctrl b "${ROT[@]}"
rotated() {
	local crt
	crt=$(secret_key tls.crt)
	[ "$(fp "$crt")" != "$old_fp" ] && [ "$(grep -c 'BEGIN CERTIFICATE' <<<"$(secret_key ca.crt)")" = 1 ] &&
		[ "$(secret_key ca.crt)" != "$old_ca" ] && bundles_are_ca && serves "${PORT[a]}" "$crt" && serves "${PORT[b]}" "$crt"
}
check "rotated: a new CA and certificate, served by both replicas, the old CA gone from ca.crt and both caBundles" 120 rotated
n_ok=$(grep -c '^ok' "$D/writes")
wait_until 30 eval "[ \$(grep -c '^ok' '$D/writes') -gt $n_ok ]" # one more write after the end
stop_var LOOP_PID
stop_var SAMPLER_PID
echo "# $(grep -c '^ok' "$D/writes") ClusterPolicy writes during the rotation, $(grep -c '^refused' "$D/writes") refused"
check "every ClusterPolicy write during the rotation was admitted" 1 eval \
	"[ \$(grep -c '^ok' '$D/writes') -gt 0 ] && ! grep -q '^refused' '$D/writes'"
grep '^refused' "$D/writes" | head -3 | sed 's/^/#   /'
uniq "$D/samples" | sed 's/^/#   sample: /' | head -20
check "the served certificate was trusted by the caBundle at every sample" 1 eval "! grep -q UNTRUSTED '$D/samples'"
check "the new CA was in the caBundle (2 CAs) while the old certificate still served" 1 \
	grep -q "$old_fp cas=2 trusted" "$D/samples"
check "the leader counted one rotation" 10 eval \
	"[ \$((\$(certd_metric a certd_rotations) + \$(certd_metric b certd_rotations))) = 1 ]"

# ---- a certificate that is not certd's: served, never written, nor its caBundle -----------------------
writes_of() { echo $(($(certd_metric a certd_secret_writes) + $(certd_metric b certd_secret_writes) +
	$(certd_metric a certd_cabundle_writes) + $(certd_metric b certd_cabundle_writes))); }
reads_of() { certd_metric "$1" certd_secret_reads; }
left_alone() { # NAME CERT-FILE: both replicas serve it, certd has read the Secret 3 times since and wrote nothing
	local w0=$(writes_of) ra=$(reads_of a) rb=$(reads_of b) crt
	crt=$(cat "$2")
	check "$1: both replicas serve it" 30 eval "serves ${PORT[a]} \"\$crt\" && serves ${PORT[b]} \"\$crt\""
	check "$1: certd read the Secret again and again and wrote neither it nor a caBundle" 30 eval \
		"[ \$(reads_of a) -ge $((ra + 3)) ] && [ \$(reads_of b) -ge $((rb + 3)) ] && [ \$(writes_of) = $w0 ]"
}
# (both valid 30 days: due for renewal by the running certd's 99 days, were they its own)
# deploy/webhook/gen-certs.sh: a CA of the admin's own
kubesim_admin_kubeconfig "$D/admin-kubeconfig"
if KUBECONFIG=$D/admin-kubeconfig deploy/webhook/gen-certs.sh --namespace "$NS" --days 30 >"$D/gen-certs.log" 2>&1; then
	ok "deploy/webhook/gen-certs.sh replaces certd's Secret with the admin's own certificate"
else
	notok "deploy/webhook/gen-certs.sh"
	sed 's/^/#   /' "$D/gen-certs.log"
fi
secret_key tls.crt >"$D/own.pem"
left_alone "gen-certs.sh's certificate" "$D/own.pem"
check "gen-certs.sh's CA is the caBundle, a policy is admitted with it" 30 eval \
	"[ \"\$(cab mutating | openssl x509 -noout -subject)\" = 'subject=CN = gpukmm-webhook-ca' ] && admitted gpu-own"
# cert-manager (deploy/cert-manager): its Secret (type kubernetes.io/tls, its annotations, ca.crt)
# and its CA injector's annotation on the configurations, which it fills
deploy/webhook/gen-certs.sh --out-dir "$D/cm" --namespace "$NS" --days 30 >/dev/null
k -n "$NS" delete secret gpukmm-webhook-cert >>"$D/apply.log" 2>&1
k -n "$NS" create secret generic gpukmm-webhook-cert --type=kubernetes.io/tls --from-file=tls.crt="$D/cm/tls.crt" \
	--from-file=tls.key="$D/cm/tls.key" --from-file=ca.crt="$D/cm/ca.crt" >>"$D/apply.log" 2>&1
k -n "$NS" annotate secret gpukmm-webhook-cert cert-manager.io/certificate-name=gpukmm-webhook-cert \
	gpukmm.io/managed-by=gpukmm-certd >>"$D/apply.log" 2>&1 # (a Secret certd once owned, taken over)
CM64=$(base64 -w0 "$D/cm/ca.crt")
for kind in mutating validating; do
	k annotate "${kind}webhookconfiguration" "gpukmm-$kind-webhook-configuration" \
		"cert-manager.io/inject-ca-from=$NS/gpukmm-webhook-cert" >>"$D/apply.log" 2>&1
	k patch "${kind}webhookconfiguration" "gpukmm-$kind-webhook-configuration" --type=json \
		-p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$CM64\"}]" >>"$D/apply.log" 2>&1
done
left_alone "cert-manager's certificate" "$D/cm/tls.crt"
check "cert-manager's Secret and injected caBundle untouched, a policy admitted with them" 30 eval \
	"[ \"\$(cab validating)\" = \"\$(cat '$D/cm/ca.crt')\" ] && [ \"\$(secret_key tls.crt)\" = \"\$(cat '$D/cm/tls.crt')\" ] &&
	 admitted gpu-cm"

# ---- the shipped RBAC was enough, and every call was a row of its table -------------------------------
kubesim_rbac_verdict "$NS" || FAILED=1
kcurl -s "$KUBESIM_URL/kubesim/rbac" >"$D/rbac.json"
used() { # VERB RESOURCE: the controller's token was allowed that call
	jq -e --arg u "system:serviceaccount:$NS:gpukmm-controller" --arg v "$1" --arg r "$2" \
		'any(.requests[]; .user == $u and .verb == $v and .resource == $r and .allowed)' "$D/rbac.json" >/dev/null
}
check "certd's calls were the rows of its table: get and patch of the Secret and of both configurations" 1 eval \
	"used get secrets && used patch secrets && used get mutatingwebhookconfigurations &&
	 used patch mutatingwebhookconfigurations && used get validatingwebhookconfigurations &&
	 used patch validatingwebhookconfigurations"
for r in a b; do
	stop_pid "${SUP[$r]}" 10
	[ "$STOP_RC" = 0 ] || notok "replica $r's gpukmm exits 0 on SIGTERM (rc $STOP_RC)"
	unset "SUP[$r]"
	stop_pid "${WSUP[$r]}" 10
	[ "$STOP_RC" = 0 ] || notok "replica $r's webhook container exits 0 on SIGTERM (rc $STOP_RC)"
	unset "WSUP[$r]"
done
