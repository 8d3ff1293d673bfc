/* gpukmm-opmgr — one pass (see pass.h). */
#include "pass.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/wsub.h"

static void add_error(gk_opp_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_error(gk_opp_result *r, const char *fmt, ...)
{
	char buf[GK_ERR_MSG_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < r->n_errors; i++)
		if (strcmp(r->errors[i], buf) == 0)
			return;
	if (r->n_errors >= GK_OPP_MAX_ERRORS)
		return;
	char *s = strdup(buf);
	if (s)
		r->errors[r->n_errors++] = s;
	else
		r->failed = true;
}

static void requeue(gk_opp_result *r, int64_t ms)
{
	if (!r->requeue_ms || ms < r->requeue_ms)
		r->requeue_ms = ms;
}

static bool deleting(const Gpukmm__ClusterPolicy *cp)
{
	return cp && cp->metadata && cp->metadata->deletion_timestamp && *cp->metadata->deletion_timestamp;
}

static bool has_fin(const Gpukmm__ClusterPolicy *cp, const char *f)
{
	for (size_t i = 0; cp && cp->metadata && i < cp->metadata->n_finalizers; i++)
		if (strcmp(cp->metadata->finalizers[i], f) == 0)
			return true;
	return false;
}

static void wrote(gk_opp_result *res, int w, const char *last, const char *what, const gk_opp_ref *r)
{
	if (w == GK_OPP_WR_STARTED)
		res->writes++;
	if (w == GK_OPP_WR_STARTED || w == GK_OPP_WR_BUSY)
		res->pending++;
	if (w == GK_OPP_WR_FAILED)
		res->failed = true;
	if (last)
		add_error(res, "failed to %s %s %s%s%s: %s", what, r->kind, r->ns ? r->ns : "", r->ns ? "/" : "", r->name,
			  last);
}

static cJSON *live_json(const Gpukmm__Object *o)
{
	return o && o->json ? cJSON_Parse(o->json) : NULL;
}

/* create or bring in line one rendered object */
static void apply_one(const gk_opv *v, const gk_op_obj *o, const gk_opp_ops *ops, gk_opp_result *res)
{
	gk_opp_ref r = { o->api_version, o->kind, o->resource, o->ns, o->name };
	const Gpukmm__Object *have = gk_opv_obj(v, o->kind, o->ns, o->name);
	const char *last = NULL;
	if (!have) {
		wrote(res, ops->create(ops->user, &r, o->obj, &last), last, "create", &r);
		return;
	}
	cJSON *live = live_json(have);
	if (!live) {
		res->failed = true;
		return;
	}
	if (have->metadata && have->metadata->deletion_timestamp && *have->metadata->deletion_timestamp) {
		/* going away: created again once it is gone */
		res->pending++;
		cJSON_Delete(live);
		return;
	}
	cJSON *patch = NULL;
	char msg[256];
	int s = gk_op_sync(o, live, &patch, msg, sizeof(msg));
	cJSON_Delete(live);
	if (s == GK_OP_FOREIGN) {
		add_error(res, "%s %s%s%s is %s: not managed by gpukmm", o->kind, o->ns ? o->ns : "", o->ns ? "/" : "",
			  o->name, msg);
		return;
	}
	if (s < 0) {
		res->failed = true;
		return;
	}
	if (s == GK_OP_PATCH) {
		char *body = cJSON_PrintUnformatted(patch);
		cJSON_Delete(patch);
		if (!body) {
			res->failed = true;
			return;
		}
		wrote(res, ops->patch(ops->user, &r, body, &last), last, "patch", &r);
		free(body);
	}
}

/* delete the catalogue entry if the view has it and it is ours; true when it is (still) there */
static bool remove_one(const gk_opv *v, const gk_op_ref *c, const char *policy, const gk_opp_ops *ops,
		       gk_opp_result *res)
{
	const char *ns = c->ns[0] ? c->ns : NULL;
	const Gpukmm__Object *have = gk_opv_obj(v, c->kind, ns, c->name);
	if (!have)
		return false;
	cJSON *live = live_json(have);
	bool ours = live && gk_op_is_ours(live, policy);
	cJSON_Delete(live);
	if (!ours)
		return false; /* someone else's object of that name: never ours to delete */
	if (have->metadata && have->metadata->deletion_timestamp && *have->metadata->deletion_timestamp) {
		res->pending++;
		return true;
	}
	gk_opp_ref r = { c->api_version, c->kind, c->resource, ns, c->name };
	const char *last = NULL;
	wrote(res, ops->del(ops->user, &r, have->metadata ? have->metadata->uid : NULL, &last), last, "delete", &r);
	return true;
}

/* A ClusterRoleBinding is created once the ClusterRole it names is there: the API
 * server's escalation check of a binding (without `bind`) needs the role to exist,
 * and refuses the binding otherwise. */
static bool waits_for_role(const gk_opv *v, const gk_op_set *s, const gk_op_obj *o, gk_opp_result *res)
{
	if (strcmp(o->kind, "ClusterRoleBinding") != 0 || gk_opv_obj(v, o->kind, NULL, o->name))
		return false;
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(o->obj, "roleRef");
	const cJSON *rn = cJSON_GetObjectItemCaseSensitive(ref, "name");
	if (!cJSON_IsString(rn) || gk_opv_obj(v, "ClusterRole", NULL, rn->valuestring))
		return false;
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].kind, "ClusterRole") == 0 && strcmp(s->v[i].name, rn->valuestring) == 0) {
			res->pending++; /* the role's creation marks the policy dirty again */
			return true;
		}
	return false;
}

