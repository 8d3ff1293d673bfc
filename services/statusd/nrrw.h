/* gpukmm-statusd controller mode: the NodeReportRequest inbox. The nodes hold
 * no right on Nodes; they create NodeReportRequests (nodew.c) and the leader
 * applies them here, one at a time, on a lib/kube mux on the service loop:
 *
 *   list+watch the requests in the operator namespace (the inbox: one consumer,
 *   tokens inside, so read here rather than published on the watcher's bus)
 *   → TokenReview of spec.token (audience gpukmm.io/node-report)
 *   → refused (nrr.c: not the node ServiceAccount, no node or another node named,
 *     a report that does not parse, names another node or is over budget):
 *     logged, counted, the request deleted (precondition uid)
 *   → GET the Node; none: the request deleted
 *   → merge patch of our keys only (node.c: gpukmm.io/ labels of a closed set,
 *     the gpukmm.io/node-report annotation; resourceVersion precondition, 409 →
 *     re-read) when they differ, nothing written when equal
 *   → DELETE the request (preconditions uid + resourceVersion; a 409 is no
 *     deletion: retried with the version the watch holds by then).
 *
 * Only the leader applies (checked before the chain and again before the Node
 * patch); a failed call (transport, 5xx, 403) is no verdict: the request stays
 * and is retried (RETRY_MS), never deleted. */
#ifndef GPUKMM_STATUSD_NRRW_H
#define GPUKMM_STATUSD_NRRW_H

#include <stdbool.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/kube.h"
#include "gpukmm/loop.h"

#define GK_SD_NRRW_MAX_PENDING 10000 /* requests kept (one per node) */

typedef bool (*gk_sd_nrrw_leading_fn)(void *user);

typedef struct gk_sd_nrrw_opts {
	const char *ns;              /* the operator namespace */
	const char *node_sa;         /* the node profile's ServiceAccount (default gpukmm-node) */
	gk_sd_nrrw_leading_fn leading; /* NULL: always */
	void *user;
} gk_sd_nrrw_opts;

typedef struct gk_sd_nrrw_stats {
	uint64_t seen;        /* request events (added or changed) */
	uint64_t applied;     /* requests applied (Node written or already right) and deleted */
	uint64_t node_writes; /* Node patches */
	uint64_t refused;     /* requests refused and deleted */
	uint64_t errors;      /* failed calls (retried) */
	uint64_t pending;     /* requests waiting */
} gk_sd_nrrw_stats;

typedef struct gk_sd_nrrw gk_sd_nrrw;

int gk_sd_nrrw_new(gk_sd_nrrw **out, gk_loop *loop, gk_kube_client *kc, const gk_sd_nrrw_opts *o, gk_err *err);
void gk_sd_nrrw_free(gk_sd_nrrw *w);
/* Leadership may have been gained: go on with the requests waiting. */
void gk_sd_nrrw_kick(gk_sd_nrrw *w);
const gk_sd_nrrw_stats *gk_sd_nrrw_stats_get(const gk_sd_nrrw *w);

#endif
