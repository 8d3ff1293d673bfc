/* lib/kobj: ClusterPolicy (intel.com/v1alpha1) JSON -> Gpukmm__ClusterPolicy, and
 * its status -> JSON. This file is the one place that knows the ClusterPolicy
 * JSON shape and types; lib/policy validates the typed result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "kj.h"

typedef struct pc {
	gk_err e;                 /* scratch for the reader that just ran */
	gk_kobj_error_fn fn;
	void *arg;
	int n;                    /* problems reported */
	bool oom;
	bool stop_first;          /* strict mode: stop at the first problem */
	bool report_unknown;
} pc;

/* true: go on parsing */
static bool ok(pc *c, int rc)
{
	if (rc == 0)
		return true;
	if (rc == GK_RESOURCE_EXHAUSTED) {
		c->oom = true;
		return false;
	}
	c->n++;
	if (c->fn)
		c->fn(c->arg, c->e.msg);
	return !c->stop_first;
}

static bool problem(pc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool problem(pc *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gk_err_vset(&c->e, GK_INVALID_ARGUMENT, fmt, ap);
	va_end(ap);
	return ok(c, GK_INVALID_ARGUMENT);
}

#define TRY(call) do { if (!ok(c, (call))) return false; } while (0)
#define NEW(ptr, init) do { \
	(ptr) = malloc(sizeof(*(ptr))); \
	if (!(ptr)) { c->oom = true; return false; } \
	init(ptr); \
} while (0)

static bool unknown_keys(pc *c, const cJSON *o, const char *path, const char *const *known)
{
	if (!c->report_unknown || !o)
		return true;
	const cJSON *e;
	cJSON_ArrayForEach(e, o) {
		bool found = false;
		for (const char *const *k = known; *k && !found; k++)
			found = e->string && strcmp(e->string, *k) == 0;
		if (!found && !problem(c, "%s%s%s: unknown field", path, *path ? "." : "",
				       e->string ? e->string : "?"))
			return false;
	}
	return true;
}

#define KNOWN(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void *vec(pc *c, const cJSON *a, size_t sz)
{
	void *v = calloc((size_t)cJSON_GetArraySize(a), sz);
	if (!v)
		c->oom = true;
	return v;
}

/* sign (kernelModule.sign, kernelMappings[i].sign): the shared reader, then
 * the keys it does not know */
static bool parse_sign(pc *c, const cJSON *parent, const char *p, Gpukmm__Sign **out)
{
	TRY(gk_kj_sign(parent, "sign", p, out, &c->e));
	const cJSON *o = gk_kj_child(parent, "sign");
	if (!*out || !o)
		return true;
	char sp[200], kp[260];
	snprintf(sp, sizeof(sp), "%s.sign", p);
	if (!unknown_keys(c, o, sp, KNOWN("keySecret", "certSecret", "filesToSign", "unsignedImage",
					   "unsignedImageRegistryTLS")))
		return false;
	static const char *const refs[] = { "keySecret", "certSecret" };
	for (size_t i = 0; i < 2; i++) {
		snprintf(kp, sizeof(kp), "%s.%s", sp, refs[i]);
		if (!unknown_keys(c, gk_kj_child(o, refs[i]), kp, KNOWN("name")))
			return false;
	}
	snprintf(kp, sizeof(kp), "%s.unsignedImageRegistryTLS", sp);
	return unknown_keys(c, gk_kj_child(o, "unsignedImageRegistryTLS"), kp, KNOWN("insecure", "insecureSkipTLSVerify"));
}

