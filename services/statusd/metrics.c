/* gpukmm-statusd controller mode: per-policy domain metrics (see metrics.h). */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/metrics.h"

enum {
	M_KMM_DESIRED, M_KMM_AVAILABLE, M_OP_DESIRED, M_OP_READY, M_SELECTED, M_GPU, M_UNKNOWN, M_PROBLEMS, M_COND,
	M_COND_REASON, M_ERRORS, M_UPG_NODES, M_UPG_HALTED, M_N
};

/* One series per policy (and operand, source, reason, condition): bounded by
 * the policies of a cluster, a handful; 1024 is statusd's own table bound. */
#define POLICY_SERIES 1024

static const gk_metric_desc descs[M_N] = {
	[M_KMM_DESIRED] = { "gpukmm_policy_kmm_desired_nodes",
			    "Nodes where KMM should load the policy's module (the Module's desiredNumber).",
			    GK_METRIC_GAUGE, "policy" },
	[M_KMM_AVAILABLE] = { "gpukmm_policy_kmm_available_nodes",
			      "Nodes where KMM has the policy's module loaded (the Module's availableNumber).",
			      GK_METRIC_GAUGE, "policy" },
	[M_OP_DESIRED] = { "gpukmm_policy_operand_desired_pods",
			   "Pods an operand of the policy should run (DaemonSet desiredNumberScheduled).",
			   GK_METRIC_GAUGE, "policy,operand" },
	[M_OP_READY] = { "gpukmm_policy_operand_ready_pods", "Ready pods of an operand of the policy.",
			 GK_METRIC_GAUGE, "policy,operand" },
	[M_SELECTED] = { "gpukmm_policy_selected_nodes", "Nodes the policy's node selector matches.",
			 GK_METRIC_GAUGE, "policy" },
	[M_GPU] = { "gpukmm_policy_gpu_nodes",
		    "GPU nodes of the policy by the GPU kernel module they run: oot (out-of-tree, KMM's), "
		    "in-tree (the kernel's, built in included) or none (not loaded).",
		    GK_METRIC_GAUGE, "policy,module_source" },
	[M_UNKNOWN] = { "gpukmm_policy_unknown_nodes",
			"Selected nodes whose GPU and module state is not known (no or unreadable node report).",
			GK_METRIC_GAUGE, "policy" },
	[M_PROBLEMS] = { "gpukmm_policy_problem_nodes",
			 "Nodes of the policy with a problem, by reason (status.nodes.problems' reasons: "
			 "NoKernelMapping, NotLoaded, InTreeLoaded, SecureBootUnsigned, VFsActive, NoReport, ...).",
			 GK_METRIC_GAUGE, "policy,reason" },
	[M_COND] = { "gpukmm_policy_condition",
		     "1 for the status of each condition of the policy (Ready, ModuleLoaded, Degraded), 0 for "
		     "the other statuses.",
		     GK_METRIC_GAUGE, "policy,type,status" },
	[M_COND_REASON] = { "gpukmm_policy_condition_reason",
			    "1 for the current reason of each condition of the policy (e.g. ModuleLoaded "
			    "DeletionBlocked).",
			    GK_METRIC_GAUGE, "policy,type,reason" },
	[M_ERRORS] = { "gpukmm_policy_errors", "Entries in the policy's status.errors.", GK_METRIC_GAUGE, "policy" },
	/* the rolling driver upgrade (status.upgrade, gpukmm-upgrader) */
	[M_UPG_NODES] = { "gpukmm_policy_upgrade_nodes",
			  "Nodes of the policy's versioned Module by upgrade state: up-to-date (labelled for the "
			  "target version), pending, draining, unloading, loading, failed, skipped.",
			  GK_METRIC_GAUGE, "policy,state" },
	[M_UPG_HALTED] = { "gpukmm_policy_upgrade_halted",
			   "1 while the policy's rollout is halted: failed nodes use up maxUnavailable.",
			   GK_METRIC_GAUGE, "policy" },
};

static gk_metric *fam[M_N];

static void declare(void)
{
	if (fam[0])
		return;
	for (int i = 0; i < M_N; i++) {
		gk_metric_desc d = descs[i];
		d.max_series = POLICY_SERIES;
		fam[i] = gk_metrics_family(gk_metrics_default(), &d);
	}
}

bool gk_sd_metrics_ratio(const char *s, double *ready, double *desired)
{
	char *end;
	if (!s)
		return false;
	long a = strtol(s, &end, 10);
	if (end == s || *end != '/')
		return false;
	const char *b = end + 1;
	long d = strtol(b, &end, 10);
	if (end == b || *end || a < 0 || d < 0)
		return false;
	*ready = (double)a;
	*desired = (double)d;
	return true;
}

