# Shell helpers for the modmgr end-to-end tests (sources tests/lib/kubesim.sh and proc.sh).
#
#   mm_setup [kubesim flags...]   kubesim + CRDs (ClusterPolicy; KMM unless MM_NO_KMM=1),
#                                 the operator namespace, a kubeconfig, fake statusd,
#                                 gpukmm-watcher, gpukmm-modmgr (not these two when
#                                 MM_NO_START=1); EXIT trap cleans up.
#                                 Unless MM_RBAC=0, kubesim enforces RBAC and the
#                                 shipped deploy/rbac is applied: $MM_DIR/kubeconfig
#                                 holds a token of ServiceAccount gpukmm-controller
#                                 (the controller services), $MM_DIR/node-kubeconfig
#                                 one of gpukmm-node (statusd --mode node),
#                                 $MM_DIR/kmm-kubeconfig the admin's (fake-kmm: KMM).
#   mm_start_modmgr / mm_stop_modmgr [SIG]   (re)start or stop the manager only
#   wait_for DESC SECONDS CMD...  poll CMD until it succeeds (prints "not ok" on timeout)
#   writes                        kubesim write requests so far
#   module_json / cp_json         the Module gpu-gpu / ClusterPolicy gpu as JSON (or "")
#   last_report                   the last StatusReport line of policy gpu
# Everything runs in $MM_DIR (mktemp -d); every process started here is stopped
# by mm_teardown (the EXIT trap), SIGKILL after a grace period.
# (and stop_var, stop_pid, wait_until, san_check, log_tails from tests/lib/proc.sh)

. "${GPUKMM_SRC:-.}/tests/lib/kubesim.sh"
. "$GPUKMM_SRC/tests/lib/proc.sh"
MM_NS=${MM_NS:-intel-gpu-base-operator}
MM_FAILED=0

ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; MM_FAILED=1; }
check() { # check NAME CMD...
	local name=$1; shift
	if "$@"; then ok "$name"; else notok "$name"; fi
}

# wait_for DESC TIMEOUT_S CMD...: polls with a deadline; 0 when CMD succeeded.
wait_for() {
	local desc=$1 t=$2; shift 2
	local deadline=$((SECONDS + t)) t0
	while [ $SECONDS -lt $deadline ]; do
		t0=$EPOCHREALTIME
		"$@" >/dev/null 2>&1 && return 0
		poll_nap 50 "$t0"
	done
	echo "# timed out after ${t}s waiting for: $desc" >&2
	return 1
}

mm_kubeconfig() { kubesim_kubeconfigs "$MM_DIR" "$MM_NS"; }

