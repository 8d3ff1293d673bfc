#!/bin/bash
# The supervisor as PID 1 (a container's init): run in a new pid namespace
# (unshare --pid --fork), it reaps every child, also the orphaned grandchildren
# of its services that are no service's main process, leaves no zombie, exits 0
# on a clean SIGTERM stop and 128+15 when a service had to be SIGKILLed.
# Needs CAP_SYS_ADMIN for the namespace: without it the script says skip.
set -u
BIN=${GPUKMM_BIN:-build/bin}
TBIN=${GPUKMM_TBIN:-build/tests/bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/gk-pid1.XXXXXX") || exit 1
chmod 700 "$T"
UPID=
cleanup() {
	[ -n "$UPID" ] && kill -KILL "$UPID" 2>/dev/null && wait "$UPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; [ -n "${2:-}" ] && tail -n 30 "$2" | sed 's/^/#   /'; }
. "${GPUKMM_SRC:-.}/tests/lib/proc.sh" # wait_until SECONDS CMD...
if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
	echo "skip - no pid namespace here (unshare needs CAP_SYS_ADMIN): PID 1 behaviour not checked"
	exit 0
fi
SLOW=1; ldd "$BIN/gpukmm" 2>/dev/null | grep -q libasan && SLOW=3

# the supervisor's pid as seen from here: the one child of unshare
sup_pid() { pgrep -P "$UPID" -x gpukmm; }
# children of pid $1 in state Z
zombies_of() { cat /proc/[0-9]*/stat 2>/dev/null | awk -v p="$1" '{ sub(/^.*\) /, ""); if ($1 == "Z" && $2 == p) n++ } END { print n + 0 }'; }
ready() { "$BIN/gpukmmctl" status --runtime-dir "$T/run-$1" --timeout-ms 1000 2>/dev/null | grep -q "supervisor: ready"; }

start() { # NAME CONFIG: the supervisor as PID 1 of a new pid namespace
	echo "$2" >"$T/$1.json"
	unshare --pid --fork --mount-proc --kill-child "$BIN/gpukmm" --config "$T/$1.json" \
		--runtime-dir "$T/run-$1" --log-level debug >"$T/$1.log" 2>&1 &
	UPID=$!
}

svc() { # NAME MODE [extra args json]
	echo "{\"name\":\"$1\",\"binary\":\"$TBIN/sup_testsvc\",\"args\":[\"--mode\",\"$2\",\"--trace\",\"$T/$1.trace\"${3:-}]"
}

# 1. three services that each leave an orphaned grandchild (living 200 ms)
#    behind and exit 5 (temporary: not restarted), next to a well-behaved one
G=
for i in 1 2 3; do
	G="$G,$(svc g$i grandchild ',"--after-ms","200"'),\"restart\":\"temporary\",\"ready\":{\"required\":false}}"
done
start a "{\"services\":[$(svc ok ready)}$G]}"
if wait_until $((10 * SLOW)) sup_pid >/dev/null; then
	SP=$(sup_pid)
	ns=$(awk '/^NSpid:/ { print $NF }' "/proc/$SP/status")
	[ "$ns" = 1 ] && ok "the supervisor is PID 1 in its namespace" || nok "the supervisor is PID 1 (NSpid ends in $ns)"
else
	nok "the supervisor started in a pid namespace" "$T/a.log"
	exit 0
fi
orphans() { [ "$(cat "$T"/g?.trace 2>/dev/null | grep -c '^orphan-exit ')" -ge "$1" ]; }
if wait_until $((20 * SLOW)) orphans 3; then
	ok "three grandchildren were orphaned and ran to their end"
else
	nok "grandchildren orphaned and ended" "$T/a.log"
fi
reaped() { [ "$(grep -c "not a service's main process" "$T/a.log")" -ge "$1" ]; }
wait_until $((5 * SLOW)) reaped 3 && ok "PID 1 reaped the orphans (no service's main process)" ||
	nok "PID 1 reaped the orphans" "$T/a.log"
no_zombies() { [ "$(zombies_of "$SP")" = 0 ]; }
wait_until $((5 * SLOW)) no_zombies && ok "no zombie under PID 1" || nok "no zombie under PID 1 ($(zombies_of "$SP"))"
wait_until $((10 * SLOW)) ready a && ok "the other service stays ready" || nok "the other service stays ready" "$T/a.log"
kill -TERM "$SP"
wait "$UPID"
rc=$?
UPID=
[ "$rc" = 0 ] && ok "SIGTERM to PID 1: clean stop, exit 0" || nok "SIGTERM to PID 1: exit 0 (got $rc)" "$T/a.log"

# 2. a service that ignores SIGTERM: SIGKILLed after its stop timeout, PID 1 exits 128+15
start b "{\"services\":[$(svc stubborn ignore-term),\"stop\":{\"timeout_ms\":300}}]}"
if wait_until $((10 * SLOW)) ready b; then
	SP=$(sup_pid)
	kill -TERM "$SP"
	wait "$UPID"
	rc=$?
	UPID=
	[ "$rc" = 143 ] && ok "unclean stop by SIGTERM as PID 1: exit 143" || nok "unclean stop: exit 143 (got $rc)" "$T/b.log"
	grep -q "did not stop within 300 ms: SIGKILL" "$T/b.log" && ok "the stubborn service got SIGKILL" ||
		nok "the stubborn service got SIGKILL" "$T/b.log"
else
	nok "supervisor b ready" "$T/b.log"
fi
