/* lib/probe — the node report as JSON, the parser (see probe.h): the
 * controller reads what a node wrote, so nothing is trusted: every key is
 * type-checked, enums and hex ids validated, strings and lists bounded. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_int.h"

#define STR_MAX 4096        /* one string */
#define JSON_MAX (1u << 20) /* the whole document */
#define LIST_MAX 64         /* holders, warnings, problems */

typedef struct dec {
	gk_err *err;
	int rc;
} dec;

static int fail(dec *d, const char *path, const char *key, const char *what)
{
	if (!d->rc)
		d->rc = gk_err_set(d->err, GK_INVALID_ARGUMENT, "node report: %s%s%s: %s", path,
				   *path && *key ? "." : "", key, what);
	return -1;
}

static int oom(dec *d)
{
	if (!d->rc)
		d->rc = gk_err_set(d->err, GK_RESOURCE_EXHAUSTED, "node report: out of memory");
	return -1;
}

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* A string member into *out (malloc'd); absent or null = leave NULL. */
static int str(dec *d, const cJSON *o, const char *path, const char *k, char **out)
{
	const cJSON *v = get(o, k);
	if (!v || cJSON_IsNull(v) || d->rc)
		return d->rc ? -1 : 0;
	if (!cJSON_IsString(v))
		return fail(d, path, k, "not a string");
	if (strlen(v->valuestring) > STR_MAX)
		return fail(d, path, k, "longer than 4096 bytes");
	if (!(*out = strdup(v->valuestring)))
		return oom(d);
	return 0;
}

static int boolean(dec *d, const cJSON *o, const char *path, const char *k, protobuf_c_boolean *has,
		   protobuf_c_boolean *out)
{
	const cJSON *v = get(o, k);
	if (!v || cJSON_IsNull(v) || d->rc)
		return d->rc ? -1 : 0;
	if (!cJSON_IsBool(v))
		return fail(d, path, k, "not true or false");
	*has = 1;
	*out = cJSON_IsTrue(v);
	return 0;
}

/* An integer member in [min, max]; 1 when present. */
static int integer(dec *d, const cJSON *o, const char *path, const char *k, double min, double max, double *out)
{
	const cJSON *v = get(o, k);
	if (!v || cJSON_IsNull(v) || d->rc)
		return d->rc ? -1 : 0;
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < min ||
	    v->valuedouble > max) {
		char m[96];
		snprintf(m, sizeof m, "not an integer from %.0f to %.0f", min, max);
		return fail(d, path, k, m);
	}
	*out = v->valuedouble;
	return 1;
}

static int u32(dec *d, const cJSON *o, const char *path, const char *k, uint32_t max, protobuf_c_boolean *has,
	       uint32_t *out)
{
	double v;
	int rc = integer(d, o, path, k, 0, max, &v);
	if (rc == 1) {
		*has = 1;
		*out = (uint32_t)v;
	}
	return rc < 0 ? -1 : 0;
}

/* "8086" (1..digits hex digits, lower or upper case) → value. */
static int hexid(dec *d, const cJSON *o, const char *path, const char *k, int digits, protobuf_c_boolean *has,
		 uint32_t *out)
{
	const cJSON *v = get(o, k);
	if (!v || cJSON_IsNull(v) || d->rc)
		return d->rc ? -1 : 0;
	const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
	size_t n = s ? strlen(s) : 0;
	bool ok = n >= 1 && n <= (size_t)digits;
	uint32_t x = 0;
	for (size_t i = 0; ok && i < n; i++) {
		char c = s[i];
		int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		ok = h >= 0;
		x = x * 16 + (uint32_t)(h < 0 ? 0 : h);
	}
	if (!ok) {
		char m[64];
		snprintf(m, sizeof m, "not %d hex digits", digits);
		return fail(d, path, k, m);
	}
	if (has)
		*has = 1;
	*out = x;
	return 0;
}

static int tri(dec *d, const cJSON *o, const char *path, const char *k, protobuf_c_boolean *has, Gpukmm__TriState *out)
{
	const cJSON *v = get(o, k);
	if (!v || cJSON_IsNull(v) || d->rc)
		return d->rc ? -1 : 0;
	static const Gpukmm__TriState all[] = { GPUKMM__TRI_STATE__TRI_YES, GPUKMM__TRI_STATE__TRI_NO,
						GPUKMM__TRI_STATE__TRI_UNKNOWN };
	for (size_t i = 0; cJSON_IsString(v) && i < sizeof all / sizeof all[0]; i++)
		if (strcmp(v->valuestring, gkp_tri_name(all[i])) == 0) {
			*has = 1;
			*out = all[i];
			return 0;
		}
	return fail(d, path, k, "not \"true\", \"false\" or \"unknown\"");
}

