/* Supervisor benchmarks, side by side in one run:
 *
 * 1. Restart latency: a service that exits as soon as it is ready
 *    (sup_testsvc --mode crash-when-ready). Latency of one restart = the time
 *    from its exit to the next instance being ready again — under gpukmm,
 *    ready means Control.Ready was acknowledged; under runit's runsv
 *    (readiness = the program is up; runsv restarts after its fixed 1 s pause)
 *    the same program runs standalone and is ready at once. Times come from
 *    the program's own trace (CLOCK_MONOTONIC, shared by all processes).
 *    gpukmm: N_GK restarts with backoff 0; runsv: N_RUNIT restarts (each costs
 *    a second, so fewer).
 * 2. Idle footprint: gpukmm with 6 idle services (heartbeat every 1 s):
 *    RSS and CPU time of the supervisor over a short window, extrapolated to
 *    one minute.
 *
 * Prints a summary and writes $BUILD/bench/supervisor_bench.json. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N_GK 200
#define N_RUNIT 5
#define IDLE_WINDOW_MS 10000

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char build[256], tbin[700], bin[700], work[512];

static pid_t spawn(char *const argv[], const char *out)
{
	pid_t parent = getpid();
	pid_t p = fork();
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(126);
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	return p;
}

static void stop(pid_t p)
{
	kill(p, SIGTERM);
	for (int64_t end = now_ms() + 10000; now_ms() < end; poll(NULL, 0, 10))
		if (waitpid(p, NULL, WNOHANG) == p)
			return;
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
}

/* One instance of the crashing service, from its trace (and, for gpukmm, the
 * supervisor's log): every time is CLOCK_MONOTONIC ms, -1 when unknown. */
typedef struct inst {
	int pid;
	int64_t reaped, exec, main, start, ready, acked, exit;
} inst;

#define MAX_INST (N_GK + 64)

static inst *inst_of(inst *v, int *n, int pid)
{
	for (int i = *n - 1; i >= 0; i--)
		if (v[i].pid == pid)
			return &v[i];
	if (*n >= MAX_INST)
		return NULL;
	v[*n] = (inst){ pid, -1, -1, -1, -1, -1, -1, -1 };
	return &v[(*n)++];
}

static int read_trace(const char *path, inst *v)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int n = 0, pid;
	char line[256], e[64];
	long long ms;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %d %lld", e, &pid, &ms) != 3)
			continue;
		inst *x = inst_of(v, &n, pid);
		if (!x)
			break;
		if (!strcmp(e, "main"))
			x->main = ms;
		else if (!strcmp(e, "start"))
			x->start = ms;
		else if (!strcmp(e, "ready"))
			x->ready = ms;
		else if (!strcmp(e, "acked"))
			x->acked = ms;
		else if (!strcmp(e, "exit"))
			x->exit = ms;
	}
	fclose(f);
	return n;
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC in ms: turns the log's wall-clock stamps into trace time. */
static int64_t real_minus_mono(void)
{
	struct timespec r, m;
	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m);
	return ((int64_t)r.tv_sec - m.tv_sec) * 1000 + (r.tv_nsec - m.tv_nsec) / 1000000;
}

/* Times of the supervisor's log lines, in trace time (ms; -1 unparsable). */
static int64_t log_time(const char *line, int64_t off)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	int msec;
	if (sscanf(line, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
		   &tm.tm_sec, &msec) != 7)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000 + msec - off;
}

/* From the supervisor's log (info level): "service c: started, pid N" is
 * logged when the child's exec succeeded (spawn.c waits for it); "service c:
 * ...: restarting in 0 ms" when the death was reaped — the k-th such line is
 * the death of the k-th instance (one service, started in trace order). */
static void read_log_times(const char *log, inst *v, int n)
{
	FILE *f = fopen(log, "r");
	if (!f)
		return;
	int64_t off = real_minus_mono();
	char line[512];
	int deaths = 0;
	while (fgets(line, sizeof(line), f)) {
		int64_t t = log_time(line, off);
		char *p = strstr(line, ": started, pid ");
		if (t < 0 || !strstr(line, "gpukmm: service c: "))
			continue;
		if (p) {
			int pid = atoi(p + strlen(": started, pid "));
			for (int i = 0; i < n; i++)
				if (v[i].pid == pid)
					v[i].exec = t;
		} else if (strstr(line, ": restarting in ") && deaths < n) {
			v[deaths++].reaped = t;
		}
	}
	fclose(f);
}

