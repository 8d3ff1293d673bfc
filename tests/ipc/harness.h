/* Test helpers shared by the tests in tests/ipc: an in-process RPC server whose
 * dispatch runs on its own thread, temp dirs, deadlines. Header-only (each
 * test binary is one .c file). */
#ifndef GPUKMM_TEST_HARNESS_H
#define GPUKMM_TEST_HARNESS_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/ipc.h"

typedef struct th_server {
	gk_ipc_server *s;
	pthread_t th;
	int stopfd;
	char dir[64];
	char url[128];
} th_server;

static void *th_server_main(void *arg)
{
	th_server *t = arg;
	struct pollfd p[2] = { { gk_ipc_server_fd(t->s), POLLIN, 0 }, { t->stopfd, POLLIN, 0 } };
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents)
			gk_ipc_server_dispatch(t->s);
	}
	return NULL;
}

static inline void th_tmpdir(char *dir, size_t cap)
{
	snprintf(dir, cap, "/tmp/gk-test-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static inline void th_rmdir(const char *dir)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", dir);
}

/* Opens an ipc:// server in a fresh temp dir with `svc` registered, and starts
 * its dispatch thread. */
static inline void th_server_start(th_server *t, ProtobufCService *svc, void *user,
				   const char *const *mutating, const gk_ipc_opts *opts)
{
	memset(t, 0, sizeof(*t));
	th_tmpdir(t->dir, sizeof(t->dir));
	snprintf(t->url, sizeof(t->url), "ipc://%s/s.sock", t->dir);
	gk_err e;
	cr_assert_eq(gk_ipc_server_open(&t->s, t->url, opts, &e), 0, "%s", e.msg);
	if (svc)
		cr_assert_eq(gk_ipc_server_add(t->s, svc, user, mutating, &e), 0, "%s", e.msg);
	t->stopfd = eventfd(0, EFD_CLOEXEC);
	cr_assert_eq(pthread_create(&t->th, NULL, th_server_main, t), 0);
}

static inline void th_server_stop(th_server *t)
{
	uint64_t one = 1;
	cr_assert_eq(write(t->stopfd, &one, 8), 8);
	pthread_join(t->th, NULL);
	close(t->stopfd);
	gk_ipc_server_close(t->s);
	th_rmdir(t->dir);
}

/* Spawns $ENVDIR/prog with stderr appended to log (NULL = inherited). The
 * child's environment drops Criterion's BXFI_* variables: a program linked with
 * libcriterion (tests/bin helpers were, before the Makefile got its own rule for
 * them) takes them as "you are a Criterion worker" and aborts. The child dies
 * with the test's process (PR_SET_PDEATHSIG): a test that fails between the
 * spawn and its own kill leaves no server running. Call it from the test's
 * main thread (the signal follows the thread that forked). */
static inline pid_t th_spawn(const char *envdir, const char *prog, char *const argv[], const char *log)
{
	extern char **environ;
	const char *d = getenv(envdir);
	cr_assert_not_null(d, "$%s not set: run through tests/run.sh", envdir);
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", d, prog);
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 1, sizeof(char *));
	cr_assert_not_null(env);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "BXFI_", 5) != 0)
			env[k++] = environ[i];
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) { /* async-signal-safe calls only from here on */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(127);
		if (log) {
			int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			if (fd < 0 || dup2(fd, 2) < 0)
				_exit(127);
			close(fd);
		}
		execve(path, argv, env);
		_exit(127);
	}
	free(env);
	cr_assert_gt(pid, 0, "spawn %s: %s", path, strerror(errno));
	return pid;
}

/* A plain AF_UNIX connection to the socket file of an ipc:// URL, nothing sent:
 * the tests that speak (or break) nng's wire protocol by hand. */
static inline int th_ipc_connect(const char *url)
{
	const char *path = url + strlen("ipc://");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	cr_assert(strncmp(url, "ipc://", 6) == 0 && strlen(path) < sizeof(a.sun_path), "not an ipc:// URL: %s", url);
	memcpy(a.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "connect %s: %s", path, strerror(errno));
	return fd;
}

static inline int64_t th_ms(void)
{
	return gk_mono_ms();
}

/* Runs fn(arg) (a close) on its own thread and waits for it 5 s (x3 under
 * ASan). nng 1.5.2's nng_close can hang for good on a pipe caught in its
 * handshake (nng#1543, fixed upstream in 1.7.3; Debian 12 ships 1.5.2), and the
 * stuck reaper then hangs every later close of the process. The services
 * bound their teardown for that reason (lib/svc: STOP_BOUND_MS); a test that
 * checks something else than the close bounds it the same way: a close that
 * hangs is left behind with a line on stderr (the test process ends with the test,
 * nng has no exit handler, and Criterion's own worker channel is libnanomsg,
 * not libnng's nn_* compat layer: see CRIT_LIBS in the Makefile) and returns
 * false. */
typedef struct { void (*fn)(void *); void *arg; } th_bounded_call;
static void *th_bounded_main(void *p)
{
	th_bounded_call *c = p;
	c->fn(c->arg);
	free(c);
	return NULL;
}

static inline bool th_bounded(void (*fn)(void *), void *arg, const char *what)
{
	th_bounded_call *c = malloc(sizeof(*c));
	cr_assert_not_null(c);
	c->fn = fn;
	c->arg = arg;
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, th_bounded_main, c), 0);
	const char *san = getenv("SAN");
	int64_t ms = 5000 * (san && strcmp(san, "1") == 0 ? 3 : 1);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	if (pthread_timedjoin_np(th, NULL, &ts) == 0)
		return true;
	/* on stderr, not cr_log_warn: Criterion counts a warning as a failed run
	 * (exit 1 with every test passing), and this hang is nng's, not the test's */
	fprintf(stderr, "th_bounded: %s hung for %lld ms inside nng (nng#1543): left behind\n", what,
		(long long)ms);
	pthread_detach(th);
	return false;
}

#endif