static int source(dec *d, const cJSON *o, const char *path, const char *k, protobuf_c_boolean *has,
		  Gpukmm__ModuleSource *out)
{
	const cJSON *v = get(o, k);
	if (!v || cJSON_IsNull(v) || d->rc)
		return d->rc ? -1 : 0;
	static const Gpukmm__ModuleSource all[] = {
		GPUKMM__MODULE_SOURCE__SOURCE_UNKNOWN, GPUKMM__MODULE_SOURCE__SOURCE_NONE,
		GPUKMM__MODULE_SOURCE__SOURCE_IN_TREE, GPUKMM__MODULE_SOURCE__SOURCE_OOT,
		GPUKMM__MODULE_SOURCE__SOURCE_BUILTIN,
	};
	for (size_t i = 0; cJSON_IsString(v) && i < sizeof all / sizeof all[0]; i++)
		if (strcmp(v->valuestring, gkp_source_name(all[i])) == 0) {
			*has = 1;
			*out = all[i];
			return 0;
		}
	return fail(d, path, k, "not one of unknown, none, in-tree, oot, builtin");
}

/* An object member (absent or null: *out NULL). */
static int object(dec *d, const cJSON *o, const char *path, const char *k, const cJSON **out)
{
	const cJSON *v = get(o, k);
	*out = NULL;
	if (!v || cJSON_IsNull(v) || d->rc)
		return d->rc ? -1 : 0;
	if (!cJSON_IsObject(v))
		return fail(d, path, k, "not an object");
	*out = v;
	return 0;
}

static int array(dec *d, const cJSON *o, const char *path, const char *k, size_t max, const cJSON **out)
{
	const cJSON *v = get(o, k);
	*out = NULL;
	if (!v || cJSON_IsNull(v) || d->rc)
		return d->rc ? -1 : 0;
	if (!cJSON_IsArray(v))
		return fail(d, path, k, "not an array");
	if ((size_t)cJSON_GetArraySize(v) > max) {
		char m[64];
		snprintf(m, sizeof m, "more than %zu entries", max);
		return fail(d, path, k, m);
	}
	*out = v;
	return 0;
}

static int strv(dec *d, const cJSON *o, const char *path, const char *k, size_t *n, char ***out)
{
	const cJSON *a, *e;
	if (array(d, o, path, k, LIST_MAX, &a) || !a)
		return d->rc ? -1 : 0;
	size_t cap = (size_t)cJSON_GetArraySize(a);
	if (!cap)
		return 0;
	if (!(*out = calloc(cap, sizeof(char *))))
		return oom(d);
	cJSON_ArrayForEach(e, a) {
		if (!cJSON_IsString(e) || strlen(e->valuestring) > STR_MAX)
			return fail(d, path, k, "an entry is not a string of at most 4096 bytes");
		if (!((*out)[(*n)++] = strdup(e->valuestring)))
			return oom(d);
	}
	return 0;
}

/* "2025-01-02T03:04:05Z" or with ".123" (any digits) before the Z. */
static int rfc3339(dec *d, const cJSON *o, const char *path, const char *k, protobuf_c_boolean *has, int64_t *out)
{
	const cJSON *v = get(o, k);
	if (!v || cJSON_IsNull(v) || d->rc)
		return d->rc ? -1 : 0;
	struct tm tm = { 0 };
	const char *s = cJSON_IsString(v) ? v->valuestring : "";
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	int64_t ms = 0;
	if (p && *p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				ms = ms * 10 + (*p - '0');
		for (; digits > 0 && digits < 3; digits++)
			ms *= 10;
		if (!digits)
			p = NULL;
	}
	if (!p || strcmp(p, "Z") != 0)
		return fail(d, path, k, "not an RFC 3339 UTC time (2006-01-02T15:04:05Z)");
	*has = 1;
	*out = (int64_t)timegm(&tm) * 1000 + ms;
	return 0;
}

