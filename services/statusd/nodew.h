/* gpukmm-statusd node mode: the writer of the own Node (labels + the
 * node-report annotation, node.c decides). API calls run on a lib/kube mux on
 * the service loop: one read → patch chain at a time, a report arriving
 * meanwhile is written once the chain ends, 409 → re-read with backoff. */
#ifndef GPUKMM_STATUSD_NODEW_H
#define GPUKMM_STATUSD_NODEW_H

#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/kube.h"
#include "gpukmm/loop.h"
#include "status.pb-c.h"

typedef struct gk_sd_nodew_stats {
	uint64_t reports, writes, conflicts, errors, passes;
	uint64_t pending; /* a report waiting or being written (0: idle) */
} gk_sd_nodew_stats;

typedef struct gk_sd_nodew gk_sd_nodew;

/* node_name is copied. */
int gk_sd_nodew_new(gk_sd_nodew **out, gk_loop *loop, gk_kube_client *kc, const char *node_name,
		    int debounce_ms, gk_err *err);
/* Cancels a call in flight. */
void gk_sd_nodew_free(gk_sd_nodew *w);
/* Keep the report (copied) and schedule a write. */
int gk_sd_nodew_report(gk_sd_nodew *w, const Gpukmm__NodeReport *r, gk_err *err);
const gk_sd_nodew_stats *gk_sd_nodew_stats_get(const gk_sd_nodew *w);

#endif
