#!/bin/bash
# gpukmm-modmgr writes only while its watcher holds the leader Lease.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/modmgr.sh

MM_WATCHER_FLAGS="--leader-elect --retry-period 1"
MM_NO_START=1
MM_MODMGR_FLAGS="--log-level debug"
mm_setup || { echo "not ok - setup"; exit 1; }
# another instance holds the Lease (renewed just now, for an hour)
now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
kraw POST "/apis/coordination.k8s.io/v1/namespaces/$MM_NS/leases" \
	"{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"gpukmm-controller\",\"namespace\":\"$MM_NS\"},\"spec\":{\"holderIdentity\":\"someone-else\",\"leaseDurationSeconds\":3600,\"acquireTime\":\"$now\",\"renewTime\":\"$now\"}}" >/dev/null
mm_start_watcher
mm_start_modmgr
check "modmgr synced (not leading)" wait_for "modmgr synced" 20 grep -q "view rebuilt from snapshot.*leader=0" "$MM_DIR/modmgr.log"
apply_cp gpu dra "$KM_BASIC"
w0=$(writes)
# the policy event reached modmgr (its pass ran) but nothing may be written
check "policy seen by the follower" wait_for "follower pass" 10 grep -q "ClusterPolicy gpu: not the leader, nothing written" "$MM_DIR/modmgr.log"
check "a follower writes nothing (writes $w0 -> $(writes))" test "$(writes)" = "$w0"
check "a follower sends no report" test "$(report_count)" = 0
# the other instance goes away: ours takes over and the Module appears
kraw DELETE "/apis/coordination.k8s.io/v1/namespaces/$MM_NS/leases/gpukmm-controller" >/dev/null
check "leader now: Module created" wait_for "module" 20 module_exists
check "leader now: report sent" wait_for report 10 report_has '.kmmStatus == "0/0"'
term=$("$GPUKMM_BIN/gpukmmctl" ipc call "ipc://$MM_DIR/watcher.sock" gpukmm.Watcher.Snapshot '{"topics":["leadership"]}' |
	jq -r '.leadership.term')
check "the report carries the watcher's leadership term ($term)" report_has ".leaderTerm == \"$term\" and .leaderTerm != \"0\""
mm_stop_modmgr TERM
check "modmgr exits 0" test $? = 0
exit $MM_FAILED
