/* lib/kobj ClusterPolicy/Module conversion, and deploy/crd/intel.com_clusterpolicies.yaml
 * agreeing with what gpukmm reads and writes (examples, every field, status). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "gpukmm/yamljson.h"
#include "schema_check.h"

#define FULL \
	"{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"gpu\",\"uid\":\"u\",\"generation\":4}," \
	"\"spec\":{\"resourceRegistration\":\"dp\",\"resourceMonitoring\":true,\"useNFDLabeling\":true,\"prometheusIntegration\":false," \
	"\"enableKueue\":true,\"kueue\":{\"equalResources\":[{\"name\":\"q\",\"localQueues\":[{\"name\":\"l\",\"namespace\":\"n\"}]}]}," \
	"\"health\":{\"checkIntervalSeconds\":5,\"coreTemperatureThreshold\":100,\"memoryTemperatureThreshold\":90}," \
	"\"dra\":{\"image\":\"r.io/d:1\",\"logLevel\":2,\"podHealthCheck\":true,\"manageBinding\":false}," \
	"\"dp\":{\"plugin\":\"r.io/p:1\",\"levelzero\":\"r.io/l:1\",\"allowIDs\":[\"0x56a0\"],\"denyIDs\":[],\"byPathMode\":\"all\",\"logLevel\":1}," \
	"\"xpu\":{\"image\":\"r.io/x:1\",\"logLevel\":1,\"configMapOverride\":\"cm\",\"monitoringResource\":\"xe_monitoring\"}," \
	"\"pullSecret\":{\"name\":\"regcred\"},\"nodeSelector\":{\"pool\":\"gpu\"},\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\"," \
	"\"effect\":\"NoExecute\",\"tolerationSeconds\":3}],\"logLevel\":2," \
	"\"kernelModule\":{\"moduleName\":\"xe\",\"version\":\"1.0\",\"firmwarePath\":\"/fw\",\"modulesLoadingOrder\":[\"xe\",\"drm_buddy\"]," \
	"\"parameters\":[\"force_probe=e20b\",\"max_vfs=7\"],\"sign\":{\"keySecret\":{\"name\":\"k\"},\"certSecret\":{\"name\":\"c\"}," \
	"\"filesToSign\":[\"/opt/x.ko\"],\"unsignedImage\":\"r.io/xe-u:1\",\"unsignedImageRegistryTLS\":{\"insecure\":true}}," \
	"\"registryTLS\":{\"insecure\":true,\"insecureSkipTLSVerify\":false},\"kernelMappings\":[{\"regexp\":\"^6$\"," \
	"\"containerImage\":\"r.io/xe:1\",\"inTreeModulesToRemove\":[\"i915\"],\"registryTLS\":{\"insecure\":true}," \
	"\"build\":{\"dockerfileConfigMap\":{\"name\":\"df\"},\"buildArgs\":[{\"name\":\"A\",\"value\":\"B\"}],\"secrets\":[{\"name\":\"s\"}]}," \
	"\"sign\":{\"keySecret\":{\"name\":\"k2\"},\"certSecret\":{\"name\":\"c2\"}}}]}}," \
	"\"status\":{\"kmmStatus\":\"1/2\",\"devicePluginStatus\":\"1/1\",\"draStatus\":\"N/A\",\"xpuManagerStatus\":\"0/1\",\"errors\":[\"e1\"]," \
	"\"observedGeneration\":3,\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"ModuleNotLoaded\",\"message\":\"m\"," \
	"\"lastTransitionTime\":\"2026-01-01T00:00:00Z\",\"observedGeneration\":3}],\"nodes\":{\"gpuNodes\":2,\"ootLoaded\":1,\"inTreeLoaded\":0," \
	"\"notLoaded\":1,\"unknown\":0,\"problems\":[{\"node\":\"n1\",\"reason\":\"VFsActive\",\"message\":\"m\"}]}}}"

Test(kobj_cp, every_field)
{
	cJSON *j = cJSON_Parse(FULL);
	Gpukmm__ClusterPolicy *cp;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, &e), 0, "%s", e.msg);
	Gpukmm__ClusterPolicySpec *s = cp->spec;
	cr_assert_str_eq(s->resource_registration, "dp");
	cr_assert(s->has_resource_monitoring && s->resource_monitoring);
	cr_assert(s->has_prometheus_integration && !s->prometheus_integration);
	cr_assert_str_eq(s->kueue->equal_resources[0]->local_queues[0]->namespace_, "n");
	cr_assert_eq(s->health->memory_temperature_threshold, 90);
	cr_assert(s->dra->has_manage_binding && !s->dra->manage_binding);
	cr_assert_str_eq(s->dp->allow_ids[0], "0x56a0");
	cr_assert_eq(s->dp->n_deny_ids, 0);
	cr_assert_str_eq(s->xpu->monitoring_resource, "xe_monitoring");
	cr_assert_str_eq(s->pull_secret, "regcred");
	cr_assert_eq(s->tolerations[0]->toleration_seconds, 3);
	Gpukmm__KernelModuleSpec *k = s->kernel_module;
	cr_assert_str_eq(k->version, "1.0");
	cr_assert(k->registry_tls->has_insecure_skip_tls_verify && !k->registry_tls->insecure_skip_tls_verify);
	cr_assert_str_eq(k->kernel_mappings[0]->build->secrets[0], "s");
	cr_assert_str_eq(k->kernel_mappings[0]->build->build_args[0]->value, "B");
	cr_assert_eq(k->n_parameters, 2);
	cr_assert_str_eq(k->parameters[1], "max_vfs=7");
	cr_assert_str_eq(k->sign->key_secret, "k");
	cr_assert_str_eq(k->sign->cert_secret, "c");
	cr_assert_str_eq(k->sign->files_to_sign[0], "/opt/x.ko");
	cr_assert_str_eq(k->sign->unsigned_image, "r.io/xe-u:1");
	cr_assert(k->sign->unsigned_image_registry_tls->insecure);
	cr_assert_str_eq(k->kernel_mappings[0]->sign->key_secret, "k2");
	cr_assert_str_eq(k->kernel_mappings[0]->sign->cert_secret, "c2");
	cr_assert_eq(k->kernel_mappings[0]->sign->n_files_to_sign, 0);
	cr_assert_eq(cp->status->nodes->not_loaded, 1);
	cr_assert_str_eq(cp->status->conditions[0]->reason, "ModuleNotLoaded");
	/* status back to JSON is what came in */
	cJSON *st = gk_kobj_cluster_policy_status_to_json(cp->status);
	cr_assert(cJSON_Compare(st, cJSON_GetObjectItem(j, "status"), 1), "%s", cJSON_PrintUnformatted(st));
	cJSON_Delete(st);
	gk_kobj_free(cp);
	cJSON_Delete(j);
}