static bool rendered(const gk_op_set *s, const gk_op_ref *c)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].kind, c->kind) == 0 && strcmp(s->v[i].name, c->name) == 0 &&
		    strcmp(s->v[i].ns ? s->v[i].ns : "", c->ns) == 0)
			return true;
	return false;
}

static void statuses(const gk_opv *v, const char *policy, gk_opp_result *res)
{
	static const char *const sfx[] = { "-device-plugin", "-gpu-dra", "-xpu-manager" };
	char *out[] = { res->dp, res->dra, res->xpu };
	for (size_t i = 0; i < 3; i++) {
		char name[600];
		snprintf(name, sizeof(name), "%s%s", policy, sfx[i]);
		gk_op_ds_status(out[i], 32, gk_opv_ds(v, gk_opv_ns(v), name));
	}
}

static void opts_of(const gk_opv *v, const Gpukmm__ClusterPolicy *cp, const gk_opp_cfg *cfg, gk_op_opts *o)
{
	const gk_opv_disc *d = gk_opv_discovery(v);
	*o = (gk_op_opts){ .namespace_ = gk_opv_ns(v), .operator_secret = cfg ? cfg->operator_secret : NULL,
			   .kmm = d->kmm, .openshift = d->openshift, .dra_version = d->dra_version, .nfd = d->nfd,
			   .prometheus = d->prometheus };
	const char *ov = cp && cp->spec && cp->spec->xpu ? cp->spec->xpu->config_map_override : NULL;
	if (ov && *ov) {
		const Gpukmm__Object *cm = gk_opv_obj(v, "ConfigMap", gk_opv_ns(v), ov);
		o->otel_override_has_cm = cm != NULL;
		/* the text is looked up by the caller (it must outlive the render) */
	}
}

/* the override's config.yaml, malloc'd (NULL when absent) */
static char *override_text(const gk_opv *v, const Gpukmm__ClusterPolicy *cp)
{
	const char *ov = cp && cp->spec && cp->spec->xpu ? cp->spec->xpu->config_map_override : NULL;
	const Gpukmm__Object *cm = ov && *ov ? gk_opv_obj(v, "ConfigMap", gk_opv_ns(v), ov) : NULL;
	cJSON *j = live_json(cm);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "data"), GK_OP_OTEL_KEY);
	char *s = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
	cJSON_Delete(j);
	return s;
}

static void set_finalizers(const Gpukmm__ClusterPolicy *cp, const gk_opp_ops *ops, bool add, gk_opp_result *res)
{
	const Gpukmm__ObjectMeta *md = cp->metadata;
	char **f = calloc(md->n_finalizers + 1, sizeof(char *));
	if (!f) {
		res->failed = true;
		return;
	}
	size_t n = 0;
	for (size_t i = 0; i < md->n_finalizers; i++) {
		if (!add && (strcmp(md->finalizers[i], GK_OP_FINALIZER) == 0 ||
			     strcmp(md->finalizers[i], GK_OP_UPSTREAM_FINALIZER) == 0))
			continue;
		f[n++] = md->finalizers[i];
	}
	if (add)
		f[n++] = GK_OP_FINALIZER;
	const char *last = NULL;
	gk_opp_ref r = { GK_POLICY_API_VERSION, GK_POLICY_KIND, "clusterpolicies", NULL, md->name };
	wrote(res, ops->finalizers(ops->user, md->name, md->resource_version, f, n, &last), last,
	      add ? "add the finalizer to" : "remove the finalizers from", &r);
	free(f);
}

/* Does a ResourceClaim hold a GPU — or can we not tell (the DRA kinds are served but the
 * watcher does not watch claims at that version): fail closed, the safety rule. */
static bool claims_block(const gk_opv *v, const char **why)
{
	const gk_opv_disc *d = gk_opv_discovery(v);
	if (d->dra_version[0] && !d->dra) {
		*why = "cannot tell whether a ResourceClaim holds a GPU (claims are not watched at the served "
		       "resource.k8s.io version)";
		return true;
	}
	*why = "allocated GPU ResourceClaims";
	return gk_opv_claims_allocated(v);
}

