/* lib/kobj: apps/v1 DaemonSet → template nodeSelector and rollout counts. */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "kj.h"

static int keep_gpukmm(const char *key)
{
	return strncmp(key, "gpukmm.io/", 10) == 0;
}

int gk_kobj_daemon_set_from_json(const cJSON *obj, Gpukmm__DaemonSet **out, gk_err *err)
{
	*out = NULL;
	Gpukmm__ObjectMeta *m;
	int rc = gk_kobj_meta_from_json(obj, keep_gpukmm, &m, err);
	if (rc)
		return rc;
	Gpukmm__DaemonSet *d = malloc(sizeof *d);
	if (!d) {
		gk_kobj_free(m);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	gpukmm__daemon_set__init(d);
	d->metadata = m;
	const cJSON *spec, *tmpl, *pspec, *st;
	if ((rc = gk_kj_object(obj, "spec", "", &spec, err)) ||
	    (rc = gk_kj_object(spec, "template", "spec", &tmpl, err)) ||
	    (rc = gk_kj_object(tmpl, "spec", "spec.template", &pspec, err)) ||
	    (rc = gk_kj_string_map(pspec, "nodeSelector", "spec.template.spec", NULL,
				   &d->n_node_selector, &d->node_selector, err)) ||
	    (rc = gk_kj_object(obj, "status", "", &st, err)) ||
	    (rc = gk_kj_int32(st, "desiredNumberScheduled", "status", &d->has_desired_number_scheduled,
			      &d->desired_number_scheduled, err)) ||
	    (rc = gk_kj_int32(st, "numberReady", "status", &d->has_number_ready, &d->number_ready,
			      err)) ||
	    (rc = gk_kj_int32(st, "numberAvailable", "status", &d->has_number_available,
			      &d->number_available, err)) ||
	    (rc = gk_kj_int32(st, "updatedNumberScheduled", "status",
			      &d->has_updated_number_scheduled, &d->updated_number_scheduled, err))) {
		gk_kobj_free(d);
		return rc;
	}
	*out = d;
	return 0;
}
