#!/bin/bash
# Issue #20 through gpukmmctl: validate refuses the bad parameters/sign forms with
# their fields; render of the Secure Boot example (parameters, sign with the
# default filesToSign) is accepted by the API server with the real KMM CRD and
# by fake-kmm's KMM admission; the ClusterPolicy CRD's pattern refuses a bad
# parameter; `gpukmmctl images` on a fixture cluster, from a nodes file and from
# the cluster itself (--kubeconfig), KMM's variables substituted per kernel.
set -u
. "$GPUKMM_SRC/tests/lib/kubesim.sh"
. "$GPUKMM_SRC/tests/lib/fakekmm.sh"
CTL="$GPUKMM_BIN/gpukmmctl"
cd "$GPUKMM_SRC" || exit 1
T=$(mktemp -d "${TMPDIR:-/tmp}/gpukmm-signcli.XXXXXX") || exit 1
EX=deploy/examples/clusterpolicy-kmm-secureboot.yaml
AG=tests/fixtures/airgap
runs() { # WANT-RC CMD...: stdout in $T/out, stderr in $T/err
	local want=$1 rc
	shift
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = "$want" ] || { sed 's/^/#   /' "$T/out" "$T/err"; return 1; }
}
has() { grep -qF -- "$2" "$1" || { echo "#   missing: $2"; sed 's/^/#   /' "$1"; return 1; }; }

# ---- validate: every refused form, with its field ------------------------------------------------
P=tests/fixtures/policies/bad-sign.yaml
check "validate bad-sign.yaml: exit 1" runs 1 "$CTL" validate $P
check "parameter without =" has "$T/out" "$P: kernelModule.parameters[0] \"force_probe\" must be key=value"
check "parameter value with a shell metacharacter" has "$T/out" \
	"$P: kernelModule.parameters[1] \"max_vfs=\$(reboot)\": the value contains the character '\$'"
check "keySecret required" has "$T/out" "$P: kernelModule.sign.keySecret.name is required"
check "filesToSign under dirName" has "$T/out" \
	"$P: kernelModule.sign.filesToSign[0] \"/lib/modules/xe.ko\" must be under KMM's dirName \"/opt/\""
check "filesToSign without shell metacharacters" has "$T/out" \
	"$P: kernelModule.sign.filesToSign[1] \"/opt/xe.ko; reboot\": the character ';' is not allowed"
check "unsignedImage unless built" has "$T/out" "$P: kernelModule.kernelMappings[0]: signing needs an unsignedImage"
check "a variable KMM does not substitute" has "$T/out" \
	"$P: kernelModule.kernelMappings[1].containerImage \"registry.example.com/xe-el9:\${KERNEL_XY}\": \$KERNEL_XY is not a variable KMM substitutes"
check "mapping-level filesToSign under a container-level sign" has "$T/out" \
	"$P: kernelModule.kernelMappings[1].sign.filesToSign is required when kernelModule.sign is set too"
check "nine violations, reported together" test "$(grep -c . "$T/out")" = 9
check "the example validates" runs 0 "$CTL" validate $EX

# ---- render -> the API server with the real KMM CRD and fake-kmm's admission -------------------------
check "render the example" runs 0 "$CTL" render $EX
# (without its owner: the placeholder uid would have the garbage collector delete it)
jq 'del(.metadata.ownerReferences)' "$T/out" >"$T/module.json"
check "parameters in modprobe" test "$(jq -c .spec.moduleLoader.container.modprobe.parameters "$T/module.json")" = '["force_probe=e20b","max_vfs=7"]'
check "container-level sign with the default filesToSign" test "$(jq -c .spec.moduleLoader.container.sign "$T/module.json")" = \
	'{"keySecret":{"name":"secureboot-key"},"certSecret":{"name":"secureboot-cert"},"unsignedImage":"registry.example.com/gpu/xe-oot-kmd:1.3-${KERNEL_FULL_VERSION}","filesToSign":["/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko"]}'
fakekmm_setup || { echo "not ok - kubesim + fake-kmm start"; exit 1; }
trap 'fakekmm_cleanup; rm -rf "$T"' EXIT
k create namespace intel-gpu-base-operator >/dev/null
check "the rendered Module passes the KMM CRD and fake-kmm's admission" k apply -f "$T/module.json"
check "the Module keeps its sign" test "$(k -n intel-gpu-base-operator get module gpu-sb-gpu -o json | jq -c '.spec.moduleLoader.container.sign.filesToSign')" = \
	'["/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko"]'
jq '.spec.moduleLoader.container.sign.filesToSign = ["/lib/xe.ko"] | .metadata.name = "bad-gpu"' "$T/module.json" >"$T/bad-module.json"
out=$(k apply -f "$T/bad-module.json" 2>&1)
check "fake-kmm's admission refuses filesToSign outside dirName (KMM's message)" \
	grep -qF 'global Sign: filesToSign["/lib/xe.ko"] must be under dirName "/opt"' <<<"$out"
check "ClusterPolicy CRD applied" k apply -f deploy/crd/intel.com_clusterpolicies.yaml
k wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com >/dev/null 2>&1
check "the example is accepted by the CRD schema" k apply -f $EX
sed 's/- max_vfs=7/- "max_vfs=7 8"/' $EX >"$T/badparam.yaml"
out=$(k apply -f "$T/badparam.yaml" 2>&1)
check "the CRD's pattern refuses a parameter with whitespace, naming it" grep -qF 'spec.kernelModule.parameters[1]' <<<"$out"

