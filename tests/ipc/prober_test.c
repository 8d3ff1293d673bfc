/* gpukmm-prober as a process against an in-test statusd (gpukmm.Status):
 * first report, change via inotify on a fixture copy, no resend of an unchanged
 * report, statusd down then up (retry), SIGTERM. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../unit/probe_fixture.h"
#include "gpukmm/ipc.h"
#include "harness.h"
#include "status.pb-c.h"

extern char **environ;

/* ---- fake statusd --------------------------------------------------------- */

typedef struct seen {
	uint64_t generation;
	uint32_t numvfs;
	size_t n_gpus;
	char node[64];
} seen;

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	seen v[64];
	size_t n;
} store = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, { { 0 } }, 0 };

static void st_report(Gpukmm__Status_Service *svc, const Gpukmm__StatusReport *in, Gpukmm__Empty_Closure c,
		      void *cd)
{
	gk_ipc_fail(cd, GK_UNIMPLEMENTED, "not in this test");
}

static void st_report_node(Gpukmm__Status_Service *svc, const Gpukmm__NodeReport *in, Gpukmm__Empty_Closure c,
			   void *cd)
{
	pthread_mutex_lock(&store.mu);
	if (store.n < 64) {
		seen *s = &store.v[store.n++];
		s->generation = in->generation;
		s->n_gpus = in->n_gpus;
		s->numvfs = in->n_gpus ? in->gpus[0]->sriov_numvfs : 0;
		snprintf(s->node, sizeof s->node, "%s", in->node_name ? in->node_name : "");
	}
	pthread_cond_broadcast(&store.cv);
	pthread_mutex_unlock(&store.mu);
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	c(&e, cd);
}

static Gpukmm__Status_Service status_svc = GPUKMM__STATUS__INIT(st_);

/* Wait until at least n reports arrived; returns a copy of report n-1. */
static seen wait_reports(size_t n, int timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&store.mu);
	while (store.n < n)
		if (pthread_cond_timedwait(&store.cv, &store.mu, &ts) != 0)
			break;
	size_t got = store.n;
	seen s = got >= n ? store.v[n - 1] : (seen){ 0 };
	pthread_mutex_unlock(&store.mu);
	cr_assert_geq(got, n, "expected %zu reports within %d ms, got %zu", n, timeout_ms, got);
	return s;
}

static size_t n_reports(void)
{
	pthread_mutex_lock(&store.mu);
	size_t n = store.n;
	pthread_mutex_unlock(&store.mu);
	return n;
}

/* ---- the prober process ----------------------------------------------------- */

