/* gpukmm-modmgr — one reconcile pass of one ClusterPolicy: view → decision →
 * API writes, with the failure handling of §5.2 and DESIGN §2 (409 → re-read
 * and retry through the queue's backoff; 404 on delete ignored; preconditions
 * on delete; resourceVersion on finalizer updates).
 *
 * A pass is a step machine that never blocks: the decision is made at start,
 * then each API write is started and the pass goes on from its completion
 * (finalizer add → Module create/patch/delete → [re-read on conflict] →
 * finalizer remove). One call is in flight per pass; the leader check is made
 * again when a call completes, before the next write.
 *
 * A 409 is not a failure: the object moved under us. The pass re-reads it
 * (the Module, or the ClusterPolicy after a finalizer write), folds the fresh
 * object into the view and ends with plan->conflict: the service runs the key
 * again after gk_kube_conflict_delay (20 ms doubling, per key), not after the
 * failure backoff (which grows to 1000 s over a streak).
 *
 * The API and the rendering are reached through an ops table so the ordering
 * and every error path are unit-tested with a fake; kops.c plugs lib/kube's
 * async calls (on the service loop) and lib/policy in. */
#ifndef GPUKMM_MODMGR_PASS_H
#define GPUKMM_MODMGR_PASS_H

#include <cJSON.h>

#include "decide.h"
#include "gpukmm/err.h"
#include "view.h"

/* A pass in flight. */
typedef struct gk_mm_run gk_mm_run;

typedef struct gk_mm_ops {
	void *user;
	/* Merge patch that turns `have` into the desired Module of `cp` (managed
	 * fields only, removed keys as null); *patch NULL = already up to date. */
	int (*diff)(void *user, const Gpukmm__ClusterPolicy *cp, const Gpukmm__Module *have,
		    char **patch, gk_err *err);
	/* The whole desired Module object (metadata with ownerRef + spec). */
	int (*render)(void *user, const Gpukmm__ClusterPolicy *cp, cJSON **obj, gk_err *err);
	/* API verbs on Modules of the operator namespace, asynchronous: start the
	 * call and return GK_OK with a handle in *call; the result is handed to
	 * gk_mm_run_done(r, ...) later, exactly once, never from inside the verb,
	 * unless the call is cancelled first. Any other return: nothing started
	 * (err says why). Error codes follow lib/kube (err.h). */
	int (*create)(void *user, gk_mm_run *r, const cJSON *obj, void **call, gk_err *err);
	int (*patch)(void *user, gk_mm_run *r, const char *name, const char *patch, void **call,
		     gk_err *err);
	int (*del)(void *user, gk_mm_run *r, const char *name, const char *uid, void **call, gk_err *err);
	int (*get)(void *user, gk_mm_run *r, const char *name, void **call, gk_err *err);
	/* Replace the ClusterPolicy's finalizers, guarded by its resourceVersion
	 * (409 when it moved); completes with the updated policy. */
	int (*set_finalizers)(void *user, gk_mm_run *r, const char *policy, const char *resource_version,
			      char *const *finalizers, size_t n, void **call, gk_err *err);
	/* Re-read the ClusterPolicy (after a 409 on its finalizers); completes
	 * with the policy. */
	int (*get_policy)(void *user, gk_mm_run *r, const char *policy, void **call, gk_err *err);
	/* Abandon a started call: gk_mm_run_done is never called for it. */
	void (*cancel)(void *user, void *call);
} gk_mm_ops;

/* The result of a started verb: rc GK_OK or the error; out (may be NULL) the
 * object as returned — a Gpukmm__Module for the Module verbs (NULL when a
 * DELETE answered with a Status), a Gpukmm__ClusterPolicy for set_finalizers —
 * owned by the pass from now on; msg the API's message on errors (surfaced
 * verbatim). Runs the pass's next step, and may end it (its callback runs,
 * then the run is freed). */
void gk_mm_run_done(gk_mm_run *r, int rc, ProtobufCMessage *out, const char *msg);

typedef struct gk_mm_pass_stats {
	uint64_t passes, creates, patches, deletes, finalizer_writes, conflicts, failures;
} gk_mm_pass_stats;

/* The pass ended (the plan passed to gk_mm_pass_start, complete). */
typedef void (*gk_mm_pass_fn)(void *user, gk_mm_plan *plan);

/* Start a pass for `policy`: builds the view (with the diff), decides, starts
 * the first write. When nothing has to be written (or the first write cannot
 * start) the pass is over on return: *run is NULL and *plan is complete (fn is
 * not called). Otherwise *run is the pass in flight: fn(user, plan) is called
 * from a later gk_mm_run_done, after which the run is gone. The plan (with the
 * report, events, requeue and failure) must stay valid until then. Writes
 * that succeeded are folded back into the view (the watch confirms them
 * later), so back-to-back passes do not repeat a write. The view is read
 * again, by name, at every step (it may change while a call is in flight).
 * `st` must outlive the run. Returns GK_OK (errors end up in the plan). */
int gk_mm_pass_start(gk_mmv *v, const char *policy, const gk_mm_ops *ops, gk_mm_plan *plan,
		     gk_mm_pass_stats *st, gk_mm_pass_fn fn, void *user, gk_mm_run **run);

/* Abandon a pass in flight (shutdown): its call is cancelled, fn is never
 * called, the run is freed; the plan is left as it is. */
void gk_mm_run_cancel(gk_mm_run *r);

#endif
