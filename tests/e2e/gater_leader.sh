#!/bin/bash
# gpukmm-gater writes (and reports) only while its watcher holds the leader Lease.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/gater.sh

MM_WATCHER_FLAGS="--leader-elect --retry-period 1"
MM_NO_START=1
GT_GATER_FLAGS="--log-level debug"
mm_setup || { echo "not ok - setup"; exit 1; }
trap gt_teardown EXIT
# another instance holds the Lease (renewed just now, for an hour)
now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
kraw POST "/apis/coordination.k8s.io/v1/namespaces/$MM_NS/leases" \
	"{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"gpukmm-controller\",\"namespace\":\"$MM_NS\"},\"spec\":{\"holderIdentity\":\"someone-else\",\"leaseDurationSeconds\":3600,\"acquireTime\":\"$now\",\"renewTime\":\"$now\"}}" >/dev/null
mk_ds "$MM_NS" gpu-device-plugin '{"kubernetes.io/arch":"amd64"}'
apply_cp gpu dp "$KM_BASIC"
mm_start_watcher
gt_start_gater
check "gater synced (not leading)" wait_for "gater synced" 20 gt_synced ".*leader=0"
w0=$(ds_writes)
check "policy seen by the follower" wait_for "follower pass" 10 grep -q "ClusterPolicy gpu: not the leader, nothing written" "$MM_DIR/gater.log"
check "a follower writes nothing" test "$(ds_writes)" = "$w0"
check "a follower leaves the DaemonSet ungated" ungated "$MM_NS" gpu-device-plugin
check "a follower sends no report" test "$(gt_report_count)" = 0
# the other instance goes away: ours takes over and gates
kraw DELETE "/apis/coordination.k8s.io/v1/namespaces/$MM_NS/leases/gpukmm-controller" >/dev/null
check "leader now: DaemonSet gated" wait_for "gated" 20 gated "$MM_NS" gpu-device-plugin
check "leader now: report sent" wait_for report 10 gt_report_has '.gatedDaemonsets == ["'"$MM_NS"'/gpu-device-plugin"]'
term=$("$GPUKMM_BIN/gpukmmctl" ipc call "ipc://$MM_DIR/watcher.sock" gpukmm.Watcher.Snapshot '{"topics":["leadership"]}' |
	jq -r '.leadership.term')
check "the report carries the watcher's leadership term ($term)" gt_report_has ".leaderTerm == \"$term\" and .leaderTerm != \"0\""
gt_stop_gater TERM
check "gater exits 0" test $? = 0
exit $MM_FAILED
