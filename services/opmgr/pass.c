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
	/* a call on that object in flight or backing off, perhaps another policy's (a
	 * DeviceClass has one name for all): its end re-runs the object's owner, maybe
	 * not this policy, so look again */
	if (w == GK_OPP_WR_BUSY || w == GK_OPP_WR_WAIT)
		requeue(res, GK_OPP_REQUEUE_MS);
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
	if (s == GK_OP_RECREATE) {
		/* a field the API will not change (a LocalQueue's clusterQueue): a new object */
		wrote(res, ops->del(ops->user, &r, have->metadata ? have->metadata->uid : NULL, &last), last, "delete",
		      &r);
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

static bool deleting_meta(const Gpukmm__ObjectMeta *md)
{
	return md && md->deletion_timestamp && *md->deletion_timestamp;
}

/* delete an object seen in the view (uid precondition); true: it is still there */
static bool delete_seen(const gk_opp_ref *r, const Gpukmm__ObjectMeta *md, const gk_opp_ops *ops,
			gk_opp_result *res)
{
	if (deleting_meta(md)) {
		res->pending++;
		return true;
	}
	const char *last = NULL;
	wrote(res, ops->del(ops->user, r, md ? md->uid : NULL, &last), last, "delete", r);
	return true;
}

/* Is this object, seen as typed metadata, one upstream left for the policy? */
static bool meta_upstream(const Gpukmm__ObjectMeta *md, const char *policy, const gk_op_ref *c)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *m = md ? gk_kobj_meta_to_json(md) : NULL;
	bool up = false;
	if (j && m) {
		cJSON_AddItemToObject(j, "metadata", m);
		m = NULL;
		up = (c->upstream_app && gk_op_is_upstream(j, policy, c->upstream_app)) ||
		     (c->upstream_ref && gk_op_is_ours(j, policy));
	}
	cJSON_Delete(m);
	cJSON_Delete(j);
	return up;
}

/* the DaemonSet of a catalogue entry that upstream left (seen in the DaemonSet view) */
static bool upstream_ds(const gk_opv *v, const gk_op_ref *c, const char *policy)
{
	if (strcmp(c->kind, "DaemonSet") != 0 || !c->upstream_app ||
	    gk_opv_obj(v, c->kind, c->ns[0] ? c->ns : NULL, c->name))
		return false;
	const Gpukmm__DaemonSet *ds = gk_opv_ds(v, c->ns[0] ? c->ns : NULL, c->name);
	return ds && meta_upstream(ds->metadata, policy, c);
}

/* A catalogue entry the operand view does not hold: is it one upstream left?
 * DaemonSets of the operator namespace are all in the view (their metadata);
 * every ConfigMap there is an operand already; other kinds are read once. */
static bool leftover(const gk_opv *v, const gk_op_ref *c, const char *policy, const gk_opp_ops *ops,
		     gk_opp_result *res)
{
	if (!c->upstream_app && !c->upstream_ref)
		return false; /* upstream marked nothing there: never ours to tell apart */
	const char *ns = c->ns[0] ? c->ns : NULL;
	gk_opp_ref r = { c->api_version, c->kind, c->resource, ns, c->name };
	if (strcmp(c->kind, "ConfigMap") == 0)
		return false;
	if (strcmp(c->kind, "DaemonSet") == 0) {
		const Gpukmm__DaemonSet *ds = gk_opv_ds(v, ns, c->name);
		if (!ds || !meta_upstream(ds->metadata, policy, c))
			return false;
		return delete_seen(&r, ds->metadata, ops, res);
	}
	if (!ops->probe)
		return false;
	const char *last = NULL;
	int w = ops->probe(ops->user, &r, &last);
	if (w == GK_OPP_WR_ABSENT)
		return false;
	/* being read (it goes into the view, and the next pass decides), or waiting to be */
	if (w == GK_OPP_WR_STARTED || w == GK_OPP_WR_BUSY)
		res->pending++;
	/* a call on that object in flight or backing off, perhaps another policy's (a
	 * DeviceClass has one name for all): its end re-runs the object's owner, maybe
	 * not this policy, so look again */
	if (w == GK_OPP_WR_BUSY || w == GK_OPP_WR_WAIT)
		requeue(res, GK_OPP_REQUEUE_MS);
	if (w == GK_OPP_WR_FAILED)
		res->failed = true;
	if (last)
		add_error(res, "failed to read %s %s%s%s: %s", r.kind, ns ? ns : "", ns ? "/" : "", r.name, last);
	return true;
}

