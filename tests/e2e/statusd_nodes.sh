#!/bin/bash
# gpukmm-statusd controller mode with the watcher: status.nodes and the
# conditions from the Nodes' gpukmm.io/node-report annotations (written by this
# statusd from a node-mode statusd's NodeReportRequest, or by hand with kubectl
# annotate: the gpukmm.io/v1alpha1 report, summarized ones, and the format of the
# release before, still read during an upgrade), leadership (a follower applies no
# request), restart, 409 storms. kubesim + gpukmm-watcher + gpukmm-statusd (both
# modes); the component reports are sent with gpukmmctl ipc call.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/statusd.sh

MM_NO_START=1
MM_WATCHER_FLAGS="--leader-elect --retry-period 1 --lease-name gpukmm-controller"
sd_setup
CTL="$GPUKMM_BIN/gpukmmctl"
SD_SOCK="ipc://$MM_DIR/sd.sock"
NSD_SOCK="ipc://$MM_DIR/nsd.sock"
sd_start() { sd_start_watching --debounce-ms 200 --grace-ms "${SD_GRACE:-60000}"; }
# a component report, made in the current term (what modmgr and gater stamp theirs with)
report() { sd_report_in "$(sd_term)" "$1"; }
st_has() { cp_json | jq -e ".status | $1" >/dev/null; }
cond() { cp_json | jq -r ".status.conditions[] | select(.type==\"$1\") | .$2"; }
status_writes() { kraw GET /kubesim/stats | jq -r '.writesByResource.clusterpolicies // 0'; }
# Nodes: name, kernel; every one amd64 (the policy's selector)
mknode() {
	kraw POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",\"labels\":{\"kubernetes.io/arch\":\"${3:-amd64}\"}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" >/dev/null
}
kernel() { kraw PATCH "/api/v1/nodes/$1/status" "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" application/merge-patch+json >/dev/null; }
# what a node-mode statusd writes, by hand (a realistic report from the prober's fields)
annotate() { k annotate node "$1" --overwrite "gpukmm.io/node-report=$2" >/dev/null; }
REP_OOT='{"node_name":"b","kernel_version":"6.8.0-45-generic","module_name":"xe","gpus":[{"address":"0000:03:00.0","vendor_id":32902,"device_id":57891,"sriov_totalvfs":7,"sriov_numvfs":0,"driver":"xe"}],"module":{"name":"xe","loaded":true,"source":"SOURCE_OOT","version":"1.2.3","taint":"OE","refcount":0},"modules_supported":true,"secure_boot":"TRI_NO","can_unload":"TRI_YES"}'
REP_VFS='{"node_name":"b","kernel_version":"6.8.0-45-generic","module_name":"xe","gpus":[{"address":"0000:03:00.0","vendor_id":32902,"device_id":57891,"sriov_totalvfs":7,"sriov_numvfs":2,"driver":"xe"},{"address":"0000:03:00.1","is_vf":true,"physfn":"0000:03:00.0"},{"address":"0000:03:00.2","is_vf":true,"physfn":"0000:03:00.0"}],"module":{"name":"xe","loaded":true,"source":"SOURCE_OOT","version":"1.2.3","taint":"OE","refcount":2},"modules_supported":true,"secure_boot":"TRI_NO","can_unload":"TRI_NO","unload_blocker":"2 SR-IOV VFs active on 0000:03:00.0"}'
REP_SB='{"node_name":"d","kernel_version":"6.8.0-45-generic","module_name":"xe","gpus":[{"address":"0000:03:00.0","vendor_id":32902,"device_id":57891}],"module":{"name":"xe","loaded":false,"source":"SOURCE_NONE","ko_path":"kernel/drivers/gpu/drm/xe/xe.ko"},"secure_boot":"TRI_YES","lockdown":"integrity"}'

