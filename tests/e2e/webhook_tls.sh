#!/bin/bash
# gpukmm-webhook over HTTPS with a test CA made by openssl: health, mutate,
# validate allow/deny with exact messages, malformed -> 400, oversized -> 413,
# wrong content type -> 415, certificate rotation without restart, SIGTERM.
# Certificate files it cannot serve (garbage, a key of another certificate,
# expired, a curve the TLS library refuses) leave the last good one serving,
# are logged once and counted, and a good pair later is picked up.
set -u
WH="$GPUKMM_BIN/gpukmm-webhook"
TMP=$(mktemp -d)
PID= CPID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ -n "$CPID" ] && kill "$CPID" 2>/dev/null && wait "$CPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
fails=0
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; fails=$((fails + 1)); }
# poll for a condition with a deadline (seconds)
wait_for() {
	local deadline=$((SECONDS + $1)); shift
	while ! "$@" 2>/dev/null; do
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.05
	done
}
gen_ca() { openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/$1.key" -out "$TMP/$1.crt" -days 1 -subj "/CN=$1" 2>/dev/null; }
gen_cert() { # ca name
	openssl req -newkey rsa:2048 -nodes -keyout "$TMP/$2.key" -out "$TMP/$2.csr" -subj /CN=localhost 2>/dev/null &&
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$TMP/ext" &&
	openssl x509 -req -in "$TMP/$2.csr" -CA "$TMP/$1.crt" -CAkey "$TMP/$1.key" -CAcreateserial -out "$TMP/$2.crt" \
		-days 1 -extfile "$TMP/ext" 2>/dev/null
}
gen_ca ca1 && gen_cert ca1 srv1 && gen_ca ca2 && gen_cert ca2 srv2 || { echo "not ok - openssl test CA"; exit 1; }
mkdir -p "$TMP/certs"
cp "$TMP/srv1.crt" "$TMP/certs/tls.crt"; cp "$TMP/srv1.key" "$TMP/certs/tls.key"
chmod 600 "$TMP/certs/tls.key"

# a fake supervisor Control: the webhook's counters arrive with its heartbeats
CONTROL="ipc://$TMP/control.sock"
"$GPUKMM_TBIN/fake_control" --listen "$CONTROL" >"$TMP/control.log" 2>&1 &
CPID=$!
. "${GPUKMM_SRC:-.}/tests/lib/metrics.sh"
counter() { ctl_metrics "$CONTROL" "$PID" | jq -r --arg n "$1" '.[$n] // 0'; }
counter_ge() { [ "$(counter "$1")" -ge "$2" ]; }

"$WH" --listen 127.0.0.1:0 --tls-cert "$TMP/certs/tls.crt" --tls-key "$TMP/certs/tls.key" --port-file "$TMP/port" \
	--cert-check-ms 100 --max-body-bytes 65536 --namespace intel-gpu-base-operator \
	--control "$CONTROL" --heartbeat-ms 100 2>"$TMP/log" &
PID=$!
if wait_for 10 test -s "$TMP/port"; then ok "webhook listening"; else nok "webhook did not start"; cat "$TMP/log"; exit 1; fi
PORT=$(cat "$TMP/port")
URL="https://127.0.0.1:$PORT"

# curl_code CA PATH [curl args...] -> prints HTTP code, body in $TMP/body
req() {
	local ca=$1 path=$2; shift 2
	curl -sS --max-time 10 --cacert "$TMP/$ca.crt" -o "$TMP/body" -w '%{http_code}' "$@" "$URL$path" 2>"$TMP/curlerr"
}
post() { # ca path json-file [extra]
	local ca=$1 path=$2 f=$3; shift 3
	req "$ca" "$path" -H 'Content-Type: application/json' --data-binary "@$f" "$@"
}
review() { # op object-json > file
	printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"uid-1","operation":"%s","object":%s}}' "$1" "$2"
}

[ "$(req ca1 /healthz)" = 200 ] && grep -q ok "$TMP/body" && ok "healthz over https" || nok "healthz"
if curl -sS --max-time 5 -o /dev/null "$URL/healthz" 2>/dev/null; then nok "unverified TLS accepted by curl?"; else ok "TLS verification is on (no CA, no connection)"; fi

