#!/bin/bash
# kubesim --kube-version 1.31..1.34 with the real kubectl: the server version kubectl
# sees, the resource.k8s.io version it lists, a ResourceClaim applied in the shape of
# that version (inline class on v1alpha3/v1beta1, `exactly` on v1beta2/v1), read back
# in another served version, the wrong shape refused with the API server's message;
# DeviceClass cluster-scoped; --runtime-config; --help documents the flag.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
kubesim_need_kubectl || exit 0

help=$("$KUBESIM_BIN" --help)
check "--help documents --kube-version and the resource.k8s.io versions" \
	grep -q -- '--kube-version 1.31|1.32|1.33|1.34' <<<"$help"
check "--help documents --runtime-config" grep -q -- '--runtime-config resource.k8s.io/VERSION' <<<"$help"
"$KUBESIM_BIN" --listen 127.0.0.1:0 --kube-version 1.30 >/dev/null 2>&1
check "an unsupported --kube-version exits 2" test $? = 2

inline_claim() { # NAME VERSION
	printf '%s\n' "apiVersion: resource.k8s.io/$2" "kind: ResourceClaim" "metadata: {name: $1, namespace: default}" \
		"spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.intel.com, count: 1}]}}"
}
exactly_claim() { # NAME VERSION
	printf '%s\n' "apiVersion: resource.k8s.io/$2" "kind: ResourceClaim" "metadata: {name: $1, namespace: default}" \
		"spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.intel.com, count: 1}}]}}"
}

for rel in "31 v1alpha3 inline" "32 v1beta1 inline" "33 v1beta2 exactly" "34 v1 exactly"; do
	set -- $rel
	minor=$1 ver=$2 shape=$3
	kubesim_start --kube-version "1.$minor" || { echo "not ok - kubesim 1.$minor starts"; exit 1; }
	out=$(k version -o json 2>/dev/null)
	check "1.$minor: kubectl sees server minor $minor" jq -e --arg m "$minor" '.serverVersion.minor == $m' <<<"$out"
	out=$(k api-resources --api-group=resource.k8s.io --no-headers 2>/dev/null)
	check "1.$minor: api-resources lists resourceclaims in resource.k8s.io/$ver" \
		grep -Eq "^resourceclaims +resource.k8s.io/$ver +true +ResourceClaim" <<<"$out"
	check "1.$minor: deviceclasses and resourceslices are cluster-scoped" \
		test "$(grep -Ec '^(deviceclasses|resourceslices) .* false ' <<<"$out")" = 2
	if [ "$shape" = inline ]; then good=inline_claim bad=exactly_claim; else good=exactly_claim bad=inline_claim; fi
	$good c1 "$ver" | k apply -f - >/dev/null 2>&1
	check "1.$minor: kubectl apply of a $shape claim in $ver" test $? = 0
	out=$($bad c2 "$ver" | k apply -f - 2>&1)
	if [ "$shape" = inline ]; then
		check "1.$minor: the v1beta2/v1 shape is refused in $ver (unknown field exactly)" \
			grep -q 'unknown field "spec.devices.requests\[0\].exactly"' <<<"$out"
	else
		check "1.$minor: the v1beta1 shape is refused in $ver (unknown field deviceClassName)" \
			grep -q 'unknown field "spec.devices.requests\[0\].deviceClassName"' <<<"$out"
	fi
	k patch resourceclaim c1 --subresource=status --type=merge -p \
		'{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.intel.com","pool":"n1","device":"card0"}]}}}}' >/dev/null
	check "1.$minor: allocation result's driver through kubectl" \
		test "$(k get resourceclaim c1 -o jsonpath='{.status.allocation.devices.results[0].driver}')" = gpu.intel.com
	k apply -f - >/dev/null 2>&1 <<Y
apiVersion: resource.k8s.io/$ver
kind: DeviceClass
metadata: {name: gpu.intel.com}
spec: {selectors: [{cel: {expression: "device.driver == 'gpu.intel.com'"}}]}
Y
	check "1.$minor: DeviceClass applied" k get deviceclass gpu.intel.com
	kubesim_stop
done

# 1.33 serves two versions: one object, both shapes
kubesim_start --kube-version 1.33 || { echo "not ok - kubesim 1.33 starts"; exit 1; }
inline_claim c1 v1beta1 | k apply -f - >/dev/null
check "1.33: written in v1beta1, read in v1beta2 under exactly" \
	test "$(k get resourceclaims.v1beta2.resource.k8s.io c1 -o jsonpath='{.spec.devices.requests[0].exactly.deviceClassName}')" = gpu.intel.com
check "1.33: and in v1beta1 inline" \
	test "$(k get resourceclaims.v1beta1.resource.k8s.io c1 -o jsonpath='{.spec.devices.requests[0].deviceClassName}')" = gpu.intel.com
kubesim_stop

# --runtime-config: DRA off, and the betas of 1.34 on
kubesim_start --kube-version 1.32 --runtime-config resource.k8s.io/v1beta1=false || { echo "not ok - kubesim starts"; exit 1; }
check "1.32 with resource.k8s.io/v1beta1=false: no resource.k8s.io group" \
	bash -c "! KUBECONFIG=/dev/null $KUBECTL --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache api-versions | grep -q resource.k8s.io"
kubesim_stop
kubesim_start --kube-version 1.34 --runtime-config resource.k8s.io/v1beta2=true,resource.k8s.io/v1beta1=true ||
	{ echo "not ok - kubesim starts"; exit 1; }
out=$(k api-versions 2>/dev/null | grep resource.k8s.io | tr '\n' ' ')
check "1.34 with the betas on: v1, v1beta1, v1beta2 served" test "$out" = "resource.k8s.io/v1 resource.k8s.io/v1beta1 resource.k8s.io/v1beta2 "
kubesim_stop

# no flag: kubesim's historic answer
kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
check "default: server minor 32" test "$(k version -o json 2>/dev/null | jq -r .serverVersion.minor)" = 32
check "default: resource.k8s.io/v1 only" test "$(k api-versions 2>/dev/null | grep -c resource.k8s.io)" = 1
kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
