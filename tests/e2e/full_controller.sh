#!/bin/bash
# The full pass through real processes: the gpukmm supervisor with the shipped
# controller arguments (deploy/controller/deployment.yaml: --profile controller,
# watcher with leader election, modmgr, gater, statusd, webhook over HTTPS with a
# test CA), kubesim as the API server (calling the
# webhook with the caBundle, as cert-manager would inject it), fake-kmm as KMM.
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
SUP_PID= FK_PID=
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; FAILED=1; }
check() { local n=$1; shift; if "$@" >/dev/null 2>&1; then ok "$n"; else notok "$n"; fi; }
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
	stop_pid "$FK_PID" 10
	san_check "$D"/*.log || FAILED=1
	[ "$FAILED" = 0 ] || log_tails 60 "$D"/*.log
	kubesim_stop
	rm -rf "$D"
}
. tests/lib/shipped.sh
shipped_setup 'prometheus,prometheus,uid-prom,"system:masters"' || { echo "not ok - kubesim and a test CA"; exit 1; }
trap teardown EXIT
check "namespace, CRDs, nodes, fake-kmm and the policy's DaemonSets" shipped_cluster

# ---- the controller, as shipped (only paths and ports differ) -------------------------
mapfile -t ARGS < <(shipped_args)
echo "# gpukmm ${ARGS[*]}"
check "the shipped Deployment runs --profile controller with --leader-elect" \
	grep -qx -- --leader-elect <(printf '%s\n' "${ARGS[@]}")
"$GPUKMM_BIN/gpukmm" "${ARGS[@]}" --kubeconfig "$D/kubeconfig" >"$D/gpukmm.log" 2>&1 &
SUP_PID=$!
check "controller ready: every service reported Ready" wait_for "5/5 ready" 60 \
	grep -q 'ready: 5/5 required services ready' "$D/gpukmm.log"
# the webhook listens on port 0; the configurations as shipped, with the caBundle
# injected (cert-manager's job) and the Service resolved to the webhook's address
check "webhook configurations applied (https, caBundle)" wait_for webhooks 10 shipped_webhooks "$SUP_PID"

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

MPORT=$(grep -o 'metrics: listening on 127.0.0.1:[0-9]*' "$D/gpukmm.log" | head -1 | grep -o '[0-9]*$')
curl -sfk --oauth2-bearer prometheus "https://127.0.0.1:$MPORT/metrics" >"$D/metrics" 2>/dev/null
metric() { awk -v m="$1" '$1 ~ "^"m"({|$)" {print $2; exit}' "$D/metrics"; }
check "/metrics (https, token reviewed): the gater's counters (passes > 0, 3 writes, 0 conflicts)" bash -c \
	"[ \"$(metric gpukmm_gater_passes_total)\" -gt 0 ] && [ \"$(metric gpukmm_gater_writes_total)\" = 3 ] && [ \"$(metric gpukmm_gater_conflicts_total)\" = 0 ]"

# ---- shutdown: SIGTERM stops everything, exit 0 -------------------------------------------
stop_pid "$SUP_PID" 10
rc=$STOP_RC
SUP_PID=
check "gpukmm exits 0 on SIGTERM (rc $rc)" test "$rc" = 0
exit $FAILED
