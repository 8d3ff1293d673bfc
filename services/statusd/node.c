/* gpukmm-statusd: a node report → its Node's gpukmm.io labels and annotation
 * (the controller applies a checked NodeReportRequest with it, nrrw.c). */
#include <stdio.h>
#include <string.h>

#include "gpukmm/probe.h"
#include "node.h"

static bool label_safe(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 40)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			return false;
	return true;
}

static const char *source_name(Gpukmm__ModuleSource s)
{
	switch (s) {
	case GPUKMM__MODULE_SOURCE__SOURCE_NONE: return "none";
	case GPUKMM__MODULE_SOURCE__SOURCE_IN_TREE: return "in-tree";
	case GPUKMM__MODULE_SOURCE__SOURCE_OOT: return "oot";
	case GPUKMM__MODULE_SOURCE__SOURCE_BUILTIN: return "builtin";
	default: return NULL;
	}
}

cJSON *gk_sd_node_labels(const Gpukmm__NodeReport *r, const gk_probe_json_info *info)
{
	cJSON *l = cJSON_CreateObject();
	if (!l)
		return NULL;
	uint32_t gpus, vfs;
	if (info) {
		gpus = info->pfs;
		vfs = info->vfs;
	} else {
		gk_probe_counts(r, &gpus, &vfs);
	}
	char n[24];
	snprintf(n, sizeof(n), "%u", gpus);
	if (!cJSON_AddStringToObject(l, GK_SD_NODE_PREFIX "gpu.present", gpus ? "true" : "false") ||
	    !cJSON_AddStringToObject(l, GK_SD_NODE_PREFIX "gpu.count", n) ||
	    !cJSON_AddStringToObject(l, GK_SD_NODE_PREFIX "sriov.vfs-active", vfs ? "true" : "false"))
		goto fail;
	const Gpukmm__KernelModuleInfo *m = r->module;
	const char *name = m && m->name ? m->name : r->module_name;
	const char *src = m && m->has_source ? source_name(m->source) : NULL;
	if (name && src && label_safe(name)) {
		char key[96];
		snprintf(key, sizeof(key), GK_SD_NODE_PREFIX "%s.source", name);
		if (!cJSON_AddStringToObject(l, key, src))
			goto fail;
	}
	return l;
fail:
	cJSON_Delete(l);
	return NULL;
}

static bool ours(const char *key)
{
	size_t pl = strlen(GK_SD_NODE_PREFIX), n = strlen(key);
	if (strncmp(key, GK_SD_NODE_PREFIX, pl) != 0)
		return false;
	return strcmp(key + pl, "gpu.present") == 0 || strcmp(key + pl, "gpu.count") == 0 ||
	       strcmp(key + pl, "sriov.vfs-active") == 0 || (n > pl + 7 && strcmp(key + n - 7, ".source") == 0);
}

/* The annotation already says what report_json says: the same JSON but for
 * probedAt and generation (a prober restart re-probes the same state). */
static bool same_report(const char *cur, const char *want)
{
	if (strcmp(cur, want) == 0)
		return true;
	cJSON *a = cJSON_Parse(cur), *b = cJSON_Parse(want);
	bool same = cJSON_IsObject(a) && cJSON_IsObject(b);
	if (same) {
		static const char *const volatile_keys[] = { "probedAt", "generation" };
		for (size_t i = 0; i < 2; i++) {
			cJSON_DeleteItemFromObjectCaseSensitive(a, volatile_keys[i]);
			cJSON_DeleteItemFromObjectCaseSensitive(b, volatile_keys[i]);
		}
		same = cJSON_Compare(a, b, true);
	}
	cJSON_Delete(a);
	cJSON_Delete(b);
	return same;
}

cJSON *gk_sd_node_patch(const cJSON *node, const Gpukmm__NodeReport *r, const gk_probe_json_info *info,
			const char *report_json, bool *oom)
{
	*oom = false;
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(node, "metadata");
	const cJSON *cl = cJSON_GetObjectItemCaseSensitive(meta, "labels");
	const cJSON *ca = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
	cJSON *want = gk_sd_node_labels(r, info);
	cJSON *p = cJSON_CreateObject(), *pm = NULL, *pl = NULL, *pa = NULL;
	if (!want || !p || !(pm = cJSON_AddObjectToObject(p, "metadata")) ||
	    !(pl = cJSON_AddObjectToObject(pm, "labels")) || !(pa = cJSON_AddObjectToObject(pm, "annotations")))
		goto fail;
	const cJSON *it;
	cJSON_ArrayForEach(it, want)
	{
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(cl, it->string);
		if (cJSON_IsString(c) && strcmp(c->valuestring, it->valuestring) == 0)
			continue;
		if (!cJSON_AddStringToObject(pl, it->string, it->valuestring))
			goto fail;
	}
	cJSON_ArrayForEach(it, cl)
	{
		if (it->string && ours(it->string) && !cJSON_GetObjectItemCaseSensitive(want, it->string) &&
		    !cJSON_AddNullToObject(pl, it->string))
			goto fail;
	}
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(ca, GK_SD_NODE_ANNOTATION);
	if (report_json && !(cJSON_IsString(c) && same_report(c->valuestring, report_json)) &&
	    !cJSON_AddStringToObject(pa, GK_SD_NODE_ANNOTATION, report_json))
		goto fail;
	cJSON_Delete(want);
	want = NULL;
	if (!pl->child)
		cJSON_DeleteItemFromObject(pm, "labels");
	if (!pa->child)
		cJSON_DeleteItemFromObject(pm, "annotations");
	if (!pm->child) {
		cJSON_Delete(p);
		return NULL;
	}
	if (cJSON_IsString(rv) && !cJSON_AddStringToObject(pm, "resourceVersion", rv->valuestring))
		goto fail;
	return p;
fail:
	*oom = true;
	cJSON_Delete(want);
	cJSON_Delete(p);
	return NULL;
}
