/* gpukmm-modmgr — one reconcile pass, as a step machine (see pass.h). */
#include "pass.h"

#include <stdlib.h>
#include <string.h>

#include "gpukmm/log.h"

/* The steps in their order; a step with nothing to do is skipped. S_REREAD
 * (the Module) and S_REREAD_POLICY are only entered after a conflict, and end
 * the pass. */
enum step { S_FIN_ADD, S_MODULE, S_FIN_REMOVE, S_REREAD, S_REREAD_POLICY, S_DONE };

struct gk_mm_run {
	gk_mmv *v;
	const gk_mm_ops *ops;
	gk_mm_plan *plan;
	gk_mm_pass_stats *st;
	gk_mm_pass_fn fn;
	void *user;
	enum step step;
	bool wrote;        /* a call completed: check leadership before the next write */
	void *call;        /* in flight */
	/* the written object as the view had it when the call started */
	bool on_policy;    /* the call is on the ClusterPolicy (else the Module) */
	bool had;
	char rv[64];
	char *patch;       /* the Module merge patch (S_MODULE, GK_MM_MOD_PATCH) */
};

static bool policy_alive(const Gpukmm__ClusterPolicy *cp)
{
	return cp && !(cp->metadata && cp->metadata->deletion_timestamp && *cp->metadata->deletion_timestamp);
}

static bool is_conflict(int rc)
{
	return rc == GK_ABORTED || rc == GK_ALREADY_EXISTS || rc == GK_FAILED_PRECONDITION;
}

static bool leading(const gk_mm_run *r)
{
	gk_mmv_state s;
	gk_mmv_state_get(r->v, &s);
	return s.leader;
}

static const Gpukmm__ObjectMeta *meta_of(const gk_mm_run *r)
{
	if (r->on_policy) {
		const Gpukmm__ClusterPolicy *cp = gk_mmv_policy(r->v, r->plan->policy);
		return cp ? cp->metadata : NULL;
	}
	const Gpukmm__Module *m = gk_mmv_module(r->v, r->plan->module);
	return m ? m->metadata : NULL;
}

/* Remember the version of the object the call writes (or reads). */
static void note_before(gk_mm_run *r)
{
	r->on_policy = r->step == S_FIN_ADD || r->step == S_FIN_REMOVE || r->step == S_REREAD_POLICY;
	const Gpukmm__ObjectMeta *md = meta_of(r);
	r->had = md != NULL;
	snprintf(r->rv, sizeof(r->rv), "%s", md && md->resource_version ? md->resource_version : "");
}

/* May the call's answer replace the view's object? Only while the view still
 * holds what it held when the call started: if the watch brought a change
 * meanwhile (our own write's event, or a newer one), the view is at least as
 * new as the answer and is kept. */
static bool view_unchanged(const gk_mm_run *r)
{
	const Gpukmm__ObjectMeta *md = meta_of(r);
	if ((md != NULL) != r->had)
		return false;
	return !md || strcmp(md->resource_version ? md->resource_version : "", r->rv) == 0;
}

static void fold_module(gk_mm_run *r, const Gpukmm__Module *m)
{
	if (view_unchanged(r))
		gk_mmv_put_module(r->v, r->plan->module, m, NULL);
}

static bool needed(const gk_mm_run *r)
{
	const gk_mm_plan *p = r->plan;
	switch (r->step) {
	case S_FIN_ADD:
		return p->finalizer_op == GK_MM_FIN_ADD;
	case S_MODULE:
		return p->module_op != GK_MM_MOD_NONE;
	case S_FIN_REMOVE:
		return p->finalizer_op == GK_MM_FIN_REMOVE && !p->failed && !p->conflict;
	default:
		return true;
	}
}

