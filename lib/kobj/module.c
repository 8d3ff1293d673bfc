/* lib/kobj: KMM Module (kmm.sigs.x-k8s.io/v1beta1) JSON <-> Gpukmm__Module.
 * Only the fields gpukmm renders and compares are read; everything else in a
 * Module (devicePlugin, dra, container-level build, ...) is ignored here and
 * never written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "kj.h"

#define TRY(call) do { if ((rc = (call)) != 0) return rc; } while (0)
#define NEW(ptr, init) do { \
	(ptr) = malloc(sizeof(*(ptr))); \
	if (!(ptr)) return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory"); \
	init(ptr); \
} while (0)

static int parse_build(const cJSON *b, const char *p, Gpukmm__ModuleBuild *mb, gk_err *err)
{
	int rc;
	const cJSON *cm;
	TRY(gk_kj_object(b, "dockerfileConfigMap", p, &cm, err));
	if (cm) {
		char cp[300];
		snprintf(cp, sizeof(cp), "%s.dockerfileConfigMap", p);
		TRY(gk_kj_string(cm, "name", cp, &mb->dockerfile_config_map, err));
	}
	TRY(gk_kj_build_args(b, "buildArgs", p, &mb->n_build_args, &mb->build_args, err));
	TRY(gk_kj_name_list(b, "secrets", p, &mb->n_secrets, &mb->secrets, err));
	TRY(gk_kj_string_map(b, "selector", p, NULL, &mb->n_selector, &mb->selector, err));
	return 0;
}

static int parse_mapping(const cJSON *m, const char *p, Gpukmm__ModuleKernelMapping *km, gk_err *err)
{
	int rc;
	TRY(gk_kj_string(m, "regexp", p, &km->regexp, err));
	TRY(gk_kj_string(m, "literal", p, &km->literal, err));
	TRY(gk_kj_string(m, "containerImage", p, &km->container_image, err));
	const cJSON *l;
	TRY(gk_kj_array(m, "inTreeModulesToRemove", p, &l, err));
	if (l) {
		km->has_has_in_tree_modules_to_remove = 1;
		km->has_in_tree_modules_to_remove = 1;
		TRY(gk_kj_string_list(m, "inTreeModulesToRemove", p, &km->n_in_tree_modules_to_remove,
				      &km->in_tree_modules_to_remove, err));
	}
	TRY(gk_kj_registry_tls(m, "registryTLS", p, &km->registry_tls, err));
	TRY(gk_kj_sign(m, "sign", p, &km->sign, err));
	const cJSON *b;
	TRY(gk_kj_object(m, "build", p, &b, err));
	if (b) {
		char bp[256];
		snprintf(bp, sizeof(bp), "%s.build", p);
		NEW(km->build, gpukmm__module_build__init);
		TRY(parse_build(b, bp, km->build, err));
	}
	return 0;
}

static int parse_container(const cJSON *c, Gpukmm__ModuleLoaderContainer *mc, gk_err *err)
{
	int rc;
	const char *p = "spec.moduleLoader.container";
	const cJSON *mp;
	TRY(gk_kj_object(c, "modprobe", p, &mp, err));
	if (mp) {
		const char *pp = "spec.moduleLoader.container.modprobe";
		NEW(mc->modprobe, gpukmm__modprobe_spec__init);
		Gpukmm__ModprobeSpec *m = mc->modprobe;
		TRY(gk_kj_string(mp, "moduleName", pp, &m->module_name, err));
		TRY(gk_kj_string(mp, "dirName", pp, &m->dir_name, err));
		TRY(gk_kj_string(mp, "firmwarePath", pp, &m->firmware_path, err));
		TRY(gk_kj_string_list(mp, "modulesLoadingOrder", pp, &m->n_modules_loading_order,
				      &m->modules_loading_order, err));
		TRY(gk_kj_string_list(mp, "parameters", pp, &m->n_parameters, &m->parameters, err));
	}
	TRY(gk_kj_string(c, "version", p, &mc->version, err));
	TRY(gk_kj_string_list(c, "inTreeModulesToRemove", p, &mc->n_in_tree_modules_to_remove,
			      &mc->in_tree_modules_to_remove, err));
	TRY(gk_kj_string(c, "imagePullPolicy", p, &mc->image_pull_policy, err));
	TRY(gk_kj_registry_tls(c, "registryTLS", p, &mc->registry_tls, err));
	TRY(gk_kj_string(c, "containerImage", p, &mc->container_image, err));
	TRY(gk_kj_sign(c, "sign", p, &mc->sign, err));
	const cJSON *a;
	TRY(gk_kj_array(c, "kernelMappings", p, &a, err));
	if (!a || cJSON_GetArraySize(a) == 0)
		return 0;
	mc->kernel_mappings = calloc((size_t)cJSON_GetArraySize(a), sizeof(*mc->kernel_mappings));
	if (!mc->kernel_mappings)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	const cJSON *m;
	cJSON_ArrayForEach(m, a) {
		char kp[96];
		snprintf(kp, sizeof(kp), "%s.kernelMappings[%zu]", p, mc->n_kernel_mappings);
		if (!cJSON_IsObject(m))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: expected object, got %s", kp,
					  gk_kj_type_name(m));
		Gpukmm__ModuleKernelMapping *km;
		NEW(km, gpukmm__module_kernel_mapping__init);
		mc->kernel_mappings[mc->n_kernel_mappings++] = km;
		TRY(parse_mapping(m, kp, km, err));
	}
	return 0;
}

static int parse_spec(const cJSON *spec, Gpukmm__ModuleSpec *s, gk_err *err)
{
	int rc;
	const char *p = "spec";
	TRY(gk_kj_string_map(spec, "selector", p, NULL, &s->n_selector, &s->selector, err));
	TRY(gk_kj_tolerations(spec, "tolerations", p, &s->n_tolerations, &s->tolerations, err));
	const cJSON *irs;
	TRY(gk_kj_object(spec, "imageRepoSecret", p, &irs, err));
	if (irs) {
		TRY(gk_kj_string(irs, "name", "spec.imageRepoSecret", &s->image_repo_secret, err));
		if (!s->image_repo_secret && !(s->image_repo_secret = strdup("")))
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	const cJSON *ml;
	TRY(gk_kj_object(spec, "moduleLoader", p, &ml, err));
	if (!ml)
		return 0;
	NEW(s->module_loader, gpukmm__module_loader__init);
	TRY(gk_kj_string(ml, "serviceAccountName", "spec.moduleLoader", &s->module_loader->service_account_name,
			 err));
	const cJSON *c;
	TRY(gk_kj_object(ml, "container", "spec.moduleLoader", &c, err));
	if (c) {
		NEW(s->module_loader->container, gpukmm__module_loader_container__init);
		TRY(parse_container(c, s->module_loader->container, err));
	}
	return 0;
}

static int parse_module(const cJSON *obj, Gpukmm__Module *m, gk_err *err)
{
	int rc;
	TRY(gk_kobj_meta_from_json(obj, NULL, &m->metadata, err));
	const cJSON *spec, *st, *ml;
	TRY(gk_kj_object(obj, "spec", "", &spec, err));
	if (spec) {
		NEW(m->spec, gpukmm__module_spec__init);
		TRY(parse_spec(spec, m->spec, err));
	}
	TRY(gk_kj_object(obj, "status", "", &st, err));
	if (!st)
		return 0;
	TRY(gk_kj_object(st, "moduleLoader", "status", &ml, err));
	if (!ml)
		return 0;
	NEW(m->module_loader_status, gpukmm__module_loader_status__init);
	Gpukmm__ModuleLoaderStatus *s = m->module_loader_status;
	const char *p = "status.moduleLoader";
	TRY(gk_kj_int32(ml, "nodesMatchingSelectorNumber", p, &s->has_nodes_matching_selector_number,
			&s->nodes_matching_selector_number, err));
	TRY(gk_kj_int32(ml, "desiredNumber", p, &s->has_desired_number, &s->desired_number, err));
	TRY(gk_kj_int32(ml, "availableNumber", p, &s->has_available_number, &s->available_number, err));
	return 0;
}

int gk_kobj_module_from_json(const cJSON *obj, Gpukmm__Module **out, gk_err *err)
{
	*out = NULL;
	if (!obj || !cJSON_IsObject(obj))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "object: expected object, got %s", gk_kj_type_name(obj));
	Gpukmm__Module *m = malloc(sizeof(*m));
	if (!m)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	gpukmm__module__init(m);
	int rc = parse_module(obj, m, err);
	if (rc) {
		gk_kobj_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

/* ---- spec -> JSON ----------------------------------------------------------- */

