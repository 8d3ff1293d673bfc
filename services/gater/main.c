/* gpukmm-gater — the DaemonSet gater (DESIGN.md §1, §2; reference
 * gpu-base-operator §3).
 *
 * One event loop: the watcher bus (clusterpolicy, daemonset, discovery,
 * leadership) feeds the view; every event only marks ClusterPolicy keys dirty;
 * the bounded work queue runs passes (pass.c: decide.c; the DaemonSet merge
 * patches run asynchronously on a lib/kube mux, kops.c, and mark their
 * policies dirty again when they end); after each pass with no write in
 * flight a StatusReport{component: "gater"} goes to statusd. Only the leader writes or reports. On start and
 * after any bus gap the view is rebuilt from a Watcher.Snapshot (events that
 * arrive while it is in flight are buffered and replayed when newer). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "events.pb-c.h"
#include "gpukmm/wsub.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/loop.h"
#include "gpukmm/metrics.h"
#include "gpukmm/policy.h"
#include "gpukmm/reporter.h"
#include "gpukmm/svc.h"
#include "gpukmm/workqueue.h"
#include "gpukmm/wqsched.h"
#include "rpc.pb-c.h"
#include "status.pb-c.h"

#include "kops.h"
#include "pass.h"
#include "view.h"

#define HOLD_RETRY_MS 5000
#define PASSES_PER_TICK 32
#define QUEUE_MAX_KEYS 1024

static const char *const TOPICS[] = { "clusterpolicy", "daemonset", "discovery", "leadership" };
#define N_TOPICS (sizeof(TOPICS) / sizeof(TOPICS[0]))

typedef struct gt {
	gk_svc svc;
	gk_wsub *bus;
	gk_reporter rep;          /* statusd reports (rep.statusd NULL: none) */
	gk_gtv *view;
	gk_wq *q;
	gk_gater_kops *kops;
	gk_gater_ops ops;
	double qps;

	gk_wq_sched qs;          /* the queue on the loop: passes run from its timer */

	gk_gater_stats pst;
	uint64_t queue_refused;
} gt;

/* ---- dirty keys → queue ------------------------------------------------------ */

static void on_dirty(void *user, const char *policy)
{
	gt *g = user;
	gk_err e;
	if (gk_wq_add(g->q, policy, &e) != GK_OK) {
		g->queue_refused++;
		GK_WARN("queue: %s", e.msg);
	}
	gk_wq_sched_kick(&g->qs); /* a write that ended marks outside of any bus event */
}

/* ---- statusd reports -------------------------------------------------------- */

static void send_report(gt *g, const char *policy, const gk_gater_result *res)
{
	Gpukmm__StatusReport r;
	gpukmm__status_report__init(&r);
	r.component = "gater";
	r.policy = (char *)policy;
	/* the passes are synchronous: the term is the one the pass decided under;
	 * statusd writes only from reports of its own term */
	gk_gtv_state vs;
	gk_gtv_state_get(g->view, &vs);
	r.has_leader_term = 1;
	r.leader_term = vs.term;
	if (res->deleted) {
		r.has_deleted = 1;
		r.deleted = 1;
	} else {
		r.has_generation = res->generation != 0;
		r.generation = res->generation;
		/* the operand counts are gpukmm-opmgr's to report */
		r.gated_daemonsets = res->gated;
		r.n_gated_daemonsets = res->n_gated;
		r.errors = (char **)res->errors;
		r.n_errors = res->n_errors;
	}
	gk_reporter_send(&g->rep, &r);
}

/* ---- passes ----------------------------------------------------------------- */

