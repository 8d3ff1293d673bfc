/* lib/kobj: resource.k8s.io ResourceSlice (any served version) → driver, node,
 * pool, generation and how many devices have attributes or capacity: what the
 * Kueue quotas count (operands.md §8.3). v1alpha3 and v1beta1 keep a device's
 * attributes and capacity under `basic`, v1beta2 and v1 on the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "kj.h"

static int keep_none(const char *key)
{
	return 0;
}

/* upstream counts a device that has attributes or capacity (a map, even empty) */
static bool counts(const cJSON *dev)
{
	const cJSON *basic = gk_kj_child(dev, "basic");
	const cJSON *in = cJSON_IsObject(basic) ? basic : dev;
	return cJSON_IsObject(gk_kj_child(in, "attributes")) || cJSON_IsObject(gk_kj_child(in, "capacity"));
}

int gk_kobj_resource_slice_from_json(const cJSON *obj, Gpukmm__ResourceSlice **out, gk_err *err)
{
	*out = NULL;
	Gpukmm__ObjectMeta *m;
	int rc = gk_kobj_meta_from_json(obj, keep_none, &m, err);
	if (rc)
		return rc;
	Gpukmm__ResourceSlice *s = malloc(sizeof *s);
	if (!s) {
		gk_kobj_free(m);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	gpukmm__resource_slice__init(s);
	s->metadata = m;
	const cJSON *spec, *pool, *devs;
	if ((rc = gk_kj_object(obj, "spec", "", &spec, err)) ||
	    (rc = gk_kj_string(spec, "driver", "spec", &s->driver, err)) ||
	    (rc = gk_kj_string(spec, "nodeName", "spec", &s->node_name, err)) ||
	    (rc = gk_kj_object(spec, "pool", "spec", &pool, err)) ||
	    (rc = gk_kj_string(pool, "name", "spec.pool", &s->pool, err)) ||
	    (rc = gk_kj_int64(pool, "generation", "spec.pool", &s->has_generation, &s->generation, err)) ||
	    (rc = gk_kj_array(spec, "devices", "spec", &devs, err))) {
		gk_kobj_free(s);
		return rc;
	}
	const cJSON *d;
	size_t i = 0;
	cJSON_ArrayForEach(d, devs) {
		if (!cJSON_IsObject(d)) {
			gk_kobj_free(s);
			return gk_err_set(err, GK_INVALID_ARGUMENT, "spec.devices[%zu]: expected object, got %s", i,
					  gk_kj_type_name(d));
		}
		i++;
		s->devices += counts(d);
	}
	s->has_devices = 1;
	*out = s;
	return 0;
}
