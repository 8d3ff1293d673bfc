/* gpukmm-prober — probes the node (lib/probe) and sends a gpukmm.NodeReport to
 * statusd over RPC gpukmm.Status.ReportNode: on start, every --interval-ms,
 * and soon after an inotify event on the inputs (see watch.h: sysfs/procfs
 * stay silent, so the interval is the real fallback). Unchanged reports are
 * not resent (fingerprint), but restated every interval (a restarted statusd
 * holds none; it ignores one it holds); a failed send is retried with backoff, the latest
 * report winning (reporter.h). Holds no API credentials; every file it reads
 * is treated as untrusted (lib/probe caps and validates each read). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "gpukmm/probe.h"
#include "gpukmm/svc.h"
#include "reporter.h"
#include "watch.h"

struct app {
	gk_svc svc;
	gk_probe_opts po;
	char node_name[256];
	int64_t interval_ms, debounce_ms, retry_min_ms, retry_max_ms, send_timeout_ms;
	gk_reporter rep;
	gk_pwatch watch;
	gk_ipc_client *statusd;
	gk_timer_id interval_timer, debounce_timer, retry_timer;
	uint64_t probe_failures, problems, inotify_events;
	uint64_t rnd;
	int send_failing;
	int closing;
};

static int opt_ms(const char *arg, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v = strtoll(arg, &end, 10);
	if (!*arg || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}
static int opt_root(void *u, const char *arg) { ((struct app *)u)->po.root = arg; return 0; }
static int opt_module(void *u, const char *arg)
{
	if (!gk_probe_valid_module_name(arg))
		return -1;
	((struct app *)u)->po.module = arg;
	return 0;
}
static int opt_node(void *u, const char *arg)
{
	struct app *a = u;
	if (!*arg || strlen(arg) >= sizeof a->node_name)
		return -1;
	snprintf(a->node_name, sizeof a->node_name, "%s", arg);
	return 0;
}
static int opt_dump(void *u, const char *arg) { ((struct app *)u)->po.pci_dump = arg; return 0; }
static int opt_interval(void *u, const char *arg) { return opt_ms(arg, 100, 86400000, &((struct app *)u)->interval_ms); }
static int opt_debounce(void *u, const char *arg) { return opt_ms(arg, 0, 60000, &((struct app *)u)->debounce_ms); }
static int opt_rmin(void *u, const char *arg) { return opt_ms(arg, 10, 600000, &((struct app *)u)->retry_min_ms); }
static int opt_rmax(void *u, const char *arg) { return opt_ms(arg, 10, 3600000, &((struct app *)u)->retry_max_ms); }
static int opt_stimeout(void *u, const char *arg) { return opt_ms(arg, 50, 600000, &((struct app *)u)->send_timeout_ms); }

static uint64_t next_rnd(struct app *a)
{
	a->rnd ^= a->rnd << 13;
	a->rnd ^= a->rnd >> 7;
	a->rnd ^= a->rnd << 17;
	return a->rnd;
}

static void start_send(struct app *a);

static void on_retry(gk_loop *l, gk_timer_id id, void *user)
{
	struct app *a = user;
	a->retry_timer = 0;
	if (gk_reporter_retry_due(&a->rep) == GK_REP_SEND)
		start_send(a);
}

static void after_send(struct app *a, int code, const char *errmsg)
{
	int64_t d = gk_reporter_done(&a->rep, code);
	if (a->closing)
		return; /* CANCELLED by our own close: nothing to retry or report */
	if (code) {
		if (!a->send_failing)
			GK_WARN("sending the node report to statusd failed: %s (%s); retrying with backoff",
				errmsg ? errmsg : "?", gk_code_name(code));
		a->send_failing = 1;
	} else if (a->send_failing) {
		GK_INFO("statusd reachable again: node report generation %llu delivered",
			(unsigned long long)a->rep.generation);
		a->send_failing = 0;
	}
	if (d == 0) {
		start_send(a);
	} else if (d > 0) {
		int64_t jitter = d / 5 ? (int64_t)(next_rnd(a) % (uint64_t)(d / 5)) : 0; /* +0..20% */
		a->retry_timer = gk_loop_timer(a->svc.loop, d + jitter, on_retry, a);
	}
}

static void on_sent(void *user, int code, ProtobufCMessage *reply, const char *errmsg)
{
	if (reply)
		gk_ipc_free(reply);
	after_send(user, code, errmsg);
}