/* Start the finalizer write: the policy's list with ours added or removed. */
static int start_finalizers(gk_mm_run *r, const Gpukmm__ClusterPolicy *cp, bool add, gk_err *e)
{
	const Gpukmm__ObjectMeta *md = cp->metadata;
	size_t n = 0;
	char **fins = calloc(md->n_finalizers + 1, sizeof(char *));
	if (!fins)
		return gk_err_set(e, GK_RESOURCE_EXHAUSTED, "out of memory");
	for (size_t i = 0; i < md->n_finalizers; i++)
		if (md->finalizers[i] && strcmp(md->finalizers[i], GK_MM_FINALIZER) != 0)
			fins[n++] = md->finalizers[i];
	if (add)
		fins[n++] = GK_MM_FINALIZER;
	int rc = r->ops->set_finalizers(r->ops->user, r, r->plan->policy, md->resource_version, fins, n,
					&r->call, e);
	free(fins);
	return rc;
}

static int start_module(gk_mm_run *r, const Gpukmm__ClusterPolicy *cp, gk_err *e)
{
	gk_mm_plan *p = r->plan;
	const gk_mm_ops *ops = r->ops;
	switch (p->module_op) {
	case GK_MM_MOD_CREATE: {
		cJSON *obj = NULL;
		int rc = ops->render(ops->user, cp, &obj, e);
		if (rc == GK_OK)
			rc = ops->create(ops->user, r, obj, &r->call, e);
		cJSON_Delete(obj);
		return rc;
	}
	case GK_MM_MOD_PATCH:
		return ops->patch(ops->user, r, p->module, r->patch, &r->call, e);
	default: {
		/* the object the decision saw, as the view has it now (the uid precondition) */
		const Gpukmm__Module *have = gk_mmv_module(r->v, p->module);
		const char *uid = have && have->metadata ? have->metadata->uid : NULL;
		GK_INFO(p->delete_for_version_change ? "KMM Module %s version toggled; recreating"
						     : "Deleting KMM Module %s", p->module);
		return ops->del(ops->user, r, p->module, uid, &r->call, e);
	}
	}
}

static bool on_result(gk_mm_run *r, int rc, ProtobufCMessage *out, const char *msg);

/* Start the current step, or the first later one with something to do.
 * Returns true while a call is in flight, false when the pass is over. */
static bool go(gk_mm_run *r)
{
	for (;;) {
		if (r->step == S_DONE)
			return false;
		if (!needed(r)) {
			r->step = r->step >= S_FIN_REMOVE ? S_DONE : r->step + 1;
			continue;
		}
		/* leadership may have moved while the last call was in flight */
		if (r->wrote && r->step < S_REREAD && !leading(r)) {
			GK_INFO("ClusterPolicy %s: leadership lost during the pass; the rest is not written",
				r->plan->policy);
			r->plan->idle = true;
			return false;
		}
		const Gpukmm__ClusterPolicy *cp = gk_mmv_policy(r->v, r->plan->policy);
		if (r->step < S_REREAD && (!cp || !cp->metadata)) {
			/* gone from the view meanwhile: its event made the key dirty again */
			GK_DEBUG("ClusterPolicy %s vanished during the pass", r->plan->policy);
			return false;
		}
		gk_err e = { 0 };
		int rc;
		note_before(r);
		switch (r->step) {
		case S_FIN_ADD:
		case S_FIN_REMOVE:
			rc = start_finalizers(r, cp, r->step == S_FIN_ADD, &e);
			break;
		case S_MODULE:
			rc = start_module(r, cp, &e);
			break;
		case S_REREAD_POLICY:
			rc = r->ops->get_policy(r->ops->user, r, r->plan->policy, &r->call, &e);
			break;
		default:
			rc = r->ops->get(r->ops->user, r, r->plan->module, &r->call, &e);
			break;
		}
		if (rc == GK_OK)
			return true;
		r->call = NULL;
		return on_result(r, rc, NULL, e.msg[0] ? e.msg : gk_code_name(rc));
	}
}

/* A conflict or a vanished object: re-read the Module into the view, then
 * the service runs the key again soon (a 409 is not a failure: the next pass
 * decides from the fresh object). */