/* Restart latencies: instance i's exit -> instance i+1 acked. */
static int latencies(const inst *v, int n, int64_t *lat, int cap)
{
	int k = 0;
	for (int i = 0; i + 1 < n && k < cap; i++)
		if (v[i].exit >= 0 && v[i + 1].acked >= 0)
			lat[k++] = v[i + 1].acked - v[i].exit;
	return k;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(int64_t *v, int n, double p)
{
	if (n == 0)
		return -1;
	qsort(v, (size_t)n, sizeof(*v), cmp64);
	int i = (int)(p * (n - 1) + 0.5);
	return (double)v[i];
}

static inst g_inst[MAX_INST];
static int g_ninst;

static int wait_latencies(const char *trace, int want, int64_t timeout_ms, int64_t *lat)
{
	int n = 0;
	for (int64_t end = now_ms() + timeout_ms; now_ms() < end; poll(NULL, 0, 20)) {
		g_ninst = read_trace(trace, g_inst);
		if ((n = latencies(g_inst, g_ninst, lat, want)) >= want)
			break;
	}
	return n;
}

/* Where one restart's time goes, p50/p99 of each step over the restarts measured. */
typedef struct phase { const char *name; double p50, p99; int n; } phase;
enum { PH_CRASH_REAP, PH_REAP_EXEC, PH_EXEC_MAIN, PH_MAIN_INIT, PH_INIT_ACK, PH_N };
static phase phases[PH_N] = {
	{ "crash -> death reaped by the supervisor", 0, 0, 0 },
	{ "reaped -> new child exec'd (fork, exec)", 0, 0, 0 },
	{ "exec -> main() (dynamic loader)", 0, 0, 0 },
	{ "main() -> init done (lib/svc: loop, nng, dial)", 0, 0, 0 },
	{ "init -> Control.Ready acked (connect + RPC)", 0, 0, 0 },
};

static double pct(int64_t *v, int n, double p);

static void breakdown(int want)
{
	static int64_t d[PH_N][MAX_INST];
	int k[PH_N] = { 0 };
	for (int i = 0; i + 1 < g_ninst && i < want; i++) {
		const inst *a = &g_inst[i], *b = &g_inst[i + 1];
		if (a->exit < 0 || b->acked < 0)
			continue;
		if (a->reaped >= 0)
			d[PH_CRASH_REAP][k[PH_CRASH_REAP]++] = a->reaped - a->exit;
		if (a->reaped >= 0 && b->exec >= 0)
			d[PH_REAP_EXEC][k[PH_REAP_EXEC]++] = b->exec - a->reaped;
		if (b->exec >= 0 && b->main >= 0)
			d[PH_EXEC_MAIN][k[PH_EXEC_MAIN]++] = b->main - b->exec;
		if (b->main >= 0 && b->start >= 0)
			d[PH_MAIN_INIT][k[PH_MAIN_INIT]++] = b->start - b->main;
		if (b->start >= 0)
			d[PH_INIT_ACK][k[PH_INIT_ACK]++] = b->acked - b->start;
	}
	for (int p = 0; p < PH_N; p++) {
		phases[p].n = k[p];
		phases[p].p50 = pct(d[p], k[p], 0.5);
		phases[p].p99 = pct(d[p], k[p], 0.99);
	}
}

static int bench_gpukmm(int64_t *lat)
{
	char cfg[700], trace[700], out[700], rundir[700];
	snprintf(cfg, sizeof(cfg), "%s/gk.json", work);
	snprintf(trace, sizeof(trace), "%s/gk.trace", work);
	snprintf(out, sizeof(out), "%s/gk.out", work);
	snprintf(rundir, sizeof(rundir), "%s/gkrun", work);
	FILE *f = fopen(cfg, "w");
	if (!f)
		return 0;
	fprintf(f, "{\"intensity\":{\"max_restarts\":0,\"window_ms\":0},\"services\":[{\"name\":\"c\","
		   "\"binary\":\"%s/sup_testsvc\",\"args\":[\"--mode\",\"crash-when-ready\",\"--trace\",\"%s\"],"
		   "\"backoff\":{\"initial_ms\":0,\"max_ms\":0}}]}",
		tbin, trace);
	fclose(f);
	char gk[800];
	snprintf(gk, sizeof(gk), "%s/gpukmm", bin);
	/* log level info (the default): "started, pid N" gives each exec time */
	char *argv[] = { gk, "--config", cfg, "--runtime-dir", rundir, NULL };
	pid_t p = spawn(argv, out);
	int n = wait_latencies(trace, N_GK, 120000, lat);
	stop(p);
	read_log_times(out, g_inst, g_ninst);
	breakdown(N_GK);
	return n;
}

static int bench_runsv(int64_t *lat)
{
	char dir[700], run[800], trace[700], out[700];
	snprintf(dir, sizeof(dir), "%s/runit-svc", work);
	snprintf(run, sizeof(run), "%s/run", dir);
	snprintf(trace, sizeof(trace), "%s/runit.trace", work);
	snprintf(out, sizeof(out), "%s/runit.out", work);
	mkdir(dir, 0700);
	FILE *f = fopen(run, "w");
	if (!f)
		return 0;
	fprintf(f, "#!/bin/sh\nexec '%s/sup_testsvc' --mode crash-when-ready --ready-line --trace '%s'\n", tbin, trace);
	fclose(f);
	chmod(run, 0700);
	char *argv[] = { "/usr/bin/runsv", dir, NULL };
	if (access(argv[0], X_OK) != 0)
		return -1;
	pid_t p = spawn(argv, out);
	int n = wait_latencies(trace, N_RUNIT, 30000, lat);
	stop(p);
	return n;
}

static void proc_usage(pid_t p, long *rss_kb, double *cpu_s)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)p);
	FILE *f = fopen(path, "r");
	*rss_kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", rss_kb) == 1)
			break;
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
	f = fopen(path, "r");
	*cpu_s = -1;
	if (f && fgets(line, sizeof(line), f)) {
		char *rp = strrchr(line, ')');
		unsigned long ut, st;
		if (rp && sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
			*cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	}
	if (f)
		fclose(f);
}

