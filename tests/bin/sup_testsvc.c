/* sup_testsvc — a misbehaving service for the supervisor tests (lib/svc based,
 * so it speaks Control.Ready and heartbeats like a real service).
 *
 *   --mode ready         become ready, run until SIGTERM, exit 0
 *   --mode crash         exit 3 at once, never ready
 *   --mode crash-after   ready, then exit 4 after --after-ms
 *   --mode exit-clean    ready, then exit 0 after --after-ms
 *   --mode never-ready   run, heartbeat nothing, never say Ready
 *   --mode late-ready    say Ready only after --after-ms
 *   --mode hang          ready, then after --after-ms block forever (heartbeats stop)
 *   --mode ignore-term   ready, SIGTERM is ignored (only SIGKILL ends it)
 *   --mode grandchild    ready, start a grandchild in its own session that lives
 *                        --after-ms, then exit 5 itself (the grandchild is orphaned)
 *   --mode flood         ready, write --lines numbered lines to stdout as fast as
 *                        it can, then "flood done", then run until SIGTERM
 *   --mode crash-when-ready  as soon as the supervisor acknowledged Ready (or at
 *                        once when standalone), trace "acked" and exit 4 (benchmarks)
 *   --mode hang-teardown ready; after SIGTERM its teardown blocks forever (like
 *                        nng_close in nng#1543): only lib/svc's stop bound ends it
 *   --mode orphan        (internal: the grandchild) wait --after-ms, exit 0
 *   --ready-line         print "READY" on stdout when ready (readiness for runit)
 *
 * --trace FILE appends one line per event: "<event> <pid> <monotonic ms>"; the
 * first is "main" (entered main(), i.e. exec and the dynamic loader are done),
 * "start" follows gk_svc_init (loop, Control client dialing). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/ipc.h"
#include "gpukmm/metrics.h"
#include "gpukmm/log.h"
#include "gpukmm/svc.h"

struct app {
	gk_svc svc;
	const char *mode;
	const char *trace;
	long after_ms;
	long lines;
	int ready_line;
	uint64_t ticks;
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void trace(struct app *a, const char *ev)
{
	if (!a->trace)
		return;
	char line[128];
	int n = snprintf(line, sizeof(line), "%s %d %lld\n", ev, (int)getpid(), (long long)mono_ms());
	int fd = open(a->trace, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		ssize_t w = write(fd, line, (size_t)n);
		(void)w;
		close(fd);
	}
}

static int set_str(void *user, const char *arg)
{
	*(const char **)user = arg;
	return 0;
}

static int set_long(void *user, const char *arg)
{
	char *end;
	long v = strtol(arg, &end, 10);
	if (!*arg || *end || v < 0)
		return -1;
	*(long *)user = v;
	return 0;
}

static int set_flag(void *user, const char *arg)
{
	*(int *)user = 1;
	return 0;
}

static void write_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void on_after(gk_loop *l, gk_timer_id id, void *user)
{
	struct app *a = user;
	if (strcmp(a->mode, "crash-after") == 0) {
		trace(a, "exit");
		_exit(4);   /* like a crash: no atexit handlers, no nng teardown */
	}
	if (strcmp(a->mode, "exit-clean") == 0) {
		trace(a, "exit");
		_exit(0);
	}
	if (strcmp(a->mode, "late-ready") == 0) {
		trace(a, "ready");   /* before telling: the supervisor may react at once */
		gk_svc_ready(&a->svc);
		return;
	}
	if (strcmp(a->mode, "hang") == 0) {
		trace(a, "hang");
		for (;;)
			pause();   /* a real hang: the loop never runs again */
	}
}

static void on_poll_ack(gk_loop *l, gk_timer_id id, void *user)
{
	struct app *a = user;
	if (!a->svc.ready_sent) {   /* the reply to Ready has not arrived yet */
		gk_loop_timer(l, 1, on_poll_ack, a);
		return;
	}
	trace(a, "acked");
	if (a->ready_line)
		write_all(1, "READY\n", 6);
	trace(a, "exit");
	_exit(4);
}

static void on_ignore_stop(void *user)
{
	trace(user, "term-ignored");
}

