# Shell helpers for the gpukmm-opmgr end-to-end tests, on tests/lib/modmgr.sh
# (kubesim, the watcher, the fake statusd in $MM_DIR; modmgr only when asked).
#
#   op_setup                         kubesim + CRDs (ClusterPolicy, KMM, the NFD and
#                                    ServiceMonitor stand-ins) + watcher + fake statusd
#   op_start / op_stop [SIG]         (re)start or stop gpukmm-opmgr ($OP_FLAGS appended)
#   op_synced                        opmgr has built its view
#   obj PATH / obj_jq PATH JQ / obj_gone PATH   GET an API path / jq -e on it / 404
#                                    (in a `bash -c`: $(declare -f kcurl kraw obj obj_jq ...))
#   ds / ds_gone NAME                a DaemonSet of the operator namespace
#   op_writes [RESOURCE]             kubesim writes (of that resource) so far
#   op_report_has JQ [POLICY]        the last opmgr report matches JQ
#   op_none_left SELECTOR PATH...    no object (matching the label selector, "" = any) in those lists
. "${GPUKMM_SRC:-.}/tests/lib/modmgr.sh"

op_setup() {
	MM_NO_START=1 mm_setup "$@" || { echo "not ok - setup"; exit 1; }
	local f
	for f in "$GPUKMM_SRC"/tests/fixtures/operand-crds/nodefeaturerules.*.yaml \
		"$GPUKMM_SRC"/tests/fixtures/operand-crds/servicemonitors.*.yaml; do
		k apply -f "$f" >/dev/null || { echo "not ok - CRD $f"; exit 1; }
	done
	mm_start_watcher
}
op_start() {
	"$GPUKMM_BIN/gpukmm-opmgr" --kubeconfig "$MM_DIR/kubeconfig" --namespace "$MM_NS" \
		--watcher "ipc://$MM_DIR/watcher.sock" --events "ipc://$MM_DIR/events.sock" \
		--statusd "ipc://$MM_DIR/statusd.sock" ${OP_FLAGS:-} >>"$MM_DIR/opmgr.log" 2>&1 &
	OP_PID=$!
}
op_stop() { stop_var OP_PID "${1:-TERM}"; }
op_synced() { grep -q "view rebuilt from snapshot" "$MM_DIR/opmgr.log"; }
obj() { kraw GET "$1"; }
# (an empty answer — kubesim unreachable, kraw without kcurl in a `bash -c` — is no match:
# jq -e accepts no input at all)
obj_jq() { local o; o=$(obj "$1") && [ -n "$o" ] && jq -e "$2" >/dev/null 2>&1 <<<"$o"; }
obj_gone() { obj_jq "$1" '.kind == "Status" and .code == 404'; }
DSP="/apis/apps/v1/namespaces/$MM_NS/daemonsets"
ds() { obj "$DSP/$1"; }
ds_is() { obj_jq "$DSP/$1" "$2"; }
ds_gone() { obj_gone "$DSP/$1"; }
op_writes() {
	if [ -n "${1:-}" ]; then kraw GET /kubesim/stats | jq -r ".writesByResource.\"$1\" // 0"
	else kraw GET /kubesim/stats | jq -r '.writes'; fi
}
op_last_report() { grep "\"component\":\"opmgr\",\"policy\":\"${1:-gpu}\"" "$MM_DIR/reports" | tail -1; }
op_report_has() { op_last_report "${2:-gpu}" | jq -e "$1" >/dev/null; }
op_counter() { grep -c "$1" "$MM_DIR/opmgr.log"; }
op_none_left() {
	local sel=$1 r n
	shift
	for r in "$@"; do
		n=$(kraw GET "$r${sel:+?labelSelector=$sel}" | jq '.items | length')
		[ "$n" = 0 ] || { echo "# $r: $n left" >&2; return 1; }
	done
}