static int bench_idle(long *rss_kb, double *cpu_per_min)
{
	char cfg[700], out[700], rundir[700], trace[700];
	snprintf(cfg, sizeof(cfg), "%s/idle.json", work);
	snprintf(out, sizeof(out), "%s/idle.out", work);
	snprintf(rundir, sizeof(rundir), "%s/idlerun", work);
	snprintf(trace, sizeof(trace), "%s/idle.trace", work);
	FILE *f = fopen(cfg, "w");
	if (!f)
		return -1;
	fprintf(f, "{\"services\":[");
	for (int i = 0; i < 6; i++)
		fprintf(f, "%s{\"name\":\"s%d\",\"binary\":\"%s/sup_testsvc\",\"args\":[\"--trace\",\"%s\"]}", i ? "," : "",
			i, tbin, trace);
	fprintf(f, "]}");
	fclose(f);
	char gk[800];
	snprintf(gk, sizeof(gk), "%s/gpukmm", bin);
	char *argv[] = { gk, "--config", cfg, "--runtime-dir", rundir, NULL };
	pid_t p = spawn(argv, out);
	/* wait for the 6 services to be ready, then measure the window */
	for (int64_t end = now_ms() + 20000; now_ms() < end; poll(NULL, 0, 20)) {
		FILE *t = fopen(trace, "r");
		int n = 0;
		char line[256];
		while (t && fgets(line, sizeof(line), t))
			n += strncmp(line, "ready ", 6) == 0;
		if (t)
			fclose(t);
		if (n >= 6)
			break;
	}
	poll(NULL, 0, 1000);   /* let start-up settle */
	long rss0;
	double cpu0, cpu1;
	proc_usage(p, &rss0, &cpu0);
	int64_t t0 = now_ms();
	poll(NULL, 0, IDLE_WINDOW_MS);   /* the measured window: nothing to synchronise with */
	proc_usage(p, rss_kb, &cpu1);
	int64_t dt = now_ms() - t0;
	stop(p);
	*cpu_per_min = (cpu1 - cpu0) * 60000.0 / (double)dt;
	return 0;
}

