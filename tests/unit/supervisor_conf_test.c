/* Supervisor configuration: profile defaults, the JSON file, every error names its field. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../supervisor/sup.h"

static int parse(gk_sup_conf *c, const char *profile, const char *json, gk_err *err)
{
	return gk_sup_conf_parse(c, profile, json, strlen(json), err);
}

Test(sup_conf, profiles)
{
	gk_sup_conf c;
	gk_err err;
	cr_assert_eq(gk_sup_conf_profile(&c, "controller", &err), 0);
	cr_assert_eq(c.n_svcs, 7);
	const char *want[] = { "watcher", "modmgr", "gater", "opmgr", "statusd", "certd", "webhook" };
	for (int i = 0; i < 7; i++)
		cr_assert_str_eq(c.svcs[i].name, want[i]);
	cr_assert_str_eq(c.svcs[0].binary, "gpukmm-watcher");
	cr_assert(c.svcs[0].credentials);
	cr_assert(c.svcs[5].credentials, "certd writes the Secret and the caBundle");
	cr_assert_not(c.svcs[6].credentials, "the webhook holds no API credentials");
	cr_assert_eq(c.svcs[0].restart, GK_SUP_PERMANENT);
	cr_assert_eq(c.svcs[0].stop_signal, SIGTERM);
	gk_sup_conf_free(&c);

	cr_assert_eq(gk_sup_conf_profile(&c, "node", &err), 0);
	cr_assert_eq(c.n_svcs, 2);
	cr_assert_str_eq(c.svcs[0].name, "prober");
	cr_assert_not(c.svcs[0].credentials, "the prober holds no API credentials");
	cr_assert_str_eq(c.svcs[1].binary, "gpukmm-statusd");
	cr_assert_eq(c.svcs[1].n_args, 2);
	cr_assert_str_eq(c.svcs[1].args[0], "--mode");
	cr_assert_str_eq(c.svcs[1].args[1], "node");
	gk_sup_conf_free(&c);

	cr_assert_eq(gk_sup_conf_profile(&c, "all", &err), 0);
	cr_assert_eq(c.n_svcs, 9);
	for (size_t i = 0; i < c.n_svcs; i++)
		for (size_t j = i + 1; j < c.n_svcs; j++)
			cr_assert_str_neq(c.svcs[i].name, c.svcs[j].name);
	gk_sup_conf_free(&c);

	cr_assert_eq(gk_sup_conf_profile(&c, "nodes", &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "--profile") && strstr(err.msg, "nodes"), "%s", err.msg);
	cr_assert_eq(gk_sup_conf_profile(&c, NULL, &err), GK_INVALID_ARGUMENT);
}

Test(sup_conf, full_service)
{
	gk_sup_conf c;
	gk_err err;
	const char *j = "{\"intensity\":{\"max_restarts\":3,\"window_ms\":2000},\"services\":[{"
			"\"name\":\"svc-1\",\"binary\":\"/bin/true\",\"args\":[\"a\",\"b\"],\"env\":{\"X\":\"1\"},"
			"\"restart\":\"transient\",\"backoff\":{\"initial_ms\":0,\"max_ms\":10,\"jitter\":0.5,"
			"\"reset_after_ms\":7},\"stop\":{\"signal\":\"SIGINT\",\"timeout_ms\":300},"
			"\"ready\":{\"required\":false,\"timeout_ms\":50},\"heartbeat\":{\"interval_ms\":20,"
			"\"timeout_ms\":100},\"credentials\":true,\"user\":65534,\"group\":65534}]}";
	cr_assert_eq(parse(&c, NULL, j, &err), 0, "%s", err.msg);
	cr_assert_eq(c.intensity_max, 3);
	cr_assert_eq(c.intensity_window_ms, 2000);
	cr_assert_eq(c.n_svcs, 1);
	gk_sup_svc_conf *s = &c.svcs[0];
	cr_assert_str_eq(s->name, "svc-1");
	cr_assert_eq(s->n_args, 2);
	cr_assert_null(s->args[2]);
	cr_assert_str_eq(s->env[0], "X=1");
	cr_assert_eq(s->restart, GK_SUP_TRANSIENT);
	cr_assert_eq(s->backoff.max_ms, 10);
	cr_assert_eq(s->backoff.reset_after_ms, 7);
	cr_assert_float_eq(s->backoff.jitter, 0.5, 1e-9);
	cr_assert_eq(s->stop_signal, SIGINT);
	cr_assert_eq(s->stop_timeout_ms, 300);
	cr_assert_not(s->required);
	cr_assert_eq(s->ready_timeout_ms, 50);
	cr_assert_eq(s->heartbeat_ms, 20);
	cr_assert_eq(s->heartbeat_timeout_ms, 100);
	cr_assert(s->credentials);
	cr_assert_eq(s->uid, 65534);
	cr_assert_eq(s->gid, 65534);
	cr_assert_eq(gk_sup_conf_resolve(&c, NULL, NULL, &err), 0, "%s", err.msg);
	cr_assert_str_eq(s->path, "/bin/true");
	gk_sup_conf_free(&c);

	/* no services: the profile's; the default binary is gpukmm-<name> */
	cr_assert_eq(parse(&c, "node", "{\"intensity\":{\"max_restarts\":1}}", &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_svcs, 2);
	cr_assert_eq(c.intensity_max, 1);
	gk_sup_conf_free(&c);
	cr_assert_eq(parse(&c, NULL, "{\"services\":[{\"name\":\"x\"}]}", &err), 0, "%s", err.msg);
	cr_assert_str_eq(c.svcs[0].binary, "gpukmm-x");
	cr_assert_eq(c.svcs[0].uid, -1);
	gk_sup_conf_free(&c);
}