/* delete the catalogue entry if it is ours (or upstream left it for this policy); true when
 * it is (still, or maybe) there */
static bool remove_one(const gk_opv *v, const gk_op_ref *c, const char *policy, const gk_opp_ops *ops,
		       gk_opp_result *res)
{
	const char *ns = c->ns[0] ? c->ns : NULL;
	const Gpukmm__Object *have = gk_opv_obj(v, c->kind, ns, c->name);
	if (!have)
		return leftover(v, c, policy, ops, res);
	cJSON *live = live_json(have);
	bool ours = live && (gk_op_is_ours(live, policy) ||
			     (c->upstream_app && gk_op_is_upstream(live, policy, c->upstream_app)));
	cJSON_Delete(live);
	if (!ours)
		return false; /* someone else's object of that name: never ours to delete */
	gk_opp_ref r = { c->api_version, c->kind, c->resource, ns, c->name };
	return delete_seen(&r, have->metadata, ops, res);
}

/* ---- Kueue: the policy's objects no longer rendered ------------------------------------ */

typedef struct kq_ctx {
	const gk_op_set *s;
	const char *policy;
	const gk_opp_ops *ops;
	gk_opp_result *res;
	bool left;
} kq_ctx;

static bool rendered_obj(const gk_op_set *s, const char *kind, const char *ns, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].kind, kind) == 0 && strcmp(s->v[i].name, name) == 0 &&
		    strcmp(s->v[i].ns ? s->v[i].ns : "", ns ? ns : "") == 0)
			return true;
	return false;
}

static void kueue_one(void *user, const Gpukmm__Object *o)
{
	kq_ctx *k = user;
	const Gpukmm__ObjectMeta *md = o->metadata;
	if (!md || !md->name)
		return;
	const char *ns = md->namespace_ && *md->namespace_ ? md->namespace_ : NULL;
	if (rendered_obj(k->s, o->kind, ns, md->name))
		return;
	cJSON *live = live_json(o);
	bool mine = live && gk_op_kueue_mine(live, k->policy);
	cJSON_Delete(live);
	if (!mine)
		return;
	const char *res = strcmp(o->kind, "LocalQueue") == 0	  ? "localqueues"
			  : strcmp(o->kind, "ClusterQueue") == 0 ? "clusterqueues"
								 : "resourceflavors";
	gk_opp_ref r = { GK_OP_KUEUE_API_VERSION, o->kind, res, ns, md->name };
	k->left |= !k->ops || delete_seen(&r, md, k->ops, k->res);
}

/* LocalQueues, then ClusterQueues, then the flavor they name; true while some are there
 * (ops NULL: only whether some would be removed) */
static bool remove_kueue(const gk_opv *v, const gk_op_set *s, const char *policy, const gk_opp_ops *ops,
			 gk_opp_result *res)
{
	kq_ctx k = { s, policy, ops, res, false };
	static const char *const kinds[] = { "LocalQueue", "ClusterQueue", "ResourceFlavor" };
	for (size_t i = 0; i < 3; i++)
		gk_opv_each_obj(v, kinds[i], kueue_one, &k);
	return k.left;
}

/* The teardown found none of the policy's Kueue objects in the view: gone only when the
 * watcher can vouch for the three kinds (listed, watched, none unreadable); else the
 * finalizers wait (said once per pass, like absent_unconfirmed). */
static bool kueue_unconfirmed(const gk_opv *v, const char *policy, bool *said, gk_opp_result *res)
{
	static const char *const kinds[][2] = { { "LocalQueue", "localqueues" }, { "ClusterQueue", "clusterqueues" },
						{ "ResourceFlavor", "resourceflavors" } };
	for (size_t i = 0; i < 3; i++) {
		const char *uc = gk_opv_operand_unconfirmed(v, kinds[i][1], NULL, NULL);
		if (!uc)
			continue;
		if (!*said)
			add_error(res, "deletion of ClusterPolicy %s waits: its %ss could not be confirmed gone (%.400s)",
				  policy, kinds[i][0], uc);
		*said = true;
		requeue(res, GK_OPP_REQUEUE_MS);
		return true;
	}
	return false;
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
			   .nfd_namespaced = d->nfd_namespaced, .prometheus = d->prometheus, .kueue = d->kueue };
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

