/* gpukmm-upgrader: the pure rollout decision (services/upgrader/decide.c):
 * every state's transition, the picks within maxParallel / maxUnavailable,
 * the admin's cordon, skip / retry / release, the halt, the confirmation the
 * picks wait for, the Node patches, status.upgrade — and, over many random
 * views, the invariants a crash-safe rollout rests on. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../services/upgrader/decide.h"
#include "status.pb-c.h"

#define VK "kmm.node.kubernetes.io/version-module.ns.cp-gpu"
#define NOW 1000000

static gk_upg_node nodes[16];
static gk_upg_input in;

/* a node on `version`, Ready, KMM ready on it, the node reporting that version loaded */
static gk_upg_node *node(size_t i, const char *name, const char *version)
{
	gk_upg_node *n = &nodes[i];
	memset(n, 0, sizeof(*n));
	n->name = name;
	n->ready = true;
	n->version = version;
	n->kmm_ready = version != NULL;
	n->kmm_version_ready = version;
	n->report.present = true;
	n->report.loaded = version != NULL;
	n->report.oot = version != NULL;
	snprintf(n->report.version, sizeof(n->report.version), "%s", version ? version : "");
	snprintf(n->report.srcversion, sizeof(n->report.srcversion), "SRC-%s", version ? version : "none");
	n->report.can_unload = GPUKMM__TRI_STATE__TRI_YES;
	if (in.n <= i)
		in.n = i + 1;
	return n;
}

static void setup(void)
{
	memset(&in, 0, sizeof(in));
	memset(nodes, 0, sizeof(nodes));
	gk_policy_upgrade_resolve(NULL, &in.pol);
	in.pol.auto_upgrade = true;
	in.target = "v2";
	in.policy_version = "v2";
	in.module = "xe";
	in.now_s = NOW;
	in.nodes = nodes;
	in.confirmed = true;
}

TestSuite(upgrader_decide, .init = setup);

static gk_upg_plan plan;

static void decide(void)
{
	gk_err e;
	gk_upg_plan_free(&plan);
	cr_assert_eq(gk_upg_decide(&in, &plan, &e), 0);
}

static const gk_upg_step *step_of(size_t node)
{
	for (size_t i = 0; i < plan.n_steps; i++)
		if (plan.steps[i].node == node)
			return &plan.steps[i];
	return NULL;
}

static int action_of(size_t node)
{
	const gk_upg_step *s = step_of(node);
	return s ? s->action : GK_UPG_A_NONE;
}

static size_t count_action(int a)
{
	size_t k = 0;
	for (size_t i = 0; i < plan.n_steps; i++)
		k += plan.steps[i].action == a;
	return k;
}

static char *patch_of(size_t node)
{
	const gk_upg_step *s = step_of(node);
	cr_assert_not_null(s);
	cJSON *p = gk_upg_patch(&in, s, VK, "7");
	cr_assert_not_null(p);
	char *str = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	return str;
}

static void in_state(gk_upg_node *n, gk_upg_state s)
{
	n->state = s;
	n->state_raw = gk_upg_state_name(s);
}

Test(upgrader_decide, state_labels_round_trip)
{
	for (int s = GK_UPG_S_DRAINING; s <= GK_UPG_S_FAILED; s++)
		cr_assert_eq(gk_upg_state_parse(gk_upg_state_name(s)), s);
	cr_assert_eq(gk_upg_state_parse(NULL), GK_UPG_S_NONE);
	cr_assert_eq(gk_upg_state_parse("upgrade-required"), GK_UPG_S_UNKNOWN);
	cr_assert_eq(gk_upg_state_parse(""), GK_UPG_S_UNKNOWN);
}

Test(upgrader_decide, max_unavailable_rounds_up)
{
	gk_policy_upgrade u;
	gk_policy_upgrade_resolve(NULL, &u);
	cr_assert_eq(gk_policy_upgrade_max_unavailable(&u, 3), 1);
	cr_assert_eq(gk_policy_upgrade_max_unavailable(&u, 8), 2);
	cr_assert_eq(gk_policy_upgrade_max_unavailable(&u, 9), 3);
	cr_assert_eq(gk_policy_upgrade_max_unavailable(&u, 0), 0);
	u.max_unavailable_percent = false;
	u.max_unavailable = 2;
	cr_assert_eq(gk_policy_upgrade_max_unavailable(&u, 100), 2);
}

