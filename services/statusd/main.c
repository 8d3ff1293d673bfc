/* gpukmm-statusd — the status writer (DESIGN.md §1, §5 item 7).
 *
 *   --mode controller  serves gpukmm.Status.Report (modmgr, gater) and writes
 *                      one merged ClusterPolicy status per change (ctrl.c).
 *   --mode node        serves gpukmm.Status.ReportNode (the prober) and writes
 *                      its own Node's gpukmm.io labels + annotation (not yet
 *                      implemented: answers UNIMPLEMENTED).
 * RBAC (controller): clusterpolicies get, clusterpolicies/status patch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "ctrl.h"
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

static void sd_report_node(Gpukmm__Status_Service *svc, const Gpukmm__NodeReport *in, Gpukmm__Empty_Closure closure,
			   void *cd)
{
	gk_ipc_fail(cd, GK_UNIMPLEMENTED, "statusd: node mode is not implemented yet");
}

static void on_server(gk_loop *l, int fd, uint32_t ev, void *user)
{
	app *a = user;
	gk_ipc_server_dispatch(a->server);
	if (a->ctrl) {
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
	gk_sd_ctrl_free(a.ctrl);
	gk_kube_client_free(a.kc);
	gk_kube_config_free(&cfg);
	gk_svc_fini(&a.svc);
	gk_ipc_fini();
	return rc;
}