int gk_opp_pass(const gk_opv *v, const char *policy, const gk_opp_cfg *cfg, const gk_opp_ops *ops,
		gk_opp_result *res, gk_err *err)
{
	memset(res, 0, sizeof(*res));
	const gk_opv_disc *d = gk_opv_discovery(v);
	if (!gk_opv_leader(v) || !d->known) {
		res->idle = true;
		return GK_OK;
	}
	const Gpukmm__ClusterPolicy *cp = gk_opv_policy(v, policy);
	if (!cp) {
		res->deleted = true; /* nothing deleted on an absence: GC has the owner references */
		return GK_OK;
	}
	if (cp->metadata && cp->metadata->has_generation)
		res->generation = cp->metadata->generation;
	gk_op_opts o;
	opts_of(v, cp, cfg, &o);
	char *ov_text = override_text(v, cp);
	o.otel_override = ov_text;
	gk_op_ref *cat = NULL;
	size_t n_cat = 0;
	gk_op_set s = { 0 };
	int rc = gk_op_catalogue(policy, &o, &cat, &n_cat, err);
	/* a typed copy with the webhook's defaults (a policy stored without them still renders) */
	Gpukmm__ClusterPolicy *dcp = rc ? NULL : (Gpukmm__ClusterPolicy *)gk_wsub_clone(&cp->base);
	if (!rc && (!dcp || gk_policy_default(dcp) < 0))
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	if (!rc)
		rc = gk_op_render(dcp, &o, &s, err);
	if (rc) {
		res->failed = true;
		goto out;
	}
	for (size_t i = 0; i < s.n_errors; i++)
		add_error(res, "%s", s.errors[i]);
	if (!deleting(cp)) {
		if (!has_fin(cp, GK_OP_FINALIZER)) {
			/* protection first: nothing is created before the teardown is guaranteed */
			set_finalizers(cp, ops, true, res);
			statuses(v, policy, res);
			goto out;
		}
		for (size_t i = 0; i < s.n; i++)
			if (!(s.held & (1u << s.v[i].component)) && !waits_for_role(v, &s, &s.v[i], res))
				apply_one(v, &s.v[i], ops, res);
		bool guard_said = false;
		const char *why = NULL;
		bool blocked = claims_block(v, &why);
		for (size_t i = 0; i < n_cat; i++) {
			const gk_op_ref *c = &cat[i];
			if ((s.held & (1u << c->component)) || rendered(&s, c))
				continue;
			if (c->component == GK_OP_DRA && blocked) {
				const char *ns = c->ns[0] ? c->ns : NULL;
				const Gpukmm__Object *have = gk_opv_obj(v, c->kind, ns, c->name);
				if (have && !guard_said) {
					add_error(res, "%s blocking the removal of the DRA driver %s-gpu-dra", why, policy);
					requeue(res, GK_OPP_REQUEUE_MS);
					guard_said = true;
				}
				continue;
			}
			remove_one(v, c, policy, ops, res);
		}
	} else {
		/* ordered teardown: each stage once the previous one is gone */
		static const int stages[][2] = { { GK_OP_DP, GK_OP_XPU }, { GK_OP_DRA, GK_OP_DRA },
						 { GK_OP_NFD, GK_OP_PROMETHEUS } };
		bool left = false;
		const char *why = NULL;
		bool blocked = claims_block(v, &why);
		for (size_t st = 0; st < 3 && !left; st++) {
			bool guarded = stages[st][0] == GK_OP_DRA && blocked;
			for (size_t i = 0; i < n_cat; i++) {
				const gk_op_ref *c = &cat[i];
				if (c->component != stages[st][0] && c->component != stages[st][1])
					continue;
				if (guarded) {
					const Gpukmm__Object *have = gk_opv_obj(v, c->kind, c->ns[0] ? c->ns : NULL, c->name);
					cJSON *live = live_json(have);
					bool ours = live && gk_op_is_ours(live, policy);
					cJSON_Delete(live);
					if (ours && !left) {
						add_error(res, "%s blocking the removal of the DRA driver %s-gpu-dra", why,
							  policy);
						requeue(res, GK_OPP_REQUEUE_MS);
					}
					left |= ours;
					continue;
				}
				left |= remove_one(v, c, policy, ops, res);
			}
		}
		if (!left && (has_fin(cp, GK_OP_FINALIZER) || has_fin(cp, GK_OP_UPSTREAM_FINALIZER)))
			set_finalizers(cp, ops, false, res);
	}
	statuses(v, policy, res);
out:
	free(ov_text);
	free(cat);
	gk_op_set_free(&s);
	gk_kobj_free(dcp);
	return rc;
}

void gk_opp_result_free(gk_opp_result *res)
{
	for (size_t i = 0; i < res->n_errors; i++)
		free(res->errors[i]);
	res->n_errors = 0;
}
