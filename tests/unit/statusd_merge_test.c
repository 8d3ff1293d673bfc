/* gpukmm-statusd controller mode: the pure merge of reports into a status. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../../services/statusd/merge.h"

static Gpukmm__StatusReport rep(const char *comp, int64_t gen)
{
	Gpukmm__StatusReport r = GPUKMM__STATUS_REPORT__INIT;
	r.component = (char *)comp;
	r.policy = "cp";
	r.has_generation = gen > 0;
	r.generation = gen;
	return r;
}

static const char *s(const cJSON *o, const char *k)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(c) ? c->valuestring : NULL;
}

static const cJSON *cond(const cJSON *st, const char *type)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(st, "conditions"))
	{
		if (strcmp(s(it, "type"), type) == 0)
			return it;
	}
	return NULL;
}

static cJSON *merge(const cJSON *cur, const Gpukmm__StatusReport *m, const Gpukmm__StatusReport *g, bool grace_over,
		    const char *now)
{
	/* an opmgr that has reported nothing of its own (its share is in the tests below) */
	static Gpukmm__StatusReport o = GPUKMM__STATUS_REPORT__INIT;
	o.component = "opmgr";
	gk_sd_inputs in = { .modmgr = m, .gater = g, .opmgr = m || g ? &o : NULL, .missing_is_empty = grace_over,
			    .now = now };
	bool oom;
	cJSON *w = gk_sd_merge(cur, &in, &oom);
	cr_assert_not(oom);
	return w;
}

/* the operand counts come from opmgr, its errors between modmgr's and the gater's,
 * and a DaemonSet not ready makes Ready False */
Test(statusd_merge, opmgr_reports_the_operands)
{
	Gpukmm__StatusReport m = GPUKMM__STATUS_REPORT__INIT, o = GPUKMM__STATUS_REPORT__INIT,
			     g = GPUKMM__STATUS_REPORT__INIT;
	m.component = "modmgr";
	m.kmm_status = "3/3";
	o.component = "opmgr";
	o.device_plugin_status = "2/3";
	o.dra_status = "N/A";
	o.xpu_manager_status = "3/3";
	char *oe[] = { "DRA is not enabled in the cluster, but ClusterPolicy requests it." };
	o.errors = oe;
	o.n_errors = 1;
	g.component = "gater";
	g.device_plugin_status = "9/9"; /* an old gater: opmgr wins */
	char *ge[] = { "g" };
	g.errors = ge;
	g.n_errors = 1;
	gk_sd_inputs in = { .modmgr = &m, .gater = &g, .opmgr = &o, .missing_is_empty = true, .now = "t" };
	bool oom;
	cJSON *w = gk_sd_merge(NULL, &in, &oom);
	cr_assert_str_eq(cJSON_GetObjectItem(w, "devicePluginStatus")->valuestring, "2/3");
	cr_assert_str_eq(cJSON_GetObjectItem(w, "draStatus")->valuestring, "N/A");
	cr_assert_str_eq(cJSON_GetObjectItem(w, "xpuManagerStatus")->valuestring, "3/3");
	cJSON *e = cJSON_GetObjectItem(w, "errors");
	cr_assert_eq(cJSON_GetArraySize(e), 2);
	cr_assert_str_eq(cJSON_GetArrayItem(e, 0)->valuestring, oe[0]);
	cJSON_Delete(w);
	o.n_errors = g.n_errors = 0;
	w = gk_sd_merge(NULL, &in, &oom);
	cr_assert_str_eq(s(cond(w, "Ready"), "reason"), "DaemonSetsNotReady");
	cr_assert(strstr(s(cond(w, "Ready"), "message"), "devicePluginStatus is 2/3") != NULL);
	cJSON_Delete(w);
}

Test(statusd_merge, nothing_reported_writes_nothing)
{
	gk_sd_inputs in = { .now = "t0" };
	bool oom;
	cr_assert_null(gk_sd_merge(NULL, &in, &oom));
	cr_assert_not(oom);
}

Test(statusd_merge, full_ready)
{
	Gpukmm__StatusReport m = rep("modmgr", 3), g = rep("gater", 3);
	m.kmm_status = "2/2";
	g.device_plugin_status = "2/2";
	g.dra_status = "N/A";
	g.xpu_manager_status = "N/A";
	cJSON *w = merge(NULL, &m, &g, false, "t0");
	cr_assert_str_eq(s(w, "kmmStatus"), "2/2");
	cr_assert_str_eq(s(w, "devicePluginStatus"), "2/2");
	cr_assert_str_eq(s(w, "draStatus"), "N/A");
	cr_assert_null(cJSON_GetObjectItem(w, "errors"));
	cr_assert_eq(cJSON_GetObjectItem(w, "observedGeneration")->valuedouble, 3);
	cr_assert_str_eq(s(cond(w, "Ready"), "status"), "True");
	cr_assert_str_eq(s(cond(w, "ModuleLoaded"), "status"), "True");
	cr_assert_str_eq(s(cond(w, "Degraded"), "status"), "False");
	cr_assert_str_eq(s(cond(w, "Ready"), "lastTransitionTime"), "t0");
	cJSON_Delete(w);
}

