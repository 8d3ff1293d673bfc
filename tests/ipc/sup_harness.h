/* Helpers for the supervisor tests: run `gpukmm` with a JSON config in a temp
 * dir, ask its Control.List, read the trace files the test service writes,
 * scrape HTTP, wait for conditions with deadlines (never a fixed sleep).
 * Header-only; each test binary is one .c file. */
#ifndef GPUKMM_SUP_HARNESS_H
#define GPUKMM_SUP_HARNESS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include "control.pb-c.h"
#include "gpukmm/ipc.h"
#include "rpc.pb-c.h"

/* Under ASan everything is slower: deadlines scale, never the assertions' logic. */
static inline int sh_slow(void)
{
	const char *s = getenv("SAN");
	return s && strcmp(s, "1") == 0 ? 3 : 1;
}

static inline int64_t sh_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait (poll, not sleep-and-hope) until cond(arg) or the deadline. */
static inline bool sh_wait(bool (*cond)(void *), void *arg, int64_t ms)
{
	int64_t end = sh_now() + ms * sh_slow();
	for (;;) {
		if (cond(arg))
			return true;
		if (sh_now() >= end)
			return false;
		poll(NULL, 0, 10);
	}
}

typedef struct sh_sup {
	char dir[256];
	char rundir[300];
	char control[330];
	char out[300];
	pid_t pid;
	int status;
	bool exited;
	int out_pipe;         /* read end when stdout is a pipe, else -1 */
	gk_ipc_client *cli;
} sh_sup;

/* The one supervisor of this test (Criterion runs each test in its own process). */
static sh_sup *sh_current;

static inline const char *sh_tbin(const char *name)
{
	static char buf[4][600];
	static int k;
	const char *d = getenv("GPUKMM_TBIN");
	char *b = buf[k++ % 4];
	snprintf(b, 600, "%s/%s", d ? d : "build/tests/bin", name);
	return b;
}

static inline const char *sh_bin(const char *name)
{
	static char buf[4][600];
	static int k;
	const char *d = getenv("GPUKMM_BIN");
	char *b = buf[k++ % 4];
	snprintf(b, 600, "%s/%s", d ? d : "build/bin", name);
	return b;
}

static inline void sh_mkdir(sh_sup *s)
{
	const char *t = getenv("TMPDIR");
	snprintf(s->dir, sizeof(s->dir), "%s/gk-sup-XXXXXX", t && *t ? t : P_tmpdir);
	cr_assert_not_null(mkdtemp(s->dir));
	snprintf(s->rundir, sizeof(s->rundir), "%s/run", s->dir);
	snprintf(s->control, sizeof(s->control), "ipc://%s/control.sock", s->rundir);
	snprintf(s->out, sizeof(s->out), "%s/out", s->dir);
}

static inline void sh_path(const sh_sup *s, const char *name, char *buf, size_t cap)
{
	if (snprintf(buf, cap, "%s/%s", s->dir, name) >= (int)cap)
		cr_assert_fail("path too long");
}

static inline void sh_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* Start gpukmm --config <dir>/c.json --runtime-dir <dir>/run [extra...]. The
 * config text may use "@TBIN@" (test programs) and "@DIR@" (the temp dir).
 * stdout+stderr go to <dir>/out, or to a pipe when pipe_out. env: extra
 * "K=V" (NULL-terminated, may be NULL). */
static inline void sh_start(sh_sup *s, const char *config, bool pipe_out, char *const *env, ...)
{
	memset(s, 0, sizeof(*s));
	s->out_pipe = -1;
	sh_mkdir(s);
	/* substitute placeholders */
	char cfg[16384] = "";
	const char *tbin = getenv("GPUKMM_TBIN") ? getenv("GPUKMM_TBIN") : "build/tests/bin";
	const char *bin = getenv("GPUKMM_BIN") ? getenv("GPUKMM_BIN") : "build/bin";
	for (const char *p = config; *p;) {
		if (strncmp(p, "@TBIN@", 6) == 0) {
			strcat(cfg, tbin);
			p += 6;
		} else if (strncmp(p, "@BIN@", 5) == 0) {
			strcat(cfg, bin);
			p += 5;
		} else if (strncmp(p, "@DIR@", 5) == 0) {
			strcat(cfg, s->dir);
			p += 5;
		} else {
			size_t l = strlen(cfg);
			cfg[l] = *p++;
			cfg[l + 1] = 0;
		}
		cr_assert_lt(strlen(cfg), sizeof(cfg) - 700);
	}
	char cpath[300];
	sh_path(s, "c.json", cpath, sizeof(cpath));
	sh_write_file(cpath, cfg);

	char *argv[32];
	int ac = 0;
	argv[ac++] = (char *)sh_bin("gpukmm");
	argv[ac++] = "--config";
	argv[ac++] = cpath;
	argv[ac++] = "--runtime-dir";
	argv[ac++] = s->rundir;
	va_list ap;
	va_start(ap, env);
	const char *a;
	while ((a = va_arg(ap, const char *)) && ac < 30)
		argv[ac++] = (char *)a;
	va_end(ap);
	argv[ac] = NULL;

	int p[2] = { -1, -1 };
	if (pipe_out)
		cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t parent = getpid();
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* the test process dying takes the supervisor (and so its services) along */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(126);
		int fd = pipe_out ? p[1] : open(s->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		/* Criterion's sandbox map must not reach our services: test programs
		 * linked with libcriterion would take themselves for its workers */
		unsetenv("BXFI_MAP");
		for (char *const *e = env; e && *e; e++)
			putenv(*e);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pipe_out) {
		close(p[1]);
		s->out_pipe = p[0];
	}
	s->pid = pid;
	sh_current = s;
	gk_err err;
	gk_ipc_opts o = { .reconnect_min_ms = 10, .reconnect_max_ms = 100 };
	cr_assert_eq(gk_ipc_client_open(&s->cli, s->control, &o, &err), 0, "%s", err.msg);
}

