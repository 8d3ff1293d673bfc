/* lib/kube against real servers: exec credential plugins (tests/fixtures/exec/
 * plugin.sh) with kubesim requiring the token the plugin prints, and the
 * kubeconfig's tls-server-name against TLS servers whose certificates name
 * only that name (kubesim, and openssl s_server choosing its certificate by
 * the SNI it receives). */
#include "kubesim_proc.h"

#include "gpukmm/kube.h"
#include "gpukmm/log.h"

static ksim sim;
static gk_kube_client *kc;
static char *logbuf;
static size_t loglen;
static FILE *logf;

static void setup(void)
{
	logf = open_memstream(&logbuf, &loglen);
	gk_log_set_stream(logf);
	ksim_tmpdir(&sim);
}

static void teardown(void)
{
	gk_kube_client_free(kc);
	kc = NULL;
	gk_log_set_stream(NULL);
	if (logf)
		fclose(logf);
	logf = NULL;
	free(logbuf);
	logbuf = NULL;
	ksim_cleanup(&sim);
}

static const char *logtext(void)
{
	fflush(logf);
	return logbuf ? logbuf : "";
}

static void plugin_path(char *out, size_t cap)
{
	const char *src = getenv("GPUKMM_SRC");
	char cwd[400];
	if (!src || !*src)
		src = getcwd(cwd, sizeof cwd);
	snprintf(out, cap, "%s/tests/fixtures/exec/plugin.sh", src);
}

/* A kubeconfig whose user runs the fake plugin with `extra_env` (YAML list
 * items) and the log and token files of this test. */
static void exec_config(gk_kube_config *c, const char *api, const char *extra_env)
{
	char plugin[512], tok[512], log[512], yaml[4096];
	plugin_path(plugin, sizeof plugin);
	ksim_path(&sim, tok, sizeof tok, "plugin-token");
	ksim_path(&sim, log, sizeof log, "plugin.log");
	snprintf(yaml, sizeof yaml,
		 "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
		 "clusters:\n- name: c\n  cluster: {server: '%s'}\n"
		 "contexts:\n- name: t\n  context: {cluster: c, user: plugin-user}\n"
		 "users:\n- name: plugin-user\n  user:\n    exec:\n"
		 "      apiVersion: %s\n      command: %s\n      args: [get-token, --cluster, sim]\n"
		 "      interactiveMode: Never\n      provideClusterInfo: true\n"
		 "      installHint: see the test\n"
		 "      env:\n      - {name: PLUGIN_TOKEN_FILE, value: '%s'}\n"
		 "      - {name: PLUGIN_LOG, value: '%s'}\n      - {name: PLUGIN_API, value: %s}\n%s",
		 sim.url, api, plugin, tok, log, api, extra_env ? extra_env : "");
	gk_err e = {0};
	cr_assert_eq(gk_kube_config_parse(c, yaml, strlen(yaml), NULL, NULL, &e), 0, "%s", e.msg);
	cr_assert_not_null(c->exec);
}

static int plugin_runs(void)
{
	char log[512];
	ksim_path(&sim, log, sizeof log, "plugin.log");
	FILE *f = fopen(log, "r");
	if (!f)
		return 0;
	int n = 0, ch;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

static void start_sim_with_token(const char *tok)
{
	ksim_write(&sim, "server-token", tok);
	char p[512];
	ksim_path(&sim, p, sizeof p, "server-token");
	const char *args[] = {"--token-file", p, NULL};
	ksim_start(&sim, args);
}

static const gk_kube_ref nodes = {"", "v1", "nodes", NULL, NULL, NULL};

/* kubesim requiring tok-1, the plugin printing it, a client of that kubeconfig. */
static void exec_client(gk_kube_config *cfg, const char *api, const char *extra_env)
{
	start_sim_with_token("tok-1\n");
	ksim_write(&sim, "plugin-token", "tok-1\n");
	exec_config(cfg, api, extra_env);
	gk_kube_opts o = {.qps = -1};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, cfg, &o, &e), 0, "%s", e.msg);
}

