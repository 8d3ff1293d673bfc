/* Benchmark: one full probe of the largest fixture (8 GPUs with 63 VFs each,
 * built by tests/fixtures/probe-fixture.sh) — in-process gk_probe_run, the
 * `gpukmm-probe --json` and `gpukmmctl probe --json` processes, and the
 * baseline `lspci -k -vmm` (libpci sysfs on the same tree) + `modinfo`
 * (libkmod on the same lib/modules) processes, interleaved in one run.
 * Target (issue #21): gpukmm-probe <= 1.0x the baseline in wall time and in
 * max RSS (PASS/MISS); gpukmmctl probe (the same code, started with the
 * cluster client's libraries) is printed for comparison. Writes
 * $BUILD/bench/probe_big.json. Run by tests/bench/run.sh (make bench B=probe);
 * by hand: probe_big [ROOT KVER GPUKMMCTL OUT.json [RUNS]]. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "gpukmm/probe.h"

extern char **environ;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Run argv with stdout/stderr to /dev/null; wall ms and the child's max RSS (KiB). */
static double cpu_ms(const struct rusage *ru)
{
	return ru->ru_utime.tv_sec * 1e3 + ru->ru_utime.tv_usec / 1e3 + ru->ru_stime.tv_sec * 1e3 +
	       ru->ru_stime.tv_usec / 1e3;
}

