#!/bin/bash
# make demo: a small simulated cluster (kubesim + fake-kmm) and gpukmm's controller
# loading the xe driver through KMM, step by step.
#   make demo            watch it, then everything is stopped
#   make demo KEEP=1     keep it running at the end (Ctrl-C stops it); poke with kubectl
#   DEMO_CHECK=1         non-interactive: prints "ok - ..." / "not ok - ..." per milestone
#
# Status: gpukmm-gater and gpukmm-statusd are not merged yet: the controller runs
# watcher + modmgr + webhook (+ the test helper fake_statusd standing in for
# statusd), the node profile is not started, DaemonSets are not gated and
# ClusterPolicy.status is not written. Milestones shown: admission, Module created,
# KMM loading node by node, version change, deletion blocked by an allocated GPU
# ResourceClaim, release.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
export GPUKMM_SRC=$PWD GPUKMM_BIN=${GPUKMM_BIN:-$PWD/$BUILD/bin} GPUKMM_TBIN=${GPUKMM_TBIN:-$PWD/$BUILD/tests/bin}
NS=intel-gpu-base-operator
CHECK=${DEMO_CHECK:-}
FAILED=0
. tests/lib/kubesim.sh

D=$(mktemp -d "${TMPDIR:-/tmp}/gpukmm-demo.XXXXXX") || exit 1
PIDS=()
stop_all() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null
	done
	PIDS=()
	kubesim_stop >/dev/null 2>&1
	if [ "$FAILED" != 0 ]; then
		for f in "$D"/*.log; do echo "# ---- $f"; tail -20 "$f" | sed 's/^/#   /'; done
	fi
	rm -rf "$D"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

say() { [ -n "$CHECK" ] && echo "# $*" || printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { [ -n "$CHECK" ] || "$@"; }
milestone() { # NAME TIMEOUT_S CMD...: wait (polling) for CMD, report
	local name=$1 t=$2; shift 2
	local end=$((SECONDS + t))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $end ]; then echo "not ok - $name"; FAILED=1; return 1; fi
		sleep 0.2
	done
	if [ -n "$CHECK" ]; then echo "ok - $name"; else echo "   ✓ $name"; fi
}

# --- the admission webhook, then the API server that calls it
say "starting gpukmm-webhook, kubesim (API server) and fake-kmm (KMM)"
"$GPUKMM_BIN/gpukmm-webhook" --insecure-http --listen 127.0.0.1:0 --port-file "$D/wport" \
	--log-level warn 2>"$D/webhook.log" &
PIDS+=($!)
milestone "webhook listening" 10 test -s "$D/wport" || exit 1
KUBESIM_NO_TRAP=1 kubesim_start --service-url "$NS/gpukmm-webhook-service=http://127.0.0.1:$(cat "$D/wport")" ||
	{ echo "not ok - kubesim starts"; exit 1; }
cat >"$D/kubeconfig" <<K
apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "$KUBESIM_URL"}}]
users: [{name: u, user: {token: demo}}]
contexts: [{name: sim, context: {cluster: sim, user: u}}]
current-context: sim
K
k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml \
	-f tests/fixtures/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml >"$D/apply.log" 2>&1
k wait --for condition=established --timeout=10s crd/clusterpolicies.intel.com crd/modules.kmm.sigs.x-k8s.io \
	>>"$D/apply.log" 2>&1
k apply -f deploy/webhook/webhooks.yaml -f deploy/webhook/service.yaml >>"$D/apply.log" 2>&1
milestone "CRDs and webhook configurations installed" 10 k get validatingwebhookconfigurations

# 3 GPU nodes on two kernel families, one node without a GPU
node() { # NAME KERNEL GPU(true|false)
	local lbl='"kubernetes.io/arch":"amd64"'
	[ "$3" = true ] && lbl="$lbl,\"intel.feature.node.kubernetes.io/gpu\":\"true\""
	printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s","labels":{%s}},"status":{"nodeInfo":{"kernelVersion":"%s"}}}' \
		"$1" "$lbl" "$2" | k apply -f - >>"$D/apply.log" 2>&1
	kraw PATCH "/api/v1/nodes/$1/status" "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" \
		application/merge-patch+json >/dev/null
}
node gpu-rhel-1 5.14.0-427.13.1.el9_4.x86_64 true
node gpu-rhel-2 5.14.0-427.13.1.el9_4.x86_64 true
node gpu-ubuntu-1 6.8.0-45-generic true
node cpu-1 6.8.0-45-generic false
milestone "4 nodes (3 GPU, 2 kernel families)" 10 bash -c "[ \$(KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL get nodes -o name | wc -l) = 4 ]"

"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/kubeconfig" --load-delay-ms 700 --unload-delay-ms 500 \
	--log-level warn 2>"$D/fake-kmm.log" &
PIDS+=($!)

# --- the controller: the supervisor with the services that exist today
cat >"$D/controller.json" <<J
{"services": [
  {"name": "statusd", "binary": "$GPUKMM_TBIN/fake_statusd",
   "args": ["--listen", "ipc://{runtime_dir}/statusd.sock", "--out", "$D/reports"]},
  {"name": "watcher", "credentials": true,
   "args": ["--listen", "ipc://{runtime_dir}/watcher.sock", "--events", "ipc://{runtime_dir}/events.sock",
            "--namespace", "$NS", "--leader-elect"]},
  {"name": "modmgr", "credentials": true,
   "args": ["--watcher", "ipc://{runtime_dir}/watcher.sock", "--events", "ipc://{runtime_dir}/events.sock",
            "--statusd", "ipc://{runtime_dir}/statusd.sock", "--namespace", "$NS"]}
]}
J
"$GPUKMM_BIN/gpukmm" --config "$D/controller.json" --runtime-dir "$D/run" --kubeconfig "$D/kubeconfig" \
	--http-listen 127.0.0.1:0 >"$D/gpukmm.log" 2>&1 &
PIDS+=($!)
say "gpukmm controller started (gpukmmctl status --runtime-dir $D/run)"
milestone "controller ready (READY after every service reported Ready)" 30 \
	grep -q 'ready: 3/3 required services ready' "$D/gpukmm.log"

# --- the policy
say "kubectl apply -f deploy/examples/clusterpolicy-kmm.yaml"
show cat deploy/examples/clusterpolicy-kmm.yaml
bad=$(sed 's/^  name: gpu-kmm$/  name: gpu-kmm-name-far-too-long/' deploy/examples/clusterpolicy-kmm.yaml)
milestone "the webhook rejects a policy whose Module name is too long for KMM" 10 \
	bash -c "! KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL apply -f - <<<'$bad' 2>&1 | grep -q created"
k apply -f deploy/examples/clusterpolicy-kmm.yaml >>"$D/apply.log" 2>&1
mod() { k -n "$NS" get module gpu-kmm-gpu "$@"; }
milestone "KMM Module $NS/gpu-kmm-gpu created" 20 mod
show bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL -n $NS get module gpu-kmm-gpu -o jsonpath='{.spec.moduleLoader.container.kernelMappings}' | head -c 600; echo"

say "KMM loads the driver node by node"
ready() { k get node "$1" -o json | grep -q "kmm.node.kubernetes.io/$NS.gpu-kmm-gpu.ready"; }
for n in gpu-rhel-1 gpu-rhel-2 gpu-ubuntu-1; do milestone "xe loaded on $n (KMM ready label)" 30 ready "$n" ||
	k get node "$n" -o json | grep -A8 '"labels"' | sed 's/^/#   /'; done
milestone "no driver on cpu-1 (no GPU)" 2 bash -c "! KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL get node cpu-1 -o json | grep -q gpu-kmm-gpu.ready"
show k get nodes -L "kmm.node.kubernetes.io/$NS.gpu-kmm-gpu.ready"

# --- a version change
say "version change: kernelModule.version 1.3 -> 1.4"
k patch clusterpolicy gpu-kmm --type merge -p '{"spec":{"kernelModule":{"version":"1.4"}}}' >>"$D/apply.log" 2>&1
milestone "Module carries version 1.4" 30 bash -c \
	"KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL -n $NS get module gpu-kmm-gpu -o jsonpath='{.spec.moduleLoader.container.version}' | grep -qx 1.4"

# --- a GPU in use blocks the removal of the driver
say "a workload holds a GPU (allocated ResourceClaim); the policy drops kernelModule"
k create namespace user >>"$D/apply.log" 2>&1
kraw POST /apis/resource.k8s.io/v1/namespaces/user/resourceclaims \
	'{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"job-gpu","namespace":"user"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.intel.com"}}]}}}' >/dev/null
kraw PATCH /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/job-gpu/status \
	'{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.intel.com","pool":"gpu-rhel-1","device":"gpu-0"}]}}}}' \
	application/merge-patch+json >/dev/null
k patch clusterpolicy gpu-kmm --type json -p '[{"op":"remove","path":"/spec/kernelModule"}]' >>"$D/apply.log" 2>&1
milestone "deletion blocked while the claim is allocated (reported)" 20 \
	grep -q 'allocated GPU ResourceClaims blocking' "$D/reports"
milestone "Module still there" 2 mod
say "the workload ends: claim deleted"
kraw DELETE /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/job-gpu >/dev/null
milestone "Module deleted once the GPU is released" 30 bash -c "! KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL -n $NS get module gpu-kmm-gpu"
milestone "KMM unloaded the driver (ready labels gone)" 30 bash -c \
	"! KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL get nodes -o json | grep -q gpu-kmm-gpu.ready"

if [ -n "${KEEP:-}" ] && [ -z "$CHECK" ]; then
	say "still running; try:"
	echo "   kubectl --server $KUBESIM_URL get clusterpolicy,nodes"
	echo "   kubectl --server $KUBESIM_URL -n $NS get modules -o yaml"
	echo "   $GPUKMM_BIN/gpukmmctl status --runtime-dir $D/run"
	echo "   Ctrl-C stops everything"
	while kill -0 "${PIDS[2]}" 2>/dev/null; do sleep 1; done
fi
[ "$FAILED" = 0 ]