GOOD='{"apiVersion":"intel.com/v1alpha1","kind":"ClusterPolicy","metadata":{"name":"gpu"},"spec":{"resourceRegistration":"dp","dp":{"plugin":"r.io/dp:1"},"dra":{"image":"r.io/dra:1"},"xpu":{"image":"r.io/x:1","monitoringResource":"monitoring"},"kernelModule":{"kernelMappings":[{"regexp":"^.+$","containerImage":"registry.example.com/xe-driver:1.0"}]}}}'
review CREATE "$GOOD" >"$TMP/good.json"
code=$(post ca1 /mutate-intel-com-v1alpha1-clusterpolicy "$TMP/good.json")
patch=$(jq -r .response.patch "$TMP/body" | base64 -d)
if [ "$code" = 200 ] && [ "$patch" = '[{"op":"add","path":"/spec/kernelModule/moduleName","value":"xe"}]' ] &&
   [ "$(jq -r .response.patchType "$TMP/body")" = JSONPatch ] && [ "$(jq -r .response.uid "$TMP/body")" = uid-1 ]; then
	ok "mutate defaults moduleName with a base64 JSONPatch"
else nok "mutate: $code $(cat "$TMP/body")"; fi
review UPDATE "$(jq -c '.spec.kernelModule.moduleName="i915"' <<<"$GOOD")" >"$TMP/set.json"
code=$(post ca1 /mutate-intel-com-v1alpha1-clusterpolicy "$TMP/set.json")
[ "$code" = 200 ] && [ "$(jq -r '.response.patch // "none"' "$TMP/body")" = none ] && [ "$(jq -r .response.allowed "$TMP/body")" = true ] &&
	ok "mutate: no patch when moduleName is set" || nok "mutate with moduleName: $(cat "$TMP/body")"

code=$(post ca1 /validate-intel-com-v1alpha1-clusterpolicy "$TMP/good.json")
[ "$code" = 200 ] && [ "$(jq -r .response.allowed "$TMP/body")" = true ] && ok "validate allows a good policy" || nok "validate good: $(cat "$TMP/body")"

BAD=$(jq -c '.spec.kernelModule.kernelMappings=[{"regexp":"[invalid","containerImage":"registry.example.com/xe-driver"},{"regexp":"^6"}] | .spec.kernelModule.modulesLoadingOrder=["drm_buddy","xe","xe"]' <<<"$GOOD")
review CREATE "$BAD" >"$TMP/bad.json"
code=$(post ca1 /validate-intel-com-v1alpha1-clusterpolicy "$TMP/bad.json")
want='kernelModule.kernelMappings[0].regexp: invalid regular expression: error parsing regexp: missing closing ]: `[invalid`
kernelModule.kernelMappings[0].containerImage: image "registry.example.com/xe-driver" must include an explicit tag or digest
kernelModule.kernelMappings[1]: one of containerImage or build must be set
kernelModule.modulesLoadingOrder[0] must be moduleName "xe"
kernelModule.modulesLoadingOrder[2]: duplicate entry "xe"'
got=$(jq -r .response.status.message "$TMP/body")
if [ "$code" = 200 ] && [ "$(jq -r .response.allowed "$TMP/body")" = false ] && [ "$got" = "$want" ] &&
   [ "$(jq -r .response.status.code "$TMP/body")" = 403 ]; then
	ok "validate denies with every upstream message, newline-joined"
else nok "validate bad: $code"; diff <(echo "$want") <(echo "$got") | sed 's/^/# /'; fi

LONG=$(jq -c '.metadata.name="a-very-long-policy-name"' <<<"$GOOD")
review CREATE "$LONG" >"$TMP/long.json"
post ca1 /validate-intel-com-v1alpha1-clusterpolicy "$TMP/long.json" >/dev/null
jq -r .response.status.message "$TMP/body" | grep -q "exceeds KMM's maximum of 41" && ok "validate: KMM name length (ours)" || nok "name length: $(cat "$TMP/body")"

L0=$(jq -c '.spec.dp={"levelzero":"intel/levelzero:1.0"} | del(.spec.kernelModule)' <<<"$GOOD")
review CREATE "$L0" >"$TMP/l0.json"
post ca1 /validate-intel-com-v1alpha1-clusterpolicy "$TMP/l0.json" >/dev/null
[ "$(jq -r '.response.warnings[0]' "$TMP/body")" = "dp.levelzero is no longer used and will be ignored." ] && ok "levelzero warning" || nok "warning: $(cat "$TMP/body")"

