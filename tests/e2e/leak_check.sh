#!/bin/bash
# LeakSanitizer really guards the service processes that the e2e scripts start
# (the demo, chaos, statusd, modmgr… scripts run real supervisors and services):
# in the sanitizer pass, ASAN_OPTIONS from tests/run.sh turns detect_leaks on,
# the supervisor passes the environment to its services, a service that leaks
# exits non-zero at SIGTERM, the supervisor then exits non-zero (128+15) and the
# report reaches its log — which the e2e scripts check. A clean service gives
# exit 0 and no report. In the plain pass only the clean half runs.
set -u
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gk-leak.XXXXXX") || exit 1
chmod 700 "$TMP"
PID=
trap '[ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; }
SANBUILD=; ldd "$GPUKMM_BIN/gpukmm" 2>/dev/null | grep -q libasan && SANBUILD=1

run_sup() { # NAME [--leak]: supervisor with one leaky_svc, ready, SIGTERM; sets RC
	local args=""
	[ -n "${2:-}" ] && args="\"$2\""
	echo "{\"services\": [{\"name\": \"leaky\", \"binary\": \"$GPUKMM_TBIN/leaky_svc\", \"args\": [$args]}]}" >"$TMP/$1.json"
	"$GPUKMM_BIN/gpukmm" --config "$TMP/$1.json" --runtime-dir "$TMP/run-$1" >"$TMP/$1.log" 2>&1 &
	PID=$!
	local end=$((SECONDS + 30))
	until "$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$TMP/run-$1" --timeout-ms 1000 >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] && kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -TERM "$PID"
	wait "$PID"
	RC=$?
	PID=
}

run_sup clean
[ "$RC" = 0 ] && ok "a clean service: supervisor exits 0 on SIGTERM" || { nok "clean service: supervisor exit $RC"; sed 's/^/#   /' "$TMP/clean.log"; }
! grep -q LeakSanitizer "$TMP/clean.log" && ok "a clean service: no leak report" || nok "a clean service: leak report"

if [ -z "$SANBUILD" ]; then
	ok "plain build: the leaking half runs in the sanitizer pass"
	exit 0
fi
case ${ASAN_OPTIONS:-} in
*detect_leaks=1*) ok "ASAN_OPTIONS has detect_leaks=1 ($ASAN_OPTIONS)" ;;
*) nok "ASAN_OPTIONS lacks detect_leaks=1: '${ASAN_OPTIONS:-}'" ;;
esac
run_sup leaky --leak
[ "$RC" != 0 ] && ok "a leaking service: supervisor exits non-zero on SIGTERM ($RC)" || nok "a leaking service: supervisor exit 0"
grep -q 'leaky | .*ERROR: LeakSanitizer: detected memory leaks' "$TMP/leaky.log" &&
	ok "the leak report reaches the supervisor's log, prefixed with the service" ||
	{ nok "no leak report in the supervisor's log"; sed 's/^/#   /' "$TMP/leaky.log" | head -30; }
grep -q 'Sanitizer' "$TMP/leaky.log" && ok "the e2e scripts' grep for 'Sanitizer' would catch it" || nok "grep Sanitizer"
