# Controller profiles for end-to-end tests: `gpukmm --profile controller` (watcher,
# modmgr, gater, opmgr and upgrader when built (CTRL_NO_OPMGR=1 / CTRL_NO_UPGRADER=1: without
# them; CTRL_UPGRADER_ARGS: its arguments, a JSON array), statusd; no webhook) against kubesim, one or more at a
# time, leader-elected on the Lease gpukmm-controller. Sources tests/lib/kubesim.sh;
# needs $D (a private temp dir with $D/kubeconfig) and $NS.
#
#   ctrl_start NAME [nolease [LOG_LEVEL]]   start controller NAME (runtime dir $D/run-NAME,
#                               log $D/controller-NAME.log); each start gets a new
#                               identity ctrl-NAME-<n> (like a new pod), so a restarted
#                               controller does not take its own old Lease back at
#                               once; "nolease": no leader election (always writes)
#   ctrl_ready NAME             running and every service Ready (gpukmmctl status)
#   ctrl_stop NAME              SIGTERM, SIGKILL after 30 s; STOP_RC = its exit code
#   holder / leader / has_leader   the Lease's holderIdentity / the NAME holding it
#   ctrl_cluster                the operator namespace, the ClusterPolicy, NodeReportRequest and KMM CRDs (established),
#                               the shipped RBAC and the kubeconfigs (kubesim_kubeconfigs $D $NS),
#                               the namespace "user" ($D/setup.log); 1 when the RBAC part failed
#   sup_child_pids DIR...       the services' pids of the supervisors with those runtime dirs
#   sup_kill9 PID DIR           kill -9 a supervisor like its node dying; 1 if its children
#                               (PR_SET_PDEATHSIG) do not all exit within 20 s
#   (and stop_pid, wait_until from tests/lib/proc.sh)
# SUP[NAME] = supervisor pid, GEN[NAME] = starts so far. CTRL_GRACE_MS: statusd's
# grace period (default 2000). CTRL_WATCHER_ARGS: more watcher flags (JSON strings,
# comma-separated: '"--watch-timeout", "2"'); unset, discovery runs every second and an
# absent API is believed gone after 3 reads over 3 s (defaults 10 s and 20 s: until then
# opmgr and modmgr hold any deletion that depends on it, e.g. a policy deleted in the
# first 20 s waits for monitoring.coreos.com; the defaults are tested by watcher_logic_test
# and chaos_guard.sh, which sets its own).
declare -A SUP=() GEN=()
. "${GPUKMM_SRC:-.}/tests/lib/kubesim.sh"
. "$GPUKMM_SRC/tests/lib/proc.sh"
ctrl_config() { # NAME IDENTITY_OR_EMPTY(no leader election)
	local extra=${CTRL_WATCHER_ARGS-'"--discovery-interval", "1", "--discovery-confirm", "3"'} le
	le="\"args\": [$extra]"
	[ -n "$2" ] && le="\"args\": [\"--leader-elect\", \"--identity\", \"$2\", \"--lease-duration\", \"4\", \"--renew-deadline\", \"3\", \"--retry-period\", \"1\"${extra:+, $extra}]"
	local svcs="{\"name\": \"watcher\", \"credentials\": true, $le},
 {\"name\": \"modmgr\", \"credentials\": true},"
	[ -x "$GPUKMM_BIN/gpukmm-gater" ] && svcs="$svcs {\"name\": \"gater\", \"credentials\": true},"
	[ -x "$GPUKMM_BIN/gpukmm-opmgr" ] && [ -z "${CTRL_NO_OPMGR:-}" ] && svcs="$svcs {\"name\": \"opmgr\", \"credentials\": true},"
	[ -x "$GPUKMM_BIN/gpukmm-upgrader" ] && [ -z "${CTRL_NO_UPGRADER:-}" ] && svcs="$svcs {\"name\": \"upgrader\", \"credentials\": true${CTRL_UPGRADER_ARGS:+, \"args\": $CTRL_UPGRADER_ARGS}},"
	svcs="$svcs {\"name\": \"statusd\", \"credentials\": true, \"args\": [\"--grace-ms\", \"${CTRL_GRACE_MS:-2000}\"]}"
	printf '{"intensity": {"max_restarts": 255, "window_ms": 1000}, "services": [%s]}\n' "$svcs" |
		jq '.services |= map(. + {"backoff": {"initial_ms": 100, "max_ms": 2000}})' >"$D/ctrl-$1.json"
}
ctrl_start() { # NAME [nolease [LOG_LEVEL]]
	local c=$1 lvl=${3:-${GPUKMM_LOG_LEVEL:-warn}}
	GEN[$c]=$((${GEN[$c]:-0} + 1))
	ctrl_config "$c" "$([ -z "${2:-}" ] && echo "ctrl-$c-${GEN[$c]}")"
	OPERATOR_NAMESPACE=$NS GPUKMM_LOG_LEVEL=$lvl "$GPUKMM_BIN/gpukmm" --profile controller \
		--config "$D/ctrl-$c.json" --runtime-dir "$D/run-$c" --kubeconfig "$D/kubeconfig" >>"$D/controller-$c.log" 2>&1 &
	SUP[$c]=$!
}
ctrl_ready() { kill -0 "${SUP[$1]}" 2>/dev/null && "$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$D/run-$1" --timeout-ms 1000 >/dev/null 2>&1; }
ctrl_stop() { stop_pid "${SUP[$1]:-}"; unset "SUP[$1]"; }
holder() { kraw GET "/apis/coordination.k8s.io/v1/namespaces/$NS/leases/gpukmm-controller" | jq -r '.spec.holderIdentity // empty' 2>/dev/null; }
leader() { # the controller whose current identity holds the Lease (empty: none)
	local h c
	h=$(holder)
	for c in "${!SUP[@]}"; do [ "$h" = "ctrl-$c-${GEN[$c]}" ] && echo "$c"; done
}
has_leader() { [ -n "$(leader)" ]; }
ctrl_cluster() {
	k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml \
		-f deploy/crd/gpukmm.io_nodereportrequests.yaml -f tests/fixtures/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml >"$D/setup.log" 2>&1
	k wait --for condition=established --timeout=10s crd/clusterpolicies.intel.com crd/nodereportrequests.gpukmm.io \
		crd/modules.kmm.sigs.x-k8s.io >>"$D/setup.log" 2>&1
	kubesim_kubeconfigs "$D" "$NS" || return 1
	kraw POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"user"}}' >/dev/null
}
sup_child_pids() {
	local d
	for d in "$@"; do
		"$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$d" --json --timeout-ms 1000 2>/dev/null |
			jq -r '.. | objects | select(has("pid")) | .pid | select(. > 0)' 2>/dev/null
	done
}
none_alive() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
sup_kill9() {
	local kids
	kids=$(sup_child_pids "$2")
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	wait_until 20 none_alive $kids
}
