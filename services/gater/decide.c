/* gpukmm-gater: pure gating decision. */
#include <stdio.h>
#include <string.h>

#include "decide.h"
#include "gpukmm/policy.h"

static const cJSON *path(const cJSON *o, const char *const *keys)
{
	for (; *keys && o; keys++)
		o = cJSON_GetObjectItemCaseSensitive(o, *keys);
	return o;
}

bool gk_gater_is_gated(const cJSON *ds, const char *cp, const char *op_ns)
{
	static const char *const nk[] = { "metadata", "name", NULL }, *const sk[] = { "metadata", "namespace", NULL },
				 *const lk[] = { "metadata", "labels", GK_GATER_LABEL, NULL };
	const cJSON *name = path(ds, nk), *ns = path(ds, sk), *gate = path(ds, lk);
	if (!cp || !*cp || !cJSON_IsString(name))
		return false;
	if (cJSON_IsString(gate) && strcmp(gate->valuestring, cp) == 0)
		return true;
	if (!cJSON_IsString(ns) || !op_ns || strcmp(ns->valuestring, op_ns) != 0)
		return false;
	static const enum gk_policy_ds all[] = { GK_POLICY_DS_DEVICE_PLUGIN, GK_POLICY_DS_DRA,
						  GK_POLICY_DS_XPU_MANAGER };
	char buf[GK_POLICY_KEY_MAX];
	for (size_t i = 0; i < 3; i++)
		if (gk_policy_ds_name(buf, sizeof(buf), cp, all[i]) == 0 && strcmp(buf, name->valuestring) == 0)
			return true;
	return false;
}

cJSON *gk_gater_patch(const cJSON *ds, const char *key, bool want_gate, bool *oom)
{
	static const char *const sel[] = { "spec", "template", "spec", "nodeSelector", NULL },
				 *const rvk[] = { "metadata", "resourceVersion", NULL };
	*oom = false;
	const cJSON *cur = cJSON_GetObjectItemCaseSensitive(path(ds, sel), key);
	bool right = want_gate ? (cJSON_IsString(cur) && cur->valuestring[0] == 0) : cur == NULL;
	if (right)
		return NULL;
	cJSON *p = cJSON_CreateObject();
	cJSON *spec, *tmpl, *tspec, *ns;
	const cJSON *rv = path(ds, rvk);
	if (!p || !(spec = cJSON_AddObjectToObject(p, "spec")) || !(tmpl = cJSON_AddObjectToObject(spec, "template")) ||
	    !(tspec = cJSON_AddObjectToObject(tmpl, "spec")) || !(ns = cJSON_AddObjectToObject(tspec, "nodeSelector")) ||
	    !(want_gate ? cJSON_AddStringToObject(ns, key, "") : cJSON_AddNullToObject(ns, key)))
		goto fail;
	if (cJSON_IsString(rv)) {
		cJSON *m = cJSON_AddObjectToObject(p, "metadata");
		if (!m || !cJSON_AddStringToObject(m, "resourceVersion", rv->valuestring))
			goto fail;
	}
	return p;
fail:
	*oom = true;
	cJSON_Delete(p);
	return NULL;
}

int gk_gater_ds_status(char *buf, size_t cap, const cJSON *ds)
{
	if (!ds)
		return snprintf(buf, cap, "%s", GK_POLICY_STATUS_NA);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(ds, "status");
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(st, "numberReady");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(st, "desiredNumberScheduled");
	long rn = cJSON_IsNumber(r) ? (long)r->valuedouble : 0, dn = cJSON_IsNumber(d) ? (long)d->valuedouble : 0;
	return snprintf(buf, cap, "%ld/%ld", rn, dn);
}
