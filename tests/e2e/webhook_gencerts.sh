#!/bin/bash
# deploy/webhook/gen-certs.sh --out-dir: the certificate it makes is what the API
# server will verify (CA chain, Service DNS names), and gpukmm-webhook serves it.
set -u
TMP=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT
fails=0
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; fails=$((fails + 1)); }
wait_for() { local d=$((SECONDS + $1)); shift; while ! "$@" 2>/dev/null; do [ $SECONDS -ge $d ] && return 1; sleep 0.05; done; }

S="$GPUKMM_SRC/deploy/webhook/gen-certs.sh"
if "$S" --out-dir "$TMP/c" --namespace ns1 >/dev/null; then ok "gen-certs.sh --out-dir"; else nok "gen-certs.sh failed"; exit 1; fi
openssl verify -CAfile "$TMP/c/ca.crt" "$TMP/c/tls.crt" >/dev/null 2>&1 && ok "certificate chains to the CA" || nok "verify"
openssl x509 -in "$TMP/c/tls.crt" -noout -ext subjectAltName 2>/dev/null | grep -q "DNS:gpukmm-webhook-service.ns1.svc" &&
	ok "Service DNS name in the SAN" || nok "SAN"
[ "$(stat -c %a "$TMP/c/tls.key")" = 600 ] && ok "key file 0600" || nok "key mode $(stat -c %a "$TMP/c/tls.key")"
[ ! -e "$TMP/c/ca.key" ] && ok "CA key not kept" || nok "CA key left behind"
"$S" --bogus >/dev/null 2>&1; [ $? = 2 ] && ok "unknown argument -> 2" || nok "bad arg"

"$GPUKMM_BIN/gpukmm-webhook" --listen 127.0.0.1:0 --port-file "$TMP/port" --tls-cert "$TMP/c/tls.crt" --tls-key "$TMP/c/tls.key" 2>"$TMP/log" &
PID=$!
wait_for 10 test -s "$TMP/port" || { nok "webhook did not start"; cat "$TMP/log"; exit 1; }
H=gpukmm-webhook-service.ns1.svc
code=$(curl -sS --max-time 10 --cacert "$TMP/c/ca.crt" --resolve "$H:$(cat "$TMP/port"):127.0.0.1" -o /dev/null -w '%{http_code}' "https://$H:$(cat "$TMP/port")/healthz")
[ "$code" = 200 ] && ok "webhook serves the generated certificate, verified like the API server would" || nok "https with generated cert: $code"
exit $((fails > 0))
