# The frame of the rolling-upgrade scripts (tests/e2e/upgrade.sh, upgrade_wait.sh, upgrade_halt.sh):
# scenario.sh's cluster (kubesim under the shipped RBAC with its DaemonSet
# controller, kubelet and disruption controller; fake-kmm as KMM; one node profile
# per GPU node whose root follows the module version fake-kmm loaded there) plus a
# GPU workload under a PodDisruptionBudget, a stand-in for its ReplicaSet
# controller, and a sampler that watches the invariants all along.
#
#   up_init NAME NODES...    sc_init, CRDs, RBAC kubeconfigs, fake-kmm, the nodes
#                            and their node profiles
#   up_policy VERSION [UPGRADE_POLICY_MEMBERS]   apply the versioned policy
#                            (autoUpgrade, maxParallel 1, maxUnavailable 1 unless given)
#   up_install VERSION       start controller A (no lease), apply VERSION, wait until every
#                            node of UP_NODES is on it by its own report
#   up_workload N            a ReplicaSet "trainer" of N GPU pods (one per node at
#                            first) under a budget of maxUnavailable 1, and the
#                            loop that replaces an evicted trainer on a node that
#                            is schedulable and has the driver (the ReplicaSet
#                            controller and the scheduler kubesim does not run)
#   up_sampler_start / up_sampler_max KIND   a sample at every change of a GPU node (a
#                            watch): KIND "nodriver" = GPU nodes without the module loaded
#                            (fake-kmm's record), "active" = nodes in draining/unloading/
#                            loading; the max seen
#   version_on NODE V / reports NODE V / state_is NODE S / done_on NODE V
#   evictions                the upgrader's pods/eviction creates so far (kubesim)
#   agent_writes AGENT       kubesim's count of the writes of a client program (JSON)
#   events_of NODE           the upgrader's Event reasons on NODE, oldest first
. "${GPUKMM_SRC:-.}/tests/lib/scenario.sh"
NS=intel-gpu-base-operator
CP=${CP:-gpu}
MOD=$CP-gpu
KEY="kmm.node.kubernetes.io/$NS.$MOD.ready"
VKEY="kmm.node.kubernetes.io/version-module.$NS.$MOD"
LOADED="fake-kmm.gpukmm.io/loaded.$NS.$MOD"
STATE=gpukmm.io/upgrade-state
KV=6.8.0-45-generic
UP_BG=()

up_cleanup() {
	local p
	for p in "${UP_BG[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	UP_BG=()
	sc_cleanup
}

up_init() { # NAME NODES...
	local name=$1 n
	shift
	sc_init "$name"
	trap up_cleanup EXIT
	UP_NODES="$*"
	sc_kmm_cluster "${UP_LOAD_MS:-300}" "${UP_UNLOAD_MS:-300}"
	np_init "$D" "$D/node-kubeconfig"
	for n in $UP_NODES; do
		node "$n" "$KV"
		np_start "$n" "$KV" || nok "node profile $n starts"
	done
	np_follow_start
}

up_policy() { # VERSION [UPGRADE_POLICY_MEMBERS]
	k apply -f - >>"$D/kubectl.log" 2>&1 <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: $CP}
spec:
  resourceRegistration: dp
  useNFDLabeling: true
  kernelModule:
    version: "$1"
    kernelMappings:
    - regexp: '^6\.8\.0-[0-9]+-generic\$'
      containerImage: registry.example.com/gpu/xe-oot-kmd:$1-\${KERNEL_FULL_VERSION}
    upgradePolicy: {autoUpgrade: true, maxParallel: 1, maxUnavailable: 1 ${2:+, $2}}
Y
}

up_install() { # VERSION
	ctrl_start A nolease
	check "the controller is ready" 60 ctrl_ready A
	up_policy "$1"
	check "first install: every node labelled $1 by gpukmm-upgrader, on $1 by its own report" 60 up_all_on "$1"
}
up_all_on() { # VERSION
	local x
	for x in $UP_NODES; do version_on "$x" "$1" && loaded_version "$x" "$1" && reports "$x" "$1" || return 1; done
}

