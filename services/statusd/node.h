/* gpukmm-statusd: the pure mapping of a node report onto its Node's
 * gpukmm.io labels and the gpukmm.io/node-report annotation, and the merge
 * patch that touches only those keys (removed ones null). The controller
 * applies it for a checked NodeReportRequest (nrrw.c). */
#ifndef GPUKMM_STATUSD_NODE_H
#define GPUKMM_STATUSD_NODE_H

#include <cJSON.h>
#include <stdbool.h>

#include "gpukmm/probe.h"
#include "status.pb-c.h"

#define GK_SD_NODE_PREFIX "gpukmm.io/"
#define GK_SD_NODE_ANNOTATION "gpukmm.io/node-report"
#define GK_SD_NODE_ANNOTATION_MAX GK_PROBE_JSON_BUDGET

/* Wanted labels {key: value} of a report (a new object), NULL on OOM: gpu.present,
 * gpu.count, sriov.vfs-active from the counts of `info` (a parsed report may be
 * summarized; NULL: counted from r->gpus), <module>.source. */
cJSON *gk_sd_node_labels(const Gpukmm__NodeReport *r, const gk_probe_json_info *info);
/* The merge patch {"metadata":{"resourceVersion":..,"labels":{..},
 * "annotations":{..}}} that brings `node` to the report, or NULL when nothing
 * changes (or OOM: *oom set). `report_json` is the report JSON (at most
 * GK_SD_NODE_ANNOTATION_MAX bytes; the caller checks); an annotation that
 * differs only in probedAt and generation is left as it is. Only our keys:
 * the labels above, any other "gpukmm.io/<x>.source" label (a module we no
 * longer report: null), and the annotation. */
cJSON *gk_sd_node_patch(const cJSON *node, const Gpukmm__NodeReport *r, const gk_probe_json_info *info,
			const char *report_json, bool *oom);

#endif