void gk_sd_metrics_operand(const char *policy, const char *operand, double desired, double ready)
{
	declare();
	gk_metric_set(fam[M_OP_DESIRED], desired, GK_LV(policy, operand));
	gk_metric_set(fam[M_OP_READY], ready, GK_LV(policy, operand));
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

void gk_sd_metrics_policy(const char *policy, const cJSON *status, const gk_sd_nodes *nodes)
{
	declare();
	double a, d;
	/* "N/A", "Recreating", "Removing": no numbers (absent, not stale) */
	if (gk_sd_metrics_ratio(str(status, "kmmStatus"), &a, &d)) {
		gk_metric_set(fam[M_KMM_DESIRED], d, GK_LV(policy));
		gk_metric_set(fam[M_KMM_AVAILABLE], a, GK_LV(policy));
	} else {
		gk_metric_remove(fam[M_KMM_DESIRED], GK_LV(policy));
		gk_metric_remove(fam[M_KMM_AVAILABLE], GK_LV(policy));
	}
	static const char *const ops[][2] = { { "devicePluginStatus", "device-plugin" },
					      { "draStatus", "dra" },
					      { "xpuManagerStatus", "xpu-manager" } };
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (gk_sd_metrics_ratio(str(status, ops[i][0]), &a, &d)) {
			gk_sd_metrics_operand(policy, ops[i][1], d, a);
		} else {
			gk_metric_remove(fam[M_OP_DESIRED], GK_LV(policy, ops[i][1]));
			gk_metric_remove(fam[M_OP_READY], GK_LV(policy, ops[i][1]));
		}
	}
	const cJSON *errs = cJSON_GetObjectItemCaseSensitive(status, "errors");
	gk_metric_set(fam[M_ERRORS], cJSON_IsArray(errs) ? cJSON_GetArraySize(errs) : 0, GK_LV(policy));
	/* conditions: statuses one-hot, the reason as it is now (older reasons go) */
	gk_metric_remove_matching(fam[M_COND_REASON], "policy", policy);
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(status, "conditions"))
	{
		const char *type = str(c, "type"), *st = str(c, "status"), *reason = str(c, "reason");
		if (!type || !st)
			continue;
		static const char *const sts[] = { "True", "False", "Unknown" };
		for (size_t i = 0; i < 3; i++)
			gk_metric_set(fam[M_COND], strcmp(st, sts[i]) == 0, GK_LV(policy, type, sts[i]));
		if (reason && *reason)
			gk_metric_set(fam[M_COND_REASON], 1, GK_LV(policy, type, reason));
	}
	const cJSON *up = cJSON_GetObjectItemCaseSensitive(status, "upgrade");
	static const char *const upk[][2] = { { "upToDate", "up-to-date" }, { "pending", "pending" },
					      { "draining", "draining" },   { "unloading", "unloading" },
					      { "loading", "loading" },     { "failed", "failed" },
					      { "skipped", "skipped" } };
	for (size_t i = 0; i < sizeof(upk) / sizeof(upk[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(up, upk[i][0]);
		if (cJSON_IsObject(up))
			gk_metric_set(fam[M_UPG_NODES], cJSON_IsNumber(v) ? v->valuedouble : 0, GK_LV(policy, upk[i][1]));
		else
			gk_metric_remove(fam[M_UPG_NODES], GK_LV(policy, upk[i][1]));
	}
	if (cJSON_IsObject(up))
		gk_metric_set(fam[M_UPG_HALTED], cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(up, "halted")), GK_LV(policy));
	else
		gk_metric_remove(fam[M_UPG_HALTED], GK_LV(policy));
	if (!nodes)
		return;
	gk_metric_set(fam[M_SELECTED], nodes->selected, GK_LV(policy));
	gk_metric_set(fam[M_GPU], nodes->oot_loaded, GK_LV(policy, "oot"));
	gk_metric_set(fam[M_GPU], nodes->in_tree_loaded, GK_LV(policy, "in-tree"));
	gk_metric_set(fam[M_GPU], nodes->not_loaded, GK_LV(policy, "none"));
	gk_metric_set(fam[M_UNKNOWN], nodes->unknown, GK_LV(policy));
	gk_metric_remove_matching(fam[M_PROBLEMS], "policy", policy);
	for (size_t i = 0; i < nodes->n_reasons; i++)
		gk_metric_set(fam[M_PROBLEMS], nodes->by_reason[i].nodes, GK_LV(policy, nodes->by_reason[i].reason));
}

void gk_sd_metrics_forget(const char *policy)
{
	if (!fam[0])
		return;
	for (int i = 0; i < M_N; i++)
		gk_metric_remove_matching(fam[i], "policy", policy);
}
