/* gpukmm-opmgr — the operand manager: deploys what a ClusterPolicy asks for
 * (device plugin, DRA driver, XPU Manager and what they need; lib/operands),
 * keeps the fields it manages as rendered, tears them down in order when the
 * policy changes mode or goes away, and reports devicePluginStatus / draStatus
 * / xpuManagerStatus to statusd (ARCHITECTURE.md §1, §2, §5).
 *
 * The shared skeleton: the watcher bus (clusterpolicy, operand, daemonset,
 * resourceclaim, discovery, leadership) feeds the view (view.c); an event only
 * marks policies dirty; the bounded work queue runs passes (pass.c) whose
 * writes run asynchronously on a lib/kube mux (kops.c); only the leader writes
 * and reports. Its own credentials: it alone may create the DRA driver's
 * ClusterRole (RBAC escalation rights) and the SCCs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

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

#include "kops.h"
#include "pass.h"
#include "view.h"

#define PASSES_PER_TICK 16
#define QUEUE_MAX_KEYS 1024

static const char *const TOPICS[] = { "clusterpolicy", "operand", "daemonset", "resourceclaim", "node",
				      "resourceslice", "discovery", "leadership" };
#define N_TOPICS (sizeof(TOPICS) / sizeof(TOPICS[0]))

typedef struct om {
	gk_svc svc;
	gk_wsub *bus;
	gk_opv *view;
	gk_wq *q;
	gk_wq_sched qs;
	gk_opk *kops;
	gk_opp_ops ops;
	gk_reporter rep;
	gk_opp_cfg cfg;
	double qps;
	uint64_t passes, failed_passes, queue_refused;
} om;

static void on_dirty(void *user, const char *policy)
{
	om *m = user;
	gk_err e;
	if (gk_wq_add(m->q, policy, &e) != GK_OK) {
		m->queue_refused++;
		GK_WARN("queue: %s", e.msg);
	}
	gk_wq_sched_kick(&m->qs);
}

/* a Kueue input moved (nodes, ResourceSlices): the pass runs a little later, so a
 * burst costs one pass and one quota write (an earlier deadline is kept) */
static void on_later(void *user, const char *policy)
{
	om *m = user;
	gk_err e;
	if (gk_wq_add_after(m->q, policy, GK_OPP_KUEUE_COALESCE_MS, gk_mono_ms(), &e) != GK_OK) {
		m->queue_refused++;
		GK_WARN("queue: %s", e.msg);
	}
	gk_wq_sched_kick(&m->qs);
}

static void report(om *m, const char *policy, const gk_opp_result *res)
{
	Gpukmm__StatusReport r;
	gpukmm__status_report__init(&r);
	r.component = "opmgr";
	r.policy = (char *)policy;
	/* the passes are synchronous: the term is the one the pass decided under;
	 * statusd writes only from reports of its own term */
	r.has_leader_term = 1;
	r.leader_term = gk_opv_term(m->view);
	if (res->deleted) {
		r.has_deleted = r.deleted = 1;
	} else {
		r.has_generation = res->generation != 0;
		r.generation = res->generation;
		r.device_plugin_status = (char *)res->dp;
		r.dra_status = (char *)res->dra;
		r.xpu_manager_status = (char *)res->xpu;
		r.errors = (char **)res->errors;
		r.n_errors = res->n_errors;
	}
	gk_reporter_send(&m->rep, &r);
}

static void run_pass(om *m, const char *key)
{
	gk_opp_result res;
	gk_err e = { 0 };
	m->passes++;
	if (gk_opp_pass(m->view, key, &m->cfg, &m->ops, &res, &e) != GK_OK)
		GK_WARN("ClusterPolicy %s: %s", key, e.msg);
	int64_t now = gk_mono_ms();
	if (!res.idle) {
		for (size_t i = 0; i < res.n_errors; i++)
			GK_WARN("ClusterPolicy %s: %s", key, res.errors[i]);
		/* a write in flight runs the pass again when it ends, which reports */
		if (!res.pending)
			report(m, key, &res);
	}
	if (res.failed) {
		m->failed_passes++;
		int64_t d = 0;
		gk_wq_add_rate_limited(m->q, key, now, &d, NULL);
	} else {
		gk_wq_forget(m->q, key);
		if (res.requeue_ms)
			gk_wq_add_after(m->q, key, res.requeue_ms, now, NULL);
	}
	gk_opp_result_free(&res);
}

static bool may_pass(void *user)
{
	om *m = user;
	return gk_wsub_synced(m->bus) && !m->svc.stopping;
}

static void on_key(void *user, const char *key)
{
	om *m = user;
	run_pass(m, key);
	gk_wq_done(m->q, key);
}

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	return gk_opv_load_snapshot(((om *)user)->view, s, err);
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	return gk_opv_apply(((om *)user)->view, topic, ev, err);
}

static void view_resynced(void *user, bool first)
{
	om *m = user;
	gk_opv_state st;
	gk_opv_state_get(m->view, &st);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu operand objects, %zu daemonsets, %zu nodes, "
		"%zu resourceslices, leader=%d",
		st.policies, st.objects, st.daemonsets, st.nodes, st.slices, gk_opv_leader(m->view));
	if (first)
		gk_svc_ready(&m->svc);
	gk_wq_sched_kick(&m->qs);
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
	((om *)user)->qps = v;
	return 0;
}

static int opt_secret(void *user, const char *arg)
{
	((om *)user)->cfg.operator_secret = arg;
	return 0;
}

