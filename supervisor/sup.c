/* The supervisor: services, the events that reach them, and the actions of
 * the state × event table (fsm.c). One thread runs all of this from one loop;
 * only http.c has a thread of its own, and it touches nothing here.
 *
 * Events come from: SIGCHLD (reaping), each service's one timer, Control RPCs
 * (Ready, Heartbeat), SIGTERM/SIGINT (ordered stop). Every event goes through
 * gk_sup_event(), which looks up the table, runs the action and then moves a
 * stop in progress along. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "sup.h"

#define KILL_REPEAT_MS 5000
#define OUT_CAP (1u << 20)

int64_t gk_sup_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

gk_sup_svc *gk_sup_find(gk_sup *s, pid_t pid, const char *name)
{
	if (pid > 0)
		for (size_t i = 0; i < s->n; i++)
			if (s->svcs[i].pid == pid)
				return &s->svcs[i];
	if (name && *name) {
		gk_sup_svc *hit = NULL;
		for (size_t i = 0; i < s->n; i++)
			if (strcmp(s->svcs[i].conf->name, name) == 0) {
				if (hit)
					return NULL;   /* ambiguous: only the pid may decide */
				hit = &s->svcs[i];
			}
		return hit;
	}
	return NULL;
}

/* ---- timers ---------------------------------------------------------------- */

static void on_svc_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sup_svc *v = user;
	if (v->timer != id)
		return;
	v->timer = 0;
	gk_sup_event(v->sup, v, GK_SUP_EV_TIMEOUT);
}

static void arm(gk_sup_svc *v, int64_t ms)
{
	if (v->timer)
		gk_loop_cancel(v->sup->loop, v->timer);
	v->timer = gk_loop_timer(v->sup->loop, ms < 0 ? 0 : ms, on_svc_timer, v);
}

static void disarm(gk_sup_svc *v)
{
	if (v->timer)
		gk_loop_cancel(v->sup->loop, v->timer);
	v->timer = 0;
}

/* ---- readiness and sd_notify ------------------------------------------------- */

static void update_ready(gk_sup *s)
{
	size_t req = 0, up = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (!s->svcs[i].conf->required)
			continue;
		req++;
		up += s->svcs[i].state == GK_SUP_READY;
	}
	bool ready = !s->stopping && up == req;
	if (ready != s->ready) {
		char st[96];
		snprintf(st, sizeof(st), "STATUS=%zu/%zu required services ready", up, req);
		gk_sup_notify_send(s->notify_fd, st);
		if (ready)
			GK_INFO("ready: %zu/%zu required services ready", up, req);
		else if (!s->stopping)
			GK_WARN("not ready: %zu/%zu required services ready", up, req);
	}
	s->ready = ready;
	if (ready && !s->ready_notified) {
		s->ready_notified = true;
		gk_sup_notify_send(s->notify_fd, "READY=1");
	}
}

/* ---- actions ------------------------------------------------------------------ */