static int module(dec *d, const cJSON *o, const char *path, Gpukmm__KernelModuleInfo **out)
{
	Gpukmm__KernelModuleInfo *m = malloc(sizeof *m);
	if (!m)
		return oom(d);
	gpukmm__kernel_module_info__init(m);
	*out = m;
	const cJSON *k = NULL, *t = NULL;
	char kp[96], tp[96];
	snprintf(kp, sizeof kp, "%s.ko", path);
	snprintf(tp, sizeof tp, "%s.inTreeKo", path);
	if (str(d, o, path, "name", &m->name) || boolean(d, o, path, "loaded", &m->has_loaded, &m->loaded) ||
	    source(d, o, path, "source", &m->has_source, &m->source) || str(d, o, path, "version", &m->version) ||
	    str(d, o, path, "srcversion", &m->srcversion) ||
	    strv(d, o, path, "holders", &m->n_holders, &m->holders) || str(d, o, path, "taint", &m->taint) ||
	    str(d, o, path, "initstate", &m->initstate) || object(d, o, path, "ko", &k) ||
	    object(d, o, path, "inTreeKo", &t))
		return -1;
	double rc;
	int got = integer(d, o, path, "refcount", -1, 2147483647.0, &rc);
	if (got < 0)
		return -1;
	if (got) {
		m->has_refcount = 1;
		m->refcount = (int32_t)rc;
	}
	if (k && (str(d, k, kp, "path", &m->ko_path) || str(d, k, kp, "version", &m->ko_version) ||
		  str(d, k, kp, "srcversion", &m->ko_srcversion) || str(d, k, kp, "signer", &m->ko_signer) ||
		  str(d, k, kp, "sigHashAlgo", &m->ko_sig_hashalgo)))
		return -1;
	if (t) {
		m->has_in_tree_ko_exists = m->in_tree_ko_exists = 1;
		if (str(d, t, tp, "path", &m->in_tree_ko_path) || str(d, t, tp, "srcversion", &m->in_tree_srcversion) ||
		    str(d, t, tp, "signer", &m->signer) || str(d, t, tp, "sigHashAlgo", &m->sig_hashalgo))
			return -1;
	}
	return 0;
}

static int gpu(dec *d, const cJSON *o, const char *path, Gpukmm__PciGpu **out)
{
	Gpukmm__PciGpu *g = malloc(sizeof *g);
	if (!g)
		return oom(d);
	gpukmm__pci_gpu__init(g);
	*out = g;
	if (!cJSON_IsObject(o))
		return fail(d, path, "", "not an object");
	uint32_t cls = 0, prog = 0;
	protobuf_c_boolean has_cls = 0;
	const cJSON *s = NULL;
	char sp[80];
	snprintf(sp, sizeof sp, "%s.sriov", path);
	if (str(d, o, path, "address", &g->address) ||
	    hexid(d, o, path, "vendor", 4, &g->has_vendor_id, &g->vendor_id) ||
	    hexid(d, o, path, "device", 4, &g->has_device_id, &g->device_id) ||
	    hexid(d, o, path, "subsystemVendor", 4, &g->has_subsystem_vendor_id, &g->subsystem_vendor_id) ||
	    hexid(d, o, path, "subsystemDevice", 4, &g->has_subsystem_device_id, &g->subsystem_device_id) ||
	    hexid(d, o, path, "class", 4, &has_cls, &cls) || hexid(d, o, path, "progIf", 2, NULL, &prog) ||
	    str(d, o, path, "productName", &g->product_name) ||
	    boolean(d, o, path, "virtualFunction", &g->has_is_vf, &g->is_vf) ||
	    str(d, o, path, "physicalFunction", &g->physfn) || str(d, o, path, "driver", &g->driver) ||
	    object(d, o, path, "sriov", &s))
		return -1;
	if (has_cls) {
		g->has_class_code = 1;
		g->class_code = cls << 8 | prog;
	}
	if (s && (u32(d, s, sp, "totalVFs", 65535, &g->has_sriov_totalvfs, &g->sriov_totalvfs) ||
		  u32(d, s, sp, "numVFs", 65535, &g->has_sriov_numvfs, &g->sriov_numvfs)))
		return -1;
	double numa;
	int got = integer(d, o, path, "numaNode", -1, 65535, &numa);
	if (got < 0)
		return -1;
	if (got) {
		g->has_numa_node = 1;
		g->numa_node = (int32_t)numa;
	}
	return 0;
}

