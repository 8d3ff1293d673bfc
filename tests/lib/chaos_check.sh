#!/bin/bash
# The chaos test's independent checker: reads the cluster from the API server only
# (curl + jq, never the services' logs or sockets) and prints one "DIVERGE: ..."
# line for every place where the cluster differs from what a fresh, calm
# computation gives for the ClusterPolicies as they are now:
#   - Module <cp>-gpu exists (not deleting) iff spec.kernelModule is set, and its
#     spec equals `gpukmmctl render` of the policy; controller owner reference =
#     the policy's uid; no other Module in the operator namespace
#   - the gated DaemonSets (<cp>-device-plugin, -gpu-dra, -xpu-manager) carry the
#     KMM ready-label key in their pod nodeSelector iff kernelModule is set, with the value ""
#     (CHAOS_GATER=1), and keep their own selector key
#   - status: observedGeneration = generation, no errors, kmmStatus = the Module's
#     available/desired counts (N/A without kernelModule), Ready=True iff nothing is
#     left to load
#   - status.nodes (CHAOS_NODES=1): the counts a calm statusd derives from the
#     nodes the policy selects (kubernetes.io/arch=amd64 + spec.nodeSelector +
#     the NFD label with useNFDLabeling) and their gpukmm.io/node-report
#     annotations: gpuNodes, ootLoaded, inTreeLoaded, notLoaded, unknown,
#     problemNodes and the nodes listed in problems (the first 10 by name); Ready=False while a selected GPU node lacks the OoT module
#     the policy wants; and every GPU Node's own report tells the truth: its
#     label gpukmm.io/xe.source is "oot" iff KMM put a ready label on it (the
#     test's stand-in for KMM's worker pod flips the node's root then); no
#     NodeReportRequest is left waiting (the controller applied them all)
#   - no policy stuck deleting (the caller frees every claim first)
# Usage: chaos_check.sh API_URL NAMESPACE      exit 0 = no divergence
set -u
URL=$1 NS=$2
CTL=${GPUKMM_BIN:-build/bin}/gpukmmctl
# under RBAC (KUBESIM_CA, KUBESIM_ADMIN_TOKEN exported by tests/lib/kubesim.sh) as the admin
get() {
	curl -sS --max-time 10 ${KUBESIM_CA:+--cacert "$KUBESIM_CA"} \
		${KUBESIM_ADMIN_TOKEN:+-H "Authorization: Bearer $KUBESIM_ADMIN_TOKEN"} "$URL$1"
}
n=0
diverge() { echo "DIVERGE: $*"; n=$((n + 1)); }