static bool parse_mapping(pc *c, const cJSON *m, const char *p, Gpukmm__KernelMapping *km)
{
	TRY(gk_kj_string(m, "regexp", p, &km->regexp, &c->e));
	TRY(gk_kj_string(m, "containerImage", p, &km->container_image, &c->e));
	TRY(gk_kj_string_list(m, "inTreeModulesToRemove", p, &km->n_in_tree_modules_to_remove,
			      &km->in_tree_modules_to_remove, &c->e));
	TRY(gk_kj_registry_tls(m, "registryTLS", p, &km->registry_tls, &c->e));
	if (!parse_sign(c, m, p, &km->sign))
		return false;
	if (!unknown_keys(c, m, p, KNOWN("regexp", "containerImage", "build", "inTreeModulesToRemove",
					 "registryTLS", "sign")))
		return false;
	const cJSON *b;
	TRY(gk_kj_object(m, "build", p, &b, &c->e));
	if (!b)
		return true;
	char bp[256];
	snprintf(bp, sizeof(bp), "%s.build", p);
	NEW(km->build, gpukmm__kernel_module_build__init);
	const cJSON *cm;
	TRY(gk_kj_object(b, "dockerfileConfigMap", bp, &cm, &c->e));
	if (cm) {
		char cp[280];
		snprintf(cp, sizeof(cp), "%s.dockerfileConfigMap", bp);
		TRY(gk_kj_string(cm, "name", cp, &km->build->dockerfile_config_map, &c->e));
		if (!unknown_keys(c, cm, cp, KNOWN("name")))
			return false;
	}
	TRY(gk_kj_build_args(b, "buildArgs", bp, &km->build->n_build_args, &km->build->build_args, &c->e));
	TRY(gk_kj_name_list(b, "secrets", bp, &km->build->n_secrets, &km->build->secrets, &c->e));
	return unknown_keys(c, b, bp, KNOWN("dockerfileConfigMap", "buildArgs", "secrets"));
}

/* IntOrString: a JSON number (an integer) or a string */
static bool parse_int_or_string(pc *c, const cJSON *o, const char *key, const char *p, Gpukmm__IntOrString **out)
{
	const cJSON *v = gk_kj_child(o, key);
	if (!v)
		return true;
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d != (double)(int64_t)d || d < INT32_MIN || d > INT32_MAX)
			return problem(c, "%s.%s: expected an integer or a string, got %g", p, key, d);
		NEW(*out, gpukmm__int_or_string__init);
		(*out)->has_int_val = 1;
		(*out)->int_val = (int32_t)d;
		return true;
	}
	if (cJSON_IsString(v)) {
		NEW(*out, gpukmm__int_or_string__init);
		if (!((*out)->str_val = strdup(v->valuestring))) {
			c->oom = true;
			return false;
		}
		return true;
	}
	return problem(c, "%s.%s: expected an integer or a string, got %s", p, key, gk_kj_type_name(v));
}

static bool parse_upgrade_policy(pc *c, const cJSON *o, Gpukmm__UpgradePolicy *u)
{
	const char *p = "spec.kernelModule.upgradePolicy";
	TRY(gk_kj_bool(o, "autoUpgrade", p, &u->has_auto_upgrade, &u->auto_upgrade, &c->e));
	TRY(gk_kj_int32(o, "maxParallel", p, &u->has_max_parallel, &u->max_parallel, &c->e));
	if (!parse_int_or_string(c, o, "maxUnavailable", p, &u->max_unavailable))
		return false;
	if (!unknown_keys(c, o, p, KNOWN("autoUpgrade", "maxParallel", "maxUnavailable", "drain")))
		return false;
	const cJSON *d;
	TRY(gk_kj_object(o, "drain", p, &d, &c->e));
	if (!d)
		return true;
	const char *dp = "spec.kernelModule.upgradePolicy.drain";
	NEW(u->drain, gpukmm__upgrade_drain__init);
	Gpukmm__UpgradeDrain *dr = u->drain;
	TRY(gk_kj_bool(d, "enable", dp, &dr->has_enable, &dr->enable, &c->e));
	TRY(gk_kj_int32(d, "timeoutSeconds", dp, &dr->has_timeout_seconds, &dr->timeout_seconds, &c->e));
	TRY(gk_kj_int64(d, "gracePeriodSeconds", dp, &dr->has_grace_period_seconds, &dr->grace_period_seconds,
			&c->e));
	TRY(gk_kj_string(d, "podSelector", dp, &dr->pod_selector, &c->e));
	TRY(gk_kj_bool(d, "deleteEmptyDirData", dp, &dr->has_delete_empty_dir_data, &dr->delete_empty_dir_data,
		       &c->e));
	TRY(gk_kj_bool(d, "force", dp, &dr->has_force, &dr->force, &c->e));
	return unknown_keys(c, d, dp, KNOWN("enable", "timeoutSeconds", "gracePeriodSeconds", "podSelector",
					    "deleteEmptyDirData", "force"));
}