static void reread(gk_mm_run *r)
{
	r->st->conflicts++;
	r->plan->conflict = true;
	r->plan->has_success_event = false;
	r->step = S_REREAD;
}

static void finalizer_result(gk_mm_run *r, int rc, const Gpukmm__ClusterPolicy *out, const char *msg)
{
	gk_mm_plan *p = r->plan;
	bool add = r->step == S_FIN_ADD;
	r->st->finalizer_writes++;
	if (rc == GK_OK) {
		if (out && view_unchanged(r))
			gk_mmv_put_policy(r->v, p->policy, out, NULL);
		GK_INFO("%s finalizer %s on ClusterPolicy %s", add ? "added" : "removed", GK_MM_FINALIZER,
			p->policy);
	} else if (rc == GK_NOT_FOUND && !add) {
		rc = GK_OK; /* the policy is gone: nothing left to hold */
	} else if (is_conflict(rc)) {
		/* the policy moved (a status write, another controller's
		 * finalizer): re-read it, retry soon */
		r->st->conflicts++;
		p->conflict = true;
		p->has_success_event = false;
		r->step = S_REREAD_POLICY;
		return;
	} else {
		gk_mm_plan_fail(p, GK_MM_FAIL_FINALIZER, msg);
	}
	/* never create a Module we could not protect */
	r->step = add && rc == GK_OK ? S_MODULE : S_DONE;
}

static void module_result(gk_mm_run *r, int rc, const Gpukmm__Module *out, const char *msg)
{
	gk_mm_plan *p = r->plan;
	r->step = S_FIN_REMOVE;
	switch (p->module_op) {
	case GK_MM_MOD_CREATE:
		if (rc == GK_OK) {
			r->st->creates++;
			GK_INFO("KMM Module %s created", p->module);
			if (out) {
				fold_module(r, out);
				gk_mm_kmm_status_of(out, p->kmm_status, sizeof(p->kmm_status));
			}
		} else if (rc == GK_ALREADY_EXISTS) {
			reread(r);
		} else {
			gk_mm_plan_fail(p, GK_MM_FAIL_APPLY, msg);
		}
		return;
	case GK_MM_MOD_PATCH:
		if (rc == GK_OK) {
			r->st->patches++;
			GK_INFO("KMM Module %s updated", p->module);
			if (out)
				fold_module(r, out);
		} else if (rc == GK_NOT_FOUND || is_conflict(rc)) {
			reread(r);
		} else {
			gk_mm_plan_fail(p, GK_MM_FAIL_APPLY, msg);
		}
		return;
	default:
		if (rc == GK_OK || rc == GK_NOT_FOUND) {
			if (rc == GK_OK)
				r->st->deletes++;
			/* out: the object while finalizers hold it; NULL: gone */
			fold_module(r, rc == GK_OK ? out : NULL);
			if (rc == GK_NOT_FOUND)
				p->has_success_event = false;
		} else if (is_conflict(rc)) {
			/* the uid precondition failed: another Module took the name */
			reread(r);
		} else {
			gk_mm_plan_fail(p, p->delete_for_version_change ? GK_MM_FAIL_DELETE_VERSION
									: GK_MM_FAIL_DELETE,
					msg);
		}
		return;
	}
}

