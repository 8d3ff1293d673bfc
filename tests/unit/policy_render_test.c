/* lib/policy rendering: every pure Module-mapping scenario of upstream §8.1,
 * the §2.7 example exactly, gating keys and DaemonSets (§3), the existing-vs-
 * desired diff (§2.5), and every rendered Module checked against the real KMM
 * CRD schema (tests/fixtures/kmm-crd) and KMM's admission rules. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "gpukmm/yamljson.h"
#include "schema_check.h"
#include "../../tools/fake-kmm/fakekmm.h"

static Gpukmm__ClusterPolicy *load_cp(const char *name, const char *spec)
{
	char *src = NULL;
	cr_assert(asprintf(&src, "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\","
				 "\"metadata\":{\"name\":\"%s\",\"uid\":\"uid-%s\"},\"spec\":%s}", name, name, spec) > 0);
	cJSON *j = cJSON_Parse(src);
	cr_assert_not_null(j, "bad JSON %s", src);
	Gpukmm__ClusterPolicy *cp = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, &e), 0, "%s", e.msg);
	cr_assert(gk_policy_default(cp) >= 0);
	cJSON_Delete(j);
	free(src);
	return cp;
}

static Gpukmm__Module *render(const char *name, const char *spec, const char *ns)
{
	Gpukmm__ClusterPolicy *cp = load_cp(name, spec);
	gk_policy_opts o = { .namespace_ = ns };
	Gpukmm__Module *m = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_policy_render_module(cp, &o, &m, &e), 0, "%s", e.msg);
	gk_kobj_free(cp);
	return m;
}

static char *render_json(const char *name, const char *spec)
{
	Gpukmm__Module *m = render(name, spec, NULL);
	cJSON *j = gk_policy_module_to_json(m);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	gk_kobj_free(m);
	return s;
}

#define XE1 "{\"regexp\":\"^.+$\",\"containerImage\":\"registry.example.com/xe-driver:1.0\"}"
#define KM1 "\"kernelModule\":{\"kernelMappings\":[" XE1 "]}"

Test(render, creates_module_with_module_loader)
{
	Gpukmm__Module *m = render("gpu-dra", "{\"resourceRegistration\":\"dra\"," KM1 "}", "ns1");
	cr_assert_str_eq(m->metadata->name, "gpu-dra-gpu");
	cr_assert_str_eq(m->metadata->namespace_, "ns1");
	Gpukmm__ModuleLoaderContainer *c = m->spec->module_loader->container;
	cr_assert_str_eq(c->modprobe->module_name, "xe");
	cr_assert_null(c->container_image);
	cr_assert_eq(c->n_in_tree_modules_to_remove, 1);
	cr_assert_str_eq(c->in_tree_modules_to_remove[0], "xe");
	cr_assert_eq(c->n_kernel_mappings, 1);
	cr_assert_str_eq(c->kernel_mappings[0]->regexp, "^.+$");
	cr_assert_str_eq(c->kernel_mappings[0]->container_image, "registry.example.com/xe-driver:1.0");
	cr_assert_str_eq(c->image_pull_policy, "IfNotPresent");
	cr_assert_str_eq(m->spec->module_loader->service_account_name, "module-loader");
	cr_assert_eq(m->metadata->n_owner_references, 1);
	Gpukmm__OwnerReference *r = m->metadata->owner_references[0];
	cr_assert_str_eq(r->name, "gpu-dra");
	cr_assert_str_eq(r->uid, "uid-gpu-dra");
	cr_assert_str_eq(r->kind, "ClusterPolicy");
	cr_assert_str_eq(r->api_version, "intel.com/v1alpha1");
	cr_assert(r->controller && r->block_owner_deletion);
	cJSON *j = gk_policy_module_to_json(m);
	cJSON *spec = cJSON_GetObjectItem(j, "spec");
	cr_assert_null(cJSON_GetObjectItem(spec, "devicePlugin"));
	cr_assert_null(cJSON_GetObjectItem(spec, "dra"));
	cJSON_Delete(j);
	gk_kobj_free(m);
}

Test(render, no_kernel_module_no_module)
{
	Gpukmm__ClusterPolicy *cp = load_cp("gpu", "{\"resourceRegistration\":\"dp\"}");
	Gpukmm__Module *m = (void *)1;
	gk_err e;
	cr_assert_eq(gk_policy_render_module(cp, NULL, &m, &e), GK_FAILED_PRECONDITION);
	cr_assert_null(m);
	gk_kobj_free(cp);
}

Test(render, tolerations_and_pull_secret)
{
	Gpukmm__Module *m = render("gpu", "{\"resourceRegistration\":\"dp\",\"tolerations\":[{\"key\":\"gpu-dedicated\","
				   "\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],\"pullSecret\":{\"name\":"
				   "\"my-registry-secret\"}," KM1 "}", NULL);
	cr_assert_eq(m->spec->n_tolerations, 2);
	cr_assert_str_eq(m->spec->tolerations[0]->key, "gpu-dedicated");
	/* drain-safe: a cordon never unloads the driver */
	cr_assert_str_eq(m->spec->tolerations[1]->key, "node.kubernetes.io/unschedulable");
	cr_assert_str_eq(m->spec->tolerations[1]->operator_, "Exists");
	cr_assert_str_eq(m->spec->tolerations[1]->effect, "NoSchedule");
	cr_assert_str_eq(m->spec->image_repo_secret, "my-registry-secret");
	cr_assert_str_eq(m->metadata->namespace_, "intel-gpu-base-operator");
	gk_kobj_free(m);
}