int main(void)
{
	const char *b = getenv("BUILD"), *eb = getenv("GPUKMM_BIN"), *et = getenv("GPUKMM_TBIN");
	snprintf(build, sizeof(build), "%s", b && *b ? b : "build");
	snprintf(bin, sizeof(bin), "%s/bin", build);
	snprintf(tbin, sizeof(tbin), "%s/tests/bin", build);
	if (build[0] != '/') {
		char cwd[256];
		if (getcwd(cwd, sizeof(cwd))) {
			snprintf(bin, sizeof(bin), "%s/%s/bin", cwd, build);
			snprintf(tbin, sizeof(tbin), "%s/%s/tests/bin", cwd, build);
		}
	}
	if (eb && *eb && et && *et) {   /* as tests/bench/run.sh exports them */
		snprintf(bin, sizeof(bin), "%s", eb);
		snprintf(tbin, sizeof(tbin), "%s", et);
	}
	const char *t = getenv("TMPDIR");
	snprintf(work, sizeof(work), "%s/gk-bench-XXXXXX", t && *t ? t : P_tmpdir);
	if (!mkdtemp(work)) {
		perror("mkdtemp");
		return 1;
	}
	static int64_t gk[N_GK], rv[N_RUNIT];
	int ngk = bench_gpukmm(gk);
	int nrv = bench_runsv(rv);
	double gk50 = pct(gk, ngk, 0.5), gk99 = pct(gk, ngk, 0.99);
	double rv50 = nrv > 0 ? pct(rv, nrv, 0.5) : -1, rv99 = nrv > 0 ? pct(rv, nrv, 0.99) : -1;
	long rss_kb = -1;
	double cpu_min = -1;
	bench_idle(&rss_kb, &cpu_min);

	printf("supervisor restart latency (exit -> ready again):\n");
	printf("  gpukmm (backoff 0, ready = Control.Ready acked): n=%d p50=%.0f ms p99=%.0f ms\n", ngk, gk50, gk99);
	if (nrv > 0)
		printf("  runit runsv (fixed 1 s pause):                   n=%d p50=%.0f ms p99=%.0f ms\n", nrv, rv50, rv99);
	else
		printf("  runit runsv: not available\n");
	if (nrv > 0 && gk50 > 0)
		printf("  ratio runsv/gpukmm p50 = %.1fx, p99 = %.1fx\n", rv50 / gk50, rv99 / (gk99 > 0 ? gk99 : 1));
	printf("  gpukmm breakdown of one restart (p50 / p99 ms; the p99s do not add up):\n");
	for (int i = 0; i < PH_N; i++)
		printf("    %-50s %4.0f / %4.0f  (n=%d)\n", phases[i].name, phases[i].p50, phases[i].p99, phases[i].n);
	printf("supervisor idle footprint (6 idle services, %d s window extrapolated to 1 min):\n", IDLE_WINDOW_MS / 1000);
	printf("  RSS %ld KiB, CPU %.3f s per minute\n", rss_kb, cpu_min);

	char jpath[700];
	snprintf(jpath, sizeof(jpath), "%s/bench", build);
	mkdir(jpath, 0755);
	snprintf(jpath, sizeof(jpath), "%s/bench/supervisor_bench.json", build);
	FILE *j = fopen(jpath, "w");
	if (j) {
		fprintf(j, "{\"name\":\"supervisor_bench\",\"summary\":\"restart p50 %.0f ms p99 %.0f ms vs runsv p50 %.0f ms "
			   "(%.1fx); idle 6 services: RSS %ld KiB, CPU %.3f s/min\",",
			gk50, gk99, rv50, nrv > 0 && gk50 > 0 ? rv50 / gk50 : 0.0, rss_kb, cpu_min);
		fprintf(j, "\"restart_latency_ms\":{\"gpukmm\":{\"n\":%d,\"p50\":%.0f,\"p99\":%.0f},"
			   "\"runsv\":{\"n\":%d,\"p50\":%.0f,\"p99\":%.0f},\"ratio_p50\":%.2f},"
			   "\"breakdown_ms\":{\"crash_to_reaped\":[%.0f,%.0f],\"reaped_to_exec\":[%.0f,%.0f],\"exec_to_main\":[%.0f,%.0f],"
			   "\"main_to_init\":[%.0f,%.0f],\"init_to_ready\":[%.0f,%.0f]},"
			   "\"idle\":{\"services\":6,\"window_s\":%d,\"rss_kib\":%ld,\"cpu_s_per_min\":%.4f}}\n",
			ngk, gk50, gk99, nrv, rv50, rv99, nrv > 0 && gk50 > 0 ? rv50 / gk50 : 0.0,
			phases[0].p50, phases[0].p99, phases[1].p50, phases[1].p99, phases[2].p50, phases[2].p99,
			phases[3].p50, phases[3].p99, phases[4].p50, phases[4].p99, IDLE_WINDOW_MS / 1000,
			rss_kb, cpu_min);
		fclose(j);
	}
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", work);
	return ngk == N_GK ? 0 : 1;
}
