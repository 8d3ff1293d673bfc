/* lib/kobj: resource.k8s.io ResourceClaim → allocated? and by which drivers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "kj.h"

static int keep_gpukmm(const char *key)
{
	return strncmp(key, "gpukmm.io/", 10) == 0;
}

static int drivers(const cJSON *alloc, Gpukmm__ResourceClaim *c, gk_err *err)
{
	const cJSON *dev, *res, *e;
	int rc;
	if ((rc = gk_kj_object(alloc, "devices", "status.allocation", &dev, err)) ||
	    (rc = gk_kj_array(dev, "results", "status.allocation.devices", &res, err)) || !res)
		return rc;
	size_t cap = (size_t)cJSON_GetArraySize(res), i = 0;
	if (!cap)
		return 0;
	if (!(c->allocated_drivers = calloc(cap, sizeof *c->allocated_drivers)))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	cJSON_ArrayForEach(e, res) {
		char path[64];
		snprintf(path, sizeof path, "status.allocation.devices.results[%zu]", i++);
		if (!cJSON_IsObject(e))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: expected object, got %s", path,
					  gk_kj_type_name(e));
		char *d = NULL;
		if ((rc = gk_kj_string(e, "driver", path, &d, err)))
			return rc;
		if (!d)
			continue;
		bool dup = false;
		for (size_t j = 0; j < c->n_allocated_drivers && !dup; j++)
			dup = !strcmp(c->allocated_drivers[j], d);
		if (dup)
			free(d);
		else
			c->allocated_drivers[c->n_allocated_drivers++] = d;
	}
	return 0;
}

int gk_kobj_resource_claim_from_json(const cJSON *obj, Gpukmm__ResourceClaim **out, gk_err *err)
{
	*out = NULL;
	Gpukmm__ObjectMeta *m;
	int rc = gk_kobj_meta_from_json(obj, keep_gpukmm, &m, err);
	if (rc)
		return rc;
	Gpukmm__ResourceClaim *c = malloc(sizeof *c);
	if (!c) {
		gk_kobj_free(m);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	gpukmm__resource_claim__init(c);
	c->metadata = m;
	const cJSON *status, *alloc;
	if ((rc = gk_kj_object(obj, "status", "", &status, err)) ||
	    (rc = gk_kj_object(status, "allocation", "status", &alloc, err)) ||
	    (rc = drivers(alloc, c, err))) {
		gk_kobj_free(c);
		return rc;
	}
	c->has_allocated = 1;
	c->allocated = alloc != NULL;
	*out = c;
	return 0;
}
