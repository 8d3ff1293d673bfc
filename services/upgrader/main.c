/* gpukmm-upgrader — rolls a versioned driver out node by node (ARCHITECTURE.md
 * §1, §2, §5 "Driver upgrades"): the only service that cordons nodes and
 * evicts pods, and the only writer of KMM's version-module label, of
 * gpukmm.io/upgrade-state and of the gpukmm.io/upgrade-* annotations.
 *
 * The shared skeleton: the watcher bus (clusterpolicy, module, node,
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
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "events.pb-c.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/loop.h"
#include "gpukmm/metrics.h"
#include "gpukmm/reporter.h"
#include "gpukmm/svc.h"
#include "gpukmm/workqueue.h"
#include "gpukmm/wqsched.h"
#include "gpukmm/wsub.h"
#include "status.pb-c.h"

#include "drain.h"
#include "kops.h"
#include "pass.h"
#include "view.h"

#define PASSES_PER_TICK 16
#define QUEUE_MAX_KEYS 1024

static const char *const TOPICS[] = { "clusterpolicy", "module", "node", "resourceclaim", "discovery", "leadership" };
#define N_TOPICS (sizeof(TOPICS) / sizeof(TOPICS[0]))

/* node upgrade durations (drain start → confirmed on the new version): 10 s .. 2 h */
static const double NODE_BUCKETS[] = { 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200 };

typedef struct up {
	gk_svc svc;
	gk_wsub *bus;
	gk_upv *view;
	gk_wq *q;
	gk_wq_sched qs;
	gk_upk *kops;
	gk_upd *drain;
	gk_upp_ops ops;
	gk_upp_stats pst;
	gk_reporter rep;
	double qps;
	bool led;
	uint64_t queue_refused;
	gk_metric *m_steps, *m_node_seconds;
} up;

static void on_dirty(void *user, const char *policy)
{
	up *u = user;
	gk_err e;
	if (gk_wq_add(u->q, policy, &e) != GK_OK) {
		u->queue_refused++;
		GK_WARN("queue: %s", e.msg);
	}
	gk_wq_sched_kick(&u->qs);
}

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
	gk_reporter_send(&u->rep, &r);
}

static void run_pass(up *u, const char *key)
{
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
	int64_t now = gk_mono_ms();
	if (res.failed) {
		int64_t d = 0;
		gk_wq_add_rate_limited(u->q, key, now, &d, NULL);
	} else {
		gk_wq_forget(u->q, key);
		if (res.requeue_ms)
			gk_wq_add_after(u->q, key, res.requeue_ms, now, NULL);
	}
	gk_metric_reconcile(t0, res.failed ? "error" : "success");
	gk_upp_result_free(&res);
}

static bool may_pass(void *user)
{
	up *u = user;
	return gk_wsub_synced(u->bus) && !u->svc.stopping;
}

static void on_key(void *user, const char *key)
{
	up *u = user;
	run_pass(u, key);
	gk_wq_done(u->q, key);
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

static void view_resynced(void *user, bool first)
{
	up *u = user;
	gk_upv_state vs;
	gk_upv_state_get(u->view, &vs);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu modules, %zu nodes, leader=%d", vs.policies, vs.modules,
		vs.nodes, gk_upv_leader(u->view));
	if (first)
		gk_svc_ready(&u->svc);
	gk_wq_sched_kick(&u->qs);
}

static void on_client_fd(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_client_dispatch(user);
}

static int opt_qps(void *user, const char *arg)
{
	char *end;
	double v = strtod(arg, &end);
	if (!*arg || *end || v > 100000)
		return -1;
	((up *)user)->qps = v;
	return 0;
}

