/* lib/operands: each object pinned against what upstream renders for the same
 * policy (operands.md §4–8, §10; expected objects written from reading
 * upstream's templates and controllers), the OTel configuration and its hash,
 * the catalogue, and the live-vs-wanted comparison (API defaults are not a
 * difference; drift becomes a merge patch; adoption; foreign controllers). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/operands.h"
#include "gpukmm/policy.h"
#include "gpukmm/yamljson.h"
#include "yaml_expect.h"

static gk_op_set S;
static gk_op_opts O;

static void render(const char *spec_yaml)
{
	render_yaml(&S, &O, spec_yaml);
}

static void fini(void)
{
	gk_op_set_free(&S);
	memset(&O, 0, sizeof(O));
}

static gk_op_obj *find(const char *kind, const char *name)
{
	for (size_t i = 0; i < S.n; i++)
		if (strcmp(S.v[i].kind, kind) == 0 && strcmp(S.v[i].name, name) == 0)
			return &S.v[i];
	return NULL;
}

static cJSON *at(const char *kind, const char *name, const char *jq_path)
{
	gk_op_obj *o = find(kind, name);
	cr_assert_not_null(o, "%s %s not rendered", kind, name);
	cJSON *n = o->obj;
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", jq_path);
	for (char *tok = strtok(buf, "."); tok && n; tok = strtok(NULL, ".")) {
		if (tok[0] >= '0' && tok[0] <= '9')
			n = cJSON_GetArrayItem(n, atoi(tok));
		else
			n = cJSON_GetObjectItemCaseSensitive(n, tok);
	}
	return n;
}

#define OWNER "ownerReferences: [{apiVersion: intel.com/v1alpha1, kind: ClusterPolicy, name: gpu, uid: u-1," \
	      " controller: true, blockOwnerDeletion: true}]"

TestSuite(operands, .fini = fini);

/* the whole device plugin DaemonSet of a minimal dp policy: upstream's template
 * with name, namespace, owner label, image; no args (no monitoring, level 0) */
Test(operands, dp_minimal_whole_object)
{
	render("  resourceRegistration: dp\n");
	cr_assert_eq(S.n, 1);
	cr_expect_eq(S.n_errors, 0);
	cr_expect_eq(S.wanted, 1u << GK_OP_DP);
	expect_json(find("DaemonSet", "gpu-device-plugin")->obj,
		    "apiVersion: apps/v1\n"
		    "kind: DaemonSet\n"
		    "metadata:\n"
		    "  name: gpu-device-plugin\n"
		    "  namespace: intel-gpu-base-operator\n"
		    "  labels: {app: intel-gpu-plugin, owner: gpu, app.kubernetes.io/managed-by: gpukmm}\n"
		    "  " OWNER "\n"
		    "spec:\n"
		    "  selector: {matchLabels: {app: intel-gpu-plugin}}\n"
		    "  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}\n"
		    "  template:\n"
		    "    metadata: {labels: {app: intel-gpu-plugin}}\n"
		    "    spec:\n"
		    "      automountServiceAccountToken: false\n"
		    "      nodeSelector: {kubernetes.io/arch: amd64}\n"
		    "      containers:\n"
		    "      - name: intel-gpu-plugin\n"
		    "        image: " GK_POLICY_DEFAULT_DP_IMAGE "\n"
		    "        imagePullPolicy: IfNotPresent\n"
		    "        env:\n"
		    "        - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}\n"
		    "        - {name: HOST_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}\n"
		    "        resources: {requests: {cpu: 40m, memory: 45Mi}, limits: {cpu: 100m, memory: 90Mi}}\n"
		    "        securityContext:\n"
		    "          allowPrivilegeEscalation: false\n"
		    "          capabilities: {drop: [ALL]}\n"
		    "          readOnlyRootFilesystem: true\n"
		    "          seLinuxOptions: {type: container_device_plugin_t}\n"
		    "          seccompProfile: {type: RuntimeDefault}\n"
		    "        volumeMounts:\n"
		    "        - {name: devfs, mountPath: /dev/dri, readOnly: true}\n"
		    "        - {name: sysfsdrm, mountPath: /sys/class/drm, readOnly: true}\n"
		    "        - {name: kubeletsockets, mountPath: /var/lib/kubelet/device-plugins}\n"
		    "        - {name: cdipath, mountPath: /var/run/cdi}\n"
		    "      volumes:\n"
		    "      - {name: devfs, hostPath: {path: /dev/dri}}\n"
		    "      - {name: sysfsdrm, hostPath: {path: /sys/class/drm}}\n"
		    "      - {name: kubeletsockets, hostPath: {path: /var/lib/kubelet/device-plugins}}\n"
		    "      - {name: cdipath, hostPath: {path: /var/run/cdi, type: DirectoryOrCreate}}\n",
		    "device plugin DaemonSet");
}

/* every flag and when (§5.3), pull secrets (§4.4), node selector with the KMM gate
 * and the NFD label (§4.1), tolerations verbatim (§4.2), the runxpumd mount (§5.4) */