/* Each bad config: the error must contain the field path. */
static const struct { const char *json; const char *field; } bad[] = {
	{ "", "JSON" },
	{ "{\"services\":[{\"name\":\"a\"}]", "JSON" },
	{ "[]", "top level" },
	{ "{\"servics\":[]}", "servics: unknown field" },
	{ "{}", "services: required" },
	{ "{\"services\":[]}", "services: must be" },
	{ "{\"services\":{}}", "services: must be" },
	{ "{\"services\":[1]}", "services[0]: must be an object" },
	{ "{\"services\":[{}]}", "services[0].name: required" },
	{ "{\"services\":[{\"name\":\"A b\"}]}", "services[0].name" },
	{ "{\"services\":[{\"name\":\"control\"}]}", "services[0].name" },
	{ "{\"services\":[{\"name\":\"a\"},{\"name\":\"a\"}]}", "services[1].name: 'a' is used twice" },
	{ "{\"services\":[{\"name\":\"a\",\"bogus\":1}]}", "services[0].bogus: unknown field" },
	{ "{\"services\":[{\"name\":\"a\",\"binary\":\"\"}]}", "services[0].binary" },
	{ "{\"services\":[{\"name\":\"a\",\"args\":\"x\"}]}", "services[0].args" },
	{ "{\"services\":[{\"name\":\"a\",\"args\":[1]}]}", "services[0].args[0]" },
	{ "{\"services\":[{\"name\":\"a\",\"env\":[]}]}", "services[0].env" },
	{ "{\"services\":[{\"name\":\"a\",\"env\":{\"A\":1}}]}", "services[0].env.A" },
	{ "{\"services\":[{\"name\":\"a\",\"env\":{\"A=B\":\"1\"}}]}", "services[0].env" },
	{ "{\"services\":[{\"name\":\"a\",\"restart\":\"always\"}]}", "services[0].restart" },
	{ "{\"services\":[{\"name\":\"a\",\"backoff\":5}]}", "services[0].backoff: must be an object" },
	{ "{\"services\":[{\"name\":\"a\",\"backoff\":{\"initial_ms\":-1}}]}", "services[0].backoff.initial_ms" },
	{ "{\"services\":[{\"name\":\"a\",\"backoff\":{\"initial_ms\":1.5}}]}", "services[0].backoff.initial_ms" },
	{ "{\"services\":[{\"name\":\"a\",\"backoff\":{\"initial_ms\":100,\"max_ms\":10}}]}", "services[0].backoff.max_ms" },
	{ "{\"services\":[{\"name\":\"a\",\"backoff\":{\"jitter\":2}}]}", "services[0].backoff.jitter" },
	{ "{\"services\":[{\"name\":\"a\",\"backoff\":{\"typo\":2}}]}", "services[0].backoff.typo: unknown field" },
	{ "{\"services\":[{\"name\":\"a\",\"stop\":{\"signal\":\"SIGFOO\"}}]}", "services[0].stop.signal" },
	{ "{\"services\":[{\"name\":\"a\",\"stop\":{\"timeout_ms\":0}}]}", "services[0].stop.timeout_ms" },
	{ "{\"services\":[{\"name\":\"a\",\"ready\":{\"required\":\"yes\"}}]}", "services[0].ready.required" },
	{ "{\"services\":[{\"name\":\"a\",\"heartbeat\":{\"interval_ms\":100,\"timeout_ms\":50}}]}",
	  "services[0].heartbeat.timeout_ms" },
	{ "{\"services\":[{\"name\":\"a\",\"credentials\":1}]}", "services[0].credentials" },
	{ "{\"services\":[{\"name\":\"a\",\"user\":-5}]}", "services[0].user" },
	{ "{\"intensity\":{\"max_restarts\":-1},\"services\":[{\"name\":\"a\"}]}", "intensity.max_restarts" },
	{ "{\"intensity\":{\"period\":1},\"services\":[{\"name\":\"a\"}]}", "intensity.period: unknown field" },
};

