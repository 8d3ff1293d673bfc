/* lib/probe — the node report as JSON, the encoder (see probe.h and
 * schema/node-report.v1alpha1.json). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_int.h"

#define MINIMAL_STR 512 /* strings of the minimal form are cut to this many bytes */

const char *gkp_tri_name(Gpukmm__TriState t)
{
	return t == GPUKMM__TRI_STATE__TRI_YES ? "true" : t == GPUKMM__TRI_STATE__TRI_NO ? "false" : "unknown";
}

const char *gkp_source_name(Gpukmm__ModuleSource s)
{
	switch (s) {
	case GPUKMM__MODULE_SOURCE__SOURCE_NONE: return "none";
	case GPUKMM__MODULE_SOURCE__SOURCE_IN_TREE: return "in-tree";
	case GPUKMM__MODULE_SOURCE__SOURCE_OOT: return "oot";
	case GPUKMM__MODULE_SOURCE__SOURCE_BUILTIN: return "builtin";
	default: return "unknown";
	}
}

void gk_probe_counts(const Gpukmm__NodeReport *r, uint32_t *pfs, uint32_t *vfs)
{
	uint32_t p = 0, seen = 0, numvfs = 0;
	for (size_t i = 0; i < r->n_gpus; i++) {
		const Gpukmm__PciGpu *g = r->gpus[i];
		if (!g)
			continue;
		if (g->has_is_vf && g->is_vf) {
			seen++;
			continue;
		}
		p++;
		if (g->has_sriov_numvfs)
			numvfs += g->sriov_numvfs;
	}
	*pfs = p;
	*vfs = numvfs > seen ? numvfs : seen;
}

/* ---- building ---------------------------------------------------------------- */

typedef struct enc {
	bool oom;
	gk_probe_json_form form;
} enc;

static void str(enc *e, cJSON *o, const char *k, const char *v)
{
	if (!v || e->oom)
		return;
	char cut[MINIMAL_STR + 1];
	if (e->form == GK_PROBE_JSON_MINIMAL && strlen(v) > MINIMAL_STR) {
		size_t n = MINIMAL_STR;
		while (n && ((unsigned char)v[n] & 0xC0) == 0x80)
			n--; /* not inside a UTF-8 sequence */
		memcpy(cut, v, n);
		cut[n] = 0;
		v = cut;
	}
	if (!cJSON_AddStringToObject(o, k, v))
		e->oom = true;
}

static void num(enc *e, cJSON *o, const char *k, double v)
{
	if (!e->oom && !cJSON_AddNumberToObject(o, k, v))
		e->oom = true;
}

static void boolean(enc *e, cJSON *o, const char *k, bool v)
{
	if (!e->oom && !cJSON_AddBoolToObject(o, k, v))
		e->oom = true;
}

static void hex(enc *e, cJSON *o, const char *k, uint32_t v, int digits)
{
	char b[16];
	snprintf(b, sizeof b, "%0*x", digits, v);
	str(e, o, k, b);
}

static cJSON *obj(enc *e, cJSON *o, const char *k)
{
	cJSON *c = e->oom ? NULL : cJSON_AddObjectToObject(o, k);
	if (!c)
		e->oom = true;
	return c;
}

static cJSON *arr(enc *e, cJSON *o, const char *k)
{
	cJSON *c = e->oom ? NULL : cJSON_AddArrayToObject(o, k);
	if (!c)
		e->oom = true;
	return c;
}

static cJSON *item(enc *e, cJSON *a)
{
	cJSON *c = e->oom ? NULL : cJSON_CreateObject();
	if (!c || !cJSON_AddItemToArray(a, c)) {
		cJSON_Delete(c);
		e->oom = true;
		return NULL;
	}
	return c;
}

static void strv(enc *e, cJSON *o, const char *k, char **v, size_t n)
{
	if (!n || e->oom)
		return;
	cJSON *a = arr(e, o, k);
	for (size_t i = 0; a && i < n; i++) {
		cJSON *s = cJSON_CreateString(v[i] ? v[i] : "");
		if (!s || !cJSON_AddItemToArray(a, s)) {
			cJSON_Delete(s);
			e->oom = true;
		}
	}
}

static void rfc3339_ms(char *buf, size_t cap, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (ms < 0 || !gmtime_r(&t, &tm)) {
		snprintf(buf, cap, "1970-01-01T00:00:00Z");
		return;
	}
	size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, cap - n, ".%03dZ", (int)(ms % 1000));
}