Test(exec, token_from_plugin_and_401_rerun, .init = setup, .fini = teardown)
{
	gk_kube_config cfg;
	exec_client(&cfg, "client.authentication.k8s.io/v1", NULL);
	gk_err e = {0};
	cr_assert_eq(plugin_runs(), 1, "the first credential is fetched at once");
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(plugin_runs(), 1, "no expiry: the credential is kept");
	/* what the plugin saw: its args, KUBERNETES_EXEC_INFO (not interactive, the cluster) */
	char log[512];
	ksim_path(&sim, log, sizeof log, "plugin.log");
	FILE *f = fopen(log, "r");
	char line[4096] = "";
	cr_assert(f && fgets(line, sizeof line, f));
	fclose(f);
	cr_assert(strstr(line, "run get-token --cluster sim | "), "%s", line);
	cr_assert(strstr(line, "\"interactive\":false"), "%s", line);
	cr_assert(strstr(line, "\"kind\":\"ExecCredential\""), "%s", line);
	char want[300];
	snprintf(want, sizeof want, "\"server\":\"%s\"", sim.url);
	cr_assert(strstr(line, want), "%s", line);
	/* its stderr reached our log, naming the plugin and the user */
	cr_assert(strstr(logtext(), "(user plugin-user): fake plugin: issuing a credential"), "%s", logtext());

	/* the server rotates its token and so does the plugin: one 401, a re-run, success */
	ksim_write(&sim, "plugin-token", "tok-2\n");
	ksim_write(&sim, "server-token", "tok-2\n");
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), 0, "%s", e.msg);
	gk_kube_client_stats s;
	gk_kube_client_stats_get(kc, &s);
	cr_assert_eq(s.unauthorized, 1);
	cr_assert_eq(plugin_runs(), 2);
	cr_assert(!strstr(logtext(), "tok-"), "a token reached the log: %s", logtext());
	gk_kube_config_free(&cfg);
}

Test(exec, refreshed_before_expiry_without_a_401, .init = setup, .fini = teardown)
{
	gk_kube_config cfg;
	/* a 2 s credential: refreshed in the background in its last fifth */
	exec_client(&cfg, "client.authentication.k8s.io/v1beta1", "      - {name: PLUGIN_EXPIRY_S, value: '2'}\n");
	gk_err e = {0};
	int64_t deadline = ksim_now_ms() + 15000;
	while (plugin_runs() < 3 && ksim_now_ms() < deadline) {
		cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), 0, "%s", e.msg);
		poll(NULL, 0, 50);
	}
	cr_assert_geq(plugin_runs(), 3, "re-run as each credential nears its expiry");
	gk_kube_client_stats s;
	gk_kube_client_stats_get(kc, &s);
	cr_assert_eq(s.unauthorized, 0, "never sent an expired credential");
	gk_kube_config_free(&cfg);
}

Test(exec, expired_credential_rerun_at_once, .init = setup, .fini = teardown)
{
	gk_kube_config cfg;
	exec_client(&cfg, "client.authentication.k8s.io/v1", "      - {name: PLUGIN_EXPIRY_S, value: '-60'}\n");
	gk_err e = {0};
	for (int i = 0; i < 3; i++)
		cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(plugin_runs(), 4, "an expired credential is never used: a run per request");
	gk_kube_config_free(&cfg);
}

Test(exec, a_refused_credential_is_not_rerun_per_request, .init = setup, .fini = teardown)
{
	gk_kube_config cfg;
	exec_client(&cfg, "client.authentication.k8s.io/v1", NULL);
	ksim_write(&sim, "server-token", "another\n"); /* the server refuses what the plugin prints */
	gk_err e = {0};
	int64_t t0 = ksim_now_ms();
	for (int i = 0; i < 8; i++)
		cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), GK_UNAUTHENTICATED);
	int64_t took = ksim_now_ms() - t0;
	/* 8 requests, 8 401s: the first re-runs the plugin, then at most one run a second */
	cr_assert_leq(plugin_runs(), 2 + took / 1000, "%d runs in %lld ms", plugin_runs(), (long long)took);
	gk_kube_config_free(&cfg);
}

