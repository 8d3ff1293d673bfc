#!/bin/bash
# The node report's way to its Node under the shipped RBAC (kubesim --rbac): a node-mode
# gpukmm-statusd (ServiceAccount gpukmm-node: create NodeReportRequests, nothing else)
# hands the reports it gets (gpukmmctl ipc call) in with its pod's token for the audience
# gpukmm.io/node-report; the controller-mode gpukmm-statusd checks each request with a
# TokenReview and writes the Node's gpukmm.io labels and report annotation. Then what a
# compromised node could try with its own credentials: a request for another node, one
# with another ServiceAccount's or an API token, a report naming another node, a module
# name shaped like a KMM label, a request without token: each refused (deleted, logged,
# counted), the Nodes untouched. And: nothing written when nothing changed (restarts
# included), the 8 GPUs x 63 VFs report summarized under the annotation budget and logged.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/statusd.sh

MM_NO_START=1 MM_NO_KMM=1 sd_setup
CTL="$GPUKMM_BIN/gpukmmctl"
NSD_SOCK="ipc://$MM_DIR/nsd.sock"
SD_SOCK="ipc://$MM_DIR/sd.sock"
NS=$MM_NS
AUD=gpukmm.io/node-report
nsd_start() {
	NODE_NAME=n1 "$GPUKMM_BIN/gpukmm-statusd" --mode node --kubeconfig "$MM_DIR/node-kubeconfig" --listen "$NSD_SOCK" \
		--namespace "$NS" --report-token-file "$MM_DIR/tok1" --debounce-ms 50 --control "$SD_CONTROL" \
		--heartbeat-ms 200 >>"$MM_DIR/statusd-node.log" 2>&1 &
	NSD_PID=$!
}
sd_start() { # the controller side, without a watcher: it leads
	"$GPUKMM_BIN/gpukmm-statusd" --mode controller --kubeconfig "$MM_DIR/kubeconfig" --listen "$SD_SOCK" \
		--namespace "$NS" --debounce-ms 50 --control "$SD_CONTROL" --heartbeat-ms 200 \
		>>"$MM_DIR/statusd-ctrl.log" 2>&1 &
	SD_PID=$!
}
report() { "$CTL" ipc call "$NSD_SOCK" gpukmm.Status.ReportNode "$1" --timeout-ms 3000 >/dev/null 2>&1; }
node_json() { kraw GET "/api/v1/nodes/${1:-n1}"; }
node_has() { node_json "${2:-n1}" | jq -e ".metadata | $1" >/dev/null; }
node_writes() { kraw GET /kubesim/stats | jq -r '.writesByResource.nodes // 0'; }
requests() { kraw GET "/apis/gpukmm.io/v1alpha1/namespaces/$NS/nodereportrequests" | jq -r '.items | length'; }
no_requests() { [ "$(requests)" = 0 ]; }
refused() { sd_counter "$SD_PID" statusd_node_requests_refused; }
applied() { sd_counter "$SD_PID" statusd_node_requests_applied; }
NODE_TOKEN=$(kubesim_sa_token "$NS" gpukmm-node)
as_node() { KRAW_TOKEN=$NODE_TOKEN kraw "$@"; }
# a NodeReportRequest NAME with TOKEN and REPORT-JSON, created with the node profile's credentials
nrr() {
	as_node POST "/apis/gpukmm.io/v1alpha1/namespaces/$NS/nodereportrequests" "$(jq -nc --arg n "$1" --arg t "$2" --arg r "$3" \
		'{apiVersion:"gpukmm.io/v1alpha1",kind:"NodeReportRequest",metadata:{name:$n},spec:({report:$r} + (if $t == "" then {} else {token:$t} end))}')"
}
# a report as the node profile writes it (schema/node-report.v1alpha1.json)
rep() { # NODE-NAME [MODULE-NAME]
	jq -nc --arg n "$1" --arg m "${2:-xe}" '{apiVersion:"gpukmm.io/v1alpha1",kind:"NodeReport",nodeName:$n,
		kernelVersion:"6.8.0",secureBoot:"false",canUnload:"true",summary:{physicalFunctions:1,virtualFunctions:0},
		gpus:[{address:"0000:03:00.0",vendor:"8086",device:"e20b",virtualFunction:false,driver:"xe"}],
		moduleName:$m,module:{name:$m,loaded:true,source:"oot"}}'
}
# wait until the controller has dealt with N more requests (refused or applied) and is idle
dealt() { [ $(($(refused) + $(applied))) -ge "$1" ] && [ "$(sd_counter "$SD_PID" statusd_node_requests_pending)" = 0 ] && no_requests; }

kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"kubernetes.io/arch":"amd64","team":"a"},"annotations":{"keep":"me"}}}' >/dev/null
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2","labels":{"team":"b","kmm.node.kubernetes.io/ns.gpu-gpu.ready":""}}}' >/dev/null
kubesim_pod_token "$NS" gpukmm-node n1 gpukmm-node-n1 "$AUD" "$MM_DIR/tok1" || notok "the pod token of n1"
kubesim_pod_token "$NS" gpukmm-node n2 gpukmm-node-n2 "$AUD" "$MM_DIR/tok2" || notok "the pod token of n2"
kubesim_pod_token "$NS" intruder n2 intruder-n2 "$AUD" "$MM_DIR/tokx" || notok "an intruder's pod token on n2"
check "node mode without a node name refuses to start" bash -c "! env -u NODE_NAME '$GPUKMM_BIN/gpukmm-statusd' --mode node --kubeconfig '$MM_DIR/node-kubeconfig' --listen 'ipc://$MM_DIR/x.sock' 2>/dev/null"
nsd_start
sd_start
R1='{"node_name":"n1","kernel_version":"6.8.0","module_name":"xe","gpus":[{"address":"0000:03:00.0","vendor_id":32902,"device_id":57867,"sriov_numvfs":0},{"address":"0000:04:00.0"}],"module":{"name":"xe","loaded":true,"source":"SOURCE_OOT"}}'
check "the node statusd answers ReportNode" wait_for "statusd up" 10 report "$R1"
check "the controller writes n1's labels from n1's request" wait_for labels 10 node_has '.labels["gpukmm.io/gpu.present"] == "true" and .labels["gpukmm.io/gpu.count"] == "2" and .labels["gpukmm.io/xe.source"] == "oot" and .labels["gpukmm.io/sriov.vfs-active"] == "false"'
check "the annotation is the report JSON (gpukmm.io/v1alpha1, hex ids, plain enums)" node_has '(.annotations["gpukmm.io/node-report"] | fromjson) as $r
	| $r.apiVersion == "gpukmm.io/v1alpha1" and $r.nodeName == "n1" and $r.kernelVersion == "6.8.0" and $r.gpus[0].device == "e20b" and $r.module.source == "oot"'
check "the request is consumed (deleted)" wait_for "no requests" 10 no_requests
check "other labels and annotations untouched" node_has '.labels.team == "a" and .labels["kubernetes.io/arch"] == "amd64" and .annotations.keep == "me"'
n2_labels() { node_json n2 | jq -c '.metadata.labels | keys'; }
N2_LABELS=$(n2_labels)
check "other nodes untouched ($N2_LABELS)" test "$N2_LABELS" = '["kmm.node.kubernetes.io/ns.gpu-gpu.ready","team"]'
R2='{"node_name":"n1","kernel_version":"6.8.0","module_name":"xe","gpus":[{"address":"0000:03:00.0","sriov_numvfs":4}],"module":{"name":"xe","loaded":true,"source":"SOURCE_IN_TREE"}}'
report "$R2"
check "labels change with the report" wait_for change 10 node_has '.labels["gpukmm.io/sriov.vfs-active"] == "true" and .labels["gpukmm.io/gpu.count"] == "1" and .labels["gpukmm.io/xe.source"] == "in-tree"'
check "... and the request is consumed" wait_for "no requests" 10 no_requests
# the counters below come from heartbeats: read them once the node statusd's heartbeat shows
# both requests (R1, R2) created and nothing pending, or c0 could predate R2's create
check "the node statusd created both requests and is idle" sd_idle_after "$NSD_PID" statusd_writes 1
w0=$(node_writes)
r0=$(sd_counter "$NSD_PID" statusd_reports)
c0=$(sd_counter "$NSD_PID" statusd_writes)
report "$R2"; report "$R2"
check "the node statusd took both reports" sd_idle_after "$NSD_PID" statusd_reports $((r0 + 1))
check "the same report hands nothing in again ($c0 -> $(sd_counter "$NSD_PID" statusd_writes) requests)" \
	test "$(sd_counter "$NSD_PID" statusd_writes)" = "$c0"