static void run_pass(gt *g, const char *key)
{
	uint64_t t0 = gk_metric_now_us();
	gk_gater_result res;
	gk_err e;
	if (gk_gater_pass(g->view, key, &g->ops, &res, &g->pst, &e) != GK_OK)
		GK_WARN("ClusterPolicy %s: %s", key, e.msg);
	if (res.held)
		GK_INFO("ClusterPolicy %s: fail closed, nothing written: %s", key, res.hold);
	if (res.idle) {
		GK_DEBUG("ClusterPolicy %s: not the leader, nothing written", key);
	} else if (res.held && !gk_gtv_policy(g->view, key)) {
		/* not confirmed gone: no report (a report would say deleted) */
	} else if (res.pending) {
		/* each write's end runs the pass again, which reports */
		GK_DEBUG("ClusterPolicy %s: %zu DaemonSet write(s) in flight, report after them", key, res.pending);
	} else {
		for (size_t i = 0; i < res.n_errors; i++)
			GK_WARN("ClusterPolicy %s: %s", key, res.errors[i]);
		send_report(g, key, &res);
	}
	int64_t now = gk_mono_ms();
	if (res.failed) {
		int64_t d = 0;
		gk_wq_add_rate_limited(g->q, key, now, &d, NULL);
		GK_DEBUG("ClusterPolicy %s: pass incomplete, again in %lld ms", key, (long long)d);
	} else {
		gk_wq_forget(g->q, key);
		/* the watcher's state changes mark every policy dirty; this is the backstop */
		if (res.held)
			gk_wq_add_after(g->q, key, HOLD_RETRY_MS, now, NULL);
	}
	gk_metric_reconcile(t0, res.failed ? "error" : "success");
	gk_gater_result_free(&res);
}

/* Passes wait for a consistent view (resynced() kicks the queue again) and
 * stop with the service. */
static bool may_pass(void *user)
{
	gt *g = user;
	return gk_wsub_synced(g->bus) && !g->svc.stopping;
}

static void on_key(void *user, const char *key)
{
	gt *g = user;
	run_pass(g, key);
	gk_wq_done(g->q, key);
}

/* ---- the watcher view (lib/wsub) ------------------------------------------------- */

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	return gk_gtv_load_snapshot(((gt *)user)->view, s, err);
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	return gk_gtv_apply(((gt *)user)->view, topic, ev, err); /* marks: on_dirty kicks the queue */
}

static void view_resynced(void *user, bool first)
{
	gt *g = user;
	gk_gtv_state vs;
	gk_gtv_state_get(g->view, &vs);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu daemonsets, kmm=%d leader=%d", vs.policies,
		vs.daemonsets, vs.kmm, vs.leader);
	if (first)
		gk_svc_ready(&g->svc);
	gk_wq_sched_kick(&g->qs);
}

static void on_client_fd(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_client_dispatch(user);
}

/* ---- main ----------------------------------------------------------------------- */

static int opt_qps(void *user, const char *arg)
{
	char *end;
	double v = strtod(arg, &end);
	if (!*arg || *end || v > 100000)
		return -1;
	((gt *)user)->qps = v;
	return 0;
}