# Stops modmgr, the watcher and the fake statusd (SIGTERM, SIGKILL after 10 s) and
# checks how each one ended: anything but exit 0 after SIGTERM (a crash, a leak
# report under the sanitizers, a hang killed by SIGKILL) fails the test with a
# "not ok" line naming the process, and its log is shown.
mm_teardown() {
	local p i rc name
	local -A who=()
	[ -n "${MM_MODMGR_PID:-}" ] && who[$MM_MODMGR_PID]=gpukmm-modmgr
	[ -n "${MM_WATCHER_PID:-}" ] && who[$MM_WATCHER_PID]=gpukmm-watcher
	[ -n "${MM_STATUSD_PID:-}" ] && who[$MM_STATUSD_PID]=fake_statusd
	[ -n "${GT_GATER_PID:-}" ] && who[$GT_GATER_PID]=gpukmm-gater # tests/lib/gater.sh
	[ -n "${OP_PID:-}" ] && who[$OP_PID]=gpukmm-opmgr             # tests/lib/opmgr.sh
	for p in "${!who[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${!who[@]}"; do
		name=${who[$p]}
		for i in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; nap 0.05; done
		if kill -0 "$p" 2>/dev/null; then
			kill -KILL "$p" 2>/dev/null
			wait "$p" 2>/dev/null
			notok "$name (pid $p) exits on SIGTERM within 10 s (SIGKILLed)"
			continue
		fi
		wait "$p" 2>/dev/null
		rc=$?
		# 127: not our child any more (already reaped by the test): nothing to judge
		case $rc in
		0 | 127) ;;
		*) notok "$name (pid $p) exits 0 on SIGTERM (exit $rc$([ "$rc" -gt 128 ] && echo ", signal $((rc - 128))"))" ;;
		esac
	done
	MM_MODMGR_PID= MM_WATCHER_PID= MM_STATUSD_PID= GT_GATER_PID= OP_PID=
	mm_rbac_check
	if [ -n "${MM_DIR:-}" ]; then
		san_check "$MM_DIR"/*.log || MM_FAILED=1
		[ "$MM_FAILED" = 0 ] || log_tails 40 "$MM_DIR"/*.log
	fi
	kubesim_stop
	[ -n "${MM_DIR:-}" ] && rm -rf "$MM_DIR"
}

# Under RBAC: no API call of our ServiceAccounts was refused, unless the script refused
# some on purpose and said which with MM_DENIALS_EXPECTED (a regex of the denials).
mm_rbac_check() { kubesim_rbac_verdict "$MM_NS" "${MM_DENIALS_EXPECTED:-}" || MM_FAILED=1; }

mm_start_statusd() {
	"$GPUKMM_TBIN/fake_statusd" --listen "ipc://$MM_DIR/statusd.sock" --out "$MM_DIR/reports" \
		${MM_STATUSD_FLAGS:-} >>"$MM_DIR/statusd.log" 2>&1 &
	MM_STATUSD_PID=$!
}

mm_start_watcher() {
	"$GPUKMM_BIN/gpukmm-watcher" --kubeconfig "$MM_DIR/kubeconfig" --namespace "$MM_NS" \
		--listen "ipc://$MM_DIR/watcher.sock" --events "ipc://$MM_DIR/events.sock" \
		${MM_WATCHER_FLAGS:-} >>"$MM_DIR/watcher.log" 2>&1 &
	MM_WATCHER_PID=$!
}

mm_start_modmgr() {
	"$GPUKMM_BIN/gpukmm-modmgr" --kubeconfig "$MM_DIR/kubeconfig" --namespace "$MM_NS" \
		--watcher "ipc://$MM_DIR/watcher.sock" --events "ipc://$MM_DIR/events.sock" \
		--statusd "ipc://$MM_DIR/statusd.sock" ${MM_MODMGR_FLAGS:-} >>"$MM_DIR/modmgr.log" 2>&1 &
	MM_MODMGR_PID=$!
}

mm_stop_modmgr() { stop_var MM_MODMGR_PID "${1:-TERM}"; }

mm_install_kmm() {
	k apply -f "$GPUKMM_SRC/tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml" >/dev/null
}

mm_setup() {
	MM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/modmgr-e2e.XXXXXX") || exit 1
	chmod 700 "$MM_DIR"
	KUBESIM_NO_TRAP=1 KUBESIM_RBAC=${MM_RBAC:-1} kubesim_start "$@" || { echo "not ok - kubesim starts"; exit 1; }
	trap mm_teardown EXIT
	k apply -f "$GPUKMM_SRC/deploy/crd/intel.com_clusterpolicies.yaml" -f "$GPUKMM_SRC/deploy/crd/gpukmm.io_nodereportrequests.yaml" >/dev/null || return 1
	[ -n "${MM_NO_KMM:-}" ] || mm_install_kmm || return 1
	mk_namespace "$MM_NS" || return 1
	mm_kubeconfig || return 1
	: >"$MM_DIR/reports"
	mm_start_statusd
	[ -n "${MM_NO_START:-}" ] && return 0
	mm_start_watcher
	mm_start_modmgr
}

# (kubectl create sends protobuf for built-in kinds: create them as JSON)
mk_namespace() {
	kraw POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$1\"}}" >/dev/null
}
writes() { kraw GET /kubesim/stats | jq -r '.writes'; }
module_writes() { kraw GET /kubesim/stats | jq -r '.writesByResource.modules // 0'; }
module_json() { kraw GET "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$MM_NS/modules/${1:-gpu}-gpu"; }
module_exists() { [ "$(module_json "$@" | jq -r '.kind // empty')" = Module ]; }
module_gone() { [ "$(module_json "$@" | jq -r '.kind // empty')" != Module ]; }
module_field() { module_json "${2:-gpu}" | jq -r "$1"; }
cp_json() { kraw GET "/apis/intel.com/v1alpha1/clusterpolicies/${1:-gpu}"; }
cp_gone() { [ "$(cp_json "$@" | jq -r '.kind // empty')" != ClusterPolicy ]; }
last_report() { grep "\"policy\":\"${1:-gpu}\"" "$MM_DIR/reports" | tail -1; }
report_count() { grep -c "\"policy\":\"${1:-gpu}\"" "$MM_DIR/reports"; }
report_has() { last_report "${2:-gpu}" | jq -e "$1" >/dev/null; }
# set the Module's status counts through the status subresource (what KMM does)
module_set_counts() { # AVAIL DESIRED [POLICY]
	kraw PATCH "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$MM_NS/modules/${3:-gpu}-gpu/status" \
		"{\"status\":{\"moduleLoader\":{\"availableNumber\":$1,\"desiredNumber\":$2,\"nodesMatchingSelectorNumber\":$2}}}" \
		application/merge-patch+json >/dev/null
}
cp_patch() { # JSON merge patch of ClusterPolicy gpu (or $2)
	kraw PATCH "/apis/intel.com/v1alpha1/clusterpolicies/${2:-gpu}" "$1" application/merge-patch+json >/dev/null
}
apply_cp() { # NAME MODE [KERNELMODULE_JSON]
	local km=${3:-}
	local body="{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"$1\"},\"spec\":{\"resourceRegistration\":\"$2\"${km:+,\"kernelModule\":$km}}}"
	kraw POST /apis/intel.com/v1alpha1/clusterpolicies "$body" >/dev/null
}
KM_BASIC='{"moduleName":"xe","kernelMappings":[{"regexp":"^.+$","containerImage":"registry.example.com/xe-driver:1.0"}]}'
module_jq() { module_json "${2:-gpu}" | jq -e "$1" >/dev/null; }
cp_jq() { cp_json "${2:-gpu}" | jq -e "$1" >/dev/null; }
cp_has_finalizer() { cp_jq '(.metadata.finalizers // []) | index("gpukmm.io/module-protection") != null' "$@"; }
cp_lacks_finalizer() { cp_jq '(.metadata.finalizers // []) | index("gpukmm.io/module-protection") == null' "$@"; }
event_seen() { kraw GET /api/v1/namespaces/default/events | jq -e ".items[] | select(.reason==\"$1\" and .involvedObject.name==\"${2:-gpu}\")" >/dev/null; }
reports_more_than() { [ "$(report_count "${2:-gpu}")" -gt "$1" ]; }