KM='{"moduleName":"xe","kernelMappings":[{"regexp":"^6\\.8\\.","containerImage":"registry.example.com/xe-driver:1.0"}]}'
for n in a b c; do mknode "$n" 6.8.0-45-generic; done
mknode arm1 6.8.0-45-generic arm64
apply_cp gpu dp "$KM"
# a node-mode statusd hands node a's report in (its pod's token for the audience gpukmm.io/node-report)
kubesim_pod_token "$MM_NS" gpukmm-node a gpukmm-node-a gpukmm.io/node-report "$MM_DIR/tok-a" || notok "node a's pod token"
NODE_NAME=a "$GPUKMM_BIN/gpukmm-statusd" --mode node --kubeconfig "$MM_DIR/node-kubeconfig" --listen "$NSD_SOCK" \
	--namespace "$MM_NS" --report-token-file "$MM_DIR/tok-a" --debounce-ms 50 >>"$MM_DIR/statusd-node.log" 2>&1 &
NSD_PID=$!
REP_A='{"node_name":"a","kernel_version":"6.8.0-45-generic","module_name":"xe","gpus":[{"address":"0000:03:00.0","sriov_numvfs":0}],"module":{"name":"xe","loaded":true,"source":"SOURCE_OOT"}}'
check "node-mode statusd takes node a's report" wait_for "node statusd" 10 \
	"$CTL" ipc call "$NSD_SOCK" gpukmm.Status.ReportNode "$REP_A" --timeout-ms 3000
annotate b "$REP_OOT"
node_has_report() { kraw GET "/api/v1/nodes/$1" | jq -e '.metadata.annotations["gpukmm.io/node-report"] != null' >/dev/null; }
request_a() { kraw GET "/apis/gpukmm.io/v1alpha1/namespaces/$MM_NS/nodereportrequests/a" | jq -e '.kind == "NodeReportRequest"' >/dev/null; }
check "node a's report handed in (NodeReportRequest a)" wait_for "request a" 10 request_a

# ---- a follower writes nothing --------------------------------------------------------------
now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
kraw POST "/apis/coordination.k8s.io/v1/namespaces/$MM_NS/leases" \
	"{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"gpukmm-controller\",\"namespace\":\"$MM_NS\"},\"spec\":{\"holderIdentity\":\"someone-else\",\"leaseDurationSeconds\":3600,\"acquireTime\":\"$now\",\"renewTime\":\"$now\"}}" >/dev/null
mm_start_watcher
wf=$(status_writes)
sd_start
check "statusd answers Report" wait_for "statusd up" 10 report '{"component":"modmgr","policy":"gpu","generation":1,"kmm_status":"2/2"}'
report '{"component":"gater","policy":"gpu","generation":1,"device_plugin_status":"2/2","dra_status":"N/A","xpu_manager_status":"N/A"}'
follower_skipped() { [ "$(sd_counter "$SD_PID" statusd_not_leader)" -gt 0 ] && [ "$(sd_counter "$SD_PID" statusd_pending)" = 0 ]; }
check "a follower evaluates and skips" wait_for "not leader" 20 follower_skipped
check "a follower writes no status ($wf -> $(status_writes))" test "$(status_writes)" = "$wf"
check "a follower applies no NodeReportRequest (a's waits, node a unwritten)" eval \
	"request_a && ! node_has_report a && [ \"\$(sd_counter $SD_PID statusd_node_requests_applied)\" = 0 ]"
kraw DELETE "/apis/coordination.k8s.io/v1/namespaces/$MM_NS/leases/gpukmm-controller" >/dev/null
check "the leader applies it: node a annotated" wait_for "annotation a" 20 node_has_report a

