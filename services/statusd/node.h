/* gpukmm-statusd node mode: the pure mapping of a NodeReport onto the own
 * Node's gpukmm.io labels and the gpukmm.io/node-report annotation, and the
 * merge patch that touches only those keys (removed ones null). */
#ifndef GPUKMM_STATUSD_NODE_H
#define GPUKMM_STATUSD_NODE_H

#include <cJSON.h>
#include <stdbool.h>

#include "status.pb-c.h"

#define GK_SD_NODE_PREFIX "gpukmm.io/"
#define GK_SD_NODE_ANNOTATION "gpukmm.io/node-report"
#define GK_SD_NODE_ANNOTATION_MAX 65536

/* Wanted labels {key: value} of a report (a new object), NULL on OOM. */
cJSON *gk_sd_node_labels(const Gpukmm__NodeReport *r);
/* The merge patch {"metadata":{"resourceVersion":..,"labels":{..},
 * "annotations":{..}}} that brings `node` to the report, or NULL when nothing
 * changes (or OOM: *oom set). `report_json` is the compact report JSON (at most
 * GK_SD_NODE_ANNOTATION_MAX bytes; the caller shortens it). Only our keys:
 * the labels above, any other "gpukmm.io/<x>.source" label (a module we no
 * longer report: null), and the annotation. */
cJSON *gk_sd_node_patch(const cJSON *node, const Gpukmm__NodeReport *r, const char *report_json, bool *oom);

#endif