cps=$(get /apis/intel.com/v1alpha1/clusterpolicies) || { echo "DIVERGE: API unreachable"; exit 1; }
mods=$(get "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules") || exit 1
dss=$(get "/apis/apps/v1/namespaces/$NS/daemonsets") || exit 1
jq -e '.items' <<<"$cps" >/dev/null 2>&1 || { echo "DIVERGE: cannot list ClusterPolicies: $(head -c 200 <<<"$cps")"; exit 1; }
jq -e '.items' <<<"$mods" >/dev/null 2>&1 || { echo "DIVERGE: cannot list Modules: $(head -c 200 <<<"$mods")"; exit 1; }
if [ "${CHAOS_NODES:-}" = 1 ]; then
	nodes=$(get /api/v1/nodes) && jq -e '.items' <<<"$nodes" >/dev/null 2>&1 ||
		{ echo "DIVERGE: cannot list Nodes: $(head -c 200 <<<"$nodes")"; exit 1; }
	# every GPU node runs a node profile: its report follows KMM's ready label
	while read -r line; do diverge "$line"; done < <(jq -r '.items[]
		| select(.metadata.labels["intel.feature.node.kubernetes.io/gpu"] == "true")
		| (any(.metadata.labels | keys[]; startswith("kmm.node.kubernetes.io/") and endswith(".ready"))) as $kmm
		| (.metadata.labels["gpukmm.io/xe.source"] // "no label") as $src
		| select($src != (if $kmm then "oot" else "none" end))
		| "node \(.metadata.name): gpukmm.io/xe.source=\($src) but KMM ready label \(if $kmm then "present" else "absent" end)"' <<<"$nodes")
	# and the controller applied every report the nodes handed in
	nrrs=$(get "/apis/gpukmm.io/v1alpha1/namespaces/$NS/nodereportrequests") || exit 1
	jq -e '.items | length == 0' <<<"$nrrs" >/dev/null 2>&1 ||
		diverge "NodeReportRequests not applied: $(jq -c '[.items[]?.metadata.name]' <<<"$nrrs" 2>/dev/null | head -c 200)"
fi
# The node summary a calm statusd computes for policy $1 (JSON on stdin: {cp, nodes})
# as {want: {gpuNodes...problemNodes}, blocking: N}. Per selected node: no readable
# report = unknown (a problem); a report without a GPU (physical function) = not a
# GPU node; else the module (moduleName, default xe) is OoT-loaded, in-tree
# (loaded in-tree or built in) or not loaded; a problem node is one where the
# module is not what the policy wants (OoT with kernelModule, in-tree without), or
# no kernelMapping matches its kernel, or OoT with active VFs (problemList: the
# first 10 of them by name, as status.nodes.problems lists them); "blocking" counts
# GPU nodes without the OoT module the policy wants. (jq 1.6: an error after a
# `try` is caught by it, so nothing below may fail on good input.)
nodes_want='
	.cp as $cp | ($cp.spec.kernelModule // null) as $km | (($km.moduleName // "") | if . == "" then "xe" else . end) as $mod
	| ({"kubernetes.io/arch": "amd64"} + ($cp.spec.nodeSelector // {})
	   + (if $cp.spec.useNFDLabeling == true then {"intel.feature.node.kubernetes.io/gpu": "true"} else {} end)) as $sel
	| [.nodes.items[] | select(. as $n | all($sel | to_entries[]; ($n.metadata.labels // {})[.key] == .value))
	   | .metadata.name as $nn | (.status.nodeInfo.kernelVersion // "") as $kv
	   | ((.metadata.annotations // {})["gpukmm.io/node-report"] // null | try fromjson catch null) as $r
	   | if $r == null then {unknown: 1}
	     else ($r.summary.physicalFunctions // 0) as $pf
	     | if $pf == 0 then empty else
	       ($r.summary.virtualFunctions // 0) as $vfs
	       | ([if $r.module then ($r.module | .name //= $r.moduleName) else empty end, $r.related[]?]
	          | map(select(.name == $mod)) | .[0]) as $m
	       | if $m == null then {unknown: 1}
	         else ($m.source // "unknown") as $src
	         | ($m.loaded == true and $src == "oot") as $oot
	         | ($src == "builtin" or ($m.loaded == true and $src == "in-tree")) as $intree
	         | if $m.loaded == true and ($oot or $intree | not) then {unknown: 1}
	           else ($km != null and $kv != "" and ([$km.kernelMappings[]? | (.literal != null and .literal == $kv)
	                  or (.regexp != null and (.regexp as $re | $kv | test($re)))] | any | not)) as $nomap
	           | {gpu: 1, oot: (if $oot then 1 else 0 end), intree: (if $oot | not and $intree then 1 else 0 end),
	              notloaded: (if $oot or $intree then 0 else 1 end),
	              problem: (if $km != null then $nomap or ($oot | not) or ($oot and $vfs > 0)
	                        else ($intree | not) end),
	              blocking: ($km != null and ($oot | not))}
	           end
	         end
	       end
	     end | . + {node: $nn}] as $per
	| {want: {gpuNodes: ([$per[].gpu // 0] | add // 0), ootLoaded: ([$per[].oot // 0] | add // 0),
	          inTreeLoaded: ([$per[].intree // 0] | add // 0), notLoaded: ([$per[].notloaded // 0] | add // 0),
	          unknown: ([$per[].unknown // 0] | add // 0),
	          problemNodes: ([$per[] | select(.unknown == 1 or .problem == true)] | length),
	          problemList: ([$per[] | select(.unknown == 1 or .problem == true) | .node] | sort | .[:10])},
	   blocking: ([$per[] | select(.blocking == true)] | length)}'

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
			# (the hold of a Module recreation, "module-recreating", ends with it)
			[ "$gated" = false ] || jq -e --arg k "$key" '.[$k] == ""' <<<"$d" >/dev/null ||
				diverge "$name-$ds: its ready key is $(jq -c --arg k "$key" '.[$k]' <<<"$d"), want \"\""
			jq -e '.["intel.feature.node.kubernetes.io/gpu"] == "true"' <<<"$d" >/dev/null ||
				diverge "$name-$ds: its own nodeSelector key was lost"
		done
	fi
	st=$(jq -c '.status // {}' <<<"$cp")
	if [ "${CHAOS_NODES:-}" = 1 ]; then
		nw=$(jq -n -c --argjson cp "$cp" --argjson nodes "$nodes" "{cp: \$cp, nodes: \$nodes} | $nodes_want")
		have=$(jq -c '.nodes // {} | {gpuNodes, ootLoaded, inTreeLoaded, notLoaded, unknown, problemNodes,
			problemList: [.problems[]?.node]}' <<<"$st")
		want=$(jq -c .want <<<"$nw")
		[ "$have" = "$want" ] || diverge "$name: status.nodes $have, calm computation $want"
		[ "$(jq .blocking <<<"$nw")" = 0 ] || want_ready=False
	fi
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