Test(render, the_cordon_is_tolerated_once)
{
	static const char *const already[] = {
		"[{\"operator\":\"Exists\"}]",
		"[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\"}]",
		"[{\"key\":\"node.kubernetes.io/unschedulable\",\"effect\":\"NoSchedule\"}]",
		"[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]",
	};
	for (size_t i = 0; i < sizeof(already) / sizeof(already[0]); i++) {
		char spec[512];
		snprintf(spec, sizeof(spec), "{\"resourceRegistration\":\"dp\",\"tolerations\":%s," KM1 "}", already[i]);
		Gpukmm__Module *m = render("gpu", spec, NULL);
		cr_assert_eq(m->spec->n_tolerations, 1, "%s", already[i]);
		gk_kobj_free(m);
	}
	static const char *const not_yet[] = {
		"[{\"key\":\"node.kubernetes.io/unschedulable\",\"effect\":\"NoExecute\",\"operator\":\"Exists\"}]",
		"[{\"key\":\"node.kubernetes.io/unschedulable\",\"value\":\"x\"}]",
		"[{\"key\":\"other\",\"operator\":\"Exists\"}]",
	};
	for (size_t i = 0; i < sizeof(not_yet) / sizeof(not_yet[0]); i++) {
		char spec[512];
		snprintf(spec, sizeof(spec), "{\"resourceRegistration\":\"dp\",\"tolerations\":%s," KM1 "}", not_yet[i]);
		Gpukmm__Module *m = render("gpu", spec, NULL);
		cr_assert_eq(m->spec->n_tolerations, 2, "%s", not_yet[i]);
		gk_kobj_free(m);
	}
}

