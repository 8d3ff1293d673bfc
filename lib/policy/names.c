/* lib/policy: names and label keys derived from a ClusterPolicy, the gated
 * DaemonSets and the generated node selector (upstream §2.2, §3). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"

static int fmt(char *buf, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fmt(char *buf, size_t cap, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vsnprintf(buf, cap, f, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? GK_OUT_OF_RANGE : 0;
}

static const char *ns_or_default(const char *ns)
{
	return ns && *ns ? ns : GK_POLICY_DEFAULT_NAMESPACE;
}

int gk_policy_module_name(char *buf, size_t cap, const char *cp_name)
{
	return fmt(buf, cap, "%s%s", cp_name ? cp_name : "", GK_POLICY_MODULE_SUFFIX);
}

int gk_policy_ready_label(char *buf, size_t cap, const char *ns, const char *cp_name)
{
	return fmt(buf, cap, "%s%s.%s%s.ready", GK_POLICY_KMM_LABEL_PREFIX, ns_or_default(ns), cp_name ? cp_name : "",
		   GK_POLICY_MODULE_SUFFIX);
}

int gk_policy_version_label(char *buf, size_t cap, const char *ns, const char *cp_name)
{
	return fmt(buf, cap, "%sversion-module.%s.%s%s", GK_POLICY_KMM_LABEL_PREFIX, ns_or_default(ns),
		   cp_name ? cp_name : "", GK_POLICY_MODULE_SUFFIX);
}

unsigned gk_policy_daemonsets(const Gpukmm__ClusterPolicySpec *spec, bool dra_available)
{
	unsigned set = 0;
	if (!spec)
		return 0;
	const char *rr = spec->resource_registration ? spec->resource_registration : "";
	if (strcmp(rr, "dp") == 0)
		set |= GK_POLICY_DS_DEVICE_PLUGIN;
	if (strcmp(rr, "dra") == 0 && dra_available)
		set |= GK_POLICY_DS_DRA;
	if (spec->has_resource_monitoring && spec->resource_monitoring)
		set |= GK_POLICY_DS_XPU_MANAGER;
	return set;
}

int gk_policy_ds_name(char *buf, size_t cap, const char *cp_name, enum gk_policy_ds which)
{
	const char *suffix;
	switch (which) {
	case GK_POLICY_DS_DEVICE_PLUGIN: suffix = "-device-plugin"; break;
	case GK_POLICY_DS_DRA: suffix = "-gpu-dra"; break;
	case GK_POLICY_DS_XPU_MANAGER: suffix = "-xpu-manager"; break;
	default: return GK_INVALID_ARGUMENT;
	}
	return fmt(buf, cap, "%s%s", cp_name ? cp_name : "", suffix);
}

bool gk_policy_gating_wanted(const Gpukmm__ClusterPolicySpec *spec, bool kmm_available)
{
	return kmm_available && spec && spec->kernel_module;
}

bool gk_policy_module_recreating(const Gpukmm__ClusterPolicy *cp)
{
	const Gpukmm__ClusterPolicyStatus *st = cp ? cp->status : NULL;
	for (size_t i = 0; st && i < st->n_conditions; i++) {
		const Gpukmm__Condition *c = st->conditions[i];
		if (c && c->type && !strcmp(c->type, GK_POLICY_COND_MODULE_LOADED))
			return c->reason && !strcmp(c->reason, GK_POLICY_REASON_RECREATING);
	}
	return false;
}

void gk_policy_selector_free(gk_policy_selector *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		gk_kobj_free(s->kv[i]);
	free(s->kv);
	s->kv = NULL;
	s->n = 0;
}

static Gpukmm__KeyValue *kv_new(const char *k, const char *v)
{
	Gpukmm__KeyValue *kv = malloc(sizeof(*kv));
	if (!kv)
		return NULL;
	gpukmm__key_value__init(kv);
	kv->key = strdup(k);
	kv->value = strdup(v ? v : "");
	if (!kv->key || !kv->value) {
		gk_kobj_free(kv);
		return NULL;
	}
	return kv;
}

/* set key (replace value when present) */
static int sel_set(gk_policy_selector *s, const char *k, const char *v)
{
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->kv[i]->key, k) == 0) {
			char *nv = strdup(v ? v : "");
			if (!nv)
				return GK_RESOURCE_EXHAUSTED;
			free(s->kv[i]->value);
			s->kv[i]->value = nv;
			return 0;
		}
	}
	Gpukmm__KeyValue **kv = realloc(s->kv, (s->n + 1) * sizeof(*kv));
	if (!kv)
		return GK_RESOURCE_EXHAUSTED;
	s->kv = kv;
	if (!(s->kv[s->n] = kv_new(k, v)))
		return GK_RESOURCE_EXHAUSTED;
	s->n++;
	return 0;
}

static int kv_cmp(const void *a, const void *b)
{
	return strcmp((*(Gpukmm__KeyValue *const *)a)->key, (*(Gpukmm__KeyValue *const *)b)->key);
}

int gk_policy_node_selector(const Gpukmm__ClusterPolicySpec *spec, const char *ready_label, gk_policy_selector *out)
{
	gk_policy_selector s = { 0 };
	int rc = sel_set(&s, GK_POLICY_ARCH_LABEL, GK_POLICY_ARCH_VALUE);
	for (size_t i = 0; !rc && spec && i < spec->n_node_selector; i++)
		if (spec->node_selector[i]->key)
			rc = sel_set(&s, spec->node_selector[i]->key, spec->node_selector[i]->value);
	if (!rc && spec && spec->has_use_nfd_labeling && spec->use_nfd_labeling)
		rc = sel_set(&s, GK_POLICY_NFD_LABEL, "true");
	if (!rc && ready_label)
		rc = sel_set(&s, ready_label, "");
	if (rc) {
		gk_policy_selector_free(&s);
		return rc;
	}
	if (s.n > 1)
		qsort(s.kv, s.n, sizeof(*s.kv), kv_cmp);
	*out = s;
	return 0;
}
