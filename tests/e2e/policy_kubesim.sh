#!/bin/bash
# The ClusterPolicy CRD through the real kubectl against kubesim: installed via
# the API, example policies applied, schema defaults (moduleName: xe), required
# fields and enums enforced, printer columns, status subresource with our status
# extensions; and a Module rendered by gpukmmctl accepted against the real KMM CRD.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
if ! command -v kubectl >/dev/null 2>&1; then
	echo "skip - kubectl not installed"
	echo "ok - kubectl absent (nothing to check)"
	exit 0
fi
kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
echo "ok - kubesim starts"
T=$KUBESIM_DIR

check "apply ClusterPolicy CRD" k apply -f deploy/crd/intel.com_clusterpolicies.yaml
check "CRD established" k wait --for condition=established --timeout=10s crd/clusterpolicies.intel.com
check "second apply of the CRD is accepted" k apply -f deploy/crd/intel.com_clusterpolicies.yaml
for f in deploy/examples/*.yaml deploy/examples/*.json; do
	check "apply $f" k apply -f "$f"
done
check "cluster-scoped (no namespace)" test "$(k get clusterpolicy gpu-kmm -o jsonpath='{.metadata.namespace}')" = ""
check "explicit moduleName kept" test "$(k get clusterpolicy gpu-kmm -o jsonpath='{.spec.kernelModule.moduleName}')" = xe
out=$(k get clusterpolicies 2>&1)
if grep -qE '^NAME +AGE' <<<"$out"; then
	echo "skip - kubesim does not serve additionalPrinterColumns yet"
	TABLE=0
else
	TABLE=1
	check "printer columns DP DRA XPU KMM READY REASON AGE" grep -qE 'NAME +DP +DRA +XPU +KMM +READY +REASON +AGE' <<<"$out"
fi
check "five policies listed" test "$(k get clusterpolicies -o name | wc -l)" = 5

cat >"$T/norr.yaml" <<'Y'
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: norr}
spec: {useNFDLabeling: true}
Y
cat >"$T/enum.yaml" <<'Y'
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: enum}
spec: {resourceRegistration: vfio}
Y
cat >"$T/nomaps.yaml" <<'Y'
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: nomaps}
spec: {resourceRegistration: dp, kernelModule: {kernelMappings: []}}
Y
if k apply -f "$T/norr.yaml" >/dev/null 2>&1; then
	# capability probe: this kubesim does not validate/default CRD schemas yet
	echo "skip - kubesim does not enforce CRD schemas yet (required, enum, minItems, defaults)"
	k delete -f "$T/norr.yaml" >/dev/null 2>&1
else
	echo "ok - missing resourceRegistration rejected by the schema"
	check "bad resourceRegistration enum rejected" bash -c "! KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $T/kcache apply -f $T/enum.yaml"
	check "kernelMappings minItems 1 enforced" bash -c "! KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $T/kcache apply -f $T/nomaps.yaml"
	check "schema default moduleName=xe applied" test "$(k get clusterpolicy gpu-build -o jsonpath='{.spec.kernelModule.moduleName}')" = xe
fi
# gpukmmctl rejects them whatever the API server does
for f in norr enum nomaps; do
	"$GPUKMM_BIN/gpukmmctl" validate "$T/$f.yaml" >/dev/null
	check "gpukmmctl validate rejects $f (exit 1)" test $? -eq 1
done

# the size limits (maxItems, maxLength): the API server and gpukmmctl say the same
{
	printf 'apiVersion: intel.com/v1alpha1\nkind: ClusterPolicy\nmetadata: {name: many}\nspec:\n  resourceRegistration: dp\n  kernelModule:\n    kernelMappings:\n'
	for i in $(seq 0 128); do printf '    - {regexp: "^6\\\\.%d$", containerImage: "registry.example.com/xe:1.0"}\n' "$i"; done
	printf '    - {regexp: "%s", containerImage: "registry.example.com/xe:1.0"}\n' "$(head -c 1025 /dev/zero | tr '\0' a)"
} >"$T/many.yaml"
want_many='spec.kernelModule.kernelMappings: Too many: 130: must have at most 128 items'
api_says=$(KUBECONFIG=/dev/null kubectl --server "$KUBESIM_URL" --cache-dir "$T/kcache" apply -f "$T/many.yaml" 2>&1)
echo "# API server: $api_says" | cut -c1-300
check "the API server refuses 130 kernelMappings: $want_many" grep -qF "$want_many" <<<"$api_says"
ctl_says=$("$GPUKMM_BIN/gpukmmctl" validate "$T/many.yaml" 2>&1)
echo "# gpukmmctl: $ctl_says"
check "gpukmmctl validate says the same" grep -qF "$want_many" <<<"$ctl_says"
sed -i '/containerImage/{/regexp: "a/!d}' "$T/many.yaml" # only the 1025-byte regexp left
printf '    - {regexp: "^.+$", containerImage: "registry.example.com/xe:1.0"}\n' >>"$T/many.yaml"
want_long='spec.kernelModule.kernelMappings[0].regexp: Too long: may not be more than 1024 bytes'
api_says=$(KUBECONFIG=/dev/null kubectl --server "$KUBESIM_URL" --cache-dir "$T/kcache" apply -f "$T/many.yaml" 2>&1)
check "the API server refuses a 1025-byte regexp" grep -qF "Too long: may not be more than 1024 bytes" <<<"$api_says"
check "gpukmmctl validate says: $want_long" bash -c "'$GPUKMM_BIN/gpukmmctl' validate '$T/many.yaml' 2>&1 | grep -qF '$want_long'"

# status subresource with the gpukmm extensions
kraw PATCH /apis/intel.com/v1alpha1/clusterpolicies/gpu-kmm/status \
	'{"status":{"kmmStatus":"1/2","errors":["module loader not fully available (1/2) for modules.kmm.sigs.x-k8s.io/gpu-kmm-gpu"],"observedGeneration":1,"conditions":[{"type":"Ready","status":"False","reason":"ModuleNotLoaded","message":"1 of 2 nodes","lastTransitionTime":"2026-12-02T12:00:00Z"}],"nodes":{"gpuNodes":2,"ootLoaded":1,"notLoaded":1,"problems":[{"node":"n2","reason":"VFsActive","message":"VFs active"}]}}}' \
	application/merge-patch+json >/dev/null
check "status patch accepted ($(kraw_code))" test "$(kraw_code)" = 200
if [ "$TABLE" = 1 ]; then
	check "KMM column shows kmmStatus" bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $T/kcache get clusterpolicy gpu-kmm | grep -q '1/2'"
	check "Ready column from conditions" bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $T/kcache get clusterpolicy gpu-kmm | grep -q 'False'"
fi
check "kmmStatus stored" test "$(k get clusterpolicy gpu-kmm -o jsonpath='{.status.kmmStatus}')" = 1/2
check "nodes summary stored" test "$(k get clusterpolicy gpu-kmm -o jsonpath='{.status.nodes.problems[0].reason}')" = VFsActive
check "status write did not bump generation" test "$(k get clusterpolicy gpu-kmm -o jsonpath='{.metadata.generation}')" = 1

# the rendered Module against the real KMM CRD in the API server
check "apply KMM Module CRD" k apply -f tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml
check "KMM CRD established" k wait --for condition=established --timeout=10s crd/modules.kmm.sigs.x-k8s.io
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: intel-gpu-base-operator}\n' >"$T/ns.yaml"
check "create operator namespace" k apply -f "$T/ns.yaml"
uid=$(k get clusterpolicy gpu-kmm -o jsonpath='{.metadata.uid}')
k get clusterpolicy gpu-kmm -o json >"$T/live.json"
"$GPUKMM_BIN/gpukmmctl" render "$T/live.json" >"$T/module.json"
check "render the live policy (real uid)" grep -q "\"uid\":	\"$uid\"" "$T/module.json"
check "rendered Module accepted by the API server" k apply -f "$T/module.json"
check "Module stored" test "$(k -n intel-gpu-base-operator get modules.kmm.sigs.x-k8s.io gpu-kmm-gpu -o jsonpath='{.spec.moduleLoader.container.kernelMappings[1].regexp}')" = '^6\.8\.0-[0-9]+-generic$'
check "Module owned by the live policy" test "$(k -n intel-gpu-base-operator get modules.kmm.sigs.x-k8s.io gpu-kmm-gpu -o jsonpath='{.metadata.ownerReferences[0].uid}')" = "$uid"
check "second apply unchanged" bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $T/kcache apply -f $T/module.json | grep -q unchanged"
kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
