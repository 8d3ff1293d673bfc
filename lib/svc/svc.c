/* gpukmm — the service runtime (see include/gpukmm/svc.h): flags, logging,
 * signals, Control.Ready and heartbeats. */
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "gpukmm/svc.h"
#include "gpukmm/version.h"

#define CONTROL_TIMEOUT_MS 5000
/* From the stop request (SIGTERM/SIGINT, or the supervisor asking) to the
 * process exit: well inside the supervisor's default stop timeout (5 s), so a
 * hung teardown ends as a clean exit, not as a SIGKILL. */
#define STOP_BOUND_MS 3000

enum {
	O_HELP = 'h', O_LOG_FORMAT = 256, O_LOG_LEVEL, O_RUNTIME_DIR, O_CONTROL, O_LISTEN, O_WATCHER,
	O_EVENTS, O_STATUSD, O_KUBECONFIG, O_TOKEN_FILE, O_NAMESPACE, O_HEARTBEAT, O_VERSION, O_EXTRA
};

static const struct {
	const char *name;
	int has_arg;
	int val;
	const char *help;
} common[] = {
	{ "help", 0, O_HELP, "print this help and exit" },
	{ "version", 0, O_VERSION, "print the version and exit" },
	{ "log-format", 1, O_LOG_FORMAT, "text | json (default text, $GPUKMM_LOG_FORMAT)" },
	{ "log-level", 1, O_LOG_LEVEL, "debug | info | warn | error (default info, $GPUKMM_LOG_LEVEL)" },
	{ "runtime-dir", 1, O_RUNTIME_DIR, "directory of the ipc sockets ($GPUKMM_RUNTIME_DIR)" },
	{ "control", 1, O_CONTROL, "supervisor Control address ($GPUKMM_CONTROL)" },
	{ "listen", 1, O_LISTEN, "this service's RPC address ($GPUKMM_LISTEN)" },
	{ "watcher", 1, O_WATCHER, "Watcher RPC address ($GPUKMM_WATCHER)" },
	{ "events", 1, O_EVENTS, "watcher event bus address ($GPUKMM_EVENTS)" },
	{ "statusd", 1, O_STATUSD, "Status RPC address ($GPUKMM_STATUSD)" },
	{ "kubeconfig", 1, O_KUBECONFIG, "kubeconfig file (default: $KUBECONFIG, a ':'-separated list merged like kubectl; then in-cluster)" },
	{ "token-file", 1, O_TOKEN_FILE, "bearer token file ($GPUKMM_TOKEN_FILE)" },
	{ "namespace", 1, O_NAMESPACE, "operator namespace ($OPERATOR_NAMESPACE)" },
	{ "heartbeat-ms", 1, O_HEARTBEAT, "heartbeat interval in ms (default 1000, $GPUKMM_HEARTBEAT_MS)" },
};
#define N_COMMON (sizeof(common) / sizeof(common[0]))

static void usage(FILE *f, const char *name, const gk_svc_opt *extra)
{
	fprintf(f, "usage: gpukmm-%s [OPTIONS]\n\noptions:\n", name);
	for (size_t i = 0; i < N_COMMON; i++)
		fprintf(f, "  --%s%s\n      %s\n", common[i].name, common[i].has_arg ? " VALUE" : "",
			common[i].help);
	for (const gk_svc_opt *o = extra; o && o->name; o++)
		fprintf(f, "  --%s%s\n      %s\n", o->name, o->has_arg ? " VALUE" : "", o->help ? o->help : "");
}

static char *own(gk_svc *svc, char *s)
{
	for (size_t i = 0; i < sizeof(svc->owned) / sizeof(svc->owned[0]); i++)
		if (!svc->owned[i])
			return svc->owned[i] = s;
	free(s);
	return NULL;
}

static const char *dflt(gk_svc *svc, const char *flag, const char *env, const char *file)
{
	if (flag)
		return flag;
	const char *e = env ? getenv(env) : NULL;
	if (e && *e)
		return e;
	if (!file || !svc->addr.runtime_dir)
		return NULL;
	char *s = NULL;
	if (asprintf(&s, "ipc://%s/%s", svc->addr.runtime_dir, file) < 0)
		return NULL;
	return own(svc, s);
}

