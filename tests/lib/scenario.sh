# The frame of the scenario scripts (tests/e2e/scenarios.sh, secureboot.sh):
# controller profiles, node profiles and fake-kmm against kubesim, judged through
# kubectl and the API. Sources nodeprofile.sh and controller.sh. The functions use
# CP (the ClusterPolicy's name) and KEY (the KMM ready label) when called.
#
#   sc_init NAME             private temp dir $D (0700), kubesim under RBAC (HTTPS, admin
#                            token for k/kraw), the EXIT trap below; the script then
#                            calls kubesim_kubeconfigs "$D" "$NS" (the shipped RBAC,
#                            $D/kubeconfig, node-kubeconfig, kmm-kubeconfig)
#   ok / nok NAME            a TAP line (nok sets FAILED=1)
#   check NAME TIMEOUT_S CMD...   polls CMD with a deadline; the wait goes to the log
#   cpj / cp_is JQ           the ClusterPolicy's JSON / a jq test on it
#   node_is NODE JQ / loaded_on NODE / unloaded_on NODE
#   node NAME KERNEL         a GPU node (arch + NFD labels) with its kernel in status.nodeInfo
#   sc_kmm_cluster LOAD_MS UNLOAD_MS [FAKE-KMM FLAGS...]   the operator namespace, the CRDs
#                            (established), the shipped RBAC and the kubeconfigs, fake-kmm
#                            as KMM (those delays, log level info, judged at the end)
#                            registered with its webhook: its checks are TAP lines
#   FK_PID                   fake-kmm's pid once started: stopped at the end (judged
#                            with FK_CHECK=1)
# At exit: every controller and node profile stops (each judged), fake-kmm; no call of
# NS's ServiceAccounts may have been refused (RBAC); kubesim stops; every log is
# checked for sanitizer reports; on a failure the policy's status and
# the logs' tails; the temp dir goes; the script exits with FAILED.
. "${GPUKMM_SRC:-.}/tests/lib/nodeprofile.sh"
. "$GPUKMM_SRC/tests/lib/controller.sh"
FAILED=0 FK_PID=

ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; FAILED=1; }
check() {
	local n=$1 t=$2 t0=$SECONDS; shift 2
	if wait_until "$t" "$@" >/dev/null 2>&1; then ok "$n"; else nok "$n"; fi
	echo "#   (${SECONDS}s since start, waited $((SECONDS - t0))s)"
}

sc_cleanup() {
	local c
	for c in "${!SUP[@]}"; do
		ctrl_stop "$c"
		[ "$STOP_RC" = 0 ] && ok "controller $c stops cleanly on SIGTERM" || nok "controller $c stops cleanly on SIGTERM (exit $STOP_RC)"
	done
	NP_CHECK=1 np_stop_all >"$D/np-stop.out" # (not in a pipe: wait needs our children)
	cat "$D/np-stop.out"
	grep -q '^not ok' "$D/np-stop.out" && FAILED=1
	if [ -n "$FK_PID" ]; then
		stop_pid "$FK_PID"
		if [ -n "${FK_CHECK:-}" ]; then
			[ "$STOP_RC" = 0 ] && ok "fake-kmm stops cleanly on SIGTERM" || nok "fake-kmm stops cleanly on SIGTERM (exit $STOP_RC)"
		fi
	fi
	kubesim_rbac_verdict "$NS" || FAILED=1
	# (read while the API server still runs: printed below on a failure)
	local policy
	policy=$(cpj 2>/dev/null | jq -c '{g: .metadata.generation, status}' 2>/dev/null | head -c 2500)
	kubesim_stop >/dev/null 2>&1
	san_check "$D"/*.log "$D"/np/*.log || FAILED=1
	if [ "$FAILED" != 0 ]; then
		echo "#   policy: $policy"
		log_tails 20 "$D"/*.log "$D"/np/*.log
	fi
	rm -rf "$D"
	exit $FAILED
}

sc_init() { # NAME
	D=$(mktemp -d "${TMPDIR:-/tmp}/gpukmm-$1.XXXXXX") || exit 1
	chmod 700 "$D"
	trap sc_cleanup EXIT
	# under the shipped RBAC: each profile with its ServiceAccount's token, fake-kmm (KMM) as the admin
	KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start || { nok "kubesim starts"; exit 1; }
}

cpj() { kraw GET "/apis/intel.com/v1alpha1/clusterpolicies/$CP"; }
cp_is() { cpj | jq -e "$1" >/dev/null; }
node_is() { kraw GET "/api/v1/nodes/$1" | jq -e "$2" >/dev/null; }
loaded_on() { node_is "$1" ".metadata.labels[\"$KEY\"] != null"; }
unloaded_on() { node_is "$1" ".metadata.labels[\"$KEY\"] == null"; }
sc_kmm_cluster() { # LOAD_MS UNLOAD_MS [FAKE-KMM FLAGS...]
	local load=$1 unload=$2
	shift 2
	k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml -f deploy/crd/gpukmm.io_nodereportrequests.yaml \
		-f tests/fixtures/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml >>"$D/kubectl.log" 2>&1
	k wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com crd/nodereportrequests.gpukmm.io crd/modules.kmm.sigs.x-k8s.io \
		>>"$D/kubectl.log" 2>&1
	kubesim_kubeconfigs "$D" "$NS" || nok "the shipped RBAC and the ServiceAccounts' kubeconfigs"
	"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/kmm-kubeconfig" --load-delay-ms "$load" --unload-delay-ms "$unload" \
		--log-level info "$@" 2>>"$D/fake-kmm.log" &
	FK_PID=$!
	FK_CHECK=1
	check "fake-kmm registers KMM's admission webhook" 20 k get validatingwebhookconfiguration \
		fake-kmm-validating-webhook-configuration
}

node() { # NAME KERNEL
	printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s","labels":{"kubernetes.io/arch":"amd64","intel.feature.node.kubernetes.io/gpu":"true"}}}' "$1" |
		k apply -f - >>"$D/kubectl.log" 2>&1
	k patch node "$1" --subresource=status --type=merge -p "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" >>"$D/kubectl.log" 2>&1
}
