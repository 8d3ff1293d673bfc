/* The Control service (proto/control.proto) on <runtime dir>/control.sock:
 * services say Ready and send Heartbeats with their metrics; gpukmmctl
 * status asks for the List. Handlers run on the loop thread (lib/ipc
 * dispatch), so they touch the supervisor's state directly. */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "control.pb-c.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "sup.h"

typedef struct control {
	Gpukmm__Control_Service svc;   /* first: the library hands us this pointer */
	gk_sup *sup;
} control;

/* The caller: by the pid the socket reports, else the pid it claims, else its name. */
static gk_sup_svc *caller(gk_sup *s, void *closure_data, int32_t pid, const char *name)
{
	const gk_ipc_call_info *ci = gk_ipc_call_info_of(closure_data);
	gk_sup_svc *v = NULL;
	if (ci && ci->peer_pid > 0)
		v = gk_sup_find(s, ci->peer_pid, NULL);
	if (!v && pid > 0)
		v = gk_sup_find(s, pid, NULL);
	if (!v && name) {
		v = gk_sup_find(s, 0, name);
		if (v && v->pid <= 0)
			v = NULL;
	}
	return v;
}

static void c_ready(Gpukmm__Control_Service *service, const Gpukmm__ReadyRequest *in,
		    Gpukmm__Empty_Closure closure, void *closure_data)
{
	gk_sup *s = ((control *)service)->sup;
	gk_sup_svc *v = caller(s, closure_data, in->has_pid ? in->pid : 0, in->service);
	if (!v) {
		gk_ipc_fail(closure_data, GK_NOT_FOUND, "no running service matches pid %d / name '%s'",
			    in->has_pid ? in->pid : 0, in->service ? in->service : "");
		return;
	}
	if (!v->hung)
		gk_sup_event(s, v, GK_SUP_EV_READY);
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	closure(&e, closure_data);
}

static void c_heartbeat(Gpukmm__Control_Service *service, const Gpukmm__HeartbeatRequest *in,
			Gpukmm__HeartbeatReply_Closure closure, void *closure_data)
{
	gk_sup *s = ((control *)service)->sup;
	gk_sup_svc *v = caller(s, closure_data, in->has_pid ? in->pid : 0, in->service);
	if (!v) {
		gk_ipc_fail(closure_data, GK_NOT_FOUND, "no running service matches pid %d / name '%s'",
			    in->has_pid ? in->pid : 0, in->service ? in->service : "");
		return;
	}
	v->last_hb_ms = gk_sup_now_ms();
	/* kept as sent; checked and escaped when rendered (gk_metrics_render), so
	 * a service cannot inject text into /metrics */
	gk_sup_svc_set_metrics(v, gk_metrics_copy(in->metrics, in->n_metrics));
	Gpukmm__HeartbeatReply r = GPUKMM__HEARTBEAT_REPLY__INIT;
	r.has_stop_requested = true;
	/* only the one being stopped: the others wait for their turn (reverse order) */
	r.stop_requested = v->state == GK_SUP_STOPPING;
	closure(&r, closure_data);
}

static void c_list(Gpukmm__Control_Service *service, const Gpukmm__Empty *in,
		   Gpukmm__ServiceTable_Closure closure, void *closure_data)
{
	gk_sup *s = ((control *)service)->sup;
	int64_t now = gk_sup_now_ms();
	Gpukmm__ServiceTable t = GPUKMM__SERVICE_TABLE__INIT;
	Gpukmm__ServiceInfo info[GK_SUP_MAX_SERVICES];
	Gpukmm__ServiceInfo *ptr[GK_SUP_MAX_SERVICES];
	t.has_ready = t.has_uptime_ms = true;
	t.ready = s->ready;
	t.uptime_ms = (uint64_t)(now - s->start_ms);
	t.n_services = s->n;
	t.services = ptr;
	for (size_t i = 0; i < s->n && i < GK_SUP_MAX_SERVICES; i++) {
		const gk_sup_svc *v = &s->svcs[i];
		Gpukmm__ServiceInfo *x = &info[i];
		gpukmm__service_info__init(x);
		ptr[i] = x;
		x->name = (char *)v->conf->name;
		x->state = (char *)gk_sup_state_name(v->state);
		x->has_pid = x->has_restarts = x->has_last_exit_code = x->has_last_signal = true;
		x->has_uptime_ms = x->has_ready = x->has_required = x->has_backoff_ms = true;
		x->pid = v->pid;
		x->restarts = v->restarts;
		x->last_exit_code = v->last_exit_code;
		x->last_signal = v->last_signal;
		x->uptime_ms = v->pid > 0 ? (uint64_t)(now - v->spawned_ms) : 0;
		x->ready = v->state == GK_SUP_READY;
		x->required = v->conf->required;
		x->backoff_ms = v->state == GK_SUP_BACKOFF ? (uint64_t)v->backoff_ms : 0;
		if (v->metrics) {
			x->metrics = v->metrics->families;
			x->n_metrics = v->metrics->n_families;
		}
	}
	closure(&t, closure_data);
}

static void on_control(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_server_dispatch(user);
}

int gk_sup_control_open(gk_sup *s, gk_err *err)
{
	control *c = calloc(1, sizeof(*c));
	if (!c)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	Gpukmm__Control_Service init = GPUKMM__CONTROL__INIT(c_);
	c->svc = init;
	c->sup = s;
	gk_ipc_server *srv = NULL;
	gk_ipc_opts o = { .socket_mode = s->opts.control_socket_mode };
	int rc = gk_ipc_server_open(&srv, s->control_url, &o, err);
	if (!rc)
		rc = gk_ipc_server_add(srv, &c->svc.base, s, NULL, err);
	if (!rc)
		rc = gk_loop_add_fd(s->loop, gk_ipc_server_fd(srv), EPOLLIN, on_control, srv, err);
	if (rc) {
		if (srv)
			gk_ipc_server_close(srv);
		free(c);
		return gk_err_wrap(err, "control socket %s", s->control_url);
	}
	s->control = srv;
	s->control_impl = c;
	return 0;
}

void gk_sup_control_close(gk_sup *s)
{
	if (s->control) {
		if (s->loop)
			gk_loop_del_fd(s->loop, gk_ipc_server_fd(s->control));
		gk_ipc_server_close(s->control);
	}
	free(s->control_impl);
	s->control = NULL;
	s->control_impl = NULL;
}
