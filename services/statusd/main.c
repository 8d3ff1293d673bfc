/* gpukmm-statusd — the status writer (DESIGN.md §1, §5 item 7).
 *
 *   --mode controller  serves gpukmm.Status.Report (modmgr, gater) and writes
 *                      one merged ClusterPolicy status per change (ctrl.c).
 *                      With --events and --watcher (or --runtime-dir) it also
 *                      follows the watcher (lib/wsub, view.c): Nodes and their
 *                      gpukmm.io/node-report for status.nodes (nodes.c), and
 *                      leadership: only the leader writes, and nothing before
 *                      the first snapshot. Without them it writes as if leader
 *                      and leaves status.nodes as it is.
 *                      It also applies the nodes' NodeReportRequests to their
 *                      Nodes (nrrw.c: TokenReview, gpukmm.io labels and the
 *                      gpukmm.io/node-report annotation), as the leader.
 *   --mode node        serves gpukmm.Status.ReportNode (the prober) and hands
 *                      the report to the controller as a NodeReportRequest
 *                      named --node-name / $NODE_NAME (nodew.c) with the pod's
 *                      token for the audience gpukmm.io/node-report
 *                      (--report-token-file). It writes no Node.
 * API calls run asynchronously on a lib/kube mux attached to the service
 * loop (ctrl.c, nodew.c): however slow the API server, the loop keeps
 * answering Report/ReportNode and heartbeats; each call is bounded (4 s,
 * connect 2 s) and failed ones are retried from timers.
 * RBAC (controller): clusterpolicies get, clusterpolicies/status patch;
 * nodereportrequests list/watch/delete (operator namespace), tokenreviews
 * create, nodes get/patch (deploy/rbac/controller-rbac.yaml).
 * RBAC (node): nodereportrequests create in the operator namespace, and the
 * /metrics access reviews: a node's credentials cannot write any Node
 * (deploy/rbac/node-rbac.yaml). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "ctrl.h"
#include "nodew.h"
#include "nrrw.h"
#include "view.h"
#include "gpukmm/ctl.h"
#include "gpukmm/ipc.h"
#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "gpukmm/review.h"
#include "gpukmm/svc.h"
#include "gpukmm/wsub.h"
#include "rpc.pb-c.h"
#include "status.pb-c.h"

typedef struct app {
	Gpukmm__Status_Service service; /* first: handlers cast back */
	gk_svc svc;
	gk_ipc_server *server;
	gk_kube_client *kc;
	gk_sd_ctrl *ctrl;
	gk_sd_ctrl_opts copts;
	gk_sd_view *view;
	gk_wsub *watch;
	const char *mode;
	const char *node_name;
	const char *report_token_file;
	const char *node_sa;
	double qps;             /* --kube-qps, 0 = the mode's default */
	gk_sd_nodew *nodew;
	gk_sd_nrrw *nrrw;
	gk_kube_mux *rmux;      /* the supervisor's /metrics access reviews (gpukmm/review.h) */
	gk_review *review;
} app;

static void sd_report(Gpukmm__Status_Service *svc, const Gpukmm__StatusReport *in, Gpukmm__Empty_Closure closure,
		      void *cd)
{
	app *a = (app *)svc;
	if (!a->ctrl) {
		gk_ipc_fail(cd, GK_FAILED_PRECONDITION, "statusd runs in node mode: Report is for controller mode");
		return;
	}
	gk_err err;
	if (gk_sd_ctrl_report(a->ctrl, in, &err) != GK_OK) {
		gk_ipc_fail(cd, err.code, "%s", err.msg);
		return;
	}
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	closure(&e, cd);
}

static void sd_report_node(Gpukmm__Status_Service *svc, const Gpukmm__NodeReport *in, Gpukmm__Empty_Closure closure,
			   void *cd)
{
	app *a = (app *)svc;
	if (a->ctrl) {
		gk_ipc_fail(cd, GK_FAILED_PRECONDITION, "statusd runs in controller mode: ReportNode is for node mode");
		return;
	}
	gk_err err;
	if (gk_sd_nodew_report(a->nodew, in, &err) != GK_OK) {
		gk_ipc_fail(cd, err.code, "%s", err.msg);
		return;
	}
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	closure(&e, cd);
}