static void grandchild(struct app *a, char *self)
{
	int sync[2];
	if (pipe2(sync, O_CLOEXEC) < 0)
		_exit(6);
	pid_t p = fork();
	if (p == 0) {
		close(sync[0]);
		setsid();   /* out of the service's process group: only subreaping catches it */
		char ms[32];
		snprintf(ms, sizeof(ms), "%ld", a->after_ms);
		char *argv[] = { self, "--mode", "orphan", "--after-ms", ms, "--trace", (char *)(a->trace ? a->trace : "/dev/null"), NULL };
		execv(self, argv);
		_exit(127);
	}
	/* wait until it left our process group (EOF at its exec): dying before
	 * that, we would take it with us (the supervisor kills our group) */
	close(sync[1]);
	char c;
	while (read(sync[0], &c, 1) < 0 && errno == EINTR)
		;
	close(sync[0]);
	char line[64];
	snprintf(line, sizeof(line), "grandchild %d", (int)p);
	trace(a, line);
}

int main(int argc, char **argv)
{
	static struct app a = { .mode = "ready", .after_ms = 100, .lines = 1000 };
	const gk_svc_opt extra[] = {
		{ "mode", 1, "behaviour (see the source)", set_str, &a.mode },
		{ "trace", 1, "append events to this file", set_str, &a.trace },
		{ "after-ms", 1, "delay for the timed modes", set_long, &a.after_ms },
		{ "lines", 1, "lines for --mode flood", set_long, &a.lines },
		{ "ready-line", 0, "print READY on stdout when ready", set_flag, &a.ready_line },
		{ 0 },
	};
	if (argc > 2 && strcmp(argv[1], "--mode") == 0 && strcmp(argv[2], "orphan") == 0) {
		/* the grandchild: no supervisor link, just live a while */
		for (int i = 3; i + 1 < argc; i += 2) {
			if (strcmp(argv[i], "--after-ms") == 0)
				a.after_ms = atol(argv[i + 1]);
			if (strcmp(argv[i], "--trace") == 0)
				a.trace = argv[i + 1];
		}
		trace(&a, "orphan-start");
		poll(NULL, 0, (int)a.after_ms);
		trace(&a, "orphan-exit");
		return 0;
	}
	for (int i = 1; i + 1 < argc; i++)   /* "main" before anything else: --trace by hand */
		if (strcmp(argv[i], "--trace") == 0)
			a.trace = argv[i + 1];
	trace(&a, "main");
	gk_err err;
	int rc = gk_svc_init(&a.svc, "testsvc", argc, argv, extra, &err);
	if (rc)
		return rc;
	trace(&a, "start");
	if (strcmp(a.mode, "crash") == 0) {
		trace(&a, "exit");
		_exit(3);
	}
	a.ticks = 42;
	gk_metric_counter_var("gpukmm_testsvc_ticks_total", "A test counter.", &a.ticks);
	if (strcmp(a.mode, "never-ready") != 0 && strcmp(a.mode, "late-ready") != 0) {
		trace(&a, "ready");
		gk_svc_ready(&a.svc);
		if (a.ready_line)
			write_all(1, "READY\n", 6);
	}
	if (strcmp(a.mode, "crash-when-ready") == 0)
		gk_loop_timer(a.svc.loop, 0, on_poll_ack, &a);
	if (strcmp(a.mode, "ignore-term") == 0)
		gk_svc_on_stop(&a.svc, on_ignore_stop, &a);
	if (strcmp(a.mode, "crash-after") == 0 || strcmp(a.mode, "hang") == 0 || strcmp(a.mode, "exit-clean") == 0 ||
	    strcmp(a.mode, "late-ready") == 0)
		gk_loop_timer(a.svc.loop, a.after_ms, on_after, &a);
	if (strcmp(a.mode, "grandchild") == 0) {
		grandchild(&a, argv[0]);
		trace(&a, "exit");
		_exit(5);
	}
	if (strcmp(a.mode, "flood") == 0) {
		char line[64];
		for (long i = 0; i < a.lines; i++) {
			int n = snprintf(line, sizeof(line), "flood %ld\n", i);
			write_all(1, line, (size_t)n);
		}
		write_all(1, "flood done\n", 11);
		trace(&a, "flood-done");
	}
	rc = gk_loop_run(a.svc.loop);
	trace(&a, "stop");
	/* the supervisor's heartbeat reply asks a draining service to stop again, and
	 * lib/svc then ends the loop: a stubborn service ignores that too, else it
	 * would stop by itself whenever a heartbeat lands within the stop timeout */
	if (strcmp(a.mode, "hang-teardown") == 0 || strcmp(a.mode, "ignore-term") == 0) {
		trace(&a, "teardown-hangs");
		for (;;)
			pause();   /* signals are blocked: nothing ends this but the bound */
	}
	gk_svc_fini(&a.svc);
	gk_ipc_fini();
	return rc;
}