Test(render, expanded_fields)
{
	/* multiple mappings kept in order, container image empty */
	Gpukmm__Module *m = render("gpu", "{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"version\":\"2.0\","
				   "\"firmwarePath\":\"/opt/lib/firmware/xe\",\"modulesLoadingOrder\":[\"xe\",\"drm_buddy\",\"drm_ttm_helper\"],"
				   "\"registryTLS\":{\"insecure\":true,\"insecureSkipTLSVerify\":true},\"kernelMappings\":["
				   "{\"regexp\":\"^5\\\\.14\\\\.0-.*\\\\.el9\",\"containerImage\":\"r.io/xe-rhel9:1.0\"},"
				   "{\"regexp\":\"^6\\\\.12\\\\..*\",\"containerImage\":\"r.io/xe-rhel10:1.0\",\"registryTLS\":{\"insecureSkipTLSVerify\":true},"
				   "\"inTreeModulesToRemove\":[\"i915\"]},"
				   "{\"regexp\":\"^7\",\"containerImage\":\"r.io/xe:7\",\"inTreeModulesToRemove\":[\"old_xe\"],"
				   "\"build\":{\"dockerfileConfigMap\":{\"name\":\"xe-dockerfile\"},\"buildArgs\":[{\"name\":\"XE_TAG\",\"value\":\"v1.0\"}],"
				   "\"secrets\":[{\"name\":\"private-repo\"}]}},"
				   "{\"regexp\":\"^8\",\"containerImage\":\"r.io/xe:8\",\"inTreeModulesToRemove\":[\"xe\",\"i915\",\"i915\"]}]}}", NULL);
	Gpukmm__ModuleLoaderContainer *c = m->spec->module_loader->container;
	cr_assert_null(c->container_image);
	cr_assert_eq(c->n_kernel_mappings, 4);
	cr_assert_str_eq(c->kernel_mappings[0]->container_image, "r.io/xe-rhel9:1.0");
	cr_assert_str_eq(c->kernel_mappings[1]->container_image, "r.io/xe-rhel10:1.0");
	cr_assert_str_eq(c->version, "2.0");
	cr_assert_str_eq(c->modprobe->firmware_path, "/opt/lib/firmware/xe");
	cr_assert_eq(c->modprobe->n_modules_loading_order, 3);
	cr_assert_str_eq(c->modprobe->modules_loading_order[2], "drm_ttm_helper");
	cr_assert(c->registry_tls->insecure && c->registry_tls->insecure_skip_tls_verify);
	/* per-mapping TLS */
	cr_assert_null(c->kernel_mappings[0]->registry_tls);
	cr_assert(c->kernel_mappings[1]->registry_tls->insecure_skip_tls_verify);
	cr_assert(!c->kernel_mappings[1]->registry_tls->has_insecure);
	/* in-tree: container [xe]; mapping list empty -> unset; list + [xe], deduped
	 * (upstream prepends xe; we append it: see render.c) */
	cr_assert_eq(c->n_in_tree_modules_to_remove, 1);
	cr_assert_str_eq(c->in_tree_modules_to_remove[0], "xe");
	cr_assert(!c->kernel_mappings[0]->has_in_tree_modules_to_remove);
	cr_assert_eq(c->kernel_mappings[0]->n_in_tree_modules_to_remove, 0);
	cr_assert_eq(c->kernel_mappings[1]->n_in_tree_modules_to_remove, 2);
	cr_assert_str_eq(c->kernel_mappings[1]->in_tree_modules_to_remove[0], "i915");
	cr_assert_str_eq(c->kernel_mappings[1]->in_tree_modules_to_remove[1], "xe");
	cr_assert_str_eq(c->kernel_mappings[2]->in_tree_modules_to_remove[0], "old_xe");
	cr_assert_str_eq(c->kernel_mappings[2]->in_tree_modules_to_remove[1], "xe");
	/* the admin listed xe first: their order is kept */
	cr_assert_eq(c->kernel_mappings[3]->n_in_tree_modules_to_remove, 2);
	cr_assert_str_eq(c->kernel_mappings[3]->in_tree_modules_to_remove[0], "xe");
	cr_assert_str_eq(c->kernel_mappings[3]->in_tree_modules_to_remove[1], "i915");
	/* build copied, build.selector == spec.selector */
	Gpukmm__ModuleBuild *b = c->kernel_mappings[2]->build;
	cr_assert_str_eq(b->dockerfile_config_map, "xe-dockerfile");
	cr_assert_eq(b->n_build_args, 1);
	cr_assert_str_eq(b->build_args[0]->name, "XE_TAG");
	cr_assert_str_eq(b->build_args[0]->value, "v1.0");
	cr_assert_eq(b->n_secrets, 1);
	cr_assert_str_eq(b->secrets[0], "private-repo");
	cr_assert_eq(b->n_selector, m->spec->n_selector);
	for (size_t i = 0; i < b->n_selector; i++) {
		cr_assert_str_eq(b->selector[i]->key, m->spec->selector[i]->key);
		cr_assert_str_eq(b->selector[i]->value, m->spec->selector[i]->value);
	}
	gk_kobj_free(m);
}

Test(render, illustrative_example_exact)
{
	char *s = render_json("gpu-dra", "{\"resourceRegistration\":\"dra\",\"useNFDLabeling\":true,\"pullSecret\":{\"name\":\"regcred\"},"
				       "\"kernelModule\":{\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":"
				       "\"registry.example.com/xe-driver:1.0\",\"inTreeModulesToRemove\":[\"i915\"]}]}}");
	cr_assert_str_eq(s,
		"{\"apiVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"kind\":\"Module\",\"metadata\":{\"name\":\"gpu-dra-gpu\","
		"\"namespace\":\"intel-gpu-base-operator\",\"ownerReferences\":[{\"apiVersion\":\"intel.com/v1alpha1\","
		"\"kind\":\"ClusterPolicy\",\"name\":\"gpu-dra\",\"uid\":\"uid-gpu-dra\",\"controller\":true,"
		"\"blockOwnerDeletion\":true}]},\"spec\":{\"selector\":{\"intel.feature.node.kubernetes.io/gpu\":\"true\","
		"\"kubernetes.io/arch\":\"amd64\"},\"tolerations\":[{\"key\":\"node.kubernetes.io/unschedulable\","
		"\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],\"imageRepoSecret\":{\"name\":\"regcred\"},\"moduleLoader\":{"
		"\"serviceAccountName\":\"module-loader\",\"container\":{\"modprobe\":{\"moduleName\":\"xe\"},"
		"\"imagePullPolicy\":\"IfNotPresent\",\"inTreeModulesToRemove\":[\"xe\"],\"registryTLS\":{},"
		"\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":\"registry.example.com/xe-driver:1.0\","
		"\"inTreeModulesToRemove\":[\"i915\",\"xe\"]}]}}}}");
	cJSON_free(s);
}

/* What KMM will remove before loading on a node that uses mapping i: the
 * mapping's own list when set, else the container's (KMM notes §1.4). */
static char *const *effective_in_tree(const Gpukmm__ModuleLoaderContainer *c, size_t i, size_t *n)
{
	const Gpukmm__ModuleKernelMapping *k = c->kernel_mappings[i];
	if (k->has_in_tree_modules_to_remove) {
		*n = k->n_in_tree_modules_to_remove;
		return k->in_tree_modules_to_remove;
	}
	*n = c->n_in_tree_modules_to_remove;
	return c->in_tree_modules_to_remove;
}