Test(statusd_merge, transition_time_moves_only_on_transition)
{
	Gpukmm__StatusReport m = rep("modmgr", 1), g = rep("gater", 1);
	m.kmm_status = "1/2";
	g.device_plugin_status = "1/2";
	cJSON *w1 = merge(NULL, &m, &g, false, "t1");
	cr_assert_str_eq(s(cond(w1, "Ready"), "status"), "False");
	cr_assert_str_eq(s(cond(w1, "Ready"), "reason"), "ModuleNotLoaded");
	/* same state later: same times, and no patch */
	cJSON *w2 = merge(w1, &m, &g, false, "t2");
	cr_assert_str_eq(s(cond(w2, "Ready"), "lastTransitionTime"), "t1");
	bool oom;
	cr_assert_null(gk_sd_status_patch(w1, w2, &oom));
	cr_assert_not(oom);
	/* module loaded everywhere, DP not yet: ModuleLoaded moves, Ready stays False */
	m.kmm_status = "2/2";
	cJSON *w3 = merge(w2, &m, &g, false, "t3");
	cr_assert_str_eq(s(cond(w3, "ModuleLoaded"), "lastTransitionTime"), "t3");
	cr_assert_str_eq(s(cond(w3, "Ready"), "lastTransitionTime"), "t1");
	cr_assert_str_eq(s(cond(w3, "Ready"), "reason"), "DaemonSetsNotReady");
	cr_assert_str_eq(s(cond(w3, "Degraded"), "lastTransitionTime"), "t1");
	g.device_plugin_status = "2/2";
	cJSON *w4 = merge(w3, &m, &g, false, "t4");
	cr_assert_str_eq(s(cond(w4, "Ready"), "status"), "True");
	cr_assert_str_eq(s(cond(w4, "Ready"), "lastTransitionTime"), "t4");
	cJSON *p = gk_sd_status_patch(w3, w4, &oom);
	cr_assert_not_null(p);
	cJSON *ps = cJSON_GetObjectItem(p, "status");
	cr_assert_not_null(cJSON_GetObjectItem(ps, "devicePluginStatus"));
	cr_assert_null(cJSON_GetObjectItem(ps, "kmmStatus")); /* unchanged: not sent */
	cJSON_Delete(p);
	cJSON_Delete(w1);
	cJSON_Delete(w2);
	cJSON_Delete(w3);
	cJSON_Delete(w4);
}

Test(statusd_merge, errors_ordered_deduplicated_bounded_and_cleared)
{
	Gpukmm__StatusReport m = rep("modmgr", 1), g = rep("gater", 1);
	char *me[] = { "KMM is not installed in the cluster.", "b" };
	char *ge[12];
	char buf[12][16];
	for (int i = 0; i < 12; i++) {
		snprintf(buf[i], sizeof(buf[i]), "g%d", i);
		ge[i] = buf[i];
	}
	ge[0] = "b"; /* duplicate of modmgr's */
	m.errors = me;
	m.n_errors = 2;
	g.errors = ge;
	g.n_errors = 12;
	cJSON *w = merge(NULL, &m, &g, false, "t");
	cJSON *e = cJSON_GetObjectItem(w, "errors");
	cr_assert_eq(cJSON_GetArraySize(e), GK_SD_MAX_ERRORS);
	cr_assert_str_eq(cJSON_GetArrayItem(e, 0)->valuestring, "KMM is not installed in the cluster.");
	cr_assert_str_eq(cJSON_GetArrayItem(e, 1)->valuestring, "b");
	cr_assert_str_eq(cJSON_GetArrayItem(e, 2)->valuestring, "g1");
	cr_assert_str_eq(s(cond(w, "Degraded"), "status"), "True");
	cr_assert(strstr(s(cond(w, "Degraded"), "message"), "KMM is not installed") != NULL);
	cr_assert_str_eq(s(cond(w, "Ready"), "reason"), "Degraded");
	/* causes gone: errors key removed by a null in the patch */
	m.n_errors = 0;
	g.n_errors = 0;
	cJSON *w2 = merge(w, &m, &g, false, "t2");
	cr_assert_null(cJSON_GetObjectItem(w2, "errors"));
	bool oom;
	cJSON *p = gk_sd_status_patch(w, w2, &oom);
	cr_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "status"), "errors")));
	cJSON_Delete(p);
	cJSON_Delete(w);
	cJSON_Delete(w2);
}