static int parse_ms(const char *s, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < 10 || v > 3600000)
		return -1;
	*out = (int)v;
	return 0;
}

static int stop_bound_ms(void)
{
	const char *e = getenv("GPUKMM_STOP_BOUND_MS");
	int ms;
	return e && parse_ms(e, &ms) == 0 ? ms : STOP_BOUND_MS;
}

/* ---- bounded stop -------------------------------------------------------------
 * nng 1.5.2 can hang in nng_close / nng_fini (its reaper waits forever for a
 * pipe, nng#1543; no fix in Debian's 1.5.2), and a service stuck there would
 * only end by the supervisor's SIGKILL after its stop timeout: an unclean stop.
 * So once a stop is requested, a watchdog thread waits STOP_BOUND_MS and then
 * logs one line and _exits with the status a clean stop returns (0). A stop
 * that completes disarms it from an atexit handler, registered after the
 * sanitizers' own, so it runs first: LeakSanitizer's exit-time check still
 * runs as usual and is never cut short. The bound can be lowered (tests) with
 * $GPUKMM_STOP_BOUND_MS. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	bool armed, done;
	int64_t deadline_ms;
	char name[64], what[64];
	int code;
} wd = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *watchdog_main(void *arg)
{
	pthread_mutex_lock(&wd.mu);
	while (!wd.done) {
		int64_t left = wd.deadline_ms - mono_ms();
		if (left <= 0)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += left / 1000;
		ts.tv_nsec += (left % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&wd.cv, &wd.mu, &ts);
	}
	bool done = wd.done;
	pthread_mutex_unlock(&wd.mu);
	if (done)
		return NULL;
	GK_ERROR("%s: %s did not finish within %d ms (teardown hung, nng#1543?): exiting %d now", wd.name, wd.what,
		 stop_bound_ms(), wd.code);
	_exit(wd.code);
}

static void watchdog_disarm(void)
{
	pthread_mutex_lock(&wd.mu);
	bool armed = wd.armed;
	wd.done = true;
	pthread_cond_signal(&wd.cv);
	pthread_mutex_unlock(&wd.mu);
	if (armed)
		pthread_join(wd.th, NULL);
	pthread_mutex_lock(&wd.mu);
	wd.armed = false;
	pthread_mutex_unlock(&wd.mu);
}

void gk_exit_bound(const char *name, const char *what, int code)
{
	pthread_mutex_lock(&wd.mu);
	if (wd.armed || wd.done) {
		pthread_mutex_unlock(&wd.mu);
		return;
	}
	snprintf(wd.name, sizeof(wd.name), "%s", name);
	snprintf(wd.what, sizeof(wd.what), "%s", what);
	wd.code = code;
	wd.deadline_ms = mono_ms() + stop_bound_ms();
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wd.cv, &ca);
	pthread_condattr_destroy(&ca);
	/* the thread inherits the loop's signal mask: no signal is delivered to it */
	wd.armed = pthread_create(&wd.th, NULL, watchdog_main, NULL) == 0;
	bool first = wd.armed;
	pthread_mutex_unlock(&wd.mu);
	if (!first)
		GK_WARN("%s: no watchdog for the %s (thread: out of resources)", name, what);
	else
		atexit(watchdog_disarm);
}

static void request_stop(gk_svc *svc, const char *why)
{
	gk_exit_bound(svc->name, "stop", 0);
	if (svc->stopping || !svc->on_stop) {
		if (svc->stopping)
			GK_INFO("%s again: stopping now", why);
		svc->stopping = 1;
		gk_loop_stop(svc->loop, 0);
		return;
	}
	svc->stopping = 1;
	GK_INFO("%s: draining", why);
	svc->on_stop(svc->on_stop_user);
}

