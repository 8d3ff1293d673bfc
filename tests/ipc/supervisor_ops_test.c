/* The supervisor as operators meet it: /healthz /readyz /metrics, gpukmmctl
 * status, sd_notify, log forwarding (order, prefix, JSON, a slow sink), a
 * SIGKILLed service while the others keep serving RPCs, bad configurations. */
#include <cJSON.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "echo.pb-c.h"
#include "sup_harness.h"

#define SVC(name, mode, extra) \
	"{\"name\":\"" name "\",\"binary\":\"@TBIN@/sup_testsvc\",\"args\":[\"--mode\",\"" mode "\"," \
	"\"--trace\",\"@DIR@/" name ".trace\"" extra "]"

static void fini(void)
{
	sh_cleanup();
}

TestSuite(supervisor_ops, .fini = fini, .timeout = 60);

/* Run a program to completion, capturing stdout+stderr. */
static int run_capture(char *const argv[], char **out)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	if (pid == 0) {
		unsetenv("BXFI_MAP");
		dup2(p[1], 1);
		dup2(p[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char tmp[4096];
	ssize_t r;
	while ((r = read(p[0], tmp, sizeof(tmp))) > 0)
		fwrite(tmp, 1, (size_t)r, m);
	fclose(m);
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct metric_q { int port; const char *series; double want; } metric_q;
static bool metric_cond(void *a)
{
	metric_q *q = a;
	char *body;
	int code = sh_http_get(q->port, "/metrics", &body);
	bool ok = code == 200 && sh_metric(body, q->series) == q->want;
	free(body);
	return ok;
}

Test(supervisor_ops, http_endpoints_metrics_and_ctl_status)
{
	static sh_sup s;
	sh_start(&s, "{\"services\":[" SVC("a", "ready", "") ",\"heartbeat\":{\"interval_ms\":50,\"timeout_ms\":2000}},"
		     SVC("late", "late-ready", ",\"--after-ms\",\"1500\"") "}]}",
		 false, NULL, "--http-listen", "127.0.0.1:0", "--metrics-insecure", "--metrics-listen", "127.0.0.1:0", NULL);
	int port = sh_http_port(&s), mport = sh_metrics_port(&s);
	cr_assert_gt(port, 0);
	cr_assert_gt(mport, 0);
	char *body;
	cr_assert_eq(sh_http_get(port, "/healthz", &body), 200);
	free(body);
	/* not ready while one required service is not: says which */
	cr_assert(sh_wait_state(&s, "a", "ready", -1, 5000));
	int code = sh_http_get(port, "/readyz", &body);
	if (code == 503)
		cr_assert(strstr(body, "late: starting"), "%s", body);
	free(body);
	cr_assert(sh_wait_state(&s, "late", "ready", -1, 5000));
	cr_assert_eq(sh_http_get(port, "/readyz", &body), 200);
	free(body);
	cr_assert_eq(sh_http_get(port, "/nope", &body), 404);
	free(body);
	/* /metrics is not on the probe port (no authentication there) */
	cr_assert_eq(sh_http_get(port, "/metrics", &body), 404);
	free(body);
	cr_assert_eq(sh_http_get(mport, "/healthz", &body), 404);
	free(body);
	/* heartbeat metrics reach /metrics, typed */
	metric_q q = { mport, "gpukmm_testsvc_ticks_total{service=\"a\"}", 42 };
	cr_assert(sh_wait(metric_cond, &q, 5000), "heartbeat counter missing from /metrics");
	cr_assert_eq(sh_http_get(mport, "/metrics", &body), 200);
	cr_assert(strstr(body, "# TYPE gpukmm_testsvc_ticks_total counter\n"), "%s", body);
	cr_assert(strstr(body, "# TYPE gpukmm_build_info gauge\n"), "%s", body);
	cr_assert_eq(sh_metric(body, "gpukmm_ready"), 1);
	cr_assert_eq(sh_metric(body, "gpukmm_service_up{service=\"a\"}"), 1);
	cr_assert_eq(sh_metric(body, "gpukmm_service_ready{service=\"late\"}"), 1);
	cr_assert_eq(sh_metric(body, "gpukmm_service_restarts_total{service=\"a\"}"), 0);
	cr_assert_eq(sh_metric(body, "gpukmm_service_state{service=\"a\",state=\"ready\"}"), 1);
	cr_assert_gt(sh_metric(body, "gpukmm_process_resident_memory_bytes"), 100000);
	cr_assert_gt(sh_metric(body, "gpukmm_service_uptime_seconds{service=\"a\"}"), 0);
	/* every line is a comment or "name[{labels}] number"; every family has HELP and TYPE */
	char *save = NULL;
	int samples = 0;
	for (char *l = strtok_r(body, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (l[0] == '#') {
			cr_assert(strncmp(l, "# HELP gpukmm_", 14) == 0 || strncmp(l, "# TYPE gpukmm_", 14) == 0, "%s", l);
			continue;
		}
		char name[128], *sp = strrchr(l, ' ');
		cr_assert_not_null(sp, "%s", l);
		char *end;
		strtod(sp + 1, &end);
		cr_assert_eq(*end, '\0', "bad value: %s", l);
		cr_assert_eq(sscanf(l, "%127[a-zA-Z0-9_]", name), 1, "%s", l);
		char type[160];
		snprintf(type, sizeof(type), "# TYPE %s ", name);
		samples++;
	}
	cr_assert_gt(samples, 20);
	free(body);
	/* gpukmmctl status, text and JSON */
	char *out;
	char *argv1[] = { (char *)sh_bin("gpukmmctl"), "status", "--runtime-dir", s.rundir, NULL };
	cr_assert_eq(run_capture(argv1, &out), 0, "%s", out);
	cr_assert(strstr(out, "supervisor: ready"), "%s", out);
	cr_assert(strstr(out, "late ") && strstr(out, "ready"), "%s", out);
	free(out);
	char *argv2[] = { (char *)sh_bin("gpukmmctl"), "status", "--control", s.control, "--json", NULL };
	cr_assert_eq(run_capture(argv2, &out), 0, "%s", out);
	cJSON *j = cJSON_Parse(out);
	cr_assert_not_null(j, "%s", out);
	cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "ready")));
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "services")), 2);
	cJSON_Delete(j);
	free(out);
	cr_assert_eq(sh_stop(&s, 5000), 0);
	/* no supervisor: status says so, exit 1 */
	char *argv3[] = { (char *)sh_bin("gpukmmctl"), "status", "--runtime-dir", s.rundir, "--timeout-ms", "300", NULL };
	cr_assert_eq(run_capture(argv3, &out), 1, "%s", out);
	free(out);
}

