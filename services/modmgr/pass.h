/* gpukmm-modmgr — one reconcile pass of one ClusterPolicy: view → decision →
 * API writes, with the failure handling of §5.2 and DESIGN §2 (409 → re-read
 * and retry through the queue's backoff; 404 on delete ignored; preconditions
 * on delete; resourceVersion on finalizer updates).
 *
 * The API and the rendering are reached through an ops table so the ordering
 * and every error path are unit-tested with a fake; main.c plugs lib/kube and
 * lib/policy in. */
#ifndef GPUKMM_MODMGR_PASS_H
#define GPUKMM_MODMGR_PASS_H

#include <cJSON.h>

#include "decide.h"
#include "gpukmm/err.h"
#include "view.h"

typedef struct gk_mm_ops {
	void *user;
	/* Merge patch that turns `have` into the desired Module of `cp` (managed
	 * fields only, removed keys as null); *patch NULL = already up to date. */
	int (*diff)(void *user, const Gpukmm__ClusterPolicy *cp, const Gpukmm__Module *have,
		    char **patch, gk_err *err);
	/* The whole desired Module object (metadata with ownerRef + spec). */
	int (*render)(void *user, const Gpukmm__ClusterPolicy *cp, cJSON **obj, gk_err *err);
	/* API verbs on Modules of the operator namespace; *out (if non-NULL) gets
	 * the object as returned. Error codes follow lib/kube (err.h). */
	int (*create)(void *user, const cJSON *obj, Gpukmm__Module **out, gk_err *err);
	int (*patch)(void *user, const char *name, const char *patch, Gpukmm__Module **out, gk_err *err);
	int (*del)(void *user, const char *name, const char *uid, Gpukmm__Module **out, gk_err *err);
	int (*get)(void *user, const char *name, Gpukmm__Module **out, gk_err *err);
	/* Replace the ClusterPolicy's finalizers, guarded by its resourceVersion
	 * (409 when it moved). *out gets the updated policy. */
	int (*set_finalizers)(void *user, const char *policy, const char *resource_version,
			      char *const *finalizers, size_t n, Gpukmm__ClusterPolicy **out, gk_err *err);
} gk_mm_ops;

typedef struct gk_mm_pass_stats {
	uint64_t passes, creates, patches, deletes, finalizer_writes, conflicts, failures;
} gk_mm_pass_stats;

/* Run one pass for `policy`: builds the view (with the diff), decides, writes.
 * The plan (with the report, events, requeue and failure) is left in *plan.
 * Writes that succeeded are folded back into the view (the watch confirms them
 * later), so back-to-back passes do not repeat a write. Returns GK_OK, or an
 * error only for local failures (out of memory). */
int gk_mm_pass(gk_mmv *v, const char *policy, const gk_mm_ops *ops, gk_mm_plan *plan,
	       gk_mm_pass_stats *st, gk_err *err);

#endif