static void on_signal(gk_loop *l, int signo, void *user)
{
	request_stop(user, signo == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_control_fd(gk_loop *l, int fd, uint32_t ev, void *user)
{
	gk_svc *svc = user;
	gk_ipc_client_dispatch(svc->control);
}

int gk_svc_init(gk_svc *svc, const char *name, int argc, char **argv, const gk_svc_opt *extra,
		gk_err *err)
{
	/* bounded memory (#21), before any thread starts: nng's threads need no
	 * malloc arenas of their own (each would keep the pages freed in it); big
	 * buffers (snapshot replies, list pages of MBs) always come from mmap and
	 * go back to the system when freed (a fixed threshold turns glibc's dynamic
	 * one off, which moves them into the heap for good after the first free);
	 * a heap whose top is free gives it back past 512 KiB */
	mallopt(M_ARENA_MAX, 2);
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	mallopt(M_TRIM_THRESHOLD, 512 * 1024);
	memset(svc, 0, sizeof(*svc));
	svc->name = name;
	size_t n_extra = 0;
	for (const gk_svc_opt *o = extra; o && o->name; o++)
		n_extra++;
	struct option *lo = calloc(N_COMMON + n_extra + 1, sizeof(*lo));
	if (!lo)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	for (size_t i = 0; i < N_COMMON; i++)
		lo[i] = (struct option){ common[i].name, common[i].has_arg, NULL, common[i].val };
	for (size_t i = 0; i < n_extra; i++)
		lo[N_COMMON + i] = (struct option){ extra[i].name, extra[i].has_arg ? 1 : 0, NULL,
						    O_EXTRA + (int)i };
	const char *f_fmt = NULL, *f_lvl = NULL, *f_hb = NULL;
	gk_svc_addrs fl = { 0 };
	const char *f_kc = NULL, *f_tok = NULL, *f_ns = NULL;
	int rc = 0, c;
	optind = 0; /* full reinitialisation (tests call init more than once) */
	opterr = 0;
	while (rc == 0 && (c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case O_HELP:
			usage(stdout, name, extra);
			free(lo);
			exit(0);
		case O_VERSION:
			printf("gpukmm-%s %s\n", name, gk_version);
			free(lo);
			exit(0);
		case O_LOG_FORMAT: f_fmt = optarg; break;
		case O_LOG_LEVEL: f_lvl = optarg; break;
		case O_RUNTIME_DIR: fl.runtime_dir = optarg; break;
		case O_CONTROL: fl.control = optarg; break;
		case O_LISTEN: fl.listen = optarg; break;
		case O_WATCHER: fl.watcher = optarg; break;
		case O_EVENTS: fl.events = optarg; break;
		case O_STATUSD: fl.statusd = optarg; break;
		case O_KUBECONFIG: f_kc = optarg; break;
		case O_TOKEN_FILE: f_tok = optarg; break;
		case O_NAMESPACE: f_ns = optarg; break;
		case O_HEARTBEAT: f_hb = optarg; break;
		case '?':
		case ':':
			rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s: bad or incomplete option '%s'", name,
					argv[optind - 1]);
			break;
		default: {
			const gk_svc_opt *o = &extra[c - O_EXTRA];
			if (o->fn && o->fn(o->user, optarg) != 0)
				rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s: bad value for --%s%s%s", name,
						o->name, optarg ? ": " : "", optarg ? optarg : "");
		}
		}
	}
	free(lo);
	if (rc == 0 && optind < argc)
		rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s: unexpected argument '%s'", name, argv[optind]);
	int fmt = f_fmt ? gk_log_parse_format(f_fmt) : 0, lvl = f_lvl ? gk_log_parse_level(f_lvl) : 0;
	if (rc == 0 && (fmt < 0 || lvl < 0))
		rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s: bad --log-%s '%s'", name,
				fmt < 0 ? "format" : "level", fmt < 0 ? f_fmt : f_lvl);
	svc->heartbeat_ms = 1000;
	if (!f_hb)
		f_hb = getenv("GPUKMM_HEARTBEAT_MS");
	if (rc == 0 && f_hb && parse_ms(f_hb, &svc->heartbeat_ms) != 0)
		rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s: bad heartbeat interval '%s' (10..3600000 ms)",
				name, f_hb);
	if (rc) {
		fprintf(stderr, "%s\n", err ? err->msg : "bad usage");
		usage(stderr, name, extra);
		gk_svc_fini(svc);
		return 2;
	}
	gk_log_init_env(name);
	if (f_fmt || f_lvl) {
		int ef = gk_log_parse_format(getenv("GPUKMM_LOG_FORMAT")), el = gk_log_parse_level(getenv("GPUKMM_LOG_LEVEL"));
		gk_log_init(name, f_fmt ? fmt : (ef < 0 ? GK_LOG_TEXT : ef), f_lvl ? lvl : (el < 0 ? GK_LOG_INFO : el));
	}
	svc->addr.runtime_dir = dflt(svc, fl.runtime_dir, "GPUKMM_RUNTIME_DIR", NULL);
	svc->addr.control = dflt(svc, fl.control, "GPUKMM_CONTROL", "control.sock");
	char file[96];
	snprintf(file, sizeof(file), "%s.sock", name);
	svc->addr.listen = dflt(svc, fl.listen, "GPUKMM_LISTEN", file);
	svc->addr.watcher = dflt(svc, fl.watcher, "GPUKMM_WATCHER", "watcher.sock");
	svc->addr.events = dflt(svc, fl.events, "GPUKMM_EVENTS", "events.sock");
	svc->addr.statusd = dflt(svc, fl.statusd, "GPUKMM_STATUSD", "statusd.sock");
	/* only the flag: $KUBECONFIG is a list, merged by gk_kube_config_load */
	svc->kubeconfig = f_kc;
	svc->token_file = dflt(svc, f_tok, "GPUKMM_TOKEN_FILE", NULL);
	gk_kube_config_token_override(svc->token_file); /* every API client of this service */
	svc->ns = dflt(svc, f_ns, "OPERATOR_NAMESPACE", NULL);
	if (!svc->ns)
		svc->ns = "intel-gpu-base-operator";

	int code;
	signal(SIGPIPE, SIG_IGN);
	/* signals first: the mask must be in place before nng starts threads */
	if ((code = gk_loop_new(&svc->loop, err)) != 0 ||
	    (code = gk_loop_signal(svc->loop, SIGTERM, on_signal, svc, err)) != 0 ||
	    (code = gk_loop_signal(svc->loop, SIGINT, on_signal, svc, err)) != 0)
		goto fail;
	if (svc->addr.control) {
		gk_ipc_opts o = { .reconnect_min_ms = 10, .reconnect_max_ms = 500 };
		if ((code = gk_ipc_client_open(&svc->control, svc->addr.control, &o, err)) != 0 ||
		    (code = gk_loop_add_fd(svc->loop, gk_ipc_client_fd(svc->control), EPOLLIN, on_control_fd,
					   svc, err)) != 0)
			goto fail;
	}
	return 0;
