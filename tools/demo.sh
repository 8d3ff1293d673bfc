#!/bin/bash
# make demo: a small simulated cluster (kubesim + fake-kmm) and the real gpukmm
# stack — `gpukmm --profile controller` (watcher, modmgr, gater, opmgr, statusd, webhook)
# and one `gpukmm --profile node` per GPU node (prober on a fake node root +
# node-mode statusd) — loading the xe driver through KMM, step by step.
#   make demo            watch it, then everything is stopped
#   make demo KEEP=1     keep it running at the end (Ctrl-C stops it); poke with kubectl
#   DEMO_CHECK=1         non-interactive: prints "ok - ..." / "not ok - ..." per milestone
#
# The cluster: gpu-rhel-1, gpu-rhel-2 (RHEL 9 kernel), gpu-ubuntu-1 (Ubuntu 24.04
# kernel), cpu-1 (no GPU); gpukmm-opmgr deploys the policy's device plugin and XPU
# Manager, which kubesim's DaemonSet controller and kubelet run only on the nodes
# whose driver KMM has loaded (the ready label in their node selector). Each GPU node's prober reads a fake root whose kernel matches the Node:
# "oot-avail" (GPU, OoT xe installed, not loaded) until fake-kmm puts the KMM ready
# label on the node, then "oot-idle" (OoT xe loaded) — the stand-in for KMM's worker
# pod running modprobe there (tests/lib/nodeprofile.sh, shared with the chaos test).
# The webhook serves plain HTTP here (kubesim calls it by URL); in a cluster it
# serves TLS (deploy/webhook). /metrics is served as in a cluster: HTTPS, the
# scraper's token reviewed (kubesim knows the token "demo-scraper", allowed); the
# demo prints the URLs and a one-line summary of the most useful metrics.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
export GPUKMM_SRC=$PWD GPUKMM_BIN=${GPUKMM_BIN:-$PWD/$BUILD/bin} GPUKMM_TBIN=${GPUKMM_TBIN:-$PWD/$BUILD/tests/bin}
NS=intel-gpu-base-operator
CP=gpu-kmm
READY_KEY="kmm.node.kubernetes.io/$NS.$CP-gpu.ready"
CHECK=${DEMO_CHECK:-}
FAILED=0
. tests/lib/nodeprofile.sh