static void describe_exit(int st, char *buf, size_t cap)
{
	if (WIFEXITED(st))
		snprintf(buf, cap, "exited with code %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, cap, "ended (status 0x%x)", st);
}

static void drain_log(gk_sup_svc *v, bool tail);

static void record_exit(gk_sup_svc *v)
{
	int st = v->wstatus;
	/* what it wrote last is forwarded before the next instance writes */
	drain_log(v, true);
	v->last_exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	v->last_signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	v->pid = 0;
	/* leftovers of its process group go with it (a restart must not meet them) */
	if (v->pgid > 0)
		kill(-v->pgid, SIGKILL);
}

static void a_died(gk_sup *s, gk_sup_svc *v, bool spawn_failed);

static void a_spawn(gk_sup *s, gk_sup_svc *v)
{
	disarm(v);
	gk_sup_env_in ein = { .base = s->opts.environ_base, .runtime_dir = s->opts.runtime_dir,
			      .control_url = s->control_url, .token_file = s->opts.token_file,
			      .kubeconfig = s->opts.kubeconfig };
	char **argv = gk_sup_build_argv(v->conf, s->opts.runtime_dir);
	char **envp = argv ? gk_sup_build_env(v->conf, &ein) : NULL;
	gk_err err = { 0 };
	int rc;
	pid_t pid = 0;
	if (!argv || !envp) {
		rc = gk_err_set(&err, GK_RESOURCE_EXHAUSTED, "out of memory");
	} else {
		gk_sup_spawn sp = { .path = v->conf->path ? v->conf->path : v->conf->binary, .argv = argv,
				    .envp = envp, .null_fd = s->null_fd, .out_fd = v->log_wr,
				    .uid = v->conf->uid, .gid = v->conf->gid, .pdeath_signal = SIGKILL };
		rc = gk_sup_spawn_child(&sp, &pid, &err);
	}
	gk_sup_strv_free(argv);
	gk_sup_strv_free(envp);
	if (rc) {
		s->spawn_errors++;
		snprintf(v->last_error, sizeof(v->last_error), "%.190s", err.msg);
		GK_ERROR("service %s: cannot start: %s", v->conf->name, err.msg);
		v->wstatus = 127 << 8;
		a_died(s, v, true);
		return;
	}
	v->pid = v->pgid = pid;
	v->spawned_ms = gk_sup_now_ms();
	v->ready_ms = v->last_hb_ms = 0;
	v->hung = false;
	gk_sup_svc_set_metrics(v, NULL);
	v->last_error[0] = '\0';
	GK_INFO("service %s: started, pid %d", v->conf->name, (int)pid);
	if (v->conf->ready_timeout_ms > 0)
		arm(v, v->conf->ready_timeout_ms);
}

static void a_up(gk_sup *s, gk_sup_svc *v)
{
	int64_t now = gk_sup_now_ms();
	v->ready_ms = v->last_hb_ms = now;
	GK_INFO("service %s: ready (pid %d, %lld ms after start)", v->conf->name, (int)v->pid,
		(long long)(now - v->spawned_ms));
	if (v->conf->heartbeat_timeout_ms > 0)
		arm(v, v->conf->heartbeat_timeout_ms);
	else
		disarm(v);
}

static void a_liveness(gk_sup *s, gk_sup_svc *v)
{
	int64_t now = gk_sup_now_ms();
	if (v->hung)
		return;   /* already killed, the exit is on its way */
	if (v->state == GK_SUP_STARTING) {
		GK_WARN("service %s: not ready %lld ms after start: killing it", v->conf->name,
			(long long)(now - v->spawned_ms));
		snprintf(v->last_error, sizeof(v->last_error), "not ready within %lld ms",
			 (long long)v->conf->ready_timeout_ms);
		gk_sup_event(s, v, GK_SUP_EV_HANG);
		return;
	}
	int64_t age = now - v->last_hb_ms;
	if (v->conf->heartbeat_timeout_ms <= 0)
		return;
	if (age < v->conf->heartbeat_timeout_ms) {
		arm(v, v->conf->heartbeat_timeout_ms - age);
		return;
	}
	GK_WARN("service %s: no heartbeat for %lld ms: killing pid %d", v->conf->name, (long long)age,
		(int)v->pid);
	snprintf(v->last_error, sizeof(v->last_error), "no heartbeat for %lld ms", (long long)age);
	gk_sup_event(s, v, GK_SUP_EV_HANG);
}

static void a_kill(gk_sup *s, gk_sup_svc *v)
{
	if (v->pgid > 0)
		kill(-v->pgid, SIGKILL);
	if (v->pid > 0)
		kill(v->pid, SIGKILL);   /* in case it left its group */
	if (v->state == GK_SUP_STOPPING) {
		GK_WARN("service %s: did not stop within %lld ms: SIGKILL", v->conf->name,
			(long long)v->conf->stop_timeout_ms);
		s->unclean = true;
		arm(v, KILL_REPEAT_MS);
	} else {
		v->hung = true;
		disarm(v);
	}
}

static void a_term(gk_sup *s, gk_sup_svc *v)
{
	GK_INFO("service %s: stopping pid %d (%s)", v->conf->name, (int)v->pid, strsignal(v->conf->stop_signal));
	int sig[2];
	for (int i = 0, n = gk_sup_stop_signals(v->conf->stop_signal, sig); v->pid > 0 && i < n; i++)
		kill(v->pid, sig[i]);
	arm(v, v->conf->stop_timeout_ms);
}

static void a_stopped(gk_sup *s, gk_sup_svc *v)
{
	int st = v->wstatus;
	disarm(v);
	record_exit(v);
	bool clean = (WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
		     (WIFSIGNALED(st) && WTERMSIG(st) == v->conf->stop_signal);
	char how[96];
	describe_exit(st, how, sizeof(how));
	if (clean) {
		GK_INFO("service %s: stopped (%s)", v->conf->name, how);
	} else {
		s->unclean = true;
		GK_WARN("service %s: stopped uncleanly (%s)", v->conf->name, how);
	}
}

static void a_cancel(gk_sup *s, gk_sup_svc *v)
{
	disarm(v);
}

static void escalate(gk_sup *s, gk_sup_svc *v)
{
	GK_ERROR("service %s: %d restarts within %lld ms exceed the limit of %d: stopping everything",
		 v->conf->name, gk_sup_intensity_count(&s->intensity, gk_sup_now_ms()),
		 (long long)s->intensity.window_ms, s->intensity.max);
	s->escalated = true;
	v->state = GK_SUP_FAILED;
	gk_sup_stop_all(s, 0);
}

static void a_died(gk_sup *s, gk_sup_svc *v, bool spawn_failed)
{
	int st = v->wstatus;
	int64_t now = gk_sup_now_ms();
	int64_t ready_for = v->ready_ms ? now - v->ready_ms : -1;
	disarm(v);
	record_exit(v);
	char how[96];
	describe_exit(st, how, sizeof(how));
	if (spawn_failed)
		snprintf(how, sizeof(how), "could not be started");
	if (s->stopping) {
		v->state = GK_SUP_DOWN;
		GK_INFO("service %s: %s during shutdown", v->conf->name, how);
		return;
	}
	if (!spawn_failed && !v->hung && WIFEXITED(st) && WEXITSTATUS(st) == 2) {
		/* a usage error does not heal by restarting: say so, keep the others */
		v->state = GK_SUP_FAILED;
		snprintf(v->last_error, sizeof(v->last_error), "usage error (exit 2): not restarted");
		GK_ERROR("service %s: exited with code 2, a usage or configuration error: not restarted "
			 "(its own log above says what is wrong; fix it and restart gpukmm)", v->conf->name);
		return;
	}
	bool clean = !spawn_failed && WIFEXITED(st) && WEXITSTATUS(st) == 0 && !v->hung;
	switch (gk_sup_exit_decide(v->conf->restart, clean)) {
	case GK_SUP_DONE:
		v->state = GK_SUP_DOWN;
		GK_INFO("service %s: %s; %s, not restarted", v->conf->name, how,
			gk_sup_restart_name(v->conf->restart));
		return;
	case GK_SUP_GIVE_UP:
		v->state = GK_SUP_FAILED;
		GK_ERROR("service %s: %s; temporary, not restarted", v->conf->name, how);
		return;
	case GK_SUP_RESTART:
		break;
	}
	v->failures = gk_sup_failures_after(v->failures, ready_for, v->conf->backoff.reset_after_ms);
	v->restarts++;
	if (gk_sup_intensity_add(&s->intensity, now)) {
		escalate(s, v);
		return;
	}
	v->backoff_ms = gk_sup_backoff_delay(&v->conf->backoff, v->failures, gk_sup_rand01(&s->rng));
	v->state = GK_SUP_BACKOFF;
	if (v->failures >= 3)
		GK_WARN("service %s: %s (%u failures in a row, %u restarts): restarting in %lld ms",
			v->conf->name, how, v->failures, v->restarts, (long long)v->backoff_ms);
	else
		GK_INFO("service %s: %s: restarting in %lld ms", v->conf->name, how, (long long)v->backoff_ms);
	/* no delay: the backoff's TIMEOUT now, not one loop turn (timerfd +
	 * epoll) later; a spawn that failed goes through the loop (no recursion) */
	if (v->backoff_ms > 0 || spawn_failed)
		arm(v, v->backoff_ms);
	else
		gk_sup_event(s, v, GK_SUP_EV_TIMEOUT);
}

/* ---- the table driver -------------------------------------------------------------- */

static void stop_next(gk_sup *s);

void gk_sup_event(gk_sup *s, gk_sup_svc *v, enum gk_sup_event ev)
{
	gk_sup_trans t = gk_sup_fsm(v->state, ev);
	enum gk_sup_state before = v->state;
	if (t.next >= 0)
		v->state = (enum gk_sup_state)t.next;
	switch (t.action) {
	case GK_SUP_A_NOP: break;
	case GK_SUP_A_SPAWN: a_spawn(s, v); break;
	case GK_SUP_A_UP: a_up(s, v); break;
	case GK_SUP_A_DIED: a_died(s, v, false); break;
	case GK_SUP_A_TERM: a_term(s, v); break;
	case GK_SUP_A_KILL: a_kill(s, v); break;
	case GK_SUP_A_STOPPED: a_stopped(s, v); break;
	case GK_SUP_A_CANCEL: a_cancel(s, v); break;
	case GK_SUP_A_LIVENESS: a_liveness(s, v); break;
	}
	if (v->state != before)
		GK_DEBUG("service %s: %s --%s/%s--> %s", v->conf->name, gk_sup_state_name(before),
			 gk_sup_event_name(ev), gk_sup_action_name(t.action), gk_sup_state_name(v->state));
	update_ready(s);
	if (s->stopping)
		stop_next(s);
}

/* ---- ordered stop ----------------------------------------------------------------- */

static void stop_next(gk_sup *s)
{
	if (s->in_stop)
		return;
	s->in_stop = true;
	while (s->stop_cursor > 0) {
		gk_sup_svc *v = &s->svcs[s->stop_cursor - 1];
		if (v->state == GK_SUP_DOWN || v->state == GK_SUP_FAILED) {
			s->stop_cursor--;
			continue;
		}
		if (v->state != GK_SUP_STOPPING)
			gk_sup_event(s, v, GK_SUP_EV_STOP);
		if (v->state == GK_SUP_STOPPING)
			break;   /* wait for its exit (or the stop timeout) */
	}
	s->in_stop = false;
	if (s->stop_cursor == 0 && s->exit_code < 0) {
		if (s->escalated)
			s->exit_code = 1;
		else if (s->unclean && s->stop_signo > 0)
			s->exit_code = 128 + s->stop_signo;
		else
			s->exit_code = 0;
		GK_INFO("all services stopped; exiting with %d", s->exit_code);
		gk_loop_stop(s->loop, s->exit_code);
	}
}

void gk_sup_stop_all(gk_sup *s, int signo)
{
	if (s->stopping)
		return;
	s->stopping = true;
	s->stop_signo = signo;
	s->stop_cursor = s->n;
	gk_sup_notify_send(s->notify_fd, "STOPPING=1");
	if (signo)
		GK_INFO("%s: stopping services in reverse order", strsignal(signo));
	update_ready(s);
	stop_next(s);
}

/* ---- signals ---------------------------------------------------------------------- */

/* nng 1.5.2 (nng#1518, fixed in 1.6): a peer that disconnects while the ipc
 * handshake is under way makes the listener stop accepting. Our Control
 * clients are our services, and a service that dies right after it dialed is
 * exactly such a peer. lib/ipc probes and re-creates a stuck listener on its
 * own; after a death we only ask it to probe now rather than within a second,
 * so the restarted service is not kept waiting (the periodic probe covers the
 * rest). */
static void on_sigchld(gk_loop *l, int signo, void *user)
{
	gk_sup *s = user;
	int st;
	pid_t p;
	bool probe = false;
	while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
		gk_sup_svc *v = gk_sup_find(s, p, NULL);
		if (!v) {
			s->unknown_reaped++;
			GK_DEBUG("reaped pid %d (not a service's main process)", (int)p);
			continue;
		}
		v->wstatus = st;
		/* a service that got as far as Control.Ready had finished its
		 * handshake: its death cannot have left the listener stuck, and a
		 * probe now would only compete with the restart for the CPU */
		probe |= v->ready_ms == 0;
		gk_sup_event(s, v, GK_SUP_EV_EXIT);
	}
	if (probe && s->control)
		gk_ipc_server_probe(s->control);
}

static void on_stop_signal(gk_loop *l, int signo, void *user)
{
	gk_sup *s = user;
	if (s->stopping) {
		GK_INFO("%s again: still stopping", strsignal(signo));
		return;
	}
	gk_sup_stop_all(s, signo);
}

static void on_forward_signal(gk_loop *l, int signo, void *user)
{
	gk_sup *s = user;
	for (size_t i = 0; i < s->n; i++)
		if (s->svcs[i].pid > 0)
			kill(s->svcs[i].pid, signo);
}

/* ---- output ------------------------------------------------------------------------- */

struct line_ctx { gk_sup *s; gk_sup_svc *v; };

static void emit_line(void *user, const char *line, size_t len)
{
	struct line_ctx *c = user;
	gk_sup_out_line(&c->s->out, c->v->conf->name, c->v->pid, line, len);
}

static void out_update(gk_sup *s);

static void on_out_writable(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_sup *s = user;
	gk_sup_out_flush(&s->out);
	out_update(s);
}

/* Watch the sink for writability only while bytes wait (level-triggered). */
static void out_update(gk_sup *s)
{
	bool pending = gk_sup_out_flush(&s->out);
	if (pending && !s->out_watched && s->loop)
		s->out_watched = gk_loop_add_fd(s->loop, s->out.fd, EPOLLOUT, on_out_writable, s, NULL) == 0;
	else if (!pending && s->out_watched) {
		gk_loop_del_fd(s->loop, s->out.fd);
		s->out_watched = false;
	}
}

/* Read what waits in the service's pipe: a bounded amount per wakeup keeps one
 * chatty service from starving the rest; at its exit (tail) everything, and a
 * last line without newline too. */
static void drain_log(gk_sup_svc *v, bool tail)
{
	gk_sup *s = v->sup;
	char buf[16384];
	struct line_ctx c = { s, v };
	for (int i = 0; tail || i < 4; i++) {
		ssize_t n = read(v->log_rd, buf, sizeof(buf));
		if (n <= 0)
			break;
		gk_sup_lines_feed(&v->lines, buf, (size_t)n, emit_line, &c);
		if (i > 256)
			break;   /* a grandchild keeps writing: enough */
	}
	if (tail)
		gk_sup_lines_flush(&v->lines, emit_line, &c);
	out_update(s);
}

static void on_log_readable(gk_loop *l, int fd, uint32_t events, void *user)
{
	drain_log(user, false);
}

/* gk_log records of the supervisor itself go through the same sink. */
static ssize_t log_cookie_write(void *cookie, const char *buf, size_t size)
{
	gk_sup *s = cookie;
	gk_sup_out_raw(&s->out, buf, size);
	if (s->loop)
		out_update(s);
	else
		gk_sup_out_flush(&s->out);
	return (ssize_t)size;
}

/* ---- watchdog --------------------------------------------------------------------- */

static void on_watchdog(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sup *s = user;
	gk_sup_notify_send(s->notify_fd, "WATCHDOG=1");
	gk_loop_timer(l, s->watchdog_ms, on_watchdog, s);
}

/* ---- set up and run --------------------------------------------------------------- */

int gk_sup_init(gk_sup *s, gk_sup_conf *conf, const gk_sup_opts *opts, gk_err *err)
{
	memset(s, 0, sizeof(*s));
	s->conf = conf;
	s->opts = *opts;
	s->null_fd = s->notify_fd = -1;
	s->exit_code = -1;
	s->start_ms = gk_sup_now_ms();
	if (getrandom(&s->rng, sizeof(s->rng), GRND_NONBLOCK) != sizeof(s->rng))
		s->rng = (uint64_t)s->start_ms ^ ((uint64_t)getpid() << 32);
	gk_sup_intensity_init(&s->intensity, conf->intensity_max, conf->intensity_window_ms);
	if (snprintf(s->control_url, sizeof(s->control_url), "ipc://%s/control.sock", opts->runtime_dir) >=
	    (int)sizeof(s->control_url))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "runtime dir path too long");
	int rc;
	if ((rc = gk_sup_out_init(&s->out, opts->out_fd, OUT_CAP, opts->log_json, err)))
		return rc;
	if ((s->null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return gk_err_set(err, GK_INTERNAL, "/dev/null: %s", strerror(errno));
	if (!(s->svcs = calloc(conf->n_svcs, sizeof(*s->svcs))))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	s->n = conf->n_svcs;
	for (size_t i = 0; i < s->n; i++)
		s->svcs[i].log_rd = s->svcs[i].log_wr = -1;
	if (gk_sup_metrics_init(s))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	if ((rc = gk_loop_new(&s->loop, err)))
		return rc;
	for (size_t i = 0; i < s->n; i++) {
		gk_sup_svc *v = &s->svcs[i];
		int p[2];
		v->conf = &conf->svcs[i];
		v->sup = s;
		v->last_exit_code = -1;
		v->log_rd = v->log_wr = -1;
		if (pipe2(p, O_CLOEXEC) < 0)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "pipe: %s", strerror(errno));
		v->log_rd = p[0];
		v->log_wr = p[1];
		fcntl(v->log_rd, F_SETFL, O_NONBLOCK);
		if ((rc = gk_loop_add_fd(s->loop, v->log_rd, EPOLLIN, on_log_readable, v, err)))
			return rc;
	}
	/* PID 1 or not, orphans of our services come to us and are reaped */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	if ((rc = gk_loop_signal(s->loop, SIGCHLD, on_sigchld, s, err)) ||
	    (rc = gk_loop_signal(s->loop, SIGTERM, on_stop_signal, s, err)) ||
	    (rc = gk_loop_signal(s->loop, SIGINT, on_stop_signal, s, err)) ||
	    (rc = gk_loop_signal(s->loop, SIGHUP, on_forward_signal, s, err)) ||
	    (rc = gk_loop_signal(s->loop, SIGUSR1, on_forward_signal, s, err)) ||
	    (rc = gk_loop_signal(s->loop, SIGUSR2, on_forward_signal, s, err)))
		return rc;
	gk_err nerr = { 0 };
	s->notify_fd = gk_sup_notify_open(getenv("NOTIFY_SOCKET"), &nerr);
	if (s->notify_fd < 0 && nerr.code)
		GK_WARN("%s", nerr.msg);
	s->watchdog_ms = gk_sup_watchdog_ms(getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"), getpid());
	cookie_io_functions_t io = { .write = log_cookie_write };
	s->log_stream = fopencookie(s, "w", io);
	if (s->log_stream) {
		setvbuf(s->log_stream, NULL, _IOLBF, 0);
		gk_log_set_stream(s->log_stream);
	}
	if ((rc = gk_sup_control_open(s, err)))
		return rc;
	if (opts->http_listen && (rc = gk_sup_http_start(s, opts->http_listen, err)))
		return rc;
	if (opts->metrics_listen && (rc = gk_sup_msrv_start(s, err)))
		return rc;
	return 0;
}

static void kill_remaining_children(void)
{
	pid_t me = getpid();
	DIR *d = opendir("/proc");
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			char path[300], buf[512];
			if (e->d_name[0] < '0' || e->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			ssize_t n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			if (n <= 0)
				continue;
			buf[n] = 0;
			char *rp = strrchr(buf, ')');
			int ppid;
			if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == me)
				kill(atoi(e->d_name), SIGKILL);
		}
		closedir(d);
	}
}

