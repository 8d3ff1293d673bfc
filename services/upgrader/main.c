/* gpukmm-upgrader — rolls a versioned driver out node by node (ARCHITECTURE.md
 * §1, §2, §5 "Driver upgrades"): the only service that cordons nodes and
 * evicts pods, and the only writer of KMM's version-module label, of
 * gpukmm.io/upgrade-state and of the gpukmm.io/upgrade-* annotations.
 *
 * The shared skeleton (lib/svc/ctl.c): the watcher bus (clusterpolicy, module, node,
 * resourceclaim, discovery, leadership) feeds the view (view.c); an event only
 * marks policies dirty; the bounded work queue runs passes (pass.c: decide.c)
 * whose Node patches run asynchronously on a lib/kube mux (kops.c), next to
 * the drainer's lists and evictions (drain.c); only the leader writes, evicts
 * and reports (StatusReport{component: "upgrader", upgrade, Upgraded}). A
 * leadership change or a view rebuilt after a bus gap stops every drain and
 * asks for a fresh read of the in-progress states before anything new is
 * picked; everything else resumes from what the API holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "events.pb-c.h"
#include "gpukmm/ctl.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "status.pb-c.h"

#include "drain.h"
#include "kops.h"
#include "pass.h"
#include "view.h"

#define PASSES_PER_TICK 16

static const char *const TOPICS[] = { "clusterpolicy", "module", "node", "resourceclaim", "discovery", "leadership" };
#define N_TOPICS (sizeof(TOPICS) / sizeof(TOPICS[0]))

/* node upgrade durations (drain start → confirmed on the new version): 10 s .. 2 h */
static const double NODE_BUCKETS[] = { 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200 };

typedef struct up {
	gk_ctl c;                /* flags, the bus, the queue, statusd (lib/svc/ctl.c) */
	gk_upv *view;
	gk_upk *kops;
	gk_upd *drain;
	gk_upp_ops ops;
	gk_upp_stats pst;
	double qps;
	bool led;
	gk_metric *m_steps, *m_node_seconds;
} up;

/* ---- ops on the real writer and drainer ----------------------------------------------- */

static int op_patch(void *user, const char *node, const char *body, bool warning, const char *reason,
		    const char *message, const char **last_err)
{
	up *u = user;
	gk_upk_event ev = { .warning = warning, .reason = reason, .message = message };
	return gk_upk_patch(u->kops, node, body, &ev, last_err);
}

static bool op_busy(void *user, const char *node)
{
	return gk_upk_busy(((up *)user)->kops, node);
}

static void op_drain(void *user, const char *node, const gk_policy_upgrade *pol)
{
	gk_upd_drain(((up *)user)->drain, node, pol);
}

static int op_drain_status(void *user, const char *node, const char **msg)
{
	return gk_upd_status(((up *)user)->drain, node, msg);
}

static void op_drain_stop(void *user, const char *node)
{
	gk_upd_stop(((up *)user)->drain, node);
}

static bool op_confirmed(void *user)
{
	return gk_upk_confirmed(((up *)user)->kops);
}

static bool gpu_claim(void *user, const char *ns, const char *name)
{
	return gk_upv_gpu_claim(user, ns, name);
}

static void drain_changed(void *user)
{
	gk_upv_touch_all(((up *)user)->view); /* marks only: passes run from the queue's timer */
}

/* leadership lost, or a view rebuilt after a gap: stop evicting, re-read before picking */
static void step_down(up *u, const char *why)
{
	if (u->led)
		GK_INFO("%s: drains stopped, the next picks wait for a fresh read", why);
	gk_upd_stop_all(u->drain);
	gk_upk_unconfirm(u->kops);
	u->led = false;
}

/* ---- passes -------------------------------------------------------------------------------- */