Test(sup_conf, errors_name_the_field)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		gk_sup_conf c;
		gk_err err;
		cr_assert_eq(parse(&c, NULL, bad[i].json, &err), GK_INVALID_ARGUMENT, "accepted: %s", bad[i].json);
		cr_assert(strstr(err.msg, bad[i].field), "%s -> '%s' lacks '%s'", bad[i].json, err.msg,
			  bad[i].field);
		cr_assert_null(c.svcs);
	}
}

Test(sup_conf, load_and_resolve)
{
	char dir[256];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/gk-conf-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
	cr_assert_not_null(mkdtemp(dir));
	char file[300], exe[300], path_env[700];
	snprintf(file, sizeof(file), "%s/c.json", dir);
	gk_sup_conf c;
	gk_err err;
	cr_assert_eq(gk_sup_conf_load(&c, NULL, file, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, file), "%s", err.msg);
	FILE *f = fopen(file, "w");
	fputs("{\"services\":[{\"name\":\"one\"},{\"name\":\"two\",\"binary\":\"tool\"}]}", f);
	fclose(f);
	cr_assert_eq(gk_sup_conf_load(&c, NULL, file, &err), 0, "%s", err.msg);
	/* nothing found yet */
	snprintf(path_env, sizeof(path_env), "/nonexistent:%s/bin", dir);
	cr_assert_eq(gk_sup_conf_resolve(&c, dir, path_env, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "services[0].binary") && strstr(err.msg, "gpukmm-one"), "%s", err.msg);
	/* gpukmm-one next to the supervisor, tool in $PATH */
	snprintf(exe, sizeof(exe), "%s/gpukmm-one", dir);
	f = fopen(exe, "w");
	fclose(f);
	cr_assert(strstr(gk_sup_conf_resolve(&c, dir, path_env, &err) ? err.msg : "", "services[0]"),
		  "not executable must not resolve: %s", err.msg);
	chmod(exe, 0755);
	cr_assert_eq(gk_sup_conf_resolve(&c, dir, path_env, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "services[1].binary"), "%s", err.msg);
	char bindir[300], tool[320];
	snprintf(bindir, sizeof(bindir), "%s/bin", dir);
	mkdir(bindir, 0700);
	snprintf(tool, sizeof(tool), "%s/tool", bindir);
	f = fopen(tool, "w");
	fclose(f);
	chmod(tool, 0755);
	cr_assert_eq(gk_sup_conf_resolve(&c, dir, path_env, &err), 0, "%s", err.msg);
	cr_assert_str_eq(c.svcs[0].path, exe);
	cr_assert_str_eq(c.svcs[1].path, tool);
	gk_sup_conf_free(&c);
	/* a malformed file says where */
	f = fopen(file, "w");
	fputs("{\n\"services\": [\n{\"name\": }\n]}", f);
	fclose(f);
	cr_assert_eq(gk_sup_conf_load(&c, NULL, file, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "line 3"), "%s", err.msg);
	unlink(tool);
	rmdir(bindir);
	unlink(exe);
	unlink(file);
	rmdir(dir);
}