# ---- the workload -------------------------------------------------------------------------------
up_workload() { # N
	k create namespace work >>"$D/kubectl.log" 2>&1
	UP_RS_UID=$(budgeted_rs work trainer "$1" "maxUnavailable: 1" 2>>"$D/kubectl.log")
	(
		trap 'exit 0' TERM
		seq=0
		while :; do
			# live trainers (not terminating) and the nodes that can take one
			pods=$(kraw GET "/api/v1/namespaces/work/pods?labelSelector=app%3Dtrainer" 2>/dev/null) || { nap 0.3; continue; }
			live=$(jq '[.items[]? | select(.metadata.deletionTimestamp == null)] | length' <<<"$pods" 2>/dev/null)
			if [ -n "$live" ] && [ "$live" -lt "$1" ]; then
				# the schedulable node with the driver that runs the fewest trainers
				target=$(kraw GET /api/v1/nodes 2>/dev/null | jq -r --arg k "$KEY" --argjson p "$pods" '
					[$p.items[]? | select(.metadata.deletionTimestamp == null) | .spec.nodeName] as $on |
					[.items[] | select(.spec.unschedulable != true and .metadata.labels[$k] != null) | .metadata.name |
					 . as $n | {n: ., c: ([$on[] | select(. == $n)] | length)}] | sort_by(.c, .n) | .[0].n // empty' 2>/dev/null)
				if [ -n "$target" ]; then
					seq=$((seq + 1))
					up_trainer "trainer-r$seq" "$target" >/dev/null 2>&1
				fi
			fi
			nap 0.3
		done
	) >/dev/null 2>&1 &
	UP_BG+=($!)
}
up_trainer() { # NAME NODE
	kraw POST /api/v1/namespaces/work/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$1\",
		\"namespace\":\"work\",\"labels\":{\"app\":\"trainer\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",
		\"kind\":\"ReplicaSet\",\"name\":\"trainer\",\"uid\":\"$UP_RS_UID\",\"controller\":true}]},
		\"spec\":{\"nodeName\":\"$2\",\"containers\":[{\"name\":\"c\",\"image\":\"trainer\",
		\"resources\":{\"limits\":{\"gpu.intel.com/xe\":\"1\"}}}]}}"
}
trainer_on() { [ -n "$(kraw GET "/api/v1/namespaces/work/pods?labelSelector=app%3Dtrainer&fieldSelector=spec.nodeName%3D$1" | jq -r '.items[]? | select(.metadata.deletionTimestamp == null) | .metadata.name')" ]; }

# ---- the sampler -----------------------------------------------------------------------------------
# One watch of the nodes (curl) and one jq that keeps the GPU nodes and writes a sample
# "NODRIVER ACTIVE" at every change of one: every state the API went through, for two
# processes in all (a poll every 100 ms forked two each time and could miss a state that
# lasted less). A watch that ends (its timeout, kubesim gone) is opened again; its
# synthetic ADDED events rebuild the state, and a state rebuilt in part never counts more
# than the whole.
up_sampler_start() {
	: >"$D/samples"
	(
		c= j=
		trap 'kill $c $j 2>/dev/null; exit 0' TERM
		while :; do
			kwatch "$D/nodes.watch" "/api/v1/nodes?watch=1&timeoutSeconds=900" || exit 1
			c=$KWATCH_PID
			jq -nr --unbuffered --arg l "$LOADED" --arg s "$STATE" '
				foreach (inputs | select(.object.metadata.name? // "" | startswith("gpu-"))) as $e ({};
					if $e.type == "DELETED" then del(.[$e.object.metadata.name])
					elif $e.type == "ADDED" or $e.type == "MODIFIED" then .[$e.object.metadata.name] = $e.object
					else . end;
					[.[]] | "\([.[] | select(.metadata.annotations[$l] == null)] | length) \([.[] |
						select(.metadata.labels[$s] | . == "draining" or . == "unloading" or . == "loading")] | length)")' \
				<"$D/nodes.watch" >>"$D/samples" 2>/dev/null &
			j=$!
			wait "$j"
			kill "$c" 2>/dev/null
			wait "$c"
			c= j=
			nap 0.1
		done
	) >/dev/null 2>&1 &
	UP_BG+=($!)
}
up_sampler_max() { # nodriver | active
	local col=1
	[ "$1" = active ] && col=2
	awk -v c=$col 'NF == 2 { if ($c > m) m = $c } END { print m + 0 }' "$D/samples"
}
up_samples() { wc -l <"$D/samples"; }

# ---- probes --------------------------------------------------------------------------------------------
version_on() { node_is "$1" ".metadata.labels[\"$VKEY\"] == \"$2\""; }
state_is() { node_is "$1" ".metadata.labels[\"$STATE\"] == \"$2\""; }
loaded_version() { node_is "$1" ".metadata.annotations[\"$LOADED\"] == \"$KV $2\""; }
# the node's own report: the module loaded, out-of-tree, of that version
reports() {
	node_is "$1" "(.metadata.annotations[\"gpukmm.io/node-report\"] | fromjson | .module |
		(.loaded == true) and (.version == \"$2\"))"
}
done_on() { version_on "$1" "$2" && state_is "$1" done && loaded_version "$1" "$2" && reports "$1" "$2"; }
all_done() { # VERSION NODES...
	local v=$1 n
	shift
	for n in "$@"; do done_on "$n" "$v" || return 1; done
}
upgraded_is() { # STATUS REASON
	cp_is "(.status.conditions[] | select(.type == \"Upgraded\") | .status == \"$1\" and .reason == \"$2\") and
		.status.observedGeneration == .metadata.generation"
}
agent_writes() { kraw GET /kubesim/stats | jq -c --arg a "$1" '.writesByAgent[$a] // {}'; }
evictions() { agent_writes gpukmm-upgrader | jq '.["create pods/eviction"] // 0'; }
events_of() {
	kraw GET "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D$1" |
		jq -r '[.items[] | select(.source.component == "gpukmm-upgrader")] | sort_by(.metadata.name) | map(.reason) | join(",")'
}
event_time() { # NODE REASON: the Event's time, unix seconds
	kraw GET "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D$1" |
		jq -r --arg r "$2" '[.items[] | select(.source.component == "gpukmm-upgrader" and .reason == $r) |
			.firstTimestamp | fromdateiso8601] | max // empty'
}
