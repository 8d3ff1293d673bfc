#!/bin/bash
# Issue #9's cluster scenarios end to end, through the real processes and the real
# kubectl: two leader-elected `gpukmm --profile controller` and one
# `gpukmm --profile node` per GPU node (tests/lib/controller.sh, nodeprofile.sh)
# against kubesim, fake-kmm as KMM.
#   1. KMM installed after start: the policy reports KMM missing; the KMM CRD
#      appears and fake-kmm starts — no restart — the Module is created and loaded
#   2. node added: a new GPU node (and its node profile) is counted and loaded
#   3. node cordoned: the driver stays loaded (the Module tolerates the cordon, issue #19),
#      KMM never tries to unload it, the status stays Ready; uncordoned: nothing changes
#   4. kernel upgraded: a node reboots into another kernel (Node + its node root);
#      KMM loads the module built for it; a kernel no mapping matches is named in
#      status.nodes (NoKernelMapping) and blocks Ready
#   5. leader failover: kill -9 of the leading controller; the other takes the
#      Lease and applies a policy change made meanwhile
# Every supervisor must stop cleanly at the end.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/scenario.sh
NS=intel-gpu-base-operator
CP=gpu-kmm
KEY="kmm.node.kubernetes.io/$NS.$CP-gpu.ready"
K_UBU=6.8.0-45-generic K_UBU2=6.8.0-50-generic K_RHEL=5.14.0-427.13.1.el9_4.x86_64 K_NOMAP=6.1.0-99-amd64
sc_init scenarios
ready_is() { # True|False [REASON]
	cp_is "(.status.conditions[] | select(.type == \"Ready\") | .status == \"$1\" and (\"${2:-}\" == \"\" or .reason == \"${2:-}\"))
		and .status.observedGeneration == .metadata.generation"
}

# ---- the cluster without KMM; the controllers and the node profiles ---------------------
k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml -f deploy/crd/gpukmm.io_nodereportrequests.yaml >>"$D/kubectl.log" 2>&1
k wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com crd/nodereportrequests.gpukmm.io >>"$D/kubectl.log" 2>&1
kubesim_kubeconfigs "$D" "$NS" || nok "the shipped RBAC and the ServiceAccounts' kubeconfigs"
node gpu-1 "$K_UBU"
node gpu-2 "$K_RHEL"
np_init "$D" "$D/node-kubeconfig" "$NS"
np_start gpu-1 "$K_UBU" && np_start gpu-2 "$K_RHEL" || nok "node profiles start"
np_follow_start
ctrl_start A
ctrl_start B
check "two controllers ready" 60 eval 'ctrl_ready A && ctrl_ready B'
check "one of them leads" 30 has_leader

# ---- 1. KMM installed after start ----------------------------------------------------------
k apply -f deploy/examples/clusterpolicy-kmm.yaml >>"$D/kubectl.log" 2>&1
check "KMM absent: status.errors says so, Ready=False" 30 cp_is \
	'any(.status.errors[]?; test("KMM is not installed")) and (.status.conditions[] | select(.type == "Ready") | .status == "False")'
check "KMM absent: the node profiles report the GPUs, xe not loaded" 30 cp_is \
	'.status.nodes.gpuNodes == 2 and .status.nodes.notLoaded == 2'
k apply -f tests/fixtures/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml >>"$D/kubectl.log" 2>&1
"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/kmm-kubeconfig" --load-delay-ms 200 --unload-delay-ms 200 \
	--log-level warn 2>>"$D/fake-kmm.log" &
FK_PID=$!
check "KMM installed later: Module created without a restart" 30 eval "k -n $NS get module $CP-gpu >/dev/null"
check "KMM installed later: the error is gone" 30 cp_is '(.status.errors // []) | length == 0'
check "KMM loads xe on both nodes; each node's prober sees it (xe.source=oot)" 40 eval \
	'loaded_on gpu-1 && loaded_on gpu-2 && node_is gpu-1 ".metadata.labels[\"gpukmm.io/xe.source\"] == \"oot\"" && node_is gpu-2 ".metadata.labels[\"gpukmm.io/xe.source\"] == \"oot\""'
check "status: KMM 2/2, status.nodes ootLoaded 2, Ready=True" 40 eval \
	'cp_is ".status.kmmStatus == \"2/2\" and .status.nodes.ootLoaded == 2" && ready_is True'
[ "$(k get clusterpolicy "$CP" --no-headers 2>/dev/null | awk '{print $5, $6}')" = "2/2 True" ] &&
	ok "kubectl get clusterpolicy: KMM 2/2, Ready True" || nok "kubectl get clusterpolicy columns: $(k get clusterpolicy "$CP" --no-headers 2>&1)"

# ---- 2. node added ----------------------------------------------------------------------------
node gpu-3 "$K_UBU"
np_start gpu-3 "$K_UBU" || nok "node profile gpu-3 starts"
check "node added: KMM loads xe there" 40 loaded_on gpu-3
check "node added: KMM 3/3, status.nodes gpuNodes 3 / ootLoaded 3, Ready=True" 40 eval \
	'cp_is ".status.kmmStatus == \"3/3\" and .status.nodes.gpuNodes == 3 and .status.nodes.ootLoaded == 3" && ready_is True'