nsd_stop KILL
nsd_start
a0=$(applied)
check "restarted after kill -9 answers" wait_for "statusd up" 10 report "$R2"
check "the restarted node hands its report in once more; the controller applies it" wait_for "applied" 10 dealt $((a0 + $(refused) + 1))
check "kill + restart writes no Node ($w0 -> $(node_writes))" test "$(node_writes)" = "$w0"
sd_stop KILL
sd_start
report "$R1"
check "the controller restarted after kill -9 applies the next report" wait_for labels 10 node_has '.labels["gpukmm.io/gpu.count"] == "2"'

# ---- what a node's credentials could try: each refused, nothing written ------------------------
log_says() { grep -qF -- "$1" "$MM_DIR/statusd-ctrl.log"; }
# f0 and a0 from one heartbeat of the restarted controller that shows its application of R1
# and nothing pending (an older heartbeat would say 0 applied)
check "the restarted controller's heartbeat shows R1 applied, nothing pending" \
	wait_for "applied and idle" 10 eval '[ "$(applied)" -ge 1 ] && [ "$(sd_counter "$SD_PID" statusd_node_requests_pending)" = 0 ]'
c=$(sd_counters "$SD_PID")
f0=$(jq -r '.statusd_node_requests_refused // 0' <<<"$c") a0=$(jq -r '.statusd_node_requests_applied // 0' <<<"$c")
w0=$(node_writes)
nrr n2 "$(cat "$MM_DIR/tok1")" "$(rep n2)" >/dev/null
check "the node profile may create a request for another node (RBAC cannot tell): $(kraw_code)" test "$(kraw_code)" = 201
check "... the controller refuses it: n1's token for node n2" wait_for refused 10 dealt $((f0 + a0 + 1))
check "... the log names the node that wrote it" log_says "NodeReportRequest $NS/n2 refused: it was written by node n1's pod, for another node"
check "... n2 got no gpukmm.io label, kept its KMM label" test "$(n2_labels)" = "$N2_LABELS"
nrr n2 "$(cat "$MM_DIR/tokx")" "$(rep n2)" >/dev/null
check "a pod token of another ServiceAccount on n2: refused" wait_for refused 10 dealt $((f0 + a0 + 2))
check "... the log names that ServiceAccount" log_says "it was written with the token of system:serviceaccount:$NS:intruder"
nrr n1 "$NODE_TOKEN" "$(rep n1)" >/dev/null
check "the node's API token (not for our audience): refused" wait_for refused 10 dealt $((f0 + a0 + 3))
check "... as not authenticating for the audience" log_says "its token does not authenticate for the audience $AUD"
nrr n1 "$(cat "$MM_DIR/tok1")" "$(rep n2)" >/dev/null
check "n1's own request whose report names n2: refused" wait_for refused 10 dealt $((f0 + a0 + 4))
nrr n1 "" "$(rep n1)" >/dev/null
check "a request without token: refused at create (the CRD's schema): $(kraw_code)" test "$(kraw_code)" = 422
check "four refusals counted, none applied ($(refused) refused)" test "$(refused)" = $((f0 + 4)) -a "$(applied)" = "$a0"
check "no Node written by any of them ($w0 -> $(node_writes))" test "$(node_writes)" = "$w0"
nrr n1 "$(cat "$MM_DIR/tok1")" "$(rep n1 'kmm.node.kubernetes.io/x')" >/dev/null
check "a module name shaped like a KMM label: applied, but no such label" wait_for applied 10 dealt $((f0 + a0 + 5))
only_ours() { node_json n1 | jq -e '[.metadata.labels | keys[] | select(startswith("gpukmm.io/") or startswith("kmm."))] - ["gpukmm.io/gpu.present","gpukmm.io/gpu.count","gpukmm.io/sriov.vfs-active"] == []' >/dev/null; }
check "... n1 carries no kmm.* label and only the closed set of gpukmm.io labels" only_ours
out=$(as_node GET "/apis/gpukmm.io/v1alpha1/namespaces/$NS/nodereportrequests")
check "the node profile cannot read the requests (another node's token): $(kraw_code)" test "$(kraw_code)" = 403
MM_DENIALS_EXPECTED='gpukmm-node" cannot list resource "nodereportrequests"'

