#!/bin/bash
# gpukmm-modmgr with the fake KMM controller (tools/fake-kmm): status counts
# follow KMM loading the module on a node; deletion waits for KMM's unload.
# (KMM admission denials surfacing verbatim are covered with kubesim fault
# injection in modmgr.sh and with a fake API in tests/unit/modmgr_pass_test.c.)
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/modmgr.sh

mm_setup || { echo "not ok - setup"; exit 1; }
"$GPUKMM_BIN/fake-kmm" --kubeconfig "$MM_DIR/kmm-kubeconfig" --load-delay-ms 50 --unload-delay-ms 50 \
	--url-file "$MM_DIR/fk.url" >>"$MM_DIR/fakekmm.log" 2>&1 &
FK_PID=$!
trap 'kill $FK_PID 2>/dev/null; wait $FK_PID 2>/dev/null; mm_teardown' EXIT
check "fake-kmm up" wait_for "fake-kmm url" 20 test -s "$MM_DIR/fk.url"
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"kubernetes.io/arch":"amd64"}},"status":{"nodeInfo":{"kernelVersion":"6.8.0-generic"},"conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null

apply_cp gpu dra '{"moduleName":"xe","kernelMappings":[{"regexp":"^.+$","containerImage":"registry.example.com/xe-driver:1.0"}]}'
check "valid policy: Module created" wait_for module 20 module_exists
check "kmmStatus 1/1 once KMM loaded it on the node" wait_for "1/1" 30 report_has '.kmmStatus == "1/1" and (.errors | length == 0)'

# remove kernelModule: deleted; KMM's finalizer holds it while unloading
cp_patch '{"spec":{"kernelModule":null}}'
check "Module deleted after kernelModule removal" wait_for gone 30 module_gone
check "kmmStatus N/A at the end" wait_for "N/A" 10 report_has '.kmmStatus == "N/A"'
exit $MM_FAILED
