#!/bin/bash
# kreq (tests/bin/kreq.c), the client behind every kraw of the tests, answers as curl
# does: the same body and status code for reads, writes, errors and a chunked watch,
# over http and over https; and it refuses what curl refuses (another CA's
# certificate, a name the certificate does not carry, no server), with code 000.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/proc.sh
. tests/lib/kubesim.sh
KREQ=$GPUKMM_TBIN/kreq
T=$(mktemp -d "${TMPDIR:-/tmp}/kreq.XXXXXX") || exit 1
FAILED=0

# same NAME METHOD PATH [BODY [CTYPE]]: kreq and curl, the same request, the same answer
# (a write is made once by each; NORM, a jq filter, removes what differs between the two
# writes: names given by the server, resourceVersions, managers, times)
same() {
	local name=$1 m=$2 p=$3 b=${4:-} ct=${5:-application/json}
	local tok=${KUBESIM_ADMIN_TOKEN:-} c=() q=(-X "$m")
	c=(-sS -X "$m" -o - -w '%{stderr}%{http_code}')
	[ -n "${KUBESIM_CA:-}" ] && c+=(--cacert "$KUBESIM_CA") && q+=(--cacert "$KUBESIM_CA")
	[ -n "$tok" ] && c+=(-H "Authorization: Bearer $tok")
	[ -n "$b" ] && c+=(-H "Content-Type: $ct" --data-binary "$b") && q+=(-H "Content-Type: $ct" --data-binary "$b")
	curl "${c[@]}" "$KUBESIM_URL$p" >"$T/c.body" 2>"$T/c.code"
	local crc=$?
	KREQ_BEARER=$tok "$KREQ" "${q[@]}" "$KUBESIM_URL$p" >"$T/k.body" 2>"$T/k.code"
	local krc=$?
	if [ -n "${NORM:-}" ]; then # a write: each its own object, the same but for NORM's fields
		jq -S "$NORM" "$T/c.body" >"$T/c.norm" 2>&1 && mv "$T/c.norm" "$T/c.body"
		jq -S "$NORM" "$T/k.body" >"$T/k.norm" 2>&1 && mv "$T/k.norm" "$T/k.body"
	fi
	if [ $crc = $krc ] && [ "$(cat "$T/c.code")" = "$(cat "$T/k.code")" ] && cmp -s "$T/c.body" "$T/k.body"; then
		ok "$name ($(cat "$T/k.code"), $(wc -c <"$T/k.body") bytes)"
	else
		notok "$name"
		echo "#   curl: rc $crc, $(tail -c 3 "$T/c.code"), $(head -c 200 "$T/c.body")"
		echo "#   kreq: rc $krc, $(cat "$T/k.code"), $(head -c 200 "$T/k.body")"
	fi
}
# refused NAME WHY-REGEX RC KREQ-ARGS...: no body, "kreq: WHY" then 000 on stderr, exit RC
refused() {
	local name=$1 why=$2 want=$3 rc
	shift 3
	"$KREQ" "$@" >"$T/r.body" 2>"$T/r.err"
	rc=$?
	if [ $rc = "$want" ] && ! [ -s "$T/r.body" ] && [ "$(tail -c 3 "$T/r.err")" = 000 ] && grep -qE "^kreq: .*$why" "$T/r.err"; then
		ok "$name"
	else
		notok "$name"
		echo "#   rc $rc, stderr: $(cat "$T/r.err"), body: $(head -c 200 "$T/r.body")"
	fi
}
cases() { # the same requests over either scheme ($1: namespace name)
	same "a list" GET /api/v1/namespaces
	same "a 404 with its Status" GET /api/v1/namespaces/absent
	local norm='del(.metadata.name, .metadata.uid, .metadata.resourceVersion, .metadata.creationTimestamp, .metadata.managedFields)'
	NORM=$norm same "a create" POST /api/v1/namespaces \
		"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"generateName\":\"$1-\"}}"
	NORM=$norm same "a merge patch" PATCH /api/v1/namespaces/default '{"metadata":{"labels":{"kreq":"yes"}}}' \
		application/merge-patch+json
	same "a create refused: 409 and its Status" POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}'
	same "a list by label selector" GET '/api/v1/namespaces?labelSelector=kreq%3Dyes'
	same "a watch, chunked, closed by its timeout" GET '/api/v1/namespaces?watch=1&timeoutSeconds=1'
	same "a body of 20 kB" GET /openapi/v2
}

echo "# over http"
KUBESIM_NO_TRAP=1 kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
cases plain
port=$KUBESIM_PORT
kubesim_stop
refused "no server: exit 7, code 000" "connect 127.0.0.1:$port" 7 "http://127.0.0.1:$port/version"
refused "not a URL: exit 2" "not an http" 2 "ftp://127.0.0.1/x"
refused "--max-time 0: exit 2" "not a whole number of seconds" 2 --max-time 0 "http://127.0.0.1:$port/version"
# a server that never answers: its socket listens and nobody accepts (the kernel completes
# the connection); kreq gives up after --max-time, not when the server goes away (exit 56)
exec {hung}< <(exec python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True); time.sleep(60)')
hung_pid=$!
hport=
read -r -t 20 hport <&"$hung" || true
refused "a server that never answers: exit 28 after --max-time" "no complete response within 1 s" 28 \
	--max-time 1 "http://127.0.0.1:${hport:-1}/version"
kill "$hung_pid" 2>/dev/null
exec {hung}<&-

echo "# over https (RBAC: a bearer token)"
KUBESIM_NO_TRAP=1 kubesim_start --rbac || { echo "not ok - kubesim starts with TLS"; exit 1; }
cases tls
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=other-ca \
	-keyout "$T/other.key" -out "$T/other.crt" 2>/dev/null
refused "another CA's certificate: refused (exit 35)" "unable to get local issuer certificate" 35 \
	--cacert "$T/other.crt" "$KUBESIM_URL/version"
refused "a name the certificate does not carry (localhost for IP:127.0.0.1): refused" "hostname mismatch" 35 \
	--cacert "$KUBESIM_CA" "${KUBESIM_URL/127.0.0.1/localhost}/version"
out=$("$KREQ" --cacert "$KUBESIM_CA" "$KUBESIM_URL/api/v1/nodes" 2>"$T/code")
checkf "without \$KREQ_BEARER no token is sent: 403 to system:anonymous" \
	eval '[ "$(cat "$T/code")" = 403 ] && jq -e ".message | contains(\"system:anonymous\")" <<<"$out"'
kubesim_stop
rm -rf "$T"
exit $FAILED