static void report(up *u, const char *policy, const gk_upp_result *res)
{
	Gpukmm__StatusReport r;
	gpukmm__status_report__init(&r);
	r.component = "upgrader";
	r.policy = (char *)policy;
	/* the passes are synchronous: the term is the one the pass decided under;
	 * statusd writes only from reports of its own term */
	r.has_leader_term = 1;
	r.leader_term = gk_upv_term(u->view);
	if (res->deleted) {
		r.has_deleted = r.deleted = 1;
	} else {
		r.has_generation = res->generation != 0;
		r.generation = res->generation;
		r.upgrade = res->upgrade;
	}
	Gpukmm__Condition *c[1] = { res->upgraded };
	if (!res->deleted && res->upgraded) {
		r.conditions = c;
		r.n_conditions = 1;
	}
	gk_reporter_send(&u->c.rep, &r);
}

static void run_pass(void *user, const char *key)
{
	up *u = user;
	uint64_t t0 = gk_metric_now_us();
	gk_upp_result res;
	gk_err e = { 0 };
	u->pst.n_finished = 0;
	uint64_t steps_before[GK_UPG_A_RELEASE + 1];
	memcpy(steps_before, u->pst.steps, sizeof(steps_before));
	if (gk_upp_pass(u->view, key, &u->ops, (int64_t)time(NULL), &res, &u->pst, &e) != GK_OK)
		GK_WARN("ClusterPolicy %s: %s", key, e.msg);
	if (res.idle) {
		if (u->led)
			step_down(u, "not the leader any more");
	} else {
		u->led = true;
		/* a write in flight runs the pass again when it ends, which reports */
		if (!res.pending)
			report(u, key, &res);
	}
	for (int a = 0; a <= GK_UPG_A_RELEASE; a++)
		if (u->pst.steps[a] != steps_before[a])
			gk_metric_add(u->m_steps, (double)(u->pst.steps[a] - steps_before[a]), GK_LV(gk_upg_action_name(a)));
	for (size_t i = 0; i < u->pst.n_finished; i++)
		gk_metric_observe(u->m_node_seconds, (double)u->pst.finished_seconds[i], NULL);
	gk_ctl_requeue(&u->c, key, res.failed, res.requeue_ms);
	gk_metric_reconcile(t0, res.failed ? "error" : "success");
	gk_upp_result_free(&res);
}

/* ---- the watcher view ------------------------------------------------------------------------ */

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	up *u = user;
	/* events may have been lost: whatever we did not see, we do not pick on */
	step_down(u, "view rebuilt from a snapshot");
	return gk_upv_load_snapshot(u->view, s, err);
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	up *u = user;
	uint64_t term = gk_upv_term(u->view);
	int rc = gk_upv_apply(u->view, topic, ev, err);
	/* lost, or lost and won again (a new term): what we read before may be stale */
	if (ev && ev->object_case == GPUKMM__EVENT__OBJECT_LEADERSHIP &&
	    (!gk_upv_leader(u->view) || gk_upv_term(u->view) != term))
		step_down(u, gk_upv_leader(u->view) ? "a new leadership term" : "leadership lost");
	return rc;
}

static void view_rebuilt(void *user)
{
	up *u = user;
	gk_upv_state vs;
	gk_upv_state_get(u->view, &vs);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu modules, %zu nodes, leader=%d", vs.policies, vs.modules,
		vs.nodes, gk_upv_leader(u->view));
}