int main(int argc, char **argv)
{
	static om M;
	om *m = &M;
	gk_err err;
	m->cfg.operator_secret = getenv("OPERATOR_SECRET");
	const gk_svc_opt extra[] = {
		{ "kube-qps", 1, "client-side API request limit per second (default 50, burst 100; < 0 = none)", opt_qps,
		  m },
		{ "operator-secret", 1, "image pull secret put first in every operand DaemonSet ($OPERATOR_SECRET)",
		  opt_secret, m },
		{ 0 },
	};
	int rc = gk_svc_init(&m->svc, "opmgr", argc, argv, extra, &err);
	if (rc)
		return rc;
	if (!m->svc.addr.events || !m->svc.addr.watcher) {
		GK_ERROR("--events and --watcher (or --runtime-dir) are required");
		gk_svc_fini(&m->svc);
		return 2;
	}
	if (m->cfg.operator_secret && !*m->cfg.operator_secret)
		m->cfg.operator_secret = NULL;
	rc = 1;
	gk_wq_opts qo = { .max_keys = QUEUE_MAX_KEYS };
	if (gk_wq_new(&m->q, &qo, &err))
		goto fail;
	const gk_wq_sched_opts so = { .per_tick = PASSES_PER_TICK, .may = may_pass, .run = on_key, .user = m };
	gk_wq_sched_init(&m->qs, m->svc.loop, m->q, &so);
	if (gk_opv_new(&m->view, m->svc.ns, 0, on_dirty, m, &err))
		goto fail;
	gk_opv_set_later(m->view, on_later);
	if (gk_opk_new(&m->kops, m->svc.kubeconfig, m->qps, m->svc.loop, m->view, &err))
		goto fail;
	gk_opk_ops(m->kops, &m->ops);
	m->rep = (gk_reporter){ .q = m->q, .qs = &m->qs, .stopping = &m->svc.stopping };
	if (m->svc.addr.statusd && gk_ipc_client_open(&m->rep.statusd, m->svc.addr.statusd, NULL, &err))
		goto fail;
	if (m->rep.statusd && gk_loop_add_fd(m->svc.loop, gk_ipc_client_fd(m->rep.statusd), EPOLLIN, on_client_fd,
					     m->rep.statusd, &err))
		goto fail;
	const gk_wsub_opts wo = { .topics = TOPICS, .n_topics = N_TOPICS };
	const gk_wsub_view wv = { .user = m, .reset = view_reset, .apply = view_apply, .resynced = view_resynced };
	if (gk_wsub_open(&m->bus, m->svc.loop, m->svc.addr.events, m->svc.addr.watcher, &wo, &wv, &err))
		goto fail;
	const gk_wsub_stats *bs = gk_wsub_stats_get(m->bus);
	const gk_opk_stats *ks = gk_opk_stats_get(m->kops);
	gk_metric_counter_var("gpukmm_opmgr_passes_total", "Passes.", &m->passes);
	gk_metric_counter_var("gpukmm_opmgr_failed_passes_total", "Passes that failed (retried with backoff).",
			      &m->failed_passes);
	gk_metric_counter_var("gpukmm_opmgr_creates_total", "Operand objects created.", &ks->creates);
	gk_metric_counter_var("gpukmm_opmgr_patches_total", "Operand objects patched.", &ks->patches);
	gk_metric_counter_var("gpukmm_opmgr_deletes_total", "Operand objects deleted.", &ks->deletes);
	gk_metric_counter_var("gpukmm_opmgr_reads_total",
			      "Objects read because the watcher cannot show them (what gpu-base-operator left).",
			      &ks->reads);
	gk_metric_counter_var("gpukmm_opmgr_finalizer_writes_total", "Finalizer writes on ClusterPolicies.",
			      &ks->finalizer_writes);
	gk_metric_counter_var("gpukmm_opmgr_conflicts_total", "409 conflicts (re-read and decided again).",
			      &ks->conflicts);
	gk_metric_counter_var("gpukmm_opmgr_write_errors_total", "Failed API calls (retried with backoff).",
			      &ks->errors);
	gk_metric_gauge_var("gpukmm_opmgr_writes_inflight", "Objects with an API call in flight.", &ks->inflight);
	gk_metric_counter_var("gpukmm_opmgr_snapshots_total", "View rebuilds from watcher snapshots.", &bs->snapshots);
	gk_metric_counter_var("gpukmm_opmgr_bus_gaps_total", "Bus sequence gaps.", &bs->gaps);
	gk_metric_counter_var("gpukmm_opmgr_reports_ok_total", "Status reports accepted.", &m->rep.ok);
	gk_metric_counter_var("gpukmm_opmgr_reports_failed_total", "Status reports failed.", &m->rep.failed);
	gk_metric_gauge_var("gpukmm_opmgr_queue_depth", "Keys ready or waiting.", &m->qs.depth);
	gk_metric_counter_var("gpukmm_opmgr_queue_refused_total", "Keys refused by the bounded queue.",
			      &m->queue_refused);
	GK_INFO("started: namespace %s%s", m->svc.ns, m->cfg.operator_secret ? ", operator pull secret set" : "");
	rc = gk_loop_run(m->svc.loop);
	GK_INFO("stopping");
	goto out;
fail:
	GK_ERROR("%s", err.msg);
	rc = 1;
out:
	m->svc.stopping = 1;
	gk_wsub_close(m->bus);
	if (m->rep.statusd) {
		gk_loop_del_fd(m->svc.loop, gk_ipc_client_fd(m->rep.statusd));
		gk_ipc_client_close(m->rep.statusd);
	}
	gk_opk_free(m->kops);
	gk_opv_free(m->view);
	gk_wq_free(m->q);
	gk_svc_fini(&m->svc);
	gk_ipc_fini();
	return rc;
}