static int report(dec *d, const cJSON *o, Gpukmm__NodeReport *r, gk_probe_json_info *info)
{
	const cJSON *av = get(o, "apiVersion"), *kind = get(o, "kind");
	if (!cJSON_IsString(av) || strcmp(av->valuestring, GK_PROBE_JSON_API_VERSION) != 0)
		return fail(d, "", "apiVersion", "not " GK_PROBE_JSON_API_VERSION);
	if (!cJSON_IsString(kind) || strcmp(kind->valuestring, GK_PROBE_JSON_KIND) != 0)
		return fail(d, "", "kind", "not " GK_PROBE_JSON_KIND);
	double gen;
	int got;
	if (str(d, o, "", "nodeName", &r->node_name) || str(d, o, "", "kernelVersion", &r->kernel_version) ||
	    rfc3339(d, o, "", "probedAt", &r->has_probed_at_ms, &r->probed_at_ms) ||
	    (got = integer(d, o, "", "generation", 0, 9007199254740991.0, &gen)) < 0 ||
	    str(d, o, "", "pciSource", &r->pci_source) ||
	    boolean(d, o, "", "modulesSupported", &r->has_modules_supported, &r->modules_supported) ||
	    tri(d, o, "", "secureBoot", &r->has_secure_boot, &r->secure_boot) ||
	    str(d, o, "", "lockdown", &r->lockdown) || str(d, o, "", "moduleName", &r->module_name) ||
	    tri(d, o, "", "canUnload", &r->has_can_unload, &r->can_unload) ||
	    str(d, o, "", "unloadBlocker", &r->unload_blocker) ||
	    strv(d, o, "", "warnings", &r->n_warnings, &r->warnings) ||
	    strv(d, o, "", "problems", &r->n_problems, &r->problems))
		return -1;
	if (got) {
		r->has_generation = 1;
		r->generation = (uint64_t)gen;
	}
	const cJSON *a, *e, *m;
	if (array(d, o, "", "gpus", GK_PROBE_MAX_GPUS, &a))
		return -1;
	if (a && cJSON_GetArraySize(a)) {
		if (!(r->gpus = calloc((size_t)cJSON_GetArraySize(a), sizeof(*r->gpus))))
			return oom(d);
		cJSON_ArrayForEach(e, a) {
			char p[32];
			snprintf(p, sizeof p, "gpus[%zu]", r->n_gpus);
			if (gpu(d, e, p, &r->gpus[r->n_gpus++]))
				return -1;
		}
	}
	if (object(d, o, "", "module", &m))
		return -1;
	if (m && module(d, m, "module", &r->module))
		return -1;
	if (array(d, o, "", "related", GK_PROBE_MAX_RELATED, &a))
		return -1;
	if (a && cJSON_GetArraySize(a)) {
		if (!(r->related = calloc((size_t)cJSON_GetArraySize(a), sizeof(*r->related))))
			return oom(d);
		cJSON_ArrayForEach(e, a) {
			char p[32];
			snprintf(p, sizeof p, "related[%zu]", r->n_related);
			if (!cJSON_IsObject(e))
				return fail(d, p, "", "not an object");
			if (module(d, e, p, &r->related[r->n_related++]))
				return -1;
		}
	}
	/* the counts: "summary" when given (a summarized report lists fewer) */
	const cJSON *s, *z;
	gk_probe_counts(r, &info->pfs, &info->vfs);
	if (object(d, o, "", "summary", &s) || object(d, o, "", "summarized", &z))
		return -1;
	double pf, vf;
	if (s && ((got = integer(d, s, "summary", "physicalFunctions", 0, 1e6, &pf)) < 0 ||
		  (got && (info->pfs = (uint32_t)pf, 0)) ||
		  (got = integer(d, s, "summary", "virtualFunctions", 0, 1e8, &vf)) < 0 ||
		  (got && (info->vfs = (uint32_t)vf, 0))))
		return -1;
	if (z) {
		const cJSON *f = get(z, "form"), *why = get(z, "reason");
		if (cJSON_IsString(f) && strcmp(f->valuestring, "vfs") == 0)
			info->form = GK_PROBE_JSON_VFS_SUMMARIZED;
		else if (cJSON_IsString(f) && strcmp(f->valuestring, "minimal") == 0)
			info->form = GK_PROBE_JSON_MINIMAL;
		else
			return fail(d, "summarized", "form", "not \"vfs\" or \"minimal\"");
		if (!cJSON_IsString(why) || strlen(why->valuestring) > STR_MAX)
			return fail(d, "summarized", "reason", "not a string of at most 4096 bytes");
		size_t n = strlen(why->valuestring);
		if (n >= sizeof info->reason)
			n = sizeof info->reason - 1;
		memcpy(info->reason, why->valuestring, n);
		info->reason[n] = 0;
	}
	return 0;
}

int gk_probe_report_parse(const char *json, size_t len, Gpukmm__NodeReport **out, gk_probe_json_info *info,
			  gk_err *err)
{
	*out = NULL;
	gk_probe_json_info scratch;
	if (!info)
		info = &scratch;
	memset(info, 0, sizeof(*info));
	if (len > JSON_MAX)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "node report: %zu bytes, more than %u", len, JSON_MAX);
	cJSON *o = cJSON_ParseWithLength(json, len);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return gk_err_set(err, GK_INVALID_ARGUMENT, "node report: not a JSON object");
	}
	Gpukmm__NodeReport *r = malloc(sizeof *r);
	if (!r) {
		cJSON_Delete(o);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "node report: out of memory");
	}
	gpukmm__node_report__init(r);
	dec d = { .err = err };
	report(&d, o, r, info);
	cJSON_Delete(o);
	if (d.rc) {
		gk_probe_report_free(r);
		return d.rc;
	}
	info->bytes = len;
	*out = r;
	return GK_OK;
}
