/* fake_control — a stand-in for the supervisor's Control service in tests:
 * answers Ready, keeps the metrics of each process's latest Heartbeat and
 * serves them through List, so a test can wait on a service's own counters
 * (`gpukmmctl ipc call URL gpukmm.Control.List`) instead of sleeping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "control.pb-c.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/svc.h"
#include "rpc.pb-c.h"

#define MAX_SVCS 16

typedef struct fake {
	Gpukmm__Control_Service service; /* first: handlers cast back */
	Gpukmm__HeartbeatRequest *last[MAX_SVCS];
	size_t n;
} fake;

static void fc_ready(Gpukmm__Control_Service *svc, const Gpukmm__ReadyRequest *in, Gpukmm__Empty_Closure closure,
		     void *cd)
{
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	closure(&e, cd);
}

static void fc_heartbeat(Gpukmm__Control_Service *svc, const Gpukmm__HeartbeatRequest *in,
			 Gpukmm__HeartbeatReply_Closure closure, void *cd)
{
	fake *f = (fake *)svc;
	const char *name = in->service ? in->service : "";
	size_t i;
	for (i = 0; i < f->n; i++) /* one entry per process: two statusd may share one fake */
		if (strcmp(f->last[i]->service ? f->last[i]->service : "", name) == 0 && f->last[i]->pid == in->pid)
			break;
	if (i == MAX_SVCS) {
		gk_ipc_fail(cd, GK_RESOURCE_EXHAUSTED, "fake control: more than %d services", MAX_SVCS);
		return;
	}
	size_t len = protobuf_c_message_get_packed_size(&in->base);
	uint8_t *buf = malloc(len ? len : 1);
	Gpukmm__HeartbeatRequest *d = NULL;
	if (buf) {
		protobuf_c_message_pack(&in->base, buf);
		d = gpukmm__heartbeat_request__unpack(NULL, len, buf);
		free(buf);
	}
	if (!d) {
		gk_ipc_fail(cd, GK_RESOURCE_EXHAUSTED, "fake control: out of memory");
		return;
	}
	if (i < f->n)
		gpukmm__heartbeat_request__free_unpacked(f->last[i], NULL);
	else
		f->n++;
	f->last[i] = d;
	Gpukmm__HeartbeatReply r = GPUKMM__HEARTBEAT_REPLY__INIT;
	closure(&r, cd);
}

static void fc_list(Gpukmm__Control_Service *svc, const Gpukmm__Empty *in, Gpukmm__ServiceTable_Closure closure,
		    void *cd)
{
	fake *f = (fake *)svc;
	Gpukmm__ServiceTable t = GPUKMM__SERVICE_TABLE__INIT;
	Gpukmm__ServiceInfo info[MAX_SVCS], *ip[MAX_SVCS];
	for (size_t i = 0; i < f->n; i++) {
		gpukmm__service_info__init(&info[i]);
		info[i].name = f->last[i]->service;
		info[i].has_pid = f->last[i]->has_pid;
		info[i].pid = f->last[i]->pid;
		info[i].state = "ready";
		info[i].has_ready = 1;
		info[i].ready = 1;
		info[i].metrics = f->last[i]->metrics;
		info[i].n_metrics = f->last[i]->n_metrics;
		ip[i] = &info[i];
	}
	t.has_ready = 1;
	t.ready = 1;
	t.services = ip;
	t.n_services = f->n;
	closure(&t, cd);
}

static gk_ipc_server *SERVER;

static void on_server(gk_loop *l, int fd, uint32_t ev, void *user)
{
	gk_ipc_server_dispatch(SERVER);
}

int main(int argc, char **argv)
{
	static fake f = { .service = GPUKMM__CONTROL__INIT(fc_) };
	static gk_svc svc;
	gk_err err;
	const gk_svc_opt extra[] = { { 0 } };
	int rc = gk_svc_init(&svc, "fake-control", argc, argv, extra, &err);
	if (rc)
		return rc;
	if (!svc.addr.listen) {
		GK_ERROR("--listen is required");
		gk_svc_fini(&svc);
		return 2;
	}
	rc = 1;
	if (gk_ipc_server_open(&SERVER, svc.addr.listen, NULL, &err) ||
	    gk_ipc_server_add(SERVER, &f.service.base, &f, NULL, &err) ||
	    gk_loop_add_fd(svc.loop, gk_ipc_server_fd(SERVER), EPOLLIN, on_server, NULL, &err)) {
		GK_ERROR("%s", err.msg);
		goto out;
	}
	GK_INFO("serving gpukmm.Control on %s", gk_ipc_server_url(SERVER));
	rc = gk_loop_run(svc.loop);
	gk_loop_del_fd(svc.loop, gk_ipc_server_fd(SERVER));
out:
	gk_ipc_server_close(SERVER);
	for (size_t i = 0; i < f.n; i++)
		gpukmm__heartbeat_request__free_unpacked(f.last[i], NULL);
	gk_svc_fini(&svc);
	gk_ipc_fini();
	return rc;
}