Test(sup_conf, signals)
{
	cr_assert_eq(gk_sup_signal_parse("SIGTERM"), SIGTERM);
	cr_assert_eq(gk_sup_signal_parse("term"), SIGTERM);
	cr_assert_eq(gk_sup_signal_parse("2"), 2);
	cr_assert_eq(gk_sup_signal_parse("0"), -1);
	cr_assert_eq(gk_sup_signal_parse("999"), -1);
	cr_assert_eq(gk_sup_signal_parse("9x"), -1);
	cr_assert_eq(gk_sup_signal_parse(""), -1);
	cr_assert_eq(gk_sup_signal_parse(NULL), -1);
}

static bool has_args(const gk_sup_svc_conf *s, const char *const *want)
{
	size_t n = 0;
	while (want[n])
		n++;
	if (s->n_args != n || s->args[n] != NULL)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(s->args[i], want[i]) != 0)
			return false;
	return true;
}

Test(sup_conf, profile_options_reach_their_services)
{
	gk_sup_conf c;
	gk_err err;
	cr_assert_eq(gk_sup_conf_profile(&c, "controller", &err), 0);
	gk_sup_pflags f = { .webhook_tls_cert = "/c/tls.crt", .webhook_tls_key = "/c/tls.key",
			    .webhook_listen = "127.0.0.1:0", .leader_elect = true, .lease_name = "lz" };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &f, &err), 0, "%s", err.msg);
	static const char *const wh[] = { "--tls-cert", "/c/tls.crt", "--tls-key", "/c/tls.key",
					  "--listen", "127.0.0.1:0", NULL };
	static const char *const wa[] = { "--leader-elect", "--lease-name", "lz", NULL };
	static const char *const none[] = { NULL };
	cr_assert(has_args(&c.svcs[5], wh), "webhook args");
	cr_assert(has_args(&c.svcs[0], wa), "watcher args");
	for (int i = 1; i < 5; i++)
		cr_assert(has_args(&c.svcs[i], none), "%s untouched", c.svcs[i].name);
	gk_sup_conf_free(&c);

	/* only what is given; "" counts as not given (an empty env variable) */
	cr_assert_eq(gk_sup_conf_profile(&c, "controller", &err), 0);
	gk_sup_pflags g = { .webhook_tls_cert = "/c", .webhook_tls_key = "/k", .webhook_listen = "", .lease_name = "" };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &g, &err), 0, "%s", err.msg);
	static const char *const wl[] = { "--tls-cert", "/c", "--tls-key", "/k", NULL };
	cr_assert(has_args(&c.svcs[5], wl));
	cr_assert(has_args(&c.svcs[0], none), "no leader election unless asked");
	gk_sup_conf_free(&c);

	/* no certificate: the controller runs without the webhook and says why */
	cr_assert_eq(gk_sup_conf_profile(&c, "controller", &err), 0);
	gk_sup_pflags n = { .webhook_tls_cert = "", .webhook_tls_key = "" };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &n, &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_svcs, 5);
	for (size_t i = 0; i < c.n_svcs; i++)
		cr_assert_str_neq(c.svcs[i].name, "webhook");
	cr_assert(strstr(c.note, "webhook: off: no serving certificate"), "%s", c.note);
	gk_sup_conf_free(&c);
	/* the webhook profile without a certificate has nothing to run: an error, not an empty table */
	cr_assert_eq(gk_sup_conf_profile(&c, "webhook", &err), 0);
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &n, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "no serving certificate") && strstr(err.msg, "nothing else is left"), "%s", err.msg);
	gk_sup_conf_free(&c);
	/* ... unless it serves plain HTTP by its config (tests) */
	const char *ins = "{\"services\":[{\"name\":\"webhook\",\"args\":[\"--insecure-http\"]}]}";
	cr_assert_eq(gk_sup_conf_parse(&c, NULL, ins, strlen(ins), &err), 0, "%s", err.msg);
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &n, &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_svcs, 1);
	cr_assert_eq(c.note[0], 0);
	gk_sup_conf_free(&c);
	/* a service merely named "webhook" is not the webhook */
	const char *other = "{\"services\":[{\"name\":\"webhook\",\"binary\":\"gpukmm-echo\"}]}";
	cr_assert_eq(gk_sup_conf_parse(&c, NULL, other, strlen(other), &err), 0, "%s", err.msg);
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &n, &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_svcs, 1);
	gk_sup_conf_free(&c);

	/* nothing given: nothing changes, also for a profile without those services */
	cr_assert_eq(gk_sup_conf_profile(&c, "node", &err), 0);
	gk_sup_pflags z = { 0 };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &z, &err), 0, "%s", err.msg);
	gk_sup_conf_free(&c);
}