Test(operands, dp_flags_selector_secrets_monitoring)
{
	O.kmm = true;
	O.operator_secret = "op-secret";
	O.namespace_ = "ops";
	render("  resourceRegistration: dp\n"
	       "  resourceMonitoring: true\n"
	       "  useNFDLabeling: true\n"
	       "  logLevel: 1\n"
	       "  nodeSelector: {pool: gpu, kubernetes.io/arch: arm64}\n"
	       "  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]\n"
	       "  pullSecret: {name: mine}\n"
	       "  dp: {plugin: 'r.io/dp:1', logLevel: 3, byPathMode: single, allowIDs: ['56c0', '0x56c1']}\n"
	       "  kernelModule: {kernelMappings: [{regexp: '^.+$', containerImage: 'r.io/xe:1'}]}\n");
	const char *ds = "gpu-device-plugin";
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.args"),
		    "[-enable-monitoring, -xpumd-endpoint=/run/xpumd/intelxpuinfo.sock, -v=3, -bypath=single,"
		    " '-allow-ids=0x56c0,0x56c1']",
		    "args");
	expect_json(at("DaemonSet", ds, "spec.template.spec.nodeSelector"),
		    "{kubernetes.io/arch: arm64, pool: gpu, intel.feature.node.kubernetes.io/gpu: 'true',"
		    " kmm.node.kubernetes.io/ops.gpu-gpu.ready: ''}",
		    "nodeSelector");
	expect_json(at("DaemonSet", ds, "spec.template.spec.imagePullSecrets"), "[{name: op-secret}, {name: mine}]",
		    "pull secrets: operator's first");
	expect_json(at("DaemonSet", ds, "spec.template.spec.tolerations"),
		    "[{key: gpu, operator: Exists, effect: NoSchedule}]", "tolerations");
	expect_json(at("DaemonSet", ds, "spec.template.spec.volumes.4"),
		    "{name: runxpumd, hostPath: {path: /run/xpumd, type: DirectoryOrCreate}}", "runxpumd volume");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.volumeMounts.4"),
		    "{name: runxpumd, mountPath: /run/xpumd}", "runxpumd mount");
	cr_expect_str_eq(at("DaemonSet", ds, "metadata.namespace")->valuestring, "ops");
	cr_expect_str_eq(at("DaemonSet", ds, "spec.template.spec.containers.0.image")->valuestring, "r.io/dp:1");
	/* deny IDs, level at 0 and the gate only with KMM */
	O.kmm = false;
	O.operator_secret = NULL;
	render("  resourceRegistration: dp\n  dp: {denyIDs: ['0x56a0']}\n"
	       "  kernelModule: {kernelMappings: [{regexp: '^.+$', containerImage: 'r.io/xe:1'}]}\n");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.args"), "['-deny-ids=0x56a0']", "deny");
	expect_json(at("DaemonSet", ds, "spec.template.spec.nodeSelector"), "{kubernetes.io/arch: amd64}",
		    "no gate without KMM");
	cr_expect_null(at("DaemonSet", ds, "spec.template.spec.imagePullSecrets"));
}

/* a versioned, gated policy's operands leave a node while gpukmm-upgrader
 * replaces its driver (gpukmm.io/upgrade-state unloading or loading) */
Test(operands, operands_pause_for_driver_upgrades)
{
	O.kmm = true;
	render("  resourceRegistration: dp\n  resourceMonitoring: true\n"
	       "  kernelModule: {version: '1.4', kernelMappings: [{regexp: '^.+$', containerImage: 'r.io/xe:1'}]}\n");
	static const char *const aff = "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
				       "[{matchExpressions: [{key: gpukmm.io/upgrade-state, operator: NotIn, "
				       "values: [unloading, loading]}]}]}}}";
	expect_json(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.affinity"), aff, "device plugin");
	expect_json(at("DaemonSet", "gpu-xpu-manager", "spec.template.spec.affinity"), aff, "XPU Manager");
	/* not versioned, or no KMM gate: nothing */
	render("  resourceRegistration: dp\n"
	       "  kernelModule: {kernelMappings: [{regexp: '^.+$', containerImage: 'r.io/xe:1'}]}\n");
	cr_expect_null(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.affinity"));
	O.kmm = false;
	render("  resourceRegistration: dp\n"
	       "  kernelModule: {version: '1.4', kernelMappings: [{regexp: '^.+$', containerImage: 'r.io/xe:1'}]}\n");
	cr_expect_null(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.affinity"));
}

/* a policy without kernelModule keeps its operands off the nodes that still carry
 * its Module's ready label: dropping kernelModule, they leave before KMM unloads
 * the out-of-tree driver they hold open (ARCHITECTURE §5) */
Test(operands, operands_leave_while_the_dropped_module_is_loaded)
{
	O.namespace_ = "ops";
	O.kmm = true;
	render("  resourceRegistration: dp\n  resourceMonitoring: true\n");
	static const char *const aff = "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
				       "[{matchExpressions: [{key: kmm.node.kubernetes.io/ops.gpu-gpu.ready, "
				       "operator: DoesNotExist}]}]}}}";
	expect_json(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.affinity"), aff, "device plugin");
	expect_json(at("DaemonSet", "gpu-xpu-manager", "spec.template.spec.affinity"), aff, "XPU Manager");
	/* KMM not served: no Module was ever there */
	O.kmm = false;
	render("  resourceRegistration: dp\n");
	cr_expect_null(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.affinity"));
}

/* ... and so does a policy whose Module is being recreated (modmgr's ModuleLoaded
 * condition says Recreating): with the ready key in the node selector too, the
 * operands run nowhere until the new Module is there, so that KMM can unload the
 * old one they hold open (a version added to or dropped from kernelModule) */
Test(operands, operands_leave_while_the_module_is_recreated)
{
	O.kmm = true;
	static const char *const spec = "  resourceRegistration: dp\n  resourceMonitoring: true\n"
					"  kernelModule: {kernelMappings: [{regexp: '^.+$', containerImage: 'r.io/xe:1'}]}\n";
	char *y = NULL;
	cr_assert(asprintf(&y, "%sstatus: {conditions: [{type: Ready, status: 'False', reason: ModuleNotLoaded},"
			   " {type: ModuleLoaded, status: 'False', reason: Recreating}]}\n", spec) > 0);
	render(y);
	free(y);
	static const char *const aff = "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
				       "[{matchExpressions: [{key: kmm.node.kubernetes.io/intel-gpu-base-operator.gpu-gpu.ready, "
				       "operator: DoesNotExist}]}]}}}";
	expect_json(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.affinity"), aff, "device plugin");
	expect_json(at("DaemonSet", "gpu-xpu-manager", "spec.template.spec.affinity"), aff, "XPU Manager");
	expect_json(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.nodeSelector"),
		    "{kubernetes.io/arch: amd64, kmm.node.kubernetes.io/intel-gpu-base-operator.gpu-gpu.ready: ''}",
		    "the gate stays");
	/* the new Module there (the condition moved on): back on the nodes KMM loaded */
	cr_assert(asprintf(&y, "%sstatus: {conditions: [{type: ModuleLoaded, status: 'False', reason: ModuleNotLoaded}]}\n",
			   spec) > 0);
	render(y);
	free(y);
	cr_expect_null(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.affinity"));
}

/* §6.2: -v always, --health-monitoring with health, --healthcheck-port and probes
 * from podHealthCheck (CRD default true), --manage-binding always; both SA fields */
Test(operands, dra_daemonset_args_health_and_sa)
{
	O.dra_version = "v1";
	render("  resourceRegistration: dra\n  logLevel: 2\n  health: {}\n  dra: {logLevel: 1, manageBinding: true}\n");
	const char *ds = "gpu-gpu-dra";
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.args"),
		    "['-v=2', '--health-monitoring=true', '--healthcheck-port=51516', '--manage-binding=true']", "args");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.ports"), "[{name: healthcheck, containerPort: 51516}]",
		    "health port");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.startupProbe"),
		    "{failureThreshold: 60, periodSeconds: 10, timeoutSeconds: 10, grpc: {port: 51516, service: liveness}}",
		    "startupProbe");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.livenessProbe"),
		    "{failureThreshold: 3, periodSeconds: 30, timeoutSeconds: 10, grpc: {port: 51516, service: liveness}}",
		    "livenessProbe");
	cr_expect_str_eq(at("DaemonSet", ds, "spec.template.spec.serviceAccountName")->valuestring, "gpu-gpu-dra");
	cr_expect_str_eq(at("DaemonSet", ds, "spec.template.spec.serviceAccount")->valuestring, "gpu-gpu-dra");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.env"),
		    "[{name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}},"
		    " {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}},"
		    " {name: SYSFS_ROOT, value: /sysfs}]",
		    "env");
	expect_json(at("DaemonSet", ds, "spec.template.spec.volumes.5"),
		    "{name: xpumdrundir, hostPath: {path: /run/xpumd, type: DirectoryOrCreate}}", "xpumd dir always");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.securityContext"),
		    "{allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, readOnlyRootFilesystem: true,"
		    " runAsUser: 0, seccompProfile: {type: RuntimeDefault}}",
		    "securityContext");
	render("  resourceRegistration: dra\n  dra: {podHealthCheck: false}\n");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.args"),
		    "['-v=0', '--healthcheck-port=-1', '--manage-binding=false']", "args without health check");
	cr_expect_null(at("DaemonSet", ds, "spec.template.spec.containers.0.ports"));
	cr_expect_null(at("DaemonSet", ds, "spec.template.spec.containers.0.startupProbe"));
}

