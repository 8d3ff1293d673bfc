#!/bin/bash
# deploy/: every kustomize variant renders (kubectl kustomize), applies to kubesim
# (the kinds kubesim knows; both client- and server-side), keeps the security
# settings the brief asks for, and the RBAC rules match the "API-CALL" table in
# deploy/rbac/*.yaml, which in turn matches the code's gk_kube_* calls.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh

if ! command -v kubectl >/dev/null 2>&1 || ! python3 -c 'import yaml' 2>/dev/null; then
	echo "ok - kubectl or python3-yaml absent (nothing to check) # skip"
	exit 0
fi
# gpukmm-webhook (plain HTTP, test mode) answers the admission calls of the
# webhook configurations we ship; kubesim maps their Service to it.
W=$(mktemp -d "${TMPDIR:-/tmp}/deploywh.XXXXXX") || exit 1
"${GPUKMM_BIN:-build/bin}/gpukmm-webhook" --insecure-http --listen 127.0.0.1:0 --port-file "$W/port" \
	2>"$W/webhook.log" &
WPID=$!
cleanup() { kill "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null; rm -rf "$W"; kubesim_stop; }
for _ in $(seq 1 100); do [ -s "$W/port" ] && break; sleep 0.1; done
WPORT=$(cat "$W/port" 2>/dev/null)
KUBESIM_NO_TRAP=1 kubesim_start \
	--service-url "intel-gpu-base-operator/gpukmm-webhook-service=http://127.0.0.1:$WPORT" ||
	{ echo "not ok - kubesim starts"; cleanup; exit 1; }
trap cleanup EXIT
T=$KUBESIM_DIR

VARIANTS="default sidecars openshift monitored cert-manager"
for v in $VARIANTS; do
	if kubectl kustomize "deploy/$v" >"$T/$v.yaml" 2>"$T/$v.err"; then
		echo "ok - kustomize renders deploy/$v"
	else
		echo "not ok - kustomize renders deploy/$v"; sed 's/^/#   /' "$T/$v.err"
	fi
done

# The manifest checks (pure, on the rendered YAML): prints ok/not ok lines.
python3 tests/e2e/deploy_check.py "$T" $VARIANTS

# Apply to kubesim: everything but the kinds it does not serve (SCC; monitored needs
# the Prometheus Operator's CRDs: rendered and checked only).
for v in default sidecars openshift; do
	python3 - "$T/$v.yaml" >"$T/$v.known.yaml" <<'PY'
import sys, yaml
skip = {"SecurityContextConstraints"}
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] not in skip]
yaml.safe_dump_all(docs, sys.stdout)
PY
done
check "client-side apply of deploy/default" k apply -f "$T/default.known.yaml"
check "server-side apply of deploy/sidecars (same names: takes over)" \
	k apply --server-side --force-conflicts -f "$T/sidecars.known.yaml"
check "client-side apply of deploy/openshift" k apply -f "$T/openshift.known.yaml"
check "ClusterPolicy CRD established" k wait --for condition=established --timeout=10s \
	crd/clusterpolicies.intel.com
check "the example ClusterPolicies apply" k apply -f deploy/examples/clusterpolicy-kmm.yaml \
	-f deploy/examples/clusterpolicy-kmm-build.yaml
bad=$(sed 's/^  name: gpu-kmm$/  name: gpu-kmm-name-too-long-for-kmm/' deploy/examples/clusterpolicy-kmm.yaml)
out=$(k apply -f - <<<"$bad" 2>&1)
check "the shipped validating webhook denies a bad policy" grep -q denied <<<"$out"
check "controller Deployment stored" k -n intel-gpu-base-operator get deploy gpukmm-controller
check "node DaemonSet stored" k -n intel-gpu-base-operator get ds gpukmm-node
check "Role for events in default" k -n default get role gpukmm-controller-events
# a manifest kubesim must reject: proves apply can fail here
printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: no-such-ns}\nspec: {}\n' \
	>"$T/bad.yaml"
check "apply into a missing namespace fails" bash -c "! KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL apply -f $T/bad.yaml 2>/dev/null"