fail:
	GK_ERROR("%s: %s", name, err ? err->msg : "init failed");
	gk_svc_fini(svc);
	return code;
}

void gk_svc_set_counters(gk_svc *svc, const gk_svc_counter *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char name[160];
		snprintf(name, sizeof(name), "gpukmm_%s", c[i].name);
		size_t l = strlen(name);
		bool total = l > 6 && strcmp(name + l - 6, "_total") == 0;
		if (total)
			gk_metric_counter_var(name, c[i].help, c[i].value);
		else
			gk_metric_gauge_var(name, c[i].help, c[i].value);
	}
}

void gk_svc_on_stop(gk_svc *svc, void (*fn)(void *user), void *user)
{
	svc->on_stop = fn;
	svc->on_stop_user = user;
}

static void send_ready(gk_svc *svc);
static void send_heartbeat(gk_svc *svc);

static void on_hb_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_svc *svc = user;
	svc->hb_timer = 0;
	if (svc->ready_sent)
		send_heartbeat(svc);
	else
		send_ready(svc);
}

static void schedule(gk_svc *svc)
{
	if (!svc->finishing && !svc->hb_timer)
		svc->hb_timer = gk_loop_timer(svc->loop, svc->heartbeat_ms, on_hb_timer, svc);
}

static void on_ready_done(void *user, int code, ProtobufCMessage *reply, const char *errmsg)
{
	gk_svc *svc = user;
	svc->ready_inflight = 0;
	gk_ipc_free(reply);
	if (svc->finishing)
		return;
	if (code == GK_OK) {
		svc->ready_sent = 1;
		GK_INFO("ready (told the supervisor)");
	} else {
		GK_WARN("Control.Ready failed: %s: %s (retrying)", gk_code_name(code), errmsg);
	}
	schedule(svc);
}