Test(statusd_merge, restart_with_one_report_keeps_the_rest)
{
	const char *curtxt = "{\"kmmStatus\":\"2/2\",\"devicePluginStatus\":\"2/2\",\"errors\":[\"gater says\"],"
			     "\"observedGeneration\":4,\"nodes\":{\"total\":2}}";
	cJSON *cur = cJSON_Parse(curtxt);
	Gpukmm__StatusReport m = rep("modmgr", 4);
	m.kmm_status = "2/2";
	cJSON *w = merge(cur, &m, NULL, false, "t");
	cr_assert_str_eq(s(w, "devicePluginStatus"), "2/2");
	cr_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(w, "errors"), 0)->valuestring, "gater says");
	cr_assert_not_null(cJSON_GetObjectItem(w, "nodes"));
	/* after the grace period a silent component's errors go */
	cJSON *w2 = merge(cur, &m, NULL, true, "t");
	cr_assert_null(cJSON_GetObjectItem(w2, "errors"));
	cr_assert_str_eq(s(w2, "devicePluginStatus"), "2/2"); /* values stay: only a report changes them */
	cJSON_Delete(w);
	cJSON_Delete(w2);
	cJSON_Delete(cur);
}

Test(statusd_merge, kmm_absent_keeps_previous_and_na_means_no_module)
{
	cJSON *cur = cJSON_Parse("{\"kmmStatus\":\"1/1\"}");
	Gpukmm__StatusReport m = rep("modmgr", 2), g = rep("gater", 2);
	cJSON *w = merge(cur, &m, &g, false, "t");
	cr_assert_str_eq(s(w, "kmmStatus"), "1/1");
	cJSON_Delete(w);
	m.kmm_status = "N/A";
	g.device_plugin_status = "3/3";
	w = merge(cur, &m, &g, false, "t");
	cr_assert_str_eq(s(cond(w, "ModuleLoaded"), "reason"), "NoKernelModule");
	cr_assert_str_eq(s(cond(w, "Ready"), "status"), "True");
	cJSON_Delete(w);
	cJSON_Delete(cur);
}

Test(statusd_merge, modmgr_condition_is_used_and_garbage_current_ignored)
{
	cJSON *cur = cJSON_Parse("[1,2]");
	Gpukmm__StatusReport m = rep("modmgr", 1);
	Gpukmm__Condition c = GPUKMM__CONDITION__INIT;
	Gpukmm__Condition *cs[] = { &c };
	c.type = "ModuleLoaded";
	c.status = "weird";
	c.reason = "Recreating";
	c.message = "m";
	m.conditions = cs;
	m.n_conditions = 1;
	m.kmm_status = "Recreating";
	cJSON *w = merge(cur, &m, NULL, false, "t");
	cr_assert_str_eq(s(cond(w, "ModuleLoaded"), "status"), "Unknown");
	cr_assert_str_eq(s(cond(w, "ModuleLoaded"), "reason"), "Recreating");
	cr_assert_str_eq(s(cond(w, "Ready"), "status"), "False");
	cJSON_Delete(w);
	cJSON_Delete(cur);
}

/* a merge patch keeps nested keys it does not mention: once no node has a problem,
 * status.nodes.problems must be nulled, or the list stays stale and every later
 * evaluation re-sends the same patch (found by chaos.sh) */
Test(statusd_merge, nested_key_gone_becomes_null_and_then_nothing_is_written)
{
	cJSON *cur = cJSON_Parse("{\"kmmStatus\":\"3/3\",\"nodes\":{\"gpuNodes\":3,\"problemNodes\":1,"
				 "\"problems\":[{\"node\":\"n1\",\"reason\":\"NoReport\"}]}}");
	cJSON *want = cJSON_Parse("{\"kmmStatus\":\"3/3\",\"nodes\":{\"gpuNodes\":3,\"problemNodes\":0}}");
	bool oom;
	cJSON *p = gk_sd_status_patch(cur, want, &oom);
	cr_assert_not_null(p);
	cr_assert_not(oom);
	const cJSON *st = cJSON_GetObjectItem(p, "status");
	cr_assert_null(cJSON_GetObjectItem(st, "kmmStatus"), "unchanged keys are not sent");
	const cJSON *n = cJSON_GetObjectItem(st, "nodes");
	cr_assert(cJSON_IsNull(cJSON_GetObjectItem(n, "problems")), "stale problems nulled");
	cr_assert_eq(cJSON_GetObjectItem(n, "problemNodes")->valueint, 0);
	cr_assert_null(cJSON_GetObjectItem(n, "gpuNodes"), "unchanged nested keys are not sent");
	cJSON_Delete(p);
	/* the API applies the patch: the next evaluation writes nothing */
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(cur, "nodes"), "problems");
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cur, "nodes"), "problemNodes", cJSON_CreateNumber(0));
	cr_assert_null(gk_sd_status_patch(cur, want, &oom));
	cJSON_Delete(cur);
	cJSON_Delete(want);
}

