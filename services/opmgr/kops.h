/* gpukmm-opmgr — the asynchronous writer of operand objects and of the
 * policy's finalizers, on a lib/kube mux attached to the service loop (the
 * loop never waits for the API). One call in flight per object; when a call
 * ends the view gets what the API answered and the object's policy is marked
 * dirty:
 *   create 2xx        → the object into the view
 *   create 409        → AlreadyExists: an object of that name we do not see
 *                       (no label yet: upstream's) is read into the view, and
 *                       the next pass adopts it with a patch
 *   patch 2xx / 404   → the object / gone from the view
 *   patch or delete 409 → re-read into the view after a short backoff
 *   delete 2xx / 404  → gone from the view
 *   finalizers 2xx    → the policy into the view; 409 → decided again
 *   probe 2xx / 404   → an object the watcher does not show us (no label: what
 *                       upstream left) into the view / remembered as absent
 *   other errors      → the API's message kept for the object (the pass
 *                       reports it) and the pass asked again with backoff
 * Freeing cancels the calls in flight. */
#ifndef GPUKMM_OPMGR_KOPS_H
#define GPUKMM_OPMGR_KOPS_H

#include "gpukmm/loop.h"
#include "pass.h"
#include "view.h"

typedef struct gk_opk gk_opk;

typedef struct gk_opk_stats {
	uint64_t creates, patches, deletes, finalizer_writes, conflicts, errors, inflight, reads;
} gk_opk_stats;

int gk_opk_new(gk_opk **out, const char *kubeconfig, double qps, gk_loop *loop, gk_opv *view, gk_err *err);
void gk_opk_free(gk_opk *k);
void gk_opk_ops(gk_opk *k, gk_opp_ops *ops);
const gk_opk_stats *gk_opk_stats_get(const gk_opk *k);

#endif
