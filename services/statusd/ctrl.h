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

#define GK_SD_MAX_POLICIES 1024
#define GK_SD_NAME_MAX 254

typedef struct gk_sd_stats {
	uint64_t reports, rejected, writes, write_conflicts, write_errors, unchanged;
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

#endif
