/* gpukmm-gater — one pass (see pass.h). */
#include "pass.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide.h"
#include "gpukmm/policy.h"

typedef struct collect {
	const char *policy, *ns;
	char **keys;             /* "ns\0name" pairs as two strings each */
	size_t n, cap;
	bool oom;
} collect;

static void collect_one(void *user, const Gpukmm__DaemonSet *ds)
{
	collect *c = user;
	if (c->oom || !gk_gater_is_gated(ds, c->policy, c->ns))
		return;
	if (c->n + 2 > c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 16;
		char **nv = realloc(c->keys, nc * sizeof(*nv));
		if (!nv) {
			c->oom = true;
			return;
		}
		c->keys = nv;
		c->cap = nc;
	}
	char *ns = strdup(ds->metadata->namespace_ ? ds->metadata->namespace_ : "");
	char *name = strdup(ds->metadata->name);
	if (!ns || !name) {
		free(ns);
		free(name);
		c->oom = true;
		return;
	}
	c->keys[c->n++] = ns;
	c->keys[c->n++] = name;
}

static void add_error(gk_gater_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_error(gk_gater_result *r, const char *fmt, ...)
{
	char buf[GK_ERR_MSG_MAX + 128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < r->n_errors; i++)
		if (strcmp(r->errors[i], buf) == 0)
			return;
	if (r->n_errors >= GK_GATER_MAX_ERRORS)
		return;
	char *s = strdup(buf);
	if (s)
		r->errors[r->n_errors++] = s;
}

/* Ask for the write that brings one DaemonSet to the wanted state. */
static void gate_one(const gk_gtv *v, const gk_gater_ops *ops, const char *ns, const char *name, const char *key,
		     const char *want, gk_gater_result *res)
{
	const Gpukmm__DaemonSet *ds = gk_gtv_ds(v, ns, name);
	if (!ds)
		return;
	bool oom;
	cJSON *p = gk_gater_patch(ds, key, want, &oom);
	char *body = p ? cJSON_PrintUnformatted(p) : NULL;
	cJSON_Delete(p);
	if (!body) {
		if (p || oom) {
			res->failed = true;
			add_error(res, "failed to gate DaemonSet %s/%s: out of memory", ns, name);
		}
		return; /* already right */
	}
	const char *last = NULL;
	enum gk_gater_wr w = ops->write(ops->user, ns, name, body, &last);
	free(body);
	if (w == GK_GATER_WR_STARTED)
		res->writes++;
	if (w == GK_GATER_WR_STARTED || w == GK_GATER_WR_BUSY)
		res->pending++;
	if (w == GK_GATER_WR_FAILED)
		res->failed = true;
	if (last)
		add_error(res, "failed to %s DaemonSet %s/%s: %s", want ? "gate" : "ungate", ns, name, last);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void statuses(const gk_gtv *v, const char *policy, gk_gater_result *res)
{
	static const enum gk_policy_ds which[] = { GK_POLICY_DS_DEVICE_PLUGIN, GK_POLICY_DS_DRA,
						    GK_POLICY_DS_XPU_MANAGER };
	char *out[] = { res->dp, res->dra, res->xpu };
	for (size_t i = 0; i < 3; i++) {
		char name[GK_POLICY_KEY_MAX];
		const Gpukmm__DaemonSet *ds = NULL;
		if (gk_policy_ds_name(name, sizeof(name), policy, which[i]) == 0)
			ds = gk_gtv_ds(v, gk_gtv_ns(v), name);
		gk_gater_ds_status(out[i], GK_GATER_STATUS_MAX, ds);
	}
}

/* The safety rule (ARCHITECTURE.md §4): the reason the pass must write
 * nothing, or NULL. Ungating (the key removed because the policy is gone,
 * being deleted, without kernelModule, or KMM is not served) needs that state
 * confirmed: a discovery blip, a lying list, a watch gap or a policy that
 * fails conversion must not ungate. A policy that cannot be read is not
 * written for at all. */
static const char *must_hold(gk_gtv *v, const char *policy, const Gpukmm__ClusterPolicy *cp, bool gating,
			     bool *unreadable)
{
	const char *pr = gk_gtv_policy_unconfirmed(v, policy, unreadable);
	if (*unreadable || (!gating && pr))
		return pr;
	bool km = cp && cp->spec && cp->spec->kernel_module;
	bool alive = cp && !(cp->metadata && cp->metadata->deletion_timestamp && *cp->metadata->deletion_timestamp);
	if (!gating && alive && km && !gk_gtv_kmm(v))
		return gk_gtv_kmm_unconfirmed(v); /* ungating because KMM looks absent: confirmed? */
	return NULL;
}

int gk_gater_pass(gk_gtv *v, const char *policy, const gk_gater_ops *ops, gk_gater_result *res,
		  gk_gater_stats *st, gk_err *err)
{
	gk_gater_stats dummy;
	if (!st)
		st = &dummy;
	memset(res, 0, sizeof(*res));
	st->passes++;
	if (!gk_gtv_leader(v)) {
		res->idle = true;
		return GK_OK;
	}
	const Gpukmm__ClusterPolicy *cp = gk_gtv_policy(v, policy);
	res->deleted = cp == NULL;
	if (cp && cp->metadata && cp->metadata->has_generation)
		res->generation = cp->metadata->generation;
	res->gating = gk_gater_policy_wants(cp, gk_gtv_kmm(v));
	char key[GK_POLICY_KEY_MAX];
	if (gk_policy_ready_label(key, sizeof(key), gk_gtv_ns(v), policy) != 0) {
		/* the webhook refuses such names; nothing can carry the key */
		statuses(v, policy, res);
		return GK_OK;
	}
	bool unreadable = false;
	const char *why = must_hold(v, policy, cp, res->gating, &unreadable);
	if (why) {
		res->held = true;
		snprintf(res->hold, sizeof(res->hold), "%s of the DaemonSets of ClusterPolicy %s waits: %s",
			 unreadable || res->gating ? "gating" : "ungating", policy, why);
		/* a policy that cannot be confirmed gone is not reported gone */
		res->deleted = false;
		if (cp)
			add_error(res, "%s", res->hold);
	}
	collect c = { .policy = policy, .ns = gk_gtv_ns(v) };
	gk_gtv_each_ds(v, collect_one, &c);
	int rc = GK_OK;
	if (c.oom) {
		res->failed = true;
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	for (size_t i = 0; !c.oom && !why && i < c.n; i += 2)
		gate_one(v, ops, c.keys[i], c.keys[i + 1], key, gk_gater_want(cp, res->gating), res);
	/* which carry the key now (as the view has them: a write in flight
	 * counts once it has landed) */
	if (!c.oom && c.n) {
		res->gated = calloc(c.n / 2, sizeof(char *));
		if (!res->gated) {
			res->failed = true;
			rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		}
		for (size_t i = 0; res->gated && i < c.n; i += 2) {
			const Gpukmm__DaemonSet *ds = gk_gtv_ds(v, c.keys[i], c.keys[i + 1]);
			if (!gk_gater_has_gate(ds, key))
				continue;
			size_t len = strlen(c.keys[i]) + strlen(c.keys[i + 1]) + 2;
			char *s = malloc(len);
			if (!s) {
				res->failed = true;
				rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
				break;
			}
			snprintf(s, len, "%s/%s", c.keys[i], c.keys[i + 1]);
			res->gated[res->n_gated++] = s;
		}
	}
	if (res->n_gated > 1)
		qsort(res->gated, res->n_gated, sizeof(char *), cmp_str);
	for (size_t i = 0; i < c.n; i++)
		free(c.keys[i]);
	free(c.keys);
	statuses(v, policy, res);
	if (res->failed)
		st->failures++;
	return rc;
}

void gk_gater_result_free(gk_gater_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->n_gated; i++)
		free(res->gated[i]);
	free(res->gated);
	for (size_t i = 0; i < res->n_errors; i++)
		free(res->errors[i]);
	res->gated = NULL;
	res->n_gated = res->n_errors = 0;
}