Test(kobj_cp, status_errors_always_written)
{
	Gpukmm__ClusterPolicyStatus st = GPUKMM__CLUSTER_POLICY_STATUS__INIT;
	st.kmm_status = "N/A";
	cJSON *j = gk_kobj_cluster_policy_status_to_json(&st);
	char *s = cJSON_PrintUnformatted(j);
	cr_assert_str_eq(s, "{\"kmmStatus\":\"N/A\",\"errors\":[]}");
	cJSON_free(s);
	cJSON_Delete(j);
}

static void count_msg(void *arg, const char *msg)
{
	(*(int *)arg)++;
}

Test(kobj_cp, strict_stops_collecting_goes_on)
{
	const char *src = "{\"spec\":{\"resourceRegistration\":1,\"useNFDLabeling\":\"x\",\"kernelModule\":{\"kernelMappings\":[{\"regexp\":2}]},"
			  "\"health\":{\"checkIntervalSeconds\":4294967296}},\"status\":{\"nodes\":{\"gpuNodes\":-1}}}";
	cJSON *j = cJSON_Parse(src);
	Gpukmm__ClusterPolicy *cp = (void *)1;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, &e), GK_INVALID_ARGUMENT);
	cr_assert_null(cp);
	cr_assert_str_eq(e.msg, "spec.resourceRegistration: expected string, got number");
	int n = 0;
	cr_assert_eq(gk_kobj_cluster_policy_parse(j, false, count_msg, &n, &cp), 5);
	cr_assert_eq(n, 5);
	cr_assert_not_null(cp);
	cr_assert_null(cp->spec->resource_registration);
	gk_kobj_free(cp);
	cJSON_Delete(j);
	/* unknown fields are not an error for the services (forward compatible) */
	j = cJSON_Parse("{\"spec\":{\"resourceRegistration\":\"dp\",\"newField\":1}}");
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, &e), 0);
	gk_kobj_free(cp);
	cJSON_Delete(j);
}

