/* gpukmm-gater — one pass for one ClusterPolicy: every DaemonSet it gates
 * that is not right gets a write asked for (the ready-label key added or
 * removed, decide.c), then the report values (device plugin / DRA / XPU
 * manager counts, which DaemonSets are gated, errors) are computed from the
 * view.
 *
 * The pass never waits for the API: writes are asked of a writer (kops.h,
 * through an ops table so every path is unit-tested with a fake) that runs
 * them asynchronously, one call in flight per DaemonSet, and marks the
 * DaemonSet's policies dirty when a call ends (the pass then runs again on
 * the object as written or re-read). Failure handling (DESIGN §2) lives in
 * the writer: a 409 (our resourceVersion precondition failed: someone else
 * changed the DaemonSet since we saw it) re-reads that DaemonSet into the view
 * after a short backoff — never a blind retry of the same patch; a 404 drops
 * it from the view (it is gone, nothing to gate); any other API error is kept
 * as the DaemonSet's error (reported by every pass until a write succeeds)
 * and retried with backoff.
 *
 * The safety rule (ARCHITECTURE.md §4): the key is only removed on a state
 * the watcher vouches for (the policy confirmed gone, or read without
 * kernelModule or with a deletionTimestamp, KMM confirmed not served); else
 * the pass writes nothing and says why (res->held). */
#ifndef GPUKMM_GATER_PASS_H
#define GPUKMM_GATER_PASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "view.h"

#define GK_GATER_MAX_ERRORS 10
#define GK_GATER_STATUS_MAX 32

/* What became of a write asked for one DaemonSet. */
enum gk_gater_wr {
	GK_GATER_WR_STARTED, /* a merge patch is in flight now */
	GK_GATER_WR_BUSY,    /* a call for it is already in flight (a patch, or the re-read after a 409) */
	GK_GATER_WR_WAIT,    /* backing off after a failed write; the writer wakes its policies when due */
	GK_GATER_WR_FAILED,  /* not started, nothing scheduled (out of memory, too many calls): retry the pass */
};

typedef struct gk_gater_ops {
	void *user;
	/* Ask for the JSON merge patch `body` (copied) of DaemonSet ns/name.
	 * *last_err: the API's message of the last failed write of that
	 * DaemonSet until one succeeds, else NULL (valid until the writer next
	 * runs). When a call ends, the DaemonSet's policies become dirty. */
	enum gk_gater_wr (*write)(void *user, const char *ns, const char *name, const char *body,
				  const char **last_err);
} gk_gater_ops;

typedef struct gk_gater_stats {
	uint64_t passes, failures;
} gk_gater_stats;

typedef struct gk_gater_result {
	bool idle;               /* not the leader: nothing written, no report */
	bool deleted;            /* the policy is gone: report {deleted: true} */
	bool failed;             /* retry with backoff */
	bool held;               /* fail closed: nothing written, the state could not be confirmed */
	char hold[GK_ERR_MSG_MAX + 256]; /* why (an error of the report too when the policy is there) */
	bool gating;             /* the policy wants its DaemonSets gated */
	int64_t generation;
	char dp[GK_GATER_STATUS_MAX], dra[GK_GATER_STATUS_MAX], xpu[GK_GATER_STATUS_MAX];
	char **gated;            /* "<ns>/<name>" carrying the key after the pass (malloc'd) */
	size_t n_gated;
	char *errors[GK_GATER_MAX_ERRORS]; /* malloc'd */
	size_t n_errors;
	size_t writes;           /* patches started by this pass */
	size_t pending;          /* DaemonSets of the policy with a call in flight: a pass runs again when
				    each ends, so a report may wait for it */
} gk_gater_result;

/* Run one pass for `policy`. Returns GK_OK, or GK_RESOURCE_EXHAUSTED when out of memory (the
 * result is then marked failed). Free the result with gk_gater_result_free. */
int gk_gater_pass(gk_gtv *v, const char *policy, const gk_gater_ops *ops, gk_gater_result *res,
		  gk_gater_stats *st, gk_err *err);
void gk_gater_result_free(gk_gater_result *res);

#endif
