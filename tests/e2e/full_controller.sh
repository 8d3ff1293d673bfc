#!/bin/bash
# The full pass through real processes: the controller pod as shipped
# (deploy/controller/deployment.yaml), its two containers as two gpukmm
# supervisors with the shipped arguments: "gpukmm" (--profile controller --without
# webhook: watcher with leader election, modmgr, gater, opmgr, statusd) with the token of
# ServiceAccount gpukmm-controller, and "webhook" (--profile webhook, HTTPS with a
# test CA) with no credential at all; kubesim as the API server enforcing the
# shipped RBAC (deploy/rbac) and calling the webhook with the caBundle, as
# cert-manager would inject it; fake-kmm as KMM.
# A cluster admin applies deploy/examples/clusterpolicy-kmm.yaml with kubectl;
# KMM loads the module on the two matching nodes, the three DaemonSets are
# gated, and `kubectl get clusterpolicy` shows KMM 2/2 and Ready True.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/proc.sh
NS=intel-gpu-base-operator
CP=gpu-kmm
KEY="kmm.node.kubernetes.io/$NS.$CP-gpu.ready"
FAILED=0
D=$(mktemp -d "${TMPDIR:-/tmp}/full-controller.XXXXXX") || exit 1
chmod 700 "$D"
SUP_PID= WSUP_PID= FK_PID=
check() { checkf "$@"; } # (tests/lib/proc.sh; not kubesim.sh's check, which sets no FAILED)
wait_for() { # DESC TIMEOUT_S CMD...
	local desc=$1 t=$2; shift 2
	local deadline=$((SECONDS + t))
	while [ $SECONDS -lt $deadline ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "# timed out after ${t}s waiting for: $desc" >&2
	return 1
}
teardown() { # (stop_pid: SIGTERM, SIGKILL after 10 s)
	stop_pid "$SUP_PID" 10
	stop_pid "$WSUP_PID" 10
	stop_pid "$FK_PID" 10
	san_check "$D"/*.log || FAILED=1
	[ "$FAILED" = 0 ] || log_tails 60 "$D"/*.log
	kubesim_stop
	rm -rf "$D"
}
KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
trap teardown EXIT
kc() { # kubectl as the cluster admin
	KUBECONFIG=/dev/null "$KUBECTL" --server "$KUBESIM_URL" --cache-dir "$KUBESIM_DIR/kcache" \
		--certificate-authority "$KUBESIM_CA" --token "$KUBESIM_ADMIN_TOKEN" "$@"
}
# kubectl as the controller (its ServiceAccount's kubeconfig)
as_ctrl() { KUBECONFIG="$D/kubeconfig" "$KUBECTL" --cache-dir "$KUBESIM_DIR/kcache-ctrl" "$@"; }
export -f kc as_ctrl
export KUBECTL KUBESIM_URL KUBESIM_DIR D

# ---- a test CA and the webhook's serving certificate ---------------------------------
. tests/lib/shipped.sh
shipped_ca || { echo "not ok - openssl test CA"; exit 1; }

# ---- the cluster: namespace, CRDs, RBAC, nodes, KMM -----------------------------------
kc apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml -f deploy/crd/gpukmm.io_nodereportrequests.yaml \
	-f tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml >"$D/apply.log" 2>&1
check "namespace and CRDs applied with kubectl" kc wait --for condition=established --timeout=20s \
	crd/clusterpolicies.intel.com crd/nodereportrequests.gpukmm.io crd/modules.kmm.sigs.x-k8s.io
check "kubectl apply -k deploy/rbac" kc apply -k deploy/rbac
check "the controller's kubeconfig: a token of ServiceAccount gpukmm-controller" \
	kubesim_sa_kubeconfig "$D/kubeconfig" "$NS" gpukmm-controller
kubesim_admin_kubeconfig "$D/kmm-kubeconfig"
node() { # NAME KERNEL GPU(true|false)
	local lbl='"kubernetes.io/arch":"amd64"'
	[ "$3" = true ] && lbl="$lbl,\"intel.feature.node.kubernetes.io/gpu\":\"true\""
	kraw POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",\"labels\":{$lbl}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}" >/dev/null
}
node gpu-1 6.8.0-45-generic true
node gpu-2 5.14.0-427.13.1.el9_4.x86_64 true
node cpu-1 6.8.0-45-generic false
"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/kmm-kubeconfig" --load-delay-ms 100 --unload-delay-ms 100 \
	>>"$D/fake-kmm.log" 2>&1 &
FK_PID=$!

# the operator's DaemonSets (rendered by the GPU operator; created here as it would)
mk_ds() {
	kraw POST "/apis/apps/v1/namespaces/$NS/daemonsets" "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",
	\"metadata\":{\"name\":\"$1\",\"namespace\":\"$NS\"},
	\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"$1\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"$1\"}},
	\"spec\":{\"nodeSelector\":{\"kubernetes.io/arch\":\"amd64\",\"intel.feature.node.kubernetes.io/gpu\":\"true\"},
	\"containers\":[{\"name\":\"c\",\"image\":\"intel/$1:1\"}]}}}}" >/dev/null
}
for d in device-plugin gpu-dra xpu-manager; do mk_ds "$CP-$d"; done

# ---- the controller pod, as shipped (only paths and ports differ) ----------------------
mapfile -t ARGS < <(shipped_args gpukmm)
mapfile -t WARGS < <(shipped_args webhook)
echo "# container gpukmm: gpukmm ${ARGS[*]}"
echo "# container webhook: gpukmm ${WARGS[*]}"
check "the shipped Deployment runs --profile controller with --leader-elect" \
	grep -qx -- --leader-elect <(printf '%s\n' "${ARGS[@]}")
"$GPUKMM_BIN/gpukmm" "${ARGS[@]}" --kubeconfig "$D/kubeconfig" >"$D/gpukmm.log" 2>&1 &
SUP_PID=$!
# the webhook's container: no kubeconfig, no token (none is mounted there)
"$GPUKMM_BIN/gpukmm" "${WARGS[@]}" >"$D/gpukmm-webhook.log" 2>&1 &
WSUP_PID=$!
check "controller ready: every service of the API container reported Ready" wait_for "6/6 ready" 60 \
	grep -q 'ready: 6/6 required services ready' "$D/gpukmm.log"
check "webhook container ready" wait_for "1/1 ready" 60 grep -q 'ready: 1/1 required services ready' "$D/gpukmm-webhook.log"
wpid() { pgrep -P "$WSUP_PID" -x gpukmm-webhook; }
no_credential() { # PID: no kubeconfig or token in its environment or arguments
	! tr '\0' '\n' <"/proc/$1/environ" | grep -qE '^(KUBECONFIG|GPUKMM_TOKEN_FILE)=' &&
		! tr '\0' ' ' <"/proc/$1/cmdline" | grep -qE -- '--(kubeconfig|token-file)'
}
check "the webhook process holds no API credential (no KUBECONFIG, GPUKMM_TOKEN_FILE or flag)" no_credential "$(wpid)"
check "and no service of the API container is the webhook" bash -c "! pgrep -P $SUP_PID -x gpukmm-webhook"
# the webhook's port (it listens on port 0): the TCP listener of the webhook
# container's gpukmm-webhook
webhook_port() {
	local p
	p=$(wpid) || return 1
	ss -Htlnp | awk -v p="pid=$p," 'index($0, p) { n = split($4, a, ":"); print a[n]; exit }' >"$D/wport"
	test -s "$D/wport"
}
check "webhook listening (https)" wait_for wport 10 webhook_port
# the webhook configurations as shipped, with the caBundle injected (cert-manager's
# job) and the Service resolved to the webhook's address
CAB=$(base64 -w0 "$D/ca.crt")
WURL="https://127.0.0.1:$(cat "$D/wport" 2>/dev/null)"
kc create --dry-run=client -o json -f deploy/webhook/webhooks.yaml 2>>"$D/apply.log" |
	jq -c --arg cab "$CAB" --arg u "$WURL" '(if .kind == "List" then .items[] else . end)
		| .webhooks |= map(.clientConfig = {url: ($u + .clientConfig.service.path), caBundle: $cab})' \
	>"$D/webhooks.json"
check "webhook configurations applied" kc apply -f "$D/webhooks.json"

# ---- the admin applies the example policy ------------------------------------------------
bad=$(sed 's/^  name: gpu-kmm$/  name: gpu-kmm-name-far-too-long/' deploy/examples/clusterpolicy-kmm.yaml)
out=$(kc apply -f - <<<"$bad" 2>&1)
check "the webhook (HTTPS, verified by caBundle) denies a policy whose Module name is too long" grep -q denied <<<"$out"
check "kubectl apply -f deploy/examples/clusterpolicy-kmm.yaml" kc apply -f deploy/examples/clusterpolicy-kmm.yaml
check "KMM Module $NS/$CP-gpu created" wait_for module 30 kc -n "$NS" get module "$CP-gpu"
node_ready() { kc get node "$1" -o json | jq -e ".metadata.labels[\"$KEY\"] == \"\""; }
check "fake-kmm loaded the module on gpu-1 (ready label)" wait_for "gpu-1 ready" 30 node_ready gpu-1
check "fake-kmm loaded the module on gpu-2 (ready label)" wait_for "gpu-2 ready" 30 node_ready gpu-2
check "no module on the node without a GPU" bash -c "! kc get node cpu-1 -o json | grep -q '$CP-gpu.ready'"
gated() {
	kraw GET "/apis/apps/v1/namespaces/$NS/daemonsets/$1" | jq -e ".spec.template.spec.nodeSelector[\"$KEY\"] == \"\"
		and .spec.template.spec.nodeSelector[\"intel.feature.node.kubernetes.io/gpu\"] == \"true\""
}
for d in device-plugin gpu-dra xpu-manager; do
	check "DaemonSet $CP-$d gated (its own selector kept)" wait_for "$d gated" 30 gated "$CP-$d"
done
# kubesim's DaemonSet controller and kubelet run the pods on the 2 labelled nodes
# columns of `kubectl get clusterpolicy`: NAME DP DRA XPU KMM Ready Age
colis() { [ "$(kc get clusterpolicy "$CP" --no-headers | awk -v c="$1" '{print $c}')" = "$2" ]; }
check "kubectl get clusterpolicy: KMM 2/2" wait_for "KMM 2/2" 40 colis 5 2/2
check "kubectl get clusterpolicy: Ready True" wait_for "Ready True" 30 colis 6 True
kc get clusterpolicy "$CP" | sed 's/^/#   /'
ds_cols() { colis 2 2/2 && colis 3 2/2 && colis 4 2/2; }
check "printer columns: DP 2/2, DRA 2/2, XPU 2/2" ds_cols
check "status: no errors, observedGeneration = generation" bash -c \
	"kc get clusterpolicy $CP -o json | jq -e '(.status.errors // []) == [] and .status.observedGeneration == .metadata.generation'"

# /metrics of the API container: HTTPS, the cluster admin's token reviewed by its
# statusd (TokenReview + SubjectAccessReview under the shipped RBAC)
MPORT=$(grep -o 'metrics: listening on 127.0.0.1:[0-9]*' "$D/gpukmm.log" | head -1 | grep -o '[0-9]*$')
curl -sfk --oauth2-bearer "$KUBESIM_ADMIN_TOKEN" "https://127.0.0.1:$MPORT/metrics" >"$D/metrics" 2>/dev/null
metric() { awk -v m="$1" '$1 ~ "^"m"({|$)" {print $2; exit}' "$D/metrics"; }
check "/metrics (https, token reviewed): the gater's counters (passes > 0, 3 writes, 0 conflicts)" bash -c \
	"[ \"$(metric gpukmm_gater_passes_total)\" -gt 0 ] && [ \"$(metric gpukmm_gater_writes_total)\" = 3 ] && [ \"$(metric gpukmm_gater_conflicts_total)\" = 0 ]"

# ---- the shipped RBAC was enough, and it is all there is ----------------------------------
kubesim_rbac_verdict "$NS" || FAILED=1
check "the controller's token may not patch a DaemonSet in kube-system" bash -c "! as_ctrl auth can-i patch daemonsets -n kube-system"
check "... nor read a Secret" bash -c "! as_ctrl auth can-i get secrets -n $NS"

# ---- shutdown: SIGTERM stops everything, exit 0 -------------------------------------------
stop_pid "$SUP_PID" 10
rc=$STOP_RC
SUP_PID=
check "gpukmm exits 0 on SIGTERM (rc $rc)" test "$rc" = 0
stop_pid "$WSUP_PID" 10
rc=$STOP_RC
WSUP_PID=
check "the webhook container's gpukmm exits 0 on SIGTERM (rc $rc)" test "$rc" = 0
exit $FAILED