Test(kobj_module, round_trip_and_types)
{
	const char *src = "{\"apiVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"kind\":\"Module\",\"metadata\":{\"name\":\"m\",\"namespace\":\"n\"},"
			  "\"spec\":{\"selector\":{\"a\":\"b\"},\"devicePlugin\":{\"container\":{\"image\":\"x\"}},\"imageRepoSecret\":{},"
			  "\"moduleLoader\":{\"serviceAccountName\":\"sa\",\"container\":{\"modprobe\":{\"moduleName\":\"xe\",\"dirName\":\"/opt\","
			  "\"parameters\":[\"a=1\"]},\"containerImage\":\"r.io/x:1\",\"sign\":{\"keySecret\":{\"name\":\"k\"},"
			  "\"certSecret\":{\"name\":\"c\"},\"filesToSign\":[\"/opt/a.ko\"]},\"kernelMappings\":[{\"literal\":\"6.8\",\"containerImage\":\"\","
			  "\"inTreeModulesToRemove\":[],\"sign\":{\"keySecret\":{\"name\":\"k2\"},\"certSecret\":{\"name\":\"c2\"},"
			  "\"unsignedImage\":\"r.io/u:1\",\"unsignedImageRegistryTLS\":{\"insecureSkipTLSVerify\":true},"
			  "\"filesToSign\":[\"/opt/b.ko\",\"/opt/c.ko\"]}}]}}},\"status\":{\"moduleLoader\":{\"nodesMatchingSelectorNumber\":3,\"desiredNumber\":2}}}";
	cJSON *j = cJSON_Parse(src);
	Gpukmm__Module *m;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_module_from_json(j, &m, &e), 0, "%s", e.msg);
	cr_assert_str_eq(m->spec->image_repo_secret, "");
	Gpukmm__ModuleKernelMapping *km = m->spec->module_loader->container->kernel_mappings[0];
	cr_assert(km->has_in_tree_modules_to_remove && km->n_in_tree_modules_to_remove == 0, "[] is kept apart from absent");
	cr_assert_eq(m->module_loader_status->nodes_matching_selector_number, 3);
	cr_assert(!m->module_loader_status->has_available_number);
	cJSON *back = gk_kobj_module_spec_to_json(m->spec);
	char *s = cJSON_PrintUnformatted(back);
	cr_assert_str_eq(s, "{\"selector\":{\"a\":\"b\"},\"imageRepoSecret\":{\"name\":\"\"},\"moduleLoader\":{\"serviceAccountName\":\"sa\","
			    "\"container\":{\"modprobe\":{\"moduleName\":\"xe\",\"dirName\":\"/opt\",\"parameters\":[\"a=1\"]},"
			    "\"containerImage\":\"r.io/x:1\",\"sign\":{\"keySecret\":{\"name\":\"k\"},\"certSecret\":{\"name\":\"c\"},"
			    "\"filesToSign\":[\"/opt/a.ko\"]},\"kernelMappings\":[{\"literal\":\"6.8\",\"containerImage\":\"\","
			    "\"inTreeModulesToRemove\":[],\"sign\":{\"keySecret\":{\"name\":\"k2\"},\"certSecret\":{\"name\":\"c2\"},"
			    "\"unsignedImage\":\"r.io/u:1\",\"unsignedImageRegistryTLS\":{\"insecureSkipTLSVerify\":true},"
			    "\"filesToSign\":[\"/opt/b.ko\",\"/opt/c.ko\"]}}]}}}");
	cJSON_free(s);
	cJSON_Delete(back);
	gk_kobj_free(m);
	cJSON_Delete(j);
	const char *bad[][2] = {
		{ "{\"spec\":{\"selector\":[]}}", "spec.selector: expected object, got array" },
		{ "{\"spec\":{\"moduleLoader\":{\"container\":{\"kernelMappings\":[1]}}}}",
		  "spec.moduleLoader.container.kernelMappings[0]: expected object, got number" },
		{ "{\"status\":{\"moduleLoader\":{\"availableNumber\":\"2\"}}}",
		  "status.moduleLoader.availableNumber: expected integer, got string" },
		{ "{\"spec\":{\"moduleLoader\":{\"container\":{\"kernelMappings\":[{\"build\":{\"selector\":{\"a\":1}}}]}}}}",
		  "spec.moduleLoader.container.kernelMappings[0].build.selector.a: expected string, got number" },
		{ "{\"spec\":{\"moduleLoader\":{\"container\":{\"sign\":{\"keySecret\":\"k\"}}}}}",
		  "spec.moduleLoader.container.sign.keySecret: expected object, got string" },
		{ "{\"spec\":{\"moduleLoader\":{\"container\":{\"kernelMappings\":[{\"sign\":{\"filesToSign\":[1]}}]}}}}",
		  "spec.moduleLoader.container.kernelMappings[0].sign.filesToSign[0]: expected string, got number" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = cJSON_Parse(bad[i][0]);
		m = (void *)1;
		cr_assert_eq(gk_kobj_module_from_json(j, &m, &e), GK_INVALID_ARGUMENT, "%s", bad[i][0]);
		cr_assert_null(m);
		cr_assert_str_eq(e.msg, bad[i][1]);
		cJSON_Delete(j);
	}
}

