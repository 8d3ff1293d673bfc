/* gpukmm-statusd, controller mode: the pure merge of component reports into
 * one ClusterPolicy status, and the merge patch that turns the current status
 * into the wanted one. No I/O, no clock (the caller passes "now"). */
#ifndef GPUKMM_STATUSD_MERGE_H
#define GPUKMM_STATUSD_MERGE_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "nodes.h"
#include "status.pb-c.h"

#define GK_SD_MAX_ERRORS 10
#define GK_SD_MAX_MESSAGE 1024

typedef struct gk_sd_inputs {
	const Gpukmm__StatusReport *modmgr;  /* latest report, NULL = none yet */
	const Gpukmm__StatusReport *gater;   /* latest report, NULL = none yet */
	/* gpukmm-opmgr: devicePluginStatus / draStatus / xpuManagerStatus (the
	 * gater's values are used only from a gater that still sends them) */
	const Gpukmm__StatusReport *opmgr;
	/* gpukmm-upgrader: status.upgrade and the Upgraded condition */
	const Gpukmm__StatusReport *upgrader;
	/* A component without a report is assumed to have nothing to say (its
	 * share of errors is dropped) only when this is set (after the startup
	 * grace period); before that its fields are kept from the current status,
	 * so a restart never clobbers a correct status with an empty one. */
	bool missing_is_empty;
	const char *now;                     /* RFC 3339, for lastTransitionTime */
	/* The node summary (status.nodes, and what the conditions say about
	 * nodes); NULL = not known (no watcher view yet): status.nodes is kept. */
	const gk_sd_nodes *nodes;
} gk_sd_inputs;

/* The wanted status (a new object) from the current one (`cur`, may be NULL),
 * the reports and the node summary. Fields gpukmm does not own are copied from
 * cur. Returns NULL when there is nothing to base a status on (no report and
 * no node summary) or on OOM (*oom set).
 *
 * Conditions (reason / message / lastTransitionTime, the last only changed on
 * a transition of status):
 *   ModuleLoaded  KMM's count (modmgr's condition), False as well when a GPU
 *                 node does not run the OoT module for a known cause (the
 *                 first such node and its reason in the message); kept as it
 *                 is while modmgr has not reported (restart).
 *   Degraded      True on errors (ReconcileErrors), else on problem nodes an
 *                 admin has to act on (NodeProblems).
 *   Upgraded      the upgrader's (a versioned Module's rollout), with
 *                 status.upgrade; absent when it reports none; kept as it is
 *                 while it has not reported (restart)
 *   Degraded      also True when the rollout is halted or nodes failed
 *                 (UpgradeHalted / UpgradeFailed: the Upgraded message)
 *   Ready         False on errors, on ModuleLoaded False (kernelModule set),
 *                 on a GPU node without the OoT module (reason = the node's
 *                 reason, e.g. NoKernelMapping), on DaemonSets not ready. */
cJSON *gk_sd_merge(const cJSON *cur, const gk_sd_inputs *in, bool *oom);

/* The JSON merge patch body for the status subresource, {"status":{...}}:
 * changed top-level status fields replaced, removed ones null. NULL when
 * cur and want are equal (nothing to write) or on OOM (*oom set). */
cJSON *gk_sd_status_patch(const cJSON *cur, const cJSON *want, bool *oom);

#endif