Test(sup_conf, profile_options_errors)
{
	gk_sup_conf c;
	gk_err err;
	struct { gk_sup_pflags f; const char *profile, *msg; } bad[] = {
		{ { .webhook_tls_cert = "/c" }, "controller", "go together" },
		{ { .webhook_tls_key = "/k" }, "controller", "go together" },
		{ { .lease_name = "x" }, "controller", "needs --leader-elect" },
		{ { .webhook_listen = ":1" }, "node", "'webhook'" },
		{ { .webhook_listen = ":1" }, "controller", "--webhook-listen: the webhook has no serving certificate" },
		{ { .leader_elect = true }, "node", "'watcher'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(gk_sup_conf_profile(&c, bad[i].profile, &err), 0);
		cr_assert_eq(gk_sup_conf_apply_pflags(&c, &bad[i].f, &err), GK_INVALID_ARGUMENT, "case %zu", i);
		cr_assert(strstr(err.msg, bad[i].msg), "case %zu: %s", i, err.msg);
		gk_sup_conf_free(&c);
	}
	/* a config file's services take them by name, after their own args */
	const char *json = "{\"services\":[{\"name\":\"webhook\",\"args\":[\"--port-file\",\"/p\"]}]}";
	cr_assert_eq(gk_sup_conf_parse(&c, NULL, json, strlen(json), &err), 0, "%s", err.msg);
	gk_sup_pflags f = { .webhook_tls_cert = "/c", .webhook_tls_key = "/k" };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &f, &err), 0, "%s", err.msg);
	static const char *const want[] = { "--port-file", "/p", "--tls-cert", "/c", "--tls-key", "/k", NULL };
	cr_assert(has_args(&c.svcs[0], want));
	gk_sup_conf_free(&c);
}