Test(upgrader_decide, first_install_labels_every_node_at_once)
{
	node(0, "a", NULL);
	node(1, "b", NULL);
	node(2, "c", NULL);
	decide();
	cr_assert_eq(count_action(GK_UPG_A_LABEL), 3);
	cr_assert_eq(count_action(GK_UPG_A_START), 0, "nothing loaded: nothing to drain");
	char *p = patch_of(1);
	cr_assert_str_eq(p, "{\"metadata\":{\"resourceVersion\":\"7\",\"labels\":{\"" VK "\":\"v2\"}}}");
	free(p);
	cr_assert_eq(plan.pending, 3);
	cr_assert_str_eq(plan.cond_reason, "Upgrading");
}

Test(upgrader_decide, without_auto_upgrade_nothing_moves)
{
	in.pol.auto_upgrade = false;
	node(0, "a", NULL);
	node(1, "b", "v1");
	node(2, "c", "v2");
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert_eq(plan.pending, 2);
	cr_assert_eq(plan.up_to_date, 1);
	cr_assert_str_eq(plan.cond_reason, "ManualUpgrade");
	cr_assert(strstr(plan.cond_message, "autoUpgrade"), "%s", plan.cond_message);
}

Test(upgrader_decide, one_pick_at_a_time_by_default)
{
	for (size_t i = 0; i < 5; i++) {
		static const char *names[] = { "a", "b", "c", "d", "e" };
		node(i, names[i], "v1");
	}
	decide();
	cr_assert_eq(count_action(GK_UPG_A_START), 1);
	cr_assert_eq(action_of(0), GK_UPG_A_START, "by name");
	cr_assert(step_of(0)->cordon);
	char *p = patch_of(0);
	cr_assert_str_eq(p, "{\"metadata\":{\"resourceVersion\":\"7\",\"labels\":{\"gpukmm.io/upgrade-state\":\"draining\"},"
			    "\"annotations\":{\"gpukmm.io/upgrade-started\":\"1970-01-12T13:46:40Z\","
			    "\"gpukmm.io/upgrade-reason\":null,\"gpukmm.io/upgrade-from\":null,"
			    "\"gpukmm.io/upgrade-cordoned\":\"true\"}},\"spec\":{\"unschedulable\":true}}");
	free(p);
	cr_assert_eq(plan.draining, 1);
	cr_assert_eq(plan.pending, 4);
	cr_assert_str_eq(plan.cond_reason, "Upgrading");
}

Test(upgrader_decide, picks_bounded_by_max_parallel_and_max_unavailable)
{
	static const char *names[] = { "a", "b", "c", "d", "e", "f", "g", "h" };
	for (size_t i = 0; i < 8; i++)
		node(i, names[i], "v1");
	in.pol.max_parallel = 3; /* 25% of 8 = 2 unavailable */
	decide();
	cr_assert_eq(count_action(GK_UPG_A_START), 2);
	in.pol.max_unavailable_percent = false;
	in.pol.max_unavailable = 5;
	decide();
	cr_assert_eq(count_action(GK_UPG_A_START), 3);
	in_state(&nodes[7], GK_UPG_S_LOADING); /* one already in progress */
	decide();
	cr_assert_eq(count_action(GK_UPG_A_START), 2);
}

Test(upgrader_decide, picks_wait_for_a_fresh_read)
{
	node(0, "a", "v1");
	node(1, "b", "v1");
	in.confirmed = false;
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert(plan.need_confirm);
	cr_assert_not(plan.halted);
	/* nothing to pick: no read asked for */
	in.pol.max_parallel = 1;
	in_state(&nodes[1], GK_UPG_S_DRAINING);
	nodes[1].started_s = NOW;
	decide();
	cr_assert_not(plan.need_confirm);
	cr_assert_eq(action_of(1), GK_UPG_A_DRAIN, "transitions of started nodes do not wait");
}