static bool parse_kernel_module(pc *c, const cJSON *o, Gpukmm__KernelModuleSpec *k)
{
	const char *p = "spec.kernelModule";
	TRY(gk_kj_string(o, "moduleName", p, &k->module_name, &c->e));
	TRY(gk_kj_string(o, "version", p, &k->version, &c->e));
	TRY(gk_kj_string_list(o, "modulesLoadingOrder", p, &k->n_modules_loading_order,
			      &k->modules_loading_order, &c->e));
	TRY(gk_kj_string(o, "firmwarePath", p, &k->firmware_path, &c->e));
	TRY(gk_kj_registry_tls(o, "registryTLS", p, &k->registry_tls, &c->e));
	TRY(gk_kj_string_list(o, "parameters", p, &k->n_parameters, &k->parameters, &c->e));
	if (!parse_sign(c, o, p, &k->sign))
		return false;
	if (!unknown_keys(c, o, p, KNOWN("moduleName", "version", "kernelMappings", "modulesLoadingOrder",
					 "firmwarePath", "registryTLS", "parameters", "sign", "upgradePolicy")))
		return false;
	const cJSON *up;
	TRY(gk_kj_object(o, "upgradePolicy", p, &up, &c->e));
	if (up) {
		NEW(k->upgrade_policy, gpukmm__upgrade_policy__init);
		if (!parse_upgrade_policy(c, up, k->upgrade_policy))
			return false;
	}
	const cJSON *a;
	TRY(gk_kj_array(o, "kernelMappings", p, &a, &c->e));
	if (!a || cJSON_GetArraySize(a) == 0)
		return true;
	if (!(k->kernel_mappings = vec(c, a, sizeof(*k->kernel_mappings))))
		return false;
	const cJSON *m;
	size_t i = 0;
	cJSON_ArrayForEach(m, a) {
		char mp[128];
		snprintf(mp, sizeof(mp), "%s.kernelMappings[%zu]", p, i++);
		if (!cJSON_IsObject(m)) {
			if (!problem(c, "%s: expected object, got %s", mp, gk_kj_type_name(m)))
				return false;
			continue;
		}
		Gpukmm__KernelMapping *km;
		NEW(km, gpukmm__kernel_mapping__init);
		k->kernel_mappings[k->n_kernel_mappings++] = km;
		if (!parse_mapping(c, m, mp, km))
			return false;
	}
	return true;
}

static bool parse_dp(pc *c, const cJSON *o, Gpukmm__DevicePluginSpec *d)
{
	const char *p = "spec.dp";
	TRY(gk_kj_string(o, "plugin", p, &d->plugin, &c->e));
	TRY(gk_kj_string(o, "levelzero", p, &d->levelzero, &c->e));
	TRY(gk_kj_string_list(o, "allowIDs", p, &d->n_allow_ids, &d->allow_ids, &c->e));
	TRY(gk_kj_string_list(o, "denyIDs", p, &d->n_deny_ids, &d->deny_ids, &c->e));
	TRY(gk_kj_string(o, "byPathMode", p, &d->by_path_mode, &c->e));
	TRY(gk_kj_int32(o, "logLevel", p, &d->has_log_level, &d->log_level, &c->e));
	return unknown_keys(c, o, p, KNOWN("plugin", "levelzero", "allowIDs", "denyIDs", "byPathMode", "logLevel"));
}