static int64_t recv_msg(int fd, char *buf, size_t cap, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, timeout_ms) <= 0)
		return -1;
	ssize_t n = recv(fd, buf, cap - 1, 0);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return sh_now();
}

Test(supervisor_ops, sd_notify_ready_after_readiness_and_watchdog_at_half)
{
	static sh_sup s;
	char dir[256];
	const char *t = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/gk-ntf-XXXXXX", t && *t ? t : P_tmpdir);
	cr_assert_not_null(mkdtemp(dir));
	char path[300], env1[320];
	snprintf(path, sizeof(path), "%s/notify", dir);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	cr_assert_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	snprintf(env1, sizeof(env1), "NOTIFY_SOCKET=%s", path);
	char *env[] = { env1, "WATCHDOG_USEC=400000", NULL };
	sh_start(&s, "{\"services\":[" SVC("slow", "late-ready", ",\"--after-ms\",\"600\"") "}]}", false, env, NULL);
	int64_t ready_at = -1, wd[64];
	int nwd = 0;
	char buf[512];
	for (int64_t end = sh_now() + 5000 * sh_slow(); sh_now() < end && (ready_at < 0 || nwd < 6);) {
		int64_t at = recv_msg(fd, buf, sizeof(buf), 200);
		if (at < 0)
			continue;
		if (strstr(buf, "READY=1"))
			ready_at = at;
		if (strstr(buf, "WATCHDOG=1") && nwd < 64)
			wd[nwd++] = at;
		cr_assert_null(strstr(buf, "STOPPING=1"));
	}
	cr_assert_geq(ready_at, 0, "READY=1 never arrived");
	int64_t svc_ready[1] = { 0 };
	cr_assert_eq(sh_trace(&s, "slow.trace", "ready", NULL, svc_ready, 1), 1);
	cr_assert_geq(ready_at, svc_ready[0], "READY=1 before the service was ready");
	cr_assert_geq(nwd, 4);
	/* about every 200 ms (half of 400 ms): the mean gap of the later ones */
	double mean = (double)(wd[nwd - 1] - wd[1]) / (nwd - 2);
	cr_assert(mean > 150 && mean < 260 * sh_slow(), "WATCHDOG=1 every %.0f ms, want ~200", mean);
	kill(s.pid, SIGTERM);
	bool stopping = false;
	for (int64_t end = sh_now() + 5000; sh_now() < end && !stopping;)
		if (recv_msg(fd, buf, sizeof(buf), 200) >= 0 && strstr(buf, "STOPPING=1"))
			stopping = true;
	cr_assert(stopping, "STOPPING=1 on SIGTERM");
	cr_assert_eq(sh_wait_exit(&s, 5000), 0);
	close(fd);
	unlink(path);
	rmdir(dir);
}

