/* lib/operands: XPU Manager — the DaemonSet, its OTel ConfigMap (or the
 * override's hash) and, in dra mode, the monitor claim template (operands.md §7). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char XPU_DS[] =
	"metadata:\n"
	"  labels: {app: intel-xpumanager}\n"
	"spec:\n"
	"  selector:\n"
	"    matchLabels: {app.kubernetes.io/name: xpumd, app: intel-xpumanager}\n"
	"  template:\n"
	"    metadata:\n"
	"      labels: {app.kubernetes.io/name: xpumd, app: intel-xpumanager}\n"
	"    spec:\n"
	"      securityContext:\n"
	"        seccompProfile: {type: RuntimeDefault}\n"
	"      automountServiceAccountToken: false\n"
	"      containers:\n"
	"      - name: xpumd\n"
	"        image: ''\n"
	"        imagePullPolicy: IfNotPresent\n"
	"        args: ['--config=/etc/xpumd/config.yaml']\n"
	"        securityContext:\n"
	"          readOnlyRootFilesystem: true\n"
	"          allowPrivilegeEscalation: false\n"
	"          runAsUser: 0\n"
	"          capabilities: {drop: [ALL], add: [SYS_ADMIN]}\n"
	"        ports:\n"
	"        - {name: http, containerPort: 8080, protocol: TCP}\n"
	"        resources:\n"
	"          requests: {cpu: 10m, memory: 128Mi}\n"
	"          limits: {cpu: 100m, memory: 512Mi}\n"
	"        volumeMounts:\n"
	"        - {name: config, mountPath: /etc/xpumd, readOnly: true}\n"
	"        - {name: rundir, mountPath: /run/xpumd}\n"
	"      volumes:\n"
	"      - {name: config, configMap: {name: '', defaultMode: 420}}\n"
	"      - {name: rundir, hostPath: {path: /run/xpumd, type: DirectoryOrCreate}}\n";

/* the three values spec.xpu.monitoringResource may take (the CRD's enum) */
static const char *const MON[] = { "i915_monitoring", "xe_monitoring", "monitoring" };

/* The claim template's request, in the shape of the served resource.k8s.io version:
 * v1 and v1beta2 nest it under `exactly`, v1beta1 and v1alpha3 have it flat. */
static void claim_template(gk_opr *r, const char *name)
{
	const char *ver = r->o->dra_version;
	bool nested = strcmp(ver, "v1") == 0 || strcmp(ver, "v1beta2") == 0;
	static const char REQ[] = "{deviceClassName: gpu.intel.com, adminAccess: true, allocationMode: All,"
				  " tolerations: [{effect: NoSchedule}, {effect: NoExecute}]}";
	char av[64];
	snprintf(av, sizeof(av), "resource.k8s.io/%s", ver);
	/* the apiVersion string must outlive the object: keep one per known version */
	static const char *const AV[] = { "resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1",
					  "resource.k8s.io/v1alpha3" };
	const char *api = NULL;
	for (size_t i = 0; i < 4; i++)
		if (strcmp(AV[i], av) == 0)
			api = AV[i];
	if (!api)
		return;
	gk_op_obj *o = gk_opr_add(r, GK_OP_XPU, api, "ResourceClaimTemplate", "resourceclaimtemplates", r->ns, name,
				  NULL);
	if (!o)
		return;
	cJSON *req = gk_opr_template(r, REQ);
	cJSON *item = cJSON_CreateObject();
	if (!req || !item || !cJSON_AddStringToObject(item, "name", "gpu")) {
		cJSON_Delete(req);
		cJSON_Delete(item);
		r->oom = true;
		return;
	}
	if (nested) {
		cJSON_AddItemToObject(item, "exactly", req);
	} else {
		while (req->child)
			cJSON_AddItemToArray(item, cJSON_DetachItemViaPointer(req, req->child));
		cJSON_Delete(req);
	}
	cJSON *reqs = gk_opr_at(r, o->obj, "/spec/spec/devices");
	cJSON *arr = cJSON_CreateArray();
	gk_opr_push(r, arr, item);
	gk_opr_set(r, reqs, "/requests", arr);
	/* the spec of a claim template is immutable: created, never patched */
}

/* The ConfigMap name and the config hash, or false (the error recorded). */
static bool otel(gk_opr *r, char **cm, char hash[65])
{
	const Gpukmm__XpuSpec *x = r->spec->xpu;
	const char *ov = x && x->config_map_override && *x->config_map_override ? x->config_map_override : NULL;
	if (ov) {
		char msg[GK_ERR_MSG_MAX];
		if (!r->o->otel_override_has_cm) {
			gk_opr_error(r, "unable to fetch otel ConfigMap hash: configmaps \"%s\" not found", ov);
			return false;
		}
		if (!r->o->otel_override) {
			gk_opr_error(r, "unable to fetch otel ConfigMap hash: override ConfigMap %s does not contain key %s",
				     ov, GK_OP_OTEL_KEY);
			return false;
		}
		if (gk_op_otel_check(r->o->otel_override, msg, sizeof(msg))) {
			gk_opr_error(r, "unable to fetch otel ConfigMap hash: %s", msg);
			return false;
		}
		gk_op_sha256_hex(r->o->otel_override, hash);
		if (!(*cm = strdup(ov)))
			r->oom = true;
		return !r->oom;
	}
	char *text = gk_op_otel_config(r->cp);
	char *name = gk_opr_name(r, "-xpumanager-otel-config");
	if (!text || !name) {
		free(text);
		free(name);
		r->oom = true;
		return false;
	}
	gk_op_sha256_hex(text, hash);
	gk_op_obj *o = gk_opr_add(r, GK_OP_XPU, "v1", "ConfigMap", "configmaps", r->ns, name, NULL);
	if (o) {
		gk_opr_set_str(r, o->obj, "/metadata/labels/app", "intel-xpumanager");
		gk_opr_set_str(r, o->obj, "/data/config.yaml", text);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/data/config.yaml");
	}
	free(text);
	*cm = name;
	return true;
}

