/* gpukmm-modmgr: one pass against a fake API — write order, conflicts (409 →
 * re-read, plan->conflict: retried soon, not a failure), 404 on delete
 * ignored, preconditions, admission errors surfaced verbatim, idempotence (a
 * second pass writes nothing). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../services/modmgr/pass.h"

#define NS "intel-gpu-base-operator"

typedef struct fake {
	char calls[32][96];
	int n;
	int rc_create, rc_patch, rc_del, rc_get, rc_fin, rc_diff, rc_get_policy;
	int rc_start;                  /* a verb that cannot even start (mux full) */
	const char *msg;
	bool diff_says_changed;
	bool del_leaves_object;        /* KMM finalizer holds it */
	char last_uid[64], last_rv[64];
	char fins[4][64];
	size_t n_fins;
	Gpukmm__Module *get_result;    /* what a re-read returns */
	/* the call in flight: its result is handed over by complete() */
	gk_mm_run *run;
	int rc;
	ProtobufCMessage *out;
	int cancels;
} fake;

static fake FK;
static bool SPEC_HAS_KM(void);

static void call(const char *fmt, const char *a)
{
	cr_assert_lt(FK.n, 32);
	snprintf(FK.calls[FK.n++], 96, fmt, a ? a : "");
}

/* A verb starts: the result is kept until complete() (never delivered from
 * inside the verb, as lib/kube's async calls). */
static int start(gk_mm_run *r, int rc, ProtobufCMessage *out, void **handle, gk_err *err)
{
	cr_assert_null(FK.run, "one call in flight per pass");
	if (FK.rc_start) {
		if (out)
			protobuf_c_message_free_unpacked(out, NULL);
		return gk_err_set(err, FK.rc_start, "too many calls in flight");
	}
	FK.run = r;
	FK.rc = rc;
	FK.out = out;
	*handle = &FK;
	return 0;
}

/* Deliver the result of the call in flight. */
static void complete(void)
{
	cr_assert_not_null(FK.run);
	gk_mm_run *r = FK.run;
	ProtobufCMessage *out = FK.out;
	FK.run = NULL;
	FK.out = NULL;
	gk_mm_run_done(r, FK.rc, out, FK.rc ? FK.msg : NULL);
}

static Gpukmm__Module *mkmodule(const char *name, const char *uid, bool deleting)
{
	Gpukmm__Module *m = calloc(1, sizeof(*m));
	gpukmm__module__init(m);
	m->metadata = calloc(1, sizeof(*m->metadata));
	gpukmm__object_meta__init(m->metadata);
	m->metadata->name = strdup(name);
	m->metadata->namespace_ = strdup(NS);
	m->metadata->uid = strdup(uid);
	if (deleting)
		m->metadata->deletion_timestamp = strdup("2026-12-02T12:00:00Z");
	return m;
}