Test(supervisor_ops, log_lines_arrive_in_order_with_the_service_prefix)
{
	static sh_sup s;
	sh_start(&s, "{\"services\":[" SVC("f", "flood", ",\"--lines\",\"20000\"") "}]}", false, NULL, NULL);
	cr_assert(sh_wait_trace(&s, "f.trace", "flood-done", 1, 10000));
	cr_assert(sh_wait_out(&s, "f | flood done", 10000));
	cr_assert_eq(sh_stop(&s, 5000), 0);
	char *t = sh_slurp(s.out), *save = NULL;
	int next = 0;
	for (char *l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int v;
		if (sscanf(l, "f | flood %d", &v) == 1) {
			cr_assert_eq(v, next, "line %d arrived where %d was due", v, next);
			next++;
		}
	}
	cr_assert_eq(next, 20000, "lost lines: %d of 20000", next);
	free(t);
}

Test(supervisor_ops, json_log_format)
{
	static sh_sup s;
	sh_start(&s, "{\"services\":[" SVC("f", "flood", ",\"--lines\",\"50\"") "}]}", false, NULL, "--log-format",
		 "json", NULL);
	cr_assert(sh_wait_out(&s, "flood done", 10000));
	cr_assert_eq(sh_stop(&s, 5000), 0);
	char *t = sh_slurp(s.out), *save = NULL;
	int lines = 0, svc_lines = 0;
	for (char *l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		cJSON *j = cJSON_Parse(l);
		cr_assert_not_null(j, "not JSON: %s", l);
		cJSON *svc = cJSON_GetObjectItem(j, "service");
		cr_assert(cJSON_IsString(svc), "%s", l);
		if (strcmp(svc->valuestring, "f") == 0) {
			cr_assert(cJSON_IsString(cJSON_GetObjectItem(j, "line")), "%s", l);
			cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "pid")), "%s", l);
			svc_lines++;
		}
		cJSON_Delete(j);
		lines++;
	}
	cr_assert_geq(svc_lines, 51);
	cr_assert_gt(lines, svc_lines);
	free(t);
}

Test(supervisor_ops, a_flooding_child_never_blocks_on_a_slow_sink)
{
	static sh_sup s;
	/* 300000 lines (~4 MB): far more than the output buffer plus the pipe */
	sh_start(&s, "{\"services\":[" SVC("f", "flood", ",\"--lines\",\"300000\"") "}]}", true, NULL, NULL);
	/* nobody reads the supervisor's stdout, yet the child gets through */
	cr_assert(sh_wait_trace(&s, "f.trace", "flood-done", 1, 20000), "the child blocked on its output");
	Gpukmm__ServiceTable *tb = sh_list(&s);
	cr_assert_not_null(tb, "the supervisor answers while its sink is stuck");
	gk_ipc_free(&tb->base);
	/* now read everything */
	kill(s.pid, SIGTERM);
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char tmp[65536];
	ssize_t r;
	while ((r = read(s.out_pipe, tmp, sizeof(tmp))) > 0)
		fwrite(tmp, 1, (size_t)r, m);
	fclose(m);
	cr_assert_eq(sh_wait_exit(&s, 5000), 0);
	int last = -1, got = 0;
	bool note = false;
	char *save = NULL;
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int v;
		if (sscanf(l, "f | flood %d", &v) == 1) {
			cr_assert_gt(v, last, "out of order: %d after %d", v, last);
			last = v;
			got++;
		}
		if (strstr(l, "gpukmm | dropped "))
			note = true;
	}
	cr_assert_lt(got, 300000, "a stuck sink must drop");
	cr_assert_gt(got, 1000);
	cr_assert(note, "drops are reported");
	free(buf);
}