# ---- leader: status.nodes ------------------------------------------------------------------
leading() { [ "$(sd_term)" != 0 ]; }
check "leader now" wait_for leader 20 leading
# the reports above were made before this term: nothing is written from them
# (statusd_failover.sh); the components report again in the new term
report '{"component":"modmgr","policy":"gpu","generation":1,"kmm_status":"2/2"}'
report '{"component":"gater","policy":"gpu","generation":1,"device_plugin_status":"2/2","dra_status":"N/A","xpu_manager_status":"N/A"}'
check "status.nodes appears once the components reported in the leader's term" wait_for nodes 20 st_has '.nodes.gpuNodes == 2'
check "counts: 2 OoT, 1 without report, arm64 node not selected" \
	st_has '.nodes == {"gpuNodes":2,"ootLoaded":2,"inTreeLoaded":0,"notLoaded":0,"unknown":1,"problemNodes":1,"problems":[{"node":"c","reason":"NoReport","message":"no node report"}]}'
check "Ready True (a node without report does not make it False)" st_has '(.conditions[] | select(.type=="Ready") | .status == "True")'
check "Degraded False" st_has '(.conditions[] | select(.type=="Degraded") | .status == "False")'
t_ready=$(cond Ready lastTransitionTime)
t_deg=$(cond Degraded lastTransitionTime)
sleep 1.1 # the next transition must get a later (second-resolution) timestamp

# ---- VFs activated on b: Degraded (an update would be blocked), Ready stays -----------------------
annotate b "$REP_VFS"
check "VFs on b listed with the exact reason" wait_for vfs 10 \
	st_has '.nodes.problems == [{"node":"b","reason":"VFsActive","message":"VFs active: xe cannot be unloaded for an update"},{"node":"c","reason":"NoReport","message":"no node report"}]'
check "Degraded True, NodeProblems, naming b" st_has '(.conditions[] | select(.type=="Degraded") | .status == "True" and .reason == "NodeProblems" and .message == "node b: VFs active: xe cannot be unloaded for an update")'
check "Degraded transition time moved" test "$(cond Degraded lastTransitionTime)" != "$t_deg"
check "Ready still True, its transition time unchanged" test "$(cond Ready status)/$(cond Ready lastTransitionTime)" = "True/$t_ready"

# ---- node a upgraded to a kernel no mapping matches, in-tree xe comes back ----------------------
# Two writes (the Node's kernel, then its report): statusd may well write the
# state between them (the new kernel with the old report already names the
# missing mapping), so the wait is for what only the second write brings.
kernel a 6.9.0-1-generic
"$CTL" ipc call "$NSD_SOCK" gpukmm.Status.ReportNode "$(jq -c '.kernel_version="6.9.0-1-generic" | .module.source="SOURCE_IN_TREE"' <<<"$REP_A")" --timeout-ms 3000 >/dev/null
check "a: no kernelMapping matches kernel 6.9.0-1-generic, counts follow (1 OoT, 1 in-tree)" wait_for nomap 10 \
	st_has '.nodes.problems[0] == {"node":"a","reason":"NoKernelMapping","message":"no kernelMapping matches kernel 6.9.0-1-generic"} and .nodes.ootLoaded == 1 and .nodes.inTreeLoaded == 1 and .nodes.problemNodes == 3'
check "Ready False, reason NoKernelMapping, message names node a" st_has '(.conditions[] | select(.type=="Ready") | .status == "False" and .reason == "NoKernelMapping" and .message == "module loaded on 2 of 2 nodes; node a: no kernelMapping matches kernel 6.9.0-1-generic")'
check "ModuleLoaded False although KMM says 2/2" st_has '.kmmStatus == "2/2" and (.conditions[] | select(.type=="ModuleLoaded") | .status == "False")'
check "Ready transition time moved on the transition" test "$(cond Ready lastTransitionTime)" != "$t_ready"
t_ready=$(cond Ready lastTransitionTime)

# ---- Secure Boot with an unsigned module; a node that later gets a report --------------------------
mknode d 6.8.0-45-generic
annotate d "$REP_SB"
check "d: Secure Boot on and module unsigned" wait_for sb 10 \
	st_has '(.nodes.problems[] | select(.node=="d")) == {"node":"d","reason":"SecureBootUnsigned","message":"Secure Boot on and module unsigned: set spec.kernelModule.sign so that KMM signs it"}'
