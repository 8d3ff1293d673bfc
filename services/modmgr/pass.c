/* gpukmm-modmgr — one reconcile pass (see pass.h). */
#include "pass.h"

#include <stdlib.h>
#include <string.h>

#include "gpukmm/log.h"

static bool policy_alive(const Gpukmm__ClusterPolicy *cp)
{
	return cp && !(cp->metadata && cp->metadata->deletion_timestamp && *cp->metadata->deletion_timestamp);
}

/* A conflict or a vanished object: re-read the Module into the view, then let
 * the queue's backoff run the pass again (level-triggered: the next pass
 * decides from the fresh object). */
static void reread(gk_mmv *v, const gk_mm_ops *ops, gk_mm_plan *plan, gk_mm_pass_stats *st)
{
	Gpukmm__Module *m = NULL;
	gk_err e;
	int rc = ops->get(ops->user, plan->module, &m, &e);
	if (rc == GK_OK)
		gk_mmv_put_module(v, plan->module, m, NULL);
	else if (rc == GK_NOT_FOUND)
		gk_mmv_put_module(v, plan->module, NULL, NULL);
	else
		GK_WARN("re-reading KMM Module %s failed: %s", plan->module, e.msg);
	if (m)
		protobuf_c_message_free_unpacked(&m->base, NULL);
	st->conflicts++;
	plan->failed = true;
	plan->has_success_event = false;
}

static bool is_conflict(int rc)
{
	return rc == GK_ABORTED || rc == GK_ALREADY_EXISTS || rc == GK_FAILED_PRECONDITION;
}

/* Write the policy's finalizer list with ours added or removed. */
static int write_finalizers(gk_mmv *v, const gk_mm_ops *ops, gk_mm_plan *plan, bool add,
			    gk_mm_pass_stats *st)
{
	const Gpukmm__ClusterPolicy *cp = gk_mmv_policy(v, plan->policy);
	if (!cp || !cp->metadata)
		return GK_OK;
	const Gpukmm__ObjectMeta *md = cp->metadata;
	size_t n = 0;
	char **fins = calloc(md->n_finalizers + 1, sizeof(char *));
	if (!fins) {
		gk_mm_plan_fail(plan, GK_MM_FAIL_FINALIZER, "out of memory");
		return GK_RESOURCE_EXHAUSTED;
	}
	for (size_t i = 0; i < md->n_finalizers; i++)
		if (md->finalizers[i] && strcmp(md->finalizers[i], GK_MM_FINALIZER) != 0)
			fins[n++] = md->finalizers[i];
	if (add)
		fins[n++] = GK_MM_FINALIZER;
	Gpukmm__ClusterPolicy *out = NULL;
	gk_err e;
	int rc = ops->set_finalizers(ops->user, plan->policy, md->resource_version, fins, n, &out, &e);
	free(fins);
	st->finalizer_writes++;
	if (rc == GK_OK) {
		if (out)
			gk_mmv_put_policy(v, plan->policy, out, NULL);
		GK_INFO("%s finalizer %s on ClusterPolicy %s", add ? "added" : "removed", GK_MM_FINALIZER,
			plan->policy);
	} else if (rc == GK_NOT_FOUND && !add) {
		rc = GK_OK; /* the policy is gone: nothing left to hold */
	} else if (is_conflict(rc)) {
		/* the watch brings the new resourceVersion; retry through the backoff */
		st->conflicts++;
		plan->failed = true;
		plan->has_success_event = false;
	} else {
		gk_mm_plan_fail(plan, GK_MM_FAIL_FINALIZER, e.msg);
	}
	if (out)
		protobuf_c_message_free_unpacked(&out->base, NULL);
	return rc;
}

static void do_create(gk_mmv *v, const gk_mm_ops *ops, const Gpukmm__ClusterPolicy *cp,
		      gk_mm_plan *plan, gk_mm_pass_stats *st)
{
	cJSON *obj = NULL;
	gk_err e;
	int rc = ops->render(ops->user, cp, &obj, &e);
	if (rc) {
		gk_mm_plan_fail(plan, GK_MM_FAIL_APPLY, e.msg);
		return;
	}
	Gpukmm__Module *out = NULL;
	rc = ops->create(ops->user, obj, &out, &e);
	cJSON_Delete(obj);
	if (rc == GK_OK) {
		st->creates++;
		GK_INFO("KMM Module %s created", plan->module);
		if (out) {
			gk_mmv_put_module(v, plan->module, out, NULL);
			gk_mm_kmm_status_of(out, plan->kmm_status, sizeof(plan->kmm_status));
			protobuf_c_message_free_unpacked(&out->base, NULL);
		}
	} else if (rc == GK_ALREADY_EXISTS) {
		reread(v, ops, plan, st);
	} else {
		gk_mm_plan_fail(plan, GK_MM_FAIL_APPLY, e.msg);
	}
}