/* deploy/default: the webhook in a container of its own, without the API token */
Test(sup_conf, the_webhook_apart_from_the_services_with_credentials)
{
	gk_sup_conf c;
	gk_err err;
	cr_assert_eq(gk_sup_conf_profile(&c, "webhook", &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_svcs, 1);
	cr_assert_str_eq(c.svcs[0].name, "webhook");
	cr_assert_not(c.svcs[0].credentials);
	gk_sup_pflags tls = { .webhook_tls_cert = "/c", .webhook_tls_key = "/k" };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &tls, &err), 0, "%s", err.msg);
	gk_sup_conf_free(&c);

	cr_assert_eq(gk_sup_conf_profile(&c, "controller", &err), 0);
	gk_sup_pflags f = { .without = "webhook", .leader_elect = true };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &f, &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_svcs, 5);
	for (size_t i = 0; i < c.n_svcs; i++) {
		cr_assert_str_neq(c.svcs[i].name, "webhook");
		cr_assert(c.svcs[i].credentials, "%s", c.svcs[i].name);
	}
	gk_sup_conf_free(&c);

	struct { gk_sup_pflags f; const char *profile, *msg; } bad[] = {
		{ { .without = "webhook", .webhook_tls_cert = "/c", .webhook_tls_key = "/k" }, "controller", "'webhook'" },
		{ { .without = "webhook" }, "node", "--without: no service named 'webhook'" },
		{ { .without = "webhook" }, "webhook", "no service left" },
		{ { .without = "gater,nope" }, "controller", "'nope'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(gk_sup_conf_profile(&c, bad[i].profile, &err), 0);
		cr_assert_eq(gk_sup_conf_apply_pflags(&c, &bad[i].f, &err), GK_INVALID_ARGUMENT, "case %zu", i);
		cr_assert(strstr(err.msg, bad[i].msg), "case %zu: %s", i, err.msg);
		gk_sup_conf_free(&c);
	}
}

/* deploy/default: certd in the API container writes the pair into a shared
 * directory, the webhook's container serves it once it is there */
