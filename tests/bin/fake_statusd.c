/* fake_statusd — a stand-in for gpukmm-statusd in tests: serves gpukmm.Status
 * on --listen and appends every StatusReport as one JSON line to --out:
 *   {"component":"modmgr","policy":"gpu","kmmStatus":"1/1","errors":[...],
 *    "deleted":false,"conditions":[{"type":..,"status":..,"reason":..}]}
 * (gater reports add devicePluginStatus, draStatus, xpuManagerStatus,
 * gatedDaemonsets; leaderTerm, as a string, when the report carries one)
 * --fail-first N answers UNAVAILABLE to the first N reports (retry tests). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/svc.h"
#include "rpc.pb-c.h"
#include "status.pb-c.h"

typedef struct fake {
	Gpukmm__Status_Service service;   /* first: handlers cast back */
	FILE *out;
	unsigned long fail_first;
	uint64_t reports;
} fake;

static void fs_report(Gpukmm__Status_Service *svc, const Gpukmm__StatusReport *in,
		      Gpukmm__Empty_Closure closure, void *closure_data)
{
	fake *f = (fake *)svc;
	f->reports++;
	if (f->reports <= f->fail_first) {
		gk_ipc_fail(closure_data, GK_UNAVAILABLE, "fake statusd: failing report %llu on purpose",
			    (unsigned long long)f->reports);
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "component", in->component ? in->component : "");
	cJSON_AddStringToObject(o, "policy", in->policy ? in->policy : "");
	if (in->kmm_status)
		cJSON_AddStringToObject(o, "kmmStatus", in->kmm_status);
	cJSON *errs = cJSON_AddArrayToObject(o, "errors");
	for (size_t i = 0; i < in->n_errors; i++)
		cJSON_AddItemToArray(errs, cJSON_CreateString(in->errors[i]));
	cJSON_AddBoolToObject(o, "deleted", in->has_deleted && in->deleted);
	if (in->has_leader_term) {
		char t[24];
		snprintf(t, sizeof(t), "%llu", (unsigned long long)in->leader_term);
		cJSON_AddStringToObject(o, "leaderTerm", t);
	}
	/* gater's values */
	if (in->device_plugin_status)
		cJSON_AddStringToObject(o, "devicePluginStatus", in->device_plugin_status);
	if (in->dra_status)
		cJSON_AddStringToObject(o, "draStatus", in->dra_status);
	if (in->xpu_manager_status)
		cJSON_AddStringToObject(o, "xpuManagerStatus", in->xpu_manager_status);
	if (in->n_gated_daemonsets) {
		cJSON *g = cJSON_AddArrayToObject(o, "gatedDaemonsets");
		for (size_t i = 0; i < in->n_gated_daemonsets; i++)
			cJSON_AddItemToArray(g, cJSON_CreateString(in->gated_daemonsets[i]));
	}
	cJSON *cs = cJSON_AddArrayToObject(o, "conditions");
	for (size_t i = 0; i < in->n_conditions; i++) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "type", in->conditions[i]->type ? in->conditions[i]->type : "");
		cJSON_AddStringToObject(c, "status", in->conditions[i]->status ? in->conditions[i]->status : "");
		cJSON_AddStringToObject(c, "reason", in->conditions[i]->reason ? in->conditions[i]->reason : "");
		cJSON_AddItemToArray(cs, c);
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (s && f->out) {
		fprintf(f->out, "%s\n", s);
		fflush(f->out);
	}
	free(s);
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	closure(&e, closure_data);
}

static void fs_report_node(Gpukmm__Status_Service *svc, const Gpukmm__NodeReport *in,
			   Gpukmm__Empty_Closure closure, void *closure_data)
{
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	closure(&e, closure_data);
}

static int opt_out(void *user, const char *arg)
{
	fake *f = user;
	f->out = fopen(arg, "a");
	return f->out ? 0 : -1;
}

static int opt_fail(void *user, const char *arg)
{
	char *end;
	((fake *)user)->fail_first = strtoul(arg, &end, 10);
	return *arg && !*end ? 0 : -1;
}

static gk_ipc_server *SERVER;

static void on_server(gk_loop *l, int fd, uint32_t ev, void *user)
{
	gk_ipc_server_dispatch(SERVER);
}

int main(int argc, char **argv)
{
	static fake f = { .service = GPUKMM__STATUS__INIT(fs_) };
	static gk_svc svc;
	gk_err err;
	const gk_svc_opt extra[] = {
		{ "out", 1, "append reports as JSON lines to this file", opt_out, &f },
		{ "fail-first", 1, "answer UNAVAILABLE to the first N reports", opt_fail, &f },
		{ 0 },
	};
	int rc = gk_svc_init(&svc, "fake-statusd", argc, argv, extra, &err);
	if (rc)
		return rc;
	if (!svc.addr.listen) {
		GK_ERROR("--listen is required");
		gk_svc_fini(&svc);
		return 2;
	}
	if (gk_ipc_server_open(&SERVER, svc.addr.listen, NULL, &err) ||
	    gk_ipc_server_add(SERVER, &f.service.base, &f, NULL, &err) ||
	    gk_loop_add_fd(svc.loop, gk_ipc_server_fd(SERVER), EPOLLIN, on_server, NULL, &err)) {
		GK_ERROR("%s", err.msg);
		gk_ipc_server_close(SERVER);
		gk_svc_fini(&svc);
		return 1;
	}
	GK_INFO("serving gpukmm.Status on %s", gk_ipc_server_url(SERVER));
	gk_svc_ready(&svc);
	rc = gk_loop_run(svc.loop);
	gk_loop_del_fd(svc.loop, gk_ipc_server_fd(SERVER));
	gk_ipc_server_close(SERVER);
	if (f.out)
		fclose(f.out);
	gk_svc_fini(&svc);
	gk_ipc_fini();
	return rc;
}