Test(upgrader_decide, admin_cordon_first_and_kept)
{
	node(0, "a", "v1");
	node(1, "b", "v1")->unschedulable = true;
	decide();
	cr_assert_eq(action_of(1), GK_UPG_A_START, "an admin-cordoned node is out of service already");
	cr_assert_not(step_of(1)->cordon);
	char *p = patch_of(1);
	cr_assert_null(strstr(p, "unschedulable"), "%s", p);
	cr_assert_null(strstr(p, "upgrade-cordoned"), "%s", p);
	free(p);
	/* at the end: not ours, not lifted */
	in_state(&nodes[1], GK_UPG_S_LOADING);
	nodes[1].version = nodes[1].kmm_version_ready = "v2";
	strcpy(nodes[1].report.version, "v2");
	decide();
	cr_assert_eq(action_of(1), GK_UPG_A_FINISH);
	cr_assert_not(step_of(1)->uncordon);
	p = patch_of(1);
	cr_assert_null(strstr(p, "unschedulable"), "%s", p);
	free(p);
	cr_assert(strstr(step_of(1)->message, "left cordoned"), "%s", step_of(1)->message);
}

Test(upgrader_decide, our_cordon_lifted_at_the_end)
{
	gk_upg_node *n = node(0, "a", "v2");
	in_state(n, GK_UPG_S_LOADING);
	n->unschedulable = n->cordoned_by_us = true;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_FINISH);
	cr_assert(step_of(0)->uncordon);
	char *p = patch_of(0);
	cr_assert_str_eq(p, "{\"metadata\":{\"resourceVersion\":\"7\",\"labels\":{\"gpukmm.io/upgrade-state\":\"done\"},"
			    "\"annotations\":{\"gpukmm.io/upgrade-cordoned\":null,\"gpukmm.io/upgrade-started\":null,"
			    "\"gpukmm.io/upgrade-from\":null,\"gpukmm.io/upgrade-reason\":null}},"
			    "\"spec\":{\"unschedulable\":null}}");
	free(p);
	/* an admin uncordoned it meanwhile: nothing to lift, the annotation goes */
	n->unschedulable = false;
	decide();
	cr_assert_not(step_of(0)->uncordon);
}

Test(upgrader_decide, unavailable_nodes_use_the_budget)
{
	node(0, "a", "v1");
	node(1, "b", "v1");
	node(2, "c", "v2")->ready = false; /* 25% of 3 = 1: used up */
	decide();
	cr_assert_eq(count_action(GK_UPG_A_START), 0);
	cr_assert(plan.blocked);
	cr_assert_str_eq(plan.cond_reason, "UpgradeBlocked");
	cr_assert(strstr(plan.cond_message, "c (NodeNotReady"), "%s", plan.cond_message);
	/* a candidate that is unavailable already costs nothing */
	nodes[1].kmm_ready = false;
	nodes[1].kmm_version_ready = NULL;
	decide();
	cr_assert_eq(count_action(GK_UPG_A_START), 1);
	cr_assert_eq(action_of(1), GK_UPG_A_START);
	cr_assert_not(plan.blocked);
}

Test(upgrader_decide, not_ready_nodes_are_not_picked)
{
	node(0, "a", "v1")->ready = false;
	in.pol.max_unavailable_percent = false;
	in.pol.max_unavailable = 2;
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert_eq(plan.pending, 1);
}

