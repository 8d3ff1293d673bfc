/* lib/kube config: the kubeconfig parsing matrix and in-cluster config. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpukmm/kube.h"

#define HEAD "apiVersion: v1\nkind: Config\n"

static void tmpdir(char *out, size_t cap)
{
	const char *t = getenv("TMPDIR");
	snprintf(out, cap, "%s/gk-kubeXXXXXX", t && *t ? t : P_tmpdir);
	cr_assert(mkdtemp(out));
}

static int parse(gk_kube_config *c, const char *y, const char *ctx, gk_err *e)
{
	return gk_kube_config_parse(c, y, strlen(y), ctx, "/etc/kc", e);
}

Test(kubeconfig, token_and_ca_file_relative)
{
	const char *y = HEAD
		"current-context: dev\n"
		"clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443/\n"
		"    certificate-authority: certs/ca.pem\n"
		"contexts:\n- name: dev\n  context: {cluster: c1, user: u1, namespace: x}\n"
		"users:\n- name: u1\n  user:\n    token: sekret\n";
	gk_kube_config c;
	gk_err e = {0};
	cr_assert_eq(parse(&c, y, NULL, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://10.0.0.1:6443");
	cr_assert_str_eq(c.ca_file, "/etc/kc/certs/ca.pem");
	cr_assert_str_eq(c.token, "sekret");
	cr_assert_not(c.insecure);
	cr_assert_null(c.ca.data);
	gk_kube_config_free(&c);
}

Test(kubeconfig, data_fields_stay_in_memory)
{
	/* "hello" / "world" / "key!" */
	const char *y = HEAD
		"current-context: a\n"
		"clusters:\n- name: c\n  cluster:\n    server: https://[fd00::1]:443\n"
		"    certificate-authority-data: aGVsbG8=\n"
		"contexts:\n- name: a\n  context:\n    cluster: c\n    user: u\n"
		"users:\n- name: u\n  user:\n    client-certificate-data: d29y\n      bGQ=\n"
		"    client-key-data: a2V5IQ==\n";
	gk_kube_config c;
	gk_err e = {0};
	cr_assert_eq(parse(&c, y, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(c.ca.len, 5);
	cr_assert(!memcmp(c.ca.data, "hello", 5));
	cr_assert_eq(c.cert.len, 5);
	cr_assert(!memcmp(c.cert.data, "world", 5));
	cr_assert_eq(c.key.len, 4);
	cr_assert(!memcmp(c.key.data, "key!", 4));
	cr_assert_null(c.ca_file);
	cr_assert_null(c.token);
	gk_kube_config_free(&c);
}

Test(kubeconfig, explicit_context_token_file_insecure)
{
	const char *y = HEAD
		"current-context: a\n"
		"clusters:\n- name: c\n  cluster: {server: 'https://x'}\n"
		"- name: d\n  cluster: {server: 'http://127.0.0.1:8080', insecure-skip-tls-verify: true,"
		" tls-server-name: kubernetes}\n"
		"contexts:\n- name: a\n  context: {cluster: c, user: u}\n"
		"- name: b\n  context: {cluster: d, user: v}\n"
		"users:\n- name: u\n  user: {token: t}\n- name: v\n  user: {tokenFile: /run/tok}\n";
	gk_kube_config c;
	gk_err e = {0};
	cr_assert_eq(parse(&c, y, "b", &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "http://127.0.0.1:8080");
	cr_assert(c.insecure);
	cr_assert_str_eq(c.tls_server_name, "kubernetes");
	cr_assert_str_eq(c.token_file, "/run/tok");
	cr_assert_null(c.token);
	gk_kube_config_free(&c);
	cr_assert_eq(parse(&c, y, NULL, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://x");
	cr_assert_not(c.insecure);
	gk_kube_config_free(&c);
}

Test(kubeconfig, anonymous_context_without_user)
{
	const char *y = HEAD "current-context: a\nclusters:\n- name: c\n  cluster: {server: https://h}\n"
			"contexts:\n- name: a\n  context: {cluster: c}\n";
	gk_kube_config c;
	gk_err e = {0};
	cr_assert_eq(parse(&c, y, NULL, &e), 0, "%s", e.msg);
	cr_assert_null(c.token);
	cr_assert_null(c.token_file);
	gk_kube_config_free(&c);
}

struct bad_case {
	const char *yaml, *ctx, *want;
	int code;
};

/* Each case fails with its code and message and leaves nothing half filled. */
static void expect_bad(const struct bad_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		gk_kube_config c;
		gk_err e = {0};
		int rc = parse(&c, cases[i].yaml, cases[i].ctx, &e);
		cr_assert_eq(rc, cases[i].code, "case %zu: rc %d (%s)", i, rc, e.msg);
		cr_assert(strstr(e.msg, cases[i].want), "case %zu: \"%s\" lacks \"%s\"", i, e.msg,
			  cases[i].want);
		cr_assert_null(c.server, "case %zu leaves a half config", i);
		cr_assert_null(c.exec, "case %zu leaves a half config", i);
	}
}

Test(kubeconfig, broken_configs_say_what_is_wrong)
{
	const char *cl = "clusters:\n- name: c\n  cluster: {server: https://h}\n";
	char buf[8][512];
	snprintf(buf[0], 512, HEAD "%scontexts:\n- name: a\n  context: {cluster: c, user: u}\n", cl);
	snprintf(buf[1], 512, HEAD "current-context: zz\n%scontexts: []\n", cl);
	snprintf(buf[2], 512, HEAD "current-context: a\ncontexts:\n- name: a\n  context: {cluster: q}\n");
	snprintf(buf[3], 512, HEAD "current-context: a\n%scontexts:\n- name: a\n  context: {cluster: c, user: u}\n", cl);
	snprintf(buf[4], 512, HEAD "current-context: a\n%scontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
		 "users:\n- name: u\n  user:\n    exec: {command: aws}\n", cl);
	snprintf(buf[5], 512, HEAD "current-context: a\n%scontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
		 "users:\n- name: u\n  user:\n    client-certificate-data: aGVsbG8=\n", cl);
	snprintf(buf[6], 512, HEAD "current-context: a\nclusters:\n- name: c\n  cluster: {certificate-authority: x}\n"
		 "contexts:\n- name: a\n  context: {cluster: c}\n");
	snprintf(buf[7], 512, HEAD "current-context: a\n%scontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
		 "users:\n- name: u\n  user:\n    client-key-data: '***'\n    client-certificate: x\n", cl);
	struct bad_case cases[] = {
		{buf[0], NULL, "no current-context", GK_FAILED_PRECONDITION},
		{buf[1], NULL, "context \"zz\" not found", GK_NOT_FOUND},
		{buf[2], NULL, "cluster \"q\" not found", GK_NOT_FOUND},
		{buf[3], NULL, "user \"u\" not found", GK_NOT_FOUND},
		{buf[4], NULL, "exec apiVersion \"\" is not supported", GK_INVALID_ARGUMENT},
		{buf[5], NULL, "certificate without a key", GK_INVALID_ARGUMENT},
		{buf[6], NULL, "has no server", GK_INVALID_ARGUMENT},
		{buf[7], NULL, "client-key-data is not valid base64", GK_INVALID_ARGUMENT},
		{"a: [unclosed\n", NULL, "YAML error", GK_INVALID_ARGUMENT},
		{"- just\n- a list\n", NULL, "not a mapping", GK_INVALID_ARGUMENT},
		{"", NULL, "empty", GK_INVALID_ARGUMENT},
		{HEAD "current-context: a\nclusters:\n- name: c\n  cluster: {server: ftp://x}\n"
		      "contexts:\n- name: a\n  context: {cluster: c}\n",
		 NULL, "not an http(s) URL", GK_INVALID_ARGUMENT},
	};
	expect_bad(cases, sizeof cases / sizeof cases[0]);
}

Test(kubeconfig, files_and_env_chain)
{
	char dir[200];
	tmpdir(dir, sizeof dir);
	char p[300];
	snprintf(p, sizeof p, "%s/config", dir);
	FILE *f = fopen(p, "w");
	fputs(HEAD "current-context: a\nclusters:\n- name: c\n  cluster: {server: https://h, "
		   "certificate-authority: ca.crt}\ncontexts:\n- name: a\n  context: {cluster: c}\n", f);
	fclose(f);
	gk_kube_config c;
	gk_err e = {0};
	cr_assert_eq(gk_kube_config_file(&c, p, NULL, &e), 0, "%s", e.msg);
	char want[320];
	snprintf(want, sizeof want, "%s/ca.crt", dir);
	cr_assert_str_eq(c.ca_file, want);
	gk_kube_config_free(&c);

	char env[700];
	snprintf(env, sizeof env, "%s/missing:%s", dir, p);
	setenv("KUBECONFIG", env, 1);
	cr_assert_eq(gk_kube_config_load(&c, NULL, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://h");
	gk_kube_config_free(&c);
	snprintf(env, sizeof env, "%s/missing", dir);
	setenv("KUBECONFIG", env, 1);
	cr_assert_eq(gk_kube_config_load(&c, NULL, &e), GK_NOT_FOUND);
	unsetenv("KUBECONFIG");
	snprintf(env, sizeof env, "%s/nope", dir);
	cr_assert_eq(gk_kube_config_load(&c, env, &e), GK_NOT_FOUND);
	cr_assert(strstr(e.msg, "nope"), "%s", e.msg);
	unlink(p);
	rmdir(dir);
}

Test(in_cluster, env_and_files)
{
	char dir[200];
	tmpdir(dir, sizeof dir);
	char p[300];
	gk_kube_config c;
	gk_err e = {0};
	unsetenv("KUBERNETES_SERVICE_HOST");
	cr_assert_eq(gk_kube_config_in_cluster(&c, dir, &e), GK_FAILED_PRECONDITION);
	cr_assert(strstr(e.msg, "KUBERNETES_SERVICE_HOST"));
	setenv("KUBERNETES_SERVICE_HOST", "fd00::10", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	cr_assert_eq(gk_kube_config_in_cluster(&c, dir, &e), GK_FAILED_PRECONDITION);
	cr_assert(strstr(e.msg, "token"), "%s", e.msg);
	snprintf(p, sizeof p, "%s/token", dir);
	fclose(fopen(p, "w"));
	cr_assert_eq(gk_kube_config_in_cluster(&c, dir, &e), GK_FAILED_PRECONDITION);
	cr_assert(strstr(e.msg, "CA"), "%s", e.msg);
	snprintf(p, sizeof p, "%s/ca.crt", dir);
	fclose(fopen(p, "w"));
	cr_assert_eq(gk_kube_config_in_cluster(&c, dir, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://[fd00::10]:443");
	cr_assert(strstr(c.token_file, "/token"));
	gk_kube_config_free(&c);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	cr_assert_eq(gk_kube_config_in_cluster(&c, dir, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://10.96.0.1:443");
	gk_kube_config_free(&c);
	setenv("KUBERNETES_SERVICE_PORT", "44x", 1);
	cr_assert_eq(gk_kube_config_in_cluster(&c, dir, &e), GK_INVALID_ARGUMENT);
	unlink(p);
	snprintf(p, sizeof p, "%s/token", dir);
	unlink(p);
	rmdir(dir);
}

/* ---- $KUBECONFIG lists (kubectl's merge) ---------------------------------- */

static void put(const char *dir, const char *name, const char *text)
{
	char p[400];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
}

Test(kubeconfig, list_merged_like_kubectl)
{
	char dir[200];
	tmpdir(dir, sizeof dir);
	char sub[300];
	snprintf(sub, sizeof sub, "%s/b", dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	/* a: current-context x, cluster c1 (first wins), user u with a relative token file */
	put(dir, "a", HEAD "current-context: x\n"
		"clusters:\n- name: c1\n  cluster: {server: https://from-a, certificate-authority: ca-a}\n"
		"contexts:\n- name: x\n  context: {cluster: c2, user: u}\n"
		"users:\n- name: u\n  user: {tokenFile: tok-a}\n");
	/* b: a second current-context (ignored), c1 again (ignored), c2 with a relative CA,
	 * context x again (ignored), user u again (ignored) */
	put(sub, "b", HEAD "current-context: y\n"
		"clusters:\n- name: c1\n  cluster: {server: https://from-b}\n"
		"- name: c2\n  cluster: {server: https://c2-from-b, certificate-authority: ca-b}\n"
		"contexts:\n- name: x\n  context: {cluster: c1, user: v}\n"
		"- name: y\n  context: {cluster: c1, user: v}\n"
		"users:\n- name: u\n  user: {token: from-b}\n- name: v\n  user: {token: tv}\n");
	char list[800], want[400];
	snprintf(list, sizeof list, "%s/missing::%s/a:%s/b", dir, dir, sub);
	gk_kube_config c;
	gk_err e = {0};
	cr_assert_eq(gk_kube_config_files(&c, list, NULL, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://c2-from-b", "context x from a, its cluster c2 from b");
	snprintf(want, sizeof want, "%s/ca-b", sub);
	cr_assert_str_eq(c.ca_file, want, "relative to the file that names it");
	snprintf(want, sizeof want, "%s/tok-a", dir);
	cr_assert_str_eq(c.token_file, want);
	cr_assert_null(c.token, "user u from a wins over b's");
	gk_kube_config_free(&c);
	/* a context of the second file; its cluster c1 is a's */
	cr_assert_eq(gk_kube_config_files(&c, list, "y", &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://from-a");
	snprintf(want, sizeof want, "%s/ca-a", dir);
	cr_assert_str_eq(c.ca_file, want);
	cr_assert_str_eq(c.token, "tv");
	gk_kube_config_free(&c);
	/* the same through $KUBECONFIG */
	setenv("KUBECONFIG", list, 1);
	cr_assert_eq(gk_kube_config_load(&c, NULL, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://c2-from-b");
	gk_kube_config_free(&c);
	/* a file of the list that exists but is broken is an error naming it */
	put(dir, "bad", "a: [unclosed\n");
	snprintf(list, sizeof list, "%s/a:%s/bad", dir, dir);
	setenv("KUBECONFIG", list, 1);
	cr_assert_eq(gk_kube_config_load(&c, NULL, &e), GK_INVALID_ARGUMENT);
	cr_assert(strstr(e.msg, "/bad"), "%s", e.msg);
	/* none exists */
	snprintf(list, sizeof list, "%s/nope1:%s/nope2", dir, dir);
	setenv("KUBECONFIG", list, 1);
	cr_assert_eq(gk_kube_config_load(&c, NULL, &e), GK_NOT_FOUND);
	cr_assert(strstr(e.msg, "nope1"), "%s", e.msg);
	unsetenv("KUBECONFIG");
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* ---- exec plugins ----------------------------------------------------------- */

#define EXEC_CTX "current-context: a\nclusters:\n- name: c\n  cluster: {server: https://h:6443, tls-server-name: api.internal}\n" \
		 "contexts:\n- name: a\n  context: {cluster: c, user: eks}\n"

Test(kubeconfig, exec_stanza_as_eks_writes_it)
{
	const char *y = HEAD EXEC_CTX
		"users:\n- name: eks\n  user:\n    exec:\n"
		"      apiVersion: client.authentication.k8s.io/v1beta1\n"
		"      command: bin/aws\n"
		"      args: [--region, eu-west-1, eks, get-token, --cluster-name, prod]\n"
		"      env:\n      - name: AWS_PROFILE\n        value: prod\n"
		"      installHint: install the AWS CLI\n"
		"      provideClusterInfo: true\n";
	gk_kube_config c;
	gk_err e = {0};
	cr_assert_eq(parse(&c, y, NULL, &e), 0, "%s", e.msg);
	cr_assert_not_null(c.exec);
	cr_assert_str_eq(c.exec->user, "eks");
	cr_assert_str_eq(c.exec->command, "/etc/kc/bin/aws", "a relative command with '/' is resolved");
	cr_assert_str_eq(c.exec->args[0], "--region");
	cr_assert_str_eq(c.exec->args[5], "prod");
	cr_assert_null(c.exec->args[6]);
	cr_assert_str_eq(c.exec->env[0], "AWS_PROFILE=prod");
	cr_assert_null(c.exec->env[1]);
	cr_assert_str_eq(c.exec->install_hint, "install the AWS CLI");
	cr_assert(c.exec->provide_cluster_info);
	/* KUBERNETES_EXEC_INFO: never interactive, the cluster when asked */
	char *info = gk_kube_exec_info(&c);
	cJSON *j = cJSON_Parse(info);
	cr_assert_not_null(j, "%s", info);
	cr_assert_str_eq(cJSON_GetObjectItem(j, "apiVersion")->valuestring, "client.authentication.k8s.io/v1beta1");
	cr_assert_str_eq(cJSON_GetObjectItem(j, "kind")->valuestring, "ExecCredential");
	cJSON *spec = cJSON_GetObjectItem(j, "spec");
	cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(spec, "interactive")));
	cJSON *cl = cJSON_GetObjectItem(spec, "cluster");
	cr_assert_str_eq(cJSON_GetObjectItem(cl, "server")->valuestring, "https://h:6443");
	cr_assert_str_eq(cJSON_GetObjectItem(cl, "tls-server-name")->valuestring, "api.internal");
	cJSON_Delete(j);
	free(info);
	gk_kube_config_free(&c);
	/* gke-gcloud-auth-plugin: v1, a command from $PATH (not resolved) */
	const char *g = HEAD EXEC_CTX
		"users:\n- name: eks\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, "
		"command: gke-gcloud-auth-plugin, interactiveMode: IfAvailable, provideClusterInfo: true}\n";
	cr_assert_eq(parse(&c, g, NULL, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.exec->command, "gke-gcloud-auth-plugin");
	cr_assert_null(c.exec->args[0]);
	gk_kube_config_free(&c);
	/* a static token wins over the plugin (client-go's precedence) */
	const char *t = HEAD EXEC_CTX
		"users:\n- name: eks\n  user:\n    token: static\n    exec: {apiVersion: client.authentication.k8s.io/v1, "
		"command: kubelogin, interactiveMode: Never}\n";
	cr_assert_eq(parse(&c, t, NULL, &e), 0, "%s", e.msg);
	cr_assert_null(c.exec);
	cr_assert_str_eq(c.token, "static");
	gk_kube_config_free(&c);
}

Test(kubeconfig, exec_refusals_name_the_user)
{
	struct bad_case cases[] = {
		{HEAD EXEC_CTX "users:\n- name: eks\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, "
		 "command: kubelogin, interactiveMode: Always}\n",
		 NULL, "user \"eks\": exec plugin \"kubelogin\" has interactiveMode Always, but gpukmm never runs interactively",
		 GK_INVALID_ARGUMENT},
		{HEAD EXEC_CTX "users:\n- name: eks\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, "
		 "command: kubelogin}\n",
		 NULL, "user \"eks\": exec interactiveMode must be set", GK_INVALID_ARGUMENT},
		{HEAD EXEC_CTX "users:\n- name: eks\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1alpha1, "
		 "command: x}\n",
		 NULL, "exec apiVersion \"client.authentication.k8s.io/v1alpha1\" is not supported", GK_INVALID_ARGUMENT},
		{HEAD EXEC_CTX "users:\n- name: eks\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1}\n",
		 NULL, "user \"eks\": exec has no command", GK_INVALID_ARGUMENT},
		{HEAD EXEC_CTX "users:\n- name: eks\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
		 "command: x, env: [{value: v}]}\n",
		 NULL, "exec env[0] needs a name", GK_INVALID_ARGUMENT},
		{HEAD EXEC_CTX "users:\n- name: eks\n  user:\n    auth-provider: {name: gcp}\n",
		 NULL, "auth-provider plugin", GK_UNIMPLEMENTED},
		{HEAD "current-context: a\nclusters:\n- name: c\n  cluster: {server: https://h, tls-server-name: 'a:b'}\n"
		 "contexts:\n- name: a\n  context: {cluster: c}\n",
		 NULL, "tls-server-name \"a:b\" is not a host name", GK_INVALID_ARGUMENT},
	};
	expect_bad(cases, sizeof cases / sizeof cases[0]);
}

Test(exec, credential_output_checked)
{
	gk_kube_exec x = {.user = "eks", .command = "aws", .api_version = "client.authentication.k8s.io/v1beta1"};
	gk_kube_cred cr;
	gk_err e = {0};
	const char *ok = "{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
			 "\"status\":{\"token\":\"k8s-aws-v1.abc\",\"expirationTimestamp\":\"2030-01-02T03:04:05Z\"}}";
	cr_assert_eq(gk_kube_exec_parse(&x, ok, strlen(ok), &cr, &e), 0, "%s", e.msg);
	cr_assert_str_eq(cr.token, "k8s-aws-v1.abc");
	cr_assert_eq(cr.expiry_ms, 1893553445000LL);
	gk_kube_cred_free(&cr);
	const char *cert = "{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
			   "\"status\":{\"clientCertificateData\":\"-----BEGIN CERTIFICATE-----\\nx\\n\","
			   "\"clientKeyData\":\"-----BEGIN PRIVATE KEY-----\\ny\\n\"}}";
	cr_assert_eq(gk_kube_exec_parse(&x, cert, strlen(cert), &cr, &e), 0, "%s", e.msg);
	cr_assert_null(cr.token);
	cr_assert_eq(cr.cert.len, strlen("-----BEGIN CERTIFICATE-----\nx\n"));
	cr_assert_eq(cr.expiry_ms, 0);
	gk_kube_cred_free(&cr);
	struct { const char *out, *want; } bad[] = {
		{"not json", "not a JSON ExecCredential"},
		{"{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"Status\"}", "kind \"Status\""},
		{"{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}",
		 "apiVersion \"client.authentication.k8s.io/v1\", the kubeconfig asks for"},
		{"{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\"}", "no status"},
		{"{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{}}",
		 "neither a token nor"},
		{"{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
		 "\"status\":{\"clientCertificateData\":\"c\"}}", "only together"},
		{"{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
		 "\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"tomorrow\"}}", "not an RFC 3339 time"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(gk_kube_exec_parse(&x, bad[i].out, strlen(bad[i].out), &cr, &e), GK_INVALID_ARGUMENT, "%zu", i);
		cr_assert(strstr(e.msg, bad[i].want), "%zu: %s", i, e.msg);
		cr_assert(strstr(e.msg, "exec plugin \"aws\" of user \"eks\""), "%zu: %s", i, e.msg);
		cr_assert_null(cr.token);
	}
}

Test(exec, rfc3339_times)
{
	cr_assert_eq(gk_kube_parse_time("1970-01-01T00:00:01Z"), 1000);
	cr_assert_eq(gk_kube_parse_time("1970-01-01T00:00:01.5Z"), 1500);
	cr_assert_eq(gk_kube_parse_time("1970-01-01T01:00:01+01:00"), 1000);
	cr_assert_eq(gk_kube_parse_time("1970-01-01T00:00:01.123456789-00:30"), 1000 + 123 + 1800000);
	cr_assert_eq(gk_kube_parse_time("1970-01-01T00:00:01"), -1);
	cr_assert_eq(gk_kube_parse_time("1970-01-01T00:00:01Zx"), -1);
	cr_assert_eq(gk_kube_parse_time(""), -1);
}
