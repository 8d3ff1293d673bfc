#!/bin/bash
# fake-kmm admission webhook over HTTP and HTTPS, driven with curl and
# AdmissionReview documents (no API server involved).
set -u
FK="$GPUKMM_BIN/fake-kmm"
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
has() { grep -qF -- "$1" "$tmp/out"; }
check() { if eval "$2"; then ok "$1"; else nok "$1"; echo "# got: $(cat "$tmp/out" 2>/dev/null)"; fi; }

wait_file() { # file pid
	local i
	for i in $(seq 1 100); do
		[ -s "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		timeout 0.1 tail -f /dev/null 2>/dev/null
	done
	return 1
}

start() { # url-file args...
	local uf=$1; shift
	"$FK" --webhook-only --url-file "$uf" "$@" 2>>"$tmp/fk.log" &
	pids+=($!)
	wait_file "$uf" $! || { nok "fake-kmm starts ($*)"; cat "$tmp/fk.log"; exit 1; }
}

review() { # op object old
	printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"uid-%s","operation":"%s","namespace":"ns","name":"x","object":%s,"oldObject":%s}}' \
		"$1" "$1" "$2" "${3:-null}"
}
post() { # base body
	curl -sS --max-time 10 ${CURL_EXTRA:-} -H 'Content-Type: application/json' --data-binary "$2" "$1/validate-kmm-sigs-x-k8s-io-v1beta1-module" >"$tmp/out" 2>&1
}

start "$tmp/url" --webhook-listen http://127.0.0.1:0
base=$(cat "$tmp/url")
check "listens on an ephemeral port" '[[ $base =~ ^http://127\.0\.0\.1:[0-9]+$ ]] && [[ $base != *:0 ]]'

good='{"metadata":{"name":"m","namespace":"ns"},"spec":{"selector":{},"moduleLoader":{"container":{"modprobe":{"moduleName":"xe"},"kernelMappings":[{"regexp":"^6\\.","containerImage":"img:1"}]}}}}'
post "$base" "$(review CREATE "$good")"
check "valid Module allowed" 'has "\"uid\":\"uid-CREATE\",\"allowed\":true"'

badre='{"metadata":{"name":"m","namespace":"ns"},"spec":{"selector":{},"moduleLoader":{"container":{"modprobe":{"moduleName":"xe"},"kernelMappings":[{"regexp":"(6","containerImage":"img:1"}]}}}}'
post "$base" "$(review CREATE "$badre")"
check "bad regexp denied with KMM's message" \
	'has "\"allowed\":false,\"status\":{\"code\":403,\"reason\":\"Forbidden\",\"message\":\"failed to validate kernel mappings: invalid regexp at index 0: error parsing regexp: missing closing ): \`(6\`\"}"'

v1=${good/\"modprobe\"/\"version\":\"v1\",\"modprobe\"}
post "$base" "$(review UPDATE "$v1" "$good")"
check "version toggle on update denied" \
	'has "\"message\":\"cannot update to or from an empty version; please delete the Module and create it again\""'

post "$base" "not json at all"
check "garbage body answered with a 400 review" 'has "\"allowed\":false,\"status\":{\"code\":400"'

code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$base/validate-kmm-sigs-x-k8s-io-v1beta1-module")
check "GET on the webhook path is 405" '[ "$code" = 405 ]'
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$base/nope")
check "unknown path is 404" '[ "$code" = 404 ]'
code=$(head -c 5000000 /dev/zero | tr '\0' 'x' | curl -s -o /dev/null -w '%{http_code}' --max-time 10 --data-binary @- "$base/validate-kmm-sigs-x-k8s-io-v1beta1-module")
check "oversized body refused with 413" '[ "$code" = 413 ]'
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$base/healthz")
check "healthz" '[ "$code" = 200 ]'

# DRA gate follows --kube-version
dra='{"metadata":{"name":"m","namespace":"ns"},"spec":{"selector":{},"dra":{"driverName":"gpu.intel.com"}}}'
post "$base" "$(review CREATE "$dra")"
check "DRA refused on the default 1.32" \
	'has "\"message\":\"failed to validate DRA: spec.dra requires Kubernetes 1.34 or later; current cluster version is 1.32\""'

# HTTPS with a self-signed certificate
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 \
	-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
start "$tmp/url2" --webhook-listen https://127.0.0.1:0 --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" --kube-version 1.34
base2=$(cat "$tmp/url2")
CURL_EXTRA="--cacert $tmp/cert.pem" post "$base2" "$(review CREATE "$dra")"
check "https with verification: DRA allowed on 1.34" 'has "\"allowed\":true"'
curl -s --max-time 10 -o /dev/null "$base2/healthz"
check "https refuses an unverified client handshake (curl without the CA fails)" '[ $? -ne 0 ]'

"$FK" --webhook-only --webhook-listen https://127.0.0.1:0 >/dev/null 2>&1
check "https without a certificate is an error" '[ $? -ne 0 ]'
"$FK" --webhook-only --webhook-listen ftp://x:1 >/dev/null 2>&1
check "bad listen URL is an error" '[ $? -eq 2 ]'

# SIGTERM: clean exit 0
kill -TERM "${pids[0]}"
wait "${pids[0]}"
check "SIGTERM exits 0" '[ $? -eq 0 ]'
pids=("${pids[@]:1}")
