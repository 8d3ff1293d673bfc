#!/bin/bash
# Least privilege end to end (issue #17): every service under the exact RBAC we
# ship (deploy/rbac, applied with kubectl to kubesim --rbac), each profile with
# the token of its ServiceAccount; fake-kmm (KMM) is the admin.
#   - a full pass (policy, Module created and loaded, DaemonSets gated, status,
#     kernelModule removed: Module deleted, DaemonSets ungated, leader Lease, node
#     reports) makes no API call the shipped rules refuse, and every call kubesim
#     allowed them is a row of the API-CALL table (deploy_check.py --exercised);
#   - a DaemonSet opted in by label where no admin bound gpukmm-gate-daemonsets
#     (namespace apps, kube-system) is not gated: the ClusterPolicy's status.errors
#     says so and names the binding; once the admin creates it in apps, the
#     DaemonSet there is gated, the one in kube-system never is;
#   - sampled calls outside the rules are refused with the API server's message
#     (the controller: a DaemonSet in kube-system, Secrets, a ClusterPolicy
#     create, another Lease, granting itself a binding; the node: DaemonSets, Pods,
#     ClusterPolicy status).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/nodeprofile.sh
. tests/lib/controller.sh
NS=intel-gpu-base-operator
CP=gpu-kmm
KEY="kmm.node.kubernetes.io/$NS.$CP-gpu.ready"
CTRL_SA="system:serviceaccount:$NS:gpukmm-controller"
D=$(mktemp -d "${TMPDIR:-/tmp}/gpukmm-rbac.XXXXXX") || exit 1
chmod 700 "$D"
FAILED=0 FK_PID=
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; FAILED=1; }
check() { # NAME TIMEOUT_S CMD...
	local n=$1 t=$2; shift 2
	if wait_until "$t" "$@" >/dev/null 2>&1; then ok "$n"; else nok "$n"; fi
}
cleanup() {
	local c
	for c in "${!SUP[@]}"; do
		ctrl_stop "$c"
		[ "$STOP_RC" = 0 ] || nok "controller $c stops cleanly on SIGTERM (exit $STOP_RC)"
	done
	NP_CHECK=1 np_stop_all >"$D/np-stop.out"
	grep '^not ok' "$D/np-stop.out" && FAILED=1
	[ -n "$FK_PID" ] && stop_pid "$FK_PID"
	[ "$FAILED" = 0 ] || echo "#   policy status: $(cpj | jq -c .status 2>/dev/null | head -c 2500)"
	kubesim_stop >/dev/null 2>&1
	san_check "$D"/*.log "$D"/np/*.log || FAILED=1
	[ "$FAILED" = 0 ] || log_tails 20 "$D"/*.log "$D"/np/*.log
	rm -rf "$D"
	exit $FAILED
}
trap cleanup EXIT

# ---- the cluster, the shipped RBAC, one kubeconfig per ServiceAccount ---------------------
KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start || { nok "kubesim starts"; exit 1; }
k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml -f deploy/crd/gpukmm.io_nodereportrequests.yaml \
	-f tests/fixtures/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml >"$D/kubectl.log" 2>&1
k wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com crd/nodereportrequests.gpukmm.io crd/modules.kmm.sigs.x-k8s.io \
	>>"$D/kubectl.log" 2>&1
check "kubectl apply -k deploy/rbac" 1 eval 'k apply -k deploy/rbac >>"$D/kubectl.log" 2>&1'
kubesim_kubeconfigs "$D" "$NS" || { nok "ServiceAccount tokens (TokenRequest)"; exit 1; }
as_ctrl() { KUBECONFIG="$D/kubeconfig" "$KUBECTL" --cache-dir "$D/kc-ctrl" "$@"; }
as_node() { KUBECONFIG="$D/node-kubeconfig" "$KUBECTL" --cache-dir "$D/kc-node" "$@"; }
check "the controller's kubeconfig is ServiceAccount gpukmm-controller" 1 \
	eval 'as_ctrl auth whoami -o jsonpath="{.status.userInfo.username}" | grep -qx "$CTRL_SA"'
cpj() { kraw GET "/apis/intel.com/v1alpha1/clusterpolicies/$CP"; }
cp_is() { cpj | jq -e "$1" >/dev/null; }
ds() { # NS NAME [LABELS-JSON]
	kraw POST "/apis/apps/v1/namespaces/$1/daemonsets" "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",
	\"metadata\":{\"name\":\"$2\",\"labels\":${3:-{\}}},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"$2\"}},
	\"template\":{\"metadata\":{\"labels\":{\"app\":\"$2\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}" >/dev/null
}
gated() { kraw GET "/apis/apps/v1/namespaces/$1/daemonsets/$2" | jq -e ".spec.template.spec.nodeSelector[\"$KEY\"] == \"\"" >/dev/null; }
ungated() { kraw GET "/apis/apps/v1/namespaces/$1/daemonsets/$2" | jq -e ".kind == \"DaemonSet\" and (.spec.template.spec.nodeSelector // {} | has(\"$KEY\") | not)" >/dev/null; }
has_error() { cp_is "any(.status.errors[]?; contains(\"$1\"))"; }

kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-1","labels":{"kubernetes.io/arch":"amd64","intel.feature.node.kubernetes.io/gpu":"true"}}}' >/dev/null
kraw PATCH /api/v1/nodes/gpu-1/status '{"status":{"nodeInfo":{"kernelVersion":"6.8.0-45-generic"}}}' application/merge-patch+json >/dev/null
k create ns apps >/dev/null
ds "$NS" "$CP-device-plugin"
ds apps opt-app "{\"gpukmm.io/gate\":\"$CP\"}"
ds kube-system kube-app "{\"gpukmm.io/gate\":\"$CP\"}"

np_init "$D" "$D/node-kubeconfig" "$NS"
np_start gpu-1 6.8.0-45-generic || nok "node profile starts"
np_follow_start
"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/kmm-kubeconfig" --load-delay-ms 100 --unload-delay-ms 100 \
	--log-level warn 2>>"$D/fake-kmm.log" &
FK_PID=$!
ctrl_start A
check "controller ready" 60 ctrl_ready A
check "and leads (Lease $NS/gpukmm-controller)" 30 has_leader

# ---- a full pass --------------------------------------------------------------------------
k apply -f deploy/examples/clusterpolicy-kmm.yaml >>"$D/kubectl.log" 2>&1
check "Module created (owner reference with blockOwnerDeletion: finalizers rule)" 30 \
	eval "k -n $NS get module $CP-gpu -o json | jq -e '.metadata.ownerReferences[0].blockOwnerDeletion == true' >/dev/null"
check "KMM loads it on gpu-1; the node profile sees it" 40 \
	eval "kraw GET /api/v1/nodes/gpu-1 | jq -e '.metadata.labels[\"$KEY\"] != null and .metadata.labels[\"gpukmm.io/xe.source\"] == \"oot\"' >/dev/null"
check "the operator namespace's DaemonSet is gated" 30 gated "$NS" "$CP-device-plugin"
check "status: KMM 1/1, the GPU node counted" 40 cp_is '.status.kmmStatus == "1/1" and .status.nodes.gpuNodes == 1'

# ---- opt-in: the label alone gates nothing; the admin's RoleBinding does ---------------------
HINT="no permission to write DaemonSets in namespace apps: opt it in with \`kubectl -n apps create rolebinding gpukmm-gate-daemonsets --clusterrole=gpukmm-gate-daemonsets --serviceaccount=$NS:gpukmm-controller\`"
check "not opted in (no binding in apps): status.errors names the RoleBinding to create" 30 has_error "$HINT"
check "... and kube-system's" 30 has_error "no permission to write DaemonSets in namespace kube-system"
check "neither DaemonSet is gated, Ready is False" 1 eval \
	"ungated apps opt-app && ungated kube-system kube-app && cp_is '.status.conditions[] | select(.type == \"Ready\") | .status == \"False\"'"
echo "#   $(cpj | jq -r '.status.errors[]?' | grep apps)"
# what the README tells the admin to run
k -n apps create rolebinding gpukmm-gate-daemonsets --clusterrole=gpukmm-gate-daemonsets \
	--serviceaccount="$NS:gpukmm-controller" >>"$D/kubectl.log" 2>&1
check "once the admin bound gpukmm-gate-daemonsets in apps: opt-app gated" 40 gated apps opt-app
check "its error is gone, kube-system's stays; kube-app never gated" 30 eval \
	"! has_error 'namespace apps:' && has_error 'namespace kube-system' && ungated kube-system kube-app"

# ---- the re-reads after a conflict (get): a 409 on each write kind until the service re-read ----
used() { # VERB RESOURCE: kubesim allowed the controller that call
	kcurl -s "$KUBESIM_URL/kubesim/rbac" | jq -e --arg u "$CTRL_SA" --arg v "$1" --arg r "$2" \
		'any(.requests[]; .user == $u and .verb == $v and .resource == $r and .allowed)' >/dev/null
}
faults() { kraw PUT /kubesim/faults "{\"rules\":[$1]}" >/dev/null; }
faults '{"verb":"patch","resource":"modules","rate":1,"code":409}'
k patch clusterpolicy "$CP" --type=merge -p '{"spec":{"kernelModule":{"firmwarePath":"/opt/lib/firmware/xe2"}}}' >>"$D/kubectl.log" 2>&1
check "a spec change: modmgr patches the Module, re-reads it after a 409" 30 used get modules
faults ''
check "... and the patch lands" 30 eval "k -n $NS get module $CP-gpu -o json | jq -e '.spec.moduleLoader.container.modprobe.firmwarePath == \"/opt/lib/firmware/xe2\"' >/dev/null"

# ---- kernelModule removed: the Module is deleted, the DaemonSets ungated -----------------------
faults '{"verb":"patch","resource":"daemonsets","rate":1,"code":409}'
k patch clusterpolicy "$CP" --type=json -p '[{"op":"remove","path":"/spec/kernelModule"}]' >>"$D/kubectl.log" 2>&1
check "the gater re-reads a DaemonSet after a 409" 30 used get daemonsets
faults ''
check "kernelModule removed: Module deleted" 40 eval "! k -n $NS get module $CP-gpu >/dev/null 2>&1"
check "... and the DaemonSets ungated" 30 eval "ungated $NS $CP-device-plugin && ungated apps opt-app"

# ---- nothing the services did was refused, beyond the DaemonSets not opted in -------------------
kcurl -s "$KUBESIM_URL/kubesim/rbac" >"$D/rbac.json"
# (but the DaemonSets not opted in)
kubesim_rbac_verdict "$NS" 'cannot (patch|get) resource "daemonsets" in API group "apps" in the namespace "(apps|kube-system)"' ||
	FAILED=1
python3 tests/e2e/deploy_check.py --exercised "$D/rbac.json" "$NS" || FAILED=1

# ---- sampled: outside the rules is refused, as the API server words it -----------------------
refused() { # WHO MESSAGE KUBECTL-ARGS...: the call fails with exactly MESSAGE
	local who=$1 want=$2 out
	shift 2
	out=$("$who" "$@" 2>&1) && { nok "refused: $*"; echo "#   $out"; return; }
	grep -qF -- "$want" <<<"$out" && ok "refused: $who $* ($want)" || { nok "refused: $who $*: $want"; echo "#   got: $out"; }
}
cant() { # WHO VERB RESOURCE [ARGS]: kubectl auth can-i says no
	local who=$1
	shift
	[ "$("$who" auth can-i "$@" 2>/dev/null)" = no ] && ok "$who cannot $*" || nok "$who cannot $*"
}
# the gater's own write, with the controller's token
out=$(KRAW_TOKEN=$(kubesim_sa_token "$NS" gpukmm-controller) kraw PATCH /apis/apps/v1/namespaces/kube-system/daemonsets/kube-app \
	"{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"$KEY\":\"\"}}}}}" application/merge-patch+json)
[ "$(kraw_code)" = 403 ] && [ "$(jq -r .message <<<"$out")" = "daemonsets.apps \"kube-app\" is forbidden: User \"$CTRL_SA\" cannot patch resource \"daemonsets\" in API group \"apps\" in the namespace \"kube-system\"" ] &&
	ok "refused: the controller's patch of a DaemonSet in kube-system (403, the API server's message)" ||
	{ nok "refused: the controller's patch of a DaemonSet in kube-system"; echo "#   $(kraw_code) $out"; }
refused as_ctrl "daemonsets.apps \"kube-app\" is forbidden: User \"$CTRL_SA\" cannot get resource \"daemonsets\" in API group \"apps\" in the namespace \"kube-system\"" \
	-n kube-system get daemonset kube-app
refused as_ctrl "secrets is forbidden: User \"$CTRL_SA\" cannot list resource \"secrets\" in API group \"\" in the namespace \"$NS\"" \
	-n "$NS" get secrets
refused as_ctrl "rolebindings.rbac.authorization.k8s.io is forbidden: User \"$CTRL_SA\" cannot create resource \"rolebindings\" in API group \"rbac.authorization.k8s.io\" in the namespace \"kube-system\"" \
	-n kube-system create rolebinding gpukmm-gate-daemonsets --clusterrole=gpukmm-gate-daemonsets --serviceaccount="$NS:gpukmm-controller"
cant as_ctrl create clusterpolicies
cant as_ctrl update leases/another-operators-lease -n "$NS"
cant as_ctrl delete nodes
cant as_ctrl patch daemonsets -n default
cant as_ctrl patch modules.kmm.sigs.x-k8s.io -n kube-system
cant as_ctrl get clusterpolicies --subresource=status
refused as_node "daemonsets.apps is forbidden: User \"system:serviceaccount:$NS:gpukmm-node\" cannot list resource \"daemonsets\" in API group \"apps\" at the cluster scope" \
	get daemonsets -A
cant as_node list pods -A
cant as_node patch clusterpolicies --subresource=status
cant as_node create nodes
# the node's credentials write no Node at all (issue #17): not another node's, not its own,
# not a KMM ready label, not a taint; only the NodeReportRequest the controller checks
NODE_SA="system:serviceaccount:$NS:gpukmm-node"
node_patch() { # BODY: as the node profile, patch Node gpu-1; prints the HTTP code and message
	local out
	out=$(KRAW_TOKEN=$(kubesim_sa_token "$NS" gpukmm-node) kraw PATCH /api/v1/nodes/gpu-1 "$1" application/merge-patch+json)
	echo "$(kraw_code) $(jq -r .message <<<"$out" 2>/dev/null)"
}
want403="403 nodes \"gpu-1\" is forbidden: User \"$NODE_SA\" cannot patch resource \"nodes\" in API group \"\" at the cluster scope"
got=$(node_patch "{\"metadata\":{\"labels\":{\"$KEY\":\"\"}}}")
[ "$got" = "$want403" ] && ok "refused: the node's credentials set a KMM ready label (403)" ||
	nok "refused: the node's credentials set a KMM ready label: $got"
got=$(node_patch '{"spec":{"taints":[{"key":"evil","effect":"NoSchedule"}]}}')
[ "$got" = "$want403" ] && ok "refused: the node's credentials taint a Node (403)" || nok "refused: a taint: $got"
got=$(node_patch '{"metadata":{"labels":{"gpukmm.io/gpu.present":"false"}}}')
[ "$got" = "$want403" ] && ok "refused: the node's credentials write even a gpukmm.io label themselves (403)" ||
	nok "refused: a gpukmm.io label: $got"
check "... and gpu-1 kept its labels, untainted" 1 eval \
	"kraw GET /api/v1/nodes/gpu-1 | jq -e '.metadata.labels[\"gpukmm.io/gpu.present\"] == \"true\" and (.spec.taints // [] | length) == 0'"
cant as_node patch nodes
cant as_node get nodes
cant as_node update nodes/status
cant as_node get nodereportrequests.gpukmm.io -n "$NS"
cant as_node list nodereportrequests.gpukmm.io -n "$NS"
cant as_node update nodereportrequests.gpukmm.io -n "$NS"
cant as_node delete nodereportrequests.gpukmm.io -n "$NS"
cant as_node create nodereportrequests.gpukmm.io -n default
[ "$(as_node auth can-i create nodereportrequests.gpukmm.io -n "$NS" 2>/dev/null)" = yes ] &&
	ok "as_node may create nodereportrequests in $NS (all it may do)" || nok "as_node may create nodereportrequests in $NS"
exit $FAILED