static bool parse_dra(pc *c, const cJSON *o, Gpukmm__DraSpec *d)
{
	const char *p = "spec.dra";
	TRY(gk_kj_string(o, "image", p, &d->image, &c->e));
	TRY(gk_kj_int32(o, "logLevel", p, &d->has_log_level, &d->log_level, &c->e));
	TRY(gk_kj_bool(o, "podHealthCheck", p, &d->has_pod_health_check, &d->pod_health_check, &c->e));
	TRY(gk_kj_bool(o, "manageBinding", p, &d->has_manage_binding, &d->manage_binding, &c->e));
	return unknown_keys(c, o, p, KNOWN("image", "logLevel", "podHealthCheck", "manageBinding"));
}

static bool parse_xpu(pc *c, const cJSON *o, Gpukmm__XpuSpec *x)
{
	const char *p = "spec.xpu";
	TRY(gk_kj_string(o, "image", p, &x->image, &c->e));
	TRY(gk_kj_int32(o, "logLevel", p, &x->has_log_level, &x->log_level, &c->e));
	TRY(gk_kj_string(o, "configMapOverride", p, &x->config_map_override, &c->e));
	TRY(gk_kj_string(o, "monitoringResource", p, &x->monitoring_resource, &c->e));
	return unknown_keys(c, o, p, KNOWN("image", "logLevel", "configMapOverride", "monitoringResource"));
}

static bool parse_health(pc *c, const cJSON *o, Gpukmm__HealthSpec *h)
{
	const char *p = "spec.health";
	TRY(gk_kj_int32(o, "checkIntervalSeconds", p, &h->has_check_interval_seconds,
			&h->check_interval_seconds, &c->e));
	TRY(gk_kj_int32(o, "coreTemperatureThreshold", p, &h->has_core_temperature_threshold,
			&h->core_temperature_threshold, &c->e));
	TRY(gk_kj_int32(o, "memoryTemperatureThreshold", p, &h->has_memory_temperature_threshold,
			&h->memory_temperature_threshold, &c->e));
	return unknown_keys(c, o, p, KNOWN("checkIntervalSeconds", "coreTemperatureThreshold",
					   "memoryTemperatureThreshold"));
}

static bool parse_kueue(pc *c, const cJSON *o, Gpukmm__KueueSpec *k)
{
	const char *p = "spec.kueue";
	if (!unknown_keys(c, o, p, KNOWN("equalResources")))
		return false;
	const cJSON *a;
	TRY(gk_kj_array(o, "equalResources", p, &a, &c->e));
	if (!a || cJSON_GetArraySize(a) == 0)
		return true;
	if (!(k->equal_resources = vec(c, a, sizeof(*k->equal_resources))))
		return false;
	const cJSON *e;
	size_t i = 0;
	cJSON_ArrayForEach(e, a) {
		char ep[96];
		snprintf(ep, sizeof(ep), "%s.equalResources[%zu]", p, i++);
		if (!cJSON_IsObject(e)) {
			if (!problem(c, "%s: expected object, got %s", ep, gk_kj_type_name(e)))
				return false;
			continue;
		}
		Gpukmm__KueueClusterQueue *q;
		NEW(q, gpukmm__kueue_cluster_queue__init);
		k->equal_resources[k->n_equal_resources++] = q;
		TRY(gk_kj_string(e, "name", ep, &q->name, &c->e));
		if (!unknown_keys(c, e, ep, KNOWN("name", "localQueues")))
			return false;
		const cJSON *la;
		TRY(gk_kj_array(e, "localQueues", ep, &la, &c->e));
		if (!la || cJSON_GetArraySize(la) == 0)
			continue;
		if (!(q->local_queues = vec(c, la, sizeof(*q->local_queues))))
			return false;
		const cJSON *l;
		size_t j = 0;
		cJSON_ArrayForEach(l, la) {
			char lp[128];
			snprintf(lp, sizeof(lp), "%s.localQueues[%zu]", ep, j++);
			if (!cJSON_IsObject(l)) {
				if (!problem(c, "%s: expected object, got %s", lp, gk_kj_type_name(l)))
					return false;
				continue;
			}
			Gpukmm__KueueLocalQueue *lq;
			NEW(lq, gpukmm__kueue_local_queue__init);
			q->local_queues[q->n_local_queues++] = lq;
			TRY(gk_kj_string(l, "name", lp, &lq->name, &c->e));
			TRY(gk_kj_string(l, "namespace", lp, &lq->namespace_, &c->e));
			if (!unknown_keys(c, l, lp, KNOWN("name", "namespace")))
				return false;
		}
	}
	return true;
}

