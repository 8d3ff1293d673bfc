/* gpukmm-statusd controller mode: the per-policy domain metrics (gpukmm/metrics.h),
 * set from the status the leader computes — so they say what status.* says, and
 * only the leading statusd exports them (a follower's series are removed). */
#ifndef GPUKMM_STATUSD_METRICS_H
#define GPUKMM_STATUSD_METRICS_H

#include <cJSON.h>

#include "nodes.h"

/* From the wanted (or current) status of `policy` and its node summary
 * (NULL = not known: the node families are left as they are). */
void gk_sd_metrics_policy(const char *policy, const cJSON *status, const gk_sd_nodes *nodes);
/* Every series of the policy removed (the policy is gone, or another
 * instance leads now). */
void gk_sd_metrics_forget(const char *policy);
/* One operand's pods of a policy: desired (scheduled) and ready. The operand
 * service's reports feed this (device-plugin, dra, xpu-manager come from the
 * gater's "ready/desired" strings until then). */
void gk_sd_metrics_operand(const char *policy, const char *operand, double desired, double ready);
/* "ready/desired" as the status fields carry them ("2/3"); false for "N/A". */
bool gk_sd_metrics_ratio(const char *s, double *ready, double *desired);

#endif
