/* lib/svc: flags and environment, SIGTERM handling, and gpukmm-echo talking to
 * a fake supervisor Control service: Ready (also when the supervisor comes up
 * late), heartbeats with the metrics registry, stop_requested. */
#include <signal.h>
#include <sys/wait.h>

#include "control.pb-c.h"
#include "gpukmm/svc.h"
#include "harness.h"

typedef struct fake {
	Gpukmm__Control_Service svc;
	pthread_mutex_t mu;
	int ready;
	int ready_pid;
	char ready_name[32];
	int heartbeats;
	int hb_counters;
	uint64_t echo_calls;
	int stop;
} fake;

static void ctl_ready(Gpukmm__Control_Service *s, const Gpukmm__ReadyRequest *in, Gpukmm__Empty_Closure cl, void *cd)
{
	fake *f = (fake *)s;
	pthread_mutex_lock(&f->mu);
	f->ready++;
	f->ready_pid = in->pid;
	snprintf(f->ready_name, sizeof(f->ready_name), "%s", in->service ? in->service : "");
	pthread_mutex_unlock(&f->mu);
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	cl(&e, cd);
}

static void ctl_heartbeat(Gpukmm__Control_Service *s, const Gpukmm__HeartbeatRequest *in,
			  Gpukmm__HeartbeatReply_Closure cl, void *cd)
{
	fake *f = (fake *)s;
	Gpukmm__HeartbeatReply r = GPUKMM__HEARTBEAT_REPLY__INIT;
	pthread_mutex_lock(&f->mu);
	f->heartbeats++;
	f->hb_counters = (int)in->n_metrics;
	for (size_t i = 0; i < in->n_metrics; i++)
		if (!strcmp(in->metrics[i]->name, "gpukmm_echo_calls_total") && in->metrics[i]->n_samples == 1)
			f->echo_calls = (uint64_t)in->metrics[i]->samples[0]->value;
	r.has_stop_requested = 1;
	r.stop_requested = f->stop;
	pthread_mutex_unlock(&f->mu);
	cl(&r, cd);
}

static void ctl_list(Gpukmm__Control_Service *s, const Gpukmm__Empty *in, Gpukmm__ServiceTable_Closure cl, void *cd)
{
	Gpukmm__ServiceTable t = GPUKMM__SERVICE_TABLE__INIT;
	cl(&t, cd);
}

static fake F;
static th_server ctl;

static int get(int *field)
{
	pthread_mutex_lock(&F.mu);
	int v = *field;
	pthread_mutex_unlock(&F.mu);
	return v;
}

static void start_control(void)
{
	F = (fake){ .svc = GPUKMM__CONTROL__INIT(ctl_) };
	pthread_mutex_init(&F.mu, NULL);
	th_server_start(&ctl, &F.svc.base, &F, NULL, NULL);
}

#define WAIT_FOR(cond, ms)                                               \
	do {                                                             \
		int64_t end_ = th_ms() + (ms);                           \
		while (!(cond) && th_ms() < end_)                        \
			poll(NULL, 0, 10);                               \
	} while (0)

