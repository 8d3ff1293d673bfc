/* gpukmm-gater — the DaemonSet writer: JSON merge patches of apps/v1
 * DaemonSets run asynchronously on a lib/kube mux attached to the service
 * loop, so the loop keeps serving (bus, heartbeats, other DaemonSets) however
 * slow the API server is.
 *
 * One call in flight per DaemonSet; gk_gater_kops_ops() gives the pass's
 * write op (pass.h). When a call ends the view is updated and the
 * DaemonSet's policies become dirty:
 *   patch 2xx  → the object as returned goes into the view
 *   patch 404  → the DaemonSet is dropped from the view
 *   patch 409  → after a backoff (20 ms doubled per 409 in a row, 1 s after 5)
 *                the DaemonSet is re-read into the view — if we still lead
 *                when the 409 comes back — and the pass decides again on it
 *   other      → the API's message is kept as the DaemonSet's error until a
 *                write succeeds; the write is asked again after a backoff
 *                (0.5 s doubled per failure, at most 30 s)
 * API errors are surfaced as the API's Status message. Freeing cancels the
 * calls in flight (SIGTERM does not wait for a slow API). */
#ifndef GPUKMM_GATER_KOPS_H
#define GPUKMM_GATER_KOPS_H

#include "gpukmm/err.h"
#include "gpukmm/loop.h"
#include "pass.h"
#include "view.h"

typedef struct gk_gater_kops gk_gater_kops;

typedef struct gk_gater_kops_stats {
	uint64_t writes;      /* patches started */
	uint64_t conflicts;   /* 409s (re-read, decided again) */
	uint64_t errors;      /* failed patches / re-reads (retried with backoff) */
	uint64_t inflight;    /* DaemonSets with a call in flight or a re-read due (a gauge) */
} gk_gater_kops_stats;

/* kubeconfig NULL = the usual chain (lib/kube); qps 0 = 50 (burst 100), < 0 =
 * none. The view gets the results; free the writer before the view. */
int gk_gater_kops_new(gk_gater_kops **out, const char *kubeconfig, double qps, gk_loop *loop, gk_gtv *view,
		      gk_err *err);
void gk_gater_kops_free(gk_gater_kops *k);
void gk_gater_kops_ops(gk_gater_kops *k, gk_gater_ops *ops);
const gk_gater_kops_stats *gk_gater_kops_stats_get(const gk_gater_kops *k);

#endif