Test(upgrader_decide, draining)
{
	gk_upg_node *n = node(0, "a", "v1");
	in_state(n, GK_UPG_S_DRAINING);
	n->unschedulable = n->cordoned_by_us = true;
	n->started_s = NOW - 10;
	n->drain = GK_UPG_DRAIN_RUNNING;
	n->drain_msg = "2 pods left; ns/p1: Cannot evict pod as it would violate the pod's disruption budget.";
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_DRAIN);
	cr_assert_eq(plan.n_problems, 1);
	cr_assert_str_eq(plan.problems[0].reason, "Draining");
	/* done */
	n->drain = GK_UPG_DRAIN_DONE;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_UNLOAD);
	char *p = patch_of(0);
	cr_assert_str_eq(p, "{\"metadata\":{\"resourceVersion\":\"7\",\"labels\":{\"gpukmm.io/upgrade-state\":\"unloading\"}}}");
	free(p);
	/* timeout: failed, our cordon lifted (the driver was not touched), the pods named */
	n->drain = GK_UPG_DRAIN_RUNNING;
	n->started_s = NOW - 301;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_FAIL);
	cr_assert_str_eq(step_of(0)->reason, "DrainTimeout");
	cr_assert(step_of(0)->uncordon);
	cr_assert(strstr(step_of(0)->message, "disruption budget"), "%s", step_of(0)->message);
	p = patch_of(0);
	cr_assert(strstr(p, "\"gpukmm.io/upgrade-state\":\"failed\""), "%s", p);
	cr_assert(strstr(p, "\"gpukmm.io/upgrade-reason\":\"drain timed out after 300s: 2 pods left"), "%s", p);
	cr_assert(strstr(p, "\"unschedulable\":null"), "%s", p);
	free(p);
	n->started_s = NOW - 300;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_DRAIN, "300 s is not past 300 s");
	/* a pod that may not be evicted */
	n->drain = GK_UPG_DRAIN_FAILED;
	n->drain_msg = "pod ns/bare is not managed by a controller";
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_FAIL);
	cr_assert_str_eq(step_of(0)->reason, "DrainFailed");
	/* the start stamp edited away: stamped again, no cordon */
	n->drain = GK_UPG_DRAIN_RUNNING;
	n->started_s = 0;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_START);
	cr_assert_not(step_of(0)->cordon);
	/* drain off: straight on */
	n->started_s = NOW;
	in.pol.drain_enable = false;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_UNLOAD);
}

Test(upgrader_decide, drain_disabled_starts_at_unloading)
{
	node(0, "a", "v1");
	in.pol.drain_enable = false;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_START);
	char *p = patch_of(0);
	cr_assert(strstr(p, "\"gpukmm.io/upgrade-state\":\"unloading\""), "%s", p);
	free(p);
}

Test(upgrader_decide, unloading_waits_for_the_report)
{
	gk_upg_node *n = node(0, "a", "v1");
	in_state(n, GK_UPG_S_UNLOADING);
	n->report.can_unload = GPUKMM__TRI_STATE__TRI_NO;
	strcpy(n->report.blocker, "4 SR-IOV VFs active on 0000:03:00.0");
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert_eq(plan.n_problems, 1);
	cr_assert_str_eq(plan.problems[0].reason, "UnloadBlocked");
	cr_assert_str_eq(plan.problems[0].message, "xe cannot be unloaded yet: 4 SR-IOV VFs active on 0000:03:00.0");
	cr_assert(strstr(plan.cond_message, "a (unloading: xe cannot be unloaded yet: 4 SR-IOV VFs"), "%s",
		  plan.cond_message);
	n->report.can_unload = GPUKMM__TRI_STATE__TRI_UNKNOWN;
	decide();
	cr_assert_eq(plan.n_steps, 0, "unknown is not yes");
	n->report.present = false;
	n->report.can_unload = GPUKMM__TRI_STATE__TRI_YES;
	decide();
	cr_assert_eq(plan.n_steps, 0, "no report: fail closed");
	cr_assert(strstr(plan.problems[0].message, "no readable report"), "%s", plan.problems[0].message);
	n->report.present = true;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_MOVE);
	char *p = patch_of(0);
	cr_assert_str_eq(p, "{\"metadata\":{\"resourceVersion\":\"7\",\"labels\":{\"" VK "\":\"v2\","
			    "\"gpukmm.io/upgrade-state\":\"loading\"},\"annotations\":{\"gpukmm.io/upgrade-from\":\"SRC-v1\"}}}");
	free(p);
	/* no target yet: wait */
	in.target = NULL;
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert_str_eq(plan.cond_reason, "WaitingForModule");
}

