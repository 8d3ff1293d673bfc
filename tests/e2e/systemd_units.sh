#!/bin/bash
# systemd/*.service: `systemd-analyze verify` passes, `systemd-analyze security`
# rates each unit low (exposure <= 2.0), the directives the design requires are
# set, TimeoutStopSec covers the services' stop timeouts, and the supervisor runs
# in the environment such a unit gives it: ExecStart as written (%d = credentials
# dir), RUNTIME_DIRECTORY (0700), UMask 0077, NOTIFY_SOCKET + WATCHDOG_USEC +
# WATCHDOG_PID, an emptied environment. The supervisor's own sd_notify protocol
# tests live in tests/ipc/supervisor_ops_test.c; this one is about the units.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
BIN=$(cd "${GPUKMM_BIN:-build/bin}" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/sdunits.XXXXXX") || exit 1
LPID=; SPID=
cleanup() {
	[ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
	[ -n "$LPID" ] && kill "$LPID" 2>/dev/null && wait "$LPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; [ -n "${2:-}" ] && tail -n 20 "$2" | sed 's/^/#   /'; }
wait_for() { # deadline_s cmd...: poll, never sleep for synchronisation
	local end=$((SECONDS + $1)); shift
	until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.05; done
}

# stop timeout of a default service (supervisor/conf.c) and each profile's size
STOP_S=5
declare -A NSVC=([gpukmm.service]=5 [gpukmm-node.service]=2)

for u in gpukmm.service gpukmm-node.service; do
	f=systemd/$u
	[ -f "$f" ] && ok "$u exists" || { nok "$u exists"; continue; }
	mkdir -p "$T/v"
	sed "s#/usr/bin/gpukmm#$BIN/gpukmm#" "$f" >"$T/v/$u"
	if command -v systemd-analyze >/dev/null 2>&1; then
		if systemd-analyze verify "$T/v/$u" >"$T/verify.log" 2>&1 && ! [ -s "$T/verify.log" ]; then
			ok "$u: systemd-analyze verify is clean"
		else
			nok "$u: systemd-analyze verify is clean" "$T/verify.log"
		fi
		systemd-analyze security --offline=yes "$T/v/$u" >"$T/sec.log" 2>&1
		score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$T/sec.log")
		echo "# $u: systemd-analyze security exposure ${score:-?}"
		awk -v s="${score:-99}" 'BEGIN{exit !(s <= 2.0)}' && ok "$u: exposure $score <= 2.0" ||
			nok "$u: exposure ${score:-?} <= 2.0" "$T/sec.log"
	else
		echo "# systemd-analyze not installed: verify/security skipped"
	fi
	for d in Type=notify NotifyAccess=main Restart=on-failure StartLimitIntervalSec=0 KillMode=mixed \
		RuntimeDirectory=gpukmm RuntimeDirectoryMode=0700 DynamicUser=yes UMask=0077 NoNewPrivileges=yes \
		ProtectSystem=strict ProtectHome=yes PrivateTmp=yes PrivateDevices=yes CapabilityBoundingSet= \
		SystemCallFilter=@system-service ProtectKernelTunables=yes LockPersonality=yes \
		MemoryDenyWriteExecute=yes RestrictNamespaces=yes ProtectClock=yes ProtectHostname=yes \
		"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"; do
		grep -qx "$d" "$f" && ok "$u: $d" || nok "$u: $d"
	done
	grep -q '^WatchdogSec=[1-9]' "$f" && ok "$u: WatchdogSec set" || nok "$u: WatchdogSec set"
	stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' "$f")
	[ -n "$stop" ] && [ "$stop" -gt $((NSVC[$u] * STOP_S)) ] &&
		ok "$u: TimeoutStopSec ${stop}s > ${NSVC[$u]} services x ${STOP_S}s" ||
		nok "$u: TimeoutStopSec (${stop:-unset}) > ${NSVC[$u]} x ${STOP_S}s"
	grep -q '^ProtectKernelModules=yes' "$f" || [ "$u" = gpukmm-node.service ] &&
		ok "$u: ProtectKernelModules unless it must read /lib/modules" || nok "$u: ProtectKernelModules"
	grep -q '^SystemCallFilter=~.*@module' "$f" && ok "$u: module syscalls filtered" ||
		nok "$u: module syscalls filtered"
done

# --- the supervisor in the controller unit's environment --------------------------
# a datagram listener standing in for systemd's notify socket
python3 - "$T/notify" "$T/notify.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        for line in s.recv(4096).decode(errors="replace").split("\n"):
            if line:
                out.write(line + "\n")
PY
LPID=$!
wait_for 10 test -S "$T/notify" && ok "notify listener up" || nok "notify listener up"

mkdir -m 0700 -p "$T/run/gpukmm" "$T/creds"
printf 'apiVersion: v1\nkind: Config\nclusters: []\n' >"$T/creds/kubeconfig"
chmod 0400 "$T/creds/kubeconfig"
# the profile's services are replaced by gpukmm-echo (gater/statusd may not be
# built): the unit's flags, environment and lifecycle are what is tested here
cat >"$T/conf.json" <<'J'
{"services": [
  {"name": "echo", "args": ["--listen", "ipc://{runtime_dir}/{name}.sock"], "credentials": true},
  {"name": "echo2", "binary": "gpukmm-echo", "args": ["--listen", "ipc://{runtime_dir}/{name}.sock"]}
]}
J
execstart=$(sed -n 's/^ExecStart=//p' systemd/gpukmm.service)
# shellcheck disable=SC2206
argv=(${execstart//%d/$T/creds})
argv[0]=$BIN/gpukmm
for i in "${!argv[@]}"; do [ "${argv[$i]}" = 127.0.0.1:8081 ] && argv[$i]=127.0.0.1:0; done
(
	umask 0077
	cd / || exit 1
	exec env -i PATH=/usr/bin:/bin LANG=C.UTF-8 RUNTIME_DIRECTORY="$T/run/gpukmm" \
		CREDENTIALS_DIRECTORY="$T/creds" NOTIFY_SOCKET="$T/notify" WATCHDOG_USEC=400000 \
		sh -c 'WATCHDOG_PID=$$ exec "$@"' sh "${argv[@]}" --config "$T/conf.json"
) >"$T/sup.log" 2>&1 &
SPID=$!
if wait_for 20 grep -qx READY=1 "$T/notify.log"; then ok "READY=1 once the services are ready"; else
	nok "READY=1 once the services are ready" "$T/sup.log"; fi
two_pings() { [ "$(grep -cx WATCHDOG=1 "$T/notify.log")" -ge 2 ]; }
if wait_for 10 two_pings; then
	ok "WATCHDOG=1 keeps coming (WATCHDOG_USEC/2)"; else nok "WATCHDOG=1 keeps coming" "$T/notify.log"; fi
socks=$(find "$T/run/gpukmm" -type s | wc -l)
[ "$socks" -ge 2 ] && ok "sockets are in \$RUNTIME_DIRECTORY ($socks)" || nok "sockets are in \$RUNTIME_DIRECTORY" "$T/sup.log"
bad=$(find "$T/run/gpukmm" -type s ! -perm 0600 | head -3)
[ -z "$bad" ] && ok "every socket is 0600 under UMask=0077" || nok "every socket is 0600: $bad"
[ "$(stat -c %a "$T/run/gpukmm")" = 700 ] && ok "runtime dir stays 0700" || nok "runtime dir stays 0700"
grep -q "$T/creds/kubeconfig" "$T/sup.log" && nok "no credential path in the log" || ok "the supervisor log does not print the credential path"
kill -TERM "$SPID"
end=$((SECONDS + 45)) # TimeoutStopSec
while kill -0 "$SPID" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
if kill -0 "$SPID" 2>/dev/null; then nok "stops within TimeoutStopSec"; else
	wait "$SPID"; rc=$?; SPID=
	[ $rc -eq 0 ] && ok "SIGTERM: clean exit 0 within TimeoutStopSec" || nok "SIGTERM: exit 0 (got $rc)" "$T/sup.log"
fi
grep -qx STOPPING=1 "$T/notify.log" && ok "STOPPING=1 sent on SIGTERM" || nok "STOPPING=1 sent on SIGTERM" "$T/notify.log"
