/* gpukmm-echo — the example service for the IPC harness and the IPC tests:
 * serves gpukmm.Echo (proto/echo.proto) on --listen. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "echo.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "gpukmm/svc.h"

struct app {
	gk_svc svc;
	gk_echo echo;
	gk_ipc_server *server;
	uint64_t bad_frames, deduped;
};

static void on_server(gk_loop *l, int fd, uint32_t ev, void *user)
{
	struct app *a = user;
	gk_ipc_server_dispatch(a->server);
	gk_ipc_stats st;
	gk_ipc_server_stats(a->server, &st);
	a->bad_frames = st.bad_frames;
	a->deduped = st.deduped;
}

static int set_max_delay(void *user, const char *arg)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);
	if (!*arg || *end || v > 3600000)
		return -1;
	((gk_echo *)user)->max_delay_ms = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	static struct app a;
	gk_err err;
	gk_echo_init(&a.echo);
	const gk_svc_opt extra[] = {
		{ "max-delay-ms", 1, "longest delay Slow accepts (default 60000)", set_max_delay, &a.echo },
		{ 0 },
	};
	int rc = gk_svc_init(&a.svc, "echo", argc, argv, extra, &err);
	if (rc)
		return rc;
	if (!a.svc.addr.listen) {
		GK_ERROR("no address to serve on: give --listen URL (or --runtime-dir)");
		gk_svc_fini(&a.svc);
		return 2;
	}
	gk_metric_counter_var("gpukmm_echo_calls_total", "Echo calls handled.", &a.echo.calls);
	gk_metric_gauge_var("gpukmm_echo_counter", "Value of the Add counter.", &a.echo.counter);
	gk_metric_counter_var("gpukmm_echo_ipc_bad_frames_total", "Undecodable requests dropped.", &a.bad_frames);
	gk_metric_counter_var("gpukmm_echo_ipc_deduped_total", "Resent mutating calls answered from the cache.",
			      &a.deduped);
	if (gk_ipc_server_open(&a.server, a.svc.addr.listen, NULL, &err) != 0 ||
	    gk_ipc_server_add(a.server, &a.echo.service.base, &a.echo, gk_echo_mutating, &err) != 0 ||
	    gk_loop_add_fd(a.svc.loop, gk_ipc_server_fd(a.server), EPOLLIN, on_server, &a, &err) != 0) {
		GK_ERROR("%s", err.msg);
		gk_ipc_server_close(a.server);
		gk_svc_fini(&a.svc);
		return 1;
	}
	GK_INFO("serving gpukmm.Echo on %s", gk_ipc_server_url(a.server));
	gk_svc_ready(&a.svc);
	rc = gk_loop_run(a.svc.loop);
	GK_INFO("stopping");
	gk_loop_del_fd(a.svc.loop, gk_ipc_server_fd(a.server));
	gk_ipc_server_close(a.server);
	gk_svc_fini(&a.svc);
	gk_ipc_fini();
	return rc;
}
