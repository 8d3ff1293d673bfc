#!/bin/bash
# The supervisor's /metrics server without an API server: the serving certificate
# from --metrics-tls-cert/--metrics-tls-key, re-read when the files change (the new
# one served without a restart); a self-signed one when none is given; a reviewer
# that cannot review (here a stand-in "statusd" without the AccessReview service):
# 503, nothing served. The reviews themselves: tests/e2e/metrics.sh.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/proc.sh
D=$(mktemp -d "${TMPDIR:-/tmp}/metrics-tls.XXXXXX") || exit 1
SUP=
trap 'stop_pid "$SUP" 10; rm -rf "$D"' EXIT
mkcert() { # NAME CN
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$D/$1.key" -out "$D/$1.crt" \
		-days 1 -subj "/CN=$2" -addext subjectAltName=IP:127.0.0.1 2>/dev/null
}
mkcert one metrics-one && mkcert two metrics-two || { echo "not ok - openssl makes test certificates"; exit 1; }
cp "$D/one.crt" "$D/tls.crt" && cp "$D/one.key" "$D/tls.key"
cat >"$D/c.json" <<J
{"services": [{"name": "statusd", "binary": "$GPUKMM_TBIN/sup_testsvc", "args": ["--mode", "ready"], "credentials": true}]}
J
start() { # LOG ARGS...
	local log=$1
	shift
	"$GPUKMM_BIN/gpukmm" --config "$D/c.json" --runtime-dir "$D/run-$log" --metrics-listen 127.0.0.1:0 "$@" \
		>"$D/$log.log" 2>&1 &
	SUP=$!
}
port() { grep -o 'metrics: listening on 127.0.0.1:[0-9]*' "$D/$1.log" | head -1 | grep -o '[0-9]*$'; }
served_cn() { # PORT
	openssl s_client -connect "127.0.0.1:$1" </dev/null 2>/dev/null | openssl x509 -noout -subject 2>/dev/null |
		sed -n 's/.*CN *= *//p'
}
cn_is() { [ "$(served_cn "$1")" = "$2" ]; }

start files --metrics-tls-cert "$D/tls.crt" --metrics-tls-key "$D/tls.key"
check "listening (certificate from files)" wait_until 10 port files
P=$(port files)
check "serves the certificate of --metrics-tls-cert" cn_is "$P" metrics-one
cp "$D/two.key" "$D/tls.key.new" && cp "$D/two.crt" "$D/tls.crt.new" && mv "$D/tls.key.new" "$D/tls.key" &&
	mv "$D/tls.crt.new" "$D/tls.crt"
check "serves the new certificate once the files change (no restart)" wait_until 10 cn_is "$P" metrics-two
check "the reload is logged" grep -q 'metrics: serving the new certificate' "$D/files.log"
ready() { "$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$D/run-files" --timeout-ms 1000 >/dev/null 2>&1; }
check "the reviewer stand-in is ready" wait_until 10 ready
code() { curl -sk -o /dev/null -w '%{http_code}' --max-time 10 --oauth2-bearer "$2" "https://127.0.0.1:$1/metrics"; }
check "a reviewer that cannot review: 503, not the page" bash -c "[ \"\$($(declare -f code); code $P some-token)\" = 503 ]"
check "... and says so in the log" grep -q 'metrics: token review failed' "$D/files.log"
check "no token: 401 before any review" bash -c "[ \"\$(curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:$P/metrics)\" = 401 ]"
stop_pid "$SUP" 10
check "stops cleanly (exit 0)" test "$STOP_RC" = 0

start self
check "listening (self-signed)" wait_until 10 port self
check "without --metrics-tls-cert: a self-signed certificate, CN gpukmm-metrics" cn_is "$(port self)" gpukmm-metrics
check "its subjectAltName covers localhost and 127.0.0.1" bash -c \
	"openssl s_client -connect 127.0.0.1:$(port self) </dev/null 2>/dev/null | openssl x509 -noout -ext subjectAltName | grep -q 'DNS:localhost.*IP Address:127.0.0.1'"
stop_pid "$SUP" 10
check "stops cleanly (exit 0)" test "$STOP_RC" = 0
SUP=