Test(upgrader_decide, loading_finishes_only_on_the_node_own_word)
{
	gk_upg_node *n = node(0, "a", "v2");
	in_state(n, GK_UPG_S_LOADING);
	n->from_srcversion = "SRC-v1";
	/* KMM not there yet */
	n->kmm_ready = false;
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert_str_eq(plan.problems[0].reason, "WaitingForKMM");
	n->kmm_ready = true;
	n->kmm_version_ready = "v1";
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert_str_eq(plan.problems[0].reason, "WaitingForKMM");
	n->kmm_version_ready = "v2";
	/* KMM says so, the node does not (yet) */
	n->report.present = false;
	decide();
	cr_assert_str_eq(plan.problems[0].reason, "WaitingForReport");
	n->report.present = true;
	n->report.loaded = false;
	decide();
	cr_assert_str_eq(plan.problems[0].reason, "ModuleNotLoaded");
	n->report.loaded = true;
	n->report.oot = false;
	decide();
	cr_assert_str_eq(plan.problems[0].reason, "InTreeModuleLoaded");
	n->report.oot = true;
	/* the old module still reported (a stale report) */
	strcpy(n->report.version, "v1");
	strcpy(n->report.srcversion, "SRC-v1");
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert_str_eq(plan.problems[0].reason, "VersionNotConfirmed");
	cr_assert(strstr(plan.problems[0].message, "the same module as before"), "%s", plan.problems[0].message);
	/* a new build whose own version string is not the policy's: its srcversion changed */
	strcpy(n->report.version, "1.2.3-backport");
	strcpy(n->report.srcversion, "SRC-NEW");
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_FINISH);
	/* ... but without a recorded srcversion only the version string confirms */
	n->from_srcversion = NULL;
	decide();
	cr_assert_eq(plan.n_steps, 0);
	strcpy(n->report.version, "v2");
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_FINISH);
	cr_assert_eq(plan.loading, 1, "counted as loading until the write lands");
}

Test(upgrader_decide, target_moving_while_loading_moves_the_node_again)
{
	gk_upg_node *n = node(0, "a", "v2");
	in_state(n, GK_UPG_S_LOADING);
	n->from_srcversion = "SRC-v1";
	in.target = "v3";
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_MOVE);
	char *p = patch_of(0);
	cr_assert_null(strstr(p, "upgrade-from"), "the first srcversion stays: %s", p);
	free(p);
}

Test(upgrader_decide, failures_halt_the_rollout)
{
	node(0, "a", "v1");
	node(1, "b", "v1");
	gk_upg_node *f = node(2, "c", "v1");
	in_state(f, GK_UPG_S_FAILED);
	f->fail_reason = "drain timed out after 300s: pod ns/db: Cannot evict pod";
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert(plan.halted);
	cr_assert_eq(plan.failed, 1);
	cr_assert_str_eq(plan.cond_reason, "UpgradeHalted");
	cr_assert(strstr(plan.cond_message, "c (UpgradeFailed: drain timed out after 300s"), "%s", plan.cond_message);
	cr_assert(strstr(plan.cond_message, "removing its gpukmm.io/upgrade-state label"), "%s", plan.cond_message);
	/* more room: goes on */
	in.pol.max_unavailable_percent = false;
	in.pol.max_unavailable = 2;
	decide();
	cr_assert_not(plan.halted);
	cr_assert_eq(count_action(GK_UPG_A_START), 1);
	/* retry: the admin removed the failed state */
	in.pol.max_unavailable = 1;
	in_state(f, GK_UPG_S_NONE);
	f->state_raw = NULL;
	decide();
	cr_assert_not(plan.halted);
	cr_assert_eq(count_action(GK_UPG_A_START), 1);
	cr_assert_eq(action_of(0), GK_UPG_A_START);
}

Test(upgrader_decide, failed_without_pending_is_reported)
{
	node(0, "a", "v2");
	gk_upg_node *f = node(1, "b", "v1");
	in_state(f, GK_UPG_S_FAILED);
	decide();
	cr_assert_str_eq(plan.cond_reason, "UpgradeFailed");
	cr_assert_str_eq(plan.cond_status, "False");
}

