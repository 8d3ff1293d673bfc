#!/bin/bash
# systemd/*.service: `systemd-analyze verify` passes, `systemd-analyze security`
# rates each unit low (exposure <= 2.0), the directives the design requires are
# set, TimeoutStopSec covers the services' stop timeouts, and the REAL controller
# and node profiles run as the units start them, against kubesim.
#
# systemd itself does not run here (no systemd PID 1, no user manager: `systemctl
# --user` has no bus), so the test gives ExecStart what systemd would give it:
# an emptied environment, the unit's Environment= lines, LoadCredential= files in
# $CREDENTIALS_DIRECTORY (%d), RuntimeDirectory= as $RUNTIME_DIRECTORY (0700),
# UMask=0077, NOTIFY_SOCKET (a datagram socket the test reads) with WATCHDOG_USEC
# and WATCHDOG_PID; it runs as root, not as a DynamicUser. Checked: READY=1 once
# the profile's services are ready, WATCHDOG=1, STOPPING=1 and exit 0 on SIGTERM
# within TimeoutStopSec; the controller without a webhook certificate runs 6/6,
# says so in /readyz and does its job (a ClusterPolicy gets its Module); with
# the webhook drop-in (systemd/gpukmm.service.d/webhook.conf) it runs 7/7; a
# missing credential is exit 2 at once, which RestartPreventExitStatus=2 keeps
# systemd from restarting; the node profile hands its report in (a NodeReportRequest
# with its Node-bound token credential) and the controller unit writes it to the Node.
# The supervisor's own sd_notify protocol tests live in tests/ipc/supervisor_ops_test.c.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
BIN=$(cd "${GPUKMM_BIN:-build/bin}" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/sdunits.XXXXXX") || exit 1
LPID=; SPID=
cleanup() {
	[ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
	[ -n "$LPID" ] && kill "$LPID" 2>/dev/null && wait "$LPID" 2>/dev/null
	kubesim_stop
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
declare -A NSVC=([gpukmm.service]=6 [gpukmm-node.service]=2)

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
	for d in Type=notify NotifyAccess=main Restart=on-failure RestartPreventExitStatus=2 StartLimitIntervalSec=0 KillMode=mixed \
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

# --- the real profiles, started as the units start them -----------------------------
KUBESIM_NO_TRAP=1 kubesim_start || { nok "kubesim starts"; exit 1; }
k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml \
	-f deploy/crd/gpukmm.io_nodereportrequests.yaml \
	-f tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml >"$T/apply.log" 2>&1 &&
	k wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com crd/modules.kmm.sigs.x-k8s.io \
	crd/nodereportrequests.gpukmm.io >>"$T/apply.log" 2>&1 && ok "kubesim with the CRDs" || nok "kubesim with the CRDs" "$T/apply.log"

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

# unit_env FILE...: the Environment= values of a unit and its drop-ins, %d expanded
unit_env() {
	sed -n 's/^Environment=//p' "$@" | tr ' ' '\n' | sed "s#%d#$T/creds#g"
}
# start_unit UNIT [DROPIN...]: ExecStart as written, in the environment systemd gives it
# (UNIT_ENV: more NAME=VALUE words, as a further drop-in would set them)
start_unit() {
	local u=$1 execstart i
	shift
	execstart=$(sed -n 's/^ExecStart=//p' "systemd/$u")
	# shellcheck disable=SC2206
	local argv=(${execstart//%d/$T/creds})
	argv[0]=$BIN/gpukmm
	for i in "${!argv[@]}"; do case ${argv[$i]} in 127.0.0.1:80[0-9][0-9]) argv[$i]=127.0.0.1:0 ;; esac; done
	local envs
	mapfile -t envs < <(unit_env "systemd/$u" "$@")
	: >"$T/notify.log"
	rm -rf "${T:?}/run" && mkdir -m 0700 -p "$T/run/gpukmm"
	(
		umask 0077
		cd / || exit 1
		# the sanitizer pass's options are the harness's, not the unit's: without them
		# a sanitized service ran with LSan's defaults, without tests/lsan.supp, and
		# nng's own rare leak at exit (a bus frame in a closing pipe) failed its stop
		local v san=()
		for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS; do [ -n "${!v:-}" ] && san+=("$v=${!v}"); done
		# shellcheck disable=SC2086
		exec env -i PATH=/usr/bin:/bin LANG=C.UTF-8 RUNTIME_DIRECTORY="$T/run/gpukmm" \
			CREDENTIALS_DIRECTORY="$T/creds" NOTIFY_SOCKET="$T/notify" WATCHDOG_USEC=400000 \
			"${san[@]}" "${envs[@]}" ${UNIT_ENV:-} sh -c 'WATCHDOG_PID=$$ exec "$@"' sh "${argv[@]}"
	) >"$T/sup.log" 2>&1 &
	SPID=$!
}
stop_unit() { # NAME: SIGTERM, exit 0 within TimeoutStopSec, STOPPING=1
	kill -TERM "$SPID"
	local end=$((SECONDS + 45)) rc
	while kill -0 "$SPID" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
	if kill -0 "$SPID" 2>/dev/null; then nok "$1: stops within TimeoutStopSec"; return; fi
	wait "$SPID"; rc=$?; SPID=
	[ $rc -eq 0 ] && ok "$1: SIGTERM: clean exit 0 within TimeoutStopSec" || nok "$1: SIGTERM: exit 0 (got $rc)" "$T/sup.log"
	grep -qx STOPPING=1 "$T/notify.log" && ok "$1: STOPPING=1 sent on SIGTERM" || nok "$1: STOPPING=1" "$T/notify.log"
}
readyz() { # the body of /readyz
	local port
	port=$(grep -o 'http: listening on 127.0.0.1:[0-9]*' "$T/sup.log" | head -1 | grep -o '[0-9]*$')
	curl -s "http://127.0.0.1:$port/readyz"
}
two_pings() { [ "$(grep -cx WATCHDOG=1 "$T/notify.log")" -ge 2 ]; }
ready_n() { grep -qx READY=1 "$T/notify.log" && grep -q "ready: $1 required services ready" "$T/sup.log"; }

mkdir -m 0700 -p "$T/creds"
kubesim_kubeconfig "$T/creds/kubeconfig"
chmod 0400 "$T/creds/kubeconfig"

# 1. gpukmm.service as shipped: no webhook certificate
start_unit gpukmm.service
if wait_for 60 ready_n 6/6; then ok "controller unit: READY=1 with 6/6 services (no webhook certificate)"; else
	nok "controller unit: READY=1 with 6/6 services (no webhook certificate)" "$T/sup.log"; fi
readyz >"$T/readyz" 2>&1
grep -q '^webhook: off: no serving certificate' "$T/readyz" && ok "controller unit: /readyz says the webhook is off" ||
	nok "controller unit: /readyz says the webhook is off" "$T/readyz"
if wait_for 10 two_pings; then
	ok "WATCHDOG=1 keeps coming (WATCHDOG_USEC/2)"; else nok "WATCHDOG=1 keeps coming" "$T/notify.log"; fi
socks=$(find "$T/run/gpukmm" -type s | wc -l)
[ "$socks" -ge 4 ] && ok "sockets are in \$RUNTIME_DIRECTORY ($socks)" || nok "sockets are in \$RUNTIME_DIRECTORY" "$T/sup.log"
bad=$(find "$T/run/gpukmm" -type s ! -perm 0600 | head -3)
[ -z "$bad" ] && ok "every socket is 0600 under UMask=0077" || nok "every socket is 0600: $bad"
[ "$(stat -c %a "$T/run/gpukmm")" = 700 ] && ok "runtime dir stays 0700" || nok "runtime dir stays 0700"
k apply -f deploy/examples/clusterpolicy-kmm.yaml >"$T/apply.log" 2>&1
wait_for 30 k -n intel-gpu-base-operator get module gpu-kmm-gpu >/dev/null 2>&1 &&
	ok "controller unit: a ClusterPolicy gets its KMM Module" ||
	nok "controller unit: a ClusterPolicy gets its KMM Module" "$T/sup.log"
grep -q "$T/creds/kubeconfig" "$T/sup.log" && nok "no credential path in the log" || ok "the supervisor log does not print the credential path"
grep -q 'restarting in' "$T/sup.log" && nok "controller unit: no service restarted" "$T/sup.log" || ok "controller unit: no service restarted"
stop_unit "controller unit"

# 2. with the webhook drop-in: certificate and key as credentials
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/creds/webhook-tls.key" -out "$T/creds/webhook-tls.crt" -days 1 \
	-subj /CN=gpukmm-webhook -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
UNIT_ENV=GPUKMM_WEBHOOK_LISTEN=127.0.0.1:0 start_unit gpukmm.service systemd/gpukmm.service.d/webhook.conf
if wait_for 60 ready_n 7/7; then ok "controller unit + webhook.conf: READY=1 with 7/7 services (webhook on HTTPS)"; else
	nok "controller unit + webhook.conf: READY=1 with 7/7 services" "$T/sup.log"; fi
stop_unit "controller unit + webhook.conf"

# 3. a configuration error: exit 2 at once, and the unit does not restart on 2
mv "$T/creds/webhook-tls.key" "$T/creds/gone.key"
UNIT_ENV=GPUKMM_WEBHOOK_LISTEN=127.0.0.1:0 start_unit gpukmm.service systemd/gpukmm.service.d/webhook.conf
wait "$SPID"; rc=$?; SPID=
[ $rc = 2 ] && grep -q "webhook-tls.key" "$T/sup.log" && ok "a missing credential: exit 2 naming it" ||
	nok "a missing credential: exit 2 naming it (got $rc)" "$T/sup.log"
grep -q 'started, pid' "$T/sup.log" && nok "nothing started" "$T/sup.log" || ok "nothing started"
grep -qx 'RestartPreventExitStatus=2' systemd/gpukmm.service && ok "... and exit 2 is not restarted by systemd" ||
	nok "RestartPreventExitStatus=2"

# 4. gpukmm-node.service: the real node profile (prober on this host's /sys) for Node sd-node,
# with its second credential as the unit's comment makes it: a token bound to the Node
NS=intel-gpu-base-operator
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"sd-node"}}' >/dev/null
k -n $NS create serviceaccount gpukmm-node >"$T/sa.log" 2>&1
(umask 0277 && k -n $NS create token gpukmm-node --audience gpukmm.io/node-report --bound-object-kind Node \
	--bound-object-name sd-node --duration 2h >"$T/creds/node-report-token" 2>>"$T/sa.log")
[ -s "$T/creds/node-report-token" ] && ok "node unit: the Node-bound report token credential" ||
	nok "node unit: the Node-bound report token credential" "$T/sa.log"
UNIT_ENV=NODE_NAME=sd-node start_unit gpukmm-node.service
if wait_for 60 ready_n 2/2; then ok "node unit: READY=1 with prober and statusd ready"; else
	nok "node unit: READY=1 with prober and statusd ready" "$T/sup.log"; fi
handed_in() { k -n $NS get nodereportrequest sd-node -o json | jq -e '.spec.token | length > 0'; }
wait_for 30 handed_in >/dev/null 2>&1 && ok "node unit: its report is handed in (NodeReportRequest sd-node, with the token)" ||
	nok "node unit: its report is handed in (NodeReportRequest sd-node)" "$T/sup.log"
stop_unit "node unit"

# 5. the controller unit applies the pending request: the Node carries its report
start_unit gpukmm.service
reported() { k get node sd-node -o json | jq -e '.metadata.annotations["gpukmm.io/node-report"] | length > 0'; }
wait_for 60 reported >/dev/null 2>&1 && ok "controller unit: the Node carries the node unit's report" ||
	nok "controller unit: the Node carries the node unit's report" "$T/sup.log"
applied() { k -n $NS get nodereportrequest sd-node 2>&1 | grep -q "NotFound"; }
wait_for 30 applied && ok "controller unit: the request is deleted once applied" ||
	nok "controller unit: the request is deleted once applied" "$T/sup.log"
stop_unit "controller unit (reports)"