int main(int argc, char **argv)
{
	static gt G;
	gt *g = &G;
	gk_err err;
	const gk_svc_opt extra[] = {
		{ "kube-qps", 1, "client-side API request limit per second (default 50, burst 100; < 0 = none)",
		  opt_qps, g },
		{ 0 },
	};
	int rc = gk_svc_init(&g->svc, "gater", argc, argv, extra, &err);
	if (rc)
		return rc;
	if (!g->svc.addr.events || !g->svc.addr.watcher) {
		GK_ERROR("--events and --watcher (or --runtime-dir) are required");
		gk_svc_fini(&g->svc);
		return 2;
	}
	rc = 1;
	gk_wq_opts qo = { .max_keys = QUEUE_MAX_KEYS };
	if (gk_wq_new(&g->q, &qo, &err))
		goto fail;
	const gk_wq_sched_opts so = { .per_tick = PASSES_PER_TICK, .may = may_pass, .run = on_key, .user = g };
	gk_wq_sched_init(&g->qs, g->svc.loop, g->q, &so);
	gk_gtv_opts vo = { .ns = g->svc.ns };
	if (gk_gtv_new(&g->view, &vo, on_dirty, g, &err))
		goto fail;
	if (gk_gater_kops_new(&g->kops, g->svc.kubeconfig, g->qps, g->svc.loop, g->view, &err))
		goto fail;
	gk_gater_kops_ops(g->kops, &g->ops);

	g->rep = (gk_reporter){ .q = g->q, .qs = &g->qs, .stopping = &g->svc.stopping };
	if (g->svc.addr.statusd && gk_ipc_client_open(&g->rep.statusd, g->svc.addr.statusd, NULL, &err))
		goto fail;
	if (g->rep.statusd && gk_loop_add_fd(g->svc.loop, gk_ipc_client_fd(g->rep.statusd), EPOLLIN, on_client_fd,
					     g->rep.statusd, &err))
		goto fail;
	const gk_wsub_opts wo = { .topics = TOPICS, .n_topics = N_TOPICS };
	const gk_wsub_view wv = { .user = g, .reset = view_reset, .apply = view_apply, .resynced = view_resynced };
	if (gk_wsub_open(&g->bus, g->svc.loop, g->svc.addr.events, g->svc.addr.watcher, &wo, &wv, &err))
		goto fail;
	const gk_wsub_stats *bs = gk_wsub_stats_get(g->bus);

	const gk_gater_kops_stats *ks = gk_gater_kops_stats_get(g->kops);
	gk_metric_counter_var("gpukmm_gater_passes_total", "Gating passes.", &g->pst.passes);
	gk_metric_counter_var("gpukmm_gater_writes_total", "DaemonSet patches sent.", &ks->writes);
	gk_metric_counter_var("gpukmm_gater_conflicts_total", "409 conflicts (re-read and retried).", &ks->conflicts);
	gk_metric_counter_var("gpukmm_gater_write_errors_total",
			      "Failed DaemonSet writes / re-reads (retried with backoff).", &ks->errors);
	gk_metric_gauge_var("gpukmm_gater_writes_inflight", "DaemonSets with an API call in flight or a re-read due.",
			    &ks->inflight);
	gk_metric_counter_var("gpukmm_gater_failed_passes_total", "Passes that failed (retried with backoff).",
			      &g->pst.failures);
	gk_metric_counter_var("gpukmm_gater_snapshots_total", "View rebuilds from watcher snapshots.", &bs->snapshots);
	gk_metric_counter_var("gpukmm_gater_bus_gaps_total", "Bus sequence gaps.", &bs->gaps);
	gk_metric_counter_var("gpukmm_gater_events_received_total", "Bus events received.", &bs->events);
	gk_metric_counter_var("gpukmm_gater_reports_ok_total", "Status reports accepted.", &g->rep.ok);
	gk_metric_counter_var("gpukmm_gater_reports_failed_total", "Status reports failed.", &g->rep.failed);
	gk_metric_gauge_var("gpukmm_gater_queue_depth", "Keys ready or waiting.", &g->qs.depth);
	gk_metric_counter_var("gpukmm_gater_queue_refused_total", "Keys refused by the bounded queue.",
			      &g->queue_refused);

	GK_INFO("started: namespace %s", g->svc.ns);
	rc = gk_loop_run(g->svc.loop);
	GK_INFO("stopping");
	goto out;
fail:
	GK_ERROR("%s", err.msg);
	rc = 1;
out:
	g->svc.stopping = 1;
	gk_wsub_close(g->bus); /* an outstanding snapshot is cancelled */
	if (g->rep.statusd) {
		gk_loop_del_fd(g->svc.loop, gk_ipc_client_fd(g->rep.statusd));
		gk_ipc_client_close(g->rep.statusd);
	}
	gk_gater_kops_free(g->kops);
	gk_gtv_free(g->view);
	gk_wq_free(g->q);
	gk_svc_fini(&g->svc);
	gk_ipc_fini();
	return rc;
}
