/* lib/operands: the DRA kubelet plugin and its dependencies (operands.md §6). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char DRA_DS[] =
	"metadata:\n"
	"  labels: {app: intel-gpu-resource-driver-kubelet-plugin}\n"
	"spec:\n"
	"  selector:\n"
	"    matchLabels: {app: intel-gpu-resource-driver-kubelet-plugin}\n"
	"  template:\n"
	"    metadata:\n"
	"      labels: {app: intel-gpu-resource-driver-kubelet-plugin}\n"
	"    spec:\n"
	"      containers:\n"
	"      - name: kubelet-plugin\n"
	"        image: ''\n"
	"        imagePullPolicy: IfNotPresent\n"
	"        command: [/kubelet-gpu-plugin]\n"
	"        env:\n"
	"        - name: NODE_NAME\n"
	"          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}\n"
	"        - name: POD_NAMESPACE\n"
	"          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}\n"
	"        - {name: SYSFS_ROOT, value: /sysfs}\n"
	"        volumeMounts:\n"
	"        - {name: plugins-registry, mountPath: /var/lib/kubelet/plugins_registry}\n"
	"        - {name: plugins, mountPath: /var/lib/kubelet/plugins}\n"
	"        - {name: cdi, mountPath: /etc/cdi}\n"
	"        - {name: varruncdi, mountPath: /var/run/cdi}\n"
	"        - {name: xpumdrundir, mountPath: /run/xpumd}\n"
	"        - {name: sysfs, mountPath: /sysfs}\n"
	"        securityContext:\n"
	"          allowPrivilegeEscalation: false\n"
	"          capabilities: {drop: [ALL]}\n"
	"          readOnlyRootFilesystem: true\n"
	"          runAsUser: 0\n"
	"          seccompProfile: {type: RuntimeDefault}\n"
	"      volumes:\n"
	"      - {name: plugins-registry, hostPath: {path: /var/lib/kubelet/plugins_registry}}\n"
	"      - {name: plugins, hostPath: {path: /var/lib/kubelet/plugins}}\n"
	"      - {name: cdi, hostPath: {path: /etc/cdi}}\n"
	"      - {name: varruncdi, hostPath: {path: /var/run/cdi}}\n"
	"      - {name: sysfs, hostPath: {path: /sys}}\n"
	"      - {name: xpumdrundir, hostPath: {path: /run/xpumd, type: DirectoryOrCreate}}\n";

static const char DRA_ROLE_RULES[] =
	"- {apiGroups: [''], resources: [nodes], verbs: [get]}\n"
	"- apiGroups: [resource.k8s.io]\n"
	"  resources: [resourceslices]\n"
	"  verbs: [get, list, watch, create, update, patch, delete]\n"
	"- {apiGroups: [resource.k8s.io], resources: [resourceclaims], verbs: [get]}\n";

/* The admission policy: the plugin's ServiceAccount may write only the
 * ResourceSlices of the node its own pod runs on. */
static const char DRA_VAP[] =
	"spec:\n"
	"  failurePolicy: Fail\n"
	"  matchConstraints:\n"
	"    resourceRules:\n"
	"    - apiGroups: [resource.k8s.io]\n"
	"      apiVersions: [v1beta1]\n"
	"      operations: [CREATE, UPDATE, DELETE]\n"
	"      resources: [resourceslices]\n"
	"  matchConditions:\n"
	"  - name: isRestrictedUser\n"
	"    expression: ''\n"
	"  variables:\n"
	"  - name: userNodeName\n"
	"    expression: \"request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')\"\n"
	"  - name: objectNodeName\n"
	"    expression: '(request.operation == \"DELETE\" ? oldObject : object).spec.?nodeName.orValue(\"\")'\n"
	"  validations:\n"
	"  - expression: variables.userNodeName != \"\"\n"
	"    message: no node association found for user, this user must run in a pod on a node and"
	" ServiceAccountTokenPodNodeInfo must be enabled\n"
	"  - expression: variables.userNodeName == variables.objectNodeName\n"
	"    messageExpression: >-\n"
	"      \"this user running on node '\"+variables.userNodeName+\"' may not modify \" +\n"
	"      (variables.objectNodeName == \"\" ?\"cluster resourceslices\" : \"resourceslices on node"
	" '\"+variables.objectNodeName+\"'\")\n";

