/* gpukmm-statusd — the status writer (DESIGN.md §1, §5 item 7).
 *
 *   --mode controller  serves gpukmm.Status.Report (modmgr, gater) and writes
 *                      one merged ClusterPolicy status per change (ctrl.c).
 *   --mode node        serves gpukmm.Status.ReportNode (the prober) and writes
 *                      its own Node (--node-name / $NODE_NAME): gpukmm.io labels
 *                      and the gpukmm.io/node-report annotation (node.c), a
 *                      merge patch with a resourceVersion precondition (409 →
 *                      re-read), nothing written when unchanged.
 * RBAC (controller): clusterpolicies get, clusterpolicies/status patch.
 * RBAC (node): nodes get, patch. Kubernetes RBAC cannot restrict that to the
 * node's own Node object; only the NodeRestriction admission plugin with
 * node credentials can, so a DaemonSet's ServiceAccount token lets it patch
 * every Node: keep that token on the node (no other consumers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "ctrl.h"
#include "node.h"
#include "gpukmm/ipc.h"
#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "gpukmm/svc.h"
#include "rpc.pb-c.h"
#include "status.pb-c.h"

typedef struct app {
	Gpukmm__Status_Service service; /* first: handlers cast back */
	gk_svc svc;
	gk_ipc_server *server;
	gk_kube_client *kc;
	gk_sd_ctrl *ctrl;
	gk_sd_ctrl_opts copts;
	const char *mode;
	const char *node_name;
	Gpukmm__NodeReport *node_rep;
	gk_timer_id node_timer;
	uint64_t node_writes, node_conflicts;
	uint64_t reports, writes, conflicts, write_errors;
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

/* ---- node mode ---------------------------------------------------------------- */

static void node_arm(app *a, int ms);

/* 0 done, 1 retry later */
static int node_write(app *a)
{
	gk_kube_ref ref = { .version = "v1", .resource = "nodes", .name = a->node_name };
	char *json = gk_pb_to_json(&a->node_rep->base);
	if (!json)
		return 1;
	if (strlen(json) > GK_SD_NODE_ANNOTATION_MAX) {
		/* bounded: keep the essentials only */
		free(json);
		if (asprintf(&json, "{\"node_name\":\"%.253s\",\"truncated\":true}",
			     a->node_rep->node_name ? a->node_rep->node_name : "") < 0)
			return 1;
	}
	int ret = 1;
	for (int attempt = 0; attempt < 5; attempt++) {
		cJSON *node = NULL;
		gk_kube_status ks;
		gk_err err;
		int rc = gk_kube_get(a->kc, &ref, &node, &ks, &err);
		if (rc != GK_OK) {
			GK_WARN("read Node %s: %s", a->node_name, err.msg);
			break;
		}
		bool oom;
		cJSON *p = gk_sd_node_patch(node, a->node_rep, json, &oom);
		cJSON_Delete(node);
		if (oom)
			break;
		if (!p) {
			ret = 0;
			break;
		}
		char *body = cJSON_PrintUnformatted(p);
		cJSON_Delete(p);
		if (!body)
			break;
		rc = gk_kube_patch(a->kc, &ref, GK_PATCH_MERGE, body, NULL, false, NULL, &ks, &err);
		free(body);
		if (rc == GK_OK) {
			a->node_writes++;
			GK_INFO("Node %s: labels/annotation written", a->node_name);
			ret = 0;
			break;
		}
		if (rc == GK_ABORTED) {
			a->node_conflicts++;
			continue;
		}
		GK_WARN("write Node %s: %s", a->node_name, err.msg);
		break;
	}
	free(json);
	return ret;
}

static void on_node_timer(gk_loop *l, gk_timer_id id, void *user)
{
	app *a = user;
	a->node_timer = 0;
	if (a->node_rep && node_write(a))
		node_arm(a, 1000);
}

static void node_arm(app *a, int ms)
{
	if (!a->node_timer)
		a->node_timer = gk_loop_timer(a->svc.loop, ms, on_node_timer, a);
}

static void sd_report_node(Gpukmm__Status_Service *svc, const Gpukmm__NodeReport *in, Gpukmm__Empty_Closure closure,
			   void *cd)
{
	app *a = (app *)svc;
	if (a->ctrl) {
		gk_ipc_fail(cd, GK_FAILED_PRECONDITION, "statusd runs in controller mode: ReportNode is for node mode");
		return;
	}
	size_t len = protobuf_c_message_get_packed_size(&in->base);
	uint8_t *buf = malloc(len ? len : 1);
	Gpukmm__NodeReport *d = NULL;
	if (buf) {
		protobuf_c_message_pack(&in->base, buf);
		d = gpukmm__node_report__unpack(NULL, len, buf);
		free(buf);
	}
	if (!d) {
		gk_ipc_fail(cd, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
		return;
	}
	if (a->node_rep)
		gpukmm__node_report__free_unpacked(a->node_rep, NULL);
	a->node_rep = d;
	a->reports++;
	node_arm(a, a->copts.debounce_ms > 0 ? a->copts.debounce_ms : 100);
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	closure(&e, cd);
}

static void on_server(gk_loop *l, int fd, uint32_t ev, void *user)
{
	app *a = user;
	gk_ipc_server_dispatch(a->server);
	if (!a->ctrl) {
		a->writes = a->node_writes;
		a->conflicts = a->node_conflicts;
	} else {
		const gk_sd_stats *s = gk_sd_ctrl_stats(a->ctrl);
		a->reports = s->reports;
		a->writes = s->writes;
		a->conflicts = s->write_conflicts;
		a->write_errors = s->write_errors;
	}
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
		{ 0 },
	};
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
	const gk_svc_counter counters[] = {
		{ "statusd_reports", "reports accepted", &a.reports },
		{ "statusd_writes", "status writes", &a.writes },
		{ "statusd_conflicts", "writes that met a 409 and were recomputed", &a.conflicts },
		{ "statusd_write_errors", "failed reads/writes (retried)", &a.write_errors },
	};
	gk_svc_set_counters(&a.svc, counters, sizeof(counters) / sizeof(counters[0]));
	gk_kube_config cfg = { 0 };
	rc = 1;
	if (gk_kube_config_load(&cfg, a.svc.kubeconfig, &err) || gk_kube_client_new(&a.kc, &cfg, NULL, &err)) {
		GK_ERROR("kubernetes client: %s", err.msg);
		goto out;
	}
	if (strcmp(a.mode, "controller") == 0 && gk_sd_ctrl_new(&a.ctrl, a.svc.loop, a.kc, &a.copts, &err)) {
		GK_ERROR("%s", err.msg);
		goto out;
	}
	if (gk_ipc_server_open(&a.server, listen, NULL, &err) || gk_ipc_server_add(a.server, &a.service.base, &a, NULL, &err) ||
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
	if (a.node_timer)
		gk_loop_cancel(a.svc.loop, a.node_timer);
	if (a.node_rep)
		gpukmm__node_report__free_unpacked(a.node_rep, NULL);
	gk_sd_ctrl_free(a.ctrl);
	gk_kube_client_free(a.kc);
	gk_kube_config_free(&cfg);
	gk_svc_fini(&a.svc);
	gk_ipc_fini();
	return rc;
}
