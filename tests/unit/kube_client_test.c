/* lib/kube blocking client against kubesim: every verb, every error class,
 * pagination, status subresource, token rotation, TLS (CA file and in memory),
 * QPS limit, discovery. */
#include "kubesim_proc.h"

#include "gpukmm/kube.h"
#include "gpukmm/log.h"

static ksim sim;
static gk_kube_client *kc;

static void client_for(const char *url, const char *token_file, double qps)
{
	gk_kube_config cfg = {0};
	cfg.server = (char *)url;
	cfg.token_file = (char *)token_file;
	gk_kube_opts o = {.qps = qps, .burst = 1000, .timeout_ms = 10000};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, &cfg, &o, &e), 0, "%s", e.msg);
}

static void setup(void)
{
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_start(&sim, NULL);
	client_for(sim.url, NULL, -1);
}

static void teardown(void)
{
	gk_kube_client_free(kc);
	kc = NULL;
	ksim_cleanup(&sim);
}

static cJSON *J(const char *s)
{
	cJSON *j = cJSON_Parse(s);
	cr_assert(j, "bad JSON %s", s);
	return j;
}

static const char *meta_str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void make_ns(const char *name)
{
	char b[128];
	snprintf(b, sizeof b, "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", name);
	cJSON *o = J(b);
	gk_kube_ref r = {"", "v1", "namespaces", NULL, NULL, NULL};
	gk_err e = {0};
	cr_assert_eq(gk_kube_create(kc, &r, o, NULL, NULL, &e), 0, "%s", e.msg);
	cJSON_Delete(o);
}