Test(exec, failures_are_clear_and_bounded, .init = setup, .fini = teardown)
{
	start_sim_with_token("tok-1\n");
	ksim_write(&sim, "plugin-token", "tok-1\n");
	gk_kube_config cfg;
	exec_config(&cfg, "client.authentication.k8s.io/v1", "      - {name: PLUGIN_FAIL, value: '1'}\n");
	gk_kube_cred cr;
	gk_err e = {0};
	cr_assert_eq(gk_kube_exec_run(&cfg, &cr, &e), GK_UNAUTHENTICATED);
	cr_assert(strstr(e.msg, "kubeconfig user \"plugin-user\": exec plugin \"") && strstr(e.msg, "exited with code 3"),
		  "%s", e.msg);
	cr_assert(strstr(logtext(), "fake plugin: failing as asked"), "%s", logtext());
	/* the client: no credential, the request is refused by the server, the error logged */
	gk_kube_opts o = {.qps = -1};
	cr_assert_eq(gk_kube_client_new(&kc, &cfg, &o, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), GK_UNAUTHENTICATED);
	cr_assert(strstr(logtext(), "exited with code 3 (keeping the previous credential"), "%s", logtext());
	int runs = plugin_runs();
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), GK_UNAUTHENTICATED);
	cr_assert_eq(plugin_runs(), runs, "a failed plugin is not re-run at every request");
	gk_kube_config_free(&cfg);

	/* a hung plugin is killed at its time bound */
	exec_config(&cfg, "client.authentication.k8s.io/v1", "      - {name: PLUGIN_SLEEP, value: '30'}\n");
	cfg.exec->timeout_ms = 300;
	int64_t t0 = ksim_now_ms();
	cr_assert_eq(gk_kube_exec_run(&cfg, &cr, &e), GK_DEADLINE_EXCEEDED);
	cr_assert_lt(ksim_now_ms() - t0, 10000, "bounded");
	cr_assert(strstr(e.msg, "did not finish within 300 ms"), "%s", e.msg);
	free(cfg.exec->command);
	/* a command that is not there: the installHint says what to do */
	cfg.exec->command = strdup("/nonexistent/kubectl-plugin");
	cr_assert_eq(gk_kube_exec_run(&cfg, &cr, &e), GK_NOT_FOUND);
	cr_assert(strstr(e.msg, "kubectl-plugin") && strstr(e.msg, "see the test"), "%s", e.msg);
	/* an answer of the wrong apiVersion */
	free(cfg.exec->command);
	char plugin[512];
	plugin_path(plugin, sizeof plugin);
	cfg.exec->command = strdup(plugin);
	cfg.exec->timeout_ms = 0;
	free(cfg.exec->env[2]);
	cfg.exec->env[2] = strdup("PLUGIN_API=client.authentication.k8s.io/v1beta1");
	free(cfg.exec->env[3]);
	cfg.exec->env[3] = NULL;
	cr_assert_eq(gk_kube_exec_run(&cfg, &cr, &e), GK_INVALID_ARGUMENT);
	cr_assert(strstr(e.msg, "the kubeconfig asks for \"client.authentication.k8s.io/v1\""), "%s", e.msg);
	gk_kube_config_free(&cfg);
}

/* ---- tls-server-name ------------------------------------------------------ */

