/* lib/policy: defaulting — the mutating webhook's share of upstream's defaults
 * (operands.md §2.2; the CRD supplies the rest through the API server):
 *   spec.kernelModule.moduleName  "xe"             (only when kernelModule is set)
 *   spec.dp.plugin                the device plugin image
 *   spec.dra.image                the DRA driver image
 *   spec.xpu.image                the XPU Manager image
 *   spec.xpu.monitoringResource   "monitoring"
 * each only when empty, whatever resourceRegistration says (as upstream). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"

/* Set *field to v when empty: 1 changed, 0 not, -1 OOM. */
static int fill(char **field, const char *v)
{
	if (*field && **field)
		return 0;
	char *n = strdup(v);
	if (!n)
		return -1;
	free(*field);
	*field = n;
	return 1;
}

#define SUB(ptr, init)                                  \
	do {                                            \
		if (!(ptr)) {                           \
			(ptr) = malloc(sizeof(*(ptr))); \
			if (!(ptr))                     \
				return -1;              \
			init(ptr);                      \
		}                                       \
	} while (0)

int gk_policy_default(Gpukmm__ClusterPolicy *cp)
{
	if (!cp || !cp->spec)
		return 0;
	Gpukmm__ClusterPolicySpec *s = cp->spec;
	int changed = 0, rc;
	if (s->kernel_module) {
		if ((rc = fill(&s->kernel_module->module_name, GK_POLICY_DEFAULT_MODULE)) < 0)
			return -1;
		changed |= rc;
	}
	SUB(s->dp, gpukmm__device_plugin_spec__init);
	SUB(s->dra, gpukmm__dra_spec__init);
	SUB(s->xpu, gpukmm__xpu_spec__init);
	if ((rc = fill(&s->dp->plugin, GK_POLICY_DEFAULT_DP_IMAGE)) < 0)
		return -1;
	changed |= rc;
	if ((rc = fill(&s->dra->image, GK_POLICY_DEFAULT_DRA_IMAGE)) < 0)
		return -1;
	changed |= rc;
	if ((rc = fill(&s->xpu->image, GK_POLICY_DEFAULT_XPU_IMAGE)) < 0)
		return -1;
	changed |= rc;
	if ((rc = fill(&s->xpu->monitoring_resource, GK_POLICY_DEFAULT_MONITORING)) < 0)
		return -1;
	changed |= rc;
	return changed;
}

static bool add_op(cJSON *ops, const char *op, const char *path, cJSON *value)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !value || !cJSON_AddStringToObject(o, "op", op) || !cJSON_AddStringToObject(o, "path", path)) {
		cJSON_Delete(o);
		cJSON_Delete(value);
		return false;
	}
	cJSON_AddItemToObject(o, "value", value);
	cJSON_AddItemToArray(ops, o);
	return true;
}

/* One string field `key` of the object spec.<sub> (path "/spec/<sub>"): the op
 * that fills it when empty. A sub-object that is not an object (or a field that
 * is not a string) is a type error: validation reports it, defaulting leaves it. */
static bool default_field(cJSON *ops, const cJSON *spec, const char *sub, const char *key, const char *value,
			  bool *made_sub)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(spec, sub);
	char path[128];
	if (!o || cJSON_IsNull(o)) {
		if (!*made_sub) {
			/* the whole sub-object, with this first field */
			cJSON *v = cJSON_CreateObject();
			if (!v || !cJSON_AddStringToObject(v, key, value)) {
				cJSON_Delete(v);
				return false;
			}
			snprintf(path, sizeof(path), "/spec/%s", sub);
			*made_sub = true;
			return add_op(ops, o ? "replace" : "add", path, v);
		}
		snprintf(path, sizeof(path), "/spec/%s/%s", sub, key);
		return add_op(ops, "add", path, cJSON_CreateString(value));
	}
	if (!cJSON_IsObject(o))
		return true;
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, key);
	if (cJSON_IsString(f) && f->valuestring[0])
		return true;
	if (f && !cJSON_IsString(f) && !cJSON_IsNull(f))
		return true;
	snprintf(path, sizeof(path), "/spec/%s/%s", sub, key);
	return add_op(ops, f ? "replace" : "add", path, cJSON_CreateString(value));
}

cJSON *gk_policy_default_patch(const cJSON *obj)
{
	cJSON *ops = cJSON_CreateArray();
	if (!ops)
		return NULL;
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	if (!cJSON_IsObject(spec))
		return ops;
	const cJSON *km = cJSON_GetObjectItemCaseSensitive(spec, "kernelModule");
	if (cJSON_IsObject(km)) {
		const cJSON *mn = cJSON_GetObjectItemCaseSensitive(km, "moduleName");
		bool type_error = mn && !cJSON_IsString(mn) && !cJSON_IsNull(mn);
		if (!type_error && !(cJSON_IsString(mn) && mn->valuestring[0]) &&
		    !add_op(ops, mn ? "replace" : "add", "/spec/kernelModule/moduleName",
			    cJSON_CreateString(GK_POLICY_DEFAULT_MODULE)))
			goto oom;
	}
	bool dp = false, dra = false, xpu = false;
	if (!default_field(ops, spec, "dp", "plugin", GK_POLICY_DEFAULT_DP_IMAGE, &dp) ||
	    !default_field(ops, spec, "dra", "image", GK_POLICY_DEFAULT_DRA_IMAGE, &dra) ||
	    !default_field(ops, spec, "xpu", "image", GK_POLICY_DEFAULT_XPU_IMAGE, &xpu) ||
	    !default_field(ops, spec, "xpu", "monitoringResource", GK_POLICY_DEFAULT_MONITORING, &xpu))
		goto oom;
	return ops;
oom:
	cJSON_Delete(ops);
	return NULL;
}
