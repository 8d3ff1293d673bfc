#!/bin/bash
# gpukmmctl validate / render on the example policies and the bad fixtures.
set -u
CTL="$GPUKMM_BIN/gpukmmctl"
SRC="$GPUKMM_SRC"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; fails=$((fails + 1)); }
check() { # name expected-rc command...
	local name=$1 want=$2; shift 2
	"$@" >"$TMP/out" 2>"$TMP/err"
	local rc=$?
	if [ "$rc" = "$want" ]; then ok "$name"; else nok "$name (rc $rc, want $want)"; sed 's/^/# /' "$TMP/out" "$TMP/err"; fi
}
has() { # name file fixed-string
	if grep -qF -- "$3" "$2"; then ok "$1"; else nok "$1: missing '$3'"; sed 's/^/# /' "$2"; fi
}

cd "$SRC"
for f in deploy/examples/*.yaml deploy/examples/*.json; do
	check "validate $f" 0 "$CTL" validate "$f"
	has "validate $f prints ok" "$TMP/out" "$f: ok"
done
check "validate several files at once" 0 "$CTL" validate deploy/examples/clusterpolicy-kmm.yaml deploy/examples/clusterpolicy-intree.yaml
check "validate from stdin" 0 sh -c "'$CTL' validate - < deploy/examples/clusterpolicy-kmm.yaml"
has "stdin is named -" "$TMP/out" "-: ok"

P=tests/fixtures/policies
check "bad-upstream rejected" 1 "$CTL" validate $P/bad-upstream.yaml
has "invalid regexp" "$TMP/out" "$P/bad-upstream.yaml: kernelModule.kernelMappings[0].regexp: invalid regular expression: error parsing regexp: missing closing ]: \`[invalid\`"
has "no tag" "$TMP/out" "kernelModule.kernelMappings[0].containerImage: image \"registry.example.com/xe-driver\" must include an explicit tag or digest"
has "regexp required" "$TMP/out" "kernelModule.kernelMappings[1]: regexp is required"
has "image or build" "$TMP/out" "kernelModule.kernelMappings[2]: one of containerImage or build must be set"
has "dockerfile name" "$TMP/out" "kernelModule.kernelMappings[3].build.dockerfileConfigMap.name is required"
has "loading order first" "$TMP/out" "kernelModule.modulesLoadingOrder[0] must be moduleName \"xe\""
has "loading order dup" "$TMP/out" "kernelModule.modulesLoadingOrder[1]: duplicate entry \"drm_buddy\""
n=$(grep -c . "$TMP/out")
[ "$n" = 7 ] && ok "all 7 violations reported together" || nok "violations reported: $n"

check "bad-types rejected" 1 "$CTL" validate $P/bad-types.yaml
has "type error by field" "$TMP/out" "spec.useNFDLabeling: expected boolean, got string"
has "map value type" "$TMP/out" "spec.nodeSelector.gpu: expected string, got boolean"
has "typo caught" "$TMP/out" "spec.kernelmodule: unknown field"
has "enum" "$TMP/out" "spec.resourceRegistration: Unsupported value: \"vfio\""
has "minItems" "$TMP/out" "spec.kernelModule.kernelMappings: Invalid value: 0"

check "bad-ours rejected" 1 "$CTL" validate $P/bad-ours.yaml
has "build needs image" "$TMP/out" "kernelModule.kernelMappings[0].containerImage is required when build is set"
has "KMM name limit" "$TMP/out" "exceeds KMM's maximum of 41; use a ClusterPolicy name of at most 14 characters"
check "name limit depends on namespace" 1 "$CTL" validate --namespace kmm $P/bad-ours.yaml
if grep -q "maximum of 41" "$TMP/out"; then nok "short namespace still over the limit"; else ok "short namespace fits"; fi

check "multi-document file" 1 "$CTL" validate $P/multi.yaml
has "other kinds skipped" "$TMP/err" "$P/multi.yaml (document 1): skipped: kind Namespace is not ClusterPolicy"
has "document 2 ok" "$TMP/out" "$P/multi.yaml (document 2): ok"
has "levelzero warning" "$TMP/out" "$P/multi.yaml (document 3): warning: dp.levelzero is no longer used and will be ignored."
has "pci id" "$TMP/out" "$P/multi.yaml (document 3): invalid PCI device ID in dp.allowIDs: \"0x56A0\""

check "broken YAML is unreadable (2)" 2 "$CTL" validate $P/broken.yaml
has "names the YAML problem" "$TMP/err" "$P/broken.yaml: not valid YAML or JSON: line 4"
check "missing file (2)" 2 "$CTL" validate "$TMP/nope.yaml"
has "names the missing file" "$TMP/err" "$TMP/nope.yaml: cannot open: No such file or directory"
check "worst status wins" 2 "$CTL" validate deploy/examples/clusterpolicy-kmm.yaml "$TMP/nope.yaml"
printf '\0\1\2' >"$TMP/bin"
check "binary input (2)" 2 "$CTL" validate "$TMP/bin"
: >"$TMP/empty.yaml"
check "empty file has no policy (1)" 1 "$CTL" validate "$TMP/empty.yaml"
has "says no policy" "$TMP/out" "no ClusterPolicy found"
printf 'a: &x [1]\nb: *x\n' >"$TMP/alias.yaml"
check "YAML aliases refused (2)" 2 "$CTL" validate "$TMP/alias.yaml"
check "no file is a usage error" 2 "$CTL" validate
check "validate --help" 0 "$CTL" validate --help
check "unknown option" 2 "$CTL" validate --bogus x

check "render example" 0 "$CTL" render deploy/examples/clusterpolicy-kmm.yaml
has "module name" "$TMP/out" '"name":	"gpu-kmm-gpu"'
has "uid placeholder" "$TMP/out" '"uid":	"00000000-0000-0000-0000-000000000000"'
has "module loader SA" "$TMP/out" '"serviceAccountName":	"module-loader"'
has "pull policy" "$TMP/out" '"imagePullPolicy":	"IfNotPresent"'
has "in-tree: admin's list, then moduleName" "$TMP/out" '"inTreeModulesToRemove":	["i915", "xe"]'
has "template kept" "$TMP/out" 'xe-oot-kmd:1.3-${KERNEL_FULL_VERSION}'
if command -v python3 >/dev/null; then
	if python3 -c 'import json,sys; m=json.load(sys.stdin); assert m["kind"]=="Module"; assert "devicePlugin" not in m["spec"]' <"$TMP/out"; then
		ok "render output is JSON"; else nok "render output is not JSON"; fi
fi
check "render with namespace and SA" 0 "$CTL" render --namespace kmm --service-account loader deploy/examples/clusterpolicy-kmm-build.yaml
has "namespace used" "$TMP/out" '"namespace":	"kmm"'
has "SA used" "$TMP/out" '"serviceAccountName":	"loader"'
has "build selector" "$TMP/out" '"selector":	{'
cat >"$TMP/uid.json" <<'J'
{"apiVersion":"intel.com/v1alpha1","kind":"ClusterPolicy","metadata":{"name":"u","uid":"1234"},"spec":{"resourceRegistration":"dp","kernelModule":{"kernelMappings":[{"regexp":"^.+$","containerImage":"r.io/x:1"}]}}}
J
jq '.spec.resourceRegistration = "dra"' "$TMP/uid.json" >"$TMP/dra.json"
check "render keeps a real uid" 0 "$CTL" render "$TMP/uid.json"
has "uid from file" "$TMP/out" '"uid":	"1234"'
check "render in-tree policy renders nothing" 0 "$CTL" render deploy/examples/clusterpolicy-intree.yaml
[ -s "$TMP/out" ] && nok "in-tree printed a Module" || ok "in-tree prints nothing"
has "says why" "$TMP/err" "no spec.kernelModule"
check "render refuses an invalid policy" 1 "$CTL" render $P/bad-upstream.yaml
[ -s "$TMP/out" ] && nok "invalid policy rendered" || ok "nothing rendered for an invalid policy"
check "render unreadable (2)" 2 "$CTL" render $P/broken.yaml
check "render needs exactly one file" 2 "$CTL" render a b
check "render --help" 0 "$CTL" render --help
has "help mentions placeholder" "$TMP/out" "placeholder"
# the webhook's defaults, shown by validate and used by render --all
check "validate shows the defaults" 0 "$CTL" validate deploy/examples/clusterpolicy-intree.yaml
has "default device plugin image" "$TMP/out" 'default /spec/dp = {"plugin":"docker.io/intel/intel-gpu-plugin:0.36.0@sha256:'
has "default monitoringResource" "$TMP/out" 'default /spec/xpu/monitoringResource = "monitoring"'
check "render --all" 0 "$CTL" render --all deploy/examples/clusterpolicy-kmm.yaml
if jq -e '.kind == "List" and ([.items[].kind] | index("Module") == 0) and ([.items[] | select(.kind == "DaemonSet")] | length) >= 1' \
	"$TMP/out" >/dev/null; then ok "render --all: one List, the Module first, then the operands"; else nok "render --all: $(head -c 300 "$TMP/out")"; fi
if jq -e '[.items[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[0].image | startswith("docker.io/intel/intel-gpu-plugin") or startswith("ghcr.io/intel/")] | all' \
	"$TMP/out" >/dev/null; then ok "render --all: defaulted images"; else nok "render --all images"; fi
if jq -e '[.items[] | .metadata.ownerReferences[0].name == "gpu-kmm"] | all' "$TMP/out" >/dev/null; then
	ok "render --all: every object owned by the policy"; else nok "render --all owners"; fi
check "render --all --dra-version none on a dra policy" 0 "$CTL" render --all --dra-version none "$TMP/dra.json"
has "DRA not enabled said" "$TMP/err" "DRA is not enabled in the cluster, but ClusterPolicy requests it."
check "render --all --dra-version bad" 2 "$CTL" render --all --dra-version v9 deploy/examples/clusterpolicy-kmm.yaml
check "gpukmmctl lists both" 0 "$CTL" --help
has "validate listed" "$TMP/out" "validate"
has "render listed" "$TMP/out" "render"
exit $((fails > 0))