/* ---- our CRD vs what we read and write ---- */
static cJSON *load_file_doc(const char *rel)
{
	char path[4096];
	const char *src = getenv("GPUKMM_SRC");
	snprintf(path, sizeof(path), "%s/%s", src ? src : ".", rel);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	gk_yamljson_docs d;
	cr_assert_eq(gk_yamljson_parse(buf, n, &d, NULL), 0, "%s", path);
	cJSON *doc = d.doc[0];
	d.doc[0] = NULL;
	gk_yamljson_free(&d);
	return doc;
}

Test(crd, clusterpolicy_crd_accepts_examples_and_every_field)
{
	cJSON *crd;
	cJSON *schema = crd_schema("deploy/crd/intel.com_clusterpolicies.yaml", &crd);
	cr_assert_not_null(schema);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(crd, "spec"), "scope")->valuestring, "Cluster");
	const char *files[] = { "deploy/examples/clusterpolicy-kmm.yaml", "deploy/examples/clusterpolicy-kmm-build.yaml",
				"deploy/examples/clusterpolicy-intree.yaml", "deploy/examples/clusterpolicy-ordered-upgrade.json",
				"deploy/examples/clusterpolicy-kmm-secureboot.yaml" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		cJSON *doc = load_file_doc(files[i]);
		char errs[4096] = "";
		schema_check(doc, schema, "", errs, sizeof(errs));
		cr_expect_str_empty(errs, "%s:\n%s", files[i], errs);
		cJSON_Delete(doc);
	}
	cJSON *full = cJSON_Parse(FULL);
	char errs[4096] = "";
	schema_check(full, schema, "", errs, sizeof(errs));
	cr_expect_str_empty(errs, "%s", errs);
	cJSON_Delete(full);
	/* the checker and the CRD catch what they should */
	cJSON *bad = cJSON_Parse("{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{},\"spec\":{"
				 "\"resourceRegistration\":\"x\",\"health\":{\"checkIntervalSeconds\":0},\"kernelModule\":{"
				 "\"kernelMappings\":[{}]}},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"Maybe\"}]}}");
	errs[0] = 0;
	schema_check(bad, schema, "", errs, sizeof(errs));
	cr_expect(strstr(errs, ".spec.resourceRegistration: Unsupported value \"x\""), "%s", errs);
	cr_expect(strstr(errs, ".spec.health.checkIntervalSeconds: out of range"), "%s", errs);
	cr_expect(strstr(errs, ".spec.kernelModule.kernelMappings[0].regexp: Required value"), "%s", errs);
	cr_expect(strstr(errs, ".status.conditions[0].status: Unsupported value \"Maybe\""), "%s", errs);
	cr_expect(strstr(errs, ".status.conditions[0].reason: Required value"), "%s", errs);
	cJSON_Delete(bad);
	/* sign needs both Secrets, named (KMM's CRD requires both references) */
	bad = cJSON_Parse("{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{},\"spec\":{"
			  "\"resourceRegistration\":\"dp\",\"kernelModule\":{\"sign\":{\"keySecret\":{}},"
			  "\"kernelMappings\":[{\"regexp\":\"x\",\"sign\":{\"certSecret\":{\"name\":\"c\"}}}]}}}");
	errs[0] = 0;
	schema_check(bad, schema, "", errs, sizeof(errs));
	cr_expect(strstr(errs, ".spec.kernelModule.sign.certSecret: Required value"), "%s", errs);
	cr_expect(strstr(errs, ".spec.kernelModule.sign.keySecret.name: Required value"), "%s", errs);
	cr_expect(strstr(errs, ".spec.kernelModule.kernelMappings[0].sign.keySecret: Required value"), "%s", errs);
	cJSON_Delete(bad);
	/* printer columns and the status subresource */
	cJSON *v0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(crd, "spec"), "versions"), 0);
	cr_assert_not_null(cJSON_GetObjectItem(cJSON_GetObjectItem(v0, "subresources"), "status"));
	const char *cols[] = { "DP", "DRA", "XPU", "KMM", "Ready", "Reason", "GPU-Nodes", "OoT", "Problem-Nodes", "Age" };
	int ncols = (int)(sizeof(cols) / sizeof(cols[0]));
	cJSON *pc = cJSON_GetObjectItem(v0, "additionalPrinterColumns");
	cr_assert_eq(cJSON_GetArraySize(pc), ncols);
	for (int i = 0; i < ncols; i++)
		cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(pc, i), "name")->valuestring, cols[i]);
	cJSON_Delete(crd);
}