Test(client, every_verb, .init = setup, .fini = teardown)
{
	gk_err e = {0};
	gk_kube_status st;
	make_ns("ops");
	gk_kube_ref r = {"", "v1", "configmaps", "ops", "cm1", NULL};
	cJSON *cm = J("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm1\"},\"data\":{\"a\":\"1\"}}");
	cJSON *out = NULL;
	cr_assert_eq(gk_kube_create(kc, &r, cm, &out, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st.http, 201);
	char *uid = strdup(meta_str(out, "uid"));
	char *rv1 = strdup(meta_str(out, "resourceVersion"));
	cJSON_Delete(out);

	/* create again: AlreadyExists */
	cr_assert_eq(gk_kube_create(kc, &r, cm, NULL, &st, &e), GK_ALREADY_EXISTS, "%s", e.msg);
	cr_assert_eq(st.http, 409);
	cr_assert_str_eq(st.reason, "AlreadyExists");

	/* get */
	cr_assert_eq(gk_kube_get(kc, &r, &out, &st, &e), 0, "%s", e.msg);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "data"), "a")->valuestring, "1");
	cJSON_Delete(out);

	/* update with the current RV, then with the stale one: Conflict */
	cJSON *upd = J("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm1\"},\"data\":{\"a\":\"2\"}}");
	cJSON_AddStringToObject(cJSON_GetObjectItem(upd, "metadata"), "resourceVersion", rv1);
	cr_assert_eq(gk_kube_update(kc, &r, upd, &out, &st, &e), 0, "%s", e.msg);
	cr_assert_str_neq(meta_str(out, "resourceVersion"), rv1);
	cJSON_Delete(out);
	cr_assert_eq(gk_kube_update(kc, &r, upd, NULL, &st, &e), GK_ABORTED, "%s", e.msg);
	cr_assert_eq(st.http, 409);
	cr_assert(gk_kube_retryable(GK_ABORTED));
	cJSON_Delete(upd);

	/* merge patch: add a label, then remove it with null */
	cr_assert_eq(gk_kube_patch(kc, &r, GK_PATCH_MERGE, "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}",
				   NULL, false, &out, &st, &e), 0, "%s", e.msg);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "metadata"), "labels"), "x")->valuestring, "y");
	cJSON_Delete(out);
	cr_assert_eq(gk_kube_patch(kc, &r, GK_PATCH_MERGE, "{\"metadata\":{\"labels\":{\"x\":null}}}",
				   NULL, false, &out, &st, &e), 0, "%s", e.msg);
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "metadata"), "labels"), "x"));
	cJSON_Delete(out);

	/* JSON patch, including a failing test op */
	cr_assert_eq(gk_kube_patch(kc, &r, GK_PATCH_JSON, "[{\"op\":\"add\",\"path\":\"/data/b\",\"value\":\"3\"}]",
				   NULL, false, &out, &st, &e), 0, "%s", e.msg);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "data"), "b")->valuestring, "3");
	cJSON_Delete(out);
	int rc = gk_kube_patch(kc, &r, GK_PATCH_JSON, "[{\"op\":\"test\",\"path\":\"/data/b\",\"value\":\"9\"}]",
			       NULL, false, NULL, &st, &e);
	cr_assert(rc == GK_INVALID_ARGUMENT || rc == GK_ABORTED, "rc %d %s", rc, e.msg);

	/* server-side apply: needs a field manager; create-or-update in one call */
	cr_assert_eq(gk_kube_patch(kc, &r, GK_PATCH_APPLY, "{}", NULL, false, NULL, &st, &e),
		     GK_INVALID_ARGUMENT);
	gk_kube_ref r2 = {"", "v1", "configmaps", "ops", "cm2", NULL};
	const char *ssa = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm2\"},\"data\":{\"k\":\"v\"}}";
	cr_assert_eq(gk_kube_patch(kc, &r2, GK_PATCH_APPLY, ssa, "gpukmm-test", true, &out, &st, &e), 0,
		     "%s", e.msg);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "data"), "k")->valuestring, "v");
	cJSON_Delete(out);

	/* delete with a wrong uid precondition: Conflict; then right one */
	gk_kube_delete_opts d = {.uid = "00000000-0000-0000-0000-000000000000", .propagation = "Background"};
	rc = gk_kube_delete(kc, &r, &d, NULL, &st, &e);
	cr_assert_eq(rc, GK_ABORTED, "rc %d %s", rc, e.msg);
	d.uid = uid;
	cr_assert_eq(gk_kube_delete(kc, &r, &d, NULL, &st, &e), 0, "%s", e.msg);

	/* gone: NotFound with the Status decoded */
	cr_assert_eq(gk_kube_get(kc, &r, NULL, &st, &e), GK_NOT_FOUND);
	cr_assert_eq(st.http, 404);
	cr_assert_str_eq(st.reason, "NotFound");
	cr_assert(strstr(st.message, "cm1"), "%s", st.message);
	cr_assert(strstr(e.msg, "NotFound"), "%s", e.msg);
	cr_assert_eq(gk_kube_delete(kc, &r, NULL, NULL, &st, &e), GK_NOT_FOUND);

	/* invalid object: 4xx INVALID_ARGUMENT */
	cJSON *bad = J("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"Bad_Name\"}}");
	gk_kube_ref r3 = {"", "v1", "configmaps", "ops", NULL, NULL};
	rc = gk_kube_create(kc, &r3, bad, NULL, &st, &e);
	cr_assert_eq(rc, GK_INVALID_ARGUMENT, "rc %d http %ld %s", rc, st.http, e.msg);
	cJSON_Delete(bad);
	free(uid);
	free(rv1);
	cJSON_Delete(cm);
}

static void count_item(void *user, const cJSON *item)
{
	(*(int *)user)++;
}