/* At the very end: whatever child is still around (a grandchild that left its
 * group, an unknown orphan) is killed and reaped, so nothing outlives us.
 * SIGCHLD is blocked (signalfd): wait for it with a bound, never sleep. */
static void reap_all(void)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (int round = 0; round < 5; round++) {
		kill_remaining_children();
		for (;;) {
			pid_t p = waitpid(-1, NULL, WNOHANG);
			if (p > 0)
				continue;
			if (p < 0 && errno == EINTR)
				continue;
			if (p < 0)
				return;   /* ECHILD: nothing left */
			break;
		}
		struct timespec ts = { .tv_sec = 1 };
		sigtimedwait(&chld, NULL, &ts);
	}
}

int gk_sup_run(gk_sup *s)
{
	GK_INFO("starting %zu services (runtime dir %s)", s->n, s->opts.runtime_dir);
	gk_sup_notify_send(s->notify_fd, "STATUS=starting services");
	if (s->watchdog_ms > 0) {
		gk_sup_notify_send(s->notify_fd, "WATCHDOG=1");
		gk_loop_timer(s->loop, s->watchdog_ms, on_watchdog, s);
	}
	for (size_t i = 0; i < s->n && !s->stopping; i++)
		gk_sup_event(s, &s->svcs[i], GK_SUP_EV_START);
	update_ready(s);
	int rc = s->exit_code >= 0 ? s->exit_code : gk_loop_run(s->loop);
	reap_all();
	if (s->exit_code >= 0)
		rc = s->exit_code;
	/* forward the last words of every service */
	for (size_t i = 0; i < s->n; i++)
		drain_log(&s->svcs[i], true);
	return rc;
}

