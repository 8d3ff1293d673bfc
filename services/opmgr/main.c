/* gpukmm-opmgr — the operand manager: deploys what a ClusterPolicy asks for
 * (device plugin, DRA driver, XPU Manager and what they need; lib/operands),
 * keeps the fields it manages as rendered, tears them down in order when the
 * policy changes mode or goes away, and reports devicePluginStatus / draStatus
 * / xpuManagerStatus to statusd (ARCHITECTURE.md §1, §2, §5).
 *
 * The shared skeleton (lib/svc/ctl.c): the watcher bus (clusterpolicy, operand, daemonset,
 * resourceclaim, discovery, leadership) feeds the view (view.c); an event only
 * marks policies dirty; the bounded work queue runs passes (pass.c) whose
 * writes run asynchronously on a lib/kube mux (kops.c); only the leader writes
 * and reports. Its own credentials: it alone may create the DRA driver's
 * ClusterRole (RBAC escalation rights) and the SCCs. */
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

#define PASSES_PER_TICK 16

static const char *const TOPICS[] = { "clusterpolicy", "operand", "daemonset", "resourceclaim", "node",
				      "resourceslice", "discovery", "leadership" };
#define N_TOPICS (sizeof(TOPICS) / sizeof(TOPICS[0]))

typedef struct om {
	gk_ctl c;                /* flags, the bus, the queue, statusd (lib/svc/ctl.c) */
	gk_opv *view;
	gk_opk *kops;
	gk_opp_ops ops;
	gk_opp_cfg cfg;
	double qps;
	uint64_t passes, failed_passes;
} om;

/* a Kueue input moved (nodes, ResourceSlices): the pass runs a little later, so a
 * burst costs one pass and one quota write (an earlier deadline is kept) */
static void on_later(void *user, const char *policy)
{
	gk_ctl_dirty_after(user, policy, GK_OPP_KUEUE_COALESCE_MS);
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
	gk_reporter_send(&m->c.rep, &r);
}

static void run_pass(void *user, const char *key)
{
	om *m = user;
	gk_opp_result res;
	gk_err e = { 0 };
	m->passes++;
	if (gk_opp_pass(m->view, key, &m->cfg, &m->ops, &res, &e) != GK_OK)
		GK_WARN("ClusterPolicy %s: %s", key, e.msg);
	if (!res.idle) {
		for (size_t i = 0; i < res.n_errors; i++)
			GK_WARN("ClusterPolicy %s: %s", key, res.errors[i]);
		/* a write in flight runs the pass again when it ends, which reports */
		if (!res.pending)
			report(m, key, &res);
	}
	if (res.failed)
		m->failed_passes++;
	gk_ctl_requeue(&m->c, key, res.failed, res.requeue_ms);
	gk_opp_result_free(&res);
}

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	return gk_opv_load_snapshot(((om *)user)->view, s, err);
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	return gk_opv_apply(((om *)user)->view, topic, ev, err);
}

static void view_rebuilt(void *user)
{
	om *m = user;
	gk_opv_state st;
	gk_opv_state_get(m->view, &st);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu operand objects, %zu daemonsets, %zu nodes, "
		"%zu resourceslices, leader=%d",
		st.policies, st.objects, st.daemonsets, st.nodes, st.slices, gk_opv_leader(m->view));
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
		GK_CTL_OPT_KUBE_QPS(&m->qps),
		{ "operator-secret", 1, "image pull secret put first in every operand DaemonSet ($OPERATOR_SECRET)",
		  opt_secret, m },
		{ 0 },
	};
	const gk_ctl_cfg cfg = { .name = "opmgr", .topics = TOPICS, .n_topics = N_TOPICS, .user = m,
				 .reset = view_reset, .apply = view_apply, .rebuilt = view_rebuilt, .pass = run_pass,
				 .per_tick = PASSES_PER_TICK };
	int rc = gk_ctl_init(&m->c, &cfg, argc, argv, extra, &err);
	if (rc)
		return rc;
	if (m->cfg.operator_secret && !*m->cfg.operator_secret)
		m->cfg.operator_secret = NULL;
	if (gk_opv_new(&m->view, m->c.svc.ns, 0, gk_ctl_dirty, &m->c, &err))
		goto fail;
	gk_opv_set_later(m->view, on_later);
	if (gk_opk_new(&m->kops, m->c.svc.kubeconfig, m->qps, m->c.svc.loop, m->view, &err))
		goto fail;
	gk_opk_ops(m->kops, &m->ops);
	if (gk_ctl_start(&m->c, &err))
		goto fail;
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
	GK_INFO("started: namespace %s%s", m->c.svc.ns, m->cfg.operator_secret ? ", operator pull secret set" : "");
	rc = gk_ctl_run(&m->c);
	goto out;
fail:
	GK_ERROR("%s", err.msg);
	rc = 1;
out:
	gk_ctl_stop(&m->c);
	gk_opk_free(m->kops);
	gk_opv_free(m->view);
	gk_ctl_fini(&m->c);
	return rc;
}