Test(client, list_paginates, .init = setup, .fini = teardown)
{
	make_ns("p");
	gk_err e = {0};
	for (int i = 0; i < 23; i++) {
		char b[160];
		snprintf(b, sizeof b, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c%02d\",\"labels\":{\"odd\":\"%s\"}}}",
			 i, i % 2 ? "yes" : "no");
		cJSON *o = J(b);
		gk_kube_ref r = {"", "v1", "configmaps", "p", NULL, NULL};
		cr_assert_eq(gk_kube_create(kc, &r, o, NULL, NULL, &e), 0, "%s", e.msg);
		cJSON_Delete(o);
	}
	gk_kube_ref r = {"", "v1", "configmaps", "p", NULL, NULL};
	gk_kube_list_opts lo = {.limit = 5};
	int n = 0;
	char rv[64] = "";
	long before = ksim_count(&sim, "list", "configmaps");
	cr_assert_eq(gk_kube_list(kc, &r, &lo, count_item, &n, rv, sizeof rv, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(n, 23);
	cr_assert_neq(rv[0], 0);
	long pages = ksim_count(&sim, "list", "configmaps") - (before < 0 ? 0 : before);
	cr_assert_eq(pages, 5, "23 items by 5 = 5 pages, got %ld", pages);
	n = 0;
	lo.label_selector = "odd=yes";
	cr_assert_eq(gk_kube_list(kc, &r, &lo, count_item, &n, NULL, 0, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(n, 11);
}

Test(client, status_subresource, .init = setup, .fini = teardown)
{
	gk_err e = {0};
	cJSON *node = J("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"spec\":{},"
			"\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.1\"}}}");
	gk_kube_ref r = {"", "v1", "nodes", NULL, "n1", NULL};
	cr_assert_eq(gk_kube_create(kc, &r, node, NULL, NULL, &e), 0, "%s", e.msg);
	cJSON_Delete(node);
	gk_kube_ref rs = {"", "v1", "nodes", NULL, "n1", "status"};
	cJSON *out;
	cr_assert_eq(gk_kube_patch(kc, &rs, GK_PATCH_MERGE, "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.8\"}}}",
				   NULL, false, &out, NULL, &e), 0, "%s", e.msg);
	cJSON_Delete(out);
	/* a status write to the main resource is ignored */
	cr_assert_eq(gk_kube_patch(kc, &r, GK_PATCH_MERGE, "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"9\"}}}",
				   NULL, false, NULL, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_get(kc, &r, &out, NULL, &e), 0);
	const cJSON *kv = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "status"), "nodeInfo"), "kernelVersion");
	cr_assert_str_eq(kv->valuestring, "6.8");
	cJSON_Delete(out);
}

Test(client, error_classes_from_faults, .init = setup, .fini = teardown)
{
	gk_err e = {0};
	gk_kube_status st;
	gk_kube_ref r = {"", "v1", "nodes", NULL, "nx", NULL};
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"get\",\"resource\":\"nodes\",\"code\":429,\"retryAfter\":3}]}");
	cr_assert_eq(gk_kube_get(kc, &r, NULL, &st, &e), GK_RESOURCE_EXHAUSTED, "%s", e.msg);
	cr_assert_eq(st.retry_after_s, 3);
	cr_assert(gk_kube_retryable(GK_RESOURCE_EXHAUSTED));
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"get\",\"resource\":\"nodes\",\"code\":503}]}");
	cr_assert_eq(gk_kube_get(kc, &r, NULL, &st, &e), GK_UNAVAILABLE, "%s", e.msg);
	cr_assert_eq(st.http, 503);
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"get\",\"resource\":\"nodes\",\"code\":500}]}");
	cr_assert_eq(gk_kube_get(kc, &r, NULL, &st, &e), GK_INTERNAL, "%s", e.msg);
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"get\",\"resource\":\"nodes\",\"code\":504}]}");
	cr_assert_eq(gk_kube_get(kc, &r, NULL, &st, &e), GK_DEADLINE_EXCEEDED, "%s", e.msg);
	ksim_faults(&sim, "{}");
	cr_assert_eq(gk_kube_get(kc, &r, NULL, &st, &e), GK_NOT_FOUND, "%s", e.msg);
	/* bad reference: no request at all */
	gk_kube_ref bad = {"", "v1", "nodes", NULL, "a/b", NULL};
	cr_assert_eq(gk_kube_get(kc, &bad, NULL, &st, &e), GK_INVALID_ARGUMENT);
	/* server gone: transport error */
	ksim_stop(&sim);
	cr_assert_eq(gk_kube_get(kc, &r, NULL, &st, &e), GK_UNAVAILABLE, "%s", e.msg);
	cr_assert_eq(st.http, 0);
}

