/* gpukmm-statusd: NodeReportRequests, the pure part — how a node hands its
 * report to the controller without any right on Nodes (ARCHITECTURE.md §5).
 * A request (gpukmm.io/v1alpha1, in the operator namespace) is named after the
 * node it reports on and carries spec.report (the report JSON) and spec.token
 * (a token of the node pod for the audience gpukmm.io/node-report). RBAC lets
 * any node's ServiceAccount create a request under any name, so the name proves
 * nothing: the TokenReview of the token does. A request is applied only when
 * the review says the token is the node ServiceAccount's, for our audience, and
 * names (extra authentication.kubernetes.io/node-name, pod-bound tokens on
 * Kubernetes >= 1.30) the node of the request's name, and the report names the
 * same node and fits the annotation's budget. Anything else is refused. No I/O. */
#ifndef GPUKMM_STATUSD_NRR_H
#define GPUKMM_STATUSD_NRR_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpukmm/err.h"
#include "gpukmm/probe.h"

#define GK_SD_NRR_GROUP "gpukmm.io"
#define GK_SD_NRR_VERSION "v1alpha1"
#define GK_SD_NRR_AUDIENCE "gpukmm.io/node-report"
#define GK_SD_NRR_NODE_EXTRA "authentication.kubernetes.io/node-name"
#define GK_SD_NRR_TOKEN_MAX 8192

/* One request as read (strings copied). */
typedef struct gk_sd_nrr {
	char *name, *uid, *rv;
	char *token, *report; /* NULL when missing */
	char bad[192];        /* why it cannot be applied ("" = well-formed) */
} gk_sd_nrr;

/* From a watched object. Returns 0 (a malformed request gets out->bad set: it
 * is refused, not retried) or GK_INVALID_ARGUMENT without a name/uid (nothing
 * to act on), GK_RESOURCE_EXHAUSTED. */
int gk_sd_nrr_from_json(const cJSON *obj, gk_sd_nrr *out, gk_err *err);
void gk_sd_nrr_clear(gk_sd_nrr *r);

/* The TokenReview to create for a token (audience gpukmm.io/node-report). */
cJSON *gk_sd_nrr_review(const char *token);

/* The TokenReview's answer (the object the API returned) for a request named
 * `node`, from ServiceAccount `want_user` ("system:serviceaccount:NS:NAME"):
 * true to apply; false with why (a sentence naming who wrote it, when known). */
bool gk_sd_nrr_verdict(const cJSON *review, const char *node, const char *want_user, char *why, size_t cap);

/* The report of an accepted request: parsed (lib/probe rjson), naming `node`,
 * within GK_PROBE_JSON_BUDGET. true with *r (free with gk_probe_report_free)
 * and *info; false with why. */
bool gk_sd_nrr_report(const char *node, const char *json, Gpukmm__NodeReport **r, gk_probe_json_info *info,
		      char *why, size_t cap);

#endif