/* Fold the result of the current step into the view and the plan, then go on. */
static bool on_result(gk_mm_run *r, int rc, ProtobufCMessage *out, const char *msg)
{
	gk_mm_plan *p = r->plan;
	switch (r->step) {
	case S_FIN_ADD:
	case S_FIN_REMOVE:
		finalizer_result(r, rc, (const Gpukmm__ClusterPolicy *)out, msg);
		break;
	case S_MODULE:
		module_result(r, rc, (const Gpukmm__Module *)out, msg);
		break;
	case S_REREAD_POLICY:
		/* only an object is folded in: an absence comes from the watch */
		if (rc == GK_OK && out && view_unchanged(r))
			gk_mmv_put_policy(r->v, p->policy, (const Gpukmm__ClusterPolicy *)out, NULL);
		else if (rc != GK_OK)
			GK_WARN("re-reading ClusterPolicy %s failed: %s", p->policy, msg);
		r->step = S_DONE;
		break;
	default:
		/* a NotFound naming the Module (kops checks) confirms it is gone */
		if (rc == GK_OK || rc == GK_NOT_FOUND)
			fold_module(r, rc == GK_OK ? (const Gpukmm__Module *)out : NULL);
		else
			GK_WARN("re-reading KMM Module %s failed: %s", p->module, msg);
		r->step = S_DONE;
		break;
	}
	if (out)
		protobuf_c_message_free_unpacked(out, NULL);
	r->wrote = true;
	return go(r);
}

static void run_free(gk_mm_run *r)
{
	if (r->plan->failed)
		r->st->failures++;
	free(r->patch);
	free(r);
}

void gk_mm_run_done(gk_mm_run *r, int rc, ProtobufCMessage *out, const char *msg)
{
	r->call = NULL;
	if (on_result(r, rc, out, msg && *msg ? msg : gk_code_name(rc)))
		return;
	gk_mm_pass_fn fn = r->fn;
	void *user = r->user;
	gk_mm_plan *plan = r->plan;
	run_free(r);
	fn(user, plan);
}

void gk_mm_run_cancel(gk_mm_run *r)
{
	if (!r)
		return;
	if (r->call)
		r->ops->cancel(r->ops->user, r->call);
	free(r->patch);
	free(r);
}

int gk_mm_pass_start(gk_mmv *v, const char *policy, const gk_mm_ops *ops, gk_mm_plan *plan,
		     gk_mm_pass_stats *st, gk_mm_pass_fn fn, void *user, gk_mm_run **run)
{
	*run = NULL;
	st->passes++;
	gk_mm_view mv;
	gk_mmv_view(v, policy, &mv);
	const Gpukmm__ClusterPolicy *cp = mv.policy;
	bool wants = mv.leader && mv.kmm && policy_alive(cp) && cp->spec && cp->spec->kernel_module;
	char *patch = NULL;
	char diff_err[GK_ERR_MSG_MAX] = "";
	mv.module_up_to_date = true;
	if (wants && mv.module && !gk_mm_owned_by_other(mv.module, policy, NULL, NULL)) {
		gk_err e;
		if (ops->diff(ops->user, cp, mv.module, &patch, &e) != GK_OK)
			snprintf(diff_err, sizeof(diff_err), "%s", e.msg);
		else
			mv.module_up_to_date = patch == NULL;
	}
	gk_mm_decide(&mv, plan);
	if (plan->idle || *diff_err) {
		if (!plan->idle) {
			gk_mm_plan_fail(plan, GK_MM_FAIL_APPLY, diff_err);
			st->failures++;
		}
		free(patch);
		return GK_OK;
	}
	if (plan->ordered_upgrade && (plan->module_op == GK_MM_MOD_CREATE || plan->module_op == GK_MM_MOD_PATCH))
		GK_INFO("KMM Module %s uses ordered upgrade (version=\"%s\"); nodes must be labeled "
			"kmm.node.kubernetes.io/version-module.%s.%s=%s before the module loads",
			plan->module, cp->spec->kernel_module->version, mv.ns, plan->module,
			cp->spec->kernel_module->version);

	gk_mm_run *r = calloc(1, sizeof(*r));
	if (!r) {
		free(patch);
		gk_mm_plan_fail(plan, GK_MM_FAIL_APPLY, "out of memory");
		st->failures++;
		return GK_OK;
	}
	*r = (gk_mm_run){ .v = v, .ops = ops, .plan = plan, .st = st, .fn = fn, .user = user,
			  .step = S_FIN_ADD, .patch = patch };
	if (go(r)) {
		*run = r;
		return GK_OK;
	}
	run_free(r);
	return GK_OK;
}