Test(client, bounded_response, .init = setup, .fini = teardown)
{
	gk_kube_client_free(kc);
	gk_kube_config cfg = {.server = sim.url};
	gk_kube_opts o = {.qps = -1, .max_response = 300};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, &cfg, &o, &e), 0);
	cr_assert_eq(gk_kube_request(kc, "GET", "/api/v1", NULL, NULL, 0, NULL, NULL, &e),
		     GK_RESOURCE_EXHAUSTED, "%s", e.msg);
	cr_assert(strstr(e.msg, "larger than 300"), "%s", e.msg);
}

Test(client, qps_limit, .init = setup, .fini = teardown)
{
	gk_kube_client_free(kc);
	gk_kube_config cfg = {.server = sim.url};
	gk_kube_opts o = {.qps = 20, .burst = 2};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, &cfg, &o, &e), 0);
	gk_kube_ref r = {"", "v1", "nodes", NULL, NULL, NULL};
	int64_t t0 = ksim_now_ms();
	for (int i = 0; i < 8; i++)
		cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);
	int64_t dt = ksim_now_ms() - t0;
	/* 2 at once, 6 more at 20/s: at least ~300 ms */
	cr_assert_geq(dt, 250, "8 requests at qps 20 burst 2 took %lld ms", (long long)dt);
	gk_kube_client_stats s;
	gk_kube_client_stats_get(kc, &s);
	cr_assert_gt(s.throttled_ms, 0);
}

/* The blocking client: the limit stands down only when asked to, and only
 * once the server showed API Priority and Fairness. */
static uint64_t four_gets_throttled_ms(const char *const *args, bool until_apf, bool *apf)
{
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_start(&sim, args);
	gk_kube_config cfg = {.server = sim.url};
	gk_kube_opts o = {.qps = 5, .burst = 1, .qps_until_apf = until_apf};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, &cfg, &o, &e), 0);
	gk_kube_ref r = {"", "v1", "nodes", NULL, NULL, NULL};
	for (int i = 0; i < 4; i++)
		cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);
	gk_kube_client_stats s;
	gk_kube_client_stats_get(kc, &s);
	*apf = s.apf;
	return s.throttled_ms;
}

Test(client, qps_until_apf_stands_down_under_apf, .init = NULL, .fini = teardown)
{
	bool apf = false;
	cr_assert_eq(four_gets_throttled_ms(NULL, true, &apf), 0);
	cr_assert(apf);
}

Test(client, qps_until_apf_holds_without_apf, .init = NULL, .fini = teardown)
{
	const char *args[] = {"--no-apf", NULL};
	bool apf = true;
	cr_assert_geq(four_gets_throttled_ms(args, true, &apf), 300, "3 waits of up to 200 ms at 5/s");
	cr_assert(!apf);
}

Test(client, an_explicit_qps_holds_under_apf, .init = NULL, .fini = teardown)
{
	bool apf = true;
	cr_assert_geq(four_gets_throttled_ms(NULL, false, &apf), 300, "3 waits of up to 200 ms at 5/s");
	cr_assert(!apf, "not asked to watch for APF");
}