/* Does a ResourceClaim hold a GPU — or can we not tell (the watcher cannot vouch for the
 * claims, or the DRA kinds are served but claims are not watched at that version): fail
 * closed, the safety rule (ARCHITECTURE.md §4). *why: a constant or buf. */
static bool claims_block(const gk_opv *v, char *buf, size_t cap, const char **why)
{
	const gk_opv_disc *d = gk_opv_discovery(v);
	const char *uc = gk_opv_claims_unconfirmed(v);
	if (uc) {
		snprintf(buf, cap, "GPU ResourceClaims that could not be confirmed (%.400s)", uc);
		*why = buf;
		return true;
	}
	if (d->dra_version[0] && !d->dra) {
		*why = "cannot tell whether a ResourceClaim holds a GPU (claims are not watched at the served "
		       "resource.k8s.io version)";
		return true;
	}
	*why = "allocated GPU ResourceClaims";
	return gk_opv_claims_allocated(v);
}

/* The Kueue kinds are served but not listed yet: what is there is not known (say so) */
static bool kueue_unlisted(const gk_opv_disc *d, gk_opp_result *res)
{
	if (!d->kueue || d->kueue_listed)
		return false;
	add_error(res, "Kueue: waiting for the ResourceFlavors, ClusterQueues and LocalQueues to be listed");
	return true;
}

/* The Kueue totals of the policy's mode: 1 known (*kt), 0 not known yet, -1 OOM. */
static int kueue_totals(const gk_opv *v, const Gpukmm__ClusterPolicy *cp, gk_op_ktotals *kt, gk_opp_result *res,
			gk_err *err)
{
	const gk_opv_disc *d = gk_opv_discovery(v);
	const Gpukmm__ClusterPolicySpec *sp = cp->spec;
	memset(kt, 0, sizeof(*kt));
	if (!sp || !sp->has_enable_kueue || !sp->enable_kueue || !d->kueue || deleting(cp))
		return 1;
	if (!d->kueue_listed)
		return 0; /* what is there is not known yet: held as it is */
	bool dra = sp->resource_registration && strcmp(sp->resource_registration, "dra") == 0;
	if (dra && !d->dra_version[0])
		return 1; /* no DRA: nothing to count (its own message says so) */
	if (dra && !d->resource_slices) {
		/* the watcher lists them now: an empty view is not an empty cluster */
		add_error(res, "Kueue: waiting for the ResourceSlices of driver %s to be listed", GK_OP_GPU_DRIVER);
		return 0;
	}
	gk_opv_kueue in;
	if (gk_opv_kueue_inputs(v, &in, err))
		return -1;
	int rc = gk_op_kueue_totals(dra, in.nodes, in.n_nodes, in.slices, in.n_slices, kt);
	gk_opv_kueue_free(&in);
	if (rc)
		return -gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	return 1;
}

/* An object of the catalogue missing from the view: gone only when the watcher can vouch
 * for the operands (their kinds listed and watched, that object not unreadable). Else the
 * teardown waits for it (said once per pass); true = it counts as left. */
static bool absent_unconfirmed(const gk_opv *v, const gk_op_ref *c, const char *policy, bool *said,
			       gk_opp_result *res)
{
	const char *uc = gk_opv_operand_unconfirmed(v, c->resource, c->ns, c->name);
	if (!uc)
		return false;
	if (!*said)
		add_error(res, "deletion of ClusterPolicy %s waits: %s %s%s%s could not be confirmed gone (%.400s)", policy,
			  c->kind, c->ns, c->ns[0] ? "/" : "", c->name, uc);
	*said = true;
	requeue(res, GK_OPP_REQUEUE_MS);
	return true;
}

