/* Supervisor I/O pieces without the loop: spawn, env/argv, line splitting, the
 * bounded output sink, sd_notify, the runtime directory. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../supervisor/sup.h"

static void tmpdir(char *out, size_t cap)
{
	const char *t = getenv("TMPDIR");
	snprintf(out, cap, "%s/gk-sup-XXXXXX", t && *t ? t : P_tmpdir);
	cr_assert_not_null(mkdtemp(out));
}

/* ---- lines ---- */
struct seen { char lines[16][GK_SUP_LINE_MAX + 1]; size_t len[16]; int n; };
static void collect(void *u, const char *l, size_t n)
{
	struct seen *s = u;
	cr_assert_lt(s->n, 16);
	memcpy(s->lines[s->n], l, n);
	s->lines[s->n][n] = 0;
	s->len[s->n++] = n;
}

Test(sup_lines, split_partial_crlf_and_long)
{
	gk_sup_linebuf lb = { .len = 0 };
	struct seen s = { .n = 0 };
	gk_sup_lines_feed(&lb, "a\nbb", 4, collect, &s);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.lines[0], "a");
	gk_sup_lines_feed(&lb, "b\r\n\nc", 5, collect, &s);
	cr_assert_eq(s.n, 3);
	cr_assert_str_eq(s.lines[1], "bbb");
	cr_assert_str_eq(s.lines[2], "");
	gk_sup_lines_flush(&lb, collect, &s);
	cr_assert_str_eq(s.lines[3], "c");
	static char big[GK_SUP_LINE_MAX * 2 + 10];
	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	s.n = 0;
	gk_sup_lines_feed(&lb, big, sizeof(big), collect, &s);
	cr_assert_eq(s.n, 3);
	cr_assert_eq(s.len[0], GK_SUP_LINE_MAX);
	cr_assert_eq(s.len[1], GK_SUP_LINE_MAX);
	cr_assert_eq(s.len[2], 9);
}

/* ---- output sink ---- */
Test(sup_out, slow_sink_drops_and_never_blocks)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	gk_sup_out o;
	gk_err err;
	cr_assert_eq(gk_sup_out_init(&o, p[1], 16384, 0, &err), 0);
	cr_assert(fcntl(p[1], F_GETFL) & O_NONBLOCK);
	char line[64];
	for (int i = 0; i < 5000; i++) {   /* nobody reads: must return at once, every time */
		int n = snprintf(line, sizeof(line), "line %d", i);
		gk_sup_out_line(&o, "svc", 1, line, (size_t)n);
	}
	cr_assert_gt(o.dropped, 0);
	cr_assert_eq(o.lines + o.dropped, 5000);
	/* drain the reader side while flushing until all is out */
	char *all = NULL;
	size_t alen = 0;
	FILE *m = open_memstream(&all, &alen);
	char buf[4096];
	for (;;) {
		bool more = gk_sup_out_flush(&o);
		ssize_t r;
		fcntl(p[0], F_SETFL, O_NONBLOCK);
		while ((r = read(p[0], buf, sizeof(buf))) > 0)
			fwrite(buf, 1, (size_t)r, m);
		if (!more)
			break;
	}
	/* the next line carries the drop note first */
	gk_sup_out_line(&o, "svc", 1, "after", 5);
	gk_sup_out_flush(&o);
	ssize_t r;
	while ((r = read(p[0], buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)r, m);
	fclose(m);
	/* what arrived is in order, each line prefixed */
	int last = -1, got = 0;
	char *save = NULL;
	bool note = false, after = false;
	for (char *l = strtok_r(all, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int v;
		if (sscanf(l, "svc | line %d", &v) == 1) {
			cr_assert_gt(v, last, "out of order: %d after %d", v, last);
			last = v;
			got++;
		} else if (strstr(l, "gpukmm | dropped")) {
			note = true;
		} else if (strcmp(l, "svc | after") == 0) {
			after = true;
			cr_assert(note, "drop note comes before the next line");
		} else {
			cr_assert_fail("unexpected line '%s'", l);
		}
	}
	cr_assert_eq((uint64_t)got, o.lines - 1);
	cr_assert(after);
	free(all);
	gk_sup_out_fini(&o);
	close(p[0]);
	close(p[1]);
}

Test(sup_out, json_and_closed_sink)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	gk_sup_out o;
	gk_err err;
	cr_assert_eq(gk_sup_out_init(&o, p[1], 0, 1, &err), 0);
	gk_sup_out_line(&o, "web", 42, "say \"hi\"\t", 9);
	cr_assert_not(gk_sup_out_flush(&o));
	char buf[512] = { 0 };
	cr_assert_gt(read(p[0], buf, sizeof(buf) - 1), 0);
	cr_assert(strstr(buf, "\"service\":\"web\",\"pid\":42,\"line\":\"say \\\"hi\\\"\\t\"}\n"), "%s", buf);
	close(p[0]);   /* broken sink: counted, no SIGPIPE death (ignored by the test runner? make sure) */
	signal(SIGPIPE, SIG_IGN);
	gk_sup_out_line(&o, "web", 42, "x", 1);
	cr_assert_not(gk_sup_out_flush(&o));
	cr_assert_eq(o.write_errors, 1);
	gk_sup_out_fini(&o);
	close(p[1]);
}