#define HEALTH_PORT 51516
#define PROBE(ft, period) \
	"{failureThreshold: " #ft ", periodSeconds: " #period ", timeoutSeconds: 10, grpc: {port: 51516, service: liveness}}"

static const char *const DC_AV[] = { "resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1",
				     "resource.k8s.io/v1alpha3" };

static const char *dra_api(const char *ver)
{
	for (size_t i = 0; i < 4; i++)
		if (strcmp(DC_AV[i] + strlen("resource.k8s.io/"), ver) == 0)
			return DC_AV[i];
	return NULL;
}

static cJSON *dra_args(gk_opr *r, bool health_check)
{
	const Gpukmm__ClusterPolicySpec *s = r->spec;
	const Gpukmm__DraSpec *d = s->dra;
	cJSON *a = cJSON_CreateArray();
	if (!a) {
		r->oom = true;
		return NULL;
	}
	gk_opr_push(r, a, gk_opr_strf(r, "-v=%d", gk_opr_level(s, d ? d->log_level : 0, d && d->has_log_level)));
	if (s->health)
		gk_opr_push(r, a, gk_opr_str(r, "--health-monitoring=true"));
	gk_opr_push(r, a, gk_opr_strf(r, "--healthcheck-port=%d", health_check ? HEALTH_PORT : -1));
	gk_opr_push(r, a, gk_opr_strf(r, "--manage-binding=%s", d && d->has_manage_binding && d->manage_binding ? "true"
														 : "false"));
	return a;
}

static void device_class(gk_opr *r, const char *api, const char *name, bool vfio_only)
{
	gk_op_obj *o = gk_opr_add(r, GK_OP_DRA, api, "DeviceClass", "deviceclasses", NULL, name, NULL);
	if (!o)
		return;
	cJSON *sel = gk_opr_template(r, "[{cel: {expression: 'device.driver == \"gpu.intel.com\"'}}]");
	if (vfio_only)
		gk_opr_push(r, sel,
			    gk_opr_template(r, "{cel: {expression: \"device.attributes[\\\"gpu.intel.com\\\"].driver == "
					       "'vfio-pci' || device.attributes[\\\"gpu.intel.com\\\"].driver == "
					       "'xe-vfio-pci'\"}}"));
	gk_opr_set(r, o->obj, "/spec/selectors", sel);
	gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/selectors");
	/* the DRA extended-resource feature exists from 1.34 (resource.k8s.io/v1) on; a
	 * cluster without the feature gate drops the field, so it is set on creation only */
	if (!vfio_only && strcmp(name, "gpu.intel.com") == 0 && strcmp(api, DC_AV[0]) == 0)
		gk_opr_set_str(r, o->obj, "/spec/extendedResourceName", "intel.com/gpu");
}