Test(client, discovery, .init = setup, .fini = teardown)
{
	gk_err e = {0};
	cr_assert_eq(gk_kube_discover(kc, "apps", "v1", "daemonsets", 0, false, &e), 1, "%s", e.msg);
	cr_assert_eq(gk_kube_discover(kc, "apps", "v1", "nosuch", 0, false, &e), 0);
	cr_assert_eq(gk_kube_discover(kc, "", "v1", "nodes", 0, false, &e), 1);
	cr_assert_eq(gk_kube_discover(kc, "kmm.sigs.x-k8s.io", "v1beta1", "modules", 0, false, &e), 0);
	/* cached: no new request within the TTL */
	long before = ksim_count(&sim, "get", "-");
	for (int i = 0; i < 5; i++)
		gk_kube_discover(kc, "kmm.sigs.x-k8s.io", "v1beta1", "modules", 60000, false, &e);
	cr_assert_eq(ksim_count(&sim, "get", "-"), before);
	/* API down: an error, not "absent" */
	ksim_stop(&sim);
	cr_assert_lt(gk_kube_discover(kc, "apps", "v1", "daemonsets", 0, true, &e), 0);
}

/* ---- token rotation ---- */

Test(client, token_rotation, .init = NULL, .fini = teardown)
{
	/* The kubelet rotated the projected token: the server (kubesim reads its
	 * token once) accepts only tok-2 while we still hold tok-1 from the file.
	 * Our cached token gets a 401, the client re-reads the file and retries
	 * once, transparently. */
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_tmpdir(&sim);
	ksim_write(&sim, "client-token", "tok-1\n");
	char cp[512];
	ksim_path(&sim, cp, sizeof cp, "client-token");
	const char *args[] = {"--token", "tok-2", NULL};
	ksim_start(&sim, args);
	client_for(sim.url, cp, -1);
	gk_err e = {0};
	gk_kube_status st;
	gk_kube_ref r = {"", "v1", "nodes", NULL, NULL, NULL};
	/* still the old token in the file: UNAUTHENTICATED after one retry */
	cr_assert_eq(gk_kube_get(kc, &r, NULL, &st, &e), GK_UNAUTHENTICATED, "%s", e.msg);
	cr_assert_eq(st.http, 401);
	cr_assert(!strstr(e.msg, "tok-1"), "token leaked into the error: %s", e.msg);
	gk_kube_client_stats s;
	gk_kube_client_stats_get(kc, &s);
	cr_assert_eq(s.unauthorized, 2, "one 401, one retry after re-reading");

	ksim_write(&sim, "client-token", "tok-2\n");
	cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);
	gk_kube_client_stats_get(kc, &s);
	cr_assert_eq(s.unauthorized, 3, "the cached token got one more 401, then the retry worked");
	cr_assert_eq(s.token_reloads, 1);
	/* and it sticks: no more 401s */
	cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);
	gk_kube_client_stats_get(kc, &s);
	cr_assert_eq(s.unauthorized, 3);
	long code = 0;
	free(ksim_raw(&sim, "GET", "/api/v1/nodes", NULL, &code, "tok-1"));
	cr_assert_eq(code, 401, "the server refuses the old token");
}

Test(client, token_refresh_period, .init = NULL, .fini = teardown)
{
	/* With a (test-short) refresh period the next request after the file
	 * changed uses the new token at once: no 401 at all. */
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_tmpdir(&sim);
	ksim_write(&sim, "client-token", "a\n");
	char cp[512];
	ksim_path(&sim, cp, sizeof cp, "client-token");
	const char *args[] = {"--token", "b", NULL};
	ksim_start(&sim, args);
	gk_kube_config cfg = {.server = sim.url, .token_file = cp};
	gk_kube_opts o = {.qps = -1, .token_refresh_ms = 1};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, &cfg, &o, &e), 0);
	ksim_write(&sim, "client-token", "b\n");
	poll(NULL, 0, 5); /* let the 1 ms refresh period pass */
	gk_kube_ref r = {"", "v1", "nodes", NULL, NULL, NULL};
	cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);
	gk_kube_client_stats s;
	gk_kube_client_stats_get(kc, &s);
	cr_assert_eq(s.unauthorized, 0, "the next request used the new token: no 401");
	cr_assert_eq(s.token_reloads, 1);
	/* an empty token file (mid-rotation) keeps the previous token */
	ksim_write(&sim, "client-token", "");
	poll(NULL, 0, 5);
	cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);
}

