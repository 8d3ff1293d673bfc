/* gpukmm-upgrader — the Node writer, on a lib/kube mux attached to the
 * service loop (the loop never waits for the API). One call in flight per
 * node (lib/kube kwriter); every patch carries the node's resourceVersion, so
 * a node that changed since the pass saw it is never written blindly:
 *   patch 2xx   → the Node as answered into the view (it holds until the
 *                 watch catches up), and the step's Event on the Node
 *   patch 409   → the Node re-read into the view after a short backoff (if we
 *                 still lead), the pass decides again on it
 *   patch 404   → the node is gone: every policy decides again
 *   other       → the API's message kept for the node, asked again with backoff
 * And the read the picks wait for (decide.h "confirmed"): a consistent list
 * of the Nodes carrying gpukmm.io/upgrade-state, folded into the view, once
 * per leadership. Freeing cancels the calls in flight. */
#ifndef GPUKMM_UPGRADER_KOPS_H
#define GPUKMM_UPGRADER_KOPS_H

#include <stdbool.h>
#include <stdint.h>

#include "gpukmm/kube.h"
#include "gpukmm/loop.h"
#include "view.h"

typedef struct gk_upk gk_upk;

enum gk_upk_wr {
	GK_UPK_STARTED, /* the patch is in flight now */
	GK_UPK_BUSY,    /* a call for the node is in flight already (a patch, or the re-read after a 409) */
	GK_UPK_WAIT,    /* backing off after a failure; the pass is woken when due */
	GK_UPK_FAILED,  /* not started (out of memory, too many calls): the pass runs again with backoff */
};

/* The Event a successful patch records on the node. */
typedef struct gk_upk_event {
	bool warning;
	const char *reason, *message;
} gk_upk_event;

typedef struct gk_upk_stats {
	uint64_t patches, conflicts, errors, events, event_errors, confirm_lists, inflight;
} gk_upk_stats;

/* kubeconfig NULL = the usual chain; qps 0 = 50 (burst 100), < 0 = none.
 * instance: reportingInstance of the Events (host name). */
int gk_upk_new(gk_upk **out, const char *kubeconfig, double qps, gk_loop *loop, gk_upv *view, const char *instance,
	       gk_err *err);
void gk_upk_free(gk_upk *k);
gk_kube_mux *gk_upk_mux(gk_upk *k);

/* Merge patch `body` of Node `node`; ev (copied, may be NULL) is recorded
 * once it succeeds. *last_err: the API's message of the node's last failed
 * write until one succeeds, else NULL. */
int gk_upk_patch(gk_upk *k, const char *node, const char *body, const gk_upk_event *ev, const char **last_err);
/* A call for the node in flight, or a re-read due (a write backing off after
 * a failure is not: it did not land). */
bool gk_upk_busy(gk_upk *k, const char *node);

/* The fresh read of the in-progress states: true once done since the last
 * gk_upk_unconfirm (the first call starts it; its end marks every policy). */
bool gk_upk_confirmed(gk_upk *k);
/* Leadership lost (or regained): the next picks wait for a new read. */
void gk_upk_unconfirm(gk_upk *k);

const gk_upk_stats *gk_upk_stats_get(const gk_upk *k);

#endif