Test(sup_conf, the_webhook_certificate_directory_starts_certd_and_makes_the_webhook_wait)
{
	gk_sup_conf c;
	gk_err err;
	cr_assert_eq(gk_sup_conf_profile(&c, "controller", &err), 0);
	gk_sup_pflags f = { .webhook_cert_dir = "/run/certs" };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &f, &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_svcs, 7);
	static const char *const cd[] = { "--dir", "/run/certs", NULL };
	static const char *const wh[] = { "--tls-cert", "/run/certs/tls.crt", "--tls-key", "/run/certs/tls.key",
					  "--tls-wait", NULL };
	cr_assert_str_eq(c.svcs[5].name, "certd");
	cr_assert(has_args(&c.svcs[5], cd));
	cr_assert(has_args(&c.svcs[6], wh));
	gk_sup_conf_free(&c);

	/* the two containers: certd where the token is, the webhook apart */
	cr_assert_eq(gk_sup_conf_profile(&c, "controller", &err), 0);
	gk_sup_pflags a = { .without = "webhook", .webhook_cert_dir = "/w" };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &a, &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_svcs, 6);
	cr_assert_str_eq(c.svcs[5].name, "certd");
	gk_sup_conf_free(&c);
	cr_assert_eq(gk_sup_conf_profile(&c, "webhook", &err), 0);
	gk_sup_pflags w = { .webhook_cert_dir = "/w" };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &w, &err), 0, "%s", err.msg);
	cr_assert(has_args(&c.svcs[0], (const char *const[]){ "--tls-cert", "/w/tls.crt", "--tls-key", "/w/tls.key",
							       "--tls-wait", NULL }));
	cr_assert_eq(c.n_svcs, 1);
	gk_sup_conf_free(&c);

	/* without it certd has nowhere to write: left out */
	cr_assert_eq(gk_sup_conf_profile(&c, "controller", &err), 0);
	gk_sup_pflags z = { .webhook_tls_cert = "/c", .webhook_tls_key = "/k" };
	cr_assert_eq(gk_sup_conf_apply_pflags(&c, &z, &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_svcs, 6);
	for (size_t i = 0; i < c.n_svcs; i++)
		cr_assert_str_neq(c.svcs[i].name, "certd");
	gk_sup_conf_free(&c);

	struct { gk_sup_pflags f; const char *profile, *msg; } bad[] = {
		{ { .webhook_cert_dir = "/d", .webhook_tls_cert = "/c", .webhook_tls_key = "/k" }, "controller",
		  "exclude each other" },
		{ { .webhook_cert_dir = "/d" }, "node", "no service named 'certd' or 'webhook'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(gk_sup_conf_profile(&c, bad[i].profile, &err), 0);
		cr_assert_eq(gk_sup_conf_apply_pflags(&c, &bad[i].f, &err), GK_INVALID_ARGUMENT, "case %zu", i);
		cr_assert(strstr(err.msg, bad[i].msg), "case %zu: %s", i, err.msg);
		gk_sup_conf_free(&c);
	}
}

Test(sup_conf, runtime_dir_owner_is_the_one_service_user)
{
	gk_sup_conf c;
	gk_err err;
	long uid = 0, gid = 0;
	cr_assert_eq(gk_sup_conf_profile(&c, "controller", &err), 0);
	cr_assert_eq(gk_sup_rundir_owner(&c, &uid, &gid, &err), 0);
	cr_assert(uid == -1 && gid == -1, "nobody drops privileges: the dir stays ours");
	gk_sup_conf_free(&c);

	const char *same = "{\"services\":[{\"name\":\"a\",\"user\":65532},{\"name\":\"b\"},"
			   "{\"name\":\"c\",\"user\":65532,\"group\":65532}]}";
	cr_assert_eq(gk_sup_conf_parse(&c, NULL, same, strlen(same), &err), 0, "%s", err.msg);
	cr_assert_eq(gk_sup_rundir_owner(&c, &uid, &gid, &err), 0, "%s", err.msg);
	cr_assert(uid == 65532 && gid == 65532, "%ld:%ld", uid, gid);
	gk_sup_conf_free(&c);

	const char *grp = "{\"services\":[{\"name\":\"a\",\"user\":7,\"group\":9}]}";
	cr_assert_eq(gk_sup_conf_parse(&c, NULL, grp, strlen(grp), &err), 0, "%s", err.msg);
	cr_assert_eq(gk_sup_rundir_owner(&c, &uid, &gid, &err), 0, "%s", err.msg);
	cr_assert(uid == 7 && gid == 9, "%ld:%ld", uid, gid);
	gk_sup_conf_free(&c);

	/* two users cannot both own a 0700 dir: refused before anything starts */
	const char *two[] = { "{\"services\":[{\"name\":\"a\",\"user\":1},{\"name\":\"b\",\"user\":2}]}",
			      "{\"services\":[{\"name\":\"a\",\"user\":1},{\"name\":\"b\",\"user\":1,\"group\":2}]}" };
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(gk_sup_conf_parse(&c, NULL, two[i], strlen(two[i]), &err), 0, "%s", err.msg);
		cr_assert_eq(gk_sup_rundir_owner(&c, &uid, &gid, &err), GK_INVALID_ARGUMENT, "case %d", i);
		cr_assert(strstr(err.msg, "services[1].user") && strstr(err.msg, "'b'"), "%s", err.msg);
		gk_sup_conf_free(&c);
	}
}