int main(int argc, char **argv)
{
	static up U;
	up *u = &U;
	gk_err err;
	const gk_svc_opt extra[] = { GK_CTL_OPT_KUBE_QPS(&u->qps), { 0 } };
	const gk_ctl_cfg cfg = { .name = "upgrader", .topics = TOPICS, .n_topics = N_TOPICS, .user = u,
				 .reset = view_reset, .apply = view_apply, .rebuilt = view_rebuilt, .pass = run_pass,
				 .per_tick = PASSES_PER_TICK };
	int rc = gk_ctl_init(&u->c, &cfg, argc, argv, extra, &err);
	if (rc)
		return rc;
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	if (gk_upv_new(&u->view, u->c.svc.ns, 0, gk_ctl_dirty, &u->c, &err))
		goto fail;
	if (gk_upk_new(&u->kops, u->c.svc.kubeconfig, u->qps, u->c.svc.loop, u->view, host, &err))
		goto fail;
	if (gk_upd_new(&u->drain, gk_upk_mux(u->kops), u->c.svc.loop, gpu_claim, u->view, drain_changed, u, &err))
		goto fail;
	u->ops = (gk_upp_ops){ .user = u, .patch = op_patch, .busy = op_busy, .drain = op_drain,
			       .drain_status = op_drain_status, .drain_stop = op_drain_stop, .confirmed = op_confirmed };
	if (gk_ctl_start(&u->c, &err))
		goto fail;

	const gk_upk_stats *ks = gk_upk_stats_get(u->kops);
	const gk_upd_stats *ds = gk_upd_stats_get(u->drain);
	u->m_steps = gk_metric_counter("gpukmm_upgrader_node_steps_total",
				       "Node steps of rolling driver upgrades started (label, start, unload, move, finish, "
				       "fail, release).",
				       "step");
	u->m_node_seconds = gk_metric_histogram("gpukmm_upgrader_node_upgrade_seconds",
						"Time a node took from the start of its drain to the new driver "
						"confirmed by its own report.",
						NULL, NODE_BUCKETS, sizeof(NODE_BUCKETS) / sizeof(NODE_BUCKETS[0]));
	gk_metric_counter_var("gpukmm_upgrader_passes_total", "Passes.", &u->pst.passes);
	gk_metric_counter_var("gpukmm_upgrader_failed_passes_total", "Passes that failed (retried with backoff).",
			      &u->pst.failures);
	gk_metric_counter_var("gpukmm_upgrader_node_patches_total", "Node patches sent.", &ks->patches);
	gk_metric_counter_var("gpukmm_upgrader_conflicts_total", "409 conflicts (re-read and decided again).",
			      &ks->conflicts);
	gk_metric_counter_var("gpukmm_upgrader_write_errors_total", "Failed Node patches (retried with backoff).",
			      &ks->errors);
	gk_metric_counter_var("gpukmm_upgrader_events_total", "Events recorded on Nodes.", &ks->events);
	gk_metric_counter_var("gpukmm_upgrader_confirm_reads_total",
			      "Fresh reads of the nodes in an upgrade step (before picks, once per leadership).",
			      &ks->confirm_lists);
	gk_metric_gauge_var("gpukmm_upgrader_writes_inflight", "Nodes with an API call in flight.", &ks->inflight);
	gk_metric_counter_var("gpukmm_upgrader_pod_lists_total", "Pod lists of draining nodes.", &ds->lists);
	gk_metric_counter_var("gpukmm_upgrader_evictions_total", "Evictions asked for.", &ds->evictions);
	gk_metric_counter_var("gpukmm_upgrader_evicted_total", "Evictions the API server accepted.", &ds->evicted);
	gk_metric_counter_var("gpukmm_upgrader_eviction_budget_refusals_total",
			      "Evictions a PodDisruptionBudget refused (429; tried again).", &ds->budget_refusals);
	gk_metric_counter_var("gpukmm_upgrader_eviction_errors_total", "Evictions that failed otherwise.",
			      &ds->eviction_errors);
	gk_metric_gauge_var("gpukmm_upgrader_draining_nodes", "Nodes being drained by this process.", &ds->draining);
	GK_INFO("started: namespace %s", u->c.svc.ns);
	rc = gk_ctl_run(&u->c);
	goto out;
fail:
	GK_ERROR("%s", err.msg);
	rc = 1;
out:
	gk_ctl_stop(&u->c);
	gk_upd_free(u->drain);
	gk_upk_free(u->kops);
	gk_upv_free(u->view);
	gk_ctl_fini(&u->c);
	return rc;
}
