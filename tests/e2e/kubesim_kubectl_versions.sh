#!/bin/bash
# Every kubectl version installed here (kubectl.1.N on PATH, /usr/local/bin or the
# cloud SDK; KUBECTL_VERSIONS="1.27 1.33" narrows the set) against kubesim with
# default client-side validation: CRDs, a ClusterPolicy, server-side validation of
# unknown fields, label, get, server-side apply.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
FIX=tests/fixtures

kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
echo "ok - kubesim starts"
check "CRDs installed" k apply -f $FIX/kubesim/widget-crd.yaml -f deploy/crd/intel.com_clusterpolicies.yaml \
	-f $FIX/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml
check "CRDs established" k wait --for condition=established --timeout=10s crd --all
k create -f - >/dev/null <<'Y'
apiVersion: v1
kind: Node
metadata: {name: node-a}
Y

# --- every kubectl version on this machine, default (strict) validation: <= 1.28
# ask the protobuf /openapi/v2 whether fieldValidation is supported, >= 1.29
# /openapi/v3; either way the server validates (unknown field refused).
kubectls() {
	local d v seen=" "
	for d in $(tr ':' ' ' <<<"$PATH") /usr/local/bin /usr/lib/google-cloud-sdk/bin; do
		for kb in "$d"/kubectl.1.*; do
			[ -x "$kb" ] || continue
			v=${kb##*/kubectl.}
			case $seen in *" $v "*) continue ;; esac
			seen="$seen$v "
			echo "$v $kb"
		done
	done | sort -V
}
sed 's/^spec:/spec:\n  bogusField: 1/' deploy/examples/clusterpolicy-intree.yaml >"$KUBESIM_DIR/bogus.yaml"
nver=0
while read -r v kb; do
	[ -n "${KUBECTL_VERSIONS:-}" ] && case " $KUBECTL_VERSIONS " in *" $v "*) ;; *) continue ;; esac
	nver=$((nver + 1))
	kv() { env KUBECONFIG=/dev/null "$kb" --server "$KUBESIM_URL" --cache-dir "$KUBESIM_DIR/kc$v" "$@"; }
	cat >"$KUBESIM_DIR/w$v.yaml" <<Y
apiVersion: test.gpukmm.io/v1
kind: Widget
metadata: {name: v${v/./-}, namespace: default}
spec: {size: 1}
Y
	check "kubectl $v apply our CRD, the KMM CRD and a ClusterPolicy (default validation)" \
		kv apply -f deploy/crd/intel.com_clusterpolicies.yaml -f $FIX/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml \
		-f deploy/examples/clusterpolicy-kmm.yaml
	out=$(kv apply -f "$KUBESIM_DIR/bogus.yaml" 2>&1)
	check "kubectl $v: unknown field refused by the server" grep -q 'unknown field "spec.bogusField"' <<<"$out"
	check "kubectl $v label node" kv label node node-a v$v=1 --overwrite
	check "kubectl $v apply --server-side" kv apply --server-side -f "$KUBESIM_DIR/w$v.yaml"
	check "kubectl $v get -o json" kv get "widget/v${v/./-}" clusterpolicy/gpu-kmm -o json
done < <(kubectls)
echo "# kubectl versions checked besides the default: $nver"
check "at least one other kubectl version found (or none installed)" test "$nver" -gt 0 -o -z "$(kubectls)"
