#!/bin/bash
# fake-kmm's model of KMM signing and of a Secure Boot node, against kubesim with
# real kubectl: a Secure Boot node (its node report says so) never loads an
# unsigned module; a signed Module's image NeedsSigning, KMM's sign job runs
# (SignimageCreated, then SignimageSucceeded on the ModuleBuildSignConfig of the
# Module's name), the image Exists and every node loads, the Secure Boot one
# too; a restart in the middle of a sign job finishes it without a second one.
set -u
. "$GPUKMM_SRC/tests/lib/kubesim.sh"
. "$GPUKMM_SRC/tests/lib/fakekmm.sh"
fakekmm_setup --sign-delay-ms 300 || { echo "not ok - kubesim + fake-kmm start"; exit 1; }
K=6.8.0-31-generic

node plain $K '"gpu":"yes"'
echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"sb\",\"labels\":{\"gpu\":\"yes\"},\"annotations\":{
	\"gpukmm.io/node-report\":\"{\\\"node_name\\\":\\\"sb\\\",\\\"secure_boot\\\":\\\"TRI_YES\\\",\\\"lockdown\\\":\\\"integrity\\\"}\"}},
	\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$K\"}}}" | kapply
SIGN='"sign":{"keySecret":{"name":"mok-key"},"certSecret":{"name":"mok-cert"},"unsignedImage":"img-unsigned:${KERNEL_FULL_VERSION}","filesToSign":["/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko"]}'
image_state() { k get module -n kmm "$1" -o json | jq -r ".metadata.annotations[\"fake-kmm.gpukmm.io/image.$K\"] // \"\""; }
image_is() { [ "$(image_state "$1")" = "$2" ]; }
reasons() { k get events -n kmm -o json | jq -r --arg m "$1" '[.items[] | select(.involvedObject.name == $m) | .reason] | sort | join(",")'; }
reasons_are() { [ "$(reasons "$1")" = "$2" ]; }
event_is() { # MODULE REASON "type|message|kind"
	[ "$(k get events -n kmm -o json | jq -r --arg m "$1" --arg r "$2" \
		'.items[] | select(.involvedObject.name == $m and .reason == $r) | "\(.type)|\(.message)|\(.involvedObject.kind)"')" = "$3" ]
}
no_image_state() { [ "$(k get module -n kmm "$1" -o json | jq -c '[.metadata.annotations // {} | keys[] | select(startswith("fake-kmm"))]')" = "[]" ]; }

# --- unsigned module: the Secure Boot node refuses it ---------------------------------------
module plain-mod
check "unsigned: the plain node loads" wait_for 10 ready plain plain-mod
check "unsigned: both nodes desired, one available" wait_for 10 counts_are plain-mod 2/2/1
check "unsigned: the Secure Boot node stays without the ready label" not_ready sb plain-mod
check "unsigned: no sign job, no image state" no_image_state plain-mod

# --- signed module: NeedsSigning, the sign job, Exists, both nodes load ------------------------
# NeedsSigning lasts only the sign job (300 ms): read it from a watch of the
# Modules opened before the Module exists, not from a poll that can miss it
curl -sN --max-time 120 "$KUBESIM_URL/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/kmm/modules?watch=1&timeoutSeconds=100" \
	>"$KUBESIM_DIR/modules.watch" 2>/dev/null &
WATCH_PID=$!
# open: a watch without resourceVersion starts with the Modules that exist (plain-mod)
wait_for 10 grep -q '"plain-mod"' "$KUBESIM_DIR/modules.watch" >/dev/null
seen_state() { # MODULE STATE: some version of the Module on the watch had it
	jq -e --arg m "$1" --arg s "$2" --arg a "fake-kmm.gpukmm.io/image.$K" \
		'select(.object.metadata.name == $m and .object.metadata.annotations[$a] == $s)' \
		"$KUBESIM_DIR/modules.watch" 2>/dev/null | grep -q .
}
module signed-mod '' "$SIGN"
check "signed: the image for the kernel NeedsSigning" wait_for 10 seen_state signed-mod "NeedsSigning img:$K"
kill "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null
check "signed: KMM's SignimageCreated event for the kernel" wait_for 10 \
	event_is signed-mod SignimageCreated 'Normal|Signimage created for kernel 6-8-0-31-generic|ModuleBuildSignConfig'
check "signed: the image Exists after the sign job" wait_for 10 image_is signed-mod "Exists img:$K"
check "signed: SignimageSucceeded" wait_for 10 \
	event_is signed-mod SignimageSucceeded 'Normal|Signimage job succeeded for kernel 6-8-0-31-generic|ModuleBuildSignConfig'
check "signed: the Secure Boot node loads the signed module" wait_for 10 ready sb signed-mod
check "signed: the plain node too" wait_for 10 ready plain signed-mod
check "signed: status 2/2/2" wait_for 10 counts_are signed-mod 2/2/2
check "signed: one sign job for the two nodes of one kernel" reasons_are signed-mod SignimageCreated,SignimageSucceeded

# --- a restart during the sign job ----------------------------------------------------------------
fakekmm_stop
fakekmm_start --sign-delay-ms 600000
module slow-mod '' "$SIGN"
check "restart: the slow sign job started" wait_for 10 image_is slow-mod "NeedsSigning img:$K"
check "restart: not loaded while signing" wait_for 10 counts_are slow-mod 2/0/0
fakekmm_stop
check "restart: SIGTERM mid-job exits 0" [ "$FK_RC" = 0 ]
fakekmm_start --sign-delay-ms 300
check "restart: the new fake-kmm finishes the recorded job" wait_for 10 image_is slow-mod "Exists img:$K"
check "restart: both nodes load" wait_for 10 counts_are slow-mod 2/2/2
check "restart: one SignimageCreated, one SignimageSucceeded" reasons_are slow-mod SignimageCreated,SignimageSucceeded

fakekmm_stop
check "SIGTERM at the end: exit 0" [ "$FK_RC" = 0 ]
