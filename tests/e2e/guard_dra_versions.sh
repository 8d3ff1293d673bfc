#!/bin/bash
# The DRA claim guard on every Kubernetes we support (issue #16, "DRA on every
# Kubernetes"): kubesim --kube-version 1.31 (resource.k8s.io/v1alpha3), 1.32 (v1beta1),
# 1.33 (v1beta2 + v1beta1), 1.34 (v1). On each: the watcher reads the claims in the
# newest served version, a claim allocated to gpu.intel.com blocks the deletion of the
# Module (kernelModule removed), freeing it lets the deletion through. A cluster upgraded
# under a blocked deletion (1.33 → 1.34, kubesim restarted on its state) switches the
# claims watch to v1 without a moment where the claims are unknown (the Module stays).
# With every resource.k8s.io version off: DRA confirmed not served (gpukmm-opmgr says "DRA
# is not enabled in the cluster, but ClusterPolicy requests it." from it), no claim guard.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/modmgr.sh

MM_WATCHER_FLAGS="--discovery-interval 0.5 --discovery-confirm 2"
FAILED=0

blocked() { mm_report_has '.errors | index("allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/gpu-gpu deletion")'; }
mm_report_has() { grep "\"component\":\"modmgr\",\"policy\":\"${2:-gpu}\"" "$MM_DIR/reports" | tail -1 | jq -e "$1" >/dev/null; }

# one release: K8S VERSION-OF-CLAIMS
one() {
	local k8s=$1 ver=$2
	mm_setup --kube-version "$k8s" || { echo "not ok - $k8s: setup"; exit 1; }
	mk_namespace apps
	apply_cp gpu dra "$KM_BASIC"
	check "$k8s: Module created" wait_for module 20 module_exists
	check "$k8s: the watcher reads the claims in resource.k8s.io/$ver" \
		wait_for "claims $ver" 10 grep -q "watching resourceclaims.$ver\b" "$MM_DIR/watcher.log"
	claim_alloc apps c1 "$ver"
	wait_for "claim seen" 10 watcher_has "ipc://$MM_DIR/watcher.sock" resourceclaim apps c1
	uid=$(module_field .metadata.uid)
	cp_patch '{"spec":{"kernelModule":null}}'
	check "$k8s: a claim allocated in $ver blocks the deletion" wait_for blocked 20 blocked
	check "$k8s: …the Module is still there (same uid)" test "$(module_field .metadata.uid)" = "$uid"
	kraw DELETE "/apis/resource.k8s.io/$ver/namespaces/apps/resourceclaims/c1" >/dev/null
	check "$k8s: the claim freed, the Module is deleted" wait_for "module gone" 20 module_gone
	exit "$MM_FAILED"
}

for kv in "1.31 v1alpha3" "1.32 v1beta1" "1.33 v1beta2" "1.34 v1"; do
	(one $kv) || FAILED=1
done

# ---- an upgrade under a blocked deletion: v1beta2 → v1 without a gap ----
(
	MM_STATE="$(mktemp -d "${TMPDIR:-/tmp}/gk-dra-state.XXXXXX")"
	trap 'rm -rf "$MM_STATE"' RETURN
	mm_setup --kube-version 1.33 --state-dir "$MM_STATE" || { echo "not ok - upgrade: setup"; exit 1; }
	mk_namespace apps
	apply_cp gpu dra "$KM_BASIC"
	check "upgrade: Module created on 1.33" wait_for module 20 module_exists
	claim_alloc apps c1 v1beta2
	wait_for "claim seen" 10 watcher_has "ipc://$MM_DIR/watcher.sock" resourceclaim apps c1
	uid=$(module_field .metadata.uid)
	kraw DELETE /apis/intel.com/v1alpha1/clusterpolicies/gpu >/dev/null
	check "upgrade: the deletion is blocked on 1.33" wait_for blocked 20 blocked
	# the API server is upgraded: same port, same state, 1.34 (resource.k8s.io/v1 only)
	port=$KUBESIM_PORT
	kill -TERM "$KUBESIM_PID"
	wait "$KUBESIM_PID" 2>/dev/null
	rm -f "$KUBESIM_DIR/ready"
	mkfifo "$KUBESIM_DIR/ready"
	args=() prev=
	for a in "${KUBESIM_ARGS[@]}"; do [ "$prev" = --kube-version ] && a=1.34; args+=("$a"); prev=$a; done
	"$KUBESIM_BIN" --listen "127.0.0.1:$port" "${args[@]}" >"$KUBESIM_DIR/ready" 2>>"$KUBESIM_DIR/kubesim.log" &
	KUBESIM_PID=$!
	read -r -t 20 line <"$KUBESIM_DIR/ready" || echo "not ok - upgrade: kubesim restarts as 1.34"
	check "upgrade: the claims are read in v1" wait_for "v1" 30 grep -q "watching resourceclaims.v1\b" "$MM_DIR/watcher.log"
	check "upgrade: the v1beta2 watch stops once v1 has listed" \
		wait_for "v1beta2 stopped" 30 grep -q "stopped watching resourceclaims.v1beta2" "$MM_DIR/watcher.log"
	check "upgrade: the Module never went (same uid), the finalizer is kept" \
		test "$(module_field .metadata.uid)" = "$uid"
	check "upgrade: still blocked by the claim, read in v1" cp_has_finalizer
	kraw DELETE /apis/resource.k8s.io/v1/namespaces/apps/resourceclaims/c1 >/dev/null
	check "upgrade: the claim freed, the deletion completes" wait_for "cp gone" 20 cp_gone
	exit "$MM_FAILED"
) || FAILED=1

# ---- no resource.k8s.io at all ----
(
	mm_setup --kube-version 1.34 --runtime-config resource.k8s.io/v1=false || { echo "not ok - no DRA: setup"; exit 1; }
	disc() { "$GPUKMM_BIN/gpukmmctl" ipc call "ipc://$MM_DIR/watcher.sock" gpukmm.Watcher.Snapshot \
		'{"topics":["discovery"]}' --timeout-ms 3000 2>/dev/null | jq -e '.discovery | '"$1" >/dev/null; }
	check "no DRA: the watcher confirms it (every version absent over the debounce; opmgr reports \"DRA is not enabled\" from it)" \
		wait_for "dra confirmed absent" 20 disc '(.dra // false) == false and (.dra_version // "") == "" and
			([.unconfirmed[]?.topic] | index("resourceclaim") == null)'
	apply_cp gpu dra "$KM_BASIC"
	check "no DRA: the Module is still created (the driver does not need DRA)" wait_for module 20 module_exists
	cp_patch '{"spec":{"kernelModule":null}}'
	check "no DRA: no claim can exist, the Module is deleted" wait_for "module gone" 20 module_gone
	exit "$MM_FAILED"
) || FAILED=1
exit $FAILED
