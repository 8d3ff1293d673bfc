#!/bin/bash
# fake-kmm lifecycle against kubesim with real kubectl: versioned Modules
# (ordered upgrade), per-node faults, deletion held by the finalizer until every
# node unloaded (and while an unload is refused).
set -u
. "$GPUKMM_SRC/tests/lib/kubesim.sh"
. "$GPUKMM_SRC/tests/lib/fakekmm.sh"
fakekmm_setup || { echo "not ok - kubesim + fake-kmm start"; exit 1; }
node n1 6.8.0-31-generic '"gpu":"yes"'
node n2 6.1.0-lit '"gpu":"yes"'

# --- versioned Module (ordered upgrade) -------------------------------------------------
module vmod '' '"version":"v1"'
check "versioned Module: unlabelled nodes do not load" wait_for 10 counts_are vmod 2/0/0
k label node n1 kmm.node.kubernetes.io/version-module.kmm.vmod=v1 >/dev/null
check "node labelled with the version loads" wait_for 10 ready n1 vmod
check "version.ready carries the version" has_label n1 kmm.node.kubernetes.io/kmm.vmod.version.ready=v1
check "unlabelled n2 does not" not_ready n2 vmod
check "status 2/1/1" wait_for 10 counts_are vmod 2/1/1
module vmod '' '"version":"v2"'
k label node n2 kmm.node.kubernetes.io/version-module.kmm.vmod=v2 >/dev/null
check "Module v2: n2 labelled v2 loads v2" wait_for 10 has_label n2 kmm.node.kubernetes.io/kmm.vmod.version.ready=v2
check "Module v2: n1 still labelled v1 keeps v1" has_label n1 kmm.node.kubernetes.io/kmm.vmod.version.ready=v1
check "status 2/2/2 (n1 counts on its own version)" wait_for 10 counts_are vmod 2/2/2
k label --overwrite node n1 kmm.node.kubernetes.io/version-module.kmm.vmod=v2 >/dev/null
check "n1 relabelled v2 reloads with v2" wait_for 10 has_label n1 kmm.node.kubernetes.io/kmm.vmod.version.ready=v2
check "loaded annotation records kernel and version" loaded_is n1 vmod "6.8.0-31-generic v2"
k label node n1 kmm.node.kubernetes.io/version-module.kmm.vmod- >/dev/null
check "version label removed: unloaded" wait_for 10 not_ready n1 vmod
check "version.ready removed with it" no_label n1 kmm.node.kubernetes.io/kmm.vmod.version.ready
check "status 2/1/1 after the unload" wait_for 10 counts_are vmod 2/1/1

# --- faults -------------------------------------------------------------------------------------
node n3 6.8.0-40-generic '"gpu":"yes"'
k annotate node n2 fake-kmm.gpukmm.io/fault=load-failure >/dev/null
k annotate node n3 fake-kmm.gpukmm.io/fault=image-pull-failure >/dev/null
module fmod
check "faults: the healthy node loads" wait_for 10 ready n1 fmod
check "faults: desired counts the failing nodes, available does not" wait_for 10 counts_are fmod 3/3/1
check "load failure: n2 not ready" not_ready n2 fmod
check "image pull failure: n3 not ready" not_ready n3 fmod
k annotate node n2 fake-kmm.gpukmm.io/fault- >/dev/null
k annotate node n3 fake-kmm.gpukmm.io/fault- >/dev/null
check "faults cleared: n2 loads" wait_for 10 ready n2 fmod
check "faults cleared: n3 loads" wait_for 10 ready n3 fmod
check "status 3/3/3 after the faults" wait_for 10 counts_are fmod 3/3/3

# --- deletion ------------------------------------------------------------------------------------
k annotate node n1 fake-kmm.gpukmm.io/fault=unload-refused >/dev/null
k delete module -n kmm fmod --wait=false >/dev/null
check "deletion unloads n2" wait_for 10 not_ready n2 fmod
check "deletion unloads n3" wait_for 10 not_ready n3 fmod
check "unload refused on n1: finalizer held, Module still there" has_finalizer fmod
check "unload refused: n1 keeps its ready label" ready n1 fmod
k annotate node n1 fake-kmm.gpukmm.io/fault- >/dev/null
check "fault cleared: the Module goes away" wait_for 10 gone fmod
check "and n1 is unloaded" not_ready n1 fmod
check "no loaded annotation left for fmod" bash -c "! KUBECONFIG=/dev/null ${KUBECTL:-kubectl} --server $KUBESIM_URL get nodes -o yaml | grep -qF loaded.kmm.fmod"
k label node n2 kmm.node.kubernetes.io/version-module.kmm.vmod- >/dev/null
check "vmod unloaded from n2 when its version label goes" wait_for 10 not_ready n2 vmod
k delete module -n kmm vmod --wait=false >/dev/null
check "a Module loaded nowhere is released at once" wait_for 10 gone vmod
fakekmm_stop
check "SIGTERM at the end: exit 0" [ "$FK_RC" = 0 ]