Test(render, in_tree_removal_decision)
{
	/* every mapping's effective list removes the in-tree copy of moduleName,
	 * dependants listed by the admin come before it, and the singular
	 * (deprecated) field is never set */
	const char *names[] = { "xe", "xe_oot" };
	for (size_t t = 0; t < 2; t++) {
		char spec[1024];
		snprintf(spec, sizeof(spec),
			 "{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"moduleName\":\"%s\",\"kernelMappings\":["
			 "{\"regexp\":\"^6\\\\.8\",\"containerImage\":\"r.io/a:1\"},"
			 "{\"regexp\":\"^6\\\\.9\",\"containerImage\":\"r.io/b:1\",\"inTreeModulesToRemove\":[\"xe_dep\"]},"
			 "{\"regexp\":\"^6\\\\.10\",\"containerImage\":\"r.io/c:1\",\"inTreeModulesToRemove\":[\"a\",\"%s\",\"b\",\"a\"]}]}}",
			 names[t], names[t]);
		Gpukmm__Module *m = render("gpu", spec, NULL);
		Gpukmm__ModuleLoaderContainer *c = m->spec->module_loader->container;
		cJSON *j = gk_policy_module_to_json(m);
		char *js = cJSON_PrintUnformatted(j);
		cr_assert_null(strstr(js, "inTreeModuleToRemove"));
		cJSON_free(js);
		cJSON_Delete(j);
		for (size_t i = 0; i < c->n_kernel_mappings; i++) {
			size_t n;
			char *const *l = effective_in_tree(c, i, &n);
			bool found = false;
			for (size_t j = 0; j < n; j++)
				found |= strcmp(l[j], names[t]) == 0;
			cr_assert(found, "mapping %zu does not remove the in-tree %s", i, names[t]);
		}
		size_t n;
		char *const *l = effective_in_tree(c, 1, &n);
		cr_assert_eq(n, 2);
		cr_assert_str_eq(l[0], "xe_dep"); /* a dependant: removed before moduleName */
		cr_assert_str_eq(l[1], names[t]);
		l = effective_in_tree(c, 2, &n);
		cr_assert_eq(n, 3); /* explicit position kept, duplicates dropped */
		cr_assert_str_eq(l[0], "a");
		cr_assert_str_eq(l[1], names[t]);
		cr_assert_str_eq(l[2], "b");
		char msg[512];
		cr_assert_eq(gk_policy_kmm_admit(m, msg, sizeof(msg)), GK_POLICY_KMM_ALLOW, "%s", msg);
		gk_kobj_free(m);
	}
}

Test(render, user_node_selector_overrides_arch)
{
	Gpukmm__Module *m = render("gpu", "{\"resourceRegistration\":\"dp\",\"nodeSelector\":{\"kubernetes.io/arch\":\"arm64\","
				   "\"pool\":\"gpu\"}," KM1 "}", NULL);
	cr_assert_eq(m->spec->n_selector, 2);
	cr_assert_str_eq(gk_kv_get(m->spec->selector, m->spec->n_selector, "kubernetes.io/arch"), "arm64");
	cr_assert_str_eq(gk_kv_get(m->spec->selector, m->spec->n_selector, "pool"), "gpu");
	gk_kobj_free(m);
}

/* ---- §3 gating ---- */
Test(gating, ready_label_and_selectors)
{
	char label[GK_POLICY_KEY_MAX], name[GK_POLICY_KEY_MAX];
	cr_assert_eq(gk_policy_ready_label(label, sizeof(label), "intel-gpu-base-operator", "gpu-dra"), 0);
	cr_assert_str_eq(label, "kmm.node.kubernetes.io/intel-gpu-base-operator.gpu-dra-gpu.ready");
	cr_assert_eq(gk_policy_version_label(name, sizeof(name), NULL, "gpu-dra"), 0);
	cr_assert_str_eq(name, "kmm.node.kubernetes.io/version-module.intel-gpu-base-operator.gpu-dra-gpu");
	cr_assert_eq(gk_policy_module_name(name, 5, "gpu-dra"), GK_OUT_OF_RANGE);

	Gpukmm__ClusterPolicy *cp = load_cp("gpu-dra", "{\"resourceRegistration\":\"dra\",\"useNFDLabeling\":true," KM1 "}");
	Gpukmm__Module *m = render("gpu-dra", "{\"resourceRegistration\":\"dra\",\"useNFDLabeling\":true," KM1 "}", NULL);
	/* the Module's own selector never gates on its readiness */
	cr_assert_null(gk_kv_get(m->spec->selector, m->spec->n_selector, label));
	gk_kobj_free(m);
	cr_assert(gk_policy_gating_wanted(cp->spec, true));
	cr_assert(!gk_policy_gating_wanted(cp->spec, false));
	gk_policy_selector sel;
	cr_assert_eq(gk_policy_node_selector(cp->spec, label, &sel), 0);
	cr_assert_eq(sel.n, 3);
	cr_assert_str_eq(gk_kv_get(sel.kv, sel.n, label), "");
	cr_assert_str_eq(gk_kv_get(sel.kv, sel.n, "intel.feature.node.kubernetes.io/gpu"), "true");
	gk_policy_selector_free(&sel);
	/* no ready label given: no kmm key at all */
	cr_assert_eq(gk_policy_node_selector(cp->spec, NULL, &sel), 0);
	for (size_t i = 0; i < sel.n; i++)
		cr_assert(strstr(sel.kv[i]->key, "kmm.node.kubernetes.io") == NULL);
	gk_policy_selector_free(&sel);
	gk_kobj_free(cp);

	cp = load_cp("gpu", "{\"resourceRegistration\":\"dp\"}");
	cr_assert(!gk_policy_gating_wanted(cp->spec, true), "no kernelModule: no gating");
	gk_kobj_free(cp);
}