Test(upgrader_decide, unknown_state_is_left_alone_and_counted)
{
	gk_upg_node *n = node(0, "a", "v1");
	n->state = GK_UPG_S_UNKNOWN;
	n->state_raw = "upgrade-required";
	node(1, "b", "v1");
	in.pol.max_unavailable_percent = false;
	in.pol.max_unavailable = 2;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_NONE);
	cr_assert_eq(plan.failed, 1);
	cr_assert_str_eq(plan.problems[0].reason, "UnknownState");
	cr_assert(strstr(plan.problems[0].message, "\"upgrade-required\""), "%s", plan.problems[0].message);
	cr_assert_eq(action_of(1), GK_UPG_A_START);
}

Test(upgrader_decide, skip)
{
	node(0, "a", "v1")->skip = true;
	node(1, "b", "v2");
	decide();
	cr_assert_eq(plan.n_steps, 0);
	cr_assert_eq(plan.skipped, 1);
	cr_assert_str_eq(plan.cond_status, "True");
	cr_assert(strstr(plan.cond_message, "1 skipped"), "%s", plan.cond_message);
	/* skip while draining / unloading: released, our cordon lifted */
	gk_upg_node *n = &nodes[0];
	in_state(n, GK_UPG_S_DRAINING);
	n->unschedulable = n->cordoned_by_us = true;
	n->started_s = NOW;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_RELEASE);
	cr_assert(step_of(0)->uncordon);
	char *p = patch_of(0);
	cr_assert(strstr(p, "\"gpukmm.io/upgrade-state\":null"), "%s", p);
	cr_assert(strstr(p, "\"unschedulable\":null"), "%s", p);
	free(p);
	in_state(n, GK_UPG_S_UNLOADING);
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_RELEASE);
	/* loading: too late, it finishes */
	in_state(n, GK_UPG_S_LOADING);
	n->version = n->kmm_version_ready = "v2";
	strcpy(n->report.version, "v2");
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_FINISH);
	/* no first-install label either */
	node(2, "c", NULL)->skip = true;
	decide();
	cr_assert_eq(action_of(2), GK_UPG_A_NONE);
}

Test(upgrader_decide, release_when_the_policy_stops_asking)
{
	gk_upg_node *d = node(0, "a", "v1");
	in_state(d, GK_UPG_S_DRAINING);
	d->unschedulable = d->cordoned_by_us = true;
	gk_upg_node *l = node(1, "b", "v2");
	in_state(l, GK_UPG_S_LOADING);
	l->unschedulable = true; /* the admin's */
	node(2, "c", "v1");
	node(3, "d", NULL);
	in.release = true;
	in.target = NULL;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_RELEASE);
	cr_assert(step_of(0)->uncordon);
	cr_assert_eq(action_of(1), GK_UPG_A_RELEASE);
	cr_assert_not(step_of(1)->uncordon);
	cr_assert_eq(action_of(2), GK_UPG_A_NONE);
	cr_assert_eq(action_of(3), GK_UPG_A_NONE);
}

Test(upgrader_decide, hold_without_target)
{
	gk_upg_node *d = node(0, "a", "v1");
	in_state(d, GK_UPG_S_DRAINING);
	d->started_s = NOW;
	d->drain = GK_UPG_DRAIN_DONE;
	node(1, "b", "v1");
	node(2, "c", NULL);
	in.target = NULL;
	decide();
	cr_assert_eq(action_of(0), GK_UPG_A_UNLOAD, "draining goes on: it touches no driver");
	cr_assert_eq(action_of(1), GK_UPG_A_NONE);
	cr_assert_eq(action_of(2), GK_UPG_A_NONE);
	cr_assert_str_eq(plan.cond_reason, "WaitingForModule");
	cr_assert(strstr(plan.cond_message, "v2"), "%s", plan.cond_message);
}