Test(supervisor_ops, sigkilled_service_while_others_keep_serving_rpcs)
{
	static sh_sup s;
	sh_start(&s, "{\"services\":["
		     "{\"name\":\"e1\",\"binary\":\"@BIN@/gpukmm-echo\",\"args\":[\"--listen\",\"ipc://{runtime_dir}/{name}.sock\"],"
		     "\"backoff\":{\"initial_ms\":0,\"max_ms\":0}},"
		     "{\"name\":\"e2\",\"binary\":\"@BIN@/gpukmm-echo\",\"args\":[\"--listen\",\"ipc://{runtime_dir}/{name}.sock\"]}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_state(&s, "e1", "ready", -1, 5000));
	cr_assert(sh_wait_state(&s, "e2", "ready", -1, 5000));
	Gpukmm__ServiceTable *tb = sh_list(&s);
	pid_t e1 = sh_svc(tb, "e1")->pid, e2 = sh_svc(tb, "e2")->pid;
	gk_ipc_free(&tb->base);
	char url[400];
	snprintf(url, sizeof(url), "ipc://%s/e2.sock", s.rundir);
	gk_ipc_client *c;
	gk_err err;
	cr_assert_eq(gk_ipc_client_open(&c, url, NULL, &err), 0, "%s", err.msg);
	int calls = 0;
	int64_t worst = 0;
	bool killed = false;
	for (int64_t end = sh_now() + 1500; sh_now() < end; calls++) {
		if (calls == 20) {
			cr_assert_eq(kill(e1, SIGKILL), 0);
			killed = true;
		}
		Gpukmm__EchoRequest rq = GPUKMM__ECHO_REQUEST__INIT;
		rq.text = "ping";
		ProtobufCMessage *rep = NULL;
		int64_t t0 = sh_now();
		int rc = gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &rq.base, &rep, 1000, &err);
		int64_t dt = sh_now() - t0;
		cr_assert_eq(rc, 0, "call %d to e2 failed while e1 died: %s", calls, err.msg);
		cr_assert_str_eq(((Gpukmm__EchoReply *)rep)->text, "ping");
		gk_ipc_free(rep);
		if (dt > worst)
			worst = dt;
	}
	cr_assert(killed);
	cr_assert_lt(worst, 250 * sh_slow(), "an e2 call took %lld ms", (long long)worst);
	gk_ipc_client_close(c);
	cr_assert(sh_wait_state(&s, "e1", "ready", 1, 5000), "e1 restarted");
	tb = sh_list(&s);
	cr_assert_eq(sh_svc(tb, "e2")->restarts, 0);
	cr_assert_eq(sh_svc(tb, "e2")->pid, e2);
	cr_assert_eq(sh_svc(tb, "e1")->last_signal, SIGKILL);
	gk_ipc_free(&tb->base);
	cr_assert_eq(sh_stop(&s, 5000), 0);
}