/* §6.3: the dependencies, in order, with the names derived from the policy */
Test(operands, dra_dependencies)
{
	O.dra_version = "v1";
	O.namespace_ = "ops";
	render("  resourceRegistration: dra\n");
	const char *order[][2] = { { "ServiceAccount", "gpu-gpu-dra" },
				   { "ClusterRole", "gpu-gpu-dra" },
				   { "ClusterRoleBinding", "gpu-gpu-dra" },
				   { "DeviceClass", "gpu.intel.com" },
				   { "DeviceClass", "gpu-vfio.intel.com" },
				   { "ValidatingAdmissionPolicy", "gpu-gpu-dra" },
				   { "ValidatingAdmissionPolicyBinding", "gpu-gpu-dra" },
				   { "DaemonSet", "gpu-gpu-dra" } };
	cr_assert_eq(S.n, 8);
	for (size_t i = 0; i < 8; i++) {
		cr_expect_str_eq(S.v[i].kind, order[i][0]);
		cr_expect_str_eq(S.v[i].name, order[i][1]);
	}
	expect_json(at("ClusterRole", "gpu-gpu-dra", "rules"),
		    "[{apiGroups: [''], resources: [nodes], verbs: [get]},"
		    " {apiGroups: [resource.k8s.io], resources: [resourceslices], verbs: [get, list, watch, create, update, patch, delete]},"
		    " {apiGroups: [resource.k8s.io], resources: [resourceclaims], verbs: [get]}]",
		    "role rules");
	expect_json(at("ClusterRoleBinding", "gpu-gpu-dra", "subjects"),
		    "[{kind: ServiceAccount, name: gpu-gpu-dra, namespace: ops}]", "binding subject");
	expect_json(at("ClusterRoleBinding", "gpu-gpu-dra", "roleRef"),
		    "{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gpu-gpu-dra}", "roleRef");
	expect_json(at("DeviceClass", "gpu.intel.com", "spec"),
		    "{selectors: [{cel: {expression: 'device.driver == \"gpu.intel.com\"'}}], extendedResourceName: intel.com/gpu}",
		    "gpu class");
	expect_json(at("DeviceClass", "gpu-vfio.intel.com", "spec"),
		    "{selectors: [{cel: {expression: 'device.driver == \"gpu.intel.com\"'}},"
		    " {cel: {expression: \"device.attributes[\\\"gpu.intel.com\\\"].driver == 'vfio-pci' ||"
		    " device.attributes[\\\"gpu.intel.com\\\"].driver == 'xe-vfio-pci'\"}}]}",
		    "vfio class without manageBinding");
	cr_expect_str_eq(at("ValidatingAdmissionPolicy", "gpu-gpu-dra", "spec.matchConditions.0.expression")->valuestring,
			 "request.userInfo.username == \"system:serviceaccount:ops:gpu-gpu-dra\"");
	cr_expect_str_eq(at("ValidatingAdmissionPolicy", "gpu-gpu-dra", "spec.failurePolicy")->valuestring, "Fail");
	expect_json(at("ValidatingAdmissionPolicyBinding", "gpu-gpu-dra", "spec"),
		    "{policyName: gpu-gpu-dra, validationActions: [Deny]}", "VAPB");
	/* manageBinding: one selector; older API versions: no extendedResourceName */
	O.dra_version = "v1beta1";
	render("  resourceRegistration: dra\n  dra: {manageBinding: true}\n");
	cr_expect_eq(cJSON_GetArraySize(at("DeviceClass", "gpu-vfio.intel.com", "spec.selectors")), 1);
	cr_expect_null(at("DeviceClass", "gpu.intel.com", "spec.extendedResourceName"));
	cr_expect_str_eq(find("DeviceClass", "gpu.intel.com")->api_version, "resource.k8s.io/v1beta1");
	/* DRA not served: upstream's message, nothing rendered */
	O.dra_version = NULL;
	render("  resourceRegistration: dra\n");
	cr_expect_eq(S.n, 0);
	cr_assert_eq(S.n_errors, 1);
	cr_expect_str_eq(S.errors[0], GK_POLICY_MSG_DRA_NOT_ENABLED);
}