Test(upgrader_decide, a_pending_write_holds_its_slot)
{
	gk_upg_node *a = node(0, "a", "v1");
	in_state(a, GK_UPG_S_DRAINING); /* as the START being written says */
	a->write_pending = true;
	node(1, "b", "v1");
	decide();
	cr_assert_eq(plan.n_steps, 0);
	/* a pending write of a node not yet shown as started: the pass is not run by
	 * the service while any write of the policy is in flight (main.c) */
}

Test(upgrader_decide, status_upgrade)
{
	node(0, "a", "v2");
	gk_upg_node *b = node(1, "b", "v1");
	in_state(b, GK_UPG_S_UNLOADING);
	b->report.can_unload = GPUKMM__TRI_STATE__TRI_NO;
	strcpy(b->report.blocker, "xe is in use (refcount 1)");
	node(2, "c", "v1");
	decide();
	Gpukmm__UpgradeStatus *st = gk_upg_status(&in, &plan);
	cr_assert_not_null(st);
	cr_assert_str_eq(st->target_version, "v2");
	cr_assert_eq(st->nodes, 3);
	cr_assert_eq(st->up_to_date, 1);
	cr_assert_eq(st->unloading, 1);
	cr_assert_eq(st->pending, 1);
	cr_assert_eq(st->max_unavailable, 1);
	cr_assert_eq(st->unavailable, 1);
	cr_assert_eq(st->n_problems, 1);
	cr_assert_str_eq(st->problems[0]->node, "b");
	cr_assert_str_eq(st->problems[0]->state, "unloading");
	cr_assert_str_eq(st->problems[0]->reason, "UnloadBlocked");
	gk_upg_status_free(st);
}

Test(upgrader_decide, parse_time)
{
	cr_assert_eq(gk_upg_parse_time("1970-01-12T13:46:40Z"), NOW);
	cr_assert_eq(gk_upg_parse_time("yesterday"), 0);
	cr_assert_eq(gk_upg_parse_time("1970-01-12T13:46:40Zjunk"), 0);
	cr_assert_eq(gk_upg_parse_time(NULL), 0);
}