/* is any object of the catalogue ours in the view and no longer rendered (a removal)? */
static bool removals_pending(const gk_opv *v, const gk_op_set *s, const gk_op_ref *cat, size_t n, const char *policy)
{
	for (size_t i = 0; i < n; i++) {
		const gk_op_ref *c = &cat[i];
		if ((s->held & (1u << c->component)) || rendered(s, c))
			continue;
		cJSON *live = live_json(gk_opv_obj(v, c->kind, c->ns[0] ? c->ns : NULL, c->name));
		bool ours = live && gk_op_is_ours(live, policy);
		cJSON_Delete(live);
		if (ours)
			return true;
	}
	return false;
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
	gk_op_ktotals kt;
	int krc = kueue_totals(v, cp, &kt, res, err);
	if (krc < 0) {
		free(ov_text);
		res->failed = true;
		return GK_RESOURCE_EXHAUSTED;
	}
	o.kueue_totals = krc ? &kt : NULL;
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
		char whybuf[GK_ERR_MSG_MAX];
		bool blocked = claims_block(v, whybuf, sizeof(whybuf), &why);
		/* a removal decided on a policy we cannot read (or a stale copy of it) waits */
		const char *pu = gk_opv_policy_unconfirmed(v, policy);
		bool kueue_rm = d->kueue_listed && !(s.held & (1u << GK_OP_KUEUE));
		bool hold = pu && (removals_pending(v, &s, cat, n_cat, policy) ||
				   (kueue_rm && remove_kueue(v, &s, policy, NULL, res)));
		if (hold) {
			add_error(res, "removal of operands of ClusterPolicy %s waits: the ClusterPolicy could not be "
				  "confirmed (%.400s)", policy, pu);
			requeue(res, GK_OPP_REQUEUE_MS);
		}
		for (size_t i = 0; i < n_cat && !hold; i++) {
			const gk_op_ref *c = &cat[i];
			if ((s.held & (1u << c->component)) || rendered(&s, c))
				continue;
			if (c->component == GK_OP_DRA && blocked) {
				const char *ns = c->ns[0] ? c->ns : NULL;
				bool have = gk_opv_obj(v, c->kind, ns, c->name) || upstream_ds(v, c, policy);
				if (have && !guard_said) {
					add_error(res, "%s blocking the removal of the DRA driver %s-gpu-dra", why, policy);
					requeue(res, GK_OPP_REQUEUE_MS);
					guard_said = true;
				}
				continue;
			}
			remove_one(v, c, policy, ops, res);
		}
		if (kueue_rm && !hold)
			remove_kueue(v, &s, policy, ops, res);
	} else {
		/* ordered teardown: each stage once the previous one is gone */
		static const unsigned stages[] = { 1u << GK_OP_DP | 1u << GK_OP_XPU, 1u << GK_OP_DRA,
						   1u << GK_OP_NFD | 1u << GK_OP_PROMETHEUS | 1u << GK_OP_KUEUE };
		bool left = false, said = false;
		const char *why = NULL;
		char whybuf[GK_ERR_MSG_MAX];
		bool blocked = claims_block(v, whybuf, sizeof(whybuf), &why);
		for (size_t st = 0; st < 3 && !left; st++) {
			bool guarded = stages[st] == 1u << GK_OP_DRA && blocked;
			/* not served: none can be there; served but not listed yet: the next
			 * discovery event (kueue_listed) runs the pass again, the finalizer stays */
			if (stages[st] & (1u << GK_OP_KUEUE))
				left |= kueue_unlisted(d, res) || remove_kueue(v, &s, policy, ops, res) ||
					kueue_unconfirmed(v, policy, &said, res);
			for (size_t i = 0; i < n_cat; i++) {
				const gk_op_ref *c = &cat[i];
				if (!(stages[st] & (1u << c->component)))
					continue;
				if (guarded) {
					const Gpukmm__Object *have = gk_opv_obj(v, c->kind, c->ns[0] ? c->ns : NULL, c->name);
					cJSON *live = live_json(have);
					bool ours = (live && gk_op_is_ours(live, policy)) || upstream_ds(v, c, policy);
					cJSON_Delete(live);
					if (ours && !left) {
						add_error(res, "%s blocking the removal of the DRA driver %s-gpu-dra", why,
							  policy);
						requeue(res, GK_OPP_REQUEUE_MS);
					}
					left |= ours || (!have && absent_unconfirmed(v, c, policy, &said, res));
					continue;
				}
				bool there = remove_one(v, c, policy, ops, res);
				if (!there && !gk_opv_obj(v, c->kind, c->ns[0] ? c->ns : NULL, c->name))
					there = absent_unconfirmed(v, c, policy, &said, res);
				left |= there;
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