void gk_opr_dra(gk_opr *r)
{
	const Gpukmm__ClusterPolicySpec *s = r->spec;
	const Gpukmm__DraSpec *d = s->dra;
	const char *api = dra_api(r->o->dra_version);
	if (!api)
		return;
	char *name = gk_opr_name(r, "-gpu-dra");
	if (!name)
		return;
	if (r->o->openshift)
		gk_opr_openshift(r, GK_OP_DRA, "gpu-dra", false, name);
	/* dependencies (§6.3), in upstream's creation order */
	gk_opr_add(r, GK_OP_DRA, "v1", "ServiceAccount", "serviceaccounts", r->ns, name, NULL);
	gk_op_obj *o = gk_opr_add(r, GK_OP_DRA, "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", NULL,
				  name, NULL);
	if (o) {
		gk_opr_set(r, o->obj, "/rules", gk_opr_template(r, DRA_ROLE_RULES));
		gk_opr_rule(r, o, GK_OP_SUBSET, "/rules");
	}
	o = gk_opr_add(r, GK_OP_DRA, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", NULL,
		       name, NULL);
	if (o) {
		cJSON *rr = gk_opr_template(r, "{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole}");
		gk_opr_set(r, o->obj, "/roleRef", rr);
		if (rr)
			gk_opr_set_str(r, rr, "/name", name);
		cJSON *subj = gk_opr_template(r, "[{kind: ServiceAccount}]");
		gk_opr_set(r, o->obj, "/subjects", subj);
		if (subj) {
			gk_opr_set_str(r, cJSON_GetArrayItem(subj, 0), "/name", name);
			gk_opr_set_str(r, cJSON_GetArrayItem(subj, 0), "/namespace", r->ns);
		}
		/* roleRef is immutable: set on creation only */
		gk_opr_rule(r, o, GK_OP_SUBSET, "/subjects");
	}
	device_class(r, api, "gpu.intel.com", false);
	device_class(r, api, "gpu-vfio.intel.com", !(d && d->has_manage_binding && d->manage_binding));
	o = gk_opr_add(r, GK_OP_DRA, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy",
		       "validatingadmissionpolicies", NULL, name, DRA_VAP);
	if (o) {
		if (strcmp(r->o->dra_version, "v1alpha3") == 0) /* 1.31: no v1beta1 to match (Equivalent) */
			gk_opr_set(r, o->obj, "/spec/matchConstraints/resourceRules/0/apiVersions",
				   gk_opr_template(r, "[v1alpha3]"));
		gk_opr_set(r, o->obj, "/spec/matchConditions/0/expression",
			   gk_opr_strf(r, "request.userInfo.username == \"system:serviceaccount:%s:%s\"", r->ns, name));
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec");
	}
	o = gk_opr_add(r, GK_OP_DRA, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding",
		       "validatingadmissionpolicybindings", NULL, name, "spec: {validationActions: [Deny]}");
	if (o) {
		gk_opr_set_str(r, o->obj, "/spec/policyName", name);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec");
	}
	/* the kubelet plugin (§6.2) */
	o = gk_opr_add(r, GK_OP_DRA, "apps/v1", "DaemonSet", "daemonsets", r->ns, name, DRA_DS);
	if (o) {
		cJSON *obj = o->obj;
		bool hc = !d || !d->has_pod_health_check || d->pod_health_check; /* CRD default true */
		gk_opr_set_str(r, obj, "/metadata/labels/owner", r->cpn);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/metadata/labels/owner");
		/* both SA fields, so the deprecated one never names another account */
		gk_opr_set_str(r, obj, "/spec/template/spec/serviceAccountName", name);
		gk_opr_set_str(r, obj, "/spec/template/spec/serviceAccount", name);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/serviceAccountName");
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/serviceAccount");
		gk_opr_set_str(r, obj, "/spec/template/spec/containers/0/image", d && d->image ? d->image : "");
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/containers/0/image");
		gk_opr_set(r, obj, "/spec/template/spec/containers/0/args", dra_args(r, hc));
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/containers/0/args");
		gk_opr_pod_common(r, o);
		static const char *const HC[] = { "/spec/template/spec/containers/0/ports/@healthcheck",
						  "/spec/template/spec/containers/0/startupProbe",
						  "/spec/template/spec/containers/0/livenessProbe" };
		if (hc) {
			gk_opr_set(r, obj, HC[0], gk_opr_template(r, "{name: healthcheck, containerPort: 51516}"));
			gk_opr_set(r, obj, HC[1], gk_opr_template(r, PROBE(60, 10)));
			gk_opr_set(r, obj, HC[2], gk_opr_template(r, PROBE(3, 30)));
		}
		for (size_t i = 0; i < 3; i++)
			gk_opr_rule(r, o, hc ? GK_OP_SUBSET : GK_OP_ABSENT, HC[i]);
		if (r->o->openshift) {
			/* spc_t: the plugin writes CDI specs to the host */
			gk_opr_set(r, obj, "/spec/template/spec/containers/0/securityContext/seLinuxOptions",
				   gk_opr_template(r, "{type: spc_t}"));
			gk_opr_rule(r, o, GK_OP_EXACT, "/spec/template/spec/containers/0/securityContext/seLinuxOptions");
		}
	}
	free(name);
}