/* §7.2/§7.3 dp mode: labels and annotations whole, the monitoring resource, the config volume */
Test(operands, xpu_dp_mode)
{
	render("  resourceRegistration: dp\n  resourceMonitoring: true\n  xpu: {monitoringResource: xe_monitoring}\n");
	const char *ds = "gpu-xpu-manager";
	expect_json(at("DaemonSet", ds, "metadata.labels"),
		    "{app: intel-xpumanager, owner: gpu, app.kubernetes.io/managed-by: gpukmm}", "labels");
	expect_json(at("DaemonSet", ds, "spec.selector"),
		    "{matchLabels: {app.kubernetes.io/name: xpumd, app: intel-xpumanager}}", "selector");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.resources"),
		    "{requests: {cpu: 10m, memory: 128Mi, gpu.intel.com/xe_monitoring: '1'},"
		    " limits: {cpu: 100m, memory: 512Mi, gpu.intel.com/xe_monitoring: '1'}}",
		    "resources");
	cr_expect_null(at("DaemonSet", ds, "spec.template.spec.resourceClaims"));
	expect_json(at("DaemonSet", ds, "spec.template.spec.volumes.0"),
		    "{name: config, configMap: {name: gpu-xpumanager-otel-config, defaultMode: 420}}", "config volume");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.securityContext"),
		    "{readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, runAsUser: 0,"
		    " capabilities: {drop: [ALL], add: [SYS_ADMIN]}}",
		    "securityContext");
	/* the hash is that of the ConfigMap's text */
	const char *text = cJSON_GetObjectItem(at("ConfigMap", "gpu-xpumanager-otel-config", "data"), "config.yaml")->valuestring;
	char h[65];
	gk_op_sha256_hex(text, h);
	cJSON *ann = at("DaemonSet", ds, "spec.template.metadata.annotations");
	cr_assert_eq(cJSON_GetArraySize(ann), 1);
	cr_expect_str_eq(cJSON_GetObjectItem(ann, GK_OP_OTEL_HASH_KEY)->valuestring, h);
	expect_json(at("ConfigMap", "gpu-xpumanager-otel-config", "metadata.labels"),
		    "{app: intel-xpumanager, app.kubernetes.io/managed-by: gpukmm}", "ConfigMap labels");
	/* an upstream monitoringResource outside the typed default: "monitoring" by default */
	render("  resourceRegistration: dp\n  resourceMonitoring: true\n");
	cr_expect_not_null(cJSON_GetObjectItem(at("DaemonSet", ds, "spec.template.spec.containers.0.resources.limits"),
					       "gpu.intel.com/monitoring"));
}

/* §7.3 dra mode: the claim template in the served version's shape, claims instead of the resource */
Test(operands, xpu_dra_mode_claim_template)
{
	O.dra_version = "v1";
	render("  resourceRegistration: dra\n  resourceMonitoring: true\n");
	const char *ds = "gpu-xpu-manager";
	expect_json(at("DaemonSet", ds, "spec.template.spec.resourceClaims"),
		    "[{name: monitor-claim, resourceClaimTemplateName: gpu-monitor-claim}]", "pod claims");
	expect_json(at("DaemonSet", ds, "spec.template.spec.containers.0.resources"),
		    "{requests: {cpu: 10m, memory: 128Mi}, limits: {cpu: 100m, memory: 512Mi}, claims: [{name: monitor-claim}]}",
		    "no extended resource in dra mode");
	expect_json(at("ResourceClaimTemplate", "gpu-monitor-claim", "spec"),
		    "{spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.intel.com, adminAccess: true,"
		    " allocationMode: All, tolerations: [{effect: NoSchedule}, {effect: NoExecute}]}}]}}}",
		    "v1 template");
	cr_expect_str_eq(find("ResourceClaimTemplate", "gpu-monitor-claim")->api_version, "resource.k8s.io/v1");
	O.dra_version = "v1beta1";
	render("  resourceRegistration: dra\n  resourceMonitoring: true\n");
	expect_json(at("ResourceClaimTemplate", "gpu-monitor-claim", "spec"),
		    "{spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.intel.com, adminAccess: true,"
		    " allocationMode: All, tolerations: [{effect: NoSchedule}, {effect: NoExecute}]}]}}}",
		    "v1beta1 template (flat)");
	/* dra requested without DRA: falls back to the extended resource, as upstream */
	O.dra_version = NULL;
	render("  resourceRegistration: dra\n  resourceMonitoring: true\n");
	cr_expect_null(find("ResourceClaimTemplate", "gpu-monitor-claim"));
	cr_expect_not_null(at("DaemonSet", ds, "spec.template.spec.containers.0.resources.limits"));
}