static void make_certs(const ksim *s)
{
	char cmd[3072];
	snprintf(cmd, sizeof cmd,
		 "cd '%s' && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 "
		 "-subj /CN=test-ca >/dev/null 2>&1 && "
		 "openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=kube.internal >/dev/null 2>&1 && "
		 "printf 'subjectAltName=DNS:kube.internal\\n' > ext && "
		 "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 1 "
		 "-extfile ext >/dev/null 2>&1 && "
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout dflt.key -out dflt.crt -days 1 "
		 "-subj /CN=default -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
		 s->dir);
	cr_assert_eq(system(cmd), 0, "openssl failed");
}

static void tls_client(const char *url, const char *ca, const char *name)
{
	gk_kube_client_free(kc);
	gk_kube_config c = {.server = (char *)url, .ca_file = (char *)ca, .tls_server_name = (char *)name};
	gk_kube_opts o = {.qps = -1, .timeout_ms = 10000};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, &c, &o, &e), 0, "%s", e.msg);
}

Test(tls_server_name, verified_against_the_name, .init = setup, .fini = teardown)
{
	make_certs(&sim);
	char crt[512], key[512], ca[512];
	ksim_path(&sim, crt, sizeof crt, "srv.crt");
	ksim_path(&sim, key, sizeof key, "srv.key");
	ksim_path(&sim, ca, sizeof ca, "ca.crt");
	const char *args[] = {"--tls-cert", crt, "--tls-key", key, NULL};
	ksim_start(&sim, args);
	gk_err e = {0};
	/* the certificate names kube.internal only; we connect to 127.0.0.1 */
	tls_client(sim.url, ca, NULL);
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), GK_UNAVAILABLE, "no name: the address does not match");
	tls_client(sim.url, ca, "kube.internal");
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), 0, "%s", e.msg);
	tls_client(sim.url, ca, "other.internal");
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), GK_UNAVAILABLE, "another name is refused");
}

/* openssl s_server serves srv.crt (kube.internal) only to a client whose SNI is
 * kube.internal, and dflt.crt (another CA) to everyone else: success proves
 * the name went out as SNI, not only into the verification. */
Test(tls_server_name, sent_as_sni, .init = setup, .fini = teardown)
{
	make_certs(&sim);
	char cmd[2048];
	snprintf(cmd, sizeof cmd,
		 "cd '%s' && exec openssl s_server -www -accept 127.0.0.1:0 -cert dflt.crt -key dflt.key "
		 "-servername kube.internal -cert2 srv.crt -key2 srv.key",
		 sim.dir);
	int pfd[2];
	cr_assert_eq(pipe(pfd), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(pfd[1], 1);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);
		close(pfd[0]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	sim.pid = pid; /* ksim_cleanup stops it */
	char buf[512] = "";
	size_t len = 0;
	int64_t deadline = ksim_now_ms() + 20000;
	while (!strstr(buf, "ACCEPT ") || !strchr(strstr(buf, "ACCEPT "), '\n')) {
		cr_assert_lt(ksim_now_ms(), deadline, "s_server did not start: %s", buf);
		struct pollfd p = {pfd[0], POLLIN, 0};
		if (poll(&p, 1, 200) <= 0)
			continue;
		ssize_t r = read(pfd[0], buf + len, sizeof buf - 1 - len);
		cr_assert_gt(r, 0, "s_server exited: %s", buf);
		len += (size_t)r;
		buf[len] = 0;
	}
	int port = 0;
	cr_assert_eq(sscanf(strstr(buf, "ACCEPT ") + 7, "127.0.0.1:%d", &port), 1, "%s", buf);
	char url[64], ca[512];
	snprintf(url, sizeof url, "https://127.0.0.1:%d", port);
	ksim_path(&sim, ca, sizeof ca, "ca.crt");
	gk_err e = {0};
	tls_client(url, ca, NULL);
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), GK_UNAVAILABLE, "no SNI: the default certificate");
	tls_client(url, ca, "kube.internal");
	cr_assert_eq(gk_kube_get(kc, &nodes, NULL, NULL, &e), 0, "%s", e.msg);
	close(pfd[0]);
}