printf 'this is not json' >"$TMP/garbage"
code=$(post ca1 /validate-intel-com-v1alpha1-clusterpolicy "$TMP/garbage")
[ "$code" = 400 ] && grep -q "malformed AdmissionReview" "$TMP/body" && ok "malformed body -> 400 with a reason" || nok "malformed: $code"
printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","object":"no"}}' >"$TMP/objstr"
code=$(post ca1 /mutate-intel-com-v1alpha1-clusterpolicy "$TMP/objstr")
[ "$code" = 400 ] && grep -q "request.object must be an object" "$TMP/body" && ok "bad request.object -> 400" || nok "object: $code"
head -c 100000 /dev/zero | tr '\0' ' ' >"$TMP/big"
code=$(post ca1 /validate-intel-com-v1alpha1-clusterpolicy "$TMP/big")
[ "$code" = 413 ] && ok "oversized body -> 413" || nok "oversized: $code"
code=$(post ca1 /validate-intel-com-v1alpha1-clusterpolicy "$TMP/big" -H 'Transfer-Encoding: chunked')
[ "$code" = 413 ] && ok "oversized chunked body -> 413" || nok "oversized chunked: $code"
code=$(req ca1 /validate-intel-com-v1alpha1-clusterpolicy -H 'Content-Type: text/plain' --data-binary "@$TMP/good.json")
[ "$code" = 415 ] && ok "wrong content type -> 415" || nok "content type: $code"
code=$(req ca1 /validate-intel-com-v1alpha1-clusterpolicy)
[ "$code" = 405 ] && ok "GET on a webhook path -> 405" || nok "GET: $code"
code=$(req ca1 /nope)
[ "$code" = 404 ] && ok "unknown path -> 404" || nok "404: $code"
[ "$(req ca1 /healthz)" = 200 ] && ok "still healthy after the bad requests" || nok "not healthy"

# rotation: new CA + cert swapped in the way a Secret volume update does (rename)
cp "$TMP/srv2.crt" "$TMP/certs/tls.crt.new"; cp "$TMP/srv2.key" "$TMP/certs/tls.key.new"
mv "$TMP/certs/tls.key.new" "$TMP/certs/tls.key"; mv "$TMP/certs/tls.crt.new" "$TMP/certs/tls.crt"
healthy_with() { [ "$(req "$1" /healthz)" = 200 ]; }
if wait_for 15 healthy_with ca2; then ok "rotated certificate served without restart"; else nok "rotation not picked up"; tail -5 "$TMP/log"; fi
if healthy_with ca1; then nok "old certificate still served to new connections"; else ok "old certificate no longer served"; fi
kill -0 "$PID" 2>/dev/null && ok "same process" || nok "process died"
code=$(post ca2 /validate-intel-com-v1alpha1-clusterpolicy "$TMP/good.json")
[ "$code" = 200 ] && ok "admission works after rotation" || nok "after rotation: $code"

# a broken certificate is not taken: the webhook keeps serving the last good one
# (the rotation above renamed the key, then the certificate: a check in between may
# have refused the half-swapped pair once; count from here)
l0=$(grep -c "not usable yet" "$TMP/log")
wait_for 5 eval '[ "$(counter webhook_cert_refused)" = "$l0" ]' # (the counter comes with a heartbeat)
printf 'garbage\n' >"$TMP/certs/tls.crt.new"; mv "$TMP/certs/tls.crt.new" "$TMP/certs/tls.crt"
wait_for 10 grep -q "not usable yet" "$TMP/log" && ok "unusable new certificate reported" || nok "no warning for bad cert"
healthy_with ca2 && ok "last good certificate still served" || nok "broken cert broke serving"
# said once: the files are looked at every 100 ms, the warning is not repeated
c0=$(counter webhook_cert_checks)
if wait_for 10 counter_ge webhook_cert_checks $((c0 + 5)) && [ "$(grep -c "not usable yet" "$TMP/log")" = $((l0 + 1)) ]; then
	ok "the refusal is logged once ($(counter webhook_cert_checks) checks)"
else nok "refusal logged $(($(grep -c "not usable yet" "$TMP/log") - l0)) times"; fi
wait_for 5 eval '[ "$(counter webhook_cert_refused)" = $((l0 + 1)) ] && [ "$(counter webhook_cert_stale)" = 1 ]' &&
	ok "counted: webhook_cert_refused +1, webhook_cert_stale 1" || nok "counters: refused $(counter webhook_cert_refused) (before: $l0) stale $(counter webhook_cert_stale)"
[ "$(req ca2 /readyz)" = 200 ] && grep -q "certificate files not served (the previous certificate is): .*tls.crt: no PEM certificate" "$TMP/body" &&
	ok "/readyz: ready, and says why the files are not served" || nok "readyz: $(cat "$TMP/body")"

