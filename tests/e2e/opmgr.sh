#!/bin/bash
# gpukmm-opmgr end to end (kubesim + watcher + opmgr + fake statusd): a dp
# policy with monitoring, NFD and Prometheus deploys every object as upstream
# renders it, owned by the policy; a restart writes nothing; another
# controller's change outside our fields survives, ours is restored; the
# DaemonSets' real status (kubesim's DaemonSet controller and kubelet on two
# nodes) reaches the report; monitoring, NFD and Prometheus toggled off delete
# what they had; dp -> dra (DRA not enabled in this cluster: upstream's message,
# the device plugin goes) -> dp; the policy deleted: ordered teardown,
# finalizers released, nothing left behind; SIGTERM exits 0.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/opmgr.sh

MM_WATCHER_FLAGS="--discovery-interval 1"
op_setup --runtime-config resource.k8s.io/v1=false --pod-ready-ms 200
for n in n1 n2; do
	kraw POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$n\",\"labels\":{\"kubernetes.io/arch\":\"amd64\",\"intel.feature.node.kubernetes.io/gpu\":\"true\"}}}" >/dev/null
done
CPP=/apis/intel.com/v1alpha1/clusterpolicies/gpu
NSP=/api/v1/namespaces/$MM_NS
k apply -f - >/dev/null <<Y
apiVersion: intel.com/v1alpha1
kind: ClusterPolicy
metadata: {name: gpu}
spec:
  resourceRegistration: dp
  resourceMonitoring: true
  useNFDLabeling: true
  prometheusIntegration: true
  logLevel: 2
  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
Y
op_start
check "opmgr synced" wait_for "opmgr synced" 20 op_synced
check "our finalizer on the policy" wait_for finalizer 20 obj_jq $CPP '.metadata.finalizers | index("gpukmm.io/operand-protection") != null'
UID_CP=$(obj $CPP | jq -r .metadata.uid)
check "device plugin DaemonSet created" wait_for dp 20 ds_is gpu-device-plugin '.kind == "DaemonSet"'
check "XPU Manager DaemonSet created" wait_for xpu 20 ds_is gpu-xpu-manager '.kind == "DaemonSet"'
check "OTel ConfigMap created" wait_for cm 20 obj_jq "$NSP/configmaps/gpu-xpumanager-otel-config" '.data["config.yaml"] | length > 100'
check "NodeFeatureRule created" wait_for nfd 20 obj_jq /apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/intel-gpu-devices '.spec.rules | length == 9'
check "Service created" wait_for svc 20 obj_jq "$NSP/services/intel-xpumanager" '.spec.ports[0].port == 8080'
check "ServiceMonitor created" wait_for sm 20 obj_jq /apis/monitoring.coreos.com/v1/namespaces/$MM_NS/servicemonitors/intel-xpumanager '.spec.endpoints[0].path == "/metrics"'
check "every object owned by the policy (controller reference with its uid) and labelled" in_shell "
	for p in $DSP/gpu-device-plugin $DSP/gpu-xpu-manager $NSP/configmaps/gpu-xpumanager-otel-config \
		/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/intel-gpu-devices $NSP/services/intel-xpumanager; do
		$(declare -f kraw); kraw GET \$p | jq -e '.metadata.ownerReferences == [{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"name\":\"gpu\",\"uid\":\"$UID_CP\",\"controller\":true,\"blockOwnerDeletion\":true}] and .metadata.labels[\"app.kubernetes.io/managed-by\"] == \"gpukmm\"' >/dev/null || exit 1
	done"
check "device plugin: monitoring flags, level, tolerations, runxpumd" ds_is gpu-device-plugin \
	'.spec.template.spec.containers[0].args == ["-enable-monitoring","-xpumd-endpoint=/run/xpumd/intelxpuinfo.sock","-v=2"]
	 and .spec.template.spec.tolerations == [{"key":"gpu","operator":"Exists","effect":"NoSchedule"}]
	 and (.spec.template.spec.volumes | map(.name) | index("runxpumd") != null)
	 and .spec.template.spec.nodeSelector == {"kubernetes.io/arch":"amd64","intel.feature.node.kubernetes.io/gpu":"true"}'
check "XPU Manager: the monitoring resource and the config hash" ds_is gpu-xpu-manager \
	'.spec.template.spec.containers[0].resources.limits["gpu.intel.com/monitoring"] == "1"
	 and (.spec.template.metadata.annotations["gpu.intel.com/xpum-otel-config-hash"] | length == 64)'
check "report: the DaemonSets' real counts (both nodes), DRA N/A" wait_for report 30 op_report_has \
	'.devicePluginStatus == "2/2" and .xpuManagerStatus == "2/2" and .draStatus == "N/A"'
# a third node: the DaemonSets' status moves, the report follows
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n3","labels":{"kubernetes.io/arch":"amd64","intel.feature.node.kubernetes.io/gpu":"true"}}}' >/dev/null
check "devicePluginStatus follows the DaemonSet's status (a third node: 3/3)" wait_for "3/3" 30 op_report_has '.devicePluginStatus == "3/3"'