static pid_t spawn_prober(const char *root, const char *url, const char *log, const char *const *extra)
{
	const char *bin = getenv("GPUKMM_BIN");
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/gpukmm-prober", bin ? bin : "build/bin");
	const char *argv[32] = { path, "--root", root, "--statusd", url, "--node-name", "node-x",
				 "--interval-ms", "60000", "--debounce-ms", "30" };
	int k = 11;
	for (; extra && *extra && k < 30; extra++)
		argv[k++] = *extra;
	argv[k] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	pid_t pid;
	int rc = posix_spawn(&pid, path, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(rc, 0, "spawn %s", path);
	return pid;
}

static void dump_log(const char *log)
{
	char cmd[PATH_MAX];
	snprintf(cmd, sizeof cmd, "tail -n 30 '%s' >&2", log);
	if (system(cmd) != 0)
		fprintf(stderr, "could not show %s\n", log);
}

/* SIGTERM and wait (bounded); returns the exit status or -1 (then the log is shown). */
static int stop_prober(pid_t pid, const char *log)
{
	kill(pid, SIGTERM);
	int64_t end = th_ms() + 20000;
	int st;
	while (th_ms() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		struct timespec ts = { 0, 10 * 1000000 };
		nanosleep(&ts, NULL); /* polling a child's exit with a deadline */
	}
	char cmd[128];
	snprintf(cmd, sizeof cmd, "cat /proc/%d/task/*/wchan /proc/%d/task/*/stat >&2", (int)pid, (int)pid);
	if (system(cmd) != 0)
		fprintf(stderr, "no /proc view of %d\n", (int)pid);
	dump_log(log);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static void copy_fixture(const char *scen, char *dir, size_t cap)
{
	char root[PATH_MAX], cmd[3 * PATH_MAX];
	probe_fixture(scen, root);
	th_tmpdir(dir, cap);
	snprintf(cmd, sizeof cmd, "cp -a '%s/.' '%s/'", root, dir);
	cr_assert_eq(system(cmd), 0);
}

/* Replace a fixture file atomically (write + rename): the prober must never
 * see a half-written file here (a torn read would be a different, valid report). */
static void write_file(const char *dir, const char *rel, const char *text)
{
	char p[PATH_MAX], tmp[PATH_MAX + 8];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	snprintf(tmp, sizeof tmp, "%s.new", p);
	FILE *f = fopen(tmp, "w");
	cr_assert_not_null(f, "%s", tmp);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(rename(tmp, p), 0, "%s", p);
}

static bool file_has(const char *path, const char *needle, int timeout_ms)
{
	int64_t end = th_ms() + timeout_ms;
	char buf[16384];
	do {
		FILE *f = fopen(path, "r");
		if (f) {
			size_t n = fread(buf, 1, sizeof buf - 1, f);
			buf[n] = 0;
			fclose(f);
			if (strstr(buf, needle))
				return true;
		}
		struct timespec ts = { 0, 20 * 1000000 };
		nanosleep(&ts, NULL);
	} while (th_ms() < end);
	return false;
}

#define NUMVFS "sys/bus/pci/devices/0000:03:00.0/sriov_numvfs"

Test(prober, reports_changes_and_skips_unchanged, .timeout = 60)
{
	char dir[64], log[128];
	copy_fixture("oot-vfs", dir, sizeof dir);
	snprintf(log, sizeof log, "%s/prober.log", dir);
	th_server srv;
	th_server_start(&srv, &status_svc.base, NULL, NULL, NULL);
	pid_t pid = spawn_prober(dir, srv.url, log, NULL);

	seen s = wait_reports(1, 15000);
	cr_expect_eq(s.generation, 1);
	cr_expect_eq(s.n_gpus, 5);
	cr_expect_eq(s.numvfs, 4);
	cr_expect_str_eq(s.node, "node-x");

	/* VFs go away: the interval is 60 s, so this report comes through inotify */
	write_file(dir, NUMVFS, "0\n");
	s = wait_reports(2, 15000);
	cr_expect_eq(s.generation, 2);
	cr_expect_eq(s.numvfs, 0);

	/* an event without a change, then a change: no report in between */
	write_file(dir, NUMVFS, "0\n");
	write_file(dir, NUMVFS, "0\n");
	cr_assert(file_has(log, "generation 2", 5000));
	write_file(dir, NUMVFS, "3\n");
	s = wait_reports(3, 15000);
	cr_expect_eq(s.generation, 3);
	cr_expect_eq(s.numvfs, 3);
	cr_expect_eq(n_reports(), 3, "unchanged reports are not resent");

	cr_expect_eq(stop_prober(pid, log), 0, "SIGTERM: clean exit 0");
	th_server_stop(&srv);
	th_rmdir(dir);
}

Test(prober, statusd_down_then_up, .timeout = 60)
{
	char dir[64], log[128], url[160];
	copy_fixture("oot-vfs", dir, sizeof dir);
	snprintf(log, sizeof log, "%s/prober.log", dir);
	snprintf(url, sizeof url, "ipc://%s/statusd.sock", dir);
	const char *extra[] = { "--retry-min-ms", "50", "--retry-max-ms", "200", "--send-timeout-ms", "200", NULL };
	pid_t pid = spawn_prober(dir, url, log, extra);
	cr_assert(file_has(log, "sending the node report to statusd failed", 15000), "the first send fails");

	gk_err e;
	gk_ipc_server *s = NULL;
	cr_assert_eq(gk_ipc_server_open(&s, url, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_ipc_server_add(s, &status_svc.base, NULL, NULL, &e), 0, "%s", e.msg);
	/* dispatch on this thread until the report arrives */
	int64_t end = th_ms() + 15000;
	while (n_reports() == 0 && th_ms() < end) {
		struct pollfd p = { gk_ipc_server_fd(s), POLLIN, 0 };
		if (poll(&p, 1, 100) > 0)
			gk_ipc_server_dispatch(s);
	}
	cr_expect_geq(n_reports(), 1, "delivered once statusd is up");
	cr_expect_eq(store.v[0].generation, 1, "the same state, not a new generation");
	cr_expect(file_has(log, "statusd reachable again", 5000));
	cr_expect_eq(stop_prober(pid, log), 0);
	gk_ipc_server_close(s);
	th_rmdir(dir);
}

Test(prober, bad_flags_exit_2)
{
	char dir[64], log[128];
	th_tmpdir(dir, sizeof dir);
	snprintf(log, sizeof log, "%s/prober.log", dir);
	const char *extra[] = { "--module", "../etc", NULL };
	pid_t pid = spawn_prober(dir, "ipc:///nonexistent/x.sock", log, extra);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2);
	th_rmdir(dir);
}