static void on_server(gk_loop *l, int fd, uint32_t ev, void *user)
{
	app *a = user;
	gk_ipc_server_dispatch(a->server);
}

/* ---- the watcher view (lib/wsub): "clusterpolicy", "node", "discovery", "leadership" ---- */

static const char *const TOPICS[] = { "clusterpolicy", "node", "discovery", "leadership" };

/* The view changed (a policy, the nodes, leadership): the status writer
 * re-evaluates; the inbox goes on if leadership was gained. */
static void view_dirty(void *user, const char *policy)
{
	app *a = user;
	gk_sd_ctrl_dirty(a->ctrl, policy);
	if (!policy)
		gk_sd_nrrw_kick(a->nrrw);
}

/* The inbox is applied by the leader only, and not before the first snapshot
 * said who leads (the view starts out assuming it leads). */
static bool leading(void *user)
{
	app *a = user;
	return !a->view || (gk_sd_view_synced(a->view) && gk_sd_view_leader(a->view));
}

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	return gk_sd_view_load_snapshot(((app *)user)->view, s, err);
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	return gk_sd_view_apply(((app *)user)->view, topic, ev, err);
}

static void view_resynced(void *user, bool first)
{
	gk_sd_view_stats vs;
	gk_sd_view_stats_get(((app *)user)->view, &vs);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu nodes, leader=%d", vs.policies, vs.nodes, vs.leader);
}

static int opt_mode(void *user, const char *arg)
{
	app *a = user;
	if (strcmp(arg, "controller") && strcmp(arg, "node"))
		return -1;
	a->mode = arg;
	return 0;
}

static int opt_str(void *user, const char *arg)
{
	*(const char **)user = arg;
	return *arg ? 0 : -1;
}