# ---- a restart writes nothing ----------------------------------------------------------
wait_for "writes settle" 10 bash -c "[ \"\$(grep -c 'patched\|created' '$MM_DIR/opmgr.log')\" -ge 7 ]"
op_stop TERM
check "opmgr exits 0 on SIGTERM" test $? = 0
w0=$(op_writes)
n0=$(grep -c '"component":"opmgr"' "$MM_DIR/reports")
op_start
check "restarted opmgr reports again" wait_for "report after restart" 20 bash -c "[ \$(grep -c '\"component\":\"opmgr\"' '$MM_DIR/reports') -gt $n0 ]"
check "a restart writes nothing ($w0 -> $(op_writes))" test "$(op_writes)" = "$w0"

# ---- another controller: its field survives, ours comes back -----------------------------
kraw PATCH "$DSP/gpu-device-plugin" '{"spec":{"template":{"spec":{"priorityClassName":"theirs","nodeSelector":{"extra":"x"}}}}}' application/merge-patch+json >/dev/null
kraw PATCH "$DSP/gpu-xpu-manager" '{"metadata":{"labels":{"team":"x"}}}' application/merge-patch+json >/dev/null
check "our node selector restored, their field kept" wait_for restored 20 ds_is gpu-device-plugin \
	'.spec.template.spec.priorityClassName == "theirs" and (.spec.template.spec.nodeSelector | has("extra") | not)'
check "XPU Manager labels replaced whole (as upstream)" wait_for labels 20 ds_is gpu-xpu-manager '.metadata.labels | has("team") | not'

# ---- monitoring, NFD, Prometheus off ------------------------------------------------------
kraw PATCH $CPP '{"spec":{"resourceMonitoring":false,"useNFDLabeling":false}}' application/merge-patch+json >/dev/null
check "monitoring off: XPU Manager deleted" wait_for "xpu gone" 20 ds_gone gpu-xpu-manager
check "monitoring off: its ConfigMap deleted (upstream leaves it)" wait_for "cm gone" 20 obj_gone "$NSP/configmaps/gpu-xpumanager-otel-config"
check "monitoring off: Service and ServiceMonitor deleted" wait_for "prom gone" 20 in_shell "
	$(declare -f kraw obj obj_jq obj_gone); obj_gone $NSP/services/intel-xpumanager && obj_gone /apis/monitoring.coreos.com/v1/namespaces/$MM_NS/servicemonitors/intel-xpumanager"
check "NFD off: the rule deleted" wait_for "nfd gone" 20 obj_gone /apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/intel-gpu-devices
check "device plugin without the monitoring flags and mount, same object" wait_for "dp args" 20 ds_is gpu-device-plugin \
	'.spec.template.spec.containers[0].args == ["-v=2"] and (.spec.template.spec.volumes | map(.name) | index("runxpumd") == null)
	 and .spec.template.spec.priorityClassName == "theirs"'
check "report: XPU N/A" wait_for "xpu N/A" 20 op_report_has '.xpuManagerStatus == "N/A"'

# ---- dp -> dra (DRA not served here) -> dp ------------------------------------------------
dp_uid=$(ds gpu-device-plugin | jq -r .metadata.uid)
kraw PATCH $CPP '{"spec":{"resourceRegistration":"dra"}}' application/merge-patch+json >/dev/null
check "dra: the device plugin goes" wait_for "dp gone" 20 ds_gone gpu-device-plugin
check "dra without DRA served: upstream's message" wait_for "dra msg" 20 op_report_has \
	'.errors == ["DRA is not enabled in the cluster, but ClusterPolicy requests it."] and .devicePluginStatus == "N/A"'
kraw PATCH $CPP '{"spec":{"resourceRegistration":"dp"}}' application/merge-patch+json >/dev/null
check "back to dp: the device plugin again (a new object), the error gone" wait_for "dp back" 20 in_shell "
	$(declare -f kraw obj obj_jq ds_is); DSP=$DSP; ds_is gpu-device-plugin '.metadata.uid != \"$dp_uid\"' && $(declare -f op_last_report op_report_has); MM_DIR=$MM_DIR; op_report_has '.errors == null or .errors == []'"

# ---- deletion: ordered teardown, nothing left behind ---------------------------------------
kraw PATCH $CPP '{"spec":{"resourceMonitoring":true}}' application/merge-patch+json >/dev/null
check "monitoring on again" wait_for "xpu again" 20 ds_is gpu-xpu-manager '.kind == "DaemonSet"'
k delete clusterpolicy gpu --wait=false >/dev/null 2>&1
check "deleted policy: DaemonSets and ConfigMap gone" wait_for teardown 30 in_shell "
	$(declare -f kraw obj obj_jq obj_gone ds_gone); DSP=$DSP
	ds_gone gpu-device-plugin && ds_gone gpu-xpu-manager && obj_gone $NSP/configmaps/gpu-xpumanager-otel-config"
check "deleted policy: finalizer released, the policy is gone" wait_for "cp gone" 30 obj_gone $CPP
check "nothing labelled managed-by=gpukmm left" op_none_left app.kubernetes.io%2Fmanaged-by%3Dgpukmm \
	$DSP $NSP/configmaps $NSP/services $NSP/serviceaccounts /apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules \
	/apis/monitoring.coreos.com/v1/namespaces/$MM_NS/servicemonitors
op_stop TERM
check "opmgr exits 0 on SIGTERM (end)" test $? = 0
exit $MM_FAILED