static void log_report(const Gpukmm__NodeReport *r)
{
	size_t vfs = 0;
	for (size_t i = 0; i < r->n_gpus; i++)
		vfs += r->gpus[i]->is_vf;
	GK_INFO("node report generation %llu: %zu GPUs (%zu VFs), %s %s, can unload: %s, %zu problems",
		(unsigned long long)r->generation, r->n_gpus - vfs, vfs, r->module_name ? r->module_name : "?",
		r->module && r->module->loaded ? "loaded" : "not loaded",
		r->can_unload == GPUKMM__TRI_STATE__TRI_YES  ? "yes"
		: r->can_unload == GPUKMM__TRI_STATE__TRI_NO ? "no"
							     : "unknown",
		r->n_problems);
}

static void start_send(struct app *a)
{
	const Gpukmm__NodeReport *r = gk_reporter_take_send(&a->rep);
	if (!r)
		return;
	log_report(r);
	if (!a->statusd) { /* standalone without statusd: the log line is the report */
		after_send(a, GK_OK, NULL);
		return;
	}
	gk_err err = { 0 };
	if (gk_ipc_call_async(a->statusd, &gpukmm__status__descriptor, "ReportNode", &r->base,
			      (int)a->send_timeout_ms, on_sent, a, &err) != 0)
		after_send(a, err.code ? err.code : GK_INTERNAL, err.msg);
}

/* What the node has and runs, for the node dashboard and alerts. */
static void node_metrics(const Gpukmm__NodeReport *r)
{
	static gk_metric *gpus, *mod;
	if (!gpus) {
		gpus = gk_metric_gauge("gpukmm_node_gpus",
				       "Intel GPUs of this node: physical functions (pf) and SR-IOV virtual functions (vf).",
				       "function");
		mod = gk_metric_gauge("gpukmm_node_module_loaded",
				      "1 when the node's GPU kernel module is loaded, with its source: oot "
				      "(out-of-tree), in-tree, builtin or unknown (none: not loaded).",
				      "module,source");
	}
	size_t vfs = 0;
	for (size_t i = 0; i < r->n_gpus; i++)
		vfs += r->gpus[i]->is_vf;
	gk_metric_set(gpus, (double)(r->n_gpus - vfs), GK_LV("pf"));
	gk_metric_set(gpus, (double)vfs, GK_LV("vf"));
	static const char *const src[] = { "unknown", "none", "in-tree", "oot", "builtin" };
	const Gpukmm__KernelModuleInfo *m = r->module;
	int s = m && m->has_source && m->source >= 0 && m->source < 5 ? (int)m->source : 0;
	const char *name = r->module_name ? r->module_name : "";
	bool loaded = m && m->loaded;
	gk_metric_remove_matching(mod, "module", name);
	gk_metric_set(mod, loaded, GK_LV(name, loaded ? src[s] : "none"));
}

/* restate: the interval's probe tells statusd the state again even when
 * unchanged (a restarted statusd lost it; reporter.h) */
static void do_probe(struct app *a, bool restate)
{
	Gpukmm__NodeReport *r = NULL;
	gk_err err = { 0 };
	if (gk_probe_run(&a->po, &r, &err) != 0) {
		a->probe_failures++;
		GK_ERROR("probe failed: %s", err.msg);
		return;
	}
	a->problems = r->n_problems;
	node_metrics(r);
	gk_pwatch_arm(&a->watch, a->po.root ? a->po.root : "/", a->po.module ? a->po.module : "xe", r);
	if (gk_reporter_offer(&a->rep, r, restate) == GK_REP_SEND)
		start_send(a);
}

static void on_interval(gk_loop *l, gk_timer_id id, void *user)
{
	struct app *a = user;
	do_probe(a, true);
	a->interval_timer = gk_loop_timer(l, a->interval_ms, on_interval, a);
}

static void on_debounce(gk_loop *l, gk_timer_id id, void *user)
{
	struct app *a = user;
	a->debounce_timer = 0;
	do_probe(a, false);
}

static void on_inotify(gk_loop *l, int fd, uint32_t ev, void *user)
{
	struct app *a = user;
	if (gk_pwatch_drain(&a->watch) > 0 && !a->debounce_timer)
		a->debounce_timer = gk_loop_timer(l, a->debounce_ms, on_debounce, a);
	a->inotify_events = a->watch.events;
}

static void on_client(gk_loop *l, int fd, uint32_t ev, void *user)
{
	gk_ipc_client_dispatch(((struct app *)user)->statusd);
}