# c: a gpukmm.io/v1alpha1 report, summarized (too many GPUs for the annotation's budget)
WHY="the full report is 90000 bytes, over the budget of 16384 even with the VFs summarized: only the counts (200 GPUs, 0 VFs), the module verdict and the node facts are kept"
annotate c "$(jq -nc --arg why "$WHY" '{apiVersion:"gpukmm.io/v1alpha1",kind:"NodeReport",nodeName:"c",kernelVersion:"6.8.0-45-generic",
	secureBoot:"false",canUnload:"true",summary:{physicalFunctions:200,virtualFunctions:0},
	summarized:{form:"minimal",reason:$why,fullBytes:90000,budgetBytes:16384},
	moduleName:"xe",module:{name:"xe",loaded:true,source:"oot",version:"1.2.3"}}')"
check "c reports: no longer unknown" wait_for c 10 st_has '.nodes.unknown == 0 and ([.nodes.problems[].node] | index("c")) == null'
check "status.nodes says c's report is summarized, and why" st_has "(.nodes.summarizedNodes == 1) and .nodes.summarized == [{\"node\":\"c\",\"message\":\"$WHY\"}]"
check "Ready transition time did not move (still False)" test "$(cond Ready lastTransitionTime)" = "$t_ready"

# ---- a Node change that changes nothing for the status: evaluated, not written --------------------
w0=$(status_writes)
e0=$(sd_counter "$SD_PID" statusd_events)
kraw PATCH /api/v1/nodes/b '{"metadata":{"labels":{"team":"x"}}}' application/merge-patch+json >/dev/null
check "statusd saw the node change and is idle" sd_idle_after "$SD_PID" statusd_events "$e0"
check "an unrelated node change writes nothing ($w0 -> $(status_writes))" test "$(status_writes)" = "$w0"

# ---- the node summary is computed again only when the view changed ---------------------------------
# (every evaluation summarizes all the nodes against the policy; a start evaluates each policy
# once per component's first report, over the same view)
summaries() { echo "$(sd_counter "$SD_PID" statusd_node_summaries)/$(sd_counter "$SD_PID" statusd_node_summaries_reused)"; }
s0=$(sd_counter "$SD_PID" statusd_node_summaries)
u0=$(sd_counter "$SD_PID" statusd_node_summaries_reused)
p0=$(sd_counter "$SD_PID" statusd_passes)
report '{"component":"modmgr","policy":"gpu","generation":1,"kmm_status":"2/2"}'
check "a report over an unchanged view is evaluated" sd_idle_after "$SD_PID" statusd_passes "$p0"
check "with the summary it had: none computed, one reused ($s0/$u0 -> $(summaries))" \
	test "$(summaries)" = "$s0/$((u0 + 1))"
p0=$(sd_counter "$SD_PID" statusd_passes)
kraw PATCH /api/v1/nodes/b '{"metadata":{"labels":{"team":"y"}}}' application/merge-patch+json >/dev/null
check "a node change is evaluated" sd_idle_after "$SD_PID" statusd_passes "$p0"
check "with a new summary ($s0/$((u0 + 1)) -> $(summaries))" test "$(summaries)" = "$((s0 + 1))/$((u0 + 1))"
check "a label nobody selects writes nothing ($w0 -> $(status_writes))" test "$(status_writes)" = "$w0"

# ---- restart writes nothing, also before any component reported again ------------------------------
sd_stop TERM
check "statusd exits 0 on SIGTERM" test $? = 0
sd_start
check "restarted statusd rebuilt its view" wait_for "snapshot" 20 bash -c "[ \"\$(. tests/lib/statusd.sh; SD_CONTROL='$SD_CONTROL' GPUKMM_BIN='$GPUKMM_BIN' sd_counter $SD_PID statusd_snapshots)\" -gt 0 ]"
check "and evaluated every policy" sd_idle_after "$SD_PID" statusd_passes 0
check "restart without reports writes nothing ($w0 -> $(status_writes))" test "$(status_writes)" = "$w0"
report '{"component":"modmgr","policy":"gpu","generation":1,"kmm_status":"2/2"}'
check "restarted statusd processed modmgr's report" sd_idle_after "$SD_PID" statusd_reports 0
check "restart + one component's report writes nothing ($w0 -> $(status_writes))" test "$(status_writes)" = "$w0"
check "status intact after the restart" st_has '.nodes.problemNodes == 3 and .devicePluginStatus == "2/2"'

