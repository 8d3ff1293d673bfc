/* gpukmm-gater — the DaemonSet gater (DESIGN.md §1, §2; reference
 * gpu-base-operator §3).
 *
 * One event loop, on the controller skeleton (lib/svc/ctl.c): the watcher bus
 * (clusterpolicy, daemonset, discovery, leadership) feeds the view; every event only marks ClusterPolicy keys dirty;
 * the bounded work queue runs passes (pass.c: decide.c; the DaemonSet merge
 * patches run asynchronously on a lib/kube mux, kops.c, and mark their
 * policies dirty again when they end); after each pass with no write in
 * flight a StatusReport{component: "gater"} goes to statusd. Only the leader writes or reports. On start and
 * after any bus gap the view is rebuilt from a Watcher.Snapshot (events that
 * arrive while it is in flight are buffered and replayed when newer). */
#include <stdio.h>
#include <stdlib.h>

#include "events.pb-c.h"
#include "gpukmm/ctl.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "status.pb-c.h"

#include "kops.h"
#include "pass.h"
#include "view.h"

#define HOLD_RETRY_MS 5000
#define PASSES_PER_TICK 32

static const char *const TOPICS[] = { "clusterpolicy", "daemonset", "discovery", "leadership" };
#define N_TOPICS (sizeof(TOPICS) / sizeof(TOPICS[0]))

typedef struct gt {
	gk_ctl c;                /* flags, the bus, the queue, statusd (lib/svc/ctl.c) */
	gk_gtv *view;
	gk_gater_kops *kops;
	gk_gater_ops ops;
	double qps;
	gk_gater_stats pst;
} gt;

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
	gk_reporter_send(&g->c.rep, &r);
}

/* ---- passes ----------------------------------------------------------------- */

static void run_pass(void *user, const char *key)
{
	gt *g = user;
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
	/* held: the watcher's state changes mark every policy dirty; this is the backstop */
	int64_t d = gk_ctl_requeue(&g->c, key, res.failed, res.held ? HOLD_RETRY_MS : 0);
	if (res.failed)
		GK_DEBUG("ClusterPolicy %s: pass incomplete, again in %lld ms", key, (long long)d);
	gk_metric_reconcile(t0, res.failed ? "error" : "success");
	gk_gater_result_free(&res);
}

/* ---- the watcher view (lib/wsub) ------------------------------------------------- */

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	return gk_gtv_load_snapshot(((gt *)user)->view, s, err);
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	return gk_gtv_apply(((gt *)user)->view, topic, ev, err); /* marks: gk_ctl_dirty kicks the queue */
}

static void view_rebuilt(void *user)
{
	gt *g = user;
	gk_gtv_state vs;
	gk_gtv_state_get(g->view, &vs);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu daemonsets, kmm=%d leader=%d", vs.policies,
		vs.daemonsets, vs.kmm, vs.leader);
}

/* ---- main ----------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static gt G;
	gt *g = &G;
	gk_err err;
	const gk_svc_opt extra[] = { GK_CTL_OPT_KUBE_QPS(&g->qps), { 0 } };
	const gk_ctl_cfg cfg = { .name = "gater", .topics = TOPICS, .n_topics = N_TOPICS, .user = g,
				 .reset = view_reset, .apply = view_apply, .rebuilt = view_rebuilt, .pass = run_pass,
				 .per_tick = PASSES_PER_TICK };
	int rc = gk_ctl_init(&g->c, &cfg, argc, argv, extra, &err);
	if (rc)
		return rc;
	gk_gtv_opts vo = { .ns = g->c.svc.ns };
	if (gk_gtv_new(&g->view, &vo, gk_ctl_dirty, &g->c, &err))
		goto fail;
	if (gk_gater_kops_new(&g->kops, g->c.svc.kubeconfig, g->qps, g->c.svc.loop, g->view, &err))
		goto fail;
	gk_gater_kops_ops(g->kops, &g->ops);
	if (gk_ctl_start(&g->c, &err))
		goto fail;

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

	GK_INFO("started: namespace %s", g->c.svc.ns);
	rc = gk_ctl_run(&g->c);
	goto out;
fail:
	GK_ERROR("%s", err.msg);
	rc = 1;
out:
	gk_ctl_stop(&g->c); /* an outstanding snapshot is cancelled */
	gk_gater_kops_free(g->kops);
	gk_gtv_free(g->view);
	gk_ctl_fini(&g->c);
	return rc;
}