int main(int argc, char **argv)
{
	static struct app a;
	a.interval_ms = 60000;
	a.debounce_ms = 200;
	a.retry_min_ms = 100;
	a.retry_max_ms = 30000;
	a.send_timeout_ms = 5000;
	a.watch.fd = -1;
	const gk_svc_opt extra[] = {
		{ "root", 1, "read sysfs/procfs/lib/modules below DIR (default /)", opt_root, &a },
		{ "module", 1, "the GPU kernel module to report on (default xe)", opt_module, &a },
		{ "node-name", 1, "this node's name (default $NODE_NAME, else the hostname)", opt_node, &a },
		{ "pci-dump", 1, "read PCI from an `lspci -x` dump instead of sysfs (tests)", opt_dump, &a },
		{ "interval-ms", 1, "probe period (default 60000; sysfs has no change events)", opt_interval, &a },
		{ "debounce-ms", 1, "delay between an inotify event and the probe (default 200)", opt_debounce, &a },
		{ "retry-min-ms", 1, "first retry delay when statusd is down (default 100)", opt_rmin, &a },
		{ "retry-max-ms", 1, "longest retry delay (default 30000)", opt_rmax, &a },
		{ "send-timeout-ms", 1, "deadline of one ReportNode call (default 5000)", opt_stimeout, &a },
		{ 0 },
	};
	gk_err err = { 0 };
	int rc = gk_svc_init(&a.svc, "prober", argc, argv, extra, &err);
	if (rc)
		return rc;
	if (!a.node_name[0]) {
		const char *env = getenv("NODE_NAME");
		if (env && *env && strlen(env) < sizeof a.node_name)
			snprintf(a.node_name, sizeof a.node_name, "%s", env);
		else if (gethostname(a.node_name, sizeof a.node_name - 1) != 0)
			snprintf(a.node_name, sizeof a.node_name, "unknown");
	}
	a.po.node_name = a.node_name;
	a.rnd = (((uint64_t)getpid() * 0x9e3779b97f4a7c15ull) ^ (uint64_t)time(NULL)) | 1;
	gk_reporter_init(&a.rep, a.retry_min_ms, a.retry_max_ms);

	gk_metric_counter_var("gpukmm_prober_probes_total", "Probes run.", &a.rep.probes);
	gk_metric_counter_var("gpukmm_prober_reports_sent_total", "Reports statusd acknowledged.", &a.rep.sent);
	gk_metric_counter_var("gpukmm_prober_report_failures_total", "Failed sends (retried).", &a.rep.failed);
	gk_metric_counter_var("gpukmm_prober_reports_unchanged_total", "Probes with nothing new to send.",
			      &a.rep.unchanged);
	gk_metric_counter_var("gpukmm_prober_reports_replaced_total", "Reports superseded before they were sent.",
			      &a.rep.replaced);
	gk_metric_counter_var("gpukmm_prober_reports_restated_total",
			      "Unchanged reports told statusd again (every interval: a restarted statusd lost them).",
			      &a.rep.restated);
	gk_metric_counter_var("gpukmm_prober_probe_failures_total", "Probes that could not run.", &a.probe_failures);
	gk_metric_gauge_var("gpukmm_prober_problems", "Unreadable inputs in the last report.", &a.problems);
	gk_metric_counter_var("gpukmm_prober_inotify_events_total", "Inotify events seen.", &a.inotify_events);

	if (a.svc.addr.statusd) {
		if (gk_ipc_client_open(&a.statusd, a.svc.addr.statusd, NULL, &err) != 0 ||
		    gk_loop_add_fd(a.svc.loop, gk_ipc_client_fd(a.statusd), EPOLLIN, on_client, &a, &err) != 0) {
			GK_ERROR("statusd %s: %s", a.svc.addr.statusd, err.msg);
			rc = 1;
			goto out;
		}
	} else {
		GK_WARN("no --statusd: reports are only logged");
	}
	if (gk_pwatch_open(&a.watch, &err) != 0)
		GK_WARN("%s: changes are seen only every %lld ms", err.msg, (long long)a.interval_ms);
	else if (gk_loop_add_fd(a.svc.loop, a.watch.fd, EPOLLIN, on_inotify, &a, &err) != 0)
		GK_WARN("inotify: %s", err.msg);

	GK_INFO("probing %s for module %s every %lld ms, node %s", a.po.root ? a.po.root : "/",
		a.po.module ? a.po.module : "xe", (long long)a.interval_ms, a.node_name);
	do_probe(&a, false);
	a.interval_timer = gk_loop_timer(a.svc.loop, a.interval_ms, on_interval, &a);
	gk_svc_ready(&a.svc);
	rc = gk_loop_run(a.svc.loop);
out:
	GK_INFO("stopping");
	a.closing = 1;
	if (a.statusd) {
		gk_loop_del_fd(a.svc.loop, gk_ipc_client_fd(a.statusd));
		gk_ipc_client_close(a.statusd);
	}
	if (a.watch.fd >= 0)
		gk_loop_del_fd(a.svc.loop, a.watch.fd);
	gk_pwatch_close(&a.watch);
	gk_reporter_fini(&a.rep);
	gk_svc_fini(&a.svc);
	gk_ipc_fini();
	GK_INFO("stopped (exit %d)", rc);
	return rc;
}