Test(gating, daemonsets)
{
	char n[GK_POLICY_KEY_MAX];
	Gpukmm__ClusterPolicy *cp = load_cp("gpu", "{\"resourceRegistration\":\"dp\",\"resourceMonitoring\":true}");
	cr_assert_eq(gk_policy_daemonsets(cp->spec, true), GK_POLICY_DS_DEVICE_PLUGIN | GK_POLICY_DS_XPU_MANAGER);
	gk_kobj_free(cp);
	cp = load_cp("gpu", "{\"resourceRegistration\":\"dra\"}");
	cr_assert_eq(gk_policy_daemonsets(cp->spec, true), GK_POLICY_DS_DRA);
	cr_assert_eq(gk_policy_daemonsets(cp->spec, false), 0);
	gk_kobj_free(cp);
	gk_policy_ds_name(n, sizeof(n), "cp", GK_POLICY_DS_DEVICE_PLUGIN);
	cr_assert_str_eq(n, "cp-device-plugin");
	gk_policy_ds_name(n, sizeof(n), "cp", GK_POLICY_DS_DRA);
	cr_assert_str_eq(n, "cp-gpu-dra");
	gk_policy_ds_name(n, sizeof(n), "cp", GK_POLICY_DS_XPU_MANAGER);
	cr_assert_str_eq(n, "cp-xpu-manager");
	cr_assert_eq(gk_policy_ds_name(n, sizeof(n), "cp", 0), GK_INVALID_ARGUMENT);
}

/* ---- §5.2 strings ---- */
Test(strings, exact)
{
	char b[512];
	gk_policy_msg_not_fully_available(b, sizeof(b), "gpu-gpu", 2, 3);
	cr_assert_str_eq(b, "module loader not fully available (2/3) for modules.kmm.sigs.x-k8s.io/gpu-gpu");
	gk_policy_msg_blocking_deletion(b, sizeof(b), "m");
	cr_assert_str_eq(b, "allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/m deletion");
	gk_policy_msg_blocking_recreation(b, sizeof(b), "m");
	cr_assert_str_eq(b, "allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/m recreation for version change");
	gk_policy_msg_pending_deletion(b, sizeof(b), "m");
	cr_assert_str_eq(b, "modules.kmm.sigs.x-k8s.io/m is pending deletion");
	gk_policy_msg_reconcile_failed(b, sizeof(b), "m", "cp", "boom");
	cr_assert_str_eq(b, "failed to reconcile KMM Module m for ClusterPolicy cp: boom");
	gk_policy_msg_get_failed(b, sizeof(b), "m", "x");
	cr_assert_str_eq(b, "failed to get KMM Module m: x");
	gk_policy_msg_delete_failed(b, sizeof(b), "m", "x");
	cr_assert_str_eq(b, "failed to delete KMM Module m: x");
	gk_policy_msg_delete_for_version_failed(b, sizeof(b), "m", "x");
	cr_assert_str_eq(b, "failed to delete KMM Module m for version change: x");
	gk_policy_log_ordered_upgrade(b, sizeof(b), "ns", "m", "1.0");
	cr_assert_str_eq(b, "KMM Module m uses ordered upgrade (version=\"1.0\"); nodes must be labeled "
			    "kmm.node.kubernetes.io/version-module.ns.m=1.0 before the module loads");
	gk_policy_log_version_toggled(b, sizeof(b), "m", "", "1.0");
	cr_assert_str_eq(b, "KMM Module m version toggled (\"\" -> \"1.0\"); recreating");
	cr_assert_str_eq(GK_POLICY_MSG_KMM_NOT_INSTALLED, "KMM is not installed in the cluster.");

	Gpukmm__Module m = GPUKMM__MODULE__INIT;
	gk_policy_kmm_status(b, sizeof(b), &m);
	cr_assert_str_eq(b, "0/0");
	cr_assert(!gk_policy_module_not_fully_available(&m));
	Gpukmm__ModuleLoaderStatus st = GPUKMM__MODULE_LOADER_STATUS__INIT;
	st.has_desired_number = 1;
	st.desired_number = 3;
	st.has_available_number = 1;
	st.available_number = 2;
	m.module_loader_status = &st;
	gk_policy_kmm_status(b, sizeof(b), &m);
	cr_assert_str_eq(b, "2/3");
	cr_assert(gk_policy_module_not_fully_available(&m));
}