static void send_ready(gk_svc *svc)
{
	if (svc->ready_inflight)
		return;
	Gpukmm__ReadyRequest r = GPUKMM__READY_REQUEST__INIT;
	r.service = (char *)svc->name;
	r.has_pid = 1;
	r.pid = (int32_t)getpid();
	gk_err e;
	if (gk_ipc_call_async(svc->control, &gpukmm__control__descriptor, "Ready", &r.base,
			      CONTROL_TIMEOUT_MS, on_ready_done, svc, &e) != 0) {
		GK_WARN("Control.Ready: %s", e.msg);
		schedule(svc);
		return;
	}
	svc->ready_inflight = 1;
}

static void on_hb_done(void *user, int code, ProtobufCMessage *reply, const char *errmsg)
{
	gk_svc *svc = user;
	svc->hb_inflight = 0;
	if (svc->finishing) {
		gk_ipc_free(reply);
		return;
	}
	if (code == GK_OK) {
		svc->heartbeats_ok++;
		Gpukmm__HeartbeatReply *r = (Gpukmm__HeartbeatReply *)reply;
		if (r->has_stop_requested && r->stop_requested)
			request_stop(svc, "supervisor asked to stop");
	} else {
		svc->heartbeats_failed++;
		GK_DEBUG("Control.Heartbeat failed: %s: %s", gk_code_name(code), errmsg);
	}
	gk_ipc_free(reply);
}

static void send_heartbeat(gk_svc *svc)
{
	schedule(svc);
	if (svc->hb_inflight)
		return; /* the previous one is still out: don't pile up */
	Gpukmm__HeartbeatRequest r = GPUKMM__HEARTBEAT_REQUEST__INIT;
	r.service = (char *)svc->name;
	r.has_pid = 1;
	r.pid = (int32_t)getpid();
	Gpukmm__MetricSet *ms = gk_metrics_snapshot(gk_metrics_default());
	if (ms) {
		r.metrics = ms->families;
		r.n_metrics = ms->n_families;
	}
	gk_err e;
	int timeout = svc->heartbeat_ms < CONTROL_TIMEOUT_MS ? svc->heartbeat_ms : CONTROL_TIMEOUT_MS;
	int rc = gk_ipc_call_async(svc->control, &gpukmm__control__descriptor, "Heartbeat", &r.base, timeout,
				   on_hb_done, svc, &e);
	if (ms)
		gpukmm__metric_set__free_unpacked(ms, NULL);
	if (rc != 0) {
		GK_WARN("Control.Heartbeat: %s", e.msg);
		return;
	}
	svc->hb_inflight = 1;
}

int gk_svc_ready(gk_svc *svc)
{
	if (!svc->control) {
		if (!svc->ready_sent)
			GK_INFO("ready (standalone: no supervisor)");
		svc->ready_sent = 1;
		return 0;
	}
	if (!svc->ready_sent)
		send_ready(svc);
	return 0;
}

void gk_svc_fini(gk_svc *svc)
{
	svc->finishing = 1;
	if (svc->loop && svc->hb_timer)
		gk_loop_cancel(svc->loop, svc->hb_timer);
	svc->hb_timer = 0;
	if (svc->control) {
		if (svc->loop)
			gk_loop_del_fd(svc->loop, gk_ipc_client_fd(svc->control));
		gk_ipc_client_close(svc->control);
		svc->control = NULL;
	}
	gk_loop_free(svc->loop);
	svc->loop = NULL;
	for (size_t i = 0; i < sizeof(svc->owned) / sizeof(svc->owned[0]); i++) {
		free(svc->owned[i]);
		svc->owned[i] = NULL;
	}
}
