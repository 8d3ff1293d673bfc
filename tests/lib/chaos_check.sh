#!/bin/bash
# The chaos test's independent checker: reads the cluster from the API server only
# (curl + jq, never the services' logs or sockets) and prints one "DIVERGE: ..."
# line for every place where the cluster differs from what a fresh, calm
# computation gives for the ClusterPolicies as they are now:
#   - Module <cp>-gpu exists (not deleting) iff spec.kernelModule is set, and its
#     spec equals `gpukmmctl render` of the policy; controller owner reference =
#     the policy's uid; no other Module in the operator namespace
#   - the gated DaemonSets (<cp>-device-plugin, -gpu-dra, -xpu-manager) carry the
#     KMM ready-label key in their pod nodeSelector iff kernelModule is set
#     (CHAOS_GATER=1), and keep their own selector key
#   - status: observedGeneration = generation, no errors, kmmStatus = the Module's
#     available/desired counts (N/A without kernelModule), Ready=True iff nothing is
#     left to load
#   - no policy stuck deleting (the caller frees every claim first)
# Usage: chaos_check.sh API_URL NAMESPACE      exit 0 = no divergence
set -u
URL=$1 NS=$2
CTL=${GPUKMM_BIN:-build/bin}/gpukmmctl
get() { curl -sS --max-time 10 "$URL$1"; }
n=0
diverge() { echo "DIVERGE: $*"; n=$((n + 1)); }

cps=$(get /apis/intel.com/v1alpha1/clusterpolicies) || { echo "DIVERGE: API unreachable"; exit 1; }
mods=$(get "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules") || exit 1
dss=$(get "/apis/apps/v1/namespaces/$NS/daemonsets") || exit 1
jq -e '.items' <<<"$cps" >/dev/null 2>&1 || { echo "DIVERGE: cannot list ClusterPolicies: $(head -c 200 <<<"$cps")"; exit 1; }
jq -e '.items' <<<"$mods" >/dev/null 2>&1 || { echo "DIVERGE: cannot list Modules: $(head -c 200 <<<"$mods")"; exit 1; }

wanted_mods=()
for name in $(jq -r '.items[].metadata.name' <<<"$cps"); do
	cp=$(jq -c --arg n "$name" '.items[] | select(.metadata.name == $n)' <<<"$cps")
	jq -e '.metadata.deletionTimestamp' <<<"$cp" >/dev/null && { diverge "$name: still deleting (finalizers $(jq -c .metadata.finalizers <<<"$cp"))"; continue; }
	km=$(jq -c '.spec.kernelModule // empty' <<<"$cp")
	mod=$(jq -c --arg n "$name-gpu" '.items[] | select(.metadata.name == $n)' <<<"$mods")
	key="kmm.node.kubernetes.io/$NS.$name-gpu.ready"
	want_ready=True
	if [ -n "$km" ]; then
		wanted_mods+=("$name-gpu")
		if [ -z "$mod" ]; then
			diverge "$name: kernelModule set but Module $name-gpu missing"
			want_ready=False
		else
			jq -e '.metadata.deletionTimestamp' <<<"$mod" >/dev/null && diverge "$name: Module $name-gpu is being deleted"
			want=$(jq 'del(.status)' <<<"$cp" | "$CTL" render --namespace "$NS" - 2>&1 | jq -S '.spec' 2>/dev/null)
			# the KMM CRD defaults modprobe.dirName to /opt: the API server adds it
			have=$(jq -S --argjson w "$want" '.spec | if ($w.moduleLoader.container.modprobe.dirName == null and
				.moduleLoader.container.modprobe.dirName == "/opt") then del(.moduleLoader.container.modprobe.dirName) else . end' <<<"$mod" 2>/dev/null)
			[ -n "$want" ] && [ "$want" = "$have" ] ||
				diverge "$name: Module spec differs from gpukmmctl render: $(diff <(echo "$want") <(echo "$have") | head -8 | tr '\n' ' ')"
			jq -e --arg uid "$(jq -r .metadata.uid <<<"$cp")" \
				'[.metadata.ownerReferences[]? | select(.controller == true and .uid == $uid)] | length == 1' \
				<<<"$mod" >/dev/null || diverge "$name: Module owner reference is not the policy"
			counts=$(jq -r '"\(.status.moduleLoader.availableNumber // 0)/\(.status.moduleLoader.desiredNumber // 0)"' <<<"$mod")
			kmm=$(jq -r '.status.kmmStatus // ""' <<<"$cp")
			[ "$kmm" = "$counts" ] || diverge "$name: status.kmmStatus '$kmm', Module says '$counts'"
			a=${counts%/*} d=${counts#*/}
			[ "$d" -gt 0 ] && [ "$a" = "$d" ] || want_ready=False
		fi
	else
		[ -n "$mod" ] && diverge "$name: no kernelModule but Module $name-gpu exists"
		kmm=$(jq -r '.status.kmmStatus // ""' <<<"$cp")
		[ "$kmm" = N/A ] || diverge "$name: no kernelModule but status.kmmStatus '$kmm' (want N/A)"
	fi
	if [ "${CHAOS_GATER:-}" = 1 ]; then
		for ds in device-plugin gpu-dra xpu-manager; do
			d=$(jq -c --arg n "$name-$ds" '.items[] | select(.metadata.name == $n) | .spec.template.spec.nodeSelector // {}' <<<"$dss")
			[ -n "$d" ] || continue
			gated=$(jq --arg k "$key" 'has($k)' <<<"$d")
			[ "$gated" = "$([ -n "$km" ] && echo true || echo false)" ] || diverge "$name-$ds: gated=$gated, kernelModule $([ -n "$km" ] && echo set || echo unset)"
			jq -e '.["intel.feature.node.kubernetes.io/gpu"] == "true"' <<<"$d" >/dev/null ||
				diverge "$name-$ds: its own nodeSelector key was lost"
		done
	fi
	st=$(jq -c '.status // {}' <<<"$cp")
	jq -e --argjson g "$(jq .metadata.generation <<<"$cp")" '.observedGeneration == $g' <<<"$st" >/dev/null ||
		diverge "$name: observedGeneration $(jq .observedGeneration <<<"$st") != generation $(jq .metadata.generation <<<"$cp")"
	jq -e '(.errors // []) | length == 0' <<<"$st" >/dev/null || diverge "$name: status.errors $(jq -c .errors <<<"$st")"
	rd=$(jq -r '[.conditions[]? | select(.type == "Ready") | .status][0] // "none"' <<<"$st")
	[ "$rd" = "$want_ready" ] || diverge "$name: Ready=$rd, want $want_ready ($(jq -c '[.conditions[]? | select(.type == "Ready") | .reason, .message]' <<<"$st"))"
done
for m in $(jq -r '.items[].metadata.name' <<<"$mods"); do
	found=
	for w in "${wanted_mods[@]}"; do [ "$w" = "$m" ] && found=1; done
	[ -n "$found" ] || diverge "Module $m exists but no policy wants it"
done
exit $((n > 0))
