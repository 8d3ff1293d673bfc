/* lib/policy: ClusterPolicy validation.
 *
 * One pipeline: lib/kobj turns the JSON into the typed model (reporting every
 * type error with its field path), the model is defaulted like the API server +
 * mutating webhook would, then the admission rules run on the typed model:
 * first the upstream webhook's rules with its exact messages and order, then
 * the CRD schema rules (which the API server enforces before a webhook sees
 * the object; reported for gpukmmctl), then gpukmm's own (DESIGN §5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "internal.h"
#include "re2shim.h"

#define MSG_MAX 1024

char *gk_policy_quote(const char *s)
{
	if (!s)
		s = "";
	size_t n = strlen(s);
	char *q = malloc(n * 4 + 3), *p = q;
	if (!q)
		return NULL;
	*p++ = '"';
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		switch (*c) {
		case '"': *p++ = '\\'; *p++ = '"'; break;
		case '\\': *p++ = '\\'; *p++ = '\\'; break;
		case '\n': *p++ = '\\'; *p++ = 'n'; break;
		case '\t': *p++ = '\\'; *p++ = 't'; break;
		case '\r': *p++ = '\\'; *p++ = 'r'; break;
		default:
			if (*c < 0x20 || *c == 0x7f)
				p += sprintf(p, "\\x%02x", *c);
			else
				*p++ = (char)*c;
		}
	}
	*p++ = '"';
	*p = 0;
	return q;
}
#define quote gk_policy_quote

#define Q(var, s) char *var = quote(s); if (!var) { r->oom = true; return; }

static bool empty(const char *s)
{
	return !s || !*s;
}

/* How many items of a list are checked: at most its CRD limit (the rest is
 * reported once, by validate_sizes, and not checked further). */
static size_t upto(size_t n, size_t max)
{
	return n < max ? n : max;
}

static bool too_long(const char *s, size_t max)
{
	return s && strnlen(s, max + 1) > max;
}

