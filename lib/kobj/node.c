/* lib/kobj: core/v1 Node → Gpukmm__Node (labels, our annotations, schedulability,
 * taints, kernel version, Ready, the allocatable resources Kueue quotas count). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "kj.h"

static int keep_gpukmm(const char *key)
{
	return strncmp(key, "gpukmm.io/", 10) == 0;
}

/* the allocatable resources the Kueue quotas count (gpukmm-opmgr) */
static int keep_allocatable(const char *key)
{
	return !strcmp(key, "cpu") || !strcmp(key, "memory") || !strcmp(key, "gpu.intel.com/i915") ||
	       !strcmp(key, "gpu.intel.com/xe");
}

static int taints(const cJSON *spec, Gpukmm__Node *n, gk_err *err)
{
	const cJSON *a, *e;
	int rc = gk_kj_array(spec, "taints", "spec", &a, err);
	if (rc || !a)
		return rc;
	size_t cap = (size_t)cJSON_GetArraySize(a), i = 0;
	if (!cap)
		return 0;
	if (!(n->taints = calloc(cap, sizeof *n->taints)))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	cJSON_ArrayForEach(e, a) {
		char path[48];
		snprintf(path, sizeof path, "spec.taints[%zu]", i++);
		if (!cJSON_IsObject(e))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: expected object, got %s", path,
					  gk_kj_type_name(e));
		Gpukmm__Taint *t = malloc(sizeof *t);
		if (!t)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		gpukmm__taint__init(t);
		n->taints[n->n_taints++] = t;
		if ((rc = gk_kj_string(e, "key", path, &t->key, err)) ||
		    (rc = gk_kj_string(e, "value", path, &t->value, err)) ||
		    (rc = gk_kj_string(e, "effect", path, &t->effect, err)))
			return rc;
	}
	return 0;
}

static int ready(const cJSON *status, Gpukmm__Node *n, gk_err *err)
{
	const cJSON *a, *e;
	int rc = gk_kj_array(status, "conditions", "status", &a, err);
	if (rc || !a)
		return rc;
	size_t i = 0;
	cJSON_ArrayForEach(e, a) {
		char path[48];
		snprintf(path, sizeof path, "status.conditions[%zu]", i++);
		char *type = NULL, *st = NULL;
		if (!cJSON_IsObject(e))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: expected object, got %s", path,
					  gk_kj_type_name(e));
		if (!(rc = gk_kj_string(e, "type", path, &type, err)) &&
		    !(rc = gk_kj_string(e, "status", path, &st, err)) && type &&
		    !strcmp(type, "Ready")) {
			n->has_ready = 1;
			n->ready = st && !strcmp(st, "True");
		}
		free(type);
		free(st);
		if (rc)
			return rc;
	}
	return 0;
}

int gk_kobj_node_from_json(const cJSON *obj, Gpukmm__Node **out, gk_err *err)
{
	*out = NULL;
	Gpukmm__ObjectMeta *m;
	int rc = gk_kobj_meta_from_json(obj, keep_gpukmm, &m, err);
	if (rc)
		return rc;
	Gpukmm__Node *n = malloc(sizeof *n);
	if (!n) {
		gk_kobj_free(m);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	gpukmm__node__init(n);
	n->metadata = m;
	const cJSON *spec, *status, *info;
	if ((rc = gk_kj_object(obj, "spec", "", &spec, err)) ||
	    (rc = gk_kj_bool(spec, "unschedulable", "spec", &n->has_unschedulable, &n->unschedulable,
			     err)) ||
	    (rc = taints(spec, n, err)) || (rc = gk_kj_object(obj, "status", "", &status, err)) ||
	    (rc = gk_kj_object(status, "nodeInfo", "status", &info, err)) ||
	    (rc = gk_kj_string(info, "kernelVersion", "status.nodeInfo", &n->kernel_version, err)) ||
	    (rc = ready(status, n, err)) ||
	    (rc = gk_kj_string_map(status, "allocatable", "status", keep_allocatable, &n->n_allocatable,
				   &n->allocatable, err))) {
		gk_kobj_free(n);
		return rc;
	}
	*out = n;
	return 0;
}