/* VF counts per driver of one PF ("none" for unbound VFs). */
static void vf_summary(enc *e, cJSON *pf, const Gpukmm__NodeReport *r, const char *addr)
{
	uint32_t count = 0;
	cJSON *s = obj(e, pf, "vfSummary");
	cJSON *d = s ? cJSON_CreateObject() : NULL;
	if (s && !d)
		e->oom = true;
	for (size_t i = 0; d && !e->oom && i < r->n_gpus; i++) {
		const Gpukmm__PciGpu *g = r->gpus[i];
		if (!g || !(g->has_is_vf && g->is_vf) || !g->physfn || strcmp(g->physfn, addr) != 0)
			continue;
		count++;
		const char *drv = g->driver && *g->driver ? g->driver : "none";
		cJSON *c = cJSON_GetObjectItemCaseSensitive(d, drv);
		if (c)
			cJSON_SetNumberValue(c, c->valuedouble + 1);
		else if (!cJSON_AddNumberToObject(d, drv, 1))
			e->oom = true;
	}
	num(e, s, "count", count);
	if (d && !e->oom)
		cJSON_AddItemToObject(s, "drivers", d);
	else
		cJSON_Delete(d);
}

static void gpu(enc *e, cJSON *a, const Gpukmm__NodeReport *r, const Gpukmm__PciGpu *g)
{
	cJSON *o = item(e, a);
	if (!o)
		return;
	str(e, o, "address", g->address);
	if (g->has_vendor_id)
		hex(e, o, "vendor", g->vendor_id, 4);
	if (g->has_device_id)
		hex(e, o, "device", g->device_id, 4);
	if (g->has_subsystem_vendor_id)
		hex(e, o, "subsystemVendor", g->subsystem_vendor_id, 4);
	if (g->has_subsystem_device_id)
		hex(e, o, "subsystemDevice", g->subsystem_device_id, 4);
	if (g->has_class_code) {
		hex(e, o, "class", g->class_code >> 8, 4);
		hex(e, o, "progIf", g->class_code & 0xff, 2);
	}
	str(e, o, "productName", g->product_name);
	bool vf = g->has_is_vf && g->is_vf;
	boolean(e, o, "virtualFunction", vf);
	str(e, o, "physicalFunction", g->physfn);
	str(e, o, "driver", g->driver);
	if (g->has_sriov_totalvfs || g->has_sriov_numvfs) {
		cJSON *s = obj(e, o, "sriov");
		if (g->has_sriov_totalvfs)
			num(e, s, "totalVFs", g->sriov_totalvfs);
		if (g->has_sriov_numvfs)
			num(e, s, "numVFs", g->sriov_numvfs);
	}
	if (g->has_numa_node)
		num(e, o, "numaNode", g->numa_node);
	if (!vf && e->form == GK_PROBE_JSON_VFS_SUMMARIZED && g->address)
		vf_summary(e, o, r, g->address);
}

static void ko(enc *e, cJSON *o, const char *k, const char *path, const char *version, const char *srcversion,
	       const char *signer, const char *algo)
{
	if (!path && !version && !srcversion && !signer)
		return;
	cJSON *c = obj(e, o, k);
	str(e, c, "path", path);
	str(e, c, "version", version);
	str(e, c, "srcversion", srcversion);
	str(e, c, "signer", signer);
	str(e, c, "sigHashAlgo", algo);
}

static void module(enc *e, cJSON *o, const Gpukmm__KernelModuleInfo *m)
{
	str(e, o, "name", m->name);
	if (m->has_loaded)
		boolean(e, o, "loaded", m->loaded);
	str(e, o, "source", gkp_source_name(m->has_source ? m->source : GPUKMM__MODULE_SOURCE__SOURCE_UNKNOWN));
	str(e, o, "version", m->version);
	if (e->form == GK_PROBE_JSON_MINIMAL)
		return;
	str(e, o, "srcversion", m->srcversion);
	if (m->has_refcount)
		num(e, o, "refcount", m->refcount);
	strv(e, o, "holders", m->holders, m->n_holders);
	str(e, o, "taint", m->taint);
	str(e, o, "initstate", m->initstate);
	ko(e, o, "ko", m->ko_path, m->ko_version, m->ko_srcversion, m->ko_signer, m->ko_sig_hashalgo);
	if (m->has_in_tree_ko_exists && m->in_tree_ko_exists)
		ko(e, o, "inTreeKo", m->in_tree_ko_path ? m->in_tree_ko_path : "", NULL, m->in_tree_srcversion,
		   m->signer, m->sig_hashalgo);
}