# ---- 3. node cordoned -------------------------------------------------------------------------
# The drain-safe Module (ARCHITECTURE §5) tolerates node.kubernetes.io/unschedulable: a cordon
# never changes what is loaded. Before it, KMM dropped the cordoned node and unloaded there.
FAILED_UNLOAD="fake-kmm.gpukmm.io/unload-failed.$NS.$CP-gpu"
k cordon gpu-3 >>"$D/kubectl.log" 2>&1
check "cordoned: the Module tolerates the cordon (drain-safe)" 20 eval \
	"kraw GET /apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$CP-gpu | jq -e '.spec.tolerations | index({\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}) != null'"
# a barrier: once fake-kmm has loaded a node that joined after the cordon, it has seen the cordon
node gpu-4 "$K_UBU"
check "cordoned: fake-kmm has seen the cordon (a node that joined after it loaded)" 40 loaded_on gpu-4
check "cordoned: the driver stays on gpu-3 (ready label), KMM never tried to unload it" 5 eval \
	"loaded_on gpu-3 && node_is gpu-3 '.metadata.annotations[\"$FAILED_UNLOAD\"] == null'"
check "cordoned: gpu-3 stays in the Module's targets (4 matching, 4 available)" 20 eval \
	"kraw GET /apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/$NS/modules/$CP-gpu | jq -e '.status.moduleLoader | .nodesMatchingSelectorNumber == 4 and .availableNumber == 4'"
k delete node gpu-4 >>"$D/kubectl.log" 2>&1
check "cordoned: status names no problem on gpu-3, KMM 3/3, Ready=True" 40 eval \
	'cp_is "([.status.nodes.problems[]? | select(.node == \"gpu-3\")] | length == 0) and .status.kmmStatus == \"3/3\" and .status.nodes.ootLoaded == 3" && ready_is True'
k uncordon gpu-3 >>"$D/kubectl.log" 2>&1
check "uncordoned: still loaded, nothing unloaded, Ready=True, no problem node" 40 eval \
	'loaded_on gpu-3 && node_is gpu-3 ".metadata.annotations[\"$FAILED_UNLOAD\"] == null" && cp_is ".status.nodes.ootLoaded == 3 and .status.nodes.problemNodes == 0" && ready_is True'

# ---- 4. kernel upgraded -----------------------------------------------------------------------
reboot_into() { # NODE KERNEL: the node profile stops, the node boots KERNEL, the profile starts
	np_stop "$1"
	[ "$NP_RC" = 0 ] || nok "node profile $1 stops cleanly before the reboot (exit $NP_RC)"
	np_kernel "$1" "$2"
	k patch node "$1" --subresource=status --type=merge -p "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" >>"$D/kubectl.log" 2>&1
	np_start "$1" "$2"
}
reboot_into gpu-1 "$K_UBU2"
check "kernel upgraded: gpu-1 reports the new kernel" 40 node_is gpu-1 \
	"(.metadata.annotations[\"gpukmm.io/node-report\"] | fromjson | .kernelVersion) == \"$K_UBU2\""
check "kernel upgraded: KMM loads the module built for it (ready label, xe.source=oot)" 40 eval \
	"loaded_on gpu-1 && node_is gpu-1 '.metadata.labels[\"gpukmm.io/xe.source\"] == \"oot\"'"
check "kernel upgraded: KMM 3/3, Ready=True" 40 eval 'cp_is ".status.kmmStatus == \"3/3\" and .status.nodes.ootLoaded == 3" && ready_is True'
reboot_into gpu-2 "$K_NOMAP"
check "a kernel no mapping matches: status.nodes names gpu-2 (NoKernelMapping)" 40 cp_is \
	'[.status.nodes.problems[]? | select(.node == "gpu-2" and .reason == "NoKernelMapping")] | length == 1'
check "... and Ready=False with that reason" 40 ready_is False NoKernelMapping
ready_is False NoKernelMapping ||
	echo "#   status: $(cpj | jq -c '[.status.kmmStatus, .status.nodes, .status.conditions, .status.upgrade]')"
reboot_into gpu-2 "$K_RHEL"
check "back on a mapped kernel: KMM 3/3, Ready=True" 60 eval \
	'loaded_on gpu-2 && cp_is ".status.kmmStatus == \"3/3\" and .status.nodes.ootLoaded == 3" && ready_is True'

# ---- 5. leader failover -----------------------------------------------------------------------
l=$(leader)
[ -n "$l" ] && ok "the Lease is held by controller $l ($(holder))" || nok "a controller holds the Lease ($(holder))"
o=$([ "$l" = A ] && echo B || echo A)
kill -KILL "${SUP[$l]}" 2>/dev/null
wait "${SUP[$l]}" 2>/dev/null
unset "SUP[$l]"
t0=$SECONDS
k patch clusterpolicy "$CP" --type merge -p '{"spec":{"kernelModule":{"firmwarePath":"/opt/lib/firmware/xe-next"}}}' >>"$D/kubectl.log" 2>&1
check "leader killed -9: controller $o takes the Lease over" 30 eval "[ \"\$(holder)\" = ctrl-$o-${GEN[$o]} ]"
echo "# takeover after $((SECONDS - t0)) s (Lease duration 4 s)"
check "the new leader applies the change made meanwhile (Module firmwarePath)" 30 eval \
	"k -n $NS get module $CP-gpu -o json | jq -e '.spec.moduleLoader.container.modprobe.firmwarePath == \"/opt/lib/firmware/xe-next\"' >/dev/null"
check "... and its status follows (observedGeneration, Ready=True)" 40 ready_is True
ctrl_start "$l"
check "the killed controller comes back as a follower" 60 eval "ctrl_ready $l && [ \"\$(holder)\" = ctrl-$o-${GEN[$o]} ]"
