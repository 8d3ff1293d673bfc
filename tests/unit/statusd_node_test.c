/* gpukmm-statusd node mode: NodeReport → labels/annotation patch (pure). */
#include <criterion/criterion.h>
#include <string.h>

#include "../../services/statusd/node.h"

static Gpukmm__PciGpu pf(uint32_t vfs)
{
	Gpukmm__PciGpu g = GPUKMM__PCI_GPU__INIT;
	g.address = "0000:03:00.0";
	g.has_sriov_numvfs = 1;
	g.sriov_numvfs = vfs;
	return g;
}

static const char *lab(const cJSON *p, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "labels"), k);
	return cJSON_IsString(v) ? v->valuestring : cJSON_IsNull(v) ? "<null>" : NULL;
}

Test(statusd_node, labels_and_annotation_appear_then_nothing_to_write)
{
	Gpukmm__PciGpu g1 = pf(0), g2 = pf(0);
	Gpukmm__PciGpu *gs[] = { &g1, &g2 };
	Gpukmm__KernelModuleInfo m = GPUKMM__KERNEL_MODULE_INFO__INIT;
	m.name = "xe";
	m.has_source = 1;
	m.source = GPUKMM__MODULE_SOURCE__SOURCE_OOT;
	Gpukmm__NodeReport r = GPUKMM__NODE_REPORT__INIT;
	r.gpus = gs;
	r.n_gpus = 2;
	r.module = &m;
	cJSON *node = cJSON_Parse("{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"5\","
				  "\"labels\":{\"kubernetes.io/arch\":\"amd64\",\"gpukmm.io/i915.source\":\"in-tree\"},"
				  "\"annotations\":{\"x\":\"y\"}}}");
	bool oom;
	cJSON *p = gk_sd_node_patch(node, &r, NULL, "{\"a\":1}", &oom);
	cr_assert_not_null(p);
	cr_assert_str_eq(lab(p, "gpukmm.io/gpu.present"), "true");
	cr_assert_str_eq(lab(p, "gpukmm.io/gpu.count"), "2");
	cr_assert_str_eq(lab(p, "gpukmm.io/xe.source"), "oot");
	cr_assert_str_eq(lab(p, "gpukmm.io/sriov.vfs-active"), "false");
	cr_assert_str_eq(lab(p, "gpukmm.io/i915.source"), "<null>", "a module no longer reported is removed");
	cr_assert_null(lab(p, "kubernetes.io/arch"), "foreign labels untouched");
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "resourceVersion")->valuestring, "5");
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "annotations"),
					     "gpukmm.io/node-report")
				 ->valuestring,
			 "{\"a\":1}");
	/* apply the patch by hand: then nothing is left to write */
	cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "metadata"), "labels");
	cJSON_DeleteItemFromObject(labels, "gpukmm.io/i915.source");
	const char *keys[] = { "gpukmm.io/gpu.present", "gpukmm.io/gpu.count", "gpukmm.io/xe.source",
			       "gpukmm.io/sriov.vfs-active" };
	for (int i = 0; i < 4; i++)
		cJSON_AddStringToObject(labels, keys[i], lab(p, keys[i]));
	cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "metadata"), "annotations"),
				"gpukmm.io/node-report", "{\"a\":1}");
	cJSON_Delete(p);
	cr_assert_null(gk_sd_node_patch(node, &r, NULL, "{\"a\":1}", &oom));
	cr_assert_not(oom);
	/* VFs appear: only that label changes */
	g1.sriov_numvfs = 4;
	p = gk_sd_node_patch(node, &r, NULL, "{\"a\":1}", &oom);
	cr_assert_str_eq(lab(p, "gpukmm.io/sriov.vfs-active"), "true");
	cr_assert_null(lab(p, "gpukmm.io/gpu.count"));
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "annotations"));
	cJSON_Delete(p);
	cJSON_Delete(node);
}

Test(statusd_node, no_gpu_unknown_source_and_unsafe_module_name)
{
	Gpukmm__KernelModuleInfo m = GPUKMM__KERNEL_MODULE_INFO__INIT;
	m.name = "bad/name";
	m.has_source = 1;
	m.source = GPUKMM__MODULE_SOURCE__SOURCE_IN_TREE;
	Gpukmm__NodeReport r = GPUKMM__NODE_REPORT__INIT;
	r.module = &m;
	cJSON *l = gk_sd_node_labels(&r, NULL);
	cr_assert_str_eq(cJSON_GetObjectItem(l, "gpukmm.io/gpu.present")->valuestring, "false");
	cr_assert_str_eq(cJSON_GetObjectItem(l, "gpukmm.io/gpu.count")->valuestring, "0");
	cr_assert_eq(cJSON_GetArraySize(l), 3, "no .source label for an unsafe module name");
	cJSON_Delete(l);
	m.name = "xe";
	m.source = GPUKMM__MODULE_SOURCE__SOURCE_UNKNOWN;
	l = gk_sd_node_labels(&r, NULL);
	cr_assert_eq(cJSON_GetArraySize(l), 3, "no .source label when unknown");
	cJSON_Delete(l);
	cJSON *garbage = cJSON_Parse("\"x\"");
	bool oom;
	cJSON *p = gk_sd_node_patch(garbage, &r, NULL, NULL, &oom);
	cr_assert_not_null(p);
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "resourceVersion"));
	cJSON_Delete(p);
	cJSON_Delete(garbage);
}

Test(statusd_node, a_report_differing_only_in_probed_at_and_generation_writes_nothing)
{
	Gpukmm__NodeReport r = GPUKMM__NODE_REPORT__INIT;
	const char *cur = "{\"apiVersion\":\"gpukmm.io/v1alpha1\",\"kind\":\"NodeReport\",\"nodeName\":\"n1\","
			  "\"probedAt\":\"2025-01-02T03:04:05.000Z\",\"generation\":3,\"kernelVersion\":\"6.8\"}";
	const char *same = "{\"apiVersion\":\"gpukmm.io/v1alpha1\",\"kind\":\"NodeReport\",\"nodeName\":\"n1\","
			   "\"probedAt\":\"2025-06-01T00:00:00.000Z\",\"generation\":1,\"kernelVersion\":\"6.8\"}";
	const char *other = "{\"apiVersion\":\"gpukmm.io/v1alpha1\",\"kind\":\"NodeReport\",\"nodeName\":\"n1\","
			    "\"probedAt\":\"2025-06-01T00:00:00.000Z\",\"generation\":1,\"kernelVersion\":\"6.9\"}";
	cJSON *node = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(node, "metadata");
	cJSON *labels = gk_sd_node_labels(&r, NULL);
	cJSON_AddItemToObject(m, "labels", labels);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "annotations"), "gpukmm.io/node-report", cur);
	bool oom;
	cr_expect_null(gk_sd_node_patch(node, &r, NULL, same, &oom), "a prober restart re-probes: no write");
	cJSON *p = gk_sd_node_patch(node, &r, NULL, other, &oom);
	cr_expect_not_null(p, "the kernel changed: written");
	cJSON_Delete(p);
	cJSON_Delete(node);
}