void gk_sup_fini(gk_sup *s)
{
	gk_sup_msrv_stop(s);
	gk_sup_http_stop(s);
	gk_sup_control_close(s);
	if (s->log_stream) {
		gk_log_set_stream(NULL);
		fclose(s->log_stream);
		s->log_stream = NULL;
	}
	/* the rest of the output, waiting at most 2 s for a slow reader: we are about to exit */
	int64_t deadline = gk_sup_now_ms() + 2000;
	while (s->out.buf && gk_sup_out_flush(&s->out)) {
		int64_t left = deadline - gk_sup_now_ms();
		struct pollfd pfd = { .fd = s->out.fd, .events = POLLOUT };
		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			break;
	}
	for (size_t i = 0; i < s->n; i++) {
		gk_sup_svc_set_metrics(&s->svcs[i], NULL);
		if (s->svcs[i].log_rd >= 0) {
			if (s->loop)
				gk_loop_del_fd(s->loop, s->svcs[i].log_rd);
			close(s->svcs[i].log_rd);
		}
		if (s->svcs[i].log_wr >= 0)
			close(s->svcs[i].log_wr);
	}
	free(s->svcs);
	s->svcs = NULL;
	gk_sup_metrics_fini(s);
	if (s->loop)
		gk_loop_free(s->loop);
	s->loop = NULL;
	if (s->null_fd >= 0)
		close(s->null_fd);
	if (s->notify_fd >= 0)
		close(s->notify_fd);
	gk_sup_out_fini(&s->out);
}