#define SUB(field, key, init, fn) do { \
	const cJSON *o_; \
	TRY(gk_kj_object(spec, key, p, &o_, &c->e)); \
	if (o_) { \
		NEW(s->field, init); \
		if (!fn(c, o_, s->field)) \
			return false; \
	} \
} while (0)

static bool parse_spec(pc *c, const cJSON *spec, Gpukmm__ClusterPolicySpec *s)
{
	const char *p = "spec";
	TRY(gk_kj_string(spec, "resourceRegistration", p, &s->resource_registration, &c->e));
	TRY(gk_kj_bool(spec, "resourceMonitoring", p, &s->has_resource_monitoring, &s->resource_monitoring, &c->e));
	TRY(gk_kj_bool(spec, "useNFDLabeling", p, &s->has_use_nfd_labeling, &s->use_nfd_labeling, &c->e));
	TRY(gk_kj_bool(spec, "prometheusIntegration", p, &s->has_prometheus_integration,
		       &s->prometheus_integration, &c->e));
	TRY(gk_kj_bool(spec, "enableKueue", p, &s->has_enable_kueue, &s->enable_kueue, &c->e));
	const cJSON *ps;
	TRY(gk_kj_object(spec, "pullSecret", p, &ps, &c->e));
	if (ps) {
		TRY(gk_kj_string(ps, "name", "spec.pullSecret", &s->pull_secret, &c->e));
		if (!s->pull_secret && !(s->pull_secret = strdup(""))) {
			c->oom = true;
			return false;
		}
		if (!unknown_keys(c, ps, "spec.pullSecret", KNOWN("name")))
			return false;
	}
	TRY(gk_kj_string_map(spec, "nodeSelector", p, NULL, &s->n_node_selector, &s->node_selector, &c->e));
	TRY(gk_kj_tolerations(spec, "tolerations", p, &s->n_tolerations, &s->tolerations, &c->e));
	TRY(gk_kj_int32(spec, "logLevel", p, &s->has_log_level, &s->log_level, &c->e));
	SUB(kernel_module, "kernelModule", gpukmm__kernel_module_spec__init, parse_kernel_module);
	SUB(dp, "dp", gpukmm__device_plugin_spec__init, parse_dp);
	SUB(dra, "dra", gpukmm__dra_spec__init, parse_dra);
	SUB(xpu, "xpu", gpukmm__xpu_spec__init, parse_xpu);
	SUB(kueue, "kueue", gpukmm__kueue_spec__init, parse_kueue);
	SUB(health, "health", gpukmm__health_spec__init, parse_health);
	return unknown_keys(c, spec, p, KNOWN("resourceRegistration", "resourceMonitoring", "useNFDLabeling",
					      "prometheusIntegration", "enableKueue", "kueue", "health", "dra",
					      "dp", "xpu", "pullSecret", "nodeSelector", "tolerations",
					      "logLevel", "kernelModule"));
}

static bool parse_conditions(pc *c, const cJSON *st, Gpukmm__ClusterPolicyStatus *s)
{
	const cJSON *a;
	TRY(gk_kj_array(st, "conditions", "status", &a, &c->e));
	if (!a || cJSON_GetArraySize(a) == 0)
		return true;
	if (!(s->conditions = vec(c, a, sizeof(*s->conditions))))
		return false;
	const cJSON *e;
	size_t i = 0;
	cJSON_ArrayForEach(e, a) {
		char p[64];
		snprintf(p, sizeof(p), "status.conditions[%zu]", i++);
		if (!cJSON_IsObject(e)) {
			if (!problem(c, "%s: expected object, got %s", p, gk_kj_type_name(e)))
				return false;
			continue;
		}
		Gpukmm__Condition *k;
		NEW(k, gpukmm__condition__init);
		s->conditions[s->n_conditions++] = k;
		TRY(gk_kj_string(e, "type", p, &k->type, &c->e));
		TRY(gk_kj_string(e, "status", p, &k->status, &c->e));
		TRY(gk_kj_string(e, "reason", p, &k->reason, &c->e));
		TRY(gk_kj_string(e, "message", p, &k->message, &c->e));
		TRY(gk_kj_string(e, "lastTransitionTime", p, &k->last_transition_time, &c->e));
		TRY(gk_kj_int64(e, "observedGeneration", p, &k->has_observed_generation, &k->observed_generation,
				&c->e));
	}
	return true;
}

