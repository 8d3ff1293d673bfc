/* lib/kube config: the kubeconfig parsing matrix and in-cluster config. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
		{buf[4], NULL, "exec/auth-provider plugin", GK_UNIMPLEMENTED},
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
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		gk_kube_config c;
		gk_err e = {0};
		int rc = parse(&c, cases[i].yaml, cases[i].ctx, &e);
		cr_assert_eq(rc, cases[i].code, "case %zu: rc %d (%s)", i, rc, e.msg);
		cr_assert(strstr(e.msg, cases[i].want), "case %zu: \"%s\" lacks \"%s\"", i, e.msg,
			  cases[i].want);
		cr_assert_null(c.server, "case %zu leaves a half config", i);
	}
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
