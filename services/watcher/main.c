/* gpukmm-watcher — the single reader of the Kubernetes API (DESIGN.md §1, §2):
 * discovery, list+watch of the kinds gpukmm needs, typed cache, events on the
 * bus, Watcher.Snapshot/Get, leader election on a Lease.
 *
 *   gpukmm-watcher --kubeconfig F --listen URL --events URL [--leader-elect]
 *                  [--lease-name N] [--lease-duration S] [--renew-deadline S]
 *                  [--retry-period S] [--identity ID] [--discovery-interval S]
 *                  [--qps Q] [--burst B]
 * (plus the common flags of lib/svc). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "gpukmm/ipc.h"
#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "gpukmm/svc.h"
#include "watcher.h"

struct app {
	gk_svc svc;
	wr w;
	wr_opts o;
	gk_ipc_server *srv;
	gk_ipc_pub *pub;
	gk_kube_client *kc, *lc;
	double qps;
	bool qps_set; /* --qps given: the limit stays, whatever the server applies */
	int burst;
	uint64_t rss_kb;
};

static int parse_secs(const char *arg, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(arg, &end);
	if (!*arg || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int opt_leader(void *u, const char *a) { ((struct app *)u)->o.leader_elect = true; return 0; }
static int opt_lease_name(void *u, const char *a) { ((struct app *)u)->o.lease_name = a; return 0; }
static int opt_identity(void *u, const char *a) { ((struct app *)u)->o.identity = a; return 0; }
#define SECS_OPT(fn, field)                                              \
	static int fn(void *u, const char *a)                            \
	{                                                                \
		double v;                                                \
		if (parse_secs(a, 0.05, 3600, &v))                       \
			return -1;                                       \
		((struct app *)u)->field = (int64_t)(v * 1000);          \
		return 0;                                                \
	}
SECS_OPT(opt_lease_dur, o.lease.lease_ms)
SECS_OPT(opt_renew, o.lease.renew_deadline_ms)
SECS_OPT(opt_retry, o.lease.retry_ms)
SECS_OPT(opt_disc, o.discovery_ms)
SECS_OPT(opt_disc_confirm, o.discovery_confirm_ms)
static int opt_qps(void *u, const char *a)
{
	double v;
	if (parse_secs(a, -1, 100000, &v))
		return -1;
	((struct app *)u)->qps = v;
	((struct app *)u)->qps_set = true;
	return 0;
}
static int opt_burst(void *u, const char *a)
{
	double v;
	if (parse_secs(a, 1, 100000, &v))
		return -1;
	((struct app *)u)->burst = (int)v;
	return 0;
}
static int opt_watch_timeout(void *u, const char *a)
{
	double v;
	if (parse_secs(a, 1, 3600, &v))
		return -1;
	((struct app *)u)->o.watch_min_timeout_s = (int)v;
	((struct app *)u)->o.watch_max_timeout_s = (int)(v * 2);
	return 0;
}

static void on_server(gk_loop *l, int fd, uint32_t ev, void *user)
{
	gk_ipc_server_dispatch(((struct app *)user)->srv);
}

static void on_ready(void *user)
{
	gk_svc_ready(&((struct app *)user)->svc);
}

static void on_stop(void *user)
{
	struct app *a = user;
	wr_release(&a->w); /* a successor takes over at once, not after the lease */
	gk_loop_stop(a->svc.loop, 0);
}

int main(int argc, char **argv)
{
	static struct app a;
	gk_err err = {0};
	/* one thread (ours) allocates the cache; nng's threads need no arenas of
	 * their own (each would keep its freed pages): bounded memory */
	mallopt(M_ARENA_MAX, 2);
	/* big buffers (list pages, snapshot replies of MBs) always come from mmap
	 * and go back to the system when freed: a fixed threshold turns off
	 * glibc's dynamic one, which would move them into the heap for good
	 * after the first one was freed */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	mallopt(M_TRIM_THRESHOLD, 512 * 1024);
	a.qps = 20;
	a.burst = 40;
	const gk_svc_opt extra[] = {
		{"leader-elect", 0, "elect a leader through a coordination.k8s.io Lease", opt_leader, &a},
		{"lease-name", 1, "Lease name (default gpukmm-controller)", opt_lease_name, &a},
		{"lease-duration", 1, "seconds a lease lasts (default 15)", opt_lease_dur, &a},
		{"renew-deadline", 1, "seconds the leader retries renewing (default 10)", opt_renew, &a},
		{"retry-period", 1, "seconds between lease attempts (default 2)", opt_retry, &a},
		{"identity", 1, "this instance's identity (default hostname_pid)", opt_identity, &a},
		{"discovery-interval", 1, "seconds between API discovery checks (default 10)", opt_disc, &a},
		{"discovery-confirm", 1,
		 "seconds an API must stay absent (in 3 discovery reads at least) before it is believed gone (default 20)",
		 opt_disc_confirm, &a},
		{"qps", 1,
		 "client-side requests per second (default 20 until the API server shows API Priority and "
		 "Fairness, then none; a value given here always holds; -1 unlimited)",
		 opt_qps, &a},
		{"burst", 1, "client-side burst (default 40)", opt_burst, &a},
		{"watch-timeout", 1, "watch timeoutSeconds minimum, randomised up to 2x (default 300)",
		 opt_watch_timeout, &a},
		{0},
	};
	int rc = gk_svc_init(&a.svc, "watcher", argc, argv, extra, &err);
	if (rc)
		return rc;
	a.o.ns = a.svc.ns;

	gk_kube_config cfg;
	if (gk_kube_config_load(&cfg, a.svc.kubeconfig, &err)) {
		GK_ERROR("%s", err.msg);
		gk_svc_fini(&a.svc);
		return 1;
	}
	gk_kube_opts ko = {.qps = a.qps, .burst = a.burst, .qps_until_apf = !a.qps_set,
			   .user_agent = "gpukmm-watcher"};
	gk_kube_opts lo = {.qps = -1, .timeout_ms = 5000, .connect_timeout_ms = 2000,
			   .user_agent = "gpukmm-watcher/leader-election"};
	if (gk_kube_client_new(&a.kc, &cfg, &ko, &err) || gk_kube_client_new(&a.lc, &cfg, &lo, &err)) {
		GK_ERROR("%s", err.msg);
		gk_kube_config_free(&cfg);
		gk_kube_client_free(a.kc);
		gk_svc_fini(&a.svc);
		return 1;
	}
	gk_kube_config_free(&cfg);

	const char *listen = a.svc.addr.listen ? a.svc.addr.listen : a.svc.addr.watcher;
	if (listen && (gk_ipc_server_open(&a.srv, listen, NULL, &err) ||
		       gk_loop_add_fd(a.svc.loop, gk_ipc_server_fd(a.srv), EPOLLIN, on_server, &a, &err)))
		goto fail;
	if (a.svc.addr.events && gk_ipc_pub_open(&a.pub, a.svc.addr.events, NULL, &err))
		goto fail;
	if (!listen)
		GK_WARN("no --listen/--watcher address: Watcher RPC not served");
	if (!a.pub)
		GK_WARN("no --events address: events not published");
	if (wr_init(&a.w, &a.o, a.svc.loop, a.kc, a.lc, a.pub, a.srv, &err))
		goto fail;
	a.w.on_ready = on_ready;
	a.w.on_ready_user = &a;
	gk_metric_counter_var("gpukmm_watcher_events_total", "Object events applied to the cache.", &a.w.c_events);
	gk_metric_counter_var("gpukmm_watcher_published_total", "Events published on the bus.", &a.w.c_published);
	gk_metric_counter_var("gpukmm_watcher_errors_total", "API errors (each retried with backoff).", &a.w.c_errors);
	gk_metric_counter_var("gpukmm_watcher_snapshots_refused_total",
			      "Snapshots refused because they were larger than the caller can receive.", &a.w.c_snapshots_refused);
	gk_metric_counter_var("gpukmm_watcher_convert_errors_total", "Objects whose JSON did not convert (ignored).",
			      &a.w.c_convert_errors);
	gk_metric_gauge_var("gpukmm_watcher_unconfirmed_topics", "Topics whose state the watcher cannot vouch for "
			    "now (ARCHITECTURE.md §4; the log says why).", &a.w.c_unconfirmed);
	gk_metric_gauge_var("gpukmm_leader", "1 while this instance holds the leader Lease (always 1 without "
			    "leader election).", &a.w.c_leader);
	gk_metric *cached = gk_metric_gauge("gpukmm_watcher_cache_objects", "Objects in the watcher's cache, by kind "
					    "(pod: only pods that request a GPU).", "kind");
	for (int i = 0; i < WT_N; i++)
		gk_metric_bind(cached, &a.w.c_size[i], GK_LV(wr_topic_names[i]));
	gk_svc_on_stop(&a.svc, on_stop, &a);
	if (a.srv)
		GK_INFO("serving gpukmm.Watcher on %s", gk_ipc_server_url(a.srv));
	if (a.pub)
		GK_INFO("publishing events on %s", gk_ipc_pub_url(a.pub));
	wr_start(&a.w, &err);
	rc = gk_loop_run(a.svc.loop);
	GK_INFO("stopping");
	wr_fini(&a.w);
	if (a.srv) {
		gk_loop_del_fd(a.svc.loop, gk_ipc_server_fd(a.srv));
		gk_ipc_server_close(a.srv);
	}
	gk_ipc_pub_close(a.pub);
	gk_kube_client_free(a.kc);
	gk_kube_client_free(a.lc);
	gk_svc_fini(&a.svc);
	gk_ipc_fini();
	return rc;
fail:
	GK_ERROR("%s", err.msg);
	if (a.srv)
		gk_ipc_server_close(a.srv);
	gk_ipc_pub_close(a.pub);
	gk_kube_client_free(a.kc);
	gk_kube_client_free(a.lc);
	gk_svc_fini(&a.svc);
	return 1;
}