/* ---- §2.5 existing vs desired ---- */
static Gpukmm__Module *module_from(const char *json)
{
	cJSON *j = cJSON_Parse(json);
	cr_assert_not_null(j, "%s", json);
	Gpukmm__Module *m = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_module_from_json(j, &m, &e), 0, "%s", e.msg);
	cJSON_Delete(j);
	return m;
}

/* as KMM's API server would store it: defaults applied, status added */
static Gpukmm__Module *as_stored(const Gpukmm__Module *desired)
{
	cJSON *j = gk_policy_module_to_json(desired);
	cJSON *mp = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"),
						"moduleLoader"), "container"), "modprobe");
	cJSON_AddStringToObject(mp, "dirName", "/opt");
	cJSON_AddItemToObject(j, "status", cJSON_Parse("{\"moduleLoader\":{\"desiredNumber\":2,\"availableNumber\":1}}"));
	cJSON_AddStringToObject(cJSON_GetObjectItem(j, "metadata"), "resourceVersion", "7");
	char *s = cJSON_PrintUnformatted(j);
	Gpukmm__Module *m = module_from(s);
	cJSON_free(s);
	cJSON_Delete(j);
	return m;
}

Test(diff, unchanged_means_no_write)
{
	Gpukmm__Module *want = render("gpu", "{\"resourceRegistration\":\"dp\",\"tolerations\":[{\"operator\":\"Exists\"}],"
				      "\"pullSecret\":{\"name\":\"s\"},\"kernelModule\":{\"kernelMappings\":[" XE1 ","
				      "{\"regexp\":\"^6\",\"containerImage\":\"r.io/x:1\",\"build\":{\"dockerfileConfigMap\":{\"name\":\"d\"}}}]}}", NULL);
	Gpukmm__Module *have = as_stored(want);
	cr_assert_eq(have->module_loader_status->desired_number, 2);
	cJSON *patch = (void *)1;
	cr_assert_eq(gk_policy_module_diff(have, want, &patch, NULL), 0);
	cr_assert_null(patch);
	gk_kobj_free(have);
	gk_kobj_free(want);
}

Test(diff, changes_become_a_merge_patch_with_nulls)
{
	Gpukmm__Module *old = render("gpu", "{\"resourceRegistration\":\"dp\",\"useNFDLabeling\":true,\"pullSecret\":{\"name\":\"s\"},"
				     "\"tolerations\":[{\"operator\":\"Exists\"}],\"kernelModule\":{\"firmwarePath\":\"/fw\","
				     "\"kernelMappings\":[" XE1 "]}}", NULL);
	Gpukmm__Module *have = as_stored(old);
	Gpukmm__Module *want = render("gpu", "{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"kernelMappings\":["
				      "{\"regexp\":\"^.+$\",\"containerImage\":\"registry.example.com/xe-driver:2.0\"}]}}", NULL);
	cJSON *patch = NULL;
	cr_assert_eq(gk_policy_module_diff(have, want, &patch, NULL), 0);
	cr_assert_not_null(patch);
	char *s = cJSON_PrintUnformatted(patch);
	cr_assert_str_eq(s, "{\"spec\":{\"imageRepoSecret\":null,"
			    "\"selector\":{\"intel.feature.node.kubernetes.io/gpu\":null},"
			    "\"tolerations\":[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\","
			    "\"effect\":\"NoSchedule\"}],"
			    "\"moduleLoader\":{\"container\":{\"modprobe\":{\"firmwarePath\":null},"
			    "\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":\"registry.example.com/xe-driver:2.0\"}]}}}}");
	cJSON_free(s);
	cJSON_Delete(patch);
	cr_assert(!gk_policy_version_toggled(have, want));
	gk_kobj_free(have);
	gk_kobj_free(old);
	gk_kobj_free(want);
}