static int opt_ms(void *user, const char *arg)
{
	char *end;
	long v = strtol(arg, &end, 10);
	if (!*arg || *end || v < 1 || v > 3600000)
		return -1;
	*(int *)user = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	static app a = { .service = GPUKMM__STATUS__INIT(sd_), .mode = "controller" };
	gk_err err;
	const gk_svc_opt extra[] = {
		{ "mode", 1, "controller (ClusterPolicy status) or node (own Node labels)", opt_mode, &a },
		{ "node-name", 1, "node mode: this node's name (default $NODE_NAME)", opt_str, &a.node_name },
		{ "debounce-ms", 1, "coalesce reports this long before writing (default 100)", opt_ms,
		  &a.copts.debounce_ms },
		{ "grace-ms", 1, "after start, keep a silent component's errors this long (default 15000)", opt_ms,
		  &a.copts.grace_ms },
		{ "report-token-file", 1,
		  "node mode: the pod's (or Node's) token for the audience gpukmm.io/node-report "
		  "($GPUKMM_REPORT_TOKEN_FILE, default /var/run/secrets/gpukmm.io/node-report/token)",
		  opt_str, &a.report_token_file },
		{ "node-service-account", 1,
		  "controller mode: the node profile's ServiceAccount, the only one whose NodeReportRequests are "
		  "applied (default gpukmm-node)",
		  opt_str, &a.node_sa },
		{ "kube-qps", 1,
		  "client-side API request limit per second (default 50, burst 100; node mode 5, burst 10; "
		  "< 0 = none)",
		  gk_ctl_opt_qps, &a.qps },
		{ 0 },
	};
#define COUNTER(n, h, p) gk_metric_counter_var("gpukmm_" n "_total", h, p)
#define GAUGE(n, h, p) gk_metric_gauge_var("gpukmm_" n, h, p)
	int rc = gk_svc_init(&a.svc, "statusd", argc, argv, extra, &err);
	if (rc)
		return rc;
	const char *listen = a.svc.addr.listen ? a.svc.addr.listen : a.svc.addr.statusd;
	if (!listen) {
		GK_ERROR("no address to serve on: give --listen URL (or --runtime-dir)");
		gk_svc_fini(&a.svc);
		return 2;
	}
	if (strcmp(a.mode, "node") == 0) {
		if (!a.node_name)
			a.node_name = getenv("NODE_NAME");
		if (!a.node_name || !*a.node_name) {
			GK_ERROR("node mode needs --node-name or $NODE_NAME");
			gk_svc_fini(&a.svc);
			return 2;
		}
	}
	gk_kube_config cfg = { 0 };
	/* controller mode writes like the other controller services (a status per
	 * policy, re-read and patched, all at once on a start); a node's statusd is
	 * one of thousands and keeps client-go's 5/s */
	const bool ctrl_mode = strcmp(a.mode, "controller") == 0;
	const gk_kube_opts kopts = { .qps = a.qps ? a.qps : ctrl_mode ? GK_KUBE_WRITER_QPS : 0,
				     .burst = ctrl_mode ? GK_KUBE_WRITER_BURST : 0,
				     .timeout_ms = 4000,
				     .connect_timeout_ms = 2000,
				     .user_agent = "gpukmm-statusd" };
	rc = 1;
	if (gk_kube_config_load(&cfg, a.svc.kubeconfig, &err) || gk_kube_client_new(&a.kc, &cfg, &kopts, &err)) {
		GK_ERROR("kubernetes client: %s", err.msg);
		goto out;
	}
	if (strcmp(a.mode, "controller") == 0) {
		if (gk_sd_ctrl_new(&a.ctrl, a.svc.loop, a.kc, &a.copts, &err)) {
			GK_ERROR("%s", err.msg);
			goto out;
		}
		if (a.svc.addr.events && a.svc.addr.watcher) {
			static const gk_wsub_opts wo = { .topics = TOPICS, .n_topics = sizeof(TOPICS) / sizeof(TOPICS[0]) };
			static const gk_wsub_view wv = { .user = &a, .reset = view_reset, .apply = view_apply,
							 .resynced = view_resynced };
			if (gk_sd_view_new(&a.view, view_dirty, &a, &err) ||
			    gk_wsub_open(&a.watch, a.svc.loop, a.svc.addr.events, a.svc.addr.watcher, &wo, &wv, &err)) {
				GK_ERROR("%s", err.msg);
				goto out;
			}
			gk_sd_ctrl_set_view(a.ctrl, a.view);
		} else {
			GK_INFO("no --events/--watcher: writing without leader election, status.nodes left as it is");
		}
		const gk_sd_nrrw_opts no = { .ns = a.svc.ns, .node_sa = a.node_sa, .leading = leading, .user = &a };
		if (gk_sd_nrrw_new(&a.nrrw, a.svc.loop, a.kc, &no, &err)) {
			GK_ERROR("%s", err.msg);
			goto out;
		}
		const gk_sd_nrrw_stats *ns = gk_sd_nrrw_stats_get(a.nrrw);
		COUNTER("statusd_node_requests", "NodeReportRequest events seen.", &ns->seen);
		COUNTER("statusd_node_requests_applied", "NodeReportRequests applied (Node written or right already).",
			&ns->applied);
		COUNTER("statusd_node_writes", "Node writes (gpukmm.io labels, node report).", &ns->node_writes);
		COUNTER("statusd_node_requests_refused",
			"NodeReportRequests refused (not the node's own identity, another node, a bad report).",
			&ns->refused);
		COUNTER("statusd_node_request_errors", "Failed calls on NodeReportRequests (retried).", &ns->errors);
		GAUGE("statusd_node_requests_pending", "NodeReportRequests waiting.", &ns->pending);
		const gk_sd_stats *st = gk_sd_ctrl_stats(a.ctrl);
		static const gk_wsub_stats none;
		const gk_wsub_stats *ws = a.watch ? gk_wsub_stats_get(a.watch) : &none;
		COUNTER("statusd_reports", "Reports accepted.", &st->reports);
		COUNTER("statusd_passes", "Policy status evaluations finished (written, unchanged or skipped).",
			&st->passes);
		COUNTER("statusd_writes", "Status writes.", &st->writes);
		COUNTER("statusd_unchanged", "Evaluations that found the status right (no write).", &st->unchanged);
		COUNTER("statusd_not_leader", "Evaluations skipped: another instance leads.", &st->not_leader);
		COUNTER("statusd_conflicts", "Writes that met a 409 and were recomputed.", &st->write_conflicts);
		COUNTER("statusd_write_errors", "Failed reads/writes (retried).", &st->write_errors);
		COUNTER("statusd_snapshots", "View rebuilds from watcher snapshots.", &ws->snapshots);
		COUNTER("statusd_bus_gaps", "Bus sequence gaps.", &ws->gaps);
		COUNTER("statusd_events", "Bus events received.", &ws->events);
		GAUGE("statusd_pending", "Policies waiting for an evaluation (0: idle).", &st->pending);
		COUNTER("statusd_other_term", "Reports made under another leadership term than the view's (not used).",
			&st->other_term);
		COUNTER("statusd_node_summaries", "Node summaries computed (every node of the view against a policy).",
			&st->summaries);
		COUNTER("statusd_node_summaries_reused",
			"Status evaluations that reused the policy's node summary (the view had not changed).",
			&st->summaries_reused);
	} else {
		const char *env = getenv("GPUKMM_REPORT_TOKEN_FILE");
		if (!a.report_token_file)
			a.report_token_file = env && *env ? env : "/var/run/secrets/gpukmm.io/node-report/token";
		const gk_sd_nodew_opts no = { .node_name = a.node_name, .ns = a.svc.ns,
					      .token_file = a.report_token_file, .debounce_ms = a.copts.debounce_ms };
		if (gk_sd_nodew_new(&a.nodew, a.svc.loop, a.kc, &no, &err)) {
			GK_ERROR("%s", err.msg);
			goto out;
		}
		const gk_sd_nodew_stats *st = gk_sd_nodew_stats_get(a.nodew);
		COUNTER("statusd_reports", "Node reports accepted.", &st->reports);
		COUNTER("statusd_passes", "Node reports handed in (or found handed in already).", &st->passes);
		COUNTER("statusd_writes", "NodeReportRequests created.", &st->writes);
		COUNTER("statusd_conflicts", "Creates that met the previous request still pending (409).", &st->conflicts);
		COUNTER("statusd_write_errors", "Failed creates or an unreadable report token (retried).", &st->errors);
		GAUGE("statusd_pending", "A node report waiting to be handed in (0: idle).", &st->pending);
		GAUGE("statusd_report_summarized", "1 while the node report is over the annotation budget (summarized).",
			&st->summarized);
	}
	if (gk_kube_mux_new(&a.rmux, a.kc, &err) || gk_kube_mux_attach(a.rmux, a.svc.loop, &err) ||
	    gk_review_new(&a.review, a.rmux, &err)) {
		GK_ERROR("%s", err.msg);
		goto out;
	}
	if (gk_ipc_server_open(&a.server, listen, NULL, &err) || gk_ipc_server_add(a.server, &a.service.base, &a, NULL, &err) ||
	    gk_ipc_server_add(a.server, gk_review_service(a.review), &a, NULL, &err) ||
	    gk_loop_add_fd(a.svc.loop, gk_ipc_server_fd(a.server), EPOLLIN, on_server, &a, &err)) {
		GK_ERROR("%s", err.msg);
		goto out;
	}
	GK_INFO("%s mode: serving gpukmm.Status on %s", a.mode, gk_ipc_server_url(a.server));
	gk_svc_ready(&a.svc);
	rc = gk_loop_run(a.svc.loop);
	GK_INFO("stopping");
	gk_loop_del_fd(a.svc.loop, gk_ipc_server_fd(a.server));
out:
	gk_ipc_server_close(a.server);
	gk_review_free(a.review);
	gk_kube_mux_free(a.rmux);
	gk_sd_nodew_free(a.nodew);
	gk_sd_nrrw_free(a.nrrw);
	gk_wsub_close(a.watch);
	gk_sd_ctrl_free(a.ctrl);
	gk_sd_view_free(a.view);
	gk_kube_client_free(a.kc);
	gk_kube_config_free(&cfg);
	gk_svc_fini(&a.svc);
	gk_ipc_fini();
	return rc;
}
