/* lib/kobj watcher-side converters: Node (with the allocatable Kueue counts), ResourceClaim, DaemonSet, Pod, ResourceSlice. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpukmm/kobj.h"

static cJSON *J(const char *s)
{
	cJSON *j = cJSON_Parse(s);
	cr_assert(j, "bad test JSON: %s", s);
	return j;
}

Test(kobj_node, full)
{
	cJSON *j = J("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\","
		     "\"resourceVersion\":\"7\",\"labels\":{\"b\":\"2\",\"a\":\"1\"},"
		     "\"annotations\":{\"gpukmm.io/report\":\"{}\",\"kubectl.kubernetes.io/last-applied-configuration\":\"huge\"}},"
		     "\"spec\":{\"unschedulable\":true,\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]},"
		     "\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.8.0-45-generic\"},"
		     "\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\"},{\"type\":\"Ready\",\"status\":\"True\"}]}}");
	Gpukmm__Node *n;
	gk_err e = {0};
	cr_assert_eq(gk_kobj_node_from_json(j, &n, &e), 0, "%s", e.msg);
	cr_assert_str_eq(n->metadata->name, "n1");
	cr_assert_eq(n->metadata->n_labels, 2);
	cr_assert_str_eq(n->metadata->labels[0]->key, "a");
	cr_assert_eq(n->metadata->n_annotations, 1, "only gpukmm.io annotations kept");
	cr_assert(n->has_unschedulable && n->unschedulable);
	cr_assert_eq(n->n_taints, 1);
	cr_assert_str_eq(n->taints[0]->effect, "NoSchedule");
	cr_assert_str_eq(n->kernel_version, "6.8.0-45-generic");
	cr_assert(n->has_ready && n->ready);
	gk_kobj_free(n);
	cJSON_Delete(j);
}

Test(kobj_node, minimal_and_not_ready)
{
	cJSON *j = J("{\"metadata\":{\"name\":\"n2\"},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"Unknown\"}]}}");
	Gpukmm__Node *n;
	cr_assert_eq(gk_kobj_node_from_json(j, &n, NULL), 0);
	cr_assert(n->has_ready && !n->ready);
	cr_assert_null(n->kernel_version);
	cr_assert_not(n->has_unschedulable);
	gk_kobj_free(n);
	cJSON_Delete(j);
}

Test(kobj_node, wrong_types_name_the_field)
{
	const char *bad[][2] = {
		{"{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":{}}}", "spec"},
		{"{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[3]}}", "spec.taints[0]"},
		{"{\"metadata\":{\"name\":\"n\"},\"spec\":{\"unschedulable\":\"yes\"}}", "unschedulable"},
		{"{\"metadata\":{\"name\":\"n\"},\"status\":{\"nodeInfo\":{\"kernelVersion\":5}}}", "kernelVersion"},
		{"{\"metadata\":{\"name\":\"n\"},\"status\":{\"conditions\":[{\"type\":1}]}}", "status.conditions[0]"},
		{"{\"metadata\":[]}", "metadata"},
		{"[]", "object"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cJSON *j = J(bad[i][0]);
		Gpukmm__Node *n = (void *)1;
		gk_err e = {0};
		cr_assert_eq(gk_kobj_node_from_json(j, &n, &e), GK_INVALID_ARGUMENT, "case %zu", i);
		cr_assert_null(n);
		cr_assert(strstr(e.msg, bad[i][1]), "case %zu: \"%s\" lacks \"%s\"", i, e.msg, bad[i][1]);
		cJSON_Delete(j);
	}
}

Test(kobj_claim, allocated_drivers_deduped)
{
	cJSON *j = J("{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"},\"status\":{\"allocation\":{\"devices\":"
		     "{\"results\":[{\"driver\":\"gpu.intel.com\",\"device\":\"0\"},{\"driver\":\"gpu.intel.com\"},"
		     "{\"driver\":\"other\"}]}}}}");
	Gpukmm__ResourceClaim *c;
	gk_err e = {0};
	cr_assert_eq(gk_kobj_resource_claim_from_json(j, &c, &e), 0, "%s", e.msg);
	cr_assert(c->has_allocated && c->allocated);
	cr_assert_eq(c->n_allocated_drivers, 2);
	cr_assert_str_eq(c->allocated_drivers[0], "gpu.intel.com");
	cr_assert_str_eq(c->metadata->namespace_, "ns");
	gk_kobj_free(c);
	cJSON_Delete(j);
	j = J("{\"metadata\":{\"name\":\"c\"},\"status\":{}}");
	cr_assert_eq(gk_kobj_resource_claim_from_json(j, &c, &e), 0);
	cr_assert(c->has_allocated && !c->allocated);
	gk_kobj_free(c);
	cJSON_Delete(j);
	j = J("{\"metadata\":{\"name\":\"c\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[\"x\"]}}}}");
	cr_assert_eq(gk_kobj_resource_claim_from_json(j, &c, &e), GK_INVALID_ARGUMENT);
	cr_assert(strstr(e.msg, "results[0]"), "%s", e.msg);
	cJSON_Delete(j);
}

Test(kobj_ds, selector_and_counts)
{
	cJSON *j = J("{\"metadata\":{\"name\":\"dp\",\"namespace\":\"ops\",\"labels\":{\"gpukmm.io/gate\":\"x\"}},"
		     "\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"kmm.node.kubernetes.io/ops.x-gpu.ready\":\"\","
		     "\"kubernetes.io/arch\":\"amd64\"}}}},\"status\":{\"desiredNumberScheduled\":3,\"numberReady\":2,"
		     "\"numberAvailable\":2,\"updatedNumberScheduled\":3}}");
	Gpukmm__DaemonSet *d;
	gk_err e = {0};
	cr_assert_eq(gk_kobj_daemon_set_from_json(j, &d, &e), 0, "%s", e.msg);
	cr_assert_eq(d->n_node_selector, 2);
	cr_assert_str_eq(gk_kv_get(d->node_selector, d->n_node_selector, "kmm.node.kubernetes.io/ops.x-gpu.ready"), "");
	cr_assert_eq(d->desired_number_scheduled, 3);
	cr_assert_eq(d->number_ready, 2);
	cr_assert(d->has_updated_number_scheduled);
	gk_kobj_free(d);
	cJSON_Delete(j);
	j = J("{\"metadata\":{\"name\":\"dp\"},\"status\":{\"numberReady\":\"2\"}}");
	cr_assert_eq(gk_kobj_daemon_set_from_json(j, &d, &e), GK_INVALID_ARGUMENT);
	cr_assert(strstr(e.msg, "numberReady"), "%s", e.msg);
	cJSON_Delete(j);
	j = J("{\"metadata\":{\"name\":\"dp\"},\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"a\":1}}}}}");
	cr_assert_eq(gk_kobj_daemon_set_from_json(j, &d, &e), GK_INVALID_ARGUMENT);
	cJSON_Delete(j);
}

Test(kobj_pod, gpu_resources_from_all_containers)
{
	cJSON *j = J("{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\"},\"spec\":{\"nodeName\":\"n1\","
		     "\"initContainers\":[{\"resources\":{\"limits\":{\"gpu.intel.com/xe\":\"1\"}}}],"
		     "\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"1\",\"gpu.intel.com/i915\":\"1\"},"
		     "\"limits\":{\"gpu.intel.com/i915\":\"1\"}}},{\"name\":\"side\"}]},\"status\":{\"phase\":\"Running\"}}");
	Gpukmm__Pod *p;
	gk_err e = {0};
	cr_assert_eq(gk_kobj_pod_from_json(j, &p, &e), 0, "%s", e.msg);
	cr_assert_str_eq(p->node_name, "n1");
	cr_assert_str_eq(p->phase, "Running");
	cr_assert_eq(p->n_gpu_resources, 2);
	cr_assert_str_eq(p->gpu_resources[0], "gpu.intel.com/i915");
	cr_assert_str_eq(p->gpu_resources[1], "gpu.intel.com/xe");
	gk_kobj_free(p);
	cJSON_Delete(j);
	j = J("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":{\"limits\":[]}}]}}");
	cr_assert_eq(gk_kobj_pod_from_json(j, &p, &e), GK_INVALID_ARGUMENT);
	cr_assert(strstr(e.msg, "spec.containers[0].resources"), "%s", e.msg);
	cJSON_Delete(j);
	j = J("{\"metadata\":{\"name\":\"p\"}}");
	cr_assert_eq(gk_kobj_pod_from_json(j, &p, &e), 0);
	cr_assert_eq(p->n_gpu_resources, 0);
	gk_kobj_free(p);
	cJSON_Delete(j);
}

/* the allocatable resources the Kueue quotas count, and nothing else */
Test(kobj_node, allocatable_kueue_counts)
{
	cJSON *j = J("{\"metadata\":{\"name\":\"n\"},\"status\":{\"allocatable\":{\"cpu\":\"8\",\"memory\":\"16Gi\","
		     "\"pods\":\"110\",\"gpu.intel.com/xe\":\"2\",\"gpu.intel.com/monitoring\":\"1\",\"gpu.intel.com/i915\":\"1\"}}}");
	Gpukmm__Node *n;
	cr_assert_eq(gk_kobj_node_from_json(j, &n, NULL), 0);
	cr_assert_eq(n->n_allocatable, 4);
	cr_assert_str_eq(n->allocatable[0]->key, "cpu");
	cr_assert_str_eq(gk_kv_get(n->allocatable, n->n_allocatable, "gpu.intel.com/xe"), "2");
	cr_assert_str_eq(gk_kv_get(n->allocatable, n->n_allocatable, "memory"), "16Gi");
	cr_assert_null(gk_kv_get(n->allocatable, n->n_allocatable, "pods"));
	gk_kobj_free(n);
	cJSON_Delete(j);
}