/* §7.4: the configuration text and what the policy changes in it */
Test(operands, otel_config_text)
{
	Gpukmm__ClusterPolicy *cp = policy_of_yaml("  resourceRegistration: dp\n");
	char *t = gk_op_otel_config(cp);
	cJSON *j = yaml(t);
	/* the embedded configuration (re-serialised): defaults, level error at 0 */
	cJSON *want = yaml("receivers: {intelxpu: {collection_interval: 5s, initial_delay: 1s, timeout: 0, sampling_interval: 1s}}\n"
			   "service:\n"
			   "  telemetry: {logs: {level: error}}\n"
			   "  pipelines:\n"
			   "    metrics: {receivers: [intelxpu], processors: [intelxpustatus], exporters: [intelxpuinfo, prometheus]}\n"
			   "    logs: {receivers: [intelxpu], exporters: [intelxpuinfo]}\n");
	cr_expect(cJSON_Compare(cJSON_GetObjectItem(j, "receivers"), cJSON_GetObjectItem(want, "receivers"), 1));
	cr_expect(cJSON_Compare(cJSON_GetObjectItem(j, "service"), cJSON_GetObjectItem(want, "service"), 1));
	cJSON *rules = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "processors"), "intelxpustatus"), "rules");
	cr_assert_eq(cJSON_GetArraySize(rules), 2);
	cJSON *crit = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(rules, 0), "states"), 1);
	cr_expect_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(crit, "conditions"), 0)->child->valuedouble, 100);
	cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "exporters"), "prometheus"), "endpoint")->valuestring,
			 "0.0.0.0:8080");
	cr_expect(strstr(t, "        - \"8086\"\n") != NULL, "numbers-as-strings double-quoted, as go-yaml v2");
	cr_expect(strstr(t, "    - health_domain: '{{ .hw_type }}'\n") != NULL);
	cJSON_Delete(j);
	cJSON_Delete(want);
	free(t);
	gk_kobj_free(cp);
	/* health and level: interval, both thresholds, max(spec, xpu) level */
	cp = policy_of_yaml("  resourceRegistration: dp\n  logLevel: 1\n  xpu: {logLevel: 3}\n"
		    "  health: {checkIntervalSeconds: 7, coreTemperatureThreshold: 90, memoryTemperatureThreshold: 85}\n");
	t = gk_op_otel_config(cp);
	cr_expect(strstr(t, "    collection_interval: 7s\n") != NULL);
	cr_expect(strstr(t, "name: Intel GPU core temperature health") != NULL);
	char *core = strstr(t, "core temperature health");
	char *mem = strstr(t, "memory temperature health");
	cr_expect(core && strstr(core, "- value: 90\n") && strstr(core, "- value: 90\n") < mem);
	cr_expect(mem && strstr(mem, "- value: 85\n"));
	cr_expect(strstr(t, "      level: debug\n") != NULL);
	free(t);
	gk_kobj_free(cp);
	const char *lv[][2] = { { "1", "warn" }, { "2", "info" }, { "9", "debug" } };
	for (size_t i = 0; i < 3; i++) {
		char spec[128], want_line[64];
		snprintf(spec, sizeof(spec), "  resourceRegistration: dp\n  logLevel: %s\n", lv[i][0]);
		snprintf(want_line, sizeof(want_line), "      level: %s\n", lv[i][1]);
		cp = policy_of_yaml(spec);
		t = gk_op_otel_config(cp);
		cr_expect(strstr(t, want_line) != NULL, "level %s", lv[i][0]);
		free(t);
		gk_kobj_free(cp);
	}
	char h[65];
	gk_op_sha256_hex("abc", h);
	cr_expect_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* §7.4 override: the ConfigMap is used as it is; its hash; upstream's errors; no DaemonSet change while broken */
Test(operands, xpu_config_map_override)
{
	const char *spec = "  resourceRegistration: dp\n  resourceMonitoring: true\n  xpu: {configMapOverride: my-otel}\n";
	O.otel_override_has_cm = true;
	O.otel_override = "receivers: {}\n";
	render(spec);
	cr_expect_null(find("ConfigMap", "gpu-xpumanager-otel-config"));
	cr_expect_str_eq(at("DaemonSet", "gpu-xpu-manager", "spec.template.spec.volumes.0.configMap.name")->valuestring,
			 "my-otel");
	char h[65];
	gk_op_sha256_hex("receivers: {}\n", h);
	cr_expect_str_eq(cJSON_GetObjectItem(at("DaemonSet", "gpu-xpu-manager", "spec.template.metadata.annotations"),
					     GK_OP_OTEL_HASH_KEY)->valuestring, h);
	cr_expect_eq(S.held, 0);
	O.otel_override = NULL;
	render(spec);
	cr_expect_null(find("DaemonSet", "gpu-xpu-manager"));
	cr_expect_eq(S.held, 1u << GK_OP_XPU);
	cr_assert_eq(S.n_errors, 1);
	cr_expect_str_eq(S.errors[0], "unable to fetch otel ConfigMap hash: override ConfigMap my-otel does not contain key config.yaml");
	O.otel_override = "receivers: 5\n";
	render(spec);
	cr_expect_str_eq(S.errors[0], "unable to fetch otel ConfigMap hash: failed to parse OTel config from override ConfigMap: receivers is not a mapping");
	O.otel_override_has_cm = false;
	render(spec);
	cr_expect_str_eq(S.errors[0], "unable to fetch otel ConfigMap hash: configmaps \"my-otel\" not found");
}