# ---- 8 GPUs x 63 VFs: summarized under the budget, and said so --------------------------------
BIG=$(jq -nc '{node_name:"n1",kernel_version:"6.8.0",module_name:"xe",
	module:{name:"xe",loaded:true,source:"SOURCE_OOT",version:"1.2.3"},can_unload:"TRI_NO",
	unload_blocker:"504 SR-IOV VFs active",
	gpus:[range(8) as $g | ("0000:\($g + 3 | tostring | if length < 2 then "0" + . else . end):00.0") as $pf
		| ({address:$pf,vendor_id:32902,device_id:57891,class_code:229376,driver:"xe",sriov_totalvfs:63,sriov_numvfs:63},
		   (range(1; 64) as $v | {address:"\($pf[:8])\(if $v < 80 then "0" else "" end)\($v / 8 | floor).\($v % 8)",vendor_id:32902,device_id:57891,
		    class_code:229376,is_vf:true,physfn:$pf,driver:"xe",numa_node:0}))]}')
report "$BIG"
summarized() { node_has '(.annotations["gpukmm.io/node-report"] | fromjson) as $r | $r.summarized.form == "vfs" and $r.summary.virtualFunctions == 504'; }
check "8x63 VFs: the annotation is the summarized report" wait_for summarized 10 summarized
check "... within 16 KiB ($(node_json | jq -r '.metadata.annotations["gpukmm.io/node-report"] | length') bytes)" \
	node_has '(.annotations["gpukmm.io/node-report"] | length) <= 16384'
check "... labels from its counts: 8 GPUs, VFs active" node_has '.labels["gpukmm.io/gpu.count"] == "8" and .labels["gpukmm.io/sriov.vfs-active"] == "true"'
check "... the node statusd logs why" grep -q "node report summarized for the Node annotation: the full report is [0-9]* bytes, over the budget of 16384" "$MM_DIR/statusd-node.log"
check "... and the controller when it writes it" log_says "Node n1: gpukmm.io labels and report written; the report is summarized"
check "... its heartbeat says summarized" wait_for summarized 10 eval '[ "$(sd_counter "$NSD_PID" statusd_report_summarized)" = 1 ]'

# ---- a node profile on a host (systemd): a token bound to the Node itself, from the environment ----
k -n "$NS" create token gpukmm-node --audience "$AUD" --bound-object-kind Node --bound-object-name n1 \
	--duration 2h >"$MM_DIR/tok-node" 2>>"$MM_DIR/kubectl.log"
nsd_stop TERM
NODE_NAME=n1 GPUKMM_REPORT_TOKEN_FILE="$MM_DIR/tok-node" "$GPUKMM_BIN/gpukmm-statusd" --mode node \
	--kubeconfig "$MM_DIR/node-kubeconfig" --listen "$NSD_SOCK" --namespace "$NS" --debounce-ms 50 \
	--control "$SD_CONTROL" --heartbeat-ms 200 >>"$MM_DIR/statusd-node.log" 2>&1 &
NSD_PID=$!
check "a Node-bound token (\$GPUKMM_REPORT_TOKEN_FILE, kubectl create token --bound-object-kind Node) is applied" \
	wait_for "node-bound" 10 eval "report '$R1' && node_has '.labels[\"gpukmm.io/gpu.count\"] == \"2\"'"

check "controller-only Report refused in node mode" bash -c "'$CTL' ipc call '$NSD_SOCK' gpukmm.Status.Report '{\"component\":\"modmgr\",\"policy\":\"p\"}' 2>&1 | grep -q FAILED_PRECONDITION"
nsd_stop TERM
check "the node statusd exits 0 on SIGTERM" test $? = 0
sd_stop TERM
check "the controller statusd exits 0 on SIGTERM" test $? = 0
mm_rbac_check
exit $MM_FAILED