Test(diff, owner_references)
{
	Gpukmm__Module *want = render("gpu", "{\"resourceRegistration\":\"dp\"," KM1 "}", NULL);
	/* a Module without our reference (e.g. created by hand): add it, keep others */
	Gpukmm__Module *have = module_from("{\"metadata\":{\"name\":\"gpu-gpu\",\"namespace\":\"intel-gpu-base-operator\","
					   "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"c\",\"uid\":\"u\"}]}}");
	cJSON *patch = NULL;
	cr_assert_eq(gk_policy_module_diff(have, want, &patch, NULL), 0);
	cJSON *refs = cJSON_GetObjectItem(cJSON_GetObjectItem(patch, "metadata"), "ownerReferences");
	cr_assert_eq(cJSON_GetArraySize(refs), 2);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(refs, 1), "uid")->valuestring, "uid-gpu");
	cr_assert_not_null(cJSON_GetObjectItem(patch, "spec"));
	cJSON_Delete(patch);
	gk_kobj_free(have);
	/* another controller owns it: refuse, with controller-runtime's wording */
	have = module_from("{\"metadata\":{\"name\":\"gpu-gpu\",\"namespace\":\"ns\",\"ownerReferences\":[{\"apiVersion\":"
			   "\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"name\":\"other\",\"uid\":\"u2\",\"controller\":true}]}}");
	gk_err e = { 0 };
	cr_assert_eq(gk_policy_module_diff(have, want, &patch, &e), GK_FAILED_PRECONDITION);
	cr_assert_null(patch);
	cr_assert_str_eq(e.msg, "failed to set controller reference: Object ns/gpu-gpu is already owned by another "
				"ClusterPolicy controller other");
	gk_kobj_free(have);
	/* the same policy with an old uid (recreated, or left by the Go operator): adopted in
	 * place — one reference, ours — not a conflict that leaves the Module to the GC */
	have = module_from("{\"metadata\":{\"name\":\"gpu-gpu\",\"namespace\":\"ns\",\"ownerReferences\":[{\"apiVersion\":"
			   "\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"name\":\"gpu\",\"uid\":\"old\",\"controller\":true,"
			   "\"blockOwnerDeletion\":true}]}}");
	cr_assert_eq(gk_policy_module_diff(have, want, &patch, &e), 0, "%s", e.msg);
	refs = cJSON_GetObjectItem(cJSON_GetObjectItem(patch, "metadata"), "ownerReferences");
	cr_assert_eq(cJSON_GetArraySize(refs), 1);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(refs, 0), "uid")->valuestring, "uid-gpu");
	cJSON_Delete(patch);
	gk_kobj_free(have);
	gk_kobj_free(want);
}

Test(diff, version_toggle_detection)
{
	Gpukmm__Module *a = render("gpu", "{\"resourceRegistration\":\"dp\"," KM1 "}", NULL);
	Gpukmm__Module *b = render("gpu", "{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"version\":\"1.0\",\"kernelMappings\":[" XE1 "]}}", NULL);
	Gpukmm__Module *c = render("gpu", "{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"version\":\"2.0\",\"kernelMappings\":[" XE1 "]}}", NULL);
	cr_assert(gk_policy_version_toggled(a, b));
	cr_assert(gk_policy_version_toggled(b, a));
	cr_assert(!gk_policy_version_toggled(b, c));
	cr_assert(!gk_policy_version_toggled(a, a));
	/* what the toggle avoids: KMM (the fake KMM's webhook) refuses the in-place update */
	cJSON *ja = gk_policy_module_to_json(a), *jb = gk_policy_module_to_json(b), *jc = gk_policy_module_to_json(c);
	fk_kube_version kv = { 1, 32 };
	char msg[512];
	cr_assert_eq(gk_policy_kmm_admit_json(jb, ja, &kv, msg, sizeof(msg)), GK_POLICY_KMM_DENY);
	cr_assert(strstr(msg, "cannot update to or from an empty version"), "%s", msg);
	cr_assert_eq(gk_policy_kmm_admit_json(jc, jb, &kv, msg, sizeof(msg)), GK_POLICY_KMM_ALLOW, "%s", msg);
	cJSON_Delete(ja);
	cJSON_Delete(jb);
	cJSON_Delete(jc);
	cJSON *patch = NULL;
	cr_assert_eq(gk_policy_module_diff(b, c, &patch, NULL), 0);
	char *s = cJSON_PrintUnformatted(patch);
	cr_assert_str_eq(s, "{\"spec\":{\"moduleLoader\":{\"container\":{\"version\":\"2.0\"}}}}");
	cJSON_free(s);
	cJSON_Delete(patch);
	gk_kobj_free(a);
	gk_kobj_free(b);
	gk_kobj_free(c);
}