/* Has it exited? (reaps it) */
static inline bool sh_exited(sh_sup *s)
{
	if (s->exited)
		return true;
	int st;
	pid_t r = waitpid(s->pid, &st, WNOHANG);
	if (r == s->pid) {
		s->exited = true;
		s->status = st;
	}
	return s->exited;
}

static bool sh_exited_cond(void *a)
{
	return sh_exited(a);
}

/* Exit code of the supervisor after waiting up to ms; -1 if it did not exit. */
static inline int sh_wait_exit(sh_sup *s, int64_t ms)
{
	if (!sh_wait(sh_exited_cond, s, ms))
		return -1;
	return WIFEXITED(s->status) ? WEXITSTATUS(s->status) : 128 + WTERMSIG(s->status);
}

static inline int sh_stop(sh_sup *s, int64_t ms)
{
	if (!s->exited)
		kill(s->pid, SIGTERM);
	return sh_wait_exit(s, ms);
}

/* Teardown: never leave anything running. */
static inline void sh_cleanup(void)
{
	sh_sup *s = sh_current;
	if (!s)
		return;
	if (!s->exited) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		s->exited = true;
	}
	if (s->cli)
		gk_ipc_client_close(s->cli);
	s->cli = NULL;
	if (s->out_pipe >= 0)
		close(s->out_pipe);
	s->out_pipe = -1;
	if (getenv("SH_KEEP") == NULL) {
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cleanup of %s failed\n", s->dir);
	}
	sh_current = NULL;
}

/* Control.List; NULL when the supervisor does not answer (yet). Free with gk_ipc_free. */
static inline Gpukmm__ServiceTable *sh_list(sh_sup *s)
{
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	gk_err err;
	/* the control socket is re-opened after each service death: retry a little */
	for (int64_t end = sh_now() + 3000 * sh_slow(); !s->exited && sh_now() < end;) {
		ProtobufCMessage *r = NULL;
		if (gk_ipc_call(s->cli, &gpukmm__control__descriptor, "List", &e.base, &r, 1000 * sh_slow(), &err) == 0)
			return (Gpukmm__ServiceTable *)r;
	}
	return NULL;
}

static inline Gpukmm__ServiceInfo *sh_svc(Gpukmm__ServiceTable *t, const char *name)
{
	for (size_t i = 0; t && i < t->n_services; i++)
		if (strcmp(t->services[i]->name, name) == 0)
			return t->services[i];
	return NULL;
}

/* Wait until service `name` is in `state` (and, if min_restarts >= 0, restarted at least that often). */
typedef struct sh_state_q { sh_sup *s; const char *name, *state; int min_restarts; Gpukmm__ServiceInfo last; } sh_state_q;
static bool sh_state_cond(void *a)
{
	sh_state_q *q = a;
	Gpukmm__ServiceTable *t = sh_list(q->s);
	Gpukmm__ServiceInfo *i = sh_svc(t, q->name);
	bool ok = i && strcmp(i->state, q->state) == 0 && (q->min_restarts < 0 || (int)i->restarts >= q->min_restarts);
	if (i) {
		q->last = *i;
		q->last.name = q->last.state = NULL;
		q->last.metrics = NULL;
		q->last.n_metrics = 0;
	}
	if (t)
		gk_ipc_free(&t->base);
	return ok;
}

static inline bool sh_wait_state(sh_sup *s, const char *name, const char *state, int min_restarts, int64_t ms)
{
	sh_state_q q = { s, name, state, min_restarts, GPUKMM__SERVICE_INFO__INIT };
	return sh_wait(sh_state_cond, &q, ms);
}