/* ---- invariants over random views ---------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static gk_upg_state after(const gk_upg_node *n, int action)
{
	switch (action) {
	case GK_UPG_A_START: return in.pol.drain_enable ? GK_UPG_S_DRAINING : GK_UPG_S_UNLOADING;
	case GK_UPG_A_UNLOAD: return GK_UPG_S_UNLOADING;
	case GK_UPG_A_MOVE: return GK_UPG_S_LOADING;
	case GK_UPG_A_FINISH: return GK_UPG_S_DONE;
	case GK_UPG_A_FAIL: return GK_UPG_S_FAILED;
	case GK_UPG_A_RELEASE: return GK_UPG_S_NONE;
	default: return n->state;
	}
}

static bool active(gk_upg_state s)
{
	return s == GK_UPG_S_DRAINING || s == GK_UPG_S_UNLOADING || s == GK_UPG_S_LOADING;
}

Test(upgrader_decide, invariants_over_random_views)
{
	static const char *names[] = { "n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7" };
	static const char *versions[] = { NULL, "v1", "v2" };
	for (int iter = 0; iter < 20000; iter++) {
		setup();
		size_t n = 1 + rnd(8);
		in.pol.max_parallel = 1 + (int)rnd(3);
		in.pol.max_unavailable_percent = rnd(2);
		in.pol.max_unavailable = in.pol.max_unavailable_percent ? 1 + (int)rnd(100) : 1 + (int)rnd(4);
		in.pol.drain_enable = rnd(4) != 0;
		in.pol.auto_upgrade = rnd(5) != 0;
		in.confirmed = rnd(3) != 0;
		in.release = rnd(10) == 0;
		in.target = in.release || rnd(10) == 0 ? NULL : "v2";
		int active_before = 0, unavailable_before = 0;
		for (size_t i = 0; i < n; i++) {
			gk_upg_node *x = node(i, names[i], versions[rnd(3)]);
			x->state = (gk_upg_state)rnd(7);
			x->state_raw = x->state ? gk_upg_state_name(x->state) : NULL;
			x->ready = rnd(6) != 0;
			x->unschedulable = rnd(3) == 0;
			x->cordoned_by_us = x->unschedulable && rnd(2);
			x->skip = rnd(6) == 0;
			x->kmm_ready = rnd(4) != 0;
			x->started_s = rnd(5) ? NOW - (int64_t)rnd(600) : 0;
			x->drain = (int)rnd(4);
			x->report.present = rnd(5) != 0;
			x->report.can_unload = (int)rnd(3);
			x->write_pending = rnd(12) == 0;
			active_before += active(x->state);
		}
		for (size_t i = 0; i < n; i++) {
			const gk_upg_node *x = &nodes[i];
			unavailable_before += active(x->state) || x->state == GK_UPG_S_FAILED ||
					      x->state == GK_UPG_S_UNKNOWN || !x->ready || (x->version && !x->kmm_ready);
		}
		decide();
		int active_after = 0, picks = 0;
		bool seen[16] = { 0 };
		for (size_t s = 0; s < plan.n_steps; s++) {
			const gk_upg_step *st = &plan.steps[s];
			const gk_upg_node *x = &nodes[st->node];
			cr_assert_not(seen[st->node], "one step per node");
			seen[st->node] = true;
			cr_assert_not(x->write_pending, "no step while a write is in flight");
			switch (st->action) {
			case GK_UPG_A_START:
				if (x->state == GK_UPG_S_DRAINING)
					break; /* the restamp */
				picks++;
				cr_assert(in.confirmed, "picks only after a fresh read");
				cr_assert(in.target && !in.release);
				cr_assert(x->state == GK_UPG_S_NONE || x->state == GK_UPG_S_DONE);
				cr_assert(x->version && strcmp(x->version, in.target));
				cr_assert(!x->skip && x->ready && in.pol.auto_upgrade);
				cr_assert_eq(st->cordon, !x->unschedulable, "cordon only what is not cordoned");
				break;
			case GK_UPG_A_LABEL:
				cr_assert(in.target && !x->version && !x->skip && in.pol.auto_upgrade);
				break;
			case GK_UPG_A_MOVE:
				cr_assert(in.target);
				cr_assert((x->state == GK_UPG_S_UNLOADING && x->report.present &&
					   x->report.can_unload == GPUKMM__TRI_STATE__TRI_YES) ||
					  (x->state == GK_UPG_S_LOADING && !(x->version && !strcmp(x->version, in.target))),
					  "the driver moves only once the node can unload it");
				break;
			case GK_UPG_A_FINISH:
				cr_assert_eq(x->state, GK_UPG_S_LOADING);
				cr_assert(x->kmm_ready && x->report.present);
				break;
			case GK_UPG_A_UNLOAD:
				cr_assert_eq(x->state, GK_UPG_S_DRAINING);
				cr_assert(x->drain == GK_UPG_DRAIN_DONE || !in.pol.drain_enable);
				break;
			case GK_UPG_A_FAIL:
				cr_assert_eq(x->state, GK_UPG_S_DRAINING, "only a drain fails: the driver is untouched");
				break;
			default:
				break;
			}
			if (st->uncordon)
				cr_assert(x->cordoned_by_us && x->unschedulable, "lift only our own cordon");
		}
		for (size_t i = 0; i < n; i++)
			active_after += active(after(&nodes[i], action_of(i)));
		if (picks)
			cr_assert_leq(active_after, in.pol.max_parallel, "picks stay within maxParallel (iter %d)", iter);
		cr_assert_leq(active_after, active_before > in.pol.max_parallel ? active_before : in.pol.max_parallel,
			      "never more nodes in progress than maxParallel (iter %d)", iter);
		if (picks)
			cr_assert_leq((int)plan.unavailable,
				      unavailable_before > plan.max_unavailable ? unavailable_before : plan.max_unavailable,
				      "picks within maxUnavailable (iter %d)", iter);
		if (plan.halted)
			cr_assert_eq(picks, 0);
	}
	gk_upg_plan_free(&plan);
}