static cJSON *build(const Gpukmm__NodeReport *r, gk_probe_json_form form, const char *reason, size_t full_bytes,
		    size_t budget, bool *oom)
{
	enc e = { .form = form };
	cJSON *o = cJSON_CreateObject();
	if (!o) {
		*oom = true;
		return NULL;
	}
	str(&e, o, "apiVersion", GK_PROBE_JSON_API_VERSION);
	str(&e, o, "kind", GK_PROBE_JSON_KIND);
	str(&e, o, "nodeName", r->node_name);
	str(&e, o, "kernelVersion", r->kernel_version);
	if (r->has_probed_at_ms) {
		char t[48];
		rfc3339_ms(t, sizeof t, r->probed_at_ms);
		str(&e, o, "probedAt", t);
	}
	if (r->has_generation)
		num(&e, o, "generation", (double)r->generation);
	str(&e, o, "pciSource", r->pci_source);
	if (r->has_modules_supported)
		boolean(&e, o, "modulesSupported", r->modules_supported);
	str(&e, o, "secureBoot", gkp_tri_name(r->has_secure_boot ? r->secure_boot : GPUKMM__TRI_STATE__TRI_UNKNOWN));
	str(&e, o, "lockdown", r->lockdown);
	uint32_t pfs, vfs;
	gk_probe_counts(r, &pfs, &vfs);
	cJSON *s = obj(&e, o, "summary");
	num(&e, s, "physicalFunctions", pfs);
	num(&e, s, "virtualFunctions", vfs);
	if (form != GK_PROBE_JSON_FULL) {
		cJSON *z = obj(&e, o, "summarized");
		str(&e, z, "form", form == GK_PROBE_JSON_MINIMAL ? "minimal" : "vfs");
		str(&e, z, "reason", reason);
		num(&e, z, "fullBytes", (double)full_bytes);
		num(&e, z, "budgetBytes", (double)budget);
		if (form == GK_PROBE_JSON_MINIMAL) {
			num(&e, z, "problems", (double)r->n_problems);
			num(&e, z, "warnings", (double)r->n_warnings);
			num(&e, z, "related", (double)r->n_related);
		}
	}
	if (form != GK_PROBE_JSON_MINIMAL) {
		cJSON *a = arr(&e, o, "gpus");
		for (size_t i = 0; a && i < r->n_gpus; i++) {
			const Gpukmm__PciGpu *g = r->gpus[i];
			if (g && !(form == GK_PROBE_JSON_VFS_SUMMARIZED && g->has_is_vf && g->is_vf))
				gpu(&e, a, r, g);
		}
	}
	str(&e, o, "moduleName", r->module_name);
	if (r->module)
		module(&e, obj(&e, o, "module"), r->module);
	if (form != GK_PROBE_JSON_MINIMAL && r->n_related) {
		cJSON *a = arr(&e, o, "related");
		for (size_t i = 0; a && i < r->n_related; i++)
			if (r->related[i])
				module(&e, item(&e, a), r->related[i]);
	}
	str(&e, o, "canUnload", gkp_tri_name(r->has_can_unload ? r->can_unload : GPUKMM__TRI_STATE__TRI_UNKNOWN));
	str(&e, o, "unloadBlocker", r->unload_blocker);
	if (form != GK_PROBE_JSON_MINIMAL) {
		strv(&e, o, "warnings", r->warnings, r->n_warnings);
		strv(&e, o, "problems", r->problems, r->n_problems);
	}
	if (e.oom) {
		cJSON_Delete(o);
		*oom = true;
		return NULL;
	}
	return o;
}

static char *print(cJSON *o, bool pretty)
{
	char *s = pretty ? cJSON_Print(o) : cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

char *gk_probe_report_json(const Gpukmm__NodeReport *r, size_t budget, bool pretty, gk_probe_json_info *info)
{
	gk_probe_json_info scratch;
	if (!info)
		info = &scratch;
	memset(info, 0, sizeof(*info));
	gk_probe_counts(r, &info->pfs, &info->vfs);
	if (budget && budget < GK_PROBE_JSON_MIN_BUDGET)
		budget = GK_PROBE_JSON_MIN_BUDGET;
	bool oom = false;
	char *full = print(build(r, GK_PROBE_JSON_FULL, NULL, 0, budget, &oom), pretty);
	if (!full)
		return NULL;
	info->full_bytes = info->bytes = strlen(full);
	if (!budget || info->full_bytes <= budget)
		return full;
	free(full);
	for (gk_probe_json_form f = GK_PROBE_JSON_VFS_SUMMARIZED; f <= GK_PROBE_JSON_MINIMAL; f++) {
		if (f == GK_PROBE_JSON_VFS_SUMMARIZED)
			snprintf(info->reason, sizeof info->reason,
				 "the full report is %zu bytes, over the budget of %zu: the %u VFs are counted "
				 "per physical function instead of listed",
				 info->full_bytes, budget, info->vfs);
		else
			snprintf(info->reason, sizeof info->reason,
				 "the full report is %zu bytes, over the budget of %zu even with the VFs summarized: "
				 "only the counts (%u GPUs, %u VFs), the module verdict and the node facts are kept",
				 info->full_bytes, budget, info->pfs, info->vfs);
		char *s = print(build(r, f, info->reason, info->full_bytes, budget, &oom), pretty);
		if (!s)
			return NULL;
		info->form = f;
		info->bytes = strlen(s);
		if (info->bytes <= budget || f == GK_PROBE_JSON_MINIMAL)
			return s; /* the minimal form fits GK_PROBE_JSON_MIN_BUDGET (strings cut) */
		free(s);
	}
	return NULL;
}