/* the upgrader's report: status.upgrade and the Upgraded condition; a halted
 * rollout makes Degraded True; kept while the upgrader is silent after a
 * restart, gone once it reports none (no versioned Module) */
Test(statusd_merge, upgrader_reports_the_rollout)
{
	Gpukmm__StatusReport m = rep("modmgr", 3), u = rep("upgrader", 3);
	m.kmm_status = "3/3";
	Gpukmm__UpgradeStatus us = GPUKMM__UPGRADE_STATUS__INIT;
	us.target_version = "1.4";
	us.has_nodes = us.has_up_to_date = us.has_failed = us.has_pending = us.has_halted = 1;
	us.nodes = 3;
	us.up_to_date = 1;
	us.failed = 1;
	us.pending = 1;
	us.halted = 1;
	Gpukmm__UpgradeNode pn = GPUKMM__UPGRADE_NODE__INIT;
	pn.node = "gpu-2";
	pn.state = "failed";
	pn.reason = "UpgradeFailed";
	pn.message = "drain timed out after 300s: pod w/db: Cannot evict pod";
	Gpukmm__UpgradeNode *pns[] = { &pn };
	us.problems = pns;
	us.n_problems = 1;
	u.upgrade = &us;
	Gpukmm__Condition c = GPUKMM__CONDITION__INIT;
	c.type = "Upgraded";
	c.status = "False";
	c.reason = "UpgradeHalted";
	c.message = "upgrade to 1.4 halted: 1 failed node(s) use up maxUnavailable 1: gpu-2 (...)";
	Gpukmm__Condition *cs[] = { &c };
	u.conditions = cs;
	u.n_conditions = 1;
	Gpukmm__StatusReport o = rep("opmgr", 3);
	gk_sd_inputs in = { .modmgr = &m, .opmgr = &o, .upgrader = &u, .missing_is_empty = true, .now = "t1" };
	bool oom;
	cJSON *w = gk_sd_merge(NULL, &in, &oom);
	const cJSON *up = cJSON_GetObjectItem(w, "upgrade");
	cr_assert_not_null(up);
	cr_assert_str_eq(s(up, "targetVersion"), "1.4");
	cr_assert_eq(cJSON_GetObjectItem(up, "failed")->valueint, 1);
	cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(up, "halted")));
	cr_assert_str_eq(s(cJSON_GetArrayItem(cJSON_GetObjectItem(up, "problems"), 0), "node"), "gpu-2");
	cr_assert_str_eq(s(cond(w, "Upgraded"), "reason"), "UpgradeHalted");
	cr_assert_str_eq(s(cond(w, "Upgraded"), "status"), "False");
	cr_assert_str_eq(s(cond(w, "Degraded"), "status"), "True");
	cr_assert_str_eq(s(cond(w, "Degraded"), "reason"), "UpgradeHalted");
	/* a restarted statusd, the upgrader silent yet: both kept */
	in.upgrader = NULL;
	in.missing_is_empty = false;
	cJSON *w2 = gk_sd_merge(w, &in, &oom);
	cr_assert_not_null(cJSON_GetObjectItem(w2, "upgrade"));
	cr_assert_str_eq(s(cond(w2, "Upgraded"), "reason"), "UpgradeHalted");
	cr_assert_str_eq(s(cond(w2, "Upgraded"), "lastTransitionTime"), "t1");
	/* the upgrader reports nothing to roll (version removed): both go */
	Gpukmm__StatusReport none = rep("upgrader", 4);
	in.upgrader = &none;
	in.missing_is_empty = true;
	cJSON *w3 = gk_sd_merge(w2, &in, &oom);
	cr_assert_null(cJSON_GetObjectItem(w3, "upgrade"));
	cr_assert_null(cond(w3, "Upgraded"));
	cr_assert_str_eq(s(cond(w3, "Degraded"), "status"), "False");
	cJSON *p = gk_sd_status_patch(w2, w3, &oom);
	char *ps = cJSON_PrintUnformatted(p);
	cr_assert(strstr(ps, "\"upgrade\":null"), "%s", ps);
	free(ps);
	cJSON_Delete(p);
	cJSON_Delete(w);
	cJSON_Delete(w2);
	cJSON_Delete(w3);
}