/* ---- rendered Modules vs the real KMM CRD schema and KMM's admission rules ---- */
static const char *const policies[] = {
	"{\"resourceRegistration\":\"dra\"," KM1 "}",
	"{\"resourceRegistration\":\"dp\",\"useNFDLabeling\":true,\"nodeSelector\":{\"pool\":\"gpu\"},\"tolerations\":["
	"{\"key\":\"gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"},{\"key\":\"t\",\"value\":\"v\",\"effect\":\"NoExecute\","
	"\"tolerationSeconds\":60}],\"pullSecret\":{\"name\":\"regcred\"},\"kernelModule\":{\"moduleName\":\"xe\",\"version\":\"1.2\","
	"\"firmwarePath\":\"/opt/lib/firmware/xe\",\"modulesLoadingOrder\":[\"xe\",\"drm_buddy\"],\"registryTLS\":{\"insecure\":true},"
	"\"kernelMappings\":[{\"regexp\":\"^6\\\\.8\\\\.0-.*-generic$\",\"containerImage\":\"r.io/xe:${KERNEL_FULL_VERSION}\","
	"\"inTreeModulesToRemove\":[\"i915\"],\"registryTLS\":{\"insecureSkipTLSVerify\":true}},{\"regexp\":\"^6\\\\.12\","
	"\"containerImage\":\"r.io/xe:v1-$KERNEL_XYZ\",\"build\":{\"dockerfileConfigMap\":{\"name\":\"df\"},\"buildArgs\":"
	"[{\"name\":\"A\",\"value\":\"b\"}],\"secrets\":[{\"name\":\"s1\"},{\"name\":\"s2\"}]}}]}}",
	"{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"moduleName\":\"i915\",\"kernelMappings\":[{\"regexp\":\"^.+$\","
	"\"containerImage\":\"r.io/i915@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}}",
};

Test(kmm_crd, rendered_modules_pass_schema_and_kmm_admission)
{
	cJSON *crd;
	cJSON *schema = crd_schema("tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml", &crd);
	cr_assert_not_null(schema);
	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		/* the policy is valid by our rules ... */
		Gpukmm__ClusterPolicy *cp = load_cp("gpu", policies[i]);
		gk_policy_report r;
		gk_policy_report_init(&r);
		gk_policy_validate(cp, NULL, &r);
		cr_assert_eq(r.n, 0, "policy %zu: %s", i, r.n ? r.v[0].msg : "");
		gk_policy_report_free(&r);
		gk_kobj_free(cp);
		/* ... so its Module passes the KMM CRD schema and KMM's webhook */
		Gpukmm__Module *m = render("gpu", policies[i], NULL);
		cJSON *j = gk_policy_module_to_json(m);
		char errs[4096] = "";
		schema_check(j, schema, "", errs, sizeof(errs));
		cr_expect_str_empty(errs, "policy %zu:\n%s", i, errs);
		char msg[512];
		cr_expect_eq(gk_policy_kmm_admit(m, msg, sizeof(msg)), 0, "policy %zu: %s", i, msg);
		/* and the fake KMM's independent implementation of KMM's webhook agrees */
		fk_kube_version kv = { 1, 32 };
		cr_expect_eq(gk_policy_kmm_admit_json(j, NULL, &kv, msg, sizeof(msg)), GK_POLICY_KMM_ALLOW, "policy %zu: fake-kmm: %s", i, msg);
		cJSON_Delete(j);
		gk_kobj_free(m);
	}
	cJSON_Delete(crd);
}

Test(kmm_crd, checker_can_fail)
{
	cJSON *crd;
	cJSON *schema = crd_schema("tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml", &crd);
	cJSON *bad = cJSON_Parse("{\"apiVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"kind\":\"Module\",\"metadata\":{},"
				 "\"spec\":{\"moduleLoader\":{\"container\":{\"modprobe\":{},\"kernelMappings\":[],\"bogus\":1}}}}");
	char errs[4096] = "";
	schema_check(bad, schema, "", errs, sizeof(errs));
	cr_expect(strstr(errs, ".spec.selector: Required value"), "%s", errs);
	cr_expect(strstr(errs, "kernelMappings: fewer than 1 items"), "%s", errs);
	cr_expect(strstr(errs, ".bogus: unknown field"), "%s", errs);
	cJSON_Delete(bad);
	cJSON_Delete(crd);
	/* KMM admission: the gaps gpukmm closes would be rejected by KMM */
	Gpukmm__Module *m = module_from("{\"metadata\":{\"name\":\"abcdefghijklmno-gpu\",\"namespace\":\"intel-gpu-base-operator\"},"
					"\"spec\":{\"selector\":{}}}");
	char msg[512];
	cr_expect_neq(gk_policy_kmm_admit(m, msg, sizeof(msg)), 0);
	cr_expect_str_eq(msg, "module name and namespace have a combined length of 42 characters, which exceeds the maximum "
			      "of 41 when version is set");
	gk_kobj_free(m);
	m = module_from("{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"},\"spec\":{\"selector\":{},\"moduleLoader\":{\"container\":"
			"{\"modprobe\":{\"moduleName\":\"xe\"},\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":\"\","
			"\"build\":{\"dockerfileConfigMap\":{\"name\":\"d\"}}}]}}}}");
	cr_expect_neq(gk_policy_kmm_admit(m, msg, sizeof(msg)), 0);
	cr_expect_str_eq(msg, "failed to validate kernel mappings: missing spec.moduleLoader.container.kernelMappings[0].containerImage");
	gk_kobj_free(m);
}
