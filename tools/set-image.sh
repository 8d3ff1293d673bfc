#!/bin/sh
# Points deploy/ at an image: tools/set-image.sh NAME TAG [DEPLOY-DIR]
# Rewrites deploy/version/kustomization.yaml (the component every variant uses):
# the image gpukmm becomes NAME:TAG and every object's app.kubernetes.io/version
# label TAG. `make deploy-image IMAGE=NAME` calls it with the version `gpukmm
# --version` prints (the tag `make image` built). Pulling from a mirror: the same
# with the mirror's NAME.
set -eu
[ $# -ge 2 ] || { echo "usage: tools/set-image.sh NAME TAG [DEPLOY-DIR]" >&2; exit 2; }
name=$1 tag=$2 f=${3:-deploy}/version/kustomization.yaml
# an image reference's tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; a name: no tag, no digest
echo "$tag" | grep -Eqx '[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}' || { echo "set-image.sh: bad tag '$tag'" >&2; exit 2; }
echo "$name" | grep -Eqx '[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(:[0-9]+/[a-z0-9._/-]+)?' ||
	{ echo "set-image.sh: bad image name '$name' (no tag or digest)" >&2; exit 2; }
[ -f "$f" ] || { echo "set-image.sh: no $f" >&2; exit 2; }
tmp=$f.tmp.$$
sed -e "s|^\(  newName:\).*|\1 $name|" -e "s|^\(  newTag:\).*|\1 \"$tag\"|" \
	-e "s|^\(    app.kubernetes.io/version:\).*|\1 \"$tag\"|" "$f" >"$tmp"
mv "$tmp" "$f"
echo "deploy: image $name:$tag"