/* Run argv with stdout/stderr to /dev/null; wall ms, CPU ms and the child's max RSS (KiB). */
static int run(char *const argv[], double *ms, double *cpu, long *rss_kib)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	double t0 = now_ms();
	pid_t pid;
	if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	int st;
	struct rusage ru;
	if (wait4(pid, &st, 0, &ru) != pid)
		return -1;
	*ms = now_ms() - t0;
	*cpu = cpu_ms(&ru);
	*rss_kib = ru.ru_maxrss;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv)
{
	char root_buf[4096], ctl_buf[4096], out_buf[4096], cmd[8192];
	const char *root, *kver = "6.8.0-gk-test", *ctl, *out;
	/* modinfo lives in /usr/sbin, not on every user's PATH */
	const char *path = getenv("PATH");
	snprintf(cmd, sizeof cmd, "%s:/usr/sbin:/sbin", path ? path : "/usr/bin:/bin");
	setenv("PATH", cmd, 1);
	if (argc >= 5) {
		root = argv[1], kver = argv[2], ctl = argv[3], out = argv[4];
	} else if (argc == 1) {
		const char *src = getenv("GPUKMM_SRC"), *build = getenv("BUILD"), *bin = getenv("GPUKMM_BIN");
		src = src ? src : ".";
		build = build ? build : "build";
		char base[2048];
		if (build[0] == '/')
			snprintf(base, sizeof base, "%s", build);
		else
			snprintf(base, sizeof base, "%s/%s", src, build);
		snprintf(cmd, sizeof cmd, "'%s/tests/fixtures/probe-fixture.sh' big '%s/fixtures/probe'", src, base);
		FILE *p = popen(cmd, "r");
		if (!p || !fgets(root_buf, sizeof root_buf, p) || pclose(p) != 0) {
			fprintf(stderr, "probe_big: could not build the fixture (%s)\n", cmd);
			return 1;
		}
		root_buf[strcspn(root_buf, "\n")] = 0;
		root = root_buf;
		if (bin)
			snprintf(ctl_buf, sizeof ctl_buf, "%s/gpukmmctl", bin);
		else
			snprintf(ctl_buf, sizeof ctl_buf, "%s/bin/gpukmmctl", base);
		ctl = ctl_buf;
		snprintf(out_buf, sizeof out_buf, "%s/bench/probe_big.json", base);
		out = out_buf;
	} else {
		fprintf(stderr, "usage: probe_big [ROOT KVER GPUKMMCTL OUT.json [RUNS]]\n");
		return 2;
	}
	int runs = argc > 5 ? atoi(argv[5]) : (getenv("PROBE_BENCH_RUNS") ? atoi(getenv("PROBE_BENCH_RUNS")) : 15);
	if (runs < 3 || runs > 1000)
		runs = 15;
	double *inproc = calloc((size_t)runs, sizeof *inproc), *ours = calloc((size_t)runs, sizeof *ours),
	       *base = calloc((size_t)runs, sizeof *base), *ours_cpu = calloc((size_t)runs, sizeof *ours_cpu),
	       *base_cpu = calloc((size_t)runs, sizeof *base_cpu), *lean = calloc((size_t)runs, sizeof *lean),
	       *lean_cpu = calloc((size_t)runs, sizeof *lean_cpu);
	if (!inproc || !ours || !base || !ours_cpu || !base_cpu || !lean || !lean_cpu)
		return 1;
	char sysfs[4200];
	snprintf(sysfs, sizeof sysfs, "sysfs.path=%s/sys/bus/pci", root);
	char *ctl_argv[] = { (char *)ctl, "probe", "--root", (char *)root, "--json", NULL };
	/* gpukmm-probe: next to gpukmmctl */
	char probe_bin[4200];
	const char *slash = strrchr(ctl, '/');
	snprintf(probe_bin, sizeof probe_bin, "%.*sgpukmm-probe", slash ? (int)(slash - ctl + 1) : 0, ctl);
	char *probe_argv[] = { probe_bin, "--root", (char *)root, "--json", NULL };
	char *lspci_argv[] = { "lspci", "-k", "-vmm", "-A", "linux-sysfs", "-O", sysfs, NULL };
	char *modinfo_argv[] = { "modinfo", "-b", (char *)root, "-k", (char *)kver, "xe", NULL };
	long rss_ours = 0, rss_base = 0, rss_lean = 0, r1, r2;
	size_t gpus = 0;
	for (int i = 0; i < runs; i++) { /* interleaved: both sides see the same machine load */
		double t0 = now_ms();
		Gpukmm__NodeReport *r = NULL;
		gk_probe_opts o = { .root = root };
		if (gk_probe_run(&o, &r, NULL) != 0) {
			fprintf(stderr, "probe failed\n");
			return 1;
		}
		inproc[i] = now_ms() - t0;
		gpus = r->n_gpus;
		gk_probe_report_free(r);
		double a, b, ca, cb;
		if (run(ctl_argv, &ours[i], &ours_cpu[i], &r1) != 0) {
			fprintf(stderr, "gpukmmctl probe failed\n");
			return 1;
		}
		if (r1 > rss_ours)
			rss_ours = r1;
		if (run(probe_argv, &lean[i], &lean_cpu[i], &r1) != 0) {
			fprintf(stderr, "%s failed\n", probe_bin);
			return 1;
		}
		if (r1 > rss_lean)
			rss_lean = r1;
		if (run(lspci_argv, &a, &ca, &r1) != 0 || run(modinfo_argv, &b, &cb, &r2) != 0) {
			fprintf(stderr, "lspci/modinfo failed\n");
			return 1;
		}
		base[i] = a + b;
		base_cpu[i] = ca + cb;
		if (r1 > rss_base)
			rss_base = r1;
		if (r2 > rss_base)
			rss_base = r2;
	}
	qsort(inproc, (size_t)runs, sizeof *inproc, cmp_d);
	qsort(ours, (size_t)runs, sizeof *ours, cmp_d);
	qsort(lean, (size_t)runs, sizeof *lean, cmp_d);
	qsort(base, (size_t)runs, sizeof *base, cmp_d);
	qsort(ours_cpu, (size_t)runs, sizeof *ours_cpu, cmp_d);
	qsort(lean_cpu, (size_t)runs, sizeof *lean_cpu, cmp_d);
	qsort(base_cpu, (size_t)runs, sizeof *base_cpu, cmp_d);
	double mi = inproc[runs / 2], mo = ours[runs / 2], ml = lean[runs / 2], mb = base[runs / 2];
	double co = ours_cpu[runs / 2], cl = lean_cpu[runs / 2], cb = base_cpu[runs / 2];
	double rt = ml / mb, rc = cb > 0 ? cl / cb : 0.0, rr = rss_base ? (double)rss_lean / (double)rss_base : 0.0;
	double ct = mo / mb, crr = rss_base ? (double)rss_ours / (double)rss_base : 0.0;
	const char *verdict = rt <= 1.0 && rr <= 1.0 ? "PASS" : "MISS";
	struct rusage self;
	getrusage(RUSAGE_SELF, &self);
	printf("probe_big: %zu PCI functions, %d runs (medians)\n", gpus, runs);
	printf("  gk_probe_run in-process        %8.2f ms  (bench process max RSS %ld KiB)\n", mi, self.ru_maxrss);
	printf("  gpukmm-probe --json            %8.2f ms wall %8.2f ms CPU  max RSS %ld KiB\n", ml, cl, rss_lean);
	printf("  gpukmmctl probe --json         %8.2f ms wall %8.2f ms CPU  max RSS %ld KiB\n", mo, co, rss_ours);
	printf("  lspci -k -vmm + modinfo        %8.2f ms wall %8.2f ms CPU  max RSS %ld KiB\n", mb, cb, rss_base);
	printf("  gpukmm-probe / (lspci+modinfo): wall %.2f, CPU %.2f, RSS %.2f (target <= 1.00 wall and RSS) %s\n", rt,
	       rc, rr, verdict);
	printf("  gpukmmctl probe / (lspci+modinfo): wall %.2f, RSS %.2f (no target: the cluster client's libraries)\n", ct,
	       crr);
	FILE *f = fopen(out, "w");
	if (!f) {
		perror(out);
		return 1;
	}
	fprintf(f,
		"{\"name\":\"probe_big\",\"summary\":\"%zu PCI functions: gpukmm-probe %.0f ms / lspci -k + modinfo %.0f ms "
		"= %.2fx wall, %.2fx CPU, %.2fx RSS (target <= 1.0x wall and RSS) %s; gpukmmctl probe %.2fx wall, %.2fx RSS\","
		"\"pci_functions\":%zu,\"runs\":%d,\"inproc_ms\":%.3f,\"probe_ms\":%.3f,\"probe_cpu_ms\":%.3f,"
		"\"probe_rss_kib\":%ld,\"gpukmmctl_ms\":%.3f,\"gpukmmctl_cpu_ms\":%.3f,\"gpukmmctl_rss_kib\":%ld,"
		"\"baseline_ms\":%.3f,\"baseline_cpu_ms\":%.3f,\"baseline_rss_kib\":%ld,\"ratio_time\":%.3f,"
		"\"ratio_cpu\":%.3f,\"ratio_rss\":%.3f,\"verdict\":\"%s\"}\n",
		gpus, ml, mb, rt, rc, rr, verdict, ct, crr, gpus, runs, mi, ml, cl, rss_lean, mo, co, rss_ours, mb, cb,
		rss_base, rt, rc, rr, verdict);
	fclose(f);
	free(lean);
	free(lean_cpu);
	free(inproc);
	free(ours);
	free(base);
	free(ours_cpu);
	free(base_cpu);
	return 0;
}
