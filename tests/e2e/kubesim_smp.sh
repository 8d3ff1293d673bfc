#!/bin/bash
# Strategic merge patch through the real kubectl: the patches kubectl computes for
# taint (remove / overwrite / add), label, annotate, cordon, edit and client-side
# apply (3-way, last-applied annotation) must leave the object exactly as a real API
# server would (Node taints are an atomic list; containers/env merge by name).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh

if ! command -v kubectl >/dev/null 2>&1; then
	echo "ok - kubectl absent (nothing to check)"
	exit 0
fi
kubesim_start || { echo "not ok - kubesim starts"; exit 1; }
D=$KUBESIM_DIR
jp() { k get "$1" "$2" -o jsonpath="$3" 2>&1; }
expect() { # expect NAME WANT GOT
	if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "not ok - $1"; echo "#   want: $2"; echo "#   got:  $3"; fi
}

cat >"$D/node.yaml" <<'Y'
apiVersion: v1
kind: Node
metadata: {name: n1}
spec:
  taints:
  - {key: a, value: "1", effect: NoSchedule}
  - {key: b, value: "2", effect: NoExecute}
  - {key: c, effect: PreferNoSchedule}
Y
check "create node with three taints" k create -f "$D/node.yaml"
TAINTS='{range .spec.taints[*]}{.key}={.value}:{.effect} {end}'

check "kubectl taint node n1 a-" k taint node n1 a-
expect "taint a removed, b and c kept" "b=2:NoExecute c=:PreferNoSchedule " "$(jp node n1 "$TAINTS")"
check "kubectl taint --overwrite" k taint node n1 b=3:NoExecute --overwrite
expect "taint b overwritten in place" "b=3:NoExecute c=:PreferNoSchedule " "$(jp node n1 "$TAINTS")"
check "kubectl taint adds a second effect for key c" k taint node n1 c=:NoSchedule
# kubectl puts the new taint first and sends the whole list
expect "same key, two effects" "c=:NoSchedule b=3:NoExecute c=:PreferNoSchedule " "$(jp node n1 "$TAINTS")"
check "kubectl taint c:NoSchedule- removes one effect only" k taint node n1 c:NoSchedule-
expect "other effect of c kept" "b=3:NoExecute c=:PreferNoSchedule " "$(jp node n1 "$TAINTS")"
check "kubectl taint without --overwrite refuses a change" in_shell '! k taint node n1 b=4:NoExecute 2>/dev/null' 
check "remove the last taints" k taint node n1 b- c-
expect "no taints left" "" "$(jp node n1 '{.spec.taints}')"

check "label" k label node n1 x=1 y=2
check "label overwrite and remove" k label node n1 x=3 y- --overwrite
expect "labels" "3|" "$(jp node n1 '{.metadata.labels.x}|{.metadata.labels.y}')"
check "annotate" k annotate node n1 note=hi
check "annotate remove" k annotate node n1 note-
expect "annotation removed" "" "$(jp node n1 '{.metadata.annotations.note}')"
check "cordon" k cordon n1
check "uncordon" k uncordon n1
expect "uncordoned" "" "$(jp node n1 '{.spec.unschedulable}')"

# kubectl edit computes a two-way strategic merge patch of what the editor changed
printf '#!/bin/sh\nsed -i "s/^    x: \\"3\\"/    x: \\"4\\"/; s/^  labels:/  labels:\\n    edited: \\"yes\\"/" "$1"\n' >"$D/editor"
chmod +x "$D/editor"
check "kubectl edit (editor changes and adds a label)" env KUBE_EDITOR="$D/editor" \
	bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL --cache-dir $D/kcache edit node n1"
expect "edit applied" "4 yes" "$(jp node n1 '{.metadata.labels.x} {.metadata.labels.edited}')"

# client-side apply: version 2 removes container b and env B, reorders containers,
# changes an image; a field set by someone else (annotation) survives
ds() { # ds FILE CONTAINERS...
	local f=$1
	shift
	{
		cat <<'Y'
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d1, namespace: default}
spec:
  selector: {matchLabels: {app: d1}}
  template:
    metadata: {labels: {app: d1}}
    spec:
      containers:
Y
		printf '%s\n' "$@"
	} >"$f"
}
ds "$D/ds1.yaml" "      - {name: a, image: a:1, env: [{name: A, value: '1'}, {name: B, value: '2'}]}" \
	"      - {name: b, image: b:1}" "      - {name: c, image: c:1}"
ds "$D/ds2.yaml" "      - {name: c, image: c:2}" "      - {name: a, image: a:1, env: [{name: A, value: '1'}]}"
check "apply DaemonSet v1" k apply -f "$D/ds1.yaml"
check "someone else annotates it" k annotate ds d1 other=kept
check "apply DaemonSet v2" k apply -f "$D/ds2.yaml"
C='{range .spec.template.spec.containers[*]}{.name}:{.image}:{range .env[*]}{.name}{end} {end}'
expect "containers after apply: b removed, order c,a, env B removed" "c:c:2: a:a:1:A " "$(jp ds d1 "$C")"
expect "foreign annotation survives apply" "kept" "$(jp ds d1 '{.metadata.annotations.other}')"
out=$(k apply -f "$D/ds2.yaml" 2>&1)
check "apply v2 again is unchanged" grep -q unchanged <<<"$out"
check "kubectl diff reports no difference" k diff -f "$D/ds2.yaml"

# patch --type strategic with directives, as written by hand
check "strategic patch: delete a container by merge key" \
	k patch ds d1 -p '{"spec":{"template":{"spec":{"containers":[{"name":"c","$patch":"delete"}]}}}}'
expect "container c gone" "a:a:1:A " "$(jp ds d1 "$C")"
out=$(k patch ds d1 -p '{"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}}' 2>&1)
check "strategic patch without merge key is refused" grep -q "merge key" <<<"$out"
out=$(k patch node n1 -p '{"metadata":{"labels":{"$patch":"bogus"}}}' 2>&1)
check "unknown \$patch directive is refused" grep -qi "patch type" <<<"$out"