/* ---- the files the options name: checked before anything starts ---- */
Test(sup_files, every_named_file_checked)
{
	char dir[200], cmd[1024], a[300], b[300], kc[700];
	const char *t = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/gk-supfiles.XXXXXX", t && *t ? t : "/tmp");
	cr_assert(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && openssl req -x509 -newkey rsa:2048 -nodes -keyout k1 -out c1 -days 1 -subj /CN=a >/dev/null 2>&1 && "
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout k2 -out c2 -days 1 -subj /CN=b >/dev/null 2>&1 && "
		 "echo tok > token && printf 'apiVersion: v1\\nkind: Config\\ncurrent-context: a\\nclusters:\\n"
		 "- name: c\\n  cluster: {server: https://h, certificate-authority: c1}\\ncontexts:\\n"
		 "- name: a\\n  context: {cluster: c, user: u}\\nusers:\\n- name: u\\n  user:\\n    exec: "
		 "{apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: no-such-plugin, "
		 "installHint: install it}\\n' > kc-exec && "
		 "printf 'apiVersion: v1\\nkind: Config\\ncurrent-context: a\\nclusters:\\n"
		 "- name: c\\n  cluster: {server: https://h, certificate-authority: missing-ca}\\ncontexts:\\n"
		 "- name: a\\n  context: {cluster: c}\\n' > kc-noca",
		 dir);
	cr_assert_eq(system(cmd), 0);
	gk_err err = { 0 };
	snprintf(a, sizeof(a), "%s/c1", dir);
	snprintf(b, sizeof(b), "%s/k1", dir);
	gk_sup_pflags ok = { .webhook_tls_cert = a, .webhook_tls_key = b };
	cr_assert_eq(gk_sup_check_files(&ok, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	gk_sup_pflags none = { 0 };
	cr_assert_eq(gk_sup_check_files(&none, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	/* a certificate file that is not there */
	gk_sup_pflags missing = { .webhook_tls_cert = "/nonexistent/tls.crt", .webhook_tls_key = b };
	cr_assert_eq(gk_sup_check_files(&missing, NULL, NULL, NULL, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "--webhook-tls-cert /nonexistent/tls.crt: No such file"), "%s", err.msg);
	/* a key of another certificate */
	char k2[300];
	snprintf(k2, sizeof(k2), "%s/k2", dir);
	gk_sup_pflags mismatch = { .webhook_tls_cert = a, .webhook_tls_key = k2 };
	cr_assert_eq(gk_sup_check_files(&mismatch, NULL, NULL, NULL, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "does not match"), "%s", err.msg);
	/* the /metrics pair, the same way */
	gk_sup_pflags mm = { .metrics_tls_cert = a, .metrics_tls_key = k2 };
	cr_assert_eq(gk_sup_check_files(&mm, NULL, NULL, NULL, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "--metrics-tls-cert/--metrics-tls-key") && strstr(err.msg, "does not match"), "%s", err.msg);
	/* a key that is a certificate */
	gk_sup_pflags notkey = { .webhook_tls_cert = a, .webhook_tls_key = a };
	cr_assert_eq(gk_sup_check_files(&notkey, NULL, NULL, NULL, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "no PEM private key"), "%s", err.msg);
	/* the token file */
	cr_assert_eq(gk_sup_check_files(&none, "/nonexistent/token", NULL, NULL, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "--token-file /nonexistent/token"), "%s", err.msg);
	/* a kubeconfig list: a file it names is missing; a plugin that is not installed */
	snprintf(kc, sizeof(kc), "%s/nope:%s/kc-noca", dir, dir);
	cr_assert_eq(gk_sup_check_files(&none, NULL, kc, "/bin", &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "certificate-authority") && strstr(err.msg, "missing-ca"), "%s", err.msg);
	snprintf(kc, sizeof(kc), "%s/kc-exec", dir);
	cr_assert_eq(gk_sup_check_files(&none, NULL, kc, "/bin:/usr/bin", &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "\"no-such-plugin\" is not an executable in $PATH. install it"), "%s", err.msg);
	cr_assert_eq(gk_sup_check_files(&none, NULL, "/nonexistent/kubeconfig", NULL, &err), GK_INVALID_ARGUMENT);
	cr_assert(strstr(err.msg, "/nonexistent/kubeconfig"), "%s", err.msg);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}
