#!/bin/bash
# gpukmm-watcher against kubesim, observed through the IPC harness (gpukmmctl ipc):
# initial sync + Snapshot, heartbeats with counters (to a fake supervisor
# Control), a subscriber sees every change in order, gated and narrowed kinds,
# KMM CRD installed after start is picked up (and removed), kill -9 mid-stream +
# restart converges, leader election hand-over.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh

CTL="$GPUKMM_BIN/gpukmmctl"
WATCHER="$GPUKMM_BIN/gpukmm-watcher"
NS=intel-gpu-base-operator
KMM_CRD=$(ls "$GPUKMM_SRC"/tests/fixtures/kmm/*.yaml "$GPUKMM_SRC"/tests/fixtures/kmm-crd/*.yaml 2>/dev/null | head -1)

KUBESIM_NO_TRAP=1
trap '[ -n "${CONTROL_PID:-}" ] && kill -TERM "$CONTROL_PID" 2>/dev/null && wait "$CONTROL_PID" 2>/dev/null; kubesim_stop' EXIT

# everything goes into kubesim's temp dir; kubesim_stop SIGKILLs the watchers and subscribers.
# The watchers run under the shipped RBAC with the token of ServiceAccount gpukmm-controller.
KUBESIM_RBAC=1 kubesim_start --history 100000 || { echo "not ok - kubesim starts"; exit 1; }
T=$KUBESIM_DIR

# start_watcher NAME [flags...]: sockets in $T/NAME/, log in $T/NAME.log; sets WPID
start_watcher() {
	local name=$1
	shift
	mkdir -p "$T/$name"
	chmod 700 "$T/$name"
	"$WATCHER" --kubeconfig "$T/kubeconfig" --namespace "$NS" \
		--listen "ipc://$T/$name/watcher.sock" --events "ipc://$T/$name/events.sock" \
		--discovery-interval 0.3 --discovery-confirm 3 "$@" >>"$T/$name.log" 2>&1 &
	WPID=$!
	KUBESIM_CLIENTS+=("$WPID")
}
snap() { "$CTL" ipc call "ipc://$T/$1/watcher.sock" gpukmm.Watcher.Snapshot '{}' --timeout-ms 3000 2>/dev/null; }
synced() { snap "$1" | grep -q '"synced":true'; }
count_in_snap() { # count_in_snap WATCHER FIELD: objects in the snapshot's FIELD array
	snap "$1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get(sys.argv[1],[])))' "$2"
}
names_in_snap() {
	snap "$1" | python3 -c 'import json,sys; print(" ".join(sorted(o["metadata"]["name"] for o in json.load(sys.stdin).get(sys.argv[1],[]))))' "$2"
}
is_leader() { snap "$1" | grep -q '"leadership":{"leader":true'; }
names_are() { test "$(names_in_snap "$1" "$2")" = "$3"; }
export T CTL
export -f snap synced names_in_snap is_leader names_are

k apply -f - >/dev/null <<EON
apiVersion: v1
kind: Namespace
metadata: {name: $NS}
---
apiVersion: v1
kind: Namespace
metadata: {name: apps}
EON
k apply -f "$GPUKMM_SRC/deploy/crd/intel.com_clusterpolicies.yaml" >/dev/null
kubesim_rbac_apply "$NS" && kubesim_sa_kubeconfig "$T/kubeconfig" "$NS" gpukmm-controller ||
	echo "not ok - the shipped RBAC and the controller's kubeconfig"
for i in 1 2 3; do
	k apply -f - >/dev/null <<EON
apiVersion: v1
kind: Node
metadata: {name: node-$i, labels: {gpu: "yes"}}
status: {nodeInfo: {kernelVersion: 6.8.0-$i}}
EON
done

# a fake supervisor Control: keeps each process's latest heartbeat counters
CONTROL="ipc://$T/control.sock"
"$GPUKMM_TBIN/fake_control" --listen "$CONTROL" >>"$T/control.log" 2>&1 &
CONTROL_PID=$!
. tests/lib/metrics.sh
counters() { ctl_metrics "$CONTROL" "$1"; } # PID -> {"name":value,...} of its latest heartbeat
heartbeat_after_sync() { # the counters of a synced watcher of the 3 nodes (the objects of
	# the initial lists are applied, not published: events - published >= 3)
	counters "$1" | jq -e '.["watcher_cache_objects{node}"] == 3 and .watcher_events >= 3 and .watch_relists >= 3 and
		.watcher_events - .watcher_published >= 3 and .watcher_errors == 0 and .watcher_convert_errors == 0 and
		has("leader")' >/dev/null
}

start_watcher w1 --control "$CONTROL" --heartbeat-ms 200
W1=$WPID
check "watcher syncs and serves a snapshot" wait_for 20 synced w1
ready_and_heartbeats() {
	grep -q 'initial lists synced' "$T/w1.log" && ! grep -q 'ready (standalone\|Control.Ready' "$T/w1.log" &&
		wait_for 10 heartbeat_after_sync "$W1"
}
check "Ready sent to Control after the initial lists, their objects not published; heartbeats carry events, relists, errors, cache sizes" \
	ready_and_heartbeats
check "snapshot has the 3 nodes" test "$(names_in_snap w1 nodes)" = "node-1 node-2 node-3"
disc_is() { snap w1 | jq -e '.discovery | .kmm == false and .dra == true and .cluster_policy == true and
	.dra_version == "v1" and ([.unconfirmed[]?.topic] | index("module") == null)' >/dev/null; }
check "discovery: KMM absent (confirmed after the debounce), DRA (v1) and ClusterPolicy present" wait_for 10 disc_is

# ---- a subscriber sees every change, in order, with consecutive numbers ----
"$CTL" ipc sub "ipc://$T/w1/events.sock" node --count 1000 --timeout-ms 60000 >"$T/sub.out" 2>"$T/sub.err" &
SUB=$!
KUBESIM_CLIENTS+=("$SUB")
# the subscription is live once a canary change shows up
i=0
until grep -q canary "$T/sub.out" 2>/dev/null || [ $i -ge 50 ]; do
	k label node node-1 canary=$i --overwrite >/dev/null
	i=$((i + 1))
	wait_for 1 grep -q canary "$T/sub.out"
done
for i in $(seq 1 20); do k label node node-2 step=$i --overwrite >/dev/null; done
k delete node node-3 >/dev/null
check "subscriber saw all 20 changes and the delete" \
	wait_for 15 bash -c "grep -q '\"type\":\"DELETED\".*node-3' '$T/sub.out'"
check "changes arrived in order" bash -c "
	grep -o '\"key\":\"step\",\"value\":\"[0-9]*\"' '$T/sub.out' | grep -o '[0-9]*' | tr '\n' ' ' |
	grep -q '^$(seq -s ' ' 1 20) \$'"
check "sequence numbers are consecutive" python3 - "$T/sub.out" <<'EOP'
import json, sys
seqs = [int(json.loads(l)["seq"]) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if seqs and seqs == list(range(seqs[0], seqs[0] + len(seqs))) else 1)
EOP
check "snapshot after the changes: node-1 node-2" test "$(names_in_snap w1 nodes)" = "node-1 node-2"
# a consumer that missed events (or starts late) resyncs from the snapshot: same
# objects as the server, and the bus number to resume from
server_nodes=$(k get nodes -o name | sed 's|^node/||' | sort | tr '\n' ' ' | sed 's/ $//')
check "a resync by snapshot equals the server's state" test "$(names_in_snap w1 nodes)" = "$server_nodes"
# a caller that can receive fewer bytes than the snapshot gets a refusal saying both sizes, not a
# reply its socket would drop (it then waited for its timeout and retried, silently, for ever)
snap_max() { "$CTL" ipc call "ipc://$T/w1/watcher.sock" gpukmm.Watcher.Snapshot "{\"max_bytes\":$1}" --timeout-ms 3000 2>&1; }
check "a snapshot over the caller's max_bytes is refused: RESOURCE_EXHAUSTED with both sizes" \
	in_shell "snap_max 64 | grep -E 'RESOURCE_EXHAUSTED' | grep -qE 'snapshot of [0-9]+ bytes is over the 64 the caller can receive \(the cache holds 2 nodes, [0-9]+ claims, [0-9]+ pods\)'"
check "…one within it is served" in_shell "snap_max 1000000 | grep -q '\"synced\":true'"
refused_counted() { counters "$W1" | jq -e '.watcher_snapshots_refused == 1' >/dev/null; }
check "…and counted (gpukmm_watcher_snapshots_refused_total 1)" wait_for 5 refused_counted
snapseq=$(snap w1 | python3 -c 'import json,sys; print([s["seq"] for s in json.load(sys.stdin)["seqs"] if s["topic"]=="node"][0])')
lastseq=$(tail -1 "$T/sub.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
check "the snapshot carries the node topic's bus sequence ($snapseq = last seen $lastseq)" test "$snapseq" = "$lastseq"

# ---- narrowed and gated kinds ----
k apply -f - >/dev/null <<'EOD'
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gated, namespace: apps, labels: {gpukmm.io/gate: "x"}}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec: {nodeSelector: {kubernetes.io/arch: amd64}, containers: [{name: c, image: i}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ungated, namespace: apps}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec: {containers: [{name: c, image: i}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: dp, namespace: intel-gpu-base-operator}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec: {containers: [{name: c, image: i}]}
---
apiVersion: v1
kind: Pod
metadata: {name: gpu-user, namespace: apps}
spec: {nodeName: node-1, containers: [{name: c, image: i, resources: {limits: {gpu.intel.com/xe: "1"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: cpu-only, namespace: apps}
spec: {containers: [{name: c, image: i}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: claim, namespace: apps}
spec: {}
EOD
check "daemonsets: operator namespace + gated elsewhere, not the ungated one" \
	wait_for 10 names_are w1 daemon_sets "dp gated"
check "pods: only the one requesting gpu.intel.com resources" \
	wait_for 10 names_are w1 pods gpu-user
check "resource claims cached" \
	wait_for 10 names_are w1 resource_claims claim
check "Watcher.Get finds a node" bash -c "'$CTL' ipc call 'ipc://$T/w1/watcher.sock' gpukmm.Watcher.Get '{\"topic\":\"node\",\"name\":\"node-1\"}' | grep -q '\"kernel_version\":\"6.8.0-1\"'"
check "Watcher.Get: NOT_FOUND for an absent object" bash -c "! '$CTL' ipc call 'ipc://$T/w1/watcher.sock' gpukmm.Watcher.Get '{\"topic\":\"node\",\"name\":\"nope\"}' 2>&1 | grep -v NOT_FOUND >/dev/null; '$CTL' ipc call 'ipc://$T/w1/watcher.sock' gpukmm.Watcher.Get '{\"topic\":\"node\",\"name\":\"nope\"}' 2>&1 | grep -q NOT_FOUND"

# ---- KMM installed after the watcher started ----
"$CTL" ipc sub "ipc://$T/w1/events.sock" discovery --count 50 --timeout-ms 20000 >"$T/disc.out" 2>/dev/null &
DSUB=$!
KUBESIM_CLIENTS+=("$DSUB")
k apply -f "$KMM_CRD" >/dev/null
check "CRD install publishes Discovery{kmm: true}" wait_for 20 grep -q '"kmm":true' "$T/disc.out"
k apply -f - >/dev/null <<'EOM'
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: cp-gpu, namespace: intel-gpu-base-operator}
spec:
  selector: {kubernetes.io/arch: amd64}
  moduleLoader:
    container:
      modprobe: {moduleName: xe}
      kernelMappings: [{regexp: '^.*$', containerImage: 'registry.example/xe:${KERNEL_FULL_VERSION}'}]
EOM
check "Modules are watched without a restart" \
	wait_for 15 names_are w1 modules cp-gpu
# ---- the safety rule: a discovery blip is not an absence ----
"$CTL" ipc sub "ipc://$T/w1/events.sock" module --count 1000 --timeout-ms 30000 >"$T/mods.out" 2>/dev/null &
KUBESIM_CLIENTS+=("$!")
unconfirmed() { snap w1 | jq -e --arg t "$1" '[.discovery.unconfirmed[]? | select(.topic == $t)] | length == 1' >/dev/null; }
confirmed() { ! unconfirmed "$1"; }
kraw PUT /kubesim/faults '{"rules":[{"verb":"discovery","path":"/apis/kmm.sigs.x-k8s.io/v1beta1","code":404,"times":4}]}' >/dev/null
check "four 404s (in ~1 s, under the 3 s debounce) of KMM's discovery: the module topic is unconfirmed meanwhile" wait_for 10 unconfirmed module
check "…and confirmed again once discovery answers" wait_for 10 confirmed module
kraw PUT /kubesim/faults '{}' >/dev/null
check "…the Module stayed cached, no DELETE published" bash -c "names_are w1 modules cp-gpu && ! grep -q DELETED '$T/mods.out'"
check "…the log says the absence is not believed yet" grep -q "kmm.sigs.x-k8s.io/v1beta1 answered absent; kept as served" "$T/w1.log"
k delete -f "$KMM_CRD" >/dev/null 2>&1
check "CRD removal: modules gone from the cache, discovery says so" \
	wait_for 15 bash -c "names_are w1 modules '' && snap w1 | grep -q '\"kmm\":false'"

# ---- kill -9 mid-stream: a restarted watcher converges ----
LPIDS=()
for i in $(seq 1 10); do k label node node-1 burst=$i --overwrite >/dev/null & LPIDS+=($!); done
kill -KILL "$W1"
wait "$W1" 2>/dev/null
wait "${LPIDS[@]}"
k label node node-2 after=kill --overwrite >/dev/null
start_watcher w1
check "restarted watcher syncs" wait_for 20 synced w1
want_burst=$(k get node node-1 -o jsonpath='{.metadata.labels.burst}')
check "restarted watcher sees the state of the server" bash -c "
	snap w1 | grep -q '\"key\":\"after\",\"value\":\"kill\"' &&
	snap w1 | grep -q '\"key\":\"burst\",\"value\":\"$want_burst\"'"
check "no errors converting objects" bash -c "! grep -q 'cannot convert' '$T/w1.log'"

# ---- before its first lists complete, a watcher serves no objects and publishes none ----
# (every list of claims answers 500: the nodes are cached, the watcher is not synced)
kraw PUT /kubesim/faults '{"rules":[{"verb":"list","resource":"resourceclaims","rate":1,"code":500}]}' >/dev/null
start_watcher u
U=$WPID
"$CTL" ipc sub "ipc://$T/u/events.sock" node --count 1 --timeout-ms 60000 >"$T/u-sub.out" 2>/dev/null &
SUB=$!
KUBESIM_CLIENTS+=("$SUB")
u_get() { "$CTL" ipc call "ipc://$T/u/watcher.sock" gpukmm.Watcher.Get "{\"topic\":\"node\",\"name\":\"$1\"}" --timeout-ms 2000 2>/dev/null; }
unsynced_empty() { snap u | jq -e '.synced != true and ((.nodes // []) | length) == 0 and .discovery != null' >/dev/null; }
check "an unsynced watcher's snapshot: synced false, no objects (its nodes cached), discovery there" \
	eval 'wait_for 10 u_get node-1 && unsynced_empty'
k label node node-1 unsynced=yes --overwrite >/dev/null
check "…a node change while it is not synced reaches its cache" wait_for 10 in_shell "u_get node-1 | grep -q '\"unsynced\",\"value\":\"yes\"'"
kraw PUT /kubesim/faults '{}' >/dev/null
check "once the lists complete it is synced, the nodes in its snapshot" wait_for 20 in_shell "synced u && snap u | grep -q '\"unsynced\"'"
k label node node-1 unsynced=no --overwrite >/dev/null
# its subscriber (connected since the start) gets one event: the change after the sync
wait "$SUB"
check "…its subscriber's first event is the change after the sync, not the one before" \
	grep -q '"unsynced","value":"no"' "$T/u-sub.out"
kill -KILL "$U"
wait "$U" 2>/dev/null

# ---- leader election: exactly one leader, kill -9 it, the other takes over ----
LE=(--leader-elect --lease-name gpukmm-controller --lease-duration 3 --renew-deadline 2 --retry-period 0.3)
start_watcher a --identity a "${LE[@]}"
A=$WPID
start_watcher b --identity b "${LE[@]}"
B=$WPID
check "one of two watchers leads" wait_for 15 bash -c "is_leader a || is_leader b"
la=0; lb=0
is_leader a && la=1
is_leader b && lb=1
check "exactly one leader" test $((la + lb)) = 1
if [ $la = 1 ]; then LEADER=$A; OTHER=b; else LEADER=$B; OTHER=a; fi
t0=$SECONDS
kill -KILL "$LEADER"
check "the other takes over within the lease duration" wait_for 8 is_leader $OTHER
echo "# takeover after $((SECONDS - t0)) s (lease 3 s, retry 0.3 s)"
check "the lease names the new holder" test "$(k get lease gpukmm-controller -n $NS -o jsonpath='{.spec.holderIdentity}')" = "$OTHER"
kubesim_rbac_verdict "$NS"
