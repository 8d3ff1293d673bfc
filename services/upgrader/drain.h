/* gpukmm-upgrader — the drainer: evicts a node's pods through the Eviction
 * API (policy/v1, so PodDisruptionBudgets decide), on the service's lib/kube
 * mux. Per node, in rounds: list the node's pods (fieldSelector
 * spec.nodeName, drain.podSelector as the label selector) → which to evict
 * (pods.c) → one eviction per pod (201: on its way; 429: a budget says not
 * now — tried again next round; 404: gone) → the next round a second later.
 * Done when a successful list shows none left to evict and none terminating;
 * failed at once on a pod that may not be evicted (pods.c), or when the API
 * refuses the list as bad (a podSelector the server rejects). The drain's
 * timeout is the rollout's (decide.c), counted from the node's
 * gpukmm.io/upgrade-started, so a restart does not reset it.
 *
 * It only ever works on nodes the pass asks for, evicts only what a
 * successful, well-formed list showed (never on a failed or partial read),
 * and never evicts a pod twice while it terminates. Status changes call
 * `changed` (the pass runs again). Bounded: at most MAX nodes, at most
 * GK_UPD_EVICT_INFLIGHT evictions in flight per node. */
#ifndef GPUKMM_UPGRADER_DRAIN_H
#define GPUKMM_UPGRADER_DRAIN_H

#include <stdint.h>

#include "decide.h"
#include "gpukmm/kube.h"
#include "gpukmm/loop.h"
#include "pods.h"

#define GK_UPD_EVICT_INFLIGHT 16
#define GK_UPD_ROUND_MS 1000

typedef struct gk_upd gk_upd;

typedef struct gk_upd_stats {
	uint64_t lists, list_errors;
	uint64_t evictions;       /* eviction calls sent */
	uint64_t evicted;         /* 201 */
	uint64_t budget_refusals; /* 429: a PodDisruptionBudget said not now */
	uint64_t eviction_errors; /* other failures */
	uint64_t draining;        /* nodes being drained (a gauge) */
} gk_upd_stats;

/* changed(user): a node's drain status or message changed. gpu_claim: the
 * default podSelector's ResourceClaim test (pods.h). */
int gk_upd_new(gk_upd **out, gk_kube_mux *mux, gk_loop *loop, gk_upg_claim_fn gpu_claim, void *claim_user,
	       void (*changed)(void *user), void *user, gk_err *err);
/* Stops everything (calls cancelled). */
void gk_upd_free(gk_upd *d);
/* Drain `node` under pol (copied): started, or kept going (idempotent). */
void gk_upd_drain(gk_upd *d, const char *node, const gk_policy_upgrade *pol);
/* Its status (enum gk_upg_drain_status; NONE when not draining here) and a
 * message (pods left, the last refusal, why it failed; NULL = none, valid
 * until the drainer next runs). */
int gk_upd_status(gk_upd *d, const char *node, const char **msg);
void gk_upd_stop(gk_upd *d, const char *node);
void gk_upd_stop_all(gk_upd *d);
const gk_upd_stats *gk_upd_stats_get(const gk_upd *d);

#endif
