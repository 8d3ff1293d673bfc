/* lib/policy: KMM's own admission rules for a Module (reference kmm.md §1.3,
 * KMM internal/webhook/module.go at de3f8c9), on the typed Module. KMM returns
 * the first error only; so does this. Used by tests and the fake KMM to check
 * that what gpukmm renders is what KMM accepts. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpukmm/policy.h"
#include "re2shim.h"


static bool empty(const char *s)
{
	return !s || !*s;
}

static bool has_tag_or_digest(const char *s)
{
	return strchr(s, ':') || strchr(s, '@');
}

int gk_policy_kmm_admit(const Gpukmm__Module *m, char *msg, size_t cap)
{
	const Gpukmm__ObjectMeta *md = m ? m->metadata : NULL;
	size_t len = (md && md->name ? strlen(md->name) : 0) + (md && md->namespace_ ? strlen(md->namespace_) : 0);
	if (len > GK_POLICY_KMM_MAX_NAME_NS)
		return gk_policy_fail(msg, cap,
			    "module name and namespace have a combined length of %zu characters, which exceeds the "
			    "maximum of %d when version is set", len, GK_POLICY_KMM_MAX_NAME_NS);
	const Gpukmm__ModuleSpec *s = m ? m->spec : NULL;
	if (!s)
		return gk_policy_fail(msg, cap, "spec: Required value");
	for (size_t i = 0; i < s->n_tolerations; i++) {
		const Gpukmm__Toleration *t = s->tolerations[i];
		const char *op = t->operator_ ? t->operator_ : "", *ef = t->effect ? t->effect : "";
		char sub[512];
		if (!empty(t->key) && gk_policy_check_qualified_name(t->key, sub, sizeof(sub)))
			return gk_policy_fail(msg, cap, "tolerations[%zu].key: %s", i, sub);
		if (empty(t->key) && strcmp(op, "Exists"))
			return gk_policy_fail(msg, cap, "tolerations[%zu].operator: operator must be Exists when key is empty", i);
		if (t->has_toleration_seconds && strcmp(ef, "NoExecute"))
			return gk_policy_fail(msg, cap, "tolerations[%zu].effect: must be NoExecute when tolerationSeconds is set", i);
		if (!*op || !strcmp(op, "Equal")) {
			if (gk_policy_check_label_value(t->value, sub, sizeof(sub)))
				return gk_policy_fail(msg, cap, "tolerations[%zu].value: %s", i, sub);
		} else if (!strcmp(op, "Exists")) {
			if (!empty(t->value))
				return gk_policy_fail(msg, cap, "tolerations[%zu].value: must be empty when operator is Exists", i);
		} else {
			return gk_policy_fail(msg, cap, "tolerations[%zu].operator: unsupported operator %s", i, op);
		}
		if (*ef && strcmp(ef, "NoSchedule") && strcmp(ef, "PreferNoSchedule") && strcmp(ef, "NoExecute"))
			return gk_policy_fail(msg, cap, "tolerations[%zu].effect: unsupported effect %s", i, ef);
	}
	const Gpukmm__ModuleLoader *ml = s->module_loader;
	if (!ml)
		return 0;
	const Gpukmm__ModuleLoaderContainer *c = ml->container;
	/* schema: container, modprobe, kernelMappings (minItems 1) are required */
	if (!c)
		return gk_policy_fail(msg, cap, "spec.moduleLoader.container: Required value");
	if (!c->modprobe)
		return gk_policy_fail(msg, cap, "spec.moduleLoader.container.modprobe: Required value");
	if (c->n_kernel_mappings == 0)
		return gk_policy_fail(msg, cap, "spec.moduleLoader.container.kernelMappings: Invalid value: 0: should have at least 1 items");
	const char *pre = "failed to validate kernel mappings: ";
	if (!empty(c->container_image) && !has_tag_or_digest(c->container_image))
		return gk_policy_fail(msg, cap, "%simage %s must contain a tag or a digest", pre, c->container_image);
	for (size_t i = 0; i < c->n_kernel_mappings; i++) {
		const Gpukmm__ModuleKernelMapping *k = c->kernel_mappings[i];
		if (!empty(k->regexp) && !empty(k->literal))
			return gk_policy_fail(msg, cap, "%sregexp and literal are mutually exclusive properties at kernelMappings[%zu]",
				    pre, i);
		if (empty(k->regexp) && empty(k->literal))
			return gk_policy_fail(msg, cap, "%sregexp or literal must be set at kernelMappings[%zu]", pre, i);
		char sub[512];
		if (!empty(k->regexp) && gk_policy_check_regexp(k->regexp, sub, sizeof(sub)))
			return gk_policy_fail(msg, cap, "%sinvalid regexp at index %zu: %s", pre, i, sub);
		if (!k->container_image)
			return gk_policy_fail(msg, cap, "spec.moduleLoader.container.kernelMappings[%zu].containerImage: Required value", i);
		if (empty(k->container_image)) {
			if (empty(c->container_image))
				return gk_policy_fail(msg, cap, "%smissing spec.moduleLoader.container.kernelMappings[%zu].containerImage",
					    pre, i);
		} else if (!has_tag_or_digest(k->container_image)) {
			return gk_policy_fail(msg, cap, "%simage %s at kernelMappings[%zu] must contain a tag or a digest", pre,
				    k->container_image, i);
		}
	}
	const Gpukmm__ModprobeSpec *mp = c->modprobe;
	const char *mpre = "failed to validate modprobe: ";
	if (empty(mp->module_name))
		return gk_policy_fail(msg, cap, "%sload and unload rawArgs must be set when moduleName is unset", mpre);
	if (mp->n_modules_loading_order) {
		if (mp->n_modules_loading_order < 2)
			return gk_policy_fail(msg, cap, "%smodulesLoadingOrder must have at least 2 entries", mpre);
		if (strcmp(mp->modules_loading_order[0], mp->module_name))
			return gk_policy_fail(msg, cap, "%sthe first entry in modulesLoadingOrder must be the moduleName", mpre);
		for (size_t i = 1; i < mp->n_modules_loading_order; i++)
			for (size_t j = 0; j < i; j++)
				if (!strcmp(mp->modules_loading_order[i], mp->modules_loading_order[j]))
					return gk_policy_fail(msg, cap, "%sduplicate entry %s in modulesLoadingOrder", mpre,
						    mp->modules_loading_order[i]);
	}
	return 0;
}
