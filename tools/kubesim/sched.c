/* kubesim — scheduling predicates (see sched.h). */
#include "jsonutil.h"
#include "sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int in_values(const cJSON *values, const char *v)
{
	const cJSON *x;
	cJSON_ArrayForEach(x, values) if (v && cJSON_IsString(x) && strcmp(x->valuestring, v) == 0) return 1;
	return 0;
}

int ks_labelsel_match(const cJSON *sel, const cJSON *labels)
{
	if (!cJSON_IsObject(sel))
		return 0;
	const cJSON *m;
	cJSON_ArrayForEach(m, ks_jget(sel, "matchLabels")) {
		const char *v = ks_jstr(labels, m->string);
		if (!v || !cJSON_IsString(m) || strcmp(v, m->valuestring) != 0)
			return 0;
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, ks_jget(sel, "matchExpressions")) {
		const char *k = ks_jstr(e, "key"), *op = ks_jstr(e, "operator");
		if (!k || !op)
			return 0;
		const char *v = ks_jstr(labels, k);
		int in = in_values(ks_jget(e, "values"), v);
		if (strcmp(op, "In") == 0) {
			if (!in)
				return 0;
		} else if (strcmp(op, "NotIn") == 0) {
			if (in)
				return 0;
		} else if (strcmp(op, "Exists") == 0) {
			if (!v)
				return 0;
		} else if (strcmp(op, "DoesNotExist") == 0) {
			if (v)
				return 0;
		} else {
			return 0;
		}
	}
	return 1;
}

int ks_tolerates(const cJSON *tolerations, const cJSON *taint)
{
	const char *tk = ks_jstr(taint, "key"), *tv = ks_jstr(taint, "value"), *te = ks_jstr(taint, "effect");
	const cJSON *t;
	cJSON_ArrayForEach(t, tolerations) {
		const char *k = ks_jstr(t, "key"), *op = ks_jstr(t, "operator"), *v = ks_jstr(t, "value"), *e = ks_jstr(t, "effect");
		if (e && *e && (!te || strcmp(e, te) != 0))
			continue;
		if (k && *k && (!tk || strcmp(k, tk) != 0))
			continue;
		if (!op || !*op || strcmp(op, "Equal") == 0) {
			if (strcmp(v ? v : "", tv ? tv : "") == 0)
				return 1;
		} else if (strcmp(op, "Exists") == 0) {
			return 1;
		}
	}
	return 0;
}

/* One NodeSelectorRequirement against a value (label or field); absent = NULL. */
static int requirement(const cJSON *r, const char *v)
{
	const char *op = ks_jstr(r, "operator");
	const cJSON *vals = ks_jget(r, "values");
	if (!op)
		return 0;
	if (strcmp(op, "In") == 0)
		return in_values(vals, v);
	if (strcmp(op, "NotIn") == 0)
		return !in_values(vals, v);
	if (strcmp(op, "Exists") == 0)
		return v != NULL;
	if (strcmp(op, "DoesNotExist") == 0)
		return v == NULL;
	if (strcmp(op, "Gt") == 0 || strcmp(op, "Lt") == 0) {
		const cJSON *x = cJSON_GetArrayItem(vals, 0);
		if (!v || cJSON_GetArraySize(vals) != 1 || !cJSON_IsString(x))
			return 0;
		char *e1, *e2;
		long long a = strtoll(v, &e1, 10), b = strtoll(x->valuestring, &e2, 10);
		if (*e1 || *e2 || !*v || !*x->valuestring)
			return 0;
		return op[0] == 'G' ? a > b : a < b;
	}
	return 0;
}

static int term_match(const cJSON *term, const cJSON *node)
{
	const cJSON *exprs = ks_jget(term, "matchExpressions"), *fields = ks_jget(term, "matchFields");
	if (cJSON_GetArraySize(exprs) == 0 && cJSON_GetArraySize(fields) == 0)
		return 0; /* an empty term matches nothing */
	const cJSON *labels = ks_jget(ks_jget(node, "metadata"), "labels");
	const cJSON *r;
	cJSON_ArrayForEach(r, exprs) if (!requirement(r, ks_jstr(labels, ks_jstr(r, "key") ? ks_jstr(r, "key") : ""))) return 0;
	cJSON_ArrayForEach(r, fields) {
		const char *k = ks_jstr(r, "key");
		if (!k || strcmp(k, "metadata.name") != 0)
			return 0;
		if (!requirement(r, ks_jstr(ks_jget(node, "metadata"), "name")))
			return 0;
	}
	return 1;
}