static void do_patch(gk_mmv *v, const gk_mm_ops *ops, const char *patch, gk_mm_plan *plan,
		     gk_mm_pass_stats *st)
{
	Gpukmm__Module *out = NULL;
	gk_err e;
	int rc = ops->patch(ops->user, plan->module, patch, &out, &e);
	if (rc == GK_OK) {
		st->patches++;
		GK_INFO("KMM Module %s updated", plan->module);
		if (out) {
			gk_mmv_put_module(v, plan->module, out, NULL);
			protobuf_c_message_free_unpacked(&out->base, NULL);
		}
	} else if (rc == GK_NOT_FOUND || is_conflict(rc)) {
		reread(v, ops, plan, st);
	} else {
		gk_mm_plan_fail(plan, GK_MM_FAIL_APPLY, e.msg);
	}
}

static void do_delete(gk_mmv *v, const gk_mm_ops *ops, const Gpukmm__Module *have, gk_mm_plan *plan,
		      gk_mm_pass_stats *st)
{
	const char *uid = have && have->metadata ? have->metadata->uid : NULL;
	Gpukmm__Module *out = NULL;
	gk_err e;
	GK_INFO(plan->delete_for_version_change ? "KMM Module %s version toggled; recreating"
						: "Deleting KMM Module %s", plan->module);
	int rc = ops->del(ops->user, plan->module, uid, &out, &e);
	if (rc == GK_OK || rc == GK_NOT_FOUND) {
		if (rc == GK_OK)
			st->deletes++;
		/* out: the object while finalizers hold it; NULL: gone */
		gk_mmv_put_module(v, plan->module, rc == GK_OK ? out : NULL, NULL);
		if (rc == GK_NOT_FOUND)
			plan->has_success_event = false;
	} else if (is_conflict(rc)) {
		/* the uid precondition failed: another Module took the name */
		reread(v, ops, plan, st);
	} else {
		gk_mm_plan_fail(plan, plan->delete_for_version_change ? GK_MM_FAIL_DELETE_VERSION
								       : GK_MM_FAIL_DELETE,
				e.msg);
	}
	if (out)
		protobuf_c_message_free_unpacked(&out->base, NULL);
}

int gk_mm_pass(gk_mmv *v, const char *policy, const gk_mm_ops *ops, gk_mm_plan *plan,
	       gk_mm_pass_stats *st, gk_err *err)
{
	gk_mm_pass_stats dummy;
	if (!st)
		st = &dummy;
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
	if (plan->idle)
		goto out;
	if (*diff_err) {
		gk_mm_plan_fail(plan, GK_MM_FAIL_APPLY, diff_err);
		goto out;
	}
	if (plan->ordered_upgrade && (plan->module_op == GK_MM_MOD_CREATE || plan->module_op == GK_MM_MOD_PATCH))
		GK_INFO("KMM Module %s uses ordered upgrade (version=\"%s\"); nodes must be labeled "
			"kmm.node.kubernetes.io/version-module.%s.%s=%s before the module loads",
			plan->module, cp->spec->kernel_module->version, mv.ns, plan->module,
			cp->spec->kernel_module->version);

	if (plan->finalizer_op == GK_MM_FIN_ADD && write_finalizers(v, ops, plan, true, st) != GK_OK)
		goto out; /* never create a Module we could not protect */

	/* the view may have changed (finalizer write): re-read the pointers */
	cp = gk_mmv_policy(v, policy);
	switch (plan->module_op) {
	case GK_MM_MOD_CREATE:
		do_create(v, ops, cp, plan, st);
		break;
	case GK_MM_MOD_PATCH:
		do_patch(v, ops, patch, plan, st);
		break;
	case GK_MM_MOD_DELETE:
		do_delete(v, ops, mv.module ? gk_mmv_module(v, plan->module) : NULL, plan, st);
		break;
	default:
		break;
	}
	if (plan->finalizer_op == GK_MM_FIN_REMOVE && !plan->failed)
		write_finalizers(v, ops, plan, false, st);
out:
	if (plan->failed)
		st->failures++;
	free(patch);
	(void)err;
	return GK_OK;
}