# ---- images on the fixture cluster ------------------------------------------------------------------
cat >"$T/want" <<'W'
ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0@sha256:49f38fcbee4f98d748b537b1a728a12f39e56fd208c86dc3fa32ab2162c21197
ghcr.io/intel/xpumanager/xpumd:v2.0.0@sha256:bd6bad4f95274832ce6863c6f7744fc73a610903617d9def2932588138be0b85
registry.example.com/gpu/xe-oot-kmd-signed:1.3-5.14.0-427.13.1.el9_4.x86_64
registry.example.com/gpu/xe-oot-kmd-signed:1.3-6.8.0-45-generic
registry.example.com/gpu/xe-oot-kmd-signed:1.3-6.8.0-50-generic
registry.example.com/gpu/xe-oot-kmd:1.3-5.14.0-427.13.1.el9_4.x86_64
registry.example.com/gpu/xe-oot-kmd:1.3-6.8.0-45-generic
registry.example.com/gpu/xe-oot-kmd:1.3-6.8.0-50-generic
W
check "images --nodes: exit 0" runs 0 "$CTL" images --nodes $AG/nodes.yaml $EX
check "images: operands and each kernel's signed and unsigned module image, deduplicated, sorted" diff "$T/want" "$T/out"
check "images: the node without a mapping on stderr" has "$T/err" \
	"node gpu-debian-1 (kernel 6.1.0-18-amd64): no module image: no kernelMapping matches its kernel"
check "images: the node the policy does not select is not listed" bash -c "! grep -q cpu-1 '$T/err'"
check "images: KMM's sign image noted" has "$T/err" "mirror KMM's sign image too"
check "images --namespace kmm on KMM's variables" runs 0 "$CTL" images --namespace kmm --nodes $AG/nodes.yaml $AG/vars.yaml
check "images: MOD_NAMESPACE, MOD_NAME, KERNEL_XYZ/X/Y/Z; the unsigned image; first mapping wins" diff - "$T/out" <<'W'
registry.example.com/intel-gpu-plugin:0.36.0
registry.example.com/kmm/gpu-vars-gpu:6.8.0-6.8.0
registry.example.com/xe-el9:5.14.0-427.13.1.el9_4.x86_64
registry.example.com/xe-unsigned:6.8.0-50-generic
registry.example.com/xe:fixed
W
check "images: a build mapping's base images noted" has "$T/err" "kernelMappings[2] builds its image in-cluster"
check "images --json" runs 0 "$CTL" images --json --nodes $AG/nodes.yaml $AG/vars.yaml
check "json: roles, sources and kernels of the signed image" test "$(jq -c '.images[] | select(.image == "registry.example.com/xe:fixed") | [.roles, .sources, .kernels]' "$T/out")" = \
	'[["module","signed"],["spec.kernelModule.kernelMappings[1].containerImage"],["6.8.0-50-generic"]]'
check "json: the unsigned image KMM pulls to sign" test "$(jq -c '.images[] | select(.image | startswith("registry.example.com/xe-unsigned")) | [.roles, .sources]' "$T/out")" = \
	'[["unsigned"],["spec.kernelModule.kernelMappings[1].sign.unsignedImage"]]'
check "json: the built image" test "$(jq -c '.images[] | select(.image | startswith("registry.example.com/xe-el9")) | .roles' "$T/out")" = '["module","built"]'
check "json: nodes without an image" test "$(jq -c '[.nodesWithoutImage[].node]' "$T/out")" = '["gpu-debian-1","cpu-1"]'
check "images without nodes: only what does not depend on the kernel" runs 0 "$CTL" images $AG/vars.yaml
check "... the fixed image and the operand" diff - "$T/out" <<'W'
registry.example.com/intel-gpu-plugin:0.36.0
registry.example.com/xe:fixed
W
check "... the templated mappings noted" has "$T/err" "kernelMappings[0]: the image depends on the node kernel"
check "... and the templated unsigned image" has "$T/err" "kernelMappings[1]: the unsigned image depends on the node kernel"
check "images of an invalid policy: exit 1 with the violations" runs 1 "$CTL" images --nodes $AG/nodes.yaml $P
check "--nodes and --kubeconfig together: usage" runs 2 "$CTL" images --nodes $AG/nodes.yaml --kubeconfig x $EX

# the same cluster through the API
check "the fixture nodes applied to the cluster" k apply -f $AG/nodes.yaml
for n in $(k create --dry-run=client -o json -f $AG/nodes.yaml | jq -r '(.items // [.])[] | "\(.metadata.name)=\(.status.nodeInfo.kernelVersion)"'); do
	k patch node "${n%%=*}" --subresource=status --type=merge -p "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"${n#*=}\"}}}" >/dev/null
done
check "images --kubeconfig: exit 0" runs 0 "$CTL" images --kubeconfig "$KUBESIM_DIR/kubeconfig" $EX
check "images --kubeconfig: the same list as from the nodes file" diff "$T/want" "$T/out"
check "images --kubeconfig: the node without a mapping on stderr" has "$T/err" "node gpu-debian-1 (kernel 6.1.0-18-amd64)"
fakekmm_stop
check "fake-kmm stops cleanly" [ "$FK_RC" = 0 ]