int ks_node_affinity_match(const cJSON *pod_spec, const cJSON *node)
{
	const cJSON *labels = ks_jget(ks_jget(node, "metadata"), "labels");
	const cJSON *ns;
	cJSON_ArrayForEach(ns, ks_jget(pod_spec, "nodeSelector")) {
		const char *v = ks_jstr(labels, ns->string);
		if (!v || !cJSON_IsString(ns) || strcmp(v, ns->valuestring) != 0)
			return 0;
	}
	const cJSON *req = ks_jget(ks_jget(ks_jget(pod_spec, "affinity"), "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution");
	if (!req)
		return 1;
	const cJSON *term;
	cJSON_ArrayForEach(term, ks_jget(req, "nodeSelectorTerms")) if (term_match(term, node)) return 1;
	return 0;
}

static const struct {
	const char *key, *effect;
	int host_network_only;
} ds_tolerations[] = {
	{ "node.kubernetes.io/not-ready", "NoExecute", 0 },
	{ "node.kubernetes.io/unreachable", "NoExecute", 0 },
	{ "node.kubernetes.io/disk-pressure", "NoSchedule", 0 },
	{ "node.kubernetes.io/memory-pressure", "NoSchedule", 0 },
	{ "node.kubernetes.io/pid-pressure", "NoSchedule", 0 },
	{ "node.kubernetes.io/unschedulable", "NoSchedule", 0 },
	{ "node.kubernetes.io/network-unavailable", "NoSchedule", 1 },
};

cJSON *ks_ds_tolerations(const cJSON *pod_spec)
{
	const cJSON *have = ks_jget(pod_spec, "tolerations");
	cJSON *out = cJSON_IsArray(have) ? cJSON_Duplicate(have, 1) : cJSON_CreateArray();
	if (!out)
		return NULL;
	int host_net = cJSON_IsTrue(ks_jget(pod_spec, "hostNetwork"));
	for (size_t i = 0; i < sizeof(ds_tolerations) / sizeof(ds_tolerations[0]); i++) {
		if (ds_tolerations[i].host_network_only && !host_net)
			continue;
		/* AddOrUpdateTolerationInPodSpec: an equal toleration is not added twice */
		int dup = 0;
		const cJSON *t;
		cJSON_ArrayForEach(t, out) {
			const char *k = ks_jstr(t, "key"), *op = ks_jstr(t, "operator"), *e = ks_jstr(t, "effect");
			dup |= k && op && e && strcmp(k, ds_tolerations[i].key) == 0 && strcmp(op, "Exists") == 0 &&
			       strcmp(e, ds_tolerations[i].effect) == 0;
		}
		if (dup)
			continue;
		cJSON *t2 = cJSON_CreateObject();
		if (!t2) {
			cJSON_Delete(out);
			return NULL;
		}
		cJSON_AddStringToObject(t2, "key", ds_tolerations[i].key);
		cJSON_AddStringToObject(t2, "operator", "Exists");
		cJSON_AddStringToObject(t2, "effect", ds_tolerations[i].effect);
		cJSON_AddItemToArray(out, t2);
	}
	return out;
}

void ks_ds_should_run(const cJSON *pod_spec, const cJSON *node, int *should_run, int *should_continue)
{
	*should_run = *should_continue = 0;
	const char *want = ks_jstr(pod_spec, "nodeName");
	const char *name = ks_jstr(ks_jget(node, "metadata"), "name");
	if (want && *want && (!name || strcmp(want, name) != 0))
		return;
	if (!ks_node_affinity_match(pod_spec, node))
		return;
	cJSON *tols = ks_ds_tolerations(pod_spec);
	int untolerated = 0, untolerated_noexec = 0;
	const cJSON *taint;
	cJSON_ArrayForEach(taint, ks_jget(ks_jget(node, "spec"), "taints")) {
		const char *e = ks_jstr(taint, "effect");
		if (!e || (strcmp(e, "NoSchedule") != 0 && strcmp(e, "NoExecute") != 0))
			continue;
		if (tols && ks_tolerates(tols, taint))
			continue;
		untolerated = 1;
		if (strcmp(e, "NoExecute") == 0)
			untolerated_noexec = 1;
	}
	cJSON_Delete(tols);
	*should_run = !untolerated;
	*should_continue = !untolerated_noexec;
}

int64_t ks_rfc3339_parse(const char *s)
{
	struct tm tm = { 0 };
	const char *e = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!e)
		return -1;
	if (*e == '.')
		while (*++e >= '0' && *e <= '9')
			;
	long long off = 0;
	if (*e == '+' || *e == '-') {
		int hh = 0, mm = 0;
		if (sscanf(e + 1, "%2d:%2d", &hh, &mm) != 2)
			return -1;
		off = (hh * 3600 + mm * 60) * (*e == '+' ? 1 : -1);
	} else if (*e != 'Z') {
		return -1;
	}
	return (int64_t)timegm(&tm) - off;
}

int ks_pod_ready(const cJSON *pod, int64_t *since)
{
	const cJSON *c;
	if (since)
		*since = 0;
	cJSON_ArrayForEach(c, ks_jget(ks_jget(pod, "status"), "conditions")) {
		const char *t = ks_jstr(c, "type"), *st = ks_jstr(c, "status");
		if (t && strcmp(t, "Ready") == 0) {
			if (since) {
				int64_t ts = ks_rfc3339_parse(ks_jstr(c, "lastTransitionTime"));
				*since = ts > 0 ? ts : 0;
			}
			return st && strcmp(st, "True") == 0;
		}
	}
	return 0;
}

int ks_intstr_scaled(const cJSON *v, int total, int def)
{
	if (cJSON_IsNumber(v))
		return (int)v->valuedouble;
	if (!cJSON_IsString(v))
		return def;
	char *end;
	long p = strtol(v->valuestring, &end, 10);
	if (end == v->valuestring)
		return def;
	if (*end == '%' && end[1] == 0)
		return (int)((p * total + 99) / 100);
	return def; /* a string that is no percentage is invalid */
}