static int f_diff(void *u, const Gpukmm__ClusterPolicy *cp, const Gpukmm__Module *have, char **patch, gk_err *err)
{
	call("diff %s", have->metadata->name);
	if (FK.rc_diff)
		return gk_err_set(err, FK.rc_diff, "%s", FK.msg);
	*patch = FK.diff_says_changed ? strdup("{\"spec\":{\"selector\":{\"a\":null}}}") : NULL;
	return 0;
}
static int f_render(void *u, const Gpukmm__ClusterPolicy *cp, cJSON **obj, gk_err *err)
{
	call("render %s", cp->metadata->name);
	*obj = cJSON_CreateObject();
	return 0;
}
static int f_create(void *u, gk_mm_run *r, const cJSON *obj, void **h, gk_err *err)
{
	call("create", NULL);
	Gpukmm__Module *m = FK.rc_create ? NULL : mkmodule("gpu-gpu", "uid-new", false);
	return start(r, FK.rc_create, m ? &m->base : NULL, h, err);
}
static int f_patch(void *u, gk_mm_run *r, const char *name, const char *patch, void **h, gk_err *err)
{
	call("patch %s", name);
	Gpukmm__Module *m = FK.rc_patch ? NULL : mkmodule(name, "uid-m1", false);
	return start(r, FK.rc_patch, m ? &m->base : NULL, h, err);
}
static int f_del(void *u, gk_mm_run *r, const char *name, const char *uid, void **h, gk_err *err)
{
	call("delete %s", name);
	snprintf(FK.last_uid, sizeof(FK.last_uid), "%s", uid ? uid : "");
	Gpukmm__Module *m = !FK.rc_del && FK.del_leaves_object ? mkmodule(name, uid, true) : NULL;
	return start(r, FK.rc_del, m ? &m->base : NULL, h, err);
}
static int f_get(void *u, gk_mm_run *r, const char *name, void **h, gk_err *err)
{
	call("get %s", name);
	if (FK.rc_get)
		return start(r, FK.rc_get, NULL, h, err);
	Gpukmm__Module *m = FK.get_result;
	FK.get_result = NULL;
	return start(r, m ? 0 : GK_NOT_FOUND, m ? &m->base : NULL, h, err);
}
static int f_fin(void *u, gk_mm_run *r, const char *policy, const char *rv, char *const *fins, size_t n,
		 void **h, gk_err *err)
{
	call("finalizers %s", policy);
	snprintf(FK.last_rv, sizeof(FK.last_rv), "%s", rv ? rv : "");
	if (FK.rc_fin)
		return start(r, FK.rc_fin, NULL, h, err);
	FK.n_fins = n;
	for (size_t i = 0; i < n && i < 4; i++)
		snprintf(FK.fins[i], 64, "%s", fins[i]);
	/* the API's answer: the policy with the new list and a new resourceVersion */
	Gpukmm__ClusterPolicy *cp = calloc(1, sizeof(*cp));
	gpukmm__cluster_policy__init(cp);
	cp->metadata = calloc(1, sizeof(*cp->metadata));
	gpukmm__object_meta__init(cp->metadata);
	cp->metadata->name = strdup(policy);
	cp->metadata->resource_version = strdup("rv-2");
	cp->metadata->finalizers = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		cp->metadata->finalizers[i] = strdup(fins[i]);
	cp->metadata->n_finalizers = n;
	cp->spec = calloc(1, sizeof(*cp->spec));
	gpukmm__cluster_policy_spec__init(cp->spec);
	cp->spec->resource_registration = strdup("dra");
	if (SPEC_HAS_KM()) {
		cp->spec->kernel_module = calloc(1, sizeof(*cp->spec->kernel_module));
		gpukmm__kernel_module_spec__init(cp->spec->kernel_module);
	}
	return start(r, 0, &cp->base, h, err);
}
static int f_get_policy(void *u, gk_mm_run *r, const char *policy, void **h, gk_err *err)
{
	call("get policy %s", policy);
	if (FK.rc_get_policy)
		return start(r, FK.rc_get_policy, NULL, h, err);
	/* the policy as it is now: moved on (a status write), our finalizer kept */
	Gpukmm__ClusterPolicy *cp = calloc(1, sizeof(*cp));
	gpukmm__cluster_policy__init(cp);
	cp->metadata = calloc(1, sizeof(*cp->metadata));
	gpukmm__object_meta__init(cp->metadata);
	cp->metadata->name = strdup(policy);
	cp->metadata->resource_version = strdup("rv-9");
	cp->metadata->finalizers = calloc(2, sizeof(char *));
	cp->metadata->finalizers[0] = strdup("other.io/keep");
	cp->metadata->finalizers[1] = strdup(GK_MM_FINALIZER);
	cp->metadata->n_finalizers = 2;
	cp->metadata->deletion_timestamp = strdup("2026-12-02T12:00:00Z");
	cp->spec = calloc(1, sizeof(*cp->spec));
	gpukmm__cluster_policy_spec__init(cp->spec);
	cp->spec->resource_registration = strdup("dra");
	return start(r, 0, &cp->base, h, err);
}
static void f_cancel(void *u, void *h)
{
	cr_assert_eq(h, &FK);
	FK.cancels++;
	if (FK.out)
		protobuf_c_message_free_unpacked(FK.out, NULL);
	FK.run = NULL;
	FK.out = NULL;
}

static const gk_mm_ops OPS = {
	.diff = f_diff, .render = f_render, .create = f_create, .patch = f_patch,
	.del = f_del, .get = f_get, .set_finalizers = f_fin, .get_policy = f_get_policy, .cancel = f_cancel,
};

/* ---- view fixture ----------------------------------------------------------- */

static gk_mmv *V;
static gk_mm_plan P;
static gk_mm_pass_stats ST;
static Gpukmm__ObjectMeta CPMD;
static Gpukmm__ClusterPolicySpec SPEC;
static Gpukmm__KernelModuleSpec KM;
static Gpukmm__ClusterPolicy CP;
static char *FINS[2] = { "other.io/keep" };