static bool is_pci_id(const char *s)
{
	/* ^0x[0-9a-f]{4}$ */
	if (!s || strlen(s) != 6 || s[0] != '0' || s[1] != 'x')
		return false;
	for (int i = 2; i < 6; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static void check_ids(gk_policy_report *r, const char *field, char **ids, size_t n)
{
	for (size_t i = 0; i < upto(n, GK_POLICY_MAX_PCI_IDS); i++) {
		if (is_pci_id(ids[i]))
			continue;
		Q(q, ids[i]);
		gk_policy_reportf(r, field, "invalid PCI device ID in %s: %s (must match 0x[0-9a-f]{4})", field + 5, q);
		free(q);
	}
}

static void validate_dp(const Gpukmm__ClusterPolicySpec *s, gk_policy_report *r)
{
	const Gpukmm__DevicePluginSpec *dp = s->dp;
	if (!dp)
		return;
	if (dp->n_allow_ids && dp->n_deny_ids)
		gk_policy_reportf(r, "spec.dp.allowIDs", "dp.allowIDs and dp.denyIDs cannot both be set");
	check_ids(r, "spec.dp.allowIDs", dp->allow_ids, dp->n_allow_ids);
	check_ids(r, "spec.dp.denyIDs", dp->deny_ids, dp->n_deny_ids);
}

static void check_image(gk_policy_report *r, const char *field, const char *value)
{
	char msg[MSG_MAX];
	if (empty(value) || too_long(value, GK_POLICY_MAX_IMAGE_LEN) ||
	    gk_policy_check_image_ref(value, msg, sizeof(msg)) == 0)
		return;
	Q(q, value);
	gk_policy_reportf(r, field, "invalid image reference in %s: %s: %s", field + 5, q, msg);
	free(q);
}

static void validate_images(const Gpukmm__ClusterPolicySpec *s, gk_policy_report *r)
{
	check_image(r, "spec.dra.image", s->dra ? s->dra->image : NULL);
	check_image(r, "spec.dp.plugin", s->dp ? s->dp->plugin : NULL);
	check_image(r, "spec.dp.levelzero", s->dp ? s->dp->levelzero : NULL);
	check_image(r, "spec.xpu.image", s->xpu ? s->xpu->image : NULL);
}

static void check_object_name(gk_policy_report *r, const char *field, const char *what, const char *value)
{
	char msg[MSG_MAX];
	if (gk_policy_check_dns1123_subdomain(value, msg, sizeof(msg)) == 0)
		return;
	Q(q, value);
	gk_policy_reportf(r, field, "%s %s is not a valid Kubernetes object name: %s", what, q, msg);
	free(q);
}

static void validate_kueue(const Gpukmm__ClusterPolicySpec *s, gk_policy_report *r)
{
	if (!s->kueue)
		return;
	const Gpukmm__KueueSpec *k = s->kueue;
	char field[128], what[160], msg[MSG_MAX];
	for (size_t i = 0; i < upto(k->n_equal_resources, GK_POLICY_MAX_CLUSTER_QUEUES); i++) {
		const Gpukmm__KueueClusterQueue *cq = k->equal_resources[i];
		snprintf(field, sizeof(field), "spec.kueue.equalResources[%zu].name", i);
		snprintf(what, sizeof(what), "kueue.equalResources[%zu].name", i);
		check_object_name(r, field, what, cq->name ? cq->name : "");
		for (size_t p = 0; p < i; p++) {
			const char *a = k->equal_resources[p]->name ? k->equal_resources[p]->name : "";
			if (strcmp(a, cq->name ? cq->name : "") == 0) {
				Q(q, cq->name);
				gk_policy_reportf(r, field, "kueue.equalResources: duplicate clusterQueue name %s", q);
				free(q);
				break;
			}
		}
		for (size_t j = 0; j < upto(cq->n_local_queues, GK_POLICY_MAX_LOCAL_QUEUES); j++) {
			const Gpukmm__KueueLocalQueue *lq = cq->local_queues[j];
			const char *ln = lq->name ? lq->name : "", *lns = lq->namespace_ ? lq->namespace_ : "";
			snprintf(field, sizeof(field), "spec.kueue.equalResources[%zu].localQueues[%zu].name", i, j);
			snprintf(what, sizeof(what), "kueue.equalResources[%zu].localQueues[%zu].name", i, j);
			check_object_name(r, field, what, ln);
			if (gk_policy_check_dns1123_label(lns, msg, sizeof(msg))) {
				Q(q, lns);
				gk_policy_reportf(r, field,
						  "kueue.equalResources[%zu].localQueues[%zu].namespace %s is not a valid "
						  "namespace name: %s", i, j, q, msg);
				free(q);
			}
			/* upstream checks within one queue; a LocalQueue belongs to one ClusterQueue,
			 * so we check across them too (same message): two would fight over it */
			bool dup = false;
			for (size_t c = 0; c <= i && !dup; c++) {
				const Gpukmm__KueueClusterQueue *oc = k->equal_resources[c];
				for (size_t p = 0; p < (c < i ? oc->n_local_queues : j) && !dup; p++) {
					const Gpukmm__KueueLocalQueue *o = oc->local_queues[p];
					dup = strcmp(o->name ? o->name : "", ln) == 0 &&
					      strcmp(o->namespace_ ? o->namespace_ : "", lns) == 0;
				}
			}
			if (dup) {
				char *key = NULL;
				if (asprintf(&key, "%s/%s", lns, ln) < 0) {
					r->oom = true;
					return;
				}
				char *q = quote(key);
				free(key);
				if (!q) {
					r->oom = true;
					return;
				}
				gk_policy_reportf(r, field, "kueue.equalResources[%zu]: duplicate localQueue %s", i, q);
				free(q);
			}
		}
	}
}

static void validate_mapping(const char *prefix, const Gpukmm__KernelMapping *m, gk_policy_report *r)
{
	char field[192], msg[MSG_MAX];
	snprintf(field, sizeof(field), "spec.%s.regexp", prefix);
	if (empty(m->regexp)) {
		gk_policy_reportf(r, field, "%s: regexp is required", prefix);
	} else if (too_long(m->regexp, GK_POLICY_MAX_REGEXP_LEN)) {
		/* validate_sizes says so; not compiled */
	} else if (gk_policy_check_regexp(m->regexp, msg, sizeof(msg)) != 0) {
		gk_policy_reportf(r, field, "%s.regexp: invalid regular expression: %s", prefix, msg);
	}
	snprintf(field, sizeof(field), "spec.%s.containerImage", prefix);
	if (!empty(m->container_image) && !too_long(m->container_image, GK_POLICY_MAX_IMAGE_LEN)) {
		char *resolved = gk_policy_substitute_kmm_vars(m->container_image);
		if (!resolved) {
			r->oom = true;
			return;
		}
		Q(q, m->container_image);
		if (gk_policy_check_image_ref(resolved, msg, sizeof(msg)) != 0)
			gk_policy_reportf(r, field, "invalid image reference in %s.containerImage: %s: %s", prefix, q, msg);
		else if (!strchr(resolved, ':') && !strchr(resolved, '@'))
			gk_policy_reportf(r, field, "%s.containerImage: image %s must include an explicit tag or digest",
					  prefix, q);
		free(q);
		free(resolved);
	}
	if (empty(m->container_image) && !m->build) {
		snprintf(field, sizeof(field), "spec.%s", prefix);
		gk_policy_reportf(r, field, "%s: one of containerImage or build must be set", prefix);
	}
	if (m->build && empty(m->build->dockerfile_config_map)) {
		snprintf(field, sizeof(field), "spec.%s.build.dockerfileConfigMap.name", prefix);
		gk_policy_reportf(r, field, "%s.build.dockerfileConfigMap.name is required", prefix);
	}
}

static void validate_loading_order(const Gpukmm__KernelModuleSpec *km, gk_policy_report *r)
{
	size_t n = upto(km->n_modules_loading_order, GK_POLICY_MAX_LOADING_ORDER);
	char **order = km->modules_loading_order;
	const char *f = "spec.kernelModule.modulesLoadingOrder";
	if (n < 2)
		gk_policy_reportf(r, f, "kernelModule.modulesLoadingOrder must have at least 2 entries");
	if (n > 0 && !empty(km->module_name) && strcmp(order[0], km->module_name) != 0) {
		Q(q, km->module_name);
		gk_policy_reportf(r, "spec.kernelModule.modulesLoadingOrder[0]",
				  "kernelModule.modulesLoadingOrder[0] must be moduleName %s", q);
		free(q);
	}
	for (size_t i = 1; i < n; i++) {
		for (size_t j = 0; j < i; j++) {
			if (strcmp(order[i], order[j]) == 0) {
				char field[96];
				snprintf(field, sizeof(field), "%s[%zu]", f, i);
				Q(q, order[i]);
				gk_policy_reportf(r, field, "kernelModule.modulesLoadingOrder[%zu]: duplicate entry %s", i, q);
				free(q);
				return; /* only the first duplicate, like upstream */
			}
		}
	}
}

static void validate_kernel_module(const Gpukmm__ClusterPolicySpec *s, gk_policy_report *r)
{
	const Gpukmm__KernelModuleSpec *km = s->kernel_module;
	if (!km)
		return;
	for (size_t i = 0; i < upto(km->n_kernel_mappings, GK_POLICY_MAX_KERNEL_MAPPINGS); i++) {
		char prefix[96];
		snprintf(prefix, sizeof(prefix), "kernelModule.kernelMappings[%zu]", i);
		validate_mapping(prefix, km->kernel_mappings[i], r);
	}
	if (km->n_modules_loading_order > 0)
		validate_loading_order(km, r);
}

/* ---- CRD schema rules (the API server's, for objects that never met it) ------------ */

static bool one_of(const char *v, const char *const *allowed)
{
	for (; *allowed; allowed++)
		if (strcmp(v, *allowed) == 0)
			return true;
	return false;
}

static void enum_check(gk_policy_report *r, const char *field, const char *v, const char *const *allowed,
		       const char *shown)
{
	if (!v || one_of(v, allowed))
		return;
	Q(q, v);
	gk_policy_reportf(r, field, "%s: Unsupported value: %s: supported values: %s", field, q, shown);
	free(q);
}

static void range_check(gk_policy_report *r, const char *field, protobuf_c_boolean has, int32_t v, int lo, int hi)
{
	if (!has)
		return;
	if (v < lo)
		gk_policy_reportf(r, field, "%s: Invalid value: %d: %s in body should be greater than or equal to %d",
				  field, v, field, lo);
	else if (v > hi)
		gk_policy_reportf(r, field, "%s: Invalid value: %d: %s in body should be less than or equal to %d",
				  field, v, field, hi);
}

static void required(gk_policy_report *r, const char *field, bool present)
{
	if (!present)
		gk_policy_reportf(r, field, "%s: Required value", field);
}

/* maxItems / maxProperties / maxLength, worded like the API server */
static void max_items(gk_policy_report *r, const char *field, size_t n, size_t max)
{
	if (n > max)
		gk_policy_reportf(r, field, "%s: Too many: %zu: must have at most %zu items", field, n, max);
}

static void max_len(gk_policy_report *r, const char *field, const char *v, size_t max)
{
	if (too_long(v, max))
		gk_policy_reportf(r, field, "%s: Too long: may not be more than %zu bytes", field, max);
}

static void validate_sizes(const Gpukmm__ClusterPolicySpec *s, gk_policy_report *r)
{
	char field[160];
	max_items(r, "spec.nodeSelector", s->n_node_selector, GK_POLICY_MAX_NODE_SELECTOR);
	max_items(r, "spec.tolerations", s->n_tolerations, GK_POLICY_MAX_TOLERATIONS);
	if (s->dp) {
		max_items(r, "spec.dp.allowIDs", s->dp->n_allow_ids, GK_POLICY_MAX_PCI_IDS);
		max_items(r, "spec.dp.denyIDs", s->dp->n_deny_ids, GK_POLICY_MAX_PCI_IDS);
		max_len(r, "spec.dp.plugin", s->dp->plugin, GK_POLICY_MAX_IMAGE_LEN);
		max_len(r, "spec.dp.levelzero", s->dp->levelzero, GK_POLICY_MAX_IMAGE_LEN);
	}
	if (s->dra)
		max_len(r, "spec.dra.image", s->dra->image, GK_POLICY_MAX_IMAGE_LEN);
	if (s->xpu)
		max_len(r, "spec.xpu.image", s->xpu->image, GK_POLICY_MAX_IMAGE_LEN);
	if (s->kueue) {
		max_items(r, "spec.kueue.equalResources", s->kueue->n_equal_resources, GK_POLICY_MAX_CLUSTER_QUEUES);
		for (size_t i = 0; i < upto(s->kueue->n_equal_resources, GK_POLICY_MAX_CLUSTER_QUEUES); i++) {
			snprintf(field, sizeof(field), "spec.kueue.equalResources[%zu].localQueues", i);
			max_items(r, field, s->kueue->equal_resources[i]->n_local_queues, GK_POLICY_MAX_LOCAL_QUEUES);
		}
	}
	const Gpukmm__KernelModuleSpec *km = s->kernel_module;
	if (!km)
		return;
	max_items(r, "spec.kernelModule.kernelMappings", km->n_kernel_mappings, GK_POLICY_MAX_KERNEL_MAPPINGS);
	max_items(r, "spec.kernelModule.modulesLoadingOrder", km->n_modules_loading_order, GK_POLICY_MAX_LOADING_ORDER);
	for (size_t i = 0; i < upto(km->n_kernel_mappings, GK_POLICY_MAX_KERNEL_MAPPINGS); i++) {
		const Gpukmm__KernelMapping *m = km->kernel_mappings[i];
		snprintf(field, sizeof(field), "spec.kernelModule.kernelMappings[%zu].regexp", i);
		max_len(r, field, m->regexp, GK_POLICY_MAX_REGEXP_LEN);
		snprintf(field, sizeof(field), "spec.kernelModule.kernelMappings[%zu].containerImage", i);
		max_len(r, field, m->container_image, GK_POLICY_MAX_IMAGE_LEN);
		snprintf(field, sizeof(field), "spec.kernelModule.kernelMappings[%zu].inTreeModulesToRemove", i);
		max_items(r, field, m->n_in_tree_modules_to_remove, GK_POLICY_MAX_IN_TREE_REMOVE);
		if (m->build) {
			snprintf(field, sizeof(field), "spec.kernelModule.kernelMappings[%zu].build.buildArgs", i);
			max_items(r, field, m->build->n_build_args, GK_POLICY_MAX_BUILD_ARGS);
			snprintf(field, sizeof(field), "spec.kernelModule.kernelMappings[%zu].build.secrets", i);
			max_items(r, field, m->build->n_secrets, GK_POLICY_MAX_BUILD_SECRETS);
		}
	}
}

static void validate_schema(const Gpukmm__ClusterPolicySpec *s, gk_policy_report *r)
{
	char field[160];
	required(r, "spec.resourceRegistration", s->resource_registration != NULL);
	enum_check(r, "spec.resourceRegistration", s->resource_registration,
		   (const char *const[]){ "dp", "dra", NULL }, "\"dp\", \"dra\"");
	if (s->dp)
		enum_check(r, "spec.dp.byPathMode", s->dp->by_path_mode,
			   (const char *const[]){ "single", "all", "none", NULL }, "\"single\", \"all\", \"none\"");
	if (s->xpu)
		enum_check(r, "spec.xpu.monitoringResource", s->xpu->monitoring_resource,
			   (const char *const[]){ "i915_monitoring", "xe_monitoring", "monitoring", NULL },
			   "\"i915_monitoring\", \"xe_monitoring\", \"monitoring\"");
	if (s->health) {
		range_check(r, "spec.health.checkIntervalSeconds", s->health->has_check_interval_seconds,
			    s->health->check_interval_seconds, 1, 3600);
		range_check(r, "spec.health.coreTemperatureThreshold", s->health->has_core_temperature_threshold,
			    s->health->core_temperature_threshold, 1, 130);
		range_check(r, "spec.health.memoryTemperatureThreshold", s->health->has_memory_temperature_threshold,
			    s->health->memory_temperature_threshold, 1, 130);
	}
	if (s->kueue) {
		for (size_t i = 0; i < upto(s->kueue->n_equal_resources, GK_POLICY_MAX_CLUSTER_QUEUES); i++) {
			const Gpukmm__KueueClusterQueue *q = s->kueue->equal_resources[i];
			snprintf(field, sizeof(field), "spec.kueue.equalResources[%zu].name", i);
			required(r, field, q->name != NULL);
			for (size_t j = 0; j < upto(q->n_local_queues, GK_POLICY_MAX_LOCAL_QUEUES); j++) {
				snprintf(field, sizeof(field), "spec.kueue.equalResources[%zu].localQueues[%zu].name", i, j);
				required(r, field, q->local_queues[j]->name != NULL);
				snprintf(field, sizeof(field), "spec.kueue.equalResources[%zu].localQueues[%zu].namespace",
					 i, j);
				required(r, field, q->local_queues[j]->namespace_ != NULL);
			}
		}
	}
	validate_sizes(s, r);
	const Gpukmm__KernelModuleSpec *km = s->kernel_module;
	if (!km)
		return;
	if (km->n_kernel_mappings == 0)
		gk_policy_reportf(r, "spec.kernelModule.kernelMappings",
				  "spec.kernelModule.kernelMappings: Invalid value: 0: spec.kernelModule.kernelMappings "
				  "in body should have at least 1 items");
	for (size_t i = 0; i < upto(km->n_kernel_mappings, GK_POLICY_MAX_KERNEL_MAPPINGS); i++) {
		const Gpukmm__KernelModuleBuild *b = km->kernel_mappings[i]->build;
		for (size_t j = 0; b && j < upto(b->n_build_args, GK_POLICY_MAX_BUILD_ARGS); j++) {
			snprintf(field, sizeof(field), "spec.kernelModule.kernelMappings[%zu].build.buildArgs[%zu].name", i, j);
			required(r, field, b->build_args[j]->name != NULL);
			snprintf(field, sizeof(field), "spec.kernelModule.kernelMappings[%zu].build.buildArgs[%zu].value", i,
				 j);
			required(r, field, b->build_args[j]->value != NULL);
		}
	}
}

/* ---- gpukmm's own rules (DESIGN §5) ---------------------------------------------- */

/* KMM's toleration rules (kmm.md §1.3), worded like Kubernetes' core validation:
 * the tolerations are copied into the Module and the DaemonSets. */
static void validate_tolerations(const Gpukmm__ClusterPolicySpec *s, gk_policy_report *r)
{
	char field[96], msg[MSG_MAX];
	for (size_t i = 0; i < upto(s->n_tolerations, GK_POLICY_MAX_TOLERATIONS); i++) {
		const Gpukmm__Toleration *t = s->tolerations[i];
		const char *op = t->operator_ ? t->operator_ : "";
		const char *effect = t->effect ? t->effect : "";
		const char *value = t->value ? t->value : "";
		if (!empty(t->key) && gk_policy_check_qualified_name(t->key, msg, sizeof(msg))) {
			snprintf(field, sizeof(field), "spec.tolerations[%zu].key", i);
			Q(q, t->key);
			gk_policy_reportf(r, field, "%s: Invalid value: %s: %s", field, q, msg);
			free(q);
		}
		snprintf(field, sizeof(field), "spec.tolerations[%zu].operator", i);
		if (empty(t->key) && strcmp(op, "Exists") != 0) {
			Q(q, op);
			gk_policy_reportf(r, field,
					  "%s: Invalid value: %s: operator must be Exists when `key` is empty, which means "
					  "\"match all values and all keys\"", field, q);
			free(q);
		}
		if (t->has_toleration_seconds && strcmp(effect, "NoExecute") != 0) {
			char ef[96];
			snprintf(ef, sizeof(ef), "spec.tolerations[%zu].effect", i);
			Q(q, effect);
			gk_policy_reportf(r, ef, "%s: Invalid value: %s: effect must be 'NoExecute' when "
					  "`tolerationSeconds` is set", ef, q);
			free(q);
		}
		if (strcmp(op, "") == 0 || strcmp(op, "Equal") == 0) {
			if (gk_policy_check_label_value(value, msg, sizeof(msg))) {
				char vf[96];
				snprintf(vf, sizeof(vf), "spec.tolerations[%zu].value", i);
				Q(q, value);
				gk_policy_reportf(r, vf, "%s: Invalid value: %s: %s", vf, q, msg);
				free(q);
			}
		} else if (strcmp(op, "Exists") == 0) {
			if (*value) {
				Q(q, value);
				gk_policy_reportf(r, field, "%s: Invalid value: %s: value must be empty when `operator` is "
						  "'Exists'", field, q);
				free(q);
			}
		} else {
			Q(q, op);
			gk_policy_reportf(r, field, "%s: Unsupported value: %s: supported values: \"Equal\", \"Exists\"",
					  field, q);
			free(q);
		}
		if (*effect && strcmp(effect, "NoSchedule") && strcmp(effect, "PreferNoSchedule") &&
		    strcmp(effect, "NoExecute")) {
			char ef[96];
			snprintf(ef, sizeof(ef), "spec.tolerations[%zu].effect", i);
			Q(q, effect);
			gk_policy_reportf(r, ef, "%s: Unsupported value: %s: supported values: \"NoSchedule\", "
					  "\"PreferNoSchedule\", \"NoExecute\"", ef, q);
			free(q);
		}
	}
}

static void validate_ours(const Gpukmm__ClusterPolicy *cp, const gk_policy_opts *o, gk_policy_report *r)
{
	const Gpukmm__ClusterPolicySpec *s = cp->spec;
	const Gpukmm__KernelModuleSpec *km = s->kernel_module;
	validate_tolerations(s, r);
	if (!km)
		return;
	for (size_t i = 0; i < upto(km->n_kernel_mappings, GK_POLICY_MAX_KERNEL_MAPPINGS); i++) {
		const Gpukmm__KernelMapping *m = km->kernel_mappings[i];
		if (m->build && empty(m->container_image)) {
			char field[96];
			snprintf(field, sizeof(field), "spec.kernelModule.kernelMappings[%zu].containerImage", i);
			gk_policy_reportf(r, field,
					  "kernelModule.kernelMappings[%zu].containerImage is required when build is set: "
					  "KMM pushes the built module image there and rejects a mapping without one", i);
		}
	}
	gk_policy_validate_kmm(km, r);
	gk_policy_validate_upgrade(km, r);
	if (km->version && *km->version) {
		char msg[MSG_MAX];
		if (gk_policy_check_label_value(km->version, msg, sizeof(msg))) {
			Q(q, km->version);
			gk_policy_reportf(r, "spec.kernelModule.version",
					  "kernelModule.version %s must be a valid label value (KMM writes it into node "
					  "labels): %s", q, msg);
			free(q);
		}
	}
	const char *name = cp->metadata ? cp->metadata->name : NULL;
	const char *ns = o && o->namespace_ ? o->namespace_ : GK_POLICY_DEFAULT_NAMESPACE;
	if (empty(name)) {
		gk_policy_reportf(r, "metadata.name", "metadata.name: Required value");
		return;
	}
	size_t mlen = strlen(name) + strlen(GK_POLICY_MODULE_SUFFIX), nslen = strlen(ns);
	if (mlen + nslen > GK_POLICY_KMM_MAX_NAME_NS)
		gk_policy_reportf(r, "metadata.name",
				  "metadata.name: the KMM Module \"%s%s\" in namespace \"%s\" would have a combined name "
				  "and namespace length of %zu characters, which exceeds KMM's maximum of %d; use a "
				  "ClusterPolicy name of at most %zu characters",
				  name, GK_POLICY_MODULE_SUFFIX, ns, mlen + nslen, GK_POLICY_KMM_MAX_NAME_NS,
				  GK_POLICY_KMM_MAX_NAME_NS > nslen + 4 ? GK_POLICY_KMM_MAX_NAME_NS - nslen - 4 : 0);
	/* name part of kmm.node.kubernetes.io/<ns>.<cp>-gpu.ready */
	size_t label = nslen + 1 + mlen + strlen(".ready");
	if (label > GK_POLICY_LABEL_NAME_MAX)
		gk_policy_reportf(r, "metadata.name",
				  "metadata.name: the KMM ready label \"%s%s.%s%s.ready\" would have a name part of %zu "
				  "characters, which exceeds the label limit of %d",
				  GK_POLICY_KMM_LABEL_PREFIX, ns, name, GK_POLICY_MODULE_SUFFIX, label,
				  GK_POLICY_LABEL_NAME_MAX);
}

void gk_policy_validate(const Gpukmm__ClusterPolicy *cp, const gk_policy_opts *o, gk_policy_report *r)
{
	static const Gpukmm__ClusterPolicySpec empty_spec = GPUKMM__CLUSTER_POLICY_SPEC__INIT;
	Gpukmm__ClusterPolicy view = *cp;
	if (!view.spec)
		view.spec = (Gpukmm__ClusterPolicySpec *)&empty_spec;
	const Gpukmm__ClusterPolicySpec *s = view.spec;
	/* upstream order: dp, images, pullSecret, configMapOverride, kueue, kernelModule */
	validate_dp(s, r);
	validate_images(s, r);
	if (s->pull_secret)
		check_object_name(r, "spec.pullSecret.name", "pullSecret.name", s->pull_secret);
	if (s->xpu && !empty(s->xpu->config_map_override))
		check_object_name(r, "spec.xpu.configMapOverride", "xpu.configMapOverride", s->xpu->config_map_override);
	validate_kueue(s, r);
	validate_kernel_module(s, r);
	if (s->resource_registration && strcmp(s->resource_registration, "dp") == 0 && s->dp &&
	    !empty(s->dp->levelzero)) {
		char **w = realloc(r->warnings, (r->n_warnings + 1) * sizeof(*w));
		if (w)
			r->warnings = w;
		if (!w || !(r->warnings[r->n_warnings] = strdup(GK_POLICY_WARN_LEVELZERO)))
			r->oom = true;
		else
			r->n_warnings++;
	}
	if (!cp->spec)
		gk_policy_reportf(r, "spec", "spec: Required value");
	else
		validate_schema(s, r);
	validate_ours(&view, o, r);
}

static void collect(void *arg, const char *msg)
{
	gk_policy_report *r = arg;
	const char *colon = strstr(msg, ": ");
	char field[256];
	size_t n = colon ? (size_t)(colon - msg) : 0;
	if (n >= sizeof(field))
		n = sizeof(field) - 1;
	memcpy(field, msg, n);
	field[n] = 0;
	gk_policy_reportf(r, field, "%s", msg);
}

static void check_type_meta(const cJSON *obj, const char *key, const char *want, gk_policy_report *r)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v || cJSON_IsNull(v)) {
		gk_policy_reportf(r, key, "%s: Required value", key);
		return;
	}
	if (!cJSON_IsString(v) || strcmp(v->valuestring, want) != 0) {
		char *got = cJSON_PrintUnformatted(v);
		gk_policy_reportf(r, key, "%s: Invalid value: %s: must be \"%s\"", key, got ? got : "?", want);
		cJSON_free(got);
	}
}

void gk_policy_validate_json(const cJSON *obj, bool report_unknown, const gk_policy_opts *o,
			     gk_policy_report *r, Gpukmm__ClusterPolicy **typed)
{
	Gpukmm__ClusterPolicy *cp = NULL;
	if (typed)
		*typed = NULL;
	if (!cJSON_IsObject(obj)) {
		gk_policy_reportf(r, "", "a ClusterPolicy must be a JSON/YAML object");
		return;
	}
	check_type_meta(obj, "apiVersion", GK_POLICY_API_VERSION, r);
	check_type_meta(obj, "kind", GK_POLICY_KIND, r);
	if (gk_kobj_cluster_policy_parse(obj, report_unknown, collect, r, &cp) < 0) {
		r->oom = true;
		return;
	}
	if (gk_policy_default(cp) < 0)
		r->oom = true;
	gk_policy_validate(cp, o, r);
	if (typed)
		*typed = cp;
	else
		gk_kobj_free(cp);
}
