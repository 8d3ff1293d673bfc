/* gpukmm-statusd node mode: hands the node report to the controller. The node
 * has no right on Nodes: it creates a NodeReportRequest named after its node in
 * the operator namespace, carrying the report JSON (summarized to the Node
 * annotation's budget, lib/probe rjson) and the node pod's token for the
 * audience gpukmm.io/node-report (--report-token-file, read anew each time: the
 * kubelet rotates it); the controller checks and applies it, then deletes it
 * (nrrw.c). One create at a time on a lib/kube mux on the service loop. A 409
 * AlreadyExists means the previous request is not applied yet: it cannot be
 * replaced, so the newest report waits (backoff 1 s .. 60 s). An unchanged
 * report (same fingerprint) is handed in again only after resend_ms, in case
 * a request was refused unread (its token expired while no controller ran).
 * The prober restates its report every interval (a restarted statusd holds
 * none): a report equal to the one held changes nothing here. */
#ifndef GPUKMM_STATUSD_NODEW_H
#define GPUKMM_STATUSD_NODEW_H

#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/kube.h"
#include "gpukmm/loop.h"
#include "status.pb-c.h"

#define GK_SD_NODEW_RESEND_MS (30 * 60 * 1000)

typedef struct gk_sd_nodew_opts {
	const char *node_name;  /* the request's name (copied) */
	const char *ns;         /* the operator namespace (copied) */
	const char *token_file; /* the pod's token for audience gpukmm.io/node-report (copied) */
	int debounce_ms;        /* default 100 */
	int64_t resend_ms;      /* default GK_SD_NODEW_RESEND_MS */
} gk_sd_nodew_opts;

typedef struct gk_sd_nodew_stats {
	uint64_t reports;    /* ReportNode calls accepted */
	uint64_t writes;     /* requests created */
	uint64_t conflicts;  /* 409: the previous request still pending */
	uint64_t errors;     /* failed creates, unreadable token (retried) */
	uint64_t passes;     /* reports handed in or found handed in already */
	uint64_t pending;    /* a report waiting or being handed in (0: idle) */
	uint64_t summarized; /* 1 while the report is over the annotation budget */
} gk_sd_nodew_stats;

typedef struct gk_sd_nodew gk_sd_nodew;

int gk_sd_nodew_new(gk_sd_nodew **out, gk_loop *loop, gk_kube_client *kc, const gk_sd_nodew_opts *o, gk_err *err);
/* Cancels a call in flight. */
void gk_sd_nodew_free(gk_sd_nodew *w);
/* Keep the report (copied; its node name set to ours) and schedule a hand-in. */
int gk_sd_nodew_report(gk_sd_nodew *w, const Gpukmm__NodeReport *r, gk_err *err);
const gk_sd_nodew_stats *gk_sd_nodew_stats_get(const gk_sd_nodew *w);

#endif
