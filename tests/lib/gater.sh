# Shell helpers for the gater end-to-end tests, on tests/lib/modmgr.sh (sourced here;
# it starts kubesim, the watcher, modmgr and the fake statusd in $MM_DIR).
#
#   gt_setup                               mm_setup ("not ok - setup" and exit when it fails),
#                                          gt_teardown as the EXIT trap, the namespace apps
#                                          opted in (gt_opt_in)
#   gt_opt_in NS                           bind gpukmm-gate-daemonsets to the controller in NS
#   gt_start_gater / gt_stop_gater [SIG]   (re)start or stop gpukmm-gater
#   gt_synced [RE]                         the gater has built its view from a snapshot (its
#                                          log line, also matching RE after the words)
#   gt_teardown                            mm_teardown (which stops the gater too, checking it exits 0)
#   mk_ds NS NAME 'SELECTOR-JSON' ['LABELS-JSON']   create a DaemonSet (JSON POST)
#   ds_json NS NAME / ds_sel NS NAME       the object / its template nodeSelector
#   gated NS NAME [POLICY] / ungated NS NAME [POLICY]   our ready-label key present ("") / absent
#   ds_writes                              kubesim writes to daemonsets so far
#   gt_report_has JQ [POLICY]              the last gater report matches JQ
. "${GPUKMM_SRC:-.}/tests/lib/modmgr.sh"
GT_KEY_PREFIX="kmm.node.kubernetes.io/$MM_NS."

gt_start_gater() {
	"$GPUKMM_BIN/gpukmm-gater" --kubeconfig "$MM_DIR/kubeconfig" --namespace "$MM_NS" \
		--watcher "ipc://$MM_DIR/watcher.sock" --events "ipc://$MM_DIR/events.sock" \
		--statusd "ipc://$MM_DIR/statusd.sock" ${GT_GATER_FLAGS:-} >>"$MM_DIR/gater.log" 2>&1 &
	GT_GATER_PID=$!
}

gt_stop_gater() { stop_var GT_GATER_PID "${1:-TERM}"; }

gt_teardown() { # mm_teardown stops the gater too and checks its exit code
	mm_teardown
}

gt_setup() {
	mm_setup || { echo "not ok - setup"; exit 1; }
	trap gt_teardown EXIT
	mk_namespace apps
	gt_opt_in apps
}
# What an admin runs to let the gater gate labelled DaemonSets in NS
# (deploy/rbac/gate-daemonsets.yaml); nothing to do without RBAC.
gt_opt_in() { # NS
	[ -n "${KUBESIM_ADMIN_TOKEN:-}" ] || return 0
	k -n "$1" create rolebinding gpukmm-gate-daemonsets --clusterrole=gpukmm-gate-daemonsets \
		--serviceaccount="$MM_NS:gpukmm-controller" >/dev/null
}
gt_synced() { grep -q "view rebuilt from snapshot${1:-}" "$MM_DIR/gater.log"; }

mk_ds() { # NS NAME SELECTOR-JSON [LABELS-JSON]
	kraw POST "/apis/apps/v1/namespaces/$1/daemonsets" "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",
	\"metadata\":{\"name\":\"$2\",\"namespace\":\"$1\",\"labels\":${4:-{\}}},
	\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"$2\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"$2\"}},
	\"spec\":{\"nodeSelector\":$3,\"containers\":[{\"name\":\"c\",\"image\":\"img:1\"}]}}}}" >/dev/null
}
ds_json() { kraw GET "/apis/apps/v1/namespaces/$1/daemonsets/$2"; }
ds_sel() { ds_json "$1" "$2" | jq -c '.spec.template.spec.nodeSelector // {}'; }
ds_jq() { ds_json "$1" "$2" | jq -e "$3" >/dev/null; }
gated() { ds_jq "$1" "$2" ".spec.template.spec.nodeSelector[\"$GT_KEY_PREFIX${3:-gpu}-gpu.ready\"] == \"\""; }
ungated() { ds_jq "$1" "$2" ".kind == \"DaemonSet\" and (.spec.template.spec.nodeSelector // {} | has(\"$GT_KEY_PREFIX${3:-gpu}-gpu.ready\") | not)"; }
ds_writes() { kraw GET /kubesim/stats | jq -r '.writesByResource.daemonsets // 0'; }
gt_last_report() { grep "\"component\":\"gater\",\"policy\":\"${1:-gpu}\"" "$MM_DIR/reports" | tail -1; }
gt_report_count() { grep -c "\"component\":\"gater\",\"policy\":\"${1:-gpu}\"" "$MM_DIR/reports"; }
gt_report_has() { gt_last_report "${2:-gpu}" | jq -e "$1" >/dev/null; }
mm_report_has() { grep "\"component\":\"modmgr\",\"policy\":\"${2:-gpu}\"" "$MM_DIR/reports" | tail -1 | jq -e "$1" >/dev/null; }
gater_counter() { # the gater's heartbeat counters are not visible standalone: count log lines
	grep -c "$1" "$MM_DIR/gater.log"
}
reports_more_than_gt() { [ "$(gt_report_count "${2:-gpu}")" -gt "$1" ]; }
