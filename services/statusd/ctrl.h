/* gpukmm-statusd controller mode: latest report per (component, policy),
 * debounced merge-and-write of ClusterPolicy status (merge.c decides). */
#ifndef GPUKMM_STATUSD_CTRL_H
#define GPUKMM_STATUSD_CTRL_H

#include <stdbool.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/kube.h"
#include "gpukmm/loop.h"
#include "status.pb-c.h"
#include "view.h"

#define GK_SD_MAX_POLICIES 1024
#define GK_SD_NAME_MAX 254

typedef struct gk_sd_stats {
	uint64_t reports, rejected, writes, write_conflicts, write_errors, unchanged;
	uint64_t passes;      /* policy evaluations finished (written, unchanged or skipped) */
	uint64_t not_leader;  /* evaluations skipped: another instance leads */
	uint64_t pending;     /* policies waiting for an evaluation (a gauge: 0 = idle) */
	uint64_t other_term;  /* reports made under another leadership term than the view's (not used) */
	uint64_t summaries;   /* node summaries computed (all the view's nodes against a policy) */
	uint64_t summaries_reused; /* evaluations that reused the policy's summary: the view had not changed */
} gk_sd_stats;

typedef struct gk_sd_ctrl gk_sd_ctrl;

typedef struct gk_sd_ctrl_opts {
	int debounce_ms;     /* coalescing delay after a report, default 100 */
	int grace_ms;        /* a silent component counts as "no errors" after this, default 15000 */
} gk_sd_ctrl_opts;

int gk_sd_ctrl_new(gk_sd_ctrl **out, gk_loop *loop, gk_kube_client *kc, const gk_sd_ctrl_opts *o, gk_err *err);
void gk_sd_ctrl_free(gk_sd_ctrl *c);
/* Keep a report (copied) and schedule a write. GK_INVALID_ARGUMENT for a bad
 * report, GK_RESOURCE_EXHAUSTED when the table is full. */
int gk_sd_ctrl_report(gk_sd_ctrl *c, const Gpukmm__StatusReport *r, gk_err *err);
const gk_sd_stats *gk_sd_ctrl_stats(const gk_sd_ctrl *c);
/* Use a watcher view (view.h): status.nodes from its nodes, writes only while
 * it says we lead and after its first snapshot. Without one, statusd writes
 * every change and keeps status.nodes as it is. */
void gk_sd_ctrl_set_view(gk_sd_ctrl *c, const gk_sd_view *v);
/* The view's dirty callback (user = the gk_sd_ctrl): policy NULL = all. */
void gk_sd_ctrl_dirty(void *user, const char *policy);

#endif