static bool u32(pc *c, const cJSON *o, const char *key, const char *p, protobuf_c_boolean *has, uint32_t *out)
{
	int64_t v = 0;
	protobuf_c_boolean h = 0;
	TRY(gk_kj_int64(o, key, p, &h, &v, &c->e));
	if (!h)
		return true;
	if (v < 0 || v > UINT32_MAX)
		return problem(c, "%s.%s: out of range", p, key);
	*has = 1;
	*out = (uint32_t)v;
	return true;
}

static bool parse_nodes(pc *c, const cJSON *o, Gpukmm__NodesSummary *n)
{
	const char *p = "status.nodes";
	if (!u32(c, o, "gpuNodes", p, &n->has_gpu_nodes, &n->gpu_nodes) ||
	    !u32(c, o, "ootLoaded", p, &n->has_oot_loaded, &n->oot_loaded) ||
	    !u32(c, o, "inTreeLoaded", p, &n->has_in_tree_loaded, &n->in_tree_loaded) ||
	    !u32(c, o, "notLoaded", p, &n->has_not_loaded, &n->not_loaded) ||
	    !u32(c, o, "unknown", p, &n->has_unknown, &n->unknown))
		return false;
	const cJSON *a;
	TRY(gk_kj_array(o, "problems", p, &a, &c->e));
	if (!a || cJSON_GetArraySize(a) == 0)
		return true;
	if (!(n->problems = vec(c, a, sizeof(*n->problems))))
		return false;
	const cJSON *e;
	size_t i = 0;
	cJSON_ArrayForEach(e, a) {
		char pp[64];
		snprintf(pp, sizeof(pp), "%s.problems[%zu]", p, i++);
		if (!cJSON_IsObject(e)) {
			if (!problem(c, "%s: expected object, got %s", pp, gk_kj_type_name(e)))
				return false;
			continue;
		}
		Gpukmm__NodeProblem *np;
		NEW(np, gpukmm__node_problem__init);
		n->problems[n->n_problems++] = np;
		TRY(gk_kj_string(e, "node", pp, &np->node, &c->e));
		TRY(gk_kj_string(e, "reason", pp, &np->reason, &c->e));
		TRY(gk_kj_string(e, "message", pp, &np->message, &c->e));
	}
	return true;
}

static bool parse_status(pc *c, const cJSON *st, Gpukmm__ClusterPolicyStatus *s)
{
	const char *p = "status";
	TRY(gk_kj_string(st, "kmmStatus", p, &s->kmm_status, &c->e));
	TRY(gk_kj_string(st, "devicePluginStatus", p, &s->device_plugin_status, &c->e));
	TRY(gk_kj_string(st, "draStatus", p, &s->dra_status, &c->e));
	TRY(gk_kj_string(st, "xpuManagerStatus", p, &s->xpu_manager_status, &c->e));
	TRY(gk_kj_string_list(st, "errors", p, &s->n_errors, &s->errors, &c->e));
	TRY(gk_kj_int64(st, "observedGeneration", p, &s->has_observed_generation, &s->observed_generation, &c->e));
	if (!parse_conditions(c, st, s))
		return false;
	const cJSON *n;
	TRY(gk_kj_object(st, "nodes", p, &n, &c->e));
	if (n) {
		NEW(s->nodes, gpukmm__nodes_summary__init);
		if (!parse_nodes(c, n, s->nodes))
			return false;
	}
	return true;
}