# ---- 409 storm converges ---------------------------------------------------------------------
# every status patch answers 409 first, then 70 % of them
kraw PUT /kubesim/faults '{"seed":11,"rules":[{"verb":"patch","resource":"clusterpolicies","rate":1,"code":409}]}' >/dev/null
annotate b "$REP_OOT"
kernel a 6.8.0-45-generic
"$CTL" ipc call "$NSD_SOCK" gpukmm.Status.ReportNode "$REP_A" --timeout-ms 3000 >/dev/null
conflicted() { [ "$(sd_counter "$SD_PID" statusd_conflicts)" -ge 5 ]; }
check "409 storm: statusd re-reads and retries" wait_for conflicts 20 conflicted
check "409 storm: nothing written meanwhile" st_has '.nodes.problemNodes == 3'
kraw PUT /kubesim/faults '{"seed":11,"rules":[{"verb":"patch","resource":"clusterpolicies","rate":0.7,"code":409}]}' >/dev/null
check "409 storm: status converges (only d left)" wait_for storm 30 \
	st_has '.nodes.problemNodes == 1 and .nodes.ootLoaded == 3 and .nodes.problems[0].node == "d"'
kraw PUT /kubesim/faults '{"rules":[]}' >/dev/null
check "Ready False for d only" st_has '(.conditions[] | select(.type=="Ready") | .reason == "SecureBootUnsigned" and .message == "module loaded on 2 of 2 nodes; node d: Secure Boot on and module unsigned: set spec.kernelModule.sign so that KMM signs it")'

# ---- policy selector narrows the nodes -------------------------------------------------------------
cp_patch '{"spec":{"nodeSelector":{"pool":"gpu"}}}'
kraw PATCH /api/v1/nodes/a '{"metadata":{"labels":{"pool":"gpu"}}}' application/merge-patch+json >/dev/null
check "nodeSelector: only node a counted" wait_for sel 10 st_has '.nodes.gpuNodes == 1 and .nodes.ootLoaded == 1 and .nodes.problemNodes == 0'
check "no problem nodes: Ready True, Degraded False" wait_for ready 10 st_has '(.conditions[] | select(.type=="Ready") | .status == "True") and (.conditions[] | select(.type=="Degraded") | .status == "False")'

# ---- kubectl shows it ----------------------------------------------------------------------------------
kubectl_cols() { local o; o=$(k get clusterpolicy gpu --no-headers -o 'custom-columns=KMM:.status.kmmStatus,READY:.status.conditions[?(@.type=="Ready")].status,REASON:.status.conditions[?(@.type=="Ready")].reason,GPU:.status.nodes.gpuNodes,OOT:.status.nodes.ootLoaded' 2>&1); echo "# kubectl: $o" >&2; [[ $o =~ ^2/2\ +True\ +Ready\ +1\ +1$ ]]; }
check "kubectl custom-columns (the CRD's printer-column paths): KMM 2/2 True Ready 1 1" kubectl_cols
kubectl_wide() { local o; o=$(k get clusterpolicy gpu -o wide --no-headers 2>&1); echo "# kubectl -o wide: $o" >&2; [[ $o =~ ^gpu\ +2/2\ +N/A\ +N/A\ +2/2\ +True\ +Ready\ +1\ +1\ +0\  ]]; }
check "kubectl get clusterpolicy -o wide (printer columns): DP KMM Ready Reason GPU-Nodes OoT Problem-Nodes" kubectl_wide
check "statusd still alive" kill -0 "$SD_PID"
sd_stop TERM
check "statusd exits 0" test $? = 0