/* §8: the NFD rule and the Prometheus objects, each behind its CRD */
Test(operands, nfd_and_prometheus)
{
	const char *spec = "  resourceRegistration: dp\n  useNFDLabeling: true\n  resourceMonitoring: true\n"
			   "  prometheusIntegration: true\n";
	render(spec);
	cr_expect_null(find("NodeFeatureRule", "intel-gpu-devices"), "no NFD CRD: nothing");
	cr_expect_null(find("Service", "intel-xpumanager"), "no ServiceMonitor CRD: not even the Service");
	cr_expect_eq(S.wanted, (1u << GK_OP_DP) | (1u << GK_OP_XPU) | (1u << GK_OP_NFD) | (1u << GK_OP_PROMETHEUS));
	O.nfd = O.prometheus = true;
	O.namespace_ = "ops";
	render(spec);
	gk_op_obj *r = find("NodeFeatureRule", "intel-gpu-devices");
	cr_assert_not_null(r);
	cr_expect_null(r->ns, "cluster-scoped CRD");
	expect_json(at("NodeFeatureRule", "intel-gpu-devices", "metadata.labels"),
		    "{app: nfd-gpu, owner: gpu, app.kubernetes.io/managed-by: gpukmm}", "rule labels");
	cJSON *rules = at("NodeFeatureRule", "intel-gpu-devices", "spec.rules");
	cr_expect_eq(cJSON_GetArraySize(rules), 9);
	expect_json(cJSON_GetArrayItem(rules, 0),
		    "name: intel.gpu\n"
		    "labels: {intel.feature.node.kubernetes.io/gpu: 'true'}\n"
		    "matchFeatures: [{feature: pci.device, matchExpressions: {vendor: {op: In, value: ['8086']},"
		    " class: {op: In, value: ['0300', '0380']}}}]\n"
		    "matchAny:\n"
		    "- matchFeatures: [{feature: kernel.loadedmodule, matchExpressions: {i915: {op: Exists}}}]\n"
		    "- matchFeatures: [{feature: kernel.enabledmodule, matchExpressions: {i915: {op: Exists}}}]\n"
		    "- matchFeatures: [{feature: kernel.loadedmodule, matchExpressions: {xe: {op: Exists}}}]\n"
		    "- matchFeatures: [{feature: kernel.enabledmodule, matchExpressions: {xe: {op: Exists}}}]\n",
		    "intel.gpu rule");
	expect_json(cJSON_GetArrayItem(rules, 6),
		    "name: intel.gpu.b390\n"
		    "labels: {gpu.intel.com/product: Arc_B390, gpu.intel.com/architecture: Xe3}\n"
		    "matchFeatures: [{feature: pci.device, matchExpressions: {vendor: {op: In, value: ['8086']},"
		    " class: {op: In, value: ['0300']}, device: {op: In, value: [b080, b082, b084, b086]}}}]\n",
		    "b390 rule");
	expect_json(at("Service", "intel-xpumanager", "spec"),
		    "{ports: [{name: http, port: 8080, targetPort: http, protocol: TCP}], selector: {app: intel-xpumanager},"
		    " sessionAffinity: None}",
		    "Service");
	expect_json(at("ServiceMonitor", "intel-xpumanager", "spec"),
		    "{selector: {matchLabels: {app: intel-xpumanager}}, namespaceSelector: {matchNames: [ops]},"
		    " endpoints: [{port: http, path: /metrics, interval: 5s}]}",
		    "ServiceMonitor");
	O.nfd_namespaced = true;
	render("  resourceRegistration: dp\n  useNFDLabeling: true\n  prometheusIntegration: true\n");
	cr_expect_str_eq(find("NodeFeatureRule", "intel-gpu-devices")->ns, "ops");
	cr_expect_null(find("Service", "intel-xpumanager"), "prometheusIntegration needs resourceMonitoring");
}