/* ---- spawn ---- */
static char *run_capture(const char *script, long uid, int *status, int *rc)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", NULL };
	gk_sup_spawn sp = { .path = "/bin/sh", .argv = argv, .envp = envp, .null_fd = nul, .out_fd = p[1],
			    .uid = uid, .gid = -1, .pdeath_signal = SIGKILL };
	pid_t pid = 0;
	gk_err err;
	*rc = gk_sup_spawn_child(&sp, &pid, &err);
	close(p[1]);
	close(nul);
	static char buf[8192];
	size_t n = 0;
	ssize_t r;
	while (*rc == 0 && (r = read(p[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(p[0]);
	if (*rc == 0)
		cr_assert_eq(waitpid(pid, status, 0), pid);
	return buf;
}

Test(sup_spawn, child_is_isolated)
{
	int st, rc;
	/* stdin is /dev/null; fds: only 0 1 2 (+ the one ls opens); own session; no_new_privs.
	 * ls without a pipeline: the shell holds a pipeline's pipe while it forks
	 * its second command, and ls could list it (a race seen under load) */
	char *out = run_capture("readlink /proc/self/fd/0; ls -x -w 200 /proc/$$/fd; "
				"ps -o sid= -o pgid= -p $$; echo $$; grep NoNewPrivs /proc/$$/status; "
				/* the shell reads its own mask with builtins: a child (grep)
				 * reading it could catch the shell waiting for that child,
				 * with every signal blocked (dash blocks them around its wait) */
				"while read -r k v; do [ \"$k\" = SigBlk: ] && printf 'SigBlk:\\t%s\\n' \"$v\"; "
				"done </proc/$$/status; echo err >&2",
				-1, &st, &rc);
	cr_assert_eq(rc, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	char nul[64], fds[256];
	int sid, pgid, pid;
	cr_assert_eq(sscanf(out, "%63s\n%255[0-9 ]\n%d %d\n%d", nul, fds, &sid, &pgid, &pid), 5, "%s", out);
	cr_assert_str_eq(nul, "/dev/null");
	char *w = fds;
	for (char *r = fds; *r; r++) /* "0  1  2" -> "012" */
		if (*r != ' ')
			*w++ = *r;
	*w = 0;
	cr_assert_str_eq(fds, "012", "leaked fds: %s", fds);
	cr_assert_eq(sid, pid);
	cr_assert_eq(pgid, pid);
	cr_assert(strstr(out, "NoNewPrivs:\t1"), "%s", out);
	cr_assert(strstr(out, "SigBlk:\t0000000000000000"), "signal mask inherited: %s", out);
	cr_assert(strstr(out, "err\n"), "stderr goes to the pipe too: %s", out);
}

Test(sup_spawn, exec_failure_is_reported_and_reaped)
{
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	char *argv[] = { "/nonexistent/x", NULL };
	char *envp[] = { NULL };
	gk_sup_spawn sp = { .path = "/nonexistent/x", .argv = argv, .envp = envp, .null_fd = nul, .out_fd = 2,
			    .uid = -1, .gid = -1, .pdeath_signal = SIGKILL };
	pid_t pid = 0;
	gk_err err;
	cr_assert_eq(gk_sup_spawn_child(&sp, &pid, &err), GK_NOT_FOUND);
	cr_assert(strstr(err.msg, "exec /nonexistent/x"), "%s", err.msg);
	cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "no child left behind");
	cr_assert_eq(errno, ECHILD);
	close(nul);
	if (geteuid() != 0) {
		int st, rc;
		run_capture("true", 0, &st, &rc);   /* cannot become root */
		cr_assert_eq(rc, GK_INTERNAL);
	}
}

Test(sup_spawn, drops_to_the_configured_user)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to change user");
	int st, rc;
	char *out = run_capture("id -u; id -G", 65534, &st, &rc);
	cr_assert_eq(rc, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	cr_assert_str_eq(out, "65534\n65534\n", "uid, then all groups: %s", out);
}

/* ---- argv/env ---- */
Test(sup_env, credentials_only_where_needed)
{
	char *args[] = { "--listen", "ipc://{runtime_dir}/{name}.sock", NULL };
	char *env[] = { "FOO=svc", NULL };
	gk_sup_svc_conf s = { .name = "w", .binary = "b", .path = "/x/b", .args = args, .n_args = 2,
			      .env = env, .n_env = 1, .heartbeat_ms = 250 };
	char **av = gk_sup_build_argv(&s, "/run/g");
	cr_assert_str_eq(av[0], "/x/b");
	cr_assert_str_eq(av[2], "ipc:///run/g/w.sock");
	cr_assert_null(av[3]);
	gk_sup_strv_free(av);
	char *base[] = { "PATH=/bin", "NOTIFY_SOCKET=/n", "WATCHDOG_USEC=1", "KUBECONFIG=/k", "FOO=base",
			 "GPUKMM_TOKEN_FILE=/t", "HOME=/root", "AWS_SECRET_ACCESS_KEY=s", "GOOGLE_APPLICATION_CREDENTIALS=/g",
			 "AZURE_FEDERATED_TOKEN_FILE=/a", "CLOUDSDK_CONFIG=/c", "XDG_CONFIG_HOME=/x", NULL };
	gk_sup_env_in in = { .base = base, .runtime_dir = "/run/g", .control_url = "ipc:///run/g/control.sock",
			     .token_file = "/var/token", .kubeconfig = "/etc/a:/etc/b" };
	char **e = gk_sup_build_env(&s, &in);
	char joined[1024] = "";
	for (char **p = e; *p; p++) {
		strcat(joined, *p);
		strcat(joined, ";");
	}
	/* no credentials: no path to any, HOME included */
	cr_assert_str_eq(joined, "PATH=/bin;GPUKMM_RUNTIME_DIR=/run/g;GPUKMM_CONTROL=ipc:///run/g/control.sock;"
				 "GPUKMM_HEARTBEAT_MS=250;HOME=/nonexistent;FOO=svc;");
	gk_sup_strv_free(e);
	s.credentials = true;
	e = gk_sup_build_env(&s, &in);
	joined[0] = 0;
	for (char **p = e; *p; p++) {
		strcat(joined, *p);
		strcat(joined, ";");
	}
	cr_assert(strstr(joined, "GPUKMM_TOKEN_FILE=/var/token;"), "%s", joined);
	cr_assert(strstr(joined, ";KUBECONFIG=/etc/a:/etc/b;"), "the list as given: %s", joined);
	cr_assert_null(strstr(joined, "KUBECONFIG=/k"), "%s", joined);
	cr_assert(strstr(joined, "HOME=/root;") && strstr(joined, "AWS_SECRET_ACCESS_KEY=s;"),
		  "an exec plugin finds its own credentials: %s", joined);
	gk_sup_strv_free(e);
	/* a service's own HOME wins */
	char *env2[] = { "HOME=/var/lib/x", NULL };
	s.credentials = false;
	s.env = env2;
	e = gk_sup_build_env(&s, &in);
	joined[0] = 0;
	for (char **p = e; *p; p++) {
		strcat(joined, *p);
		strcat(joined, ";");
	}
	cr_assert(strstr(joined, "HOME=/var/lib/x;") && !strstr(joined, "nonexistent"), "%s", joined);
	gk_sup_strv_free(e);
}

/* ---- sd_notify ---- */
Test(sup_notify, datagram_and_watchdog)
{
	char dir[256], path[300];
	tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/notify", dir);
	int srv = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, path);
	cr_assert_eq(bind(srv, (struct sockaddr *)&sa, sizeof(sa)), 0);
	gk_err err;
	int fd = gk_sup_notify_open(path, &err);
	cr_assert_geq(fd, 0, "%s", err.msg);
	cr_assert_eq(gk_sup_notify_send(fd, "READY=1\nSTATUS=ok"), 0);
	char buf[64] = { 0 };
	cr_assert_eq(recv(srv, buf, sizeof(buf), 0), 17);
	cr_assert_str_eq(buf, "READY=1\nSTATUS=ok");
	close(fd);
	cr_assert_eq(gk_sup_notify_open(NULL, &err), -1);
	cr_assert_eq(gk_sup_notify_send(-1, "READY=1"), 0);
	cr_assert_eq(gk_sup_notify_open("relative", &err), -1);
	cr_assert_eq(gk_sup_notify_open("/nonexistent/sock", &err), -1);
	cr_assert(strstr(err.msg, "NOTIFY_SOCKET"));
	cr_assert_eq(gk_sup_watchdog_ms("2000000", NULL, 5), 1000);
	cr_assert_eq(gk_sup_watchdog_ms("2000000", "5", 5), 1000);
	cr_assert_eq(gk_sup_watchdog_ms("2000000", "6", 5), 0);
	cr_assert_eq(gk_sup_watchdog_ms("x", NULL, 5), 0);
	cr_assert_eq(gk_sup_watchdog_ms("0", NULL, 5), 0);
	cr_assert_eq(gk_sup_watchdog_ms(NULL, NULL, 5), 0);
	close(srv);
	unlink(path);
	rmdir(dir);
}

/* ---- runtime dir ---- */
Test(sup_rundir, private_locked_and_cleaned)
{
	char dir[256], rd[300], f[400];
	tmpdir(dir, sizeof(dir));
	snprintf(rd, sizeof(rd), "%s/run", dir);
	int lock;
	gk_err err;
	cr_assert_eq(gk_sup_rundir_prepare(rd, -1, -1, &lock, &err), 0, "%s", err.msg);
	struct stat st;
	cr_assert_eq(stat(rd, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700);
	/* a second supervisor on the same dir is refused */
	int lock2;
	cr_assert_eq(gk_sup_rundir_prepare(rd, -1, -1, &lock2, &err), GK_ALREADY_EXISTS);
	cr_assert(strstr(err.msg, "in use"), "%s", err.msg);
	close(lock);
	/* stale sockets go, other files stay, mode repaired */
	snprintf(f, sizeof(f), "%s/old.sock", rd);
	close(open(f, O_CREAT | O_WRONLY, 0600));
	snprintf(f, sizeof(f), "%s/keep.txt", rd);
	close(open(f, O_CREAT | O_WRONLY, 0600));
	chmod(rd, 0755);
	cr_assert_eq(gk_sup_rundir_prepare(rd, -1, -1, &lock, &err), 0, "%s", err.msg);
	stat(rd, &st);
	cr_assert_eq(st.st_mode & 07777, 0700);
	snprintf(f, sizeof(f), "%s/old.sock", rd);
	cr_assert_neq(access(f, F_OK), 0);
	snprintf(f, sizeof(f), "%s/keep.txt", rd);
	cr_assert_eq(access(f, F_OK), 0);
	unlink(f);
	close(lock);
	/* a symlink or a file is not a runtime dir */
	snprintf(f, sizeof(f), "%s/link", dir);
	cr_assert_eq(symlink(rd, f), 0);
	cr_assert_eq(gk_sup_rundir_prepare(f, -1, -1, &lock, &err), GK_FAILED_PRECONDITION);
	unlink(f);
	snprintf(f, sizeof(f), "%s/run/gpukmm.lock", dir);
	unlink(f);
	rmdir(rd);
	rmdir(dir);
	char *d = gk_sup_rundir_default();
	cr_assert_not_null(d);
	free(d);
}

/* Handed to the services' user (root only): chowned, accepted again when it is
 * already theirs, refused when it belongs to someone else. */
Test(sup_rundir, handed_to_the_service_user)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (chown)");
	char dir[256], rd[300], f[400];
	tmpdir(dir, sizeof(dir));
	snprintf(rd, sizeof(rd), "%s/run", dir);
	int lock;
	gk_err err;
	struct stat st;
	cr_assert_eq(gk_sup_rundir_prepare(rd, 65534, 65533, &lock, &err), 0, "%s", err.msg);
	cr_assert_eq(stat(rd, &st), 0);
	cr_assert(st.st_uid == 65534 && st.st_gid == 65533 && (st.st_mode & 07777) == 0700,
		  "%u:%u %o", st.st_uid, st.st_gid, st.st_mode & 07777);
	close(lock);
	/* the next start: the dir is the service user's now, still accepted */
	cr_assert_eq(gk_sup_rundir_prepare(rd, 65534, 65533, &lock, &err), 0, "%s", err.msg);
	close(lock);
	/* without services of that user it is someone else's dir: refused */
	cr_assert_eq(gk_sup_rundir_prepare(rd, -1, -1, &lock, &err), GK_PERMISSION_DENIED);
	cr_assert(strstr(err.msg, "owned by uid 65534"), "%s", err.msg);
	cr_assert_eq(gk_sup_rundir_prepare(rd, 1234, 1234, &lock, &err), GK_PERMISSION_DENIED);
	snprintf(f, sizeof(f), "%s/gpukmm.lock", rd);
	unlink(f);
	rmdir(rd);
	rmdir(dir);
}
