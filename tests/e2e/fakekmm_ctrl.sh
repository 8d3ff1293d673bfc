#!/bin/bash
# fake-kmm as a controller against kubesim, driven with real kubectl: ready
# labels per node as nodes, kernels, selectors, tolerations, cordons and taints
# change; exact status counts; a restart writes nothing.
set -u
. "$GPUKMM_SRC/tests/lib/kubesim.sh"
. "$GPUKMM_SRC/tests/lib/fakekmm.sh"
fakekmm_setup || { echo "not ok - kubesim + fake-kmm start"; exit 1; }
echo "ok - fake-kmm registers its ValidatingWebhookConfiguration"

node n1 6.8.0-31-generic '"gpu":"yes"'
node n2 5.15.0-1 '"gpu":"yes"'
node n3 6.8.0-40-generic '"other":"x"'
module gpu

# --- loading ------------------------------------------------------------------------
check "finalizer added to the Module" wait_for 10 has_finalizer gpu
check "n1 (selector + regexp match) becomes ready" wait_for 10 ready n1 gpu
check "status 2 matching / 1 desired / 1 available" wait_for 10 counts_are gpu 2/1/1
check "n2 (no kernel mapping) not ready" not_ready n2 gpu
check "n3 (selector mismatch) not ready" not_ready n3 gpu
check "loaded annotation records the kernel" loaded_is n1 gpu 6.8.0-31-generic

# --- kernel changes -----------------------------------------------------------------------
kernel n2 6.1.0-lit
check "kernel upgrade to a literal mapping loads on n2" wait_for 10 ready n2 gpu
check "status 2/2/2" wait_for 10 counts_are gpu 2/2/2
kernel n1 7.0.0
check "kernel upgrade without mapping unloads n1" wait_for 10 not_ready n1 gpu
check "status 2/1/1 after n1 lost its mapping" wait_for 10 counts_are gpu 2/1/1
kernel n1 6.8.0-50-generic+
check "kernel back on a mapping ('+' trimmed) reloads n1" wait_for 10 ready n1 gpu

# --- selector ----------------------------------------------------------------------------------
k label node n3 gpu=yes >/dev/null
check "n3 labelled into the selector loads" wait_for 10 ready n3 gpu
check "status 3/3/3" wait_for 10 counts_are gpu 3/3/3
k label node n3 gpu- >/dev/null
check "n3 labelled out of the selector unloads" wait_for 10 not_ready n3 gpu
check "status 2/2/2 again" wait_for 10 counts_are gpu 2/2/2

# --- cordon, taints, tolerations ---------------------------------------------------------------
k cordon n2 >/dev/null
check "cordon unloads (no pod holds the GPU): the ready label goes with the unload" wait_for 10 not_ready n2 gpu
check "cordoned node leaves nodesMatchingSelectorNumber" wait_for 10 counts_are gpu 1/1/1
module gpu '"tolerations":[{"key":"node.kubernetes.io/unschedulable","operator":"Exists","effect":"NoSchedule"}]'
check "a toleration for the cordon taint loads it again" wait_for 10 ready n2 gpu
check "status 2/2/2 with the toleration" wait_for 10 counts_are gpu 2/2/2
k uncordon n2 >/dev/null
k taint node n1 dedicated=infra:NoExecute >/dev/null
check "untolerated NoExecute taint strips n1" wait_for 10 not_ready n1 gpu
taints n1 '[{"key":"soft","value":"yes","effect":"PreferNoSchedule"}]'
check "the taint is really gone" bash -c "! KUBECONFIG=/dev/null $KUBECTL --server $KUBESIM_URL get node n1 -o jsonpath='{.spec.taints}' | grep -q dedicated"
check "PreferNoSchedule taint does not matter" wait_for 10 ready n1 gpu
module gpu '"tolerations":[{"key":"dedicated","operator":"Equal","value":"infra","effect":"NoExecute"}]'
k taint node n1 dedicated=infra:NoExecute >/dev/null
k taint node n2 dedicated=other:NoExecute >/dev/null
check "Equal toleration matches value infra (n2 with 'other' is stripped)" wait_for 10 not_ready n2 gpu
check "n1 with a tolerated taint stays ready" ready n1 gpu
module gpu
taints n1 null
taints n2 null
both_ready() { ready n1 "$1" && ready n2 "$1"; }
check "both ready once the taints and the toleration are gone" wait_for 10 both_ready gpu
check "status 2/2/2 at the end" wait_for 10 counts_are gpu 2/2/2