/* §10: per operand SA (not DRA's), SCC, role, binding; the pod-side changes */
Test(operands, openshift)
{
	O.openshift = true;
	O.dra_version = "v1";
	render("  resourceRegistration: dp\n  resourceMonitoring: true\n");
	cr_expect_str_eq(S.v[0].name, "gpu-gpu-dp-sa");
	cr_expect_str_eq(S.v[1].kind, "SecurityContextConstraints");
	cr_expect_str_eq(S.v[1].name, "gpu-gpu-dp-scc");
	expect_json(at("ClusterRole", "gpu-gpu-dp-scc-role", "rules"),
		    "[{apiGroups: [security.openshift.io], resources: [securitycontextconstraints],"
		    " resourceNames: [gpu-gpu-dp-scc], verbs: [use]}]",
		    "SCC role");
	expect_json(at("ClusterRoleBinding", "gpu-xpu-manager-scc-binding", "subjects"),
		    "[{kind: ServiceAccount, name: gpu-xpu-manager-sa, namespace: intel-gpu-base-operator}]", "binding");
	gk_op_obj *scc = find("SecurityContextConstraints", "gpu-xpu-manager-scc");
	cr_assert_not_null(scc);
	cJSON *want = yaml("apiVersion: security.openshift.io/v1\nkind: SecurityContextConstraints\n"
			   "metadata: {name: gpu-xpu-manager-scc, labels: {app.kubernetes.io/managed-by: gpukmm}, " OWNER "}\n"
			   "allowPrivilegedContainer: false\nallowHostDirVolumePlugin: true\nallowHostIPC: false\n"
			   "allowHostNetwork: false\nallowHostPID: false\nallowHostPorts: false\n"
			   "allowPrivilegeEscalation: false\nreadOnlyRootFilesystem: false\nrequiredDropCapabilities: [ALL]\n"
			   "fsGroup: {type: RunAsAny}\nrunAsUser: {type: RunAsAny}\nseLinuxContext: {type: RunAsAny}\n"
			   "supplementalGroups: {type: RunAsAny}\nseccompProfiles: ['*']\nusers: []\ngroups: []\n"
			   "volumes: [hostPath, configMap]\nallowedCapabilities: [SYS_ADMIN]\n");
	cr_expect(cJSON_Compare(scc->obj, want, 1), "the SCC as upstream builds it");
	cJSON_Delete(want);
	cr_expect_str_eq(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.serviceAccountName")->valuestring,
			 "gpu-gpu-dp-sa");
	cr_expect_null(at("DaemonSet", "gpu-device-plugin", "spec.template.spec.containers.0.securityContext.seLinuxOptions.type")
			       ? NULL : NULL);
	cr_expect_str_eq(at("DaemonSet", "gpu-xpu-manager", "spec.template.spec.containers.0.securityContext.seLinuxOptions.type")
				 ->valuestring, "spc_t");
	render("  resourceRegistration: dra\n");
	cr_expect_null(find("ServiceAccount", "gpu-gpu-dra-sa"), "DRA binds the plugin's own SA");
	expect_json(at("ClusterRoleBinding", "gpu-gpu-dra-scc-binding", "subjects"),
		    "[{kind: ServiceAccount, name: gpu-gpu-dra, namespace: intel-gpu-base-operator}]", "DRA SCC binding");
	expect_json(at("SecurityContextConstraints", "gpu-gpu-dra-scc", "volumes"), "[hostPath, projected]", "DRA SCC volumes");
	cr_expect_str_eq(at("DaemonSet", "gpu-gpu-dra", "spec.template.spec.containers.0.securityContext.seLinuxOptions.type")
				 ->valuestring, "spc_t");
}

Test(operands, deleting_policy_renders_nothing)
{
	Gpukmm__ClusterPolicy *cp = policy_of_yaml("  resourceRegistration: dp\n");
	cp->metadata->deletion_timestamp = strdup("2026-01-01T00:00:00Z");
	gk_err e = { 0 };
	cr_assert_eq(gk_op_render(cp, &O, &S, &e), 0);
	cr_expect_eq(S.n, 0);
	gk_kobj_free(cp);
}

/* the teardown order: DaemonSets of DP and XPU Manager first, DRA's DaemonSet before its RBAC */
Test(operands, catalogue_order)
{
	O.dra_version = "v1beta1";
	O.nfd = O.prometheus = true;
	gk_op_ref *v;
	size_t n;
	gk_err e;
	cr_assert_eq(gk_op_catalogue("gpu", &O, &v, &n, &e), 0);
	const char *want[] = { "DaemonSet gpu-device-plugin", "DaemonSet gpu-xpu-manager",
			       "ConfigMap gpu-xpumanager-otel-config", "ResourceClaimTemplate gpu-monitor-claim",
			       "DaemonSet gpu-gpu-dra", "ValidatingAdmissionPolicyBinding gpu-gpu-dra",
			       "ValidatingAdmissionPolicy gpu-gpu-dra", "DeviceClass gpu-vfio.intel.com",
			       "DeviceClass gpu.intel.com", "ClusterRoleBinding gpu-gpu-dra", "ClusterRole gpu-gpu-dra",
			       "ServiceAccount gpu-gpu-dra", "NodeFeatureRule intel-gpu-devices",
			       "ServiceMonitor intel-xpumanager", "Service intel-xpumanager" };
	cr_assert_eq(n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < n; i++) {
		char got[600];
		snprintf(got, sizeof(got), "%s %s", v[i].kind, v[i].name);
		cr_expect_str_eq(got, want[i]);
	}
	cr_expect_str_eq(v[3].api_version, "resource.k8s.io/v1beta1");
	free(v);
}

/* ---- live vs wanted --------------------------------------------------------------- */

/* what the API server adds to the device plugin DaemonSet on create */
static cJSON *as_served(const gk_op_obj *o)
{
	cJSON *l = cJSON_Duplicate(o->obj, 1);
	cJSON *md = cJSON_GetObjectItem(l, "metadata");
	cJSON_AddStringToObject(md, "resourceVersion", "42");
	cJSON_AddStringToObject(md, "uid", "ds-uid");
	cJSON *spec = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(l, "spec"), "template"), "spec");
	cJSON_AddStringToObject(spec, "restartPolicy", "Always");
	cJSON_AddStringToObject(spec, "dnsPolicy", "ClusterFirst");
	cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "containers"), 0);
	cJSON_AddStringToObject(c0, "terminationMessagePath", "/dev/termination-log");
	cJSON *v;
	cJSON_ArrayForEach(v, cJSON_GetObjectItem(spec, "volumes")) {
		cJSON *hp = cJSON_GetObjectItem(v, "hostPath");
		if (hp && !cJSON_GetObjectItem(hp, "type"))
			cJSON_AddStringToObject(hp, "type", "");
	}
	cJSON *probe = cJSON_GetObjectItem(c0, "startupProbe");
	if (probe)
		cJSON_AddNumberToObject(probe, "successThreshold", 1);
	cJSON_AddItemToObject(l, "status", yaml("{numberReady: 1, desiredNumberScheduled: 2}"));
	return l;
}

static char *sync_str(const gk_op_obj *o, const cJSON *live, int *rc)
{
	cJSON *p = NULL;
	char msg[256];
	*rc = gk_op_sync(o, live, &p, msg, sizeof(msg));
	char *s = p ? cJSON_PrintUnformatted(p) : strdup(*rc == GK_OP_FOREIGN ? msg : "");
	cJSON_Delete(p);
	return s;
}