D=$(mktemp -d "${TMPDIR:-/tmp}/gpukmm-demo.XXXXXX") || exit 1
chmod 700 "$D"
PIDS=()
stop_all() {
	local p rc
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
		rc=$?
		# a supervisor that had to kill a service, or a service that leaked or
		# crashed under the sanitizers, exits non-zero: the check mode reports it
		if [ -n "$CHECK" ] && [ -n "${SUPS[$p]:-}" ]; then
			if [ "$rc" = 0 ]; then echo "ok - ${SUPS[$p]} stopped cleanly on SIGTERM"
			else echo "not ok - ${SUPS[$p]} stopped cleanly on SIGTERM (exit $rc)"; FAILED=1; fi
		fi
	done
	PIDS=()
	NP_CHECK=$CHECK np_stop_all >"$D/np-stop.out"
	grep -q '^not ok' "$D/np-stop.out" && FAILED=1
	cat "$D/np-stop.out"
	kubesim_stop >/dev/null 2>&1
	san_check "$D"/*.log "$D"/np/*.log || FAILED=1
	[ "$FAILED" = 0 ] || log_tails 25 "$D"/*.log "$D"/np/*.log
	rm -rf "$D"
	[ "$FAILED" = 0 ]
}
declare -A SUPS=()
trap 'stop_all; exit $?' EXIT
trap 'exit 130' INT TERM

say() { [ -n "$CHECK" ] && echo "# $*" || printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { [ -n "$CHECK" ] || "$@"; }
milestone() { # NAME TIMEOUT_S CMD...: wait (polling) for CMD, report
	local name=$1 t=$2; shift 2
	local end=$((SECONDS + t))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $end ]; then
			echo "not ok - $name"
			FAILED=1
			echo "#   policy status: $(cpj | jq -c '.status // {}' 2>/dev/null | head -c 1500)"
			echo "#   module: $(modj | jq -c '{v: .spec.moduleLoader.container.version, gen: .metadata.generation, del: .metadata.deletionTimestamp, status}' 2>/dev/null | head -c 800)"
			return 1
		fi
		sleep 0.2
	done
	if [ -n "$CHECK" ]; then echo "ok - $name"; else echo "   ✓ $name"; fi
}
skip() { if [ -n "$CHECK" ]; then echo "skip - $*"; else echo "   - $*"; fi; }
kj() { kraw GET "$1"; }                        # raw GET, JSON out
cpj() { kj "/apis/intel.com/v1alpha1/clusterpolicies/$CP"; }
cp_is() { cpj | jq -e "$1" >/dev/null; }       # jq test on the ClusterPolicy
dsj() { kj "/apis/apps/v1/namespaces/$NS/daemonsets/$CP-$1"; }
modj() { kj "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$CP-gpu"; }
mod_is() { modj | jq -e "$1" >/dev/null; }
node_ready() { kj "/api/v1/nodes/$1" | jq -e --arg k "$READY_KEY" '.metadata.labels[$k] != null' >/dev/null; }
nodes_table() { # what KMM says (ready label) next to what each node's prober sees
	kj /api/v1/nodes | jq -r --arg k "$READY_KEY" '["NODE", "KERNEL", "KMM-READY", "XE-SOURCE", "GPUS"],
		(.items[] | [.metadata.name, .status.nodeInfo.kernelVersion,
		 (if .metadata.labels[$k] != null then "yes" else "-" end),
		 (.metadata.labels["gpukmm.io/xe.source"] // "-"), (.metadata.labels["gpukmm.io/gpu.count"] // "-")]) | @tsv' |
		column -t | sed 's/^/     /'
}
ds_table() {
	kj "/apis/apps/v1/namespaces/$NS/daemonsets" | jq -r '.items[] | "     \(.metadata.name): ready \(.status.numberReady // 0)/\(.status.desiredNumberScheduled // 0), nodeSelector \(.spec.template.spec.nodeSelector | tojson)"'
}
# the nodes running a pod of DaemonSet $1
ds_nodes() {
	kj "/api/v1/namespaces/$NS/pods" | jq -r --arg d "$CP-$1" '[.items[] | select(.metadata.ownerReferences[]?.name == $d) | .spec.nodeName] | sort | join(" ")'
}
HAVE_GATER=; [ -x "$GPUKMM_BIN/gpukmm-gater" ] && HAVE_GATER=1
HAVE_OPMGR=; [ -x "$GPUKMM_BIN/gpukmm-opmgr" ] && HAVE_OPMGR=1
HAVE_UPGRADER=; [ -x "$GPUKMM_BIN/gpukmm-upgrader" ] && HAVE_UPGRADER=1
# statusd writes the nodes summary once its code knows the field
HAVE_NODES=; grep -qs gpuNodes services/statusd/*.c && HAVE_NODES=1

# --- the API server, KMM, the CRDs
say "starting kubesim (API server) and fake-kmm (KMM)"
# the identity of the metrics scraper (kubesim's TokenReview; system:masters: allowed)
printf 'demo-scraper,demo-scraper,uid-demo,"system:masters"\n' >"$D/users.csv"
KUBESIM_NO_TRAP=1 kubesim_start --token-auth-file "$D/users.csv" || { echo "not ok - kubesim starts"; FAILED=1; exit 1; }
cat >"$D/kubeconfig" <<K
apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "$KUBESIM_URL"}}]
users: [{name: u, user: {token: demo}}]
contexts: [{name: sim, context: {cluster: sim, user: u}}]
current-context: sim
K
chmod 600 "$D/kubeconfig"
k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml -f deploy/crd/gpukmm.io_nodereportrequests.yaml \
	-f tests/fixtures/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml >"$D/apply.log" 2>&1
milestone "CRDs installed (ClusterPolicy, KMM Module)" 10 \
	k wait --for condition=established --timeout=2s crd/clusterpolicies.intel.com crd/nodereportrequests.gpukmm.io crd/modules.kmm.sigs.x-k8s.io

# 3 GPU nodes on two kernel families, one node without a GPU
K_RHEL=5.14.0-427.13.1.el9_4.x86_64 K_UBU=6.8.0-45-generic
node() { # NAME KERNEL GPU(true|false)
	local lbl='"kubernetes.io/arch":"amd64"'
	[ "$3" = true ] && lbl="$lbl,\"intel.feature.node.kubernetes.io/gpu\":\"true\""
	printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s","labels":{%s}},"status":{"nodeInfo":{"kernelVersion":"%s"}}}' \
		"$1" "$lbl" "$2" | k apply -f - >>"$D/apply.log" 2>&1
	kraw PATCH "/api/v1/nodes/$1/status" "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" \
		application/merge-patch+json >/dev/null
}
GPU_NODES="gpu-rhel-1 gpu-rhel-2 gpu-ubuntu-1"
declare -A KVER=([gpu-rhel-1]=$K_RHEL [gpu-rhel-2]=$K_RHEL [gpu-ubuntu-1]=$K_UBU [cpu-1]=$K_UBU)
for n in $GPU_NODES; do node "$n" "${KVER[$n]}" true; done
node cpu-1 "$K_UBU" false
milestone "4 nodes (3 GPU on 2 kernel families, 1 without GPU)" 10 \
	bash -c "[ \$(curl -s $KUBESIM_URL/api/v1/nodes | jq '.items | length') = 4 ]"

"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/kubeconfig" --load-delay-ms 700 --unload-delay-ms 500 \
	--log-level warn 2>"$D/fake-kmm.log" &
PIDS+=($!)

# --- the controller profile (the services of `--profile controller`, with the
# demo's arguments: the webhook on plain HTTP on an ephemeral port)
svc_list="{\"name\": \"watcher\", \"credentials\": true, \"args\": [\"--leader-elect\"]},
  {\"name\": \"modmgr\", \"credentials\": true},"
[ -n "$HAVE_GATER" ] && svc_list="$svc_list
  {\"name\": \"gater\", \"credentials\": true},"
[ -n "$HAVE_OPMGR" ] && svc_list="$svc_list
  {\"name\": \"opmgr\", \"credentials\": true},"
[ -n "$HAVE_UPGRADER" ] && svc_list="$svc_list
  {\"name\": \"upgrader\", \"credentials\": true},"
svc_list="$svc_list
  {\"name\": \"statusd\", \"credentials\": true},
  {\"name\": \"webhook\", \"args\": [\"--insecure-http\", \"--listen\", \"127.0.0.1:0\", \"--port-file\", \"$D/wport\"]}"
printf '{"services": [\n  %s\n]}\n' "$svc_list" >"$D/controller.json"
nsvc=$(jq '.services | length' "$D/controller.json")
OPERATOR_NAMESPACE=$NS GPUKMM_LOG_LEVEL=${GPUKMM_LOG_LEVEL:-warn} "$GPUKMM_BIN/gpukmm" --profile controller \
	--config "$D/controller.json" --runtime-dir "$D/run-controller" --kubeconfig "$D/kubeconfig" \
	--http-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --log-level info >"$D/controller.log" 2>&1 &
PIDS+=($!)
SUPS[$!]="gpukmm --profile controller"
say "gpukmm --profile controller started: $(jq -r '[.services[].name] | join(", ")' "$D/controller.json")"
milestone "controller ready (all $nsvc services reported Ready: gpukmmctl status)" 60 \
	"$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$D/run-controller" --timeout-ms 2000
show "$GPUKMM_BIN/gpukmmctl" status --runtime-dir "$D/run-controller"
[ -n "$HAVE_OPMGR" ] || skip "gpukmm-opmgr is not built: no device plugin / XPU Manager deployed"

# admission through the webhook the supervisor runs
wport=$(cat "$D/wport" 2>/dev/null)
sed -E "/^ *service:\$/,/^ *port: 443\$/{
	s|^( *)service:\$|\1url: http://127.0.0.1:$wport|
	/^ *(name|namespace|port):/d
	s|^ *path: (.*)\$|XXPATH \1|
}" deploy/webhook/webhooks.yaml | awk '/^ *url: /{u=$0; next} /^XXPATH /{print u $2; next} {print}' \
	| sed '/cert-manager.io\/inject-ca-from/d;/^  annotations:$/d' >"$D/webhooks.yaml"
k apply -f "$D/webhooks.yaml" >>"$D/apply.log" 2>&1
milestone "admission webhooks registered (served by the controller's gpukmm-webhook)" 10 \
	k get validatingwebhookconfiguration gpukmm-validating-webhook-configuration

# --- one node profile per GPU node (tests/lib/nodeprofile.sh)
np_init "$D" "$D/kubeconfig" "$NS"
for n in $GPU_NODES; do
	NP_SUP_ARGS="--metrics-listen 127.0.0.1:0 --log-level info" np_start "$n" "${KVER[$n]}" ||
		{ echo "not ok - node profile of $n starts"; FAILED=1; exit 1; }
done
say "gpukmm --profile node started on $GPU_NODES (prober + statusd --mode node)"
node_report() { kj "/api/v1/nodes/$1" | jq -e "$2" >/dev/null; }
for n in $GPU_NODES; do
	milestone "$n reports its GPU (gpukmm.io/gpu.present, xe not loaded yet)" 60 node_report "$n" \
		'.metadata.labels["gpukmm.io/gpu.present"] == "true" and .metadata.labels["gpukmm.io/xe.source"] == "none"'
done

# The stand-in for KMM's worker pods: when KMM marks xe loaded on a node, that
# node's fake root switches to "OoT xe loaded" (and back when KMM unloads it).
np_follow_start

# --- the policy
# the example, versioned (KMM's ordered upgrade) with automatic rolling upgrades when
# gpukmm-upgrader runs: it labels the nodes for the version itself, no admin step
POLICY=deploy/examples/clusterpolicy-kmm.yaml
if [ -n "$HAVE_UPGRADER" ]; then
	POLICY=$D/clusterpolicy-kmm.yaml
	sed 's/^  kernelModule:$/&\n    version: "1.3"\n    upgradePolicy: {autoUpgrade: true}/' deploy/examples/clusterpolicy-kmm.yaml >"$POLICY"
	say "kubectl apply -f deploy/examples/clusterpolicy-kmm.yaml, with kernelModule.version and upgradePolicy.autoUpgrade"
else
	say "kubectl apply -f deploy/examples/clusterpolicy-kmm.yaml"
fi
show sed -n '/^apiVersion/,$p' "$POLICY"
bad=$(sed "s/^  name: $CP\$/  name: $CP-name-far-too-long/" "$POLICY")
milestone "the webhook rejects a policy whose Module name is too long for KMM" 10 \
	bash -c "KUBECONFIG=/dev/null kubectl --server $KUBESIM_URL apply -f - <<<'$bad' 2>&1 | grep -q 'denied the request'"
k apply -f "$POLICY" >>"$D/apply.log" 2>&1
milestone "KMM Module $NS/$CP-gpu created" 20 mod_is '.kind == "Module"'
show bash -c "curl -s $KUBESIM_URL/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$CP-gpu | jq -c '.spec.moduleLoader.container.kernelMappings[]'"

if [ -n "$HAVE_OPMGR" ]; then
	say "resourceMonitoring: true — gpukmm-opmgr deploys the device plugin and the XPU Manager, gated on the driver"
	k patch clusterpolicy "$CP" --type merge -p '{"spec":{"resourceMonitoring":true}}' >>"$D/apply.log" 2>&1
	for ds in device-plugin xpu-manager; do
		milestone "$CP-$ds deployed by gpukmm-opmgr, gated on $READY_KEY" 20 bash -c \
			"curl -s $KUBESIM_URL/apis/apps/v1/namespaces/$NS/daemonsets/$CP-$ds | jq -e --arg k '$READY_KEY' '.metadata.labels[\"app.kubernetes.io/managed-by\"] == \"gpukmm\" and (.spec.template.spec.nodeSelector | has(\$k) and .[\"intel.feature.node.kubernetes.io/gpu\"] == \"true\")'"
	done
	show ds_table
fi

say "KMM loads the driver node by node; the device plugin and XPU Manager follow it"
# the nodes whose driver is loaded (KMM's ready label) and the nodes running a device plugin pod
ready_nodes() { kj /api/v1/nodes | jq -r --arg k "$READY_KEY" '[.items[] | select(.metadata.labels[$k] != null) | .metadata.name] | sort | join(" ")'; }
dp_where_loaded() {
	local r
	r=$(ready_nodes)
	[ -n "$r" ] && [ "$(ds_nodes device-plugin)" = "$r" ] && [ "$(tr ' ' '\n' <<<"$r" | grep -c .)" -ge "$1" ]
}
i=0
for n in $GPU_NODES; do
	milestone "xe loaded on $n (KMM ready label)" 30 node_ready "$n"
	i=$((i + 1))
	if [ -n "$HAVE_OPMGR" ]; then
		milestone "the device plugin runs exactly on the nodes where xe is loaded (at least $i)" 30 dp_where_loaded "$i"
		say "device plugin pods on: $(ds_nodes device-plugin)"
	fi
	show nodes_table
done
if [ -n "$HAVE_OPMGR" ]; then
	milestone "kubectl get clusterpolicy: DP 3/3, XPU 3/3 (the DaemonSets' real counts), DRA N/A" 40 cp_is \
		'.status.devicePluginStatus == "3/3" and .status.xpuManagerStatus == "3/3" and .status.draStatus == "N/A"'
	show ds_table
	show k get clusterpolicy
fi
milestone "no driver on cpu-1 (no GPU)" 2 bash -c "! curl -s $KUBESIM_URL/api/v1/nodes/cpu-1 | grep -q '$CP-gpu.ready'"
for n in $GPU_NODES; do
	milestone "$n's prober sees the out-of-tree xe (gpukmm.io/xe.source=oot)" 30 node_report "$n" \
		'.metadata.labels["gpukmm.io/xe.source"] == "oot"'
done

say "ClusterPolicy status"
milestone "status kmmStatus 3/3" 30 cp_is '.status.kmmStatus == "3/3"'
if [ -n "$HAVE_UPGRADER" ]; then
	milestone "first install: gpukmm-upgrader labelled every GPU node for 1.3 (no admin step), Upgraded=True" 30 cp_is \
		'(.status.conditions[] | select(.type == "Upgraded") | .status == "True" and .reason == "UpgradeComplete") and
		 .status.upgrade.targetVersion == "1.3" and .status.upgrade.upToDate == 3'
fi
milestone "status Ready=True (observedGeneration = generation)" 30 cp_is \
	'(.status.conditions[] | select(.type == "Ready") | .status == "True") and .status.observedGeneration == .metadata.generation'
if [ -n "$HAVE_NODES" ]; then
	milestone "status.nodes: 3 GPU nodes, OoT xe loaded on 3" 30 cp_is \
		'.status.nodes.gpuNodes == 3 and .status.nodes.ootLoaded == 3'
else
	skip "status.nodes summary (gpukmm-statusd does not write it yet)"
fi
# /metrics as Prometheus would scrape it
mport() { grep -o 'metrics: listening on 127.0.0.1:[0-9]*' "$1" 2>/dev/null | head -1 | grep -o '[0-9]*$'; }
scrape() { curl -sk --oauth2-bearer demo-scraper "https://127.0.0.1:$(mport "$D/controller.log")/metrics"; }
# the most useful numbers of the page in one line
metrics_line() {
	scrape | awk -v cp="$CP" '
		function lbl(k,   r) { r = $1; if (!match(r, k "=\"[^\"]*\"")) return ""; r = substr(r, RSTART + length(k) + 2, RLENGTH - length(k) - 3); return r }
		/^#/ { next }
		$1 ~ "^gpukmm_policy_kmm_available_nodes\\{" && lbl("policy") == cp { av = $2 }
		$1 ~ "^gpukmm_policy_kmm_desired_nodes\\{" && lbl("policy") == cp { de = $2 }
		$1 ~ "^gpukmm_policy_condition\\{" && lbl("policy") == cp && lbl("type") == "Ready" && $2 == 1 { ready = lbl("status") }
		$1 ~ "^gpukmm_policy_gpu_nodes\\{" && lbl("policy") == cp { src = src sep lbl("module_source") " " $2; sep = ", " }
		$1 ~ "^gpukmm_policy_problem_nodes\\{" && lbl("policy") == cp { prob += $2 }
		$1 ~ "^gpukmm_service_restarts_total\\{" { rs += $2 }
		$1 ~ "^gpukmm_api_requests_total\\{" { api += $2; if (lbl("code") ~ /^5|429|error/) apierr += $2 }
		$1 ~ "^gpukmm_webhook_admissions_total\\{" { adm[lbl("result")] += $2 }
		$1 == "gpukmm_leader{service=\"watcher\"}" { lead = $2 }
		END {
			if (de == "") exit 1
			printf "%s: KMM %d/%d, Ready %s, GPU nodes (%s), problem nodes %d | leader %d, restarts %d, API requests %d (%d failed), admissions %d allowed / %d denied\n",
				cp, av, de, ready, src, prob, lead, rs, api, apierr, adm["allowed"], adm["denied"]
		}'
}
milestone "controller /metrics served over HTTPS to a reviewed token, KMM 3/3 on it" 20 bash -c \
	"$(declare -f mport scrape metrics_line); D=$D CP=$CP; metrics_line | grep -q 'KMM 3/3'"
if [ -n "$CHECK" ]; then
	echo "# metrics: $(metrics_line)"
else
	echo "   metrics: $(metrics_line)"
fi
show k get clusterpolicy -o custom-columns='NAME:.metadata.name,KMM:.status.kmmStatus,DP:.status.devicePluginStatus,DRA:.status.draStatus,XPU:.status.xpuManagerStatus,READY:.status.conditions[?(@.type=="Ready")].status,REASON:.status.conditions[?(@.type=="Ready")].reason'
show bash -c "curl -s $KUBESIM_URL/apis/intel.com/v1alpha1/clusterpolicies/$CP | jq '.status'"

# --- a version change: KMM's ordered upgrade, by hand (without gpukmm-upgrader; with it, the
# policy is versioned from the start and the upgrade below rolls without an admin step)
if [ -z "$HAVE_UPGRADER" ]; then
	say "version change: kernelModule.version 1.4 (KMM ordered upgrade)"
	k patch clusterpolicy "$CP" --type merge -p '{"spec":{"kernelModule":{"version":"1.4"}}}' >>"$D/apply.log" 2>&1
	milestone "Module recreated with version 1.4 (KMM forbids adding a version in place)" 30 \
		mod_is '.spec.moduleLoader.container.version == "1.4"'
	milestone "status says why the nodes wait: Ready=False, 0 desired" 30 cp_is \
		'(.status.conditions[] | select(.type == "Ready") | .status == "False" and (.message | test("0 desired"))) and .status.observedGeneration == .metadata.generation'
	show bash -c "curl -s $KUBESIM_URL/apis/intel.com/v1alpha1/clusterpolicies/$CP | jq -c '.status.conditions[] | select(.type == \"Ready\")'"
	milestone "KMM unloaded the unversioned module (ready labels gone)" 30 bash -c \
		"! curl -s $KUBESIM_URL/api/v1/nodes | grep -q '$CP-gpu.ready'"
	say "the admin moves the nodes to 1.4 one by one (label kmm.node.kubernetes.io/version-module...)"
	for n in $GPU_NODES; do
		k label node "$n" "kmm.node.kubernetes.io/version-module.$NS.$CP-gpu=1.4" >>"$D/apply.log" 2>&1
		milestone "xe 1.4 loaded on $n" 30 node_ready "$n"
	done
	milestone "status Ready=True again for the new generation (KMM 3/3)" 30 cp_is \
		'(.status.conditions[] | select(.type == "Ready") | .status == "True") and .status.observedGeneration == .metadata.generation and .status.kmmStatus == "3/3"'
fi

# --- an automatic rolling upgrade: gpukmm-upgrader moves the nodes, not the admin
VKEY="kmm.node.kubernetes.io/version-module.$NS.$CP-gpu"
UPSTATE=gpukmm.io/upgrade-state
# one line per GPU node: name, KMM's version label, the upgrade state, cordon, KMM's ready label
upgrade_rows() {
	kj /api/v1/nodes | jq -r --arg v "$VKEY" --arg s "$UPSTATE" --arg k "$READY_KEY" '.items[] |
		select(.metadata.labels["intel.feature.node.kubernetes.io/gpu"] == "true") |
		"\(.metadata.name)\t\(.metadata.labels[$v] // "-")\t\(.metadata.labels[$s] // "-")\t\(if .spec.unschedulable then "cordoned" else "-" end)\t\(if .metadata.labels[$k] != null then "yes" else "-" end)"'
}
upgrade_counts() {
	cpj | jq -r '(.status.conditions[]? | select(.type == "Upgraded") | .reason) as $r | .status.upgrade // empty |
		"\($r // "-"): \(.upToDate // 0)/\(.nodes // 0) on \(.targetVersion // "-"), draining \(.draining // 0), unloading \(.unloading // 0), loading \(.loading // 0), failed \(.failed // 0)"'
}
# print each node's line when it changes and the rollout's counts when they change, until
# every GPU node is done on $1 (or $2 s); UPG_MAXDOWN = the most nodes seen without the driver
watch_rollout() {
	local want=$1 end=$((SECONDS + $2)) rows prev="" c pc="" line down
	local -A seen=()
	UPG_MAXDOWN=0
	[ -n "$CHECK" ] || printf '     %-14s %-8s %-10s %-9s %s\n' NODE VERSION STATE CORDON KMM-READY
	while [ $SECONDS -lt $end ]; do
		rows=$(upgrade_rows 2>/dev/null)
		down=$(awk -F'\t' '$5 != "yes"' <<<"$rows" | grep -c .)
		[ "$down" -gt "$UPG_MAXDOWN" ] && UPG_MAXDOWN=$down
		if [ "$rows" != "$prev" ]; then
			while IFS=$'\t' read -r n v st co r; do
				line="$v $st $co $r"
				[ "${seen[$n]:-}" = "$line" ] && continue
				seen[$n]=$line
				if [ -n "$CHECK" ]; then echo "#   $n: version $v, state $st, $co, KMM ready $r"
				else printf '     %-14s %-8s %-10s %-9s %s\n' "$n" "$v" "$st" "$co" "$r"; fi
			done <<<"$rows"
			prev=$rows
		fi
		c=$(upgrade_counts 2>/dev/null)
		if [ -n "$c" ] && [ "$c" != "$pc" ]; then
			if [ -n "$CHECK" ]; then echo "#   status.upgrade: $c"; else echo "       status: $c"; fi
			pc=$c
		fi
		[ "$(awk -F'\t' -v w="$want" '$2 == w && $3 == "done"' <<<"$rows" | grep -c .)" = 3 ] && return 0
		sleep 0.3
	done
	return 1
}
node_events() {
	k get events --field-selector "involvedObject.name=$1" --sort-by=.metadata.name -o custom-columns=REASON:.reason,MESSAGE:.message \
		2>/dev/null | grep -E '^(REASON|Upgrad)' | cut -c1-160 | sed 's/^/     /'
}
if [ -n "$HAVE_UPGRADER" ]; then
	say "a new driver: kernelModule.version 1.3 -> 1.4, rolled out by gpukmm-upgrader (upgradePolicy.autoUpgrade)"
	show echo "   a GPU workload runs on every node (pods of a ReplicaSet asking for gpu.intel.com/xe)"
	k create namespace work >>"$D/apply.log" 2>&1
	k apply -f - >>"$D/apply.log" 2>&1 <<Y
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: inference, namespace: work}
spec:
  replicas: 3
  selector: {matchLabels: {app: inference}}
  template:
    metadata: {labels: {app: inference}}
    spec: {containers: [{name: c, image: inference}]}
Y
	rs_uid=$(k get rs -n work inference -o jsonpath='{.metadata.uid}')
	for n in $GPU_NODES; do
		kraw POST /api/v1/namespaces/work/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"inference-$n\",
			\"namespace\":\"work\",\"labels\":{\"app\":\"inference\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",
			\"kind\":\"ReplicaSet\",\"name\":\"inference\",\"uid\":\"$rs_uid\",\"controller\":true}]},\"spec\":{\"nodeName\":\"$n\",
			\"containers\":[{\"name\":\"c\",\"image\":\"inference\",\"resources\":{\"limits\":{\"gpu.intel.com/xe\":\"1\"}}}]}}" >/dev/null
	done
	milestone "3 GPU workload pods run, one per GPU node" 30 bash -c \
		"[ \"\$(curl -s '$KUBESIM_URL/api/v1/namespaces/work/pods' | jq '[.items[] | select(.status.phase == \"Running\")] | length')\" = 3 ]"
	show echo "   kubectl patch clusterpolicy $CP --type merge -p '{\"spec\":{\"kernelModule\":{\"version\":\"1.4\"}}}'"
	show echo "   (defaults: maxParallel 1, maxUnavailable 25%, drain on: the pods using a GPU are evicted through the Eviction API)"
	t_up=$SECONDS
	k patch clusterpolicy "$CP" --type merge -p '{"spec":{"kernelModule":{"version":"1.4"}}}' >>"$D/apply.log" 2>&1
	say "gpukmm-upgrader rolls it node by node: cordon, drain, unload, version label, load, confirm, uncordon"
	if watch_rollout 1.4 120; then
		milestone "every GPU node upgraded to 1.4 by gpukmm-upgrader (state done), in $((SECONDS - t_up))s, no admin labelling" 1 true
	else
		milestone "every GPU node upgraded to 1.4 by gpukmm-upgrader (state done)" 1 false
	fi
	milestone "never more than maxParallel = 1 node without the driver during the rollout (max seen $UPG_MAXDOWN)" 1 \
		[ "$UPG_MAXDOWN" -le 1 ]
	milestone "every node's own report confirms xe 1.4 loaded" 30 bash -c "curl -s $KUBESIM_URL/api/v1/nodes | jq -e '
		[.items[] | select(.metadata.labels[\"intel.feature.node.kubernetes.io/gpu\"] == \"true\") |
		 .metadata.annotations[\"gpukmm.io/node-report\"] | fromjson | .module | .loaded and .version == \"1.4\"] | length == 3 and all'"
	milestone "Upgraded=True UpgradeComplete, status.upgrade 3/3 on 1.4" 30 cp_is \
		'(.status.conditions[] | select(.type == "Upgraded") | .status == "True" and .reason == "UpgradeComplete") and
		 .status.upgrade.targetVersion == "1.4" and .status.upgrade.upToDate == 3'
	milestone "the workload pods were evicted (Eviction API), every node uncordoned" 10 bash -c \
		"[ \"\$(curl -s '$KUBESIM_URL/api/v1/namespaces/work/pods' | jq '.items | length')\" = 0 ] &&
		 curl -s $KUBESIM_URL/api/v1/nodes | jq -e '[.items[] | .spec.unschedulable // false] | any | not' >/dev/null"
	show k get clusterpolicy "$CP" -o custom-columns='NAME:.metadata.name,KMM:.status.kmmStatus,TARGET:.status.upgrade.targetVersion,UP-TO-DATE:.status.upgrade.upToDate,NODES:.status.upgrade.nodes,UPGRADED:.status.conditions[?(@.type=="Upgraded")].reason'
	show echo "   kubectl get events --field-selector involvedObject.name=gpu-rhel-1 (gpukmm-upgrader's, one per step):"
	show node_events gpu-rhel-1
fi

# --- a GPU in use blocks the removal of the driver
say "a workload holds a GPU (allocated ResourceClaim); the policy drops kernelModule"
kraw POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"user"}}' >/dev/null
kraw POST /apis/resource.k8s.io/v1/namespaces/user/resourceclaims \
	'{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"job-gpu","namespace":"user"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.intel.com"}}]}}}' >/dev/null
kraw PATCH /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/job-gpu/status \
	'{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.intel.com","pool":"gpu-rhel-1","device":"gpu-0"}]}}}}' \
	application/merge-patch+json >/dev/null
k patch clusterpolicy "$CP" --type json -p '[{"op":"remove","path":"/spec/kernelModule"}]' >>"$D/apply.log" 2>&1
milestone "deletion blocked while the claim is allocated (status.errors says why)" 30 cp_is \
	'[.status.errors[]? | select(test("allocated GPU ResourceClaims blocking"))] | length > 0'
milestone "Module still there" 2 mod_is '.kind == "Module"'
show bash -c "curl -s $KUBESIM_URL/apis/intel.com/v1alpha1/clusterpolicies/$CP | jq -c '.status.errors'"
say "the workload ends: claim deleted"
kraw DELETE /apis/resource.k8s.io/v1/namespaces/user/resourceclaims/job-gpu >/dev/null
milestone "Module deleted once the GPU is released" 30 bash -c \
	"curl -s $KUBESIM_URL/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$CP-gpu | jq -e '.kind != \"Module\"'"
milestone "KMM unloaded the driver (ready labels gone)" 30 bash -c \
	"! curl -s $KUBESIM_URL/api/v1/nodes | grep -q '$CP-gpu.ready'"
if [ -n "$HAVE_OPMGR" ]; then
	milestone "DaemonSets no longer gated" 30 bash -c \
		"curl -s $KUBESIM_URL/apis/apps/v1/namespaces/$NS/daemonsets | jq -e --arg k '$READY_KEY' '[.items[] | .spec.template.spec.nodeSelector | has(\$k)] | any | not'"
fi
milestone "the blocking error is gone from status" 30 cp_is \
	'[.status.errors[]? | select(test("blocking"))] | length == 0'

if [ -n "$HAVE_OPMGR" ]; then
	say "kubectl delete clusterpolicy $CP: the device plugin and XPU Manager go, then the policy"
	k delete clusterpolicy "$CP" --wait=false >>"$D/apply.log" 2>&1
	milestone "policy deleted, nothing left behind (DaemonSets, OTel ConfigMap, their pods)" 40 bash -c \
		"[ \"\$(curl -s $KUBESIM_URL/apis/intel.com/v1alpha1/clusterpolicies | jq '.items | length')\" = 0 ] &&
		 [ \"\$(curl -s '$KUBESIM_URL/apis/apps/v1/namespaces/$NS/daemonsets' | jq '.items | length')\" = 0 ] &&
		 [ \"\$(curl -s '$KUBESIM_URL/api/v1/namespaces/$NS/configmaps?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dgpukmm' | jq '.items | length')\" = 0 ]"
fi

if [ -n "${KEEP:-}" ] && [ -z "$CHECK" ]; then
	say "still running; try:"
	echo "   kubectl --server $KUBESIM_URL get clusterpolicy,nodes,daemonsets -A"
	echo "   kubectl --server $KUBESIM_URL get clusterpolicy $CP -o yaml"
	echo "   kubectl --server $KUBESIM_URL apply -f deploy/examples/clusterpolicy-kmm.yaml"
	echo "   $GPUKMM_BIN/gpukmmctl status --runtime-dir $D/run-controller"
	echo "   metrics (HTTPS; the token is reviewed by statusd through the API server's TokenReview"
	echo "   and SubjectAccessReview; -k: the serving certificate is self-signed here):"
	echo "     curl -sk --oauth2-bearer demo-scraper https://127.0.0.1:$(mport "$D/controller.log")/metrics   # controller"
	for n in $GPU_NODES; do
		echo "     curl -sk --oauth2-bearer demo-scraper https://127.0.0.1:$(mport "$NP_DIR/node-$n.log")/metrics   # node $n"
	done
	echo "   now: $(metrics_line)"
	echo "   $GPUKMM_BIN/gpukmmctl probe --root $NP_DIR/gpu-rhel-1/root"
	echo "   Ctrl-C stops everything"
	while kill -0 "${PIDS[0]}" 2>/dev/null; do sleep 1; done
fi
[ "$FAILED" = 0 ]