# --- the drain deadlock: an unload fails while a pod on the node holds the GPU --------------------
annotation_is() { annotations "$1" | grep -qxF -- "$2"; }
no_annotation() { ! annotations "$1" | grep -q -- "^$2="; }
k apply -f - >/dev/null <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: dp, namespace: kmm}
spec:
  nodeName: n1
  nodeSelector: {kmm.node.kubernetes.io/kmm.gpu.ready: ""}
  tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}]
  containers: [{name: plugin, image: intel-gpu-plugin}]
Y
k cordon n1 >/dev/null
check "cordon with the device plugin on the node: KMM's unload fails (module in use)" wait_for 10 \
	annotation_is n1 "fake-kmm.gpukmm.io/unload-failed.kmm.gpu=modprobe: FATAL: Module xe is in use (pod kmm/dp)"
check "the ready label stays while the unload fails (the plugin stays: the deadlock)" ready n1 gpu
check "the module stays loaded" loaded_is n1 gpu 6.8.0-50-generic
check "the cordoned node left the Module's targets" wait_for 10 counts_are gpu 1/1/1
k delete pod -n kmm dp --grace-period=0 --force >/dev/null 2>&1
check "the plugin gone: the unload goes through" wait_for 10 not_ready n1 gpu
check "and the unload-failed annotation is gone" no_annotation n1 fake-kmm.gpukmm.io/unload-failed.kmm.gpu
k uncordon n1 >/dev/null
check "uncordoned: loads again" wait_for 10 ready n1 gpu
check "status 2/2/2 again" wait_for 10 counts_are gpu 2/2/2

# --- restart safety: a restarted fake-kmm writes nothing ---------------------------------------
rv_before=$(k get nodes,modules -A -o go-template='{{range .items}}{{.metadata.name}}={{.metadata.resourceVersion}} {{end}}')
fakekmm_stop
check "SIGTERM: fake-kmm exits 0" [ "$FK_RC" = 0 ]
fakekmm_start
in_sync_twice() { [ "$(grep -c ' in sync: ' "$KUBESIM_DIR/fk.log")" -ge 2 ]; }
check "restarted fake-kmm completes its first pass" wait_for 20 in_sync_twice
rv_after=$(k get nodes,modules -A -o go-template='{{range .items}}{{.metadata.name}}={{.metadata.resourceVersion}} {{end}}')
check "restart caused no write to nodes or modules" [ "$rv_before" = "$rv_after" ]
[ "$rv_before" = "$rv_after" ] || { echo "# before: $rv_before"; echo "# after:  $rv_after"; }

# --- crash (SIGKILL) in the middle of a load: the next run finishes it -----------------------
fakekmm_stop
fakekmm_start --load-delay-ms 60000
check "slow fake-kmm is in sync" wait_for 20 bash -c "[ \$(grep -c ' in sync: ' '$KUBESIM_DIR/fk.log') -ge 3 ]"
node n4 6.8.0-9-generic '"gpu":"yes"'
check "a load is pending on n4" wait_for 10 grep -q "module kmm/gpu on node n4: load" "$KUBESIM_DIR/fk.log"
kill -KILL "$FKPID"; wait "$FKPID" 2>/dev/null; FKPID=
check "killed before loading: n4 not ready" not_ready n4 gpu
fakekmm_start
check "restarted after SIGKILL: n4 loads" wait_for 10 ready n4 gpu
check "status 3/3/3 with n4" wait_for 10 counts_are gpu 3/3/3
fakekmm_stop
check "SIGTERM at the end: exit 0" [ "$FK_RC" = 0 ]