static bool parse_all(pc *c, const cJSON *obj, Gpukmm__ClusterPolicy *cp)
{
	if (!cJSON_IsObject(obj))
		return problem(c, "object: expected object, got %s", gk_kj_type_name(obj));
	int rc = gk_kobj_meta_from_json(obj, NULL, &cp->metadata, &c->e);
	if (!ok(c, rc))
		return false;
	const cJSON *spec, *st;
	TRY(gk_kj_object(obj, "spec", "", &spec, &c->e));
	if (spec) {
		NEW(cp->spec, gpukmm__cluster_policy_spec__init);
		if (!parse_spec(c, spec, cp->spec))
			return false;
	}
	TRY(gk_kj_object(obj, "status", "", &st, &c->e));
	if (st) {
		NEW(cp->status, gpukmm__cluster_policy_status__init);
		if (!parse_status(c, st, cp->status))
			return false;
	}
	return unknown_keys(c, obj, "", KNOWN("apiVersion", "kind", "metadata", "spec", "status"));
}

int gk_kobj_cluster_policy_parse(const cJSON *obj, bool report_unknown, gk_kobj_error_fn on_error, void *arg,
				 Gpukmm__ClusterPolicy **out)
{
	pc c = { .fn = on_error, .arg = arg, .report_unknown = report_unknown };
	*out = NULL;
	Gpukmm__ClusterPolicy *cp = malloc(sizeof(*cp));
	if (!cp)
		return -1;
	gpukmm__cluster_policy__init(cp);
	parse_all(&c, obj, cp);
	if (c.oom) {
		gk_kobj_free(cp);
		return -1;
	}
	*out = cp;
	return c.n;
}

static void first_error(void *arg, const char *msg)
{
	gk_err_set(arg, GK_INVALID_ARGUMENT, "%s", msg);
}

int gk_kobj_cluster_policy_from_json(const cJSON *obj, Gpukmm__ClusterPolicy **out, gk_err *err)
{
	gk_err local;
	pc c = { .fn = first_error, .arg = err ? err : &local, .stop_first = true };
	*out = NULL;
	Gpukmm__ClusterPolicy *cp = malloc(sizeof(*cp));
	if (!cp)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	gpukmm__cluster_policy__init(cp);
	parse_all(&c, obj, cp);
	if (c.oom || c.n) {
		gk_kobj_free(cp);
		return c.oom ? gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory") : GK_INVALID_ARGUMENT;
	}
	*out = cp;
	return 0;
}

/* ---- status -> JSON ------------------------------------------------------- */

static bool add_u32(cJSON *o, const char *k, protobuf_c_boolean has, uint32_t v)
{
	return !has || cJSON_AddNumberToObject(o, k, v);
}