#define ADD(parent, key, item) do { \
	cJSON *i_ = (item); \
	if (!i_) goto fail; \
	cJSON_AddItemToObject((parent), (key), i_); \
} while (0)

static cJSON *name_ref(const char *name)
{
	cJSON *o = cJSON_CreateObject();
	if (o && !cJSON_AddStringToObject(o, "name", name ? name : "")) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *build_to_json(const Gpukmm__ModuleBuild *b)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	ADD(o, "dockerfileConfigMap", name_ref(b->dockerfile_config_map));
	if (b->n_build_args)
		ADD(o, "buildArgs", gk_kj_build_args_to_json(b->build_args, b->n_build_args));
	if (b->n_secrets) {
		cJSON *a = cJSON_AddArrayToObject(o, "secrets");
		if (!a)
			goto fail;
		for (size_t i = 0; i < b->n_secrets; i++) {
			cJSON *r = name_ref(b->secrets[i]);
			if (!r)
				goto fail;
			cJSON_AddItemToArray(a, r);
		}
	}
	if (b->n_selector)
		ADD(o, "selector", gk_kj_kv_to_object(b->selector, b->n_selector));
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

static cJSON *mapping_to_json(const Gpukmm__ModuleKernelMapping *m)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	if (!gk_kj_add_str(o, "regexp", m->regexp) || !gk_kj_add_str(o, "literal", m->literal) ||
	    !cJSON_AddStringToObject(o, "containerImage", m->container_image ? m->container_image : ""))
		goto fail;
	if (m->has_in_tree_modules_to_remove || m->n_in_tree_modules_to_remove)
		ADD(o, "inTreeModulesToRemove",
		    gk_kj_strings_to_array(m->in_tree_modules_to_remove, m->n_in_tree_modules_to_remove));
	if (m->registry_tls)
		ADD(o, "registryTLS", gk_kj_registry_tls_to_json(m->registry_tls));
	if (m->build)
		ADD(o, "build", build_to_json(m->build));
	if (m->sign)
		ADD(o, "sign", gk_kj_sign_to_json(m->sign));
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

static cJSON *container_to_json(const Gpukmm__ModuleLoaderContainer *c)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON *mp = cJSON_AddObjectToObject(o, "modprobe");
	if (!mp)
		goto fail;
	if (c->modprobe) {
		const Gpukmm__ModprobeSpec *m = c->modprobe;
		if (!gk_kj_add_str(mp, "moduleName", m->module_name) || !gk_kj_add_str(mp, "dirName", m->dir_name) ||
		    !gk_kj_add_str(mp, "firmwarePath", m->firmware_path))
			goto fail;
		if (m->n_modules_loading_order)
			ADD(mp, "modulesLoadingOrder",
			    gk_kj_strings_to_array(m->modules_loading_order, m->n_modules_loading_order));
		if (m->n_parameters)
			ADD(mp, "parameters", gk_kj_strings_to_array(m->parameters, m->n_parameters));
	}
	if (!gk_kj_add_str(o, "version", c->version) || !gk_kj_add_str(o, "containerImage", c->container_image) ||
	    !gk_kj_add_str(o, "imagePullPolicy", c->image_pull_policy))
		goto fail;
	if (c->n_in_tree_modules_to_remove)
		ADD(o, "inTreeModulesToRemove",
		    gk_kj_strings_to_array(c->in_tree_modules_to_remove, c->n_in_tree_modules_to_remove));
	if (c->registry_tls)
		ADD(o, "registryTLS", gk_kj_registry_tls_to_json(c->registry_tls));
	if (c->sign)
		ADD(o, "sign", gk_kj_sign_to_json(c->sign));
	cJSON *a = cJSON_AddArrayToObject(o, "kernelMappings");
	if (!a)
		goto fail;
	for (size_t i = 0; i < c->n_kernel_mappings; i++) {
		cJSON *m = mapping_to_json(c->kernel_mappings[i]);
		if (!m)
			goto fail;
		cJSON_AddItemToArray(a, m);
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

cJSON *gk_kobj_module_spec_to_json(const Gpukmm__ModuleSpec *spec)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !spec)
		return o;
	/* selector is required by the Module schema: always present, possibly {} */
	ADD(o, "selector", gk_kj_kv_to_object(spec->selector, spec->n_selector));
	if (spec->n_tolerations)
		ADD(o, "tolerations", gk_kj_tolerations_to_json(spec->tolerations, spec->n_tolerations));
	if (spec->image_repo_secret)
		ADD(o, "imageRepoSecret", name_ref(spec->image_repo_secret));
	if (spec->module_loader) {
		cJSON *ml = cJSON_AddObjectToObject(o, "moduleLoader");
		if (!ml || !gk_kj_add_str(ml, "serviceAccountName", spec->module_loader->service_account_name))
			goto fail;
		if (spec->module_loader->container)
			ADD(ml, "container", container_to_json(spec->module_loader->container));
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}
