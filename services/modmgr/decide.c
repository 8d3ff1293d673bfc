/* gpukmm-modmgr — the pure reconcile decision (see decide.h). */
#include "decide.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpukmm/policy.h"

#define MODULE_RES "modules.kmm.sigs.x-k8s.io"

static void cpy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

void gk_mm_plan_add_error(gk_mm_plan *plan, const char *fmt, ...)
{
	char buf[GK_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < plan->n_errors; i++)
		if (strcmp(plan->errors[i], buf) == 0)
			return;
	if (plan->n_errors == GK_MM_MAX_ERRORS) {
		memmove(plan->errors[0], plan->errors[1], (GK_MM_MAX_ERRORS - 1) * sizeof(plan->errors[0]));
		plan->n_errors--;
	}
	memcpy(plan->errors[plan->n_errors++], buf, sizeof(buf));
}

/* Add a message formatted by lib/policy (the exact upstream strings). */
#define ADD_MSG(plan, fn, ...)                                          \
	do {                                                            \
		char msg_[GK_ERR_MSG_MAX];                              \
		(fn)(msg_, sizeof(msg_), __VA_ARGS__);                  \
		gk_mm_plan_add_error((plan), "%s", msg_);               \
	} while (0)

static void add_event(gk_mm_plan *plan, bool warning, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void add_event(gk_mm_plan *plan, bool warning, const char *reason, const char *fmt, ...)
{
	if (plan->n_events == GK_MM_MAX_EVENTS)
		return;
	gk_mm_event *e = &plan->events[plan->n_events++];
	e->warning = warning;
	cpy(e->reason, sizeof(e->reason), reason);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

static void success_event(gk_mm_plan *plan, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void success_event(gk_mm_plan *plan, const char *reason, const char *fmt, ...)
{
	plan->has_success_event = true;
	plan->success_event.warning = false;
	cpy(plan->success_event.reason, sizeof(plan->success_event.reason), reason);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(plan->success_event.message, sizeof(plan->success_event.message), fmt, ap);
	va_end(ap);
}

static void cond(gk_mm_plan *plan, const char *status, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void cond(gk_mm_plan *plan, const char *status, const char *reason, const char *fmt, ...)
{
	cpy(plan->cond_status, sizeof(plan->cond_status), status);
	cpy(plan->cond_reason, sizeof(plan->cond_reason), reason);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(plan->cond_message, sizeof(plan->cond_message), fmt, ap);
	va_end(ap);
}

static void set_status(gk_mm_plan *plan, const char *s)
{
	plan->has_kmm_status = true;
	cpy(plan->kmm_status, sizeof(plan->kmm_status), s);
}

/* Keep the smallest non-zero requeue. */
static void requeue(gk_mm_plan *plan, int64_t ms)
{
	if (ms > 0 && (plan->requeue_after_ms == 0 || ms < plan->requeue_after_ms))
		plan->requeue_after_ms = ms;
}

void gk_mm_kmm_status_of(const Gpukmm__Module *m, char *buf, size_t cap)
{
	int32_t avail = 0, desired = 0;
	if (m && m->module_loader_status) {
		if (m->module_loader_status->has_available_number)
			avail = m->module_loader_status->available_number;
		if (m->module_loader_status->has_desired_number)
			desired = m->module_loader_status->desired_number;
	}
	snprintf(buf, cap, "%d/%d", avail, desired);
}

bool gk_mm_claim_blocks(const Gpukmm__ResourceClaim *c)
{
	if (!c || !c->has_allocated || !c->allocated)
		return false;
	for (size_t i = 0; i < c->n_allocated_drivers; i++)
		if (c->allocated_drivers[i] && strcmp(c->allocated_drivers[i], GK_MM_GPU_DRIVER) == 0)
			return true;
	return false;
}

bool gk_mm_pod_is_operand(const Gpukmm__Pod *p, const char *ns)
{
	const Gpukmm__ObjectMeta *md = p ? p->metadata : NULL;
	if (!md || !md->namespace_ || !ns || strcmp(md->namespace_, ns) != 0)
		return false;
	for (size_t i = 0; i < md->n_owner_references; i++) {
		const Gpukmm__OwnerReference *r = md->owner_references[i];
		if (r->has_controller && r->controller && r->kind && strcmp(r->kind, "DaemonSet") == 0)
			return true;
	}
	return false;
}

bool gk_mm_pod_blocks(const Gpukmm__Pod *p)
{
	if (!p || p->n_gpu_resources == 0)
		return false;
	/* a terminated pod holds no device any more */
	if (p->phase && (strcmp(p->phase, "Succeeded") == 0 || strcmp(p->phase, "Failed") == 0))
		return false;
	return true;
}

bool gk_mm_has_finalizer(const Gpukmm__ClusterPolicy *cp)
{
	if (!cp || !cp->metadata)
		return false;
	for (size_t i = 0; i < cp->metadata->n_finalizers; i++)
		if (cp->metadata->finalizers[i] && strcmp(cp->metadata->finalizers[i], GK_MM_FINALIZER) == 0)
			return true;
	return false;
}

bool gk_mm_has_operand_finalizer(const Gpukmm__ClusterPolicy *cp)
{
	if (!cp || !cp->metadata)
		return false;
	for (size_t i = 0; i < cp->metadata->n_finalizers; i++)
		if (cp->metadata->finalizers[i] && strcmp(cp->metadata->finalizers[i], GK_MM_OPERAND_FINALIZER) == 0)
			return true;
	return false;
}

bool gk_mm_owned_by_other(const Gpukmm__Module *m, const char *policy, const char **kind,
			  const char **name)
{
	if (!m || !m->metadata)
		return false;
	for (size_t i = 0; i < m->metadata->n_owner_references; i++) {
		const Gpukmm__OwnerReference *o = m->metadata->owner_references[i];
		if (!o || !o->has_controller || !o->controller)
			continue;
		/* controller-runtime compares group, kind and name (not the uid) */
		const char *av = o->api_version ? o->api_version : "";
		bool ours = o->kind && strcmp(o->kind, "ClusterPolicy") == 0 && o->name &&
			    strcmp(o->name, policy) == 0 && strncmp(av, "intel.com/", 10) == 0;
		if (ours)
			return false;
		if (kind)
			*kind = o->kind ? o->kind : "";
		if (name)
			*name = o->name ? o->name : "";
		return true;
	}
	return false;
}

const char *gk_mm_module_version(const Gpukmm__Module *m)
{
	if (m && m->spec && m->spec->module_loader && m->spec->module_loader->container &&
	    m->spec->module_loader->container->version)
		return m->spec->module_loader->container->version;
	return "";
}

static bool deleting(const Gpukmm__ObjectMeta *md)
{
	return md && md->deletion_timestamp && *md->deletion_timestamp;
}

static bool is_dp(const Gpukmm__ClusterPolicy *cp)
{
	/* unknown mode (policy gone): guard with pods too, fail-safe */
	if (!cp || !cp->spec || !cp->spec->resource_registration)
		return true;
	return strcmp(cp->spec->resource_registration, "dp") == 0;
}

/* Fail closed: a state the view cannot vouch for. Nothing is written; the
 * reason goes to the log, and to the status when `report` (something that
 * deletes, recreates or un-finalizes is waiting on it). */
static void hold(gk_mm_plan *plan, bool report, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void hold(gk_mm_plan *plan, bool report, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(plan->hold, sizeof(plan->hold), fmt, ap);
	va_end(ap);
	plan->held = true;
	plan->module_op = GK_MM_MOD_NONE;
	plan->finalizer_op = GK_MM_FIN_NONE;
	plan->has_success_event = false;
	requeue(plan, GK_MM_REQUEUE_MS);
	if (!report) {
		plan->report = false; /* the status stays as it was */
		return;
	}
	gk_mm_plan_add_error(plan, "%s", plan->hold);
	cond(plan, "Unknown", "StateUnconfirmed", "%s", plan->hold);
}

/* The guard (§4 + the dp-mode extension). Adds the blocking errors and the
 * event; returns true when the Module must not go away (nor our finalizer
 * from a policy being deleted). `what` is "deletion" or "recreation for
 * version change". GPU use that cannot be confirmed (the claims or, in dp
 * mode, the pods cannot be vouched for) blocks like GPU use. */
static bool guard(const gk_mm_view *v, gk_mm_plan *plan, const char *what, bool report_errors)
{
	bool dp = is_dp(v->policy);
	const char *cu = v->claims_unconfirmed, *pu = dp ? v->pods_unconfirmed : NULL;
	bool claims = !cu && v->dra && v->claims_allocated;
	bool pods = !pu && v->gpu_pods && dp;
	if (!claims && !pods && !cu && !pu)
		return false;
	bool recreate = strcmp(what, "deletion") != 0;
	if (report_errors) {
		if (claims)
			ADD_MSG(plan, recreate ? gk_policy_msg_blocking_recreation : gk_policy_msg_blocking_deletion,
				plan->module);
		if (pods)
			gk_mm_plan_add_error(plan, "pods requesting gpu.intel.com resources blocking " MODULE_RES
					     "/%s %s", plan->module, what);
		if (cu)
			gk_mm_plan_add_error(plan, MODULE_RES "/%s %s waits: GPU ResourceClaims could not be "
					     "confirmed (%s)", plan->module, what, cu);
		if (pu)
			gk_mm_plan_add_error(plan, MODULE_RES "/%s %s waits: pods requesting gpu.intel.com "
					     "resources could not be confirmed (%s)", plan->module, what, pu);
	}
	if (claims || pods)
		add_event(plan, true, recreate ? "ModuleRecreationBlocked" : "ModuleDeletionBlocked",
			  "KMM Module %s/%s %s blocked: %s%s%s in use%s", v->ns, plan->module, what,
			  claims ? "allocated GPU ResourceClaims" : "", claims && pods ? " and " : "",
			  pods ? "pods requesting gpu.intel.com resources" : "",
			  cu || pu ? "; GPU use not confirmed either" : "");
	else
		add_event(plan, true, recreate ? "ModuleRecreationBlocked" : "ModuleDeletionBlocked",
			  "KMM Module %s/%s %s blocked: GPU use could not be confirmed (%s)", v->ns, plan->module,
			  what, cu ? cu : pu);
	if (claims || pods)
		cond(plan, "False", recreate ? "RecreationBlocked" : "DeletionBlocked",
		     "KMM Module %s %s is blocked while GPUs are in use", plan->module, what);
	else
		cond(plan, "False", recreate ? "RecreationBlocked" : "DeletionBlocked",
		     "KMM Module %s %s waits until GPU use can be confirmed: %s", plan->module, what, cu ? cu : pu);
	requeue(plan, GK_MM_REQUEUE_MS);
	return true;
}

/* Our finalizer goes from a policy: at once when the policy lives (the
 * Module is confirmed absent, the finalizer protects nothing yet); for a
 * policy being deleted only when the guard is clear too (once the
 * finalizer is gone, the garbage collector deletes whatever the policy
 * controls). Returns false when it stays. */
static bool release_finalizer(const gk_mm_view *v, gk_mm_plan *plan, bool policy_alive)
{
	if (!gk_mm_has_finalizer(v->policy))
		return true;
	if (!policy_alive && guard(v, plan, "deletion", true))
		return false;
	plan->finalizer_op = GK_MM_FIN_REMOVE;
	return true;
}

static void loaded_cond(gk_mm_plan *plan, const Gpukmm__Module *m, bool fresh)
{
	int32_t avail = 0, desired = 0;
	if (!fresh && m && m->module_loader_status) {
		avail = m->module_loader_status->has_available_number ? m->module_loader_status->available_number : 0;
		desired = m->module_loader_status->has_desired_number ? m->module_loader_status->desired_number : 0;
	}
	if (desired > 0 && avail < desired)
		ADD_MSG(plan, gk_policy_msg_not_fully_available, plan->module, avail, desired);
	if (desired > 0 && avail >= desired)
		cond(plan, "True", "ModuleLoaded", "KMM Module %s is loaded on %d/%d nodes", plan->module,
		     avail, desired);
	else if (desired == 0)
		cond(plan, "False", "NoMatchingNodes",
		     "KMM Module %s targets no node yet (0 desired)", plan->module);
	else
		cond(plan, "False", "ModuleLoading", "KMM Module %s is loaded on %d/%d nodes", plan->module,
		     avail, desired);
}

/* The Module should not exist: delete it under the guard (§2.1, §4.3, §5.2, §7.3). */
static void decide_delete(const gk_mm_view *v, gk_mm_plan *plan, bool policy_alive)
{
	const Gpukmm__Module *m = v->module;
	const char *okind, *oname;
	bool report_errors = v->policy != NULL;
	if (v->module_unconfirmed) {
		/* absent, or present in a version we cannot vouch for */
		hold(plan, report_errors && !policy_alive,
		     "deletion of ClusterPolicy %s waits: the state of KMM Module %s/%s could not be confirmed (%s)",
		     plan->policy, v->ns, plan->module, v->module_unconfirmed);
		return;
	}
	if (!m) {
		if (policy_alive)
			set_status(plan, GK_POLICY_STATUS_NA);
		cond(plan, "False", policy_alive ? "InTreeDriver" : "PolicyDeleted",
		     policy_alive ? "spec.kernelModule is not set: no KMM Module, the in-tree driver is used"
				  : "the ClusterPolicy is being deleted and its KMM Module is gone");
		release_finalizer(v, plan, policy_alive);
		return;
	}
	if (gk_mm_owned_by_other(m, plan->policy, &okind, &oname)) {
		/* never delete what another controller owns; nothing of ours to protect */
		if (policy_alive)
			set_status(plan, GK_POLICY_STATUS_NA);
		cond(plan, "False", "OwnedByOther", "KMM Module %s/%s is controlled by %s %s, not deleted",
		     v->ns, plan->module, okind, oname);
		release_finalizer(v, plan, policy_alive);
		return;
	}
	/* upstream order: the guard before the deletionTimestamp check */
	if (guard(v, plan, "deletion", report_errors))
		return;
	/* the ordered teardown (operands.md §9.3): the KMM Module goes last, once
	 * gpukmm-opmgr has removed the device plugin, DRA driver and XPU Manager
	 * (it drops its finalizer then) */
	if (v->policy && deleting(v->policy->metadata) && gk_mm_has_operand_finalizer(v->policy)) {
		cond(plan, "False", "WaitingForOperands",
		     "KMM Module %s is deleted once the device plugin, DRA driver and XPU Manager are gone",
		     plan->module);
		return;
	}
	if (deleting(m->metadata)) {
		if (report_errors)
			ADD_MSG(plan, gk_policy_msg_pending_deletion, plan->module);
		set_status(plan, GK_POLICY_STATUS_REMOVING);
		cond(plan, "False", "Removing", "KMM Module %s is being deleted", plan->module);
		requeue(plan, GK_MM_REQUEUE_MS); /* honoured, unlike upstream (§10.3) */
		return;
	}
	plan->module_op = GK_MM_MOD_DELETE;
	/* kmmStatus left as it was in this pass (§1.5); the watch drives the next */
	cond(plan, "False", "Removing", "KMM Module %s is being deleted", plan->module);
	success_event(plan, "ModuleDeleted", "Deleted KMM Module %s/%s", v->ns, plan->module);
}

void gk_mm_decide(const gk_mm_view *v, gk_mm_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	cpy(plan->policy, sizeof(plan->policy), v->policy_name);
	snprintf(plan->module, sizeof(plan->module), "%s-gpu", v->policy_name ? v->policy_name : "");
	if (!v->leader) {
		plan->idle = true;
		return;
	}
	const Gpukmm__ClusterPolicy *cp = v->policy;
	const Gpukmm__KernelModuleSpec *km = cp && cp->spec ? cp->spec->kernel_module : NULL;
	bool alive = cp && !deleting(cp->metadata);

	plan->report = true;
	plan->report_deleted = cp == NULL;
	if (cp && cp->metadata && cp->metadata->has_generation)
		plan->generation = cp->metadata->generation;

	if (v->policy_unconfirmed) {
		/* gone, or changed in a way we cannot read: no write from a state
		 * we cannot vouch for. A policy being deleted stays so: say why
		 * its deletion waits. */
		hold(plan, cp && (!alive || v->policy_unreadable),
		     "%s of ClusterPolicy %s waits: its state could not be confirmed (%s)",
		     cp && !alive ? "deletion" : "reconciliation", plan->policy, v->policy_unconfirmed);
		return;
	}

	if (!v->kmm) {
		if (v->module_unconfirmed) {
			/* KMM's API answered absent, but that is not confirmed yet (or
			 * never answered): keep everything as it is */
			hold(plan, cp && !alive && gk_mm_has_finalizer(cp),
			     "%s of ClusterPolicy %s waits: the KMM API state could not be confirmed (%s)",
			     alive ? "reconciliation" : "deletion", plan->policy, v->module_unconfirmed);
			return;
		}
		/* §5.2 row 1: kmmStatus untouched, no Module, not an error return */
		if (alive && km) {
			gk_mm_plan_add_error(plan, "%s", GK_POLICY_MSG_KMM_NOT_INSTALLED);
			cond(plan, "False", "KMMNotInstalled",
			     "spec.kernelModule is set but the KMM API (kmm.sigs.x-k8s.io) is not served");
		} else if (alive) {
			cond(plan, "False", "InTreeDriver",
			     "spec.kernelModule is not set: no KMM Module, the in-tree driver is used");
		}
		/* KMM is confirmed not served: no Module can exist. A policy being
		 * deleted still keeps its finalizer while the guard blocks. */
		release_finalizer(v, plan, alive);
		return;
	}

	if (!alive || !km) {
		decide_delete(v, plan, alive);
		return;
	}

	const Gpukmm__Module *m = v->module;
	if (v->module_unconfirmed) {
		/* <cp>-gpu cannot be read, or the Modules cannot be vouched for:
		 * neither created, patched nor recreated from that. Said in the
		 * status when the object itself is unreadable (that lasts); a
		 * list or watch gap passes, and the status is left alone */
		hold(plan, v->module_unreadable, "KMM Module %s/%s is left as it is: its state could not be confirmed (%s)",
		     v->ns, plan->module, v->module_unconfirmed);
		return;
	}

	/* the Module is wanted: protect it first (DESIGN §5.4) */
	if (!gk_mm_has_finalizer(cp))
		plan->finalizer_op = GK_MM_FIN_ADD;
	const char *want_version = km->version ? km->version : "";
	plan->ordered_upgrade = *want_version != '\0';

	if (!m) {
		plan->module_op = GK_MM_MOD_CREATE;
		set_status(plan, "0/0"); /* a fresh Module has no status (§1.5) */
		loaded_cond(plan, NULL, true);
		success_event(plan, "ModuleCreated", "Created KMM Module %s/%s", v->ns, plan->module);
		return;
	}

	const char *okind, *oname;
	if (gk_mm_owned_by_other(m, plan->policy, &okind, &oname)) {
		char st[32];
		gk_mm_kmm_status_of(m, st, sizeof(st));
		set_status(plan, st);
		char oc[GK_ERR_MSG_MAX];
		gk_policy_msg_owner_conflict(oc, sizeof(oc), v->ns, plan->module, okind, oname);
		ADD_MSG(plan, gk_policy_msg_reconcile_failed, plan->module, plan->policy, oc);
		cond(plan, "False", "OwnedByOther", "KMM Module %s/%s is controlled by %s %s", v->ns,
		     plan->module, okind, oname);
		add_event(plan, true, "ModuleApplyFailed", "KMM Module %s/%s is already owned by %s %s",
			  v->ns, plan->module, okind, oname);
		plan->failed = true;
		return;
	}

	/* §2.6: empty <-> non-empty version cannot be patched: delete and recreate */
	const char *have_version = gk_mm_module_version(m);
	if ((*have_version == '\0') != (*want_version == '\0')) {
		if (deleting(m->metadata)) {
			set_status(plan, GK_POLICY_STATUS_RECREATING);
			cond(plan, "False", GK_POLICY_REASON_RECREATING, "KMM Module %s is being recreated for a version change",
			     plan->module);
			requeue(plan, GK_MM_REQUEUE_MS);
			return;
		}
		if (guard(v, plan, "recreation for version change", true))
			return;
		plan->module_op = GK_MM_MOD_DELETE;
		plan->delete_for_version_change = true;
		set_status(plan, GK_POLICY_STATUS_RECREATING);
		cond(plan, "False", GK_POLICY_REASON_RECREATING, "KMM Module %s is being recreated for a version change",
		     plan->module);
		requeue(plan, GK_MM_REQUEUE_MS);
		success_event(plan, "ModuleDeleted",
			      "Deleted KMM Module %s/%s to recreate it: version \"%s\" -> \"%s\"", v->ns,
			      plan->module, have_version, want_version);
		return;
	}

	char st[32];
	gk_mm_kmm_status_of(m, st, sizeof(st));
	set_status(plan, st);
	if (deleting(m->metadata)) {
		/* someone else deleted it: wait until it is gone, then create it again */
		cond(plan, "False", GK_POLICY_REASON_RECREATING, "KMM Module %s is pending deletion; it will be recreated",
		     plan->module);
		requeue(plan, GK_MM_REQUEUE_MS);
		return;
	}
	loaded_cond(plan, m, false);
	if (!v->module_up_to_date) {
		plan->module_op = GK_MM_MOD_PATCH;
		success_event(plan, "ModuleUpdated", "Updated KMM Module %s/%s", v->ns, plan->module);
	}
}

void gk_mm_plan_fail(gk_mm_plan *plan, int failure, const char *apierr)
{
	const char *e = apierr ? apierr : "unknown error";
	const char *reason = "ApplyFailed", *ev = "ModuleApplyFailed";
	switch (failure) {
	case GK_MM_FAIL_GET:
		ADD_MSG(plan, gk_policy_msg_get_failed, plan->module, e);
		reason = "GetFailed";
		ev = "ModuleGetFailed";
		break;
	case GK_MM_FAIL_APPLY:
		ADD_MSG(plan, gk_policy_msg_reconcile_failed, plan->module, plan->policy, e);
		break;
	case GK_MM_FAIL_DELETE:
		ADD_MSG(plan, gk_policy_msg_delete_failed, plan->module, e);
		reason = "DeleteFailed";
		ev = "ModuleDeleteFailed";
		break;
	case GK_MM_FAIL_DELETE_VERSION:
		ADD_MSG(plan, gk_policy_msg_delete_for_version_failed, plan->module, e);
		reason = "DeleteFailed";
		ev = "ModuleDeleteFailed";
		break;
	default:
		gk_mm_plan_add_error(plan, "failed to update finalizer %s on ClusterPolicy %s: %s",
				     GK_MM_FINALIZER, plan->policy, e);
		reason = "FinalizerFailed";
		ev = "FinalizerUpdateFailed";
		break;
	}
	plan->failed = true;
	plan->has_success_event = false;
	cond(plan, "False", reason, "%s", plan->errors[plan->n_errors - 1]);
	add_event(plan, true, ev, "%s", plan->errors[plan->n_errors - 1]);
}