cJSON *gk_kobj_upgrade_status_to_json(const Gpukmm__UpgradeStatus *u)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	bool ok = gk_kj_add_str(o, "targetVersion", u->target_version) &&
		  (!u->has_auto_upgrade || cJSON_AddBoolToObject(o, "autoUpgrade", u->auto_upgrade)) &&
		  add_u32(o, "nodes", u->has_nodes, u->nodes) && add_u32(o, "upToDate", u->has_up_to_date, u->up_to_date) &&
		  add_u32(o, "pending", u->has_pending, u->pending) && add_u32(o, "draining", u->has_draining, u->draining) &&
		  add_u32(o, "unloading", u->has_unloading, u->unloading) &&
		  add_u32(o, "loading", u->has_loading, u->loading) && add_u32(o, "failed", u->has_failed, u->failed) &&
		  add_u32(o, "skipped", u->has_skipped, u->skipped) &&
		  add_u32(o, "maxParallel", u->has_max_parallel, u->max_parallel) &&
		  add_u32(o, "maxUnavailable", u->has_max_unavailable, u->max_unavailable) &&
		  add_u32(o, "unavailable", u->has_unavailable, u->unavailable) &&
		  (!u->has_halted || cJSON_AddBoolToObject(o, "halted", u->halted));
	if (ok && u->n_problems) {
		cJSON *a = cJSON_AddArrayToObject(o, "problems");
		ok = a != NULL;
		for (size_t i = 0; ok && i < u->n_problems; i++) {
			const Gpukmm__UpgradeNode *n = u->problems[i];
			cJSON *p = cJSON_CreateObject();
			ok = p != NULL;
			if (p)
				cJSON_AddItemToArray(a, p);
			ok = ok && gk_kj_add_str(p, "node", n->node) && gk_kj_add_str(p, "state", n->state) &&
			     gk_kj_add_str(p, "reason", n->reason) && gk_kj_add_str(p, "message", n->message);
		}
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

cJSON *gk_kobj_cluster_policy_status_to_json(const Gpukmm__ClusterPolicyStatus *st)
{
	cJSON *j = cJSON_CreateObject();
	if (!j || !st)
		return j;
	if (!gk_kj_add_str(j, "devicePluginStatus", st->device_plugin_status) ||
	    !gk_kj_add_str(j, "draStatus", st->dra_status) ||
	    !gk_kj_add_str(j, "xpuManagerStatus", st->xpu_manager_status) ||
	    !gk_kj_add_str(j, "kmmStatus", st->kmm_status))
		goto fail;
	/* errors is always written (possibly empty) so a cleared error really disappears */
	cJSON *e = gk_kj_strings_to_array(st->errors, st->n_errors);
	if (!e)
		goto fail;
	cJSON_AddItemToObject(j, "errors", e);
	if (st->has_observed_generation &&
	    !cJSON_AddNumberToObject(j, "observedGeneration", (double)st->observed_generation))
		goto fail;
	if (st->n_conditions) {
		cJSON *a = cJSON_AddArrayToObject(j, "conditions");
		if (!a)
			goto fail;
		for (size_t i = 0; i < st->n_conditions; i++) {
			const Gpukmm__Condition *k = st->conditions[i];
			cJSON *o = cJSON_CreateObject();
			if (!o)
				goto fail;
			cJSON_AddItemToArray(a, o);
			if (!gk_kj_add_str(o, "type", k->type) || !gk_kj_add_str(o, "status", k->status) ||
			    (k->has_observed_generation &&
			     !cJSON_AddNumberToObject(o, "observedGeneration", (double)k->observed_generation)) ||
			    !gk_kj_add_str(o, "lastTransitionTime", k->last_transition_time) ||
			    !cJSON_AddStringToObject(o, "reason", k->reason ? k->reason : "") ||
			    !cJSON_AddStringToObject(o, "message", k->message ? k->message : ""))
				goto fail;
		}
	}
	if (st->nodes) {
		const Gpukmm__NodesSummary *n = st->nodes;
		cJSON *o = cJSON_AddObjectToObject(j, "nodes");
		if (!o || !add_u32(o, "gpuNodes", n->has_gpu_nodes, n->gpu_nodes) ||
		    !add_u32(o, "ootLoaded", n->has_oot_loaded, n->oot_loaded) ||
		    !add_u32(o, "inTreeLoaded", n->has_in_tree_loaded, n->in_tree_loaded) ||
		    !add_u32(o, "notLoaded", n->has_not_loaded, n->not_loaded) ||
		    !add_u32(o, "unknown", n->has_unknown, n->unknown))
			goto fail;
		if (n->n_problems) {
			cJSON *a = cJSON_AddArrayToObject(o, "problems");
			if (!a)
				goto fail;
			for (size_t i = 0; i < n->n_problems; i++) {
				cJSON *p = cJSON_CreateObject();
				if (!p)
					goto fail;
				cJSON_AddItemToArray(a, p);
				if (!gk_kj_add_str(p, "node", n->problems[i]->node) ||
				    !gk_kj_add_str(p, "reason", n->problems[i]->reason) ||
				    !gk_kj_add_str(p, "message", n->problems[i]->message))
					goto fail;
			}
		}
	}
	if (st->upgrade) {
		cJSON *u = gk_kobj_upgrade_status_to_json(st->upgrade);
		if (!u)
			goto fail;
		cJSON_AddItemToObject(j, "upgrade", u);
	}
	return j;
fail:
	cJSON_Delete(j);
	return NULL;
}
