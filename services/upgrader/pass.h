/* gpukmm-upgrader — one pass for one ClusterPolicy: the rollout view from the
 * watcher's (the policy, its Module, the nodes its Module selects — or, for a
 * policy gone or no longer versioned, the nodes left in an upgrade step that
 * no other policy rolls), the decision (decide.c), then its steps carried out
 * through an ops table (so every path is unit-tested with a fake): Node
 * patches with their Events, the drainer kept on the draining nodes and
 * stopped on the others, the fresh read the picks wait for. The result says
 * what to report (status.upgrade and the Upgraded condition).
 *
 * While a write of one of the policy's nodes is in flight nothing is picked
 * (a pick decided on the view before the write lands could pass maxParallel);
 * each write's end runs the pass again. */
#ifndef GPUKMM_UPGRADER_PASS_H
#define GPUKMM_UPGRADER_PASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decide.h"
#include "gpukmm/err.h"
#include "view.h"

typedef struct gk_upp_ops {
	void *user;
	/* enum gk_upk_wr of kops.h */
	int (*patch)(void *user, const char *node, const char *body, bool warning, const char *reason,
		     const char *message, const char **last_err);
	bool (*busy)(void *user, const char *node);
	/* the drainer: keep draining / its status / stop */
	void (*drain)(void *user, const char *node, const gk_policy_upgrade *pol);
	int (*drain_status)(void *user, const char *node, const char **msg);
	void (*drain_stop)(void *user, const char *node);
	/* the fresh read of the in-progress states: true once done (the first call starts it) */
	bool (*confirmed)(void *user);
} gk_upp_ops;

typedef struct gk_upp_stats {
	uint64_t passes, failures;
	uint64_t steps[GK_UPG_A_RELEASE + 1]; /* writes started, by action */
	int64_t finished_seconds[64];         /* drain start → done of nodes finished in this pass (a histogram's input) */
	size_t n_finished;
} gk_upp_stats;

typedef struct gk_upp_result {
	bool idle;               /* not the leader: nothing written, no report */
	bool deleted;            /* the policy is gone: report {deleted: true} */
	bool failed;             /* retry with backoff */
	bool pending;            /* a write in flight: its end runs the pass again */
	int64_t generation;
	Gpukmm__UpgradeStatus *upgrade; /* status.upgrade, NULL = none (no versioned Module) */
	Gpukmm__Condition *upgraded;    /* the Upgraded condition, NULL = none */
	size_t writes;
	int64_t requeue_ms;      /* run again after this (a drain timeout to notice), 0 = none */
} gk_upp_result;

/* now_s: unix seconds (the drain timeouts). */
int gk_upp_pass(const gk_upv *v, const char *policy, const gk_upp_ops *ops, int64_t now_s, gk_upp_result *res,
		gk_upp_stats *st, gk_err *err);
void gk_upp_result_free(gk_upp_result *res);

#endif
