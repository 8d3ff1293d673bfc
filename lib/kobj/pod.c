/* lib/kobj: core/v1 Pod → node, phase and the gpu.intel.com/... resources it asks
 * for (requests or limits, of any container or init container). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "kj.h"

#define GPU_PREFIX "gpu.intel.com/"
#define MAX_GPU_RES 32

static int keep_gpukmm(const char *key)
{
	return strncmp(key, "gpukmm.io/", 10) == 0;
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
	if (!(p->gpu_resources = calloc(MAX_GPU_RES, sizeof *p->gpu_resources))) {
		gk_kobj_free(p);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	const cJSON *spec, *st;
	if ((rc = gk_kj_object(obj, "spec", "", &spec, err)) ||
	    (rc = gk_kj_string(spec, "nodeName", "spec", &p->node_name, err)) ||
	    (rc = containers(spec, "initContainers", p, err)) ||
	    (rc = containers(spec, "containers", p, err)) ||
	    (rc = gk_kj_object(obj, "status", "", &st, err)) ||
	    (rc = gk_kj_string(st, "phase", "status", &p->phase, err))) {
		gk_kobj_free(p);
		return rc;
	}
	qsort(p->gpu_resources, p->n_gpu_resources, sizeof *p->gpu_resources, cmp);
	*out = p;
	return 0;
}
