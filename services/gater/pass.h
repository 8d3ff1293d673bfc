/* gpukmm-gater — one pass for one ClusterPolicy: every DaemonSet it gates
 * gets the ready-label key added or removed (decide.c), then the report
 * values (device plugin / DRA / XPU manager counts, which DaemonSets are
 * gated, errors) are computed from the view.
 *
 * Failure handling (DESIGN §2): a 409 (our resourceVersion precondition
 * failed: someone else changed the DaemonSet since we saw it) re-reads that
 * DaemonSet into the view and fails the pass, so the queue's backoff runs it
 * again on the fresh object — never a blind retry of the same patch; a 404
 * drops it from the view (it is gone, nothing to gate); any other API error
 * becomes a status error and a retry with backoff. The API is reached through
 * an ops table so every path is unit-tested with a fake. */
#ifndef GPUKMM_GATER_PASS_H
#define GPUKMM_GATER_PASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "view.h"

#define GK_GATER_MAX_ERRORS 10
#define GK_GATER_STATUS_MAX 32

typedef struct gk_gater_ops {
	void *user;
	/* JSON merge patch of DaemonSet ns/name; *out (may stay NULL) gets the
	 * object as returned. Codes follow lib/kube (409 → GK_ABORTED). */
	int (*patch)(void *user, const char *ns, const char *name, const char *body, Gpukmm__DaemonSet **out,
		     gk_err *err);
	int (*get)(void *user, const char *ns, const char *name, Gpukmm__DaemonSet **out, gk_err *err);
} gk_gater_ops;

typedef struct gk_gater_stats {
	uint64_t passes, writes, conflicts, failures;
} gk_gater_stats;

typedef struct gk_gater_result {
	bool idle;               /* not the leader: nothing written, no report */
	bool deleted;            /* the policy is gone: report {deleted: true} */
	bool failed;             /* retry with backoff */
	bool gating;             /* the policy wants its DaemonSets gated */
	int64_t generation;
	char dp[GK_GATER_STATUS_MAX], dra[GK_GATER_STATUS_MAX], xpu[GK_GATER_STATUS_MAX];
	char **gated;            /* "<ns>/<name>" carrying the key after the pass (malloc'd) */
	size_t n_gated;
	char *errors[GK_GATER_MAX_ERRORS]; /* malloc'd */
	size_t n_errors;
	size_t writes;           /* patches sent in this pass */
} gk_gater_result;

/* Run one pass for `policy`. Writes that succeeded are folded back into the
 * view. Returns GK_OK, or GK_RESOURCE_EXHAUSTED when out of memory (the
 * result is then marked failed). Free the result with gk_gater_result_free. */
int gk_gater_pass(gk_gtv *v, const char *policy, const gk_gater_ops *ops, gk_gater_result *res,
		  gk_gater_stats *st, gk_err *err);
void gk_gater_result_free(gk_gater_result *res);

#endif