static void put_cp(bool km, bool ours, bool deleting)
{
	gpukmm__object_meta__init(&CPMD);
	CPMD.name = "gpu";
	CPMD.resource_version = "rv-1";
	FINS[1] = GK_MM_FINALIZER;
	CPMD.finalizers = FINS;
	CPMD.n_finalizers = ours ? 2 : 1;
	if (deleting)
		CPMD.deletion_timestamp = "2026-12-02T12:00:00Z";
	gpukmm__kernel_module_spec__init(&KM);
	gpukmm__cluster_policy_spec__init(&SPEC);
	SPEC.resource_registration = "dra";
	SPEC.kernel_module = km ? &KM : NULL;
	gpukmm__cluster_policy__init(&CP);
	CP.metadata = &CPMD;
	CP.spec = &SPEC;
	cr_assert_eq(gk_mmv_put_policy(V, "gpu", &CP, NULL), 0);
}

static bool SPEC_HAS_KM(void)
{
	return SPEC.kernel_module != NULL;
}

static void put_module(bool deleting)
{
	Gpukmm__Module *m = mkmodule("gpu-gpu", "uid-m1", deleting);
	cr_assert_eq(gk_mmv_put_module(V, "gpu-gpu", m, NULL), 0);
	protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void kmm_on(void)
{
	Gpukmm__Discovery d;
	gpukmm__discovery__init(&d);
	d.has_kmm = d.kmm = d.has_dra = d.dra = 1;
	Gpukmm__Event e;
	gpukmm__event__init(&e);
	e.object_case = GPUKMM__EVENT__OBJECT_DISCOVERY;
	e.discovery = &d;
	gk_mmv_apply(V, "discovery", &e, NULL);
}

static void setup(void)
{
	memset(&FK, 0, sizeof(FK));
	memset(&ST, 0, sizeof(ST));
	gk_mmv_opts o = { .ns = NS };
	cr_assert_eq(gk_mmv_new(&V, &o, NULL, NULL, NULL), 0);
	kmm_on();
}

static void teardown(void)
{
	gk_mmv_free(V);
	if (FK.get_result)
		protobuf_c_message_free_unpacked(&FK.get_result->base, NULL);
	if (FK.out)
		protobuf_c_message_free_unpacked(FK.out, NULL);
}

static int ENDED;
static gk_mm_plan *ENDED_PLAN;
static void on_end(void *user, gk_mm_plan *plan)
{
	cr_assert_eq(user, &FK);
	ENDED++;
	ENDED_PLAN = plan;
}

/* Start a pass without completing anything; returns the run (NULL: over). */
static gk_mm_run *pass_start(void)
{
	FK.n = 0;
	ENDED = 0;
	memset(&P, 0, sizeof(P));
	gk_mm_run *r = NULL;
	cr_assert_eq(gk_mm_pass_start(V, "gpu", &OPS, &P, &ST, on_end, &FK, &r), 0);
	cr_assert_eq(ENDED, 0, "the callback never runs from inside the start");
	cr_assert_eq(r != NULL, FK.run != NULL, "a run exists exactly while a call is in flight");
	return r;
}

/* One whole pass: each call completes in turn until the pass ends. */
static void pass(void)
{
	gk_mm_run *r = pass_start();
	while (r && FK.run) {
		cr_assert_eq(ENDED, 0);
		complete();
	}
	cr_assert_eq(ENDED, r ? 1 : 0, "the callback runs once, after the last call");
	if (r)
		cr_assert_eq(ENDED_PLAN, &P);
}

static bool has_error(const char *s)
{
	for (size_t i = 0; i < P.n_errors; i++)
		if (strcmp(P.errors[i], s) == 0)
			return true;
	return false;
}

TestSuite(pass, .init = setup, .fini = teardown);

Test(pass, create_adds_finalizer_first_then_nothing_on_second_pass)
{
	put_cp(true, false, false);
	pass();
	cr_assert_eq(FK.n, 3);
	cr_assert_str_eq(FK.calls[0], "finalizers gpu");
	cr_assert_str_eq(FK.calls[1], "render gpu");
	cr_assert_str_eq(FK.calls[2], "create");
	cr_assert_str_eq(FK.last_rv, "rv-1", "guarded by the resourceVersion");
	cr_assert_eq(FK.n_fins, 2);
	cr_assert_str_eq(FK.fins[0], "other.io/keep", "other finalizers kept");
	cr_assert_str_eq(FK.fins[1], GK_MM_FINALIZER);
	cr_assert_not(P.failed);
	cr_assert(P.has_success_event);
	cr_assert_str_eq(P.kmm_status, "0/0");
	/* second pass: the view holds what we wrote; only the comparison runs */
	pass();
	cr_assert_eq(FK.n, 1);
	cr_assert_str_eq(FK.calls[0], "diff gpu-gpu");
	cr_assert_eq(P.module_op, GK_MM_MOD_NONE);
	cr_assert_eq(ST.creates, 1);
	cr_assert_eq(ST.finalizer_writes, 1);
}

Test(pass, finalizer_failure_blocks_the_create)
{
	put_cp(true, false, false);
	FK.rc_fin = GK_PERMISSION_DENIED;
	FK.msg = "clusterpolicies.intel.com \"gpu\" is forbidden";
	pass();
	cr_assert_eq(FK.n, 1, "no Module without its protection");
	cr_assert(P.failed);
	cr_assert(has_error("failed to update finalizer gpukmm.io/module-protection on ClusterPolicy gpu: "
			    "clusterpolicies.intel.com \"gpu\" is forbidden"));
}

Test(pass, finalizer_conflict_retries_without_error)
{
	put_cp(true, false, false);
	FK.rc_fin = GK_ABORTED;
	FK.msg = "the object has been modified";
	pass();
	cr_assert(P.conflict, "retried soon");
	cr_assert_not(P.failed, "a 409 is not a failure (no growing backoff)");
	cr_assert_eq(P.n_errors, 0, "a conflict is not a user-facing error");
	cr_assert_eq(ST.conflicts, 1);
	cr_assert_eq(ST.failures, 0);
	cr_assert_str_eq(FK.calls[FK.n - 1], "get policy gpu", "the policy is re-read");
	cr_assert_not(FK.calls[0][0] == 'c', "no Module created without the finalizer");
}

Test(pass, finalizer_removal_conflict_rereads_the_policy_then_retries_against_it)
{
	/* issue #15 item 6: a deleted policy whose finalizer removal 409s (its
	 * status was written meanwhile) must not wait on the failure backoff */
	put_cp(false, true, true);
	FK.rc_fin = GK_ABORTED;
	FK.msg = "Operation cannot be fulfilled on clusterpolicies.intel.com \"gpu\": the object has been modified";
	pass();
	cr_assert_eq(FK.n, 2);
	cr_assert_str_eq(FK.calls[0], "finalizers gpu");
	cr_assert_str_eq(FK.calls[1], "get policy gpu");
	cr_assert(P.conflict);
	cr_assert_not(P.failed);
	cr_assert_str_eq(gk_mmv_policy(V, "gpu")->metadata->resource_version, "rv-9", "the fresh policy is in the view");
	FK.rc_fin = 0;
	pass();
	cr_assert_str_eq(FK.calls[0], "finalizers gpu");
	cr_assert_str_eq(FK.last_rv, "rv-9", "retried against the re-read resourceVersion");
	cr_assert_not(P.conflict);
	cr_assert_eq(FK.n_fins, 1);
}

Test(pass, a_failed_policy_reread_folds_nothing)
{
	put_cp(false, true, true);
	FK.rc_fin = GK_ABORTED;
	FK.rc_get_policy = GK_NOT_FOUND;
	FK.msg = "not found";
	pass();
	cr_assert(P.conflict);
	cr_assert_not_null(gk_mmv_policy(V, "gpu"), "an absence comes from the watch, not from a re-read");
}

Test(pass, admission_denial_surfaces_verbatim)
{
	put_cp(true, true, false);
	FK.rc_create = GK_INVALID_ARGUMENT;
	FK.msg = "admission webhook \"vmodule.kb.io\" denied the request: missing spec.moduleLoader.container.kernelMappings[0].containerImage";
	pass();
	cr_assert(P.failed);
	cr_assert(has_error("failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: admission webhook "
			    "\"vmodule.kb.io\" denied the request: missing "
			    "spec.moduleLoader.container.kernelMappings[0].containerImage"));
	cr_assert_not(P.has_success_event);
	cr_assert_null(gk_mmv_module(V, "gpu-gpu"));
}

Test(pass, create_already_exists_rereads_and_retries)
{
	put_cp(true, true, false);
	FK.rc_create = GK_ALREADY_EXISTS;
	FK.msg = "modules.kmm.sigs.x-k8s.io \"gpu-gpu\" already exists";
	FK.get_result = mkmodule("gpu-gpu", "uid-x", false);
	pass();
	cr_assert_str_eq(FK.calls[FK.n - 1], "get gpu-gpu");
	cr_assert(P.conflict);
	cr_assert_not(P.failed);
	cr_assert_eq(P.n_errors, 0);
	cr_assert_not_null(gk_mmv_module(V, "gpu-gpu"), "the re-read object is in the view");
	/* next pass compares instead of creating */
	pass();
	cr_assert_str_eq(FK.calls[0], "diff gpu-gpu");
}

Test(pass, patch_when_diff_says_so)
{
	put_cp(true, true, false);
	put_module(false);
	FK.diff_says_changed = true;
	pass();
	cr_assert_eq(FK.n, 2);
	cr_assert_str_eq(FK.calls[1], "patch gpu-gpu");
	cr_assert_eq(ST.patches, 1);
	cr_assert_str_eq(P.success_event.reason, "ModuleUpdated");
}

Test(pass, patch_conflict_or_gone_rereads)
{
	put_cp(true, true, false);
	put_module(false);
	FK.diff_says_changed = true;
	FK.rc_patch = GK_NOT_FOUND;
	FK.msg = "not found";
	pass();
	cr_assert(P.conflict);
	cr_assert_eq(P.n_errors, 0);
	cr_assert_null(gk_mmv_module(V, "gpu-gpu"), "re-read found nothing");
	pass();
	cr_assert_str_eq(FK.calls[FK.n - 1], "create", "recreated on the retry");
}

Test(pass, patch_server_error_is_reported)
{
	put_cp(true, true, false);
	put_module(false);
	FK.diff_says_changed = true;
	FK.rc_patch = GK_INTERNAL;
	FK.msg = "etcdserver: request timed out";
	pass();
	cr_assert(has_error("failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: etcdserver: request timed out"));
}

Test(pass, diff_failure_is_an_apply_error_without_writes)
{
	put_cp(true, true, false);
	put_module(false);
	FK.rc_diff = GK_INVALID_ARGUMENT;
	FK.msg = "cannot render";
	pass();
	cr_assert_eq(FK.n, 1);
	cr_assert(P.failed);
	cr_assert(has_error("failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: cannot render"));
}

Test(pass, delete_with_uid_precondition_then_finalizer_removed)
{
	put_cp(false, true, false);
	put_module(false);
	pass();
	cr_assert_eq(FK.n, 1);
	cr_assert_str_eq(FK.calls[0], "delete gpu-gpu");
	cr_assert_str_eq(FK.last_uid, "uid-m1");
	cr_assert_null(gk_mmv_module(V, "gpu-gpu"));
	pass();
	cr_assert_eq(FK.n, 1);
	cr_assert_str_eq(FK.calls[0], "finalizers gpu");
	cr_assert_eq(FK.n_fins, 1, "only ours removed");
	cr_assert_str_eq(FK.fins[0], "other.io/keep");
	pass();
	cr_assert_eq(FK.n, 0, "nothing left to do");
}

Test(pass, delete_held_by_kmm_finalizer_reports_removing)
{
	put_cp(false, true, false);
	put_module(false);
	FK.del_leaves_object = true;
	pass();
	cr_assert_not_null(gk_mmv_module(V, "gpu-gpu"));
	pass();
	cr_assert_eq(FK.n, 0, "no second delete");
	cr_assert_str_eq(P.kmm_status, "Removing");
	cr_assert_eq(P.requeue_after_ms, GK_MM_REQUEUE_MS);
}

Test(pass, delete_404_ignored)
{
	put_cp(false, true, false);
	put_module(false);
	FK.rc_del = GK_NOT_FOUND;
	FK.msg = "not found";
	pass();
	cr_assert_not(P.failed);
	cr_assert_eq(P.n_errors, 0);
	cr_assert_null(gk_mmv_module(V, "gpu-gpu"));
}

Test(pass, delete_precondition_conflict_rereads)
{
	put_cp(false, true, false);
	put_module(false);
	FK.rc_del = GK_ABORTED;
	FK.msg = "Precondition failed: UID in precondition: uid-m1, UID in object meta: uid-m2";
	FK.get_result = mkmodule("gpu-gpu", "uid-m2", false);
	pass();
	cr_assert(P.conflict);
	cr_assert_eq(P.n_errors, 0);
	pass();
	cr_assert_str_eq(FK.last_uid, "uid-m2", "retried against the object it re-read");
}

Test(pass, delete_error_strings)
{
	put_cp(false, true, false);
	put_module(false);
	FK.rc_del = GK_PERMISSION_DENIED;
	FK.msg = "forbidden";
	pass();
	cr_assert(has_error("failed to delete KMM Module gpu-gpu: forbidden"));
	/* version toggle */
	put_cp(true, true, false);
	KM.version = "1.0";
	gk_mmv_put_policy(V, "gpu", &CP, NULL);
	pass();
	cr_assert(has_error("failed to delete KMM Module gpu-gpu for version change: forbidden"));
}

Test(pass, policy_deleted_module_deleted_then_finalizer_released)
{
	put_cp(true, true, true);
	put_module(false);
	pass();
	cr_assert_str_eq(FK.calls[0], "delete gpu-gpu");
	pass();
	cr_assert_str_eq(FK.calls[0], "finalizers gpu");
}

Test(pass, finalizer_remove_on_gone_policy_is_fine)
{
	put_cp(false, true, false);
	FK.rc_fin = GK_NOT_FOUND;
	FK.msg = "gone";
	pass();
	cr_assert_not(P.failed);
}

static void lose_leadership(void)
{
	Gpukmm__Leadership l;
	gpukmm__leadership__init(&l);
	l.has_leader = 1;
	Gpukmm__Event e;
	gpukmm__event__init(&e);
	e.object_case = GPUKMM__EVENT__OBJECT_LEADERSHIP;
	e.leadership = &l;
	gk_mmv_apply(V, "leadership", &e, NULL);
}

Test(pass, not_leader_touches_nothing)
{
	put_cp(true, false, false);
	lose_leadership();
	pass();
	cr_assert_eq(FK.n, 0);
	cr_assert(P.idle);
}

/* ---- the step machine: what happens while a call is in flight --------------- */

Test(pass, one_call_at_a_time_in_order)
{
	put_cp(true, false, false);
	gk_mm_run *r = pass_start();
	cr_assert_not_null(r);
	cr_assert_eq(FK.n, 1, "only the finalizer write is started");
	cr_assert_str_eq(FK.calls[0], "finalizers gpu");
	complete();
	cr_assert_eq(ENDED, 0);
	cr_assert_eq(FK.n, 3, "the create starts from the finalizer's completion");
	cr_assert_str_eq(FK.calls[2], "create");
	complete();
	cr_assert_eq(ENDED, 1);
	cr_assert_not(P.failed);
	cr_assert(P.has_success_event);
}

Test(pass, leadership_lost_while_in_flight_stops_the_writes)
{
	put_cp(true, false, false);
	gk_mm_run *r = pass_start();
	cr_assert_not_null(r);
	lose_leadership(); /* arrives while the finalizer write is in flight */
	complete();
	cr_assert_eq(ENDED, 1, "the pass ends at the completion");
	cr_assert_eq(FK.n, 1, "no Module written once we no longer lead");
	cr_assert(P.idle, "nothing reported either");
	cr_assert_eq(ST.creates, 0);
}

Test(pass, policy_gone_while_in_flight_ends_quietly)
{
	put_cp(true, false, false);
	gk_mm_run *r = pass_start();
	cr_assert_not_null(r);
	gk_mmv_put_policy(V, "gpu", NULL, NULL);
	complete();
	cr_assert_eq(ENDED, 1);
	cr_assert_eq(FK.n, 1, "nothing rendered for a policy that is gone");
	cr_assert_not(P.failed, "its delete event queues the key again");
}

Test(pass, cancel_in_flight_drops_the_call)
{
	put_cp(true, true, false);
	put_module(false);
	FK.diff_says_changed = true;
	gk_mm_run *r = pass_start();
	cr_assert_not_null(r);
	cr_assert_str_eq(FK.calls[FK.n - 1], "patch gpu-gpu");
	gk_mm_run_cancel(r); /* shutdown */
	cr_assert_eq(FK.cancels, 1);
	cr_assert_eq(ENDED, 0, "no callback after a cancel");
	cr_assert_eq(ST.patches, 0);
}

Test(pass, a_call_that_cannot_start_fails_the_pass_at_once)
{
	put_cp(true, true, false);
	FK.rc_start = GK_RESOURCE_EXHAUSTED;
	gk_mm_run *r = pass_start();
	cr_assert_null(r, "over on return");
	cr_assert(P.failed, "retried with backoff");
	cr_assert(has_error("failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: too many calls in flight"));
}
