/* gpukmm-modmgr — the pass's ops table over lib/kube (API verbs) and
 * lib/policy (rendering and the existing-vs-desired comparison), plus the
 * Event writes. API errors are surfaced as the API's Status message, verbatim
 * (e.g. a KMM admission denial), so the §5.2 wrappers read like upstream's. */
#ifndef GPUKMM_MODMGR_KOPS_H
#define GPUKMM_MODMGR_KOPS_H

#include <stdint.h>

#include "evrec.h"
#include "gpukmm/err.h"
#include "pass.h"

typedef struct gk_mm_kops gk_mm_kops;

/* Every API call runs asynchronously on the service loop (a lib/kube mux on
 * the client, attached to `loop`): a slow API server never holds the loop up.
 * kubeconfig NULL = the usual chain (lib/kube). ns: operator namespace; sa:
 * module-loader ServiceAccount; qps: client-side limit (0 = 50 with burst 100,
 * < 0 = unlimited). *ev_written / *ev_failed (may be NULL) count finished
 * Event writes. */
struct gk_loop;
int gk_mm_kops_new(gk_mm_kops **out, const char *kubeconfig, const char *ns, const char *sa,
		   double qps, struct gk_loop *loop, uint64_t *ev_written, uint64_t *ev_failed,
		   gk_err *err);
/* Calls still in flight are dropped (their callbacks never run). */
void gk_mm_kops_free(gk_mm_kops *k);
/* The pass's ops (pass.h): Module and finalizer writes as async calls. */
void gk_mm_kops_ops(gk_mm_kops *k, gk_mm_ops *ops);

/* Create or bump an Event on ClusterPolicy `policy` (namespace "default", as
 * client-go does for cluster-scoped objects). A create that finds the Event
 * (restart) reads its count and bumps it. Returns once the write is started
 * (GK_OK) and finishes in the background; the result is counted and a
 * failure logged. */
int gk_mm_kops_event(gk_mm_kops *k, const char *policy, const char *uid, const gk_mm_event *ev,
		     const gk_mm_evwrite *w, const char *ts, const char *instance, gk_err *err);

#endif