# refused_with WHAT CRT KEY PATTERN: the pair is swapped in (key first, then
# the certificate, each a rename), refused for PATTERN; the last good one serves
refused_with() {
	local n0
	n0=$(counter webhook_cert_refused)
	cp "$3" "$TMP/certs/tls.key.new"; mv "$TMP/certs/tls.key.new" "$TMP/certs/tls.key"
	cp "$2" "$TMP/certs/tls.crt.new"; mv "$TMP/certs/tls.crt.new" "$TMP/certs/tls.crt"
	if wait_for 10 grep -q "not usable yet.*$4" "$TMP/log" && healthy_with ca2 && kill -0 "$PID"; then
		ok "$1: refused ($(grep -o "not usable yet.*$4.*" "$TMP/log" | head -1 | cut -c1-150)), the last good certificate still served"
	else nok "$1: not refused, or serving broke"; tail -3 "$TMP/log" | sed 's/^/# /'; fi
	counter_ge webhook_cert_refused $((n0 + 1)) || wait_for 5 counter_ge webhook_cert_refused $((n0 + 1)) ||
		nok "$1: webhook_cert_refused did not count it"
}
refused_with "a key of another certificate" "$TMP/srv1.crt" "$TMP/srv2.key" "does not match the certificate"
# an openssl-made pair OpenSSL is happy with and the TLS library (GnuTLS) is not
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:brainpoolP256r1 -nodes -keyout "$TMP/bp.key" -out "$TMP/bp.crt" \
	-days 1 -subj /CN=localhost 2>/dev/null
refused_with "a brainpoolP256r1 key" "$TMP/bp.crt" "$TMP/bp.key" "the TLS library refused"
openssl req -newkey rsa:2048 -nodes -keyout "$TMP/old.key" -out "$TMP/old.csr" -subj /CN=localhost 2>/dev/null &&
	openssl x509 -req -in "$TMP/old.csr" -CA "$TMP/ca2.crt" -CAkey "$TMP/ca2.key" -CAcreateserial -out "$TMP/old.crt" \
		-days -1 -extfile "$TMP/ext" 2>/dev/null
refused_with "an expired certificate" "$TMP/old.crt" "$TMP/old.key" "expired at"
# a half-written certificate: the first half of a good one
head -c 700 "$TMP/srv1.crt" >"$TMP/half.crt"
refused_with "a half-written certificate" "$TMP/half.crt" "$TMP/old.key" "tls.crt: no PEM certificate"
# and a good pair is picked up again
cp "$TMP/srv1.key" "$TMP/certs/tls.key.new"; mv "$TMP/certs/tls.key.new" "$TMP/certs/tls.key"
cp "$TMP/srv1.crt" "$TMP/certs/tls.crt.new"; mv "$TMP/certs/tls.crt.new" "$TMP/certs/tls.crt"
if wait_for 15 healthy_with ca1 && kill -0 "$PID"; then ok "a good certificate after the refused ones is served, same process"
else nok "good certificate not picked up after refusals"; tail -5 "$TMP/log" | sed 's/^/# /'; fi
wait_for 5 eval '[ "$(counter webhook_cert_stale)" = 0 ]' && [ "$(req ca1 /readyz)" = 200 ] && [ "$(cat "$TMP/body")" = ok ] &&
	ok "webhook_cert_stale back to 0, /readyz plain ok" || nok "stale $(counter webhook_cert_stale), readyz $(cat "$TMP/body")"
code=$(post ca1 /validate-intel-com-v1alpha1-clusterpolicy "$TMP/good.json")
[ "$code" = 200 ] && ok "admission works on the good certificate" || nok "after recovery: $code"
grep -q "BEGIN PRIVATE KEY\|BEGIN RSA\|BEGIN EC" "$TMP/log" && nok "key material in the log" || ok "no key material in the log"

kill -TERM "$PID"; wait "$PID"; rc=$?; PID=
[ "$rc" = 0 ] && ok "SIGTERM: clean exit" || nok "SIGTERM exit $rc"
grep -q "stopping: .* requests" "$TMP/log" && ok "counters logged at exit" || nok "no counters"

# startup errors
"$WH" --listen 127.0.0.1:0 2>"$TMP/log2"; rc=$?
[ "$rc" = 2 ] && grep -q -- "--tls-cert and --tls-key are required" "$TMP/log2" && ok "TLS required unless --insecure-http" || nok "no-cert start: $rc"
"$WH" --listen 127.0.0.1:0 --tls-cert "$TMP/srv1.crt" --tls-key "$TMP/srv2.key" 2>"$TMP/log3"; rc=$?
[ "$rc" = 1 ] && grep -q "does not match" "$TMP/log3" && ok "mismatched key refused" || nok "mismatched key: $rc"
"$WH" --insecure-http --listen 127.0.0.1:0 --port-file "$TMP/port2" 2>"$TMP/log4" &
PID=$!
wait_for 10 test -s "$TMP/port2" && code=$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(cat "$TMP/port2")/healthz") || code=none
[ "$code" = 200 ] && grep -q "WITHOUT TLS" "$TMP/log4" && ok "--insecure-http works and warns loudly" || nok "insecure-http: $code"
kill "$PID"; wait "$PID"; PID=
exit $((fails > 0))