void gk_opr_xpu(gk_opr *r)
{
	const Gpukmm__ClusterPolicySpec *s = r->spec;
	const Gpukmm__XpuSpec *x = s->xpu;
	char *sa = gk_opr_name(r, "-xpu-manager-sa");
	if (r->o->openshift)
		gk_opr_openshift(r, GK_OP_XPU, "xpu-manager", true, sa);
	bool use_dra = r->o->dra_version && *r->o->dra_version && s->resource_registration &&
		       strcmp(s->resource_registration, "dra") == 0;
	char *claim = gk_opr_name(r, "-monitor-claim");
	if (use_dra && claim)
		claim_template(r, claim);
	char *cm = NULL, hash[65];
	if (!otel(r, &cm, hash)) {
		/* as upstream: no DaemonSet change while the configuration is unusable */
		r->s->held |= 1u << GK_OP_XPU;
		free(sa);
		free(claim);
		return;
	}
	char *name = gk_opr_name(r, "-xpu-manager");
	gk_op_obj *o = gk_opr_add(r, GK_OP_XPU, "apps/v1", "DaemonSet", "daemonsets", r->ns, name, XPU_DS);
	free(name);
	if (o) {
		cJSON *obj = o->obj;
		/* labels and template annotations replaced whole, as upstream */
		gk_opr_set_str(r, obj, "/metadata/labels/owner", r->cpn);
		gk_opr_rule(r, o, GK_OP_EXACT, "/metadata/labels");
		gk_opr_set_str(r, obj, "/spec/template/metadata/annotations/gpu.intel.com~1xpum-otel-config-hash", hash);
		gk_opr_rule(r, o, GK_OP_EXACT, "/spec/template/metadata/annotations");
		const char *image = x && x->image ? x->image : "";
		gk_opr_set_str(r, obj, "/spec/template/spec/containers/@xpumd/image", image);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/containers/@xpumd/image");
		const char *mon = x && x->monitoring_resource && *x->monitoring_resource ? x->monitoring_resource
											 : GK_POLICY_DEFAULT_MONITORING;
		char path[256];
		for (size_t i = 0; i < 3; i++) {
			bool want = !use_dra && strcmp(MON[i], mon) == 0;
			for (int k = 0; k < 2; k++) {
				snprintf(path, sizeof(path), "/spec/template/spec/containers/@xpumd/resources/%s/gpu.intel.com~1%s",
					 k ? "limits" : "requests", MON[i]);
				if (want)
					gk_opr_set_str(r, obj, path, "1");
				gk_opr_rule(r, o, want ? GK_OP_SUBSET : GK_OP_ABSENT, path);
			}
		}
		if (!use_dra && strcmp(mon, MON[0]) && strcmp(mon, MON[1]) && strcmp(mon, MON[2])) {
			/* outside the enum (no webhook): requested all the same, as upstream */
			for (int k = 0; k < 2; k++) {
				snprintf(path, sizeof(path), "/spec/template/spec/containers/@xpumd/resources/%s/gpu.intel.com~1%s",
					 k ? "limits" : "requests", mon);
				gk_opr_set_str(r, obj, path, "1");
				gk_opr_rule(r, o, GK_OP_SUBSET, path);
			}
		}
		if (use_dra) {
			cJSON *rc = gk_opr_template(r, "[{name: monitor-claim}]");
			gk_opr_set(r, obj, "/spec/template/spec/resourceClaims", rc);
			if (rc)
				gk_opr_set_str(r, cJSON_GetArrayItem(rc, 0), "/resourceClaimTemplateName", claim);
			gk_opr_set(r, obj, "/spec/template/spec/containers/@xpumd/resources/claims",
				   gk_opr_template(r, "[{name: monitor-claim}]"));
			gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/resourceClaims");
			gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/containers/@xpumd/resources/claims");
		} else {
			gk_opr_rule(r, o, GK_OP_ABSENT, "/spec/template/spec/resourceClaims");
			gk_opr_rule(r, o, GK_OP_ABSENT, "/spec/template/spec/containers/@xpumd/resources/claims");
		}
		gk_opr_set_str(r, obj, "/spec/template/spec/volumes/@config/configMap/name", cm);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/volumes/@config");
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/containers/@xpumd/volumeMounts/@config");
		gk_opr_pod_common(r, o);
		if (r->o->openshift) {
			gk_opr_set_str(r, obj, "/spec/template/spec/serviceAccountName", sa);
			gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/serviceAccountName");
			gk_opr_set(r, obj, "/spec/template/spec/containers/0/securityContext/seLinuxOptions",
				   gk_opr_template(r, "{type: spc_t}"));
			gk_opr_rule(r, o, GK_OP_EXACT, "/spec/template/spec/containers/0/securityContext/seLinuxOptions");
		}
	}
	free(cm);
	free(sa);
	free(claim);
}