static int wait_exit(pid_t pid, int ms)
{
	int64_t end = th_ms() + ms;
	int st;
	while (th_ms() < end) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		poll(NULL, 0, 10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

Test(svc, echo_reports_ready_heartbeats_and_obeys_stop, .timeout = 30)
{
	start_control();
	char listen[160], control[160];
	snprintf(listen, sizeof(listen), "--listen=ipc://%s/echo.sock", ctl.dir);
	snprintf(control, sizeof(control), "--control=%s", ctl.url);
	char *argv[] = { "gpukmm-echo", listen, control, "--heartbeat-ms=50", "--log-level=warn", NULL };
	pid_t pid = th_spawn("GPUKMM_BIN", "gpukmm-echo", argv, NULL);
	WAIT_FOR(get(&F.ready) > 0, 10000);
	cr_assert_eq(get(&F.ready), 1);
	cr_assert_eq(get(&F.ready_pid), pid);
	cr_assert_str_eq(F.ready_name, "echo");
	WAIT_FOR(get(&F.heartbeats) >= 3, 10000);
	cr_assert_geq(get(&F.heartbeats), 3);
	cr_assert_eq(get(&F.hb_counters), 4 + 1, "echo's 4 families and gpukmm_metrics_series_dropped_total");
	pthread_mutex_lock(&F.mu);
	F.stop = 1;
	pthread_mutex_unlock(&F.mu);
	cr_assert_eq(wait_exit(pid, 5000), 0, "echo must exit 0 when the supervisor asks");
	th_server_stop(&ctl);
}

Test(svc, ready_is_retried_until_the_supervisor_answers, .timeout = 30)
{
	/* echo first, with --runtime-dir: control and listen addresses derive from it */
	char dir[64];
	th_tmpdir(dir, sizeof(dir));
	char rd[96];
	snprintf(rd, sizeof(rd), "--runtime-dir=%s", dir);
	char *argv[] = { "gpukmm-echo", rd, "--heartbeat-ms=50", "--log-level=error", NULL };
	pid_t pid = th_spawn("GPUKMM_BIN", "gpukmm-echo", argv, NULL);
	/* its socket appears at <dir>/echo.sock */
	char sock[128];
	snprintf(sock, sizeof(sock), "%s/echo.sock", dir);
	WAIT_FOR(access(sock, F_OK) == 0, 5000);
	cr_assert_eq(access(sock, F_OK), 0, "no %s", sock);
	/* now the supervisor comes up at <dir>/control.sock */
	F = (fake){ .svc = GPUKMM__CONTROL__INIT(ctl_) };
	pthread_mutex_init(&F.mu, NULL);
	gk_ipc_server *s;
	gk_err e;
	char url[128];
	snprintf(url, sizeof(url), "ipc://%s/control.sock", dir);
	cr_assert_eq(gk_ipc_server_open(&s, url, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_ipc_server_add(s, &F.svc.base, &F, NULL, &e), 0);
	struct pollfd p = { gk_ipc_server_fd(s), POLLIN, 0 };
	int64_t end = th_ms() + 15000;
	while (F.heartbeats < 2 && th_ms() < end)
		if (poll(&p, 1, 50) > 0)
			gk_ipc_server_dispatch(s);
	cr_assert_eq(F.ready, 1);
	cr_assert_geq(F.heartbeats, 2);
	kill(pid, SIGTERM);
	/* keep answering while it shuts down */
	int rc = -1;
	end = th_ms() + 5000;
	while (th_ms() < end) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			break;
		}
		if (poll(&p, 1, 10) > 0)
			gk_ipc_server_dispatch(s);
	}
	cr_assert_eq(rc, 0);
	gk_ipc_server_close(s);
	th_rmdir(dir);
}

static int extra_hits;
static int on_extra(void *user, const char *arg)
{
	extra_hits++;
	return strcmp(arg, "bad") == 0 ? -1 : 0;
}

static int init_with(gk_svc *s, int argc, char **argv)
{
	static const gk_svc_opt extra[] = { { "thing", 1, "a thing", on_extra, NULL }, { 0 } };
	gk_err e;
	int rc = gk_svc_init(s, "tsvc", argc, argv, extra, &e);
	return rc;
}

Test(svc, flags_environment_and_errors)
{
	gk_svc s;
	char *a1[] = { "x", "--thing=ok", "--listen", "tcp://127.0.0.1:1", "--namespace=ns1", "--heartbeat-ms=20", NULL };
	cr_assert_eq(init_with(&s, 6, a1), 0);
	cr_assert_eq(extra_hits, 1);
	cr_assert_str_eq(s.addr.listen, "tcp://127.0.0.1:1");
	cr_assert_str_eq(s.ns, "ns1");
	cr_assert_eq(s.heartbeat_ms, 20);
	cr_assert_null(s.addr.control, "standalone");
	cr_assert_eq(gk_svc_ready(&s), 0, "standalone ready is a no-op");
	gk_svc_fini(&s);
	setenv("GPUKMM_RUNTIME_DIR", "/run/gk", 1);
	setenv("OPERATOR_NAMESPACE", "envns", 1);
	setenv("GPUKMM_WATCHER", "ipc:///elsewhere/w.sock", 1);
	char *a2[] = { "x", NULL };
	cr_assert_eq(init_with(&s, 1, a2), 0);
	cr_assert_str_eq(s.addr.listen, "ipc:///run/gk/tsvc.sock");
	cr_assert_str_eq(s.addr.control, "ipc:///run/gk/control.sock");
	cr_assert_str_eq(s.addr.events, "ipc:///run/gk/events.sock");
	cr_assert_str_eq(s.addr.watcher, "ipc:///elsewhere/w.sock", "env wins over the runtime dir");
	cr_assert_str_eq(s.ns, "envns");
	gk_svc_fini(&s);
	char *a3[] = { "x", "--namespace=flag", NULL };
	cr_assert_eq(init_with(&s, 2, a3), 0);
	cr_assert_str_eq(s.ns, "flag", "flag wins over env");
	gk_svc_fini(&s);
	unsetenv("GPUKMM_RUNTIME_DIR");
	unsetenv("OPERATOR_NAMESPACE");
	unsetenv("GPUKMM_WATCHER");
	char *bad1[] = { "x", "--nope", NULL };
	char *bad2[] = { "x", "--heartbeat-ms=0", NULL };
	char *bad3[] = { "x", "stray", NULL };
	char *bad4[] = { "x", "--thing=bad", NULL };
	char *bad5[] = { "x", "--log-level=loud", NULL };
	char *bad6[] = { "x", "--listen", NULL };
	cr_assert_eq(init_with(&s, 2, bad1), 2);
	cr_assert_eq(init_with(&s, 2, bad2), 2);
	cr_assert_eq(init_with(&s, 2, bad3), 2);
	cr_assert_eq(init_with(&s, 2, bad4), 2);
	cr_assert_eq(init_with(&s, 2, bad5), 2);
	cr_assert_eq(init_with(&s, 2, bad6), 2);
}

static int drained;
static void on_stop(void *user)
{
	drained++;
}

Test(svc, sigterm_drains_then_a_second_one_stops)
{
	gk_svc s;
	char *a[] = { "x", NULL };
	cr_assert_eq(init_with(&s, 1, a), 0);
	gk_svc_on_stop(&s, on_stop, NULL);
	raise(SIGTERM);
	cr_assert_eq(gk_loop_once(s.loop, 1000), 1);
	cr_assert_eq(drained, 1);
	cr_assert_eq(s.stopping, 1);
	raise(SIGINT);
	cr_assert_eq(gk_loop_run(s.loop), 0, "the second signal stops the loop");
	cr_assert_eq(drained, 1);
	gk_svc_fini(&s);
}

/* Shutdown with Control calls in flight, many times over. Half the rounds the
 * supervisor answers heartbeats every 10 ms (a call is nearly always out), half
 * it never answers (Ready stays in flight until SIGTERM). Every round the
 * service must exit 0 promptly. Under ASan this used to hang now and then:
 * LeakSanitizer stops every thread with ptrace at exit(), and with nng's ~14
 * threads still alive (no nng_fini) that stop could wait forever on one of
 * them. Services end with gk_ipc_fini() (svc.h) so only the main thread is
 * left when the leak check runs. */
static void shutdown_rounds(const char *control_url, int rounds, const char *dir, bool answered)
{
	char control[200], trace[160], tflag[180];
	snprintf(control, sizeof(control), "--control=%s", control_url);
	snprintf(trace, sizeof(trace), "%s/t.trace", dir);
	snprintf(tflag, sizeof(tflag), "--trace=%s", trace);
	for (int i = 0; i < rounds; i++) {
		unlink(trace);
		char *argv[] = { "sup_testsvc", "--mode=ready", control, tflag, "--heartbeat-ms=10",
				 "--log-level=error", NULL };
		pid_t pid = th_spawn("GPUKMM_TBIN", "sup_testsvc", argv, NULL);
		/* its loop runs (SIGTERM is handled) once it traced "start" */
		WAIT_FOR(access(trace, F_OK) == 0, 10000);
		cr_assert_eq(access(trace, F_OK), 0, "round %d: the service never started", i);
		/* the first round of an answering supervisor lets a heartbeat through (the
		 * rounds are a few ms each: under load none may reach it otherwise) */
		if (answered && i == 0)
			WAIT_FOR(get(&F.heartbeats) > 0, 10000);
		poll(NULL, 0, i % 7 * 3);   /* vary where the in-flight calls are */
		kill(pid, SIGTERM);
		int rc = wait_exit(pid, 8000);
		cr_assert_eq(rc, 0, "round %d: exit %d (-1 = still running after 8 s: hung at exit)", i, rc);
	}
}

Test(svc, sigterm_with_control_calls_in_flight_exits_every_time, .timeout = 240)
{
	start_control();
	shutdown_rounds(ctl.url, 12, ctl.dir, true);
	cr_assert_gt(get(&F.heartbeats), 0, "heartbeats were flowing");
	th_server_stop(&ctl);
	/* a supervisor that accepts but never answers: Ready stays in flight */
	char dir[64], url[128];
	th_tmpdir(dir, sizeof(dir));
	snprintf(url, sizeof(url), "ipc://%s/control.sock", dir);
	gk_ipc_server *mute;
	gk_err e;
	cr_assert_eq(gk_ipc_server_open(&mute, url, NULL, &e), 0, "%s", e.msg);
	shutdown_rounds(url, 12, dir, false);
	gk_ipc_server_close(mute);
	th_rmdir(dir);
}