Test(operands, sync_defaults_are_not_a_difference)
{
	O.dra_version = "v1";
	render("  resourceRegistration: dra\n  resourceMonitoring: true\n  tolerations: [{operator: Exists}]\n");
	for (size_t i = 0; i < S.n; i++) {
		cJSON *live = as_served(&S.v[i]);
		int rc;
		char *s = sync_str(&S.v[i], live, &rc);
		cr_expect_eq(rc, GK_OP_IN_SYNC, "%s %s: %s", S.v[i].kind, S.v[i].name, s);
		free(s);
		cJSON_Delete(live);
	}
}

Test(operands, sync_drift_becomes_a_merge_patch_of_managed_fields)
{
	render("  resourceRegistration: dp\n");
	gk_op_obj *o = find("DaemonSet", "gpu-device-plugin");
	cJSON *live = as_served(o);
	cJSON *spec = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(live, "spec"), "template"), "spec");
	cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "containers"), 0);
	/* someone changed the image and added a selector key and args; someone else an unmanaged field */
	cJSON_ReplaceItemInObject(c0, "image", cJSON_CreateString("other:1"));
	cJSON_AddItemToObject(c0, "args", yaml("['-v=5']"));
	cJSON_AddStringToObject(cJSON_GetObjectItem(spec, "nodeSelector"), "extra", "x");
	cJSON_AddStringToObject(spec, "priorityClassName", "theirs");
	int rc;
	char *s = sync_str(o, live, &rc);
	cr_assert_eq(rc, GK_OP_PATCH);
	cJSON *p = cJSON_Parse(s);
	cJSON *pspec = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "template"), "spec");
	cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "resourceVersion")->valuestring, "42");
	expect_json(cJSON_GetObjectItem(pspec, "nodeSelector"), "{extra: null}", "vanished key is null");
	cJSON *pc0 = cJSON_GetArrayItem(cJSON_GetObjectItem(pspec, "containers"), 0);
	cr_expect_str_eq(cJSON_GetObjectItem(pc0, "image")->valuestring, GK_POLICY_DEFAULT_DP_IMAGE);
	cr_expect_null(cJSON_GetObjectItem(pc0, "args"), "args removed (upstream sends no args at level 0)");
	cr_expect_str_eq(cJSON_GetObjectItem(pc0, "terminationMessagePath")->valuestring, "/dev/termination-log",
			 "the list goes whole, with the live fields we do not manage");
	cr_expect_null(cJSON_GetObjectItem(pspec, "priorityClassName"), "unmanaged fields are not in the patch");
	cr_expect_null(cJSON_GetObjectItem(p, "status"));
	cJSON_Delete(p);
	free(s);
	cJSON_Delete(live);
	/* monitoring turned off: the runxpumd volume and mount go by name */
	render("  resourceRegistration: dp\n  resourceMonitoring: true\n");
	live = as_served(find("DaemonSet", "gpu-device-plugin"));
	render("  resourceRegistration: dp\n");
	s = sync_str(find("DaemonSet", "gpu-device-plugin"), live, &rc);
	cr_expect_eq(rc, GK_OP_PATCH);
	cr_expect(strstr(s, "runxpumd") == NULL && strstr(s, "\"volumes\":[") != NULL, "%s", s);
	free(s);
	cJSON_Delete(live);
}

/* adoption (migration): upstream's object has no label, no owner (or one with an
 * old uid): only metadata changes, the pod template stays (no rollout) */
Test(operands, sync_adopts_upstream_objects_without_touching_the_template)
{
	render("  resourceRegistration: dp\n");
	gk_op_obj *o = find("DaemonSet", "gpu-device-plugin");
	cJSON *live = as_served(o);
	cJSON *md = cJSON_GetObjectItem(live, "metadata");
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(md, "labels"), GK_OP_MANAGED_BY_KEY);
	cJSON_ReplaceItemInObject(md, "ownerReferences",
				  yaml("[{apiVersion: intel.com/v1alpha1, kind: ClusterPolicy, name: gpu, uid: old, controller: true}]"));
	cr_expect(gk_op_is_ours(live, "gpu"));
	cr_expect(!gk_op_is_ours(live, "other"));
	/* our label and another policy's controller reference (a DeviceClass has one name
	 * for every policy): that policy's, not this one's */
	cJSON *shared = as_served(o);
	cr_expect(gk_op_is_ours(shared, "gpu"), "our label and our reference");
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(shared, "metadata"), "ownerReferences",
				  yaml("[{apiVersion: intel.com/v1alpha1, kind: ClusterPolicy, name: other, uid: o, controller: true}]"));
	cr_expect(!gk_op_is_ours(shared, "gpu"));
	cr_expect(gk_op_is_ours(shared, "other"));
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(shared, "metadata"), "ownerReferences");
	cr_expect(gk_op_is_ours(shared, "gpu"), "our label, no controller");
	cJSON_Delete(shared);
	int rc;
	char *s = sync_str(o, live, &rc);
	cr_assert_eq(rc, GK_OP_PATCH);
	cJSON *pj = cJSON_Parse(s);
	expect_json(pj, "metadata:\n  resourceVersion: '42'\n  labels: {app.kubernetes.io/managed-by: gpukmm}\n  " OWNER "\n",
		    "metadata only");
	cJSON_Delete(pj);
	free(s);
	/* another controller: never touched */
	cJSON_ReplaceItemInObject(md, "ownerReferences",
				  yaml("[{apiVersion: apps/v1, kind: Deployment, name: someone, uid: x, controller: true}]"));
	s = sync_str(o, live, &rc);
	cr_expect_eq(rc, GK_OP_FOREIGN);
	cr_expect_str_eq(s, "controlled by Deployment someone");
	free(s);
	cJSON_Delete(live);
}