/* Whole file into a malloc'd string ("" if absent). */
static inline char *sh_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (f) {
		char tmp[65536];
		size_t n;
		while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
			fwrite(tmp, 1, n, m);
		fclose(f);
	}
	fclose(m);
	return buf;
}

/* Events of a trace file: up to cap of them matching `ev` (pids and times). */
static inline int sh_trace(const sh_sup *s, const char *file, const char *ev, int *pids, int64_t *times, int cap)
{
	char path[300];
	sh_path(s, file, path, sizeof(path));
	char *t = sh_slurp(path);
	int n = 0;
	char *save = NULL;
	for (char *l = strtok_r(t, "\n", &save); l && n < cap; l = strtok_r(NULL, "\n", &save)) {
		char e[64];
		int pid;
		long long ms;
		if (sscanf(l, "%63s %d %lld", e, &pid, &ms) == 3 && strcmp(e, ev) == 0) {
			if (pids)
				pids[n] = pid;
			if (times)
				times[n] = ms;
			n++;
		}
	}
	free(t);
	return n;
}

typedef struct sh_trace_q { const sh_sup *s; const char *file, *ev; int n; } sh_trace_q;
static bool sh_trace_cond(void *a)
{
	sh_trace_q *q = a;
	return sh_trace(q->s, q->file, q->ev, NULL, NULL, 1 << 20) >= q->n;
}

static inline bool sh_wait_trace(const sh_sup *s, const char *file, const char *ev, int n, int64_t ms)
{
	sh_trace_q q = { s, file, ev, n };
	return sh_wait(sh_trace_cond, &q, ms);
}

/* The supervisor's output so far contains `needle`. */
typedef struct sh_out_q { const sh_sup *s; const char *needle; } sh_out_q;
static bool sh_out_cond(void *a)
{
	sh_out_q *q = a;
	char *t = sh_slurp(q->s->out);
	bool ok = strstr(t, q->needle) != NULL;
	free(t);
	return ok;
}

static inline bool sh_wait_out(const sh_sup *s, const char *needle, int64_t ms)
{
	sh_out_q q = { s, needle };
	return sh_wait(sh_out_cond, &q, ms);
}

/* Children of pid that are zombies (state Z), from /proc. */
static inline int sh_zombies_of(pid_t parent)
{
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t r = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[r] = 0;
		char *rp = strrchr(buf, ')');
		char st;
		int ppid;
		if (rp && sscanf(rp + 1, " %c %d", &st, &ppid) == 2 && ppid == parent && st == 'Z')
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static inline bool sh_pid_alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t r = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[r] = 0;
	char *rp = strrchr(buf, ')');
	char st = 0;
	return rp && sscanf(rp + 1, " %c", &st) == 1 && st != 'Z' && st != 'X';
}

/* GET http://127.0.0.1:port/path; returns the status code, body in *body (malloc'd). */
static inline int sh_http_get(int port, const char *path, char **body)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	*body = NULL;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
	if (write(fd, req, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char tmp[8192];
	ssize_t r;
	while ((r = read(fd, tmp, sizeof(tmp))) > 0)
		fwrite(tmp, 1, (size_t)r, m);
	fclose(m);
	close(fd);
	int code = -1;
	if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1)
		code = -1;
	char *b = strstr(buf, "\r\n\r\n");
	*body = strdup(b ? b + 4 : "");
	free(buf);
	return code;
}

/* The HTTP port the supervisor logged ("listening on 127.0.0.1:PORT"). */
/* The port of "<what>: listening on 127.0.0.1:PORT" in the supervisor's output. */
static inline int sh_listen_port(const sh_sup *s, const char *what)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "%s: listening on 127.0.0.1:", what);
	if (!sh_wait_out(s, pat, 5000))
		return -1;
	char *t = sh_slurp(s->out);
	int port = -1;
	char *p = strstr(t, pat);
	if (p)
		sscanf(p + strlen(pat), "%d", &port);
	free(t);
	return port;
}
/* --http-listen 127.0.0.1:0 (probes) and --metrics-listen 127.0.0.1:0. */
static inline int sh_http_port(const sh_sup *s) { return sh_listen_port(s, "http"); }
static inline int sh_metrics_port(const sh_sup *s) { return sh_listen_port(s, "metrics"); }

/* Value of one sample in Prometheus text ("name{labels}" exactly as written); NAN if absent. */
static inline double sh_metric(const char *text, const char *series)
{
	size_t n = strlen(series);
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, series, n) == 0 && l[n] == ' ')
			return strtod(l + n + 1, NULL);
	}
	return 0.0 / 0.0;
}

#endif