Test(supervisor_ops, bad_configuration_exits_2_and_starts_nothing)
{
	static sh_sup s;
	sh_mkdir(&s);
	sh_current = &s;
	s.exited = true;    /* nothing to stop: gpukmm runs through run_capture */
	s.out_pipe = -1;
	char cfg[300], *out;
	sh_path(&s, "c.json", cfg, sizeof(cfg));
	sh_write_file(cfg, "{\"services\":[{\"name\":\"a\",\"stop\":{\"signal\":\"SIGNOPE\"}}]}");
	char *argv[] = { (char *)sh_bin("gpukmm"), "--config", cfg, "--runtime-dir", s.rundir, NULL };
	cr_assert_eq(run_capture(argv, &out), 2, "%s", out);
	cr_assert(strstr(out, "services[0].stop.signal") && strstr(out, "SIGNOPE"), "%s", out);
	cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line: %s", out);
	cr_assert_neq(access(s.rundir, F_OK), 0, "nothing started, not even the runtime dir");
	free(out);
	/* a binary that does not exist */
	sh_write_file(cfg, "{\"services\":[{\"name\":\"ghost\",\"binary\":\"gpukmm-no-such-service\"}]}");
	cr_assert_eq(run_capture(argv, &out), 2, "%s", out);
	cr_assert(strstr(out, "services[0].binary") && strstr(out, "gpukmm-no-such-service"), "%s", out);
	free(out);
	/* unknown profile, no profile, unknown option */
	char *argv2[] = { (char *)sh_bin("gpukmm"), "--profile", "nodes", NULL };
	cr_assert_eq(run_capture(argv2, &out), 2, "%s", out);
	cr_assert(strstr(out, "nodes"), "%s", out);
	free(out);
	char *argv3[] = { (char *)sh_bin("gpukmm"), NULL };
	cr_assert_eq(run_capture(argv3, &out), 2, "%s", out);
	free(out);
	char *argv4[] = { (char *)sh_bin("gpukmm"), "--profile", "node", "--frobnicate", NULL };
	cr_assert_eq(run_capture(argv4, &out), 2, "%s", out);
	cr_assert(strstr(out, "--frobnicate"), "%s", out);
	free(out);
	/* secure /metrics needs a credentialed reviewer in the table; a cert needs its key */
	sh_write_file(cfg, "{\"services\":[{\"name\":\"a\",\"binary\":\"/bin/true\"}]}");
	char *argv8[] = { (char *)sh_bin("gpukmm"), "--config", cfg, "--runtime-dir", s.rundir, "--metrics-listen",
			  "127.0.0.1:0", NULL };
	cr_assert_eq(run_capture(argv8, &out), 2, "%s", out);
	cr_assert(strstr(out, "--metrics-reviewer") && strstr(out, "--metrics-insecure"), "%s", out);
	free(out);
	char *argv9[] = { (char *)sh_bin("gpukmm"), "--config", cfg, "--runtime-dir", s.rundir, "--metrics-insecure",
			  "--metrics-tls-cert", cfg, NULL };
	cr_assert_eq(run_capture(argv9, &out), 2, "%s", out);
	cr_assert(strstr(out, "--metrics-tls-key"), "%s", out);
	free(out);
	cr_assert_neq(access(s.rundir, F_OK), 0, "nothing started, not even the runtime dir");
	/* --help documents everything */
	char *argv5[] = { (char *)sh_bin("gpukmm"), "--help", NULL };
	cr_assert_eq(run_capture(argv5, &out), 0);
	const char *must[] = { "--profile", "--config", "--runtime-dir", "--http-listen", "--metrics-listen",
			       "--metrics-insecure", "--metrics-tls-cert", "--metrics-reviewer", "--token-file",
			       "--kubeconfig", "--log-format", "intensity", "backoff", "heartbeat", "credentials",
			       "WATCHDOG", "Exit status" };
	for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
		cr_assert(strstr(out, must[i]), "--help lacks %s", must[i]);
	free(out);
	/* --check prints the table of the node profile when the binaries exist */
	sh_write_file(cfg, "{\"services\":[{\"name\":\"x\",\"binary\":\"/bin/true\",\"credentials\":true}]}");
	char *argv6[] = { (char *)sh_bin("gpukmm"), "--config", cfg, "--check", NULL };
	cr_assert_eq(run_capture(argv6, &out), 0, "%s", out);
	cr_assert(strstr(out, "/bin/true"), "%s", out);
	free(out);
}

Test(supervisor_ops, a_second_supervisor_on_the_same_runtime_dir_is_refused)
{
	static sh_sup s;
	sh_start(&s, "{\"services\":[" SVC("a", "ready", "") "}]}", false, NULL, NULL);
	cr_assert(sh_wait_state(&s, "a", "ready", -1, 5000));
	char cfg[300], *out;
	sh_path(&s, "c.json", cfg, sizeof(cfg));
	char *argv[] = { (char *)sh_bin("gpukmm"), "--config", cfg, "--runtime-dir", s.rundir, NULL };
	cr_assert_eq(run_capture(argv, &out), 2, "%s", out);
	cr_assert(strstr(out, "in use"), "%s", out);
	free(out);
	/* and the first one is unharmed */
	cr_assert(sh_wait_state(&s, "a", "ready", -1, 1000));
	cr_assert_eq(sh_stop(&s, 5000), 0);
}

/* --http-listen takes a bracketed IPv6 address: [::1]:0 serves /healthz on the
 * IPv6 loopback. Skips (passes) where the machine has no IPv6 loopback. */
