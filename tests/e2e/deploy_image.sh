#!/bin/bash
# The image deploy/ runs (issue #17): one name and version tag for every gpukmm
# container of every variant, pulled IfNotPresent, the same tag as every object's
# app.kubernetes.io/version label; `make image` tags the image with the version the
# binaries print (VERSION_STR, passed into the build), `make deploy-image` and
# tools/set-image.sh point deploy/ at it, or at a mirror.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
command -v kubectl >/dev/null && python3 -c 'import yaml' 2>/dev/null ||
	{ echo "ok - kubectl or python3-yaml absent (nothing to check) # skip"; exit 0; }
T=$(mktemp -d "${TMPDIR:-/tmp}/deploy-image.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
FAILED=0
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; FAILED=1; }
check() { local n=$1; shift; if "$@" >/dev/null 2>&1; then ok "$n"; else notok "$n"; fi; }
VARIANTS="default sidecars openshift monitored cert-manager"
images() { # DIR VARIANT: "image pullPolicy" of every container, and the version labels
	kubectl kustomize "$1/$2" | python3 -c '
import sys, yaml
for o in yaml.safe_load_all(sys.stdin):
    if not o: continue
    print("label", o["metadata"].get("labels", {}).get("app.kubernetes.io/version"))
    if o["kind"] in ("Deployment", "DaemonSet"):
        s = o["spec"]["template"]["spec"]
        for c in s.get("initContainers", []) + s["containers"]:
            print("image", c["image"], c.get("imagePullPolicy"))' | sort -u
}
for v in $VARIANTS; do
	images deploy "$v" >"$T/$v.shipped"
	tag=$(sed -n 's/^  newTag: "\(.*\)"$/\1/p' deploy/version/kustomization.yaml)
	check "deploy/$v: every gpukmm container runs gpukmm:$tag, IfNotPresent; every object is version $tag" \
		diff <(printf 'image gpukmm:%s IfNotPresent\nlabel %s\n' "$tag" "$tag") "$T/$v.shipped"
done
# a mirror and a release
cp -r deploy "$T/deploy"
REF=registry.example.com:5000/mirror/gpukmm TAG=v0.6.0-3-g1a2b3c4
check "tools/set-image.sh NAME TAG" tools/set-image.sh "$REF" "$TAG" "$T/deploy"
for v in $VARIANTS; do
	check "deploy/$v after set-image.sh: $REF:$TAG everywhere, the labels follow" diff \
		<(printf 'image %s:%s IfNotPresent\nlabel %s\n' "$REF" "$TAG" "$TAG") <(images "$T/deploy" "$v")
done
check "set-image.sh refuses a tag that is not one" bash -c "! tools/set-image.sh x 'a:b' '$T/deploy'"
check "... and a name with a tag" bash -c "! tools/set-image.sh x:1 v1 '$T/deploy'"
# make image / make deploy-image: the version the binaries print
check "make image tags IMAGE with VERSION and passes it into the build" \
	grep -qx -- 'echo build -f Containerfile --build-arg VERSION=1.2.3 -t r.example/gpukmm:1.2.3 .' \
	<(make -s -n image CONTAINER_ENGINE=echo VERSION=1.2.3 IMAGE=r.example/gpukmm)
check "make deploy-image: the same VERSION into deploy/" grep -qx -- 'tools/set-image.sh r.example/gpukmm 1.2.3' \
	<(make -s -n deploy-image VERSION=1.2.3 IMAGE=r.example/gpukmm)
want=$(git describe --tags --always --dirty 2>/dev/null || echo unknown)
check "without VERSION: the tag is git describe, what --version prints ($want)" \
	grep -q -- "-t gpukmm:$want " <(make -s -n image CONTAINER_ENGINE=echo)
check "the Containerfile builds with that VERSION" grep -q 'make .*VERSION="\$VERSION"' Containerfile
exit $FAILED
