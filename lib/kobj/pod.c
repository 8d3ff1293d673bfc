/* lib/kobj: core/v1 Pod → node, phase, the gpu.intel.com/... resources it asks
 * for (requests or limits, of any container or init container), the
 * ResourceClaims it holds, whether it has emptyDir volumes and whether it is a
 * static pod's mirror (what a drain needs to know). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "kj.h"

#define GPU_PREFIX "gpu.intel.com/"
#define MAX_GPU_RES 32
#define MAX_CLAIMS 32
#define MIRROR_ANNOTATION "kubernetes.io/config.mirror"

static int keep_gpukmm(const char *key)
{
	return strncmp(key, "gpukmm.io/", 10) == 0 || strcmp(key, MIRROR_ANNOTATION) == 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_res(Gpukmm__Pod *p, const char *name, gk_err *err)
{
	for (size_t i = 0; i < p->n_gpu_resources; i++)
		if (!strcmp(p->gpu_resources[i], name))
			return 0;
	if (p->n_gpu_resources >= MAX_GPU_RES)
		return 0; /* bounded: a pod cannot name more distinct resources usefully */
	char *d = gk_kj_strdup(name);
	if (!d)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	p->gpu_resources[p->n_gpu_resources++] = d;
	return 0;
}

static int containers(const cJSON *spec, const char *key, Gpukmm__Pod *p, gk_err *err)
{
	const cJSON *a, *c;
	int rc = gk_kj_array(spec, key, "spec", &a, err);
	if (rc || !a)
		return rc;
	size_t i = 0;
	cJSON_ArrayForEach(c, a) {
		char path[64];
		snprintf(path, sizeof path, "spec.%s[%zu]", key, i++);
		if (!cJSON_IsObject(c))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: expected object, got %s", path,
					  gk_kj_type_name(c));
		const cJSON *res;
		if ((rc = gk_kj_object(c, "resources", path, &res, err)))
			return rc;
		static const char *const kinds[] = {"requests", "limits"};
		for (int k = 0; k < 2; k++) {
			const cJSON *m, *e;
			char rpath[80];
			snprintf(rpath, sizeof rpath, "%s.resources", path);
			if ((rc = gk_kj_object(res, kinds[k], rpath, &m, err)))
				return rc;
			cJSON_ArrayForEach(e, m) {
				if (e->string && !strncmp(e->string, GPU_PREFIX, strlen(GPU_PREFIX)) &&
				    (rc = add_res(p, e->string, err)))
					return rc;
			}
		}
	}
	return 0;
}

static int add_claim(Gpukmm__Pod *p, const char *name, gk_err *err)
{
	if (!name || !*name)
		return 0;
	for (size_t i = 0; i < p->n_resource_claims; i++)
		if (!strcmp(p->resource_claims[i], name))
			return 0;
	if (p->n_resource_claims >= MAX_CLAIMS)
		return 0;
	char *d = gk_kj_strdup(name);
	if (!d)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	p->resource_claims[p->n_resource_claims++] = d;
	return 0;
}

/* spec.resourceClaims[].resourceClaimName, status.resourceClaimStatuses[].resourceClaimName
 * (the claim a template made for the pod) */
static int claims(const cJSON *o, const char *key, const char *path, Gpukmm__Pod *p, gk_err *err)
{
	const cJSON *a, *c;
	int rc = gk_kj_array(o, key, path, &a, err);
	if (rc || !a)
		return rc;
	cJSON_ArrayForEach(c, a) {
		const cJSON *n = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "resourceClaimName") : NULL;
		if (cJSON_IsString(n) && (rc = add_claim(p, n->valuestring, err)))
			return rc;
	}
	return 0;
}

static bool has_empty_dir(const cJSON *spec)
{
	const cJSON *v, *a = cJSON_IsObject(spec) ? cJSON_GetObjectItemCaseSensitive(spec, "volumes") : NULL;
	cJSON_ArrayForEach(v, a) {
		if (cJSON_IsObject(v) && cJSON_GetObjectItemCaseSensitive(v, "emptyDir"))
			return true;
	}
	return false;
}

int gk_kobj_pod_from_json(const cJSON *obj, Gpukmm__Pod **out, gk_err *err)
{
	*out = NULL;
	Gpukmm__ObjectMeta *m;
	int rc = gk_kobj_meta_from_json(obj, keep_gpukmm, &m, err);
	if (rc)
		return rc;
	Gpukmm__Pod *p = malloc(sizeof *p);
	if (!p) {
		gk_kobj_free(m);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	gpukmm__pod__init(p);
	p->metadata = m;
	if (!(p->gpu_resources = calloc(MAX_GPU_RES, sizeof *p->gpu_resources)) ||
	    !(p->resource_claims = calloc(MAX_CLAIMS, sizeof *p->resource_claims))) {
		gk_kobj_free(p);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	const cJSON *spec, *st;
	if ((rc = gk_kj_object(obj, "spec", "", &spec, err)) ||
	    (rc = gk_kj_string(spec, "nodeName", "spec", &p->node_name, err)) ||
	    (rc = containers(spec, "initContainers", p, err)) ||
	    (rc = containers(spec, "containers", p, err)) ||
	    (rc = claims(spec, "resourceClaims", "spec", p, err)) ||
	    (rc = gk_kj_object(obj, "status", "", &st, err)) ||
	    (rc = gk_kj_string(st, "phase", "status", &p->phase, err)) ||
	    (rc = claims(st, "resourceClaimStatuses", "status", p, err))) {
		gk_kobj_free(p);
		return rc;
	}
	if (has_empty_dir(spec))
		p->has_empty_dir = p->empty_dir = 1;
	if (gk_kv_get(m->annotations, m->n_annotations, MIRROR_ANNOTATION))
		p->has_mirror = p->mirror = 1;
	qsort(p->gpu_resources, p->n_gpu_resources, sizeof *p->gpu_resources, cmp);
	*out = p;
	return 0;
}