Test(supervisor_ops, http_listens_on_ipv6)
{
	int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in6 lo = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	bool v6 = probe >= 0 && bind(probe, (struct sockaddr *)&lo, sizeof(lo)) == 0;
	if (probe >= 0)
		close(probe);
	if (!v6)
		cr_skip_test("no IPv6 loopback here"); /* a warning would fail the run */
	static sh_sup s;
	sh_start(&s, "{\"services\":[" SVC("a", "ready", "") "}]}", false, NULL, "--http-listen", "[::1]:0", NULL);
	cr_assert(sh_wait_out(&s, "listening on [::1]:", 5000), "no IPv6 listen line");
	char *t = sh_slurp(s.out);
	int port = -1;
	char *p = strstr(t, "listening on [::1]:");
	cr_assert_not_null(p);
	sscanf(p + strlen("listening on [::1]:"), "%d", &port);
	free(t);
	cr_assert_gt(port, 0);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	lo.sin6_port = htons((uint16_t)port);
	cr_assert_eq(connect(fd, (struct sockaddr *)&lo, sizeof(lo)), 0, "connect [::1]:%d", port);
	const char req[] = "GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n";
	cr_assert_eq(write(fd, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	char buf[512] = "";
	size_t n = 0;
	ssize_t r;
	while (n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	cr_assert(strncmp(buf, "HTTP/1.0 200", 12) == 0 || strncmp(buf, "HTTP/1.1 200", 12) == 0, "got: %.80s", buf);
	cr_assert_eq(sh_stop(&s, 5000), 0);
}

Test(supervisor_ops, http_listen_rejects_bad_ipv6)
{
	const char *bad[] = { "[::1:0", "[nothing]:80", "::1:80" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		static sh_sup s;
		sh_start(&s, "{\"services\":[" SVC("a", "ready", "") "}]}", false, NULL, "--http-listen", bad[i], NULL);
		cr_assert_eq(sh_wait_exit(&s, 5000), 2, "%s must be a usage error", bad[i]);
		sh_cleanup();
	}
}

/* Can uid 65534 execute this program (every directory on the way searchable)? */
static bool nobody_can_exec(const char *path)
{
	pid_t p = fork();
	if (p == 0) {
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(2);
		_exit(access(path, X_OK) == 0 ? 0 : 1);
	}
	int st;
	return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static long proc_uid(pid_t pid)
{
	char path[64], *txt, *u;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(txt = sh_slurp(path)))
		return -1;
	long uid = (u = strstr(txt, "\nUid:")) ? strtol(u + 5, NULL, 10) : -1;
	free(txt);
	return uid;
}

static void echo_once(const char *url)
{
	gk_ipc_client *c;
	gk_err err;
	cr_assert_eq(gk_ipc_client_open(&c, url, NULL, &err), 0, "%s", err.msg);
	Gpukmm__EchoRequest rq = GPUKMM__ECHO_REQUEST__INIT;
	rq.text = "ping";
	ProtobufCMessage *rep = NULL;
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &rq.base, &rep, 2000 * sh_slow(), &err), 0,
		     "%s: %s", url, err.msg);
	cr_assert_str_eq(((Gpukmm__EchoReply *)rep)->text, "ping");
	gk_ipc_free(rep);
	gk_ipc_client_close(c);
}

/* A service dropped to another uid still reaches control.sock (Ready,
 * heartbeats) and creates its own socket in the runtime dir: the dir is handed
 * to the services' user, control.sock is 0666 inside it. Root only. */
Test(supervisor_ops, services_dropped_to_another_uid_reach_the_runtime_dir)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (to drop a service to uid 65534)");
	if (!nobody_can_exec(sh_bin("gpukmm-echo")))
		cr_skip_test("uid 65534 cannot reach %s", sh_bin("gpukmm-echo"));
	/* the runtime dir's parent must be searchable by the service user (as /run
	 * is); the harness's temp dir is 0700, so the dir goes elsewhere */
	static char top[256], rd[300];
	const char *t = getenv("TMPDIR");
	snprintf(top, sizeof(top), "%s/gk-uid-XXXXXX", t && *t ? t : P_tmpdir);
	cr_assert_not_null(mkdtemp(top));
	cr_assert_eq(chmod(top, 0711), 0);
	snprintf(rd, sizeof(rd), "%s/run", top);
	static sh_sup s;
	sh_start(&s, "{\"services\":["
		     "{\"name\":\"low\",\"binary\":\"@BIN@/gpukmm-echo\",\"user\":65534,"
		     "\"args\":[\"--listen\",\"ipc://{runtime_dir}/{name}.sock\"],"
		     "\"heartbeat\":{\"interval_ms\":50,\"timeout_ms\":3000}},"
		     "{\"name\":\"high\",\"binary\":\"@BIN@/gpukmm-echo\","
		     "\"args\":[\"--listen\",\"ipc://{runtime_dir}/{name}.sock\"]}]}",
		 false, NULL, "--runtime-dir", rd, NULL);
	/* the harness's client dials its own rundir: point it at ours */
	snprintf(s.rundir, sizeof(s.rundir), "%s", rd);
	snprintf(s.control, sizeof(s.control), "ipc://%s/control.sock", rd);
	gk_ipc_client_close(s.cli);
	gk_err err;
	gk_ipc_opts o = { .reconnect_min_ms = 10, .reconnect_max_ms = 100 };
	cr_assert_eq(gk_ipc_client_open(&s.cli, s.control, &o, &err), 0, "%s", err.msg);
	cr_assert(sh_wait_state(&s, "low", "ready", -1, 5000), "the uid-65534 service reported Ready");
	cr_assert(sh_wait_state(&s, "high", "ready", -1, 5000));
	Gpukmm__ServiceTable *tb = sh_list(&s);
	cr_assert_not_null(tb);
	pid_t low = sh_svc(tb, "low")->pid, high = sh_svc(tb, "high")->pid;
	gk_ipc_free(&tb->base);
	cr_assert_eq(proc_uid(low), 65534);
	cr_assert_eq(proc_uid(high), 0);

	struct stat st;
	cr_assert_eq(lstat(s.rundir, &st), 0);
	cr_assert(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700, "mode %o", st.st_mode & 07777);
	cr_assert(st.st_uid == 65534 && st.st_gid == 65534, "owner %u:%u", st.st_uid, st.st_gid);
	char p[400];
	snprintf(p, sizeof(p), "%s/control.sock", s.rundir);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0666, "control.sock %o", st.st_mode & 0777);
	snprintf(p, sizeof(p), "%s/low.sock", s.rundir);
	cr_assert_eq(lstat(p, &st), 0, "the uid-65534 service created its socket");
	cr_assert(S_ISSOCK(st.st_mode) && st.st_uid == 65534);

	/* both serve, and heartbeats keep arriving (no liveness kill) */
	char url[420];
	snprintf(url, sizeof(url), "ipc://%s/low.sock", s.rundir);
	echo_once(url);
	snprintf(url, sizeof(url), "ipc://%s/high.sock", s.rundir);
	echo_once(url);
	/* a restart as 65534 finds its way again (stale socket, same dir) */
	cr_assert_eq(kill(low, SIGKILL), 0);
	cr_assert(sh_wait_state(&s, "low", "ready", 1, 5000), "restarted and ready again");
	snprintf(url, sizeof(url), "ipc://%s/low.sock", s.rundir);
	echo_once(url);
	cr_assert_eq(sh_stop(&s, 5000), 0);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	cr_assert_eq(system(cmd), 0);
}

Test(supervisor_ops, services_of_two_different_uids_are_refused)
{
	static sh_sup s;
	sh_mkdir(&s);
	sh_current = &s;
	s.exited = true;
	char cfg[300], *out;
	sh_path(&s, "c.json", cfg, sizeof(cfg));
	sh_write_file(cfg, "{\"services\":[{\"name\":\"a\",\"binary\":\"/bin/true\",\"user\":65534},"
			   "{\"name\":\"b\",\"binary\":\"/bin/true\",\"user\":65533}]}");
	char *argv[] = { (char *)sh_bin("gpukmm"), "--config", cfg, "--runtime-dir", s.rundir, NULL };
	cr_assert_eq(run_capture(argv, &out), 2, "%s", out);
	cr_assert(strstr(out, "services[1].user") && strstr(out, "share one uid"), "%s", out);
	free(out);
	cr_assert_eq(access(s.rundir, F_OK), -1, "nothing created");
}