int main(int argc, char **argv)
{
	static up U;
	up *u = &U;
	gk_err err;
	const gk_svc_opt extra[] = {
		{ "kube-qps", 1, "client-side API request limit per second (default 50, burst 100; < 0 = none)", opt_qps,
		  u },
		{ 0 },
	};
	int rc = gk_svc_init(&u->svc, "upgrader", argc, argv, extra, &err);
	if (rc)
		return rc;
	if (!u->svc.addr.events || !u->svc.addr.watcher) {
		GK_ERROR("--events and --watcher (or --runtime-dir) are required");
		gk_svc_fini(&u->svc);
		return 2;
	}
	rc = 1;
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	gk_wq_opts qo = { .max_keys = QUEUE_MAX_KEYS };
	if (gk_wq_new(&u->q, &qo, &err))
		goto fail;
	const gk_wq_sched_opts so = { .per_tick = PASSES_PER_TICK, .may = may_pass, .run = on_key, .user = u };
	gk_wq_sched_init(&u->qs, u->svc.loop, u->q, &so);
	if (gk_upv_new(&u->view, u->svc.ns, 0, on_dirty, u, &err))
		goto fail;
	if (gk_upk_new(&u->kops, u->svc.kubeconfig, u->qps, u->svc.loop, u->view, host, &err))
		goto fail;
	if (gk_upd_new(&u->drain, gk_upk_mux(u->kops), u->svc.loop, gpu_claim, u->view, drain_changed, u, &err))
		goto fail;
	u->ops = (gk_upp_ops){ .user = u, .patch = op_patch, .busy = op_busy, .drain = op_drain,
			       .drain_status = op_drain_status, .drain_stop = op_drain_stop, .confirmed = op_confirmed };
	u->rep = (gk_reporter){ .q = u->q, .qs = &u->qs, .stopping = &u->svc.stopping };
	if (u->svc.addr.statusd && gk_ipc_client_open(&u->rep.statusd, u->svc.addr.statusd, NULL, &err))
		goto fail;
	if (u->rep.statusd && gk_loop_add_fd(u->svc.loop, gk_ipc_client_fd(u->rep.statusd), EPOLLIN, on_client_fd,
					     u->rep.statusd, &err))
		goto fail;
	const gk_wsub_opts wo = { .topics = TOPICS, .n_topics = N_TOPICS };
	const gk_wsub_view wv = { .user = u, .reset = view_reset, .apply = view_apply, .resynced = view_resynced };
	if (gk_wsub_open(&u->bus, u->svc.loop, u->svc.addr.events, u->svc.addr.watcher, &wo, &wv, &err))
		goto fail;

	const gk_wsub_stats *bs = gk_wsub_stats_get(u->bus);
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
	gk_metric_counter_var("gpukmm_upgrader_snapshots_total", "View rebuilds from watcher snapshots.", &bs->snapshots);
	gk_metric_counter_var("gpukmm_upgrader_bus_gaps_total", "Bus sequence gaps.", &bs->gaps);
	gk_metric_counter_var("gpukmm_upgrader_reports_ok_total", "Status reports accepted.", &u->rep.ok);
	gk_metric_counter_var("gpukmm_upgrader_reports_failed_total", "Status reports failed.", &u->rep.failed);
	gk_metric_gauge_var("gpukmm_upgrader_queue_depth", "Keys ready or waiting.", &u->qs.depth);
	gk_metric_counter_var("gpukmm_upgrader_queue_refused_total", "Keys refused by the bounded queue.",
			      &u->queue_refused);
	GK_INFO("started: namespace %s", u->svc.ns);
	rc = gk_loop_run(u->svc.loop);
	GK_INFO("stopping");
	goto out;
fail:
	GK_ERROR("%s", err.msg);
	rc = 1;
out:
	u->svc.stopping = 1;
	gk_wsub_close(u->bus);
	if (u->rep.statusd) {
		gk_loop_del_fd(u->svc.loop, gk_ipc_client_fd(u->rep.statusd));
		gk_ipc_client_close(u->rep.statusd);
	}
	gk_upd_free(u->drain);
	gk_upk_free(u->kops);
	gk_upv_free(u->view);
	gk_wq_free(u->q);
	gk_svc_fini(&u->svc);
	gk_ipc_fini();
	return rc;
}