/* ---- TLS ---- */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	cr_assert(f, "%s", path);
	char *b = malloc(65536);
	*len = fread(b, 1, 65535, f);
	b[*len] = 0;
	fclose(f);
	return b;
}

static void make_certs(const ksim *s)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd,
		 "cd '%s' && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 "
		 "-subj /CN=test-ca >/dev/null 2>&1 && "
		 "openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 >/dev/null 2>&1 && "
		 "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > ext && "
		 "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 1 "
		 "-extfile ext >/dev/null 2>&1 && "
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt -days 1 "
		 "-subj /CN=other-ca >/dev/null 2>&1",
		 s->dir);
	cr_assert_eq(system(cmd), 0, "openssl failed");
}

Test(client, tls_ca_file_and_in_memory, .init = NULL, .fini = teardown)
{
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_tmpdir(&sim);
	make_certs(&sim);
	char crt[512], key[512], ca[512], other[512];
	ksim_path(&sim, crt, sizeof crt, "srv.crt");
	ksim_path(&sim, key, sizeof key, "srv.key");
	ksim_path(&sim, ca, sizeof ca, "ca.crt");
	ksim_path(&sim, other, sizeof other, "other.crt");
	const char *args[] = {"--tls-cert", crt, "--tls-key", key, NULL};
	ksim_start(&sim, args);
	cr_assert(!strncmp(sim.url, "https://", 8), "%s", sim.url);
	gk_kube_ref r = {"", "v1", "nodes", NULL, NULL, NULL};
	gk_err e = {0};
	gk_kube_opts o = {.qps = -1};

	/* CA file */
	gk_kube_config c1 = {.server = sim.url, .ca_file = ca};
	cr_assert_eq(gk_kube_client_new(&kc, &c1, &o, &e), 0);
	cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);
	gk_kube_client_free(kc);

	/* CA in memory (kubeconfig certificate-authority-data) */
	size_t len;
	char *pem = slurp(ca, &len);
	gk_kube_config c2 = {.server = sim.url, .ca = {(unsigned char *)pem, len}};
	cr_assert_eq(gk_kube_client_new(&kc, &c2, &o, &e), 0);
	cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);
	gk_kube_client_free(kc);
	free(pem);

	/* the wrong CA: verification fails (it is on by default) */
	gk_kube_config c3 = {.server = sim.url, .ca_file = other};
	cr_assert_eq(gk_kube_client_new(&kc, &c3, &o, &e), 0);
	cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), GK_UNAVAILABLE);
	cr_assert(strstr(e.msg, "certificate") || strstr(e.msg, "SSL"), "%s", e.msg);
	gk_kube_client_free(kc);

	/* insecure only when asked */
	gk_kube_config c4 = {.server = sim.url, .ca_file = other, .insecure = true};
	cr_assert_eq(gk_kube_client_new(&kc, &c4, &o, &e), 0);
	cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);

	/* the same through a kubeconfig with *-data */
	gk_kube_client_free(kc);
	kc = NULL;
	char yaml[16384], cmd[1024];
	snprintf(cmd, sizeof cmd, "base64 -w0 < '%s'", ca);
	FILE *p = popen(cmd, "r");
	char b64[8192] = "";
	cr_assert(fgets(b64, sizeof b64, p));
	pclose(p);
	snprintf(yaml, sizeof yaml,
		 "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n"
		 "    server: %s\n    certificate-authority-data: %s\ncontexts:\n- name: t\n  context: {cluster: c}\n",
		 sim.url, b64);
	gk_kube_config c5;
	cr_assert_eq(gk_kube_config_parse(&c5, yaml, strlen(yaml), NULL, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_client_new(&kc, &c5, &o, &e), 0);
	gk_kube_config_free(&c5);
	cr_assert_eq(gk_kube_get(kc, &r, NULL, NULL, &e), 0, "%s", e.msg);
}