/* v1 (attributes on the device) and v1beta1 (under basic): the devices upstream counts */
Test(kobj_slice, devices_counted_in_both_shapes)
{
	const char *v[] = {
		"{\"metadata\":{\"name\":\"s\"},\"spec\":{\"driver\":\"gpu.intel.com\",\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\","
		"\"generation\":3},\"devices\":[{\"name\":\"a\",\"attributes\":{}},{\"name\":\"b\",\"capacity\":{\"m\":{\"value\":\"1\"}}},"
		"{\"name\":\"c\"}]}}",
		"{\"metadata\":{\"name\":\"s\"},\"spec\":{\"driver\":\"gpu.intel.com\",\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\","
		"\"generation\":3},\"devices\":[{\"name\":\"a\",\"basic\":{\"attributes\":{}}},{\"name\":\"b\",\"basic\":{\"capacity\":{}}},"
		"{\"name\":\"c\",\"basic\":{}}]}}",
	};
	for (size_t i = 0; i < 2; i++) {
		cJSON *j = J(v[i]);
		Gpukmm__ResourceSlice *s;
		gk_err e = {0};
		cr_assert_eq(gk_kobj_resource_slice_from_json(j, &s, &e), 0, "%s", e.msg);
		cr_assert_str_eq(s->driver, "gpu.intel.com");
		cr_assert_str_eq(s->node_name, "n1");
		cr_assert_str_eq(s->pool, "n1");
		cr_assert_eq(s->generation, 3);
		cr_assert_eq(s->devices, 2, "shape %zu: the device without attributes or capacity does not count", i);
		gk_kobj_free(s);
		cJSON_Delete(j);
	}
	cJSON *j = J("{\"metadata\":{\"name\":\"s\"},\"spec\":{\"driver\":\"gpu.intel.com\",\"devices\":[3]}}");
	Gpukmm__ResourceSlice *s = (void *)1;
	gk_err e = {0};
	cr_assert_eq(gk_kobj_resource_slice_from_json(j, &s, &e), GK_INVALID_ARGUMENT);
	cr_assert_null(s);
	cr_assert(strstr(e.msg, "spec.devices[0]"), "%s", e.msg);
	cJSON_Delete(j);
}
