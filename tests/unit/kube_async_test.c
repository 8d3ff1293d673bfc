/* lib/kube async calls on the mux against kubesim: every verb, error classes
 * with Status decoding and Retry-After, a slow request does not hold up a fast
 * one (the loop never blocks), the QPS limit delays without blocking, the
 * in-flight bound, cancel (no callback), 401 → token re-read → one retry,
 * async discovery updates the cache. */
#include "kubesim_proc.h"

#include "gpukmm/kube.h"
#include "gpukmm/log.h"

static ksim sim;
static gk_kube_client *kc;
static gk_kube_mux *mux;

typedef struct res {
	int calls, code;
	long http;
	int retry_after;
	char reason[64], msg[512], name[64];
	int64_t at_ms;
	int order;
} res;
static int done_order;

static void on_done(void *user, int code, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	res *r = user;
	r->calls++;
	r->code = code;
	r->http = st->http;
	r->retry_after = st->retry_after_s;
	r->at_ms = ksim_now_ms();
	r->order = ++done_order;
	snprintf(r->reason, sizeof r->reason, "%s", st->reason);
	snprintf(r->msg, sizeof r->msg, "%s", err && code ? err->msg : "");
	const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(out, "metadata"), "name");
	snprintf(r->name, sizeof r->name, "%s", cJSON_IsString(n) ? n->valuestring : "");
	cJSON_Delete(out);
}

static void pump(int ms)
{
	struct pollfd p = {gk_kube_mux_fd(mux), POLLIN, 0};
	int64_t t = gk_kube_mux_timeout_ms(mux);
	if (t < 0 || t > ms)
		t = ms;
	poll(&p, 1, (int)t);
	gk_kube_mux_run(mux);
}

#define PUMP_UNTIL(cond, ms)                                                  \
	do {                                                                  \
		int64_t _dl = ksim_now_ms() + (ms);                           \
		while (!(cond) && ksim_now_ms() < _dl)                        \
			pump(20);                                             \
		cr_assert(cond, "timed out waiting for: %s", #cond);         \
	} while (0)

static void client(const char *token_file, double qps, int burst)
{
	gk_kube_config cfg = {.server = sim.url, .token_file = (char *)token_file};
	gk_kube_opts o = {.qps = qps, .burst = burst, .timeout_ms = 10000};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, &cfg, &o, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_mux_new(&mux, kc, &e), 0, "%s", e.msg);
}

static void setup(void)
{
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_start(&sim, NULL);
	client(NULL, -1, 0);
	long code;
	free(ksim_raw(&sim, "POST", "/api/v1/namespaces",
		      "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"a\"}}", &code, NULL));
	cr_assert_eq(code, 201);
}

static void teardown(void)
{
	gk_kube_mux_free(mux);
	mux = NULL;
	gk_kube_client_free(kc);
	kc = NULL;
	ksim_cleanup(&sim);
}

static const gk_kube_ref CM = {"", "v1", "configmaps", "a", NULL, NULL};

static cJSON *cm(const char *name, const char *v)
{
	char b[256];
	snprintf(b, sizeof b, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"},"
		 "\"data\":{\"v\":\"%s\"}}", name, v);
	return cJSON_Parse(b);
}

Test(async, every_verb_and_error_class, .init = setup, .fini = teardown)
{
	gk_err e = {0};
	res r[8] = {0};
	cJSON *o = cm("one", "1");
	cr_assert_eq(gk_kube_call_create(mux, &CM, o, NULL, on_done, &r[0], NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(r[0].calls, 0, "the callback never runs inside the starting call");
	PUMP_UNTIL(r[0].calls, 5000);
	cr_assert_eq(r[0].code, 0, "%s", r[0].msg);
	cr_assert_eq(r[0].http, 201);
	cr_assert_str_eq(r[0].name, "one");
	/* create again: 409 AlreadyExists */
	cr_assert_eq(gk_kube_call_create(mux, &CM, o, NULL, on_done, &r[1], NULL, &e), 0);
	cJSON_Delete(o);
	gk_kube_ref one = CM;
	one.name = "one";
	cr_assert_eq(gk_kube_call_get(mux, &one, NULL, on_done, &r[2], NULL, &e), 0);
	cr_assert_eq(gk_kube_call_patch(mux, &one, GK_PATCH_MERGE, "{\"data\":{\"v\":\"2\"}}", NULL,
					false, NULL, on_done, &r[3], NULL, &e), 0);
	gk_kube_ref nope = CM;
	nope.name = "nope";
	cr_assert_eq(gk_kube_call_get(mux, &nope, NULL, on_done, &r[4], NULL, &e), 0);
	PUMP_UNTIL(r[1].calls && r[2].calls && r[3].calls && r[4].calls, 5000);
	cr_assert_eq(r[1].code, GK_ALREADY_EXISTS);
	cr_assert_str_eq(r[1].reason, "AlreadyExists");
	cr_assert_eq(r[2].code, 0);
	cr_assert_str_eq(r[2].name, "one");
	cr_assert_eq(r[3].code, 0, "%s", r[3].msg);
	cr_assert_eq(r[4].code, GK_NOT_FOUND);
	cr_assert_eq(r[4].http, 404);
	cr_assert(strstr(r[4].msg, "nope"), "message names the object: %s", r[4].msg);
	/* update with a stale resourceVersion: 409 Conflict → ABORTED */
	cJSON *stale = cm("one", "3");
	cJSON_AddStringToObject(cJSON_GetObjectItem(stale, "metadata"), "resourceVersion", "1");
	cr_assert_eq(gk_kube_call_update(mux, &one, stale, NULL, on_done, &r[5], NULL, &e), 0);
	cJSON_Delete(stale);
	PUMP_UNTIL(r[5].calls, 5000);
	cr_assert_eq(r[5].code, GK_ABORTED, "%s", r[5].msg);
	/* delete with a wrong uid precondition, then for real */
	gk_kube_delete_opts bad = {.uid = "not-the-uid"};
	cr_assert_eq(gk_kube_call_delete(mux, &one, &bad, NULL, on_done, &r[6], NULL, &e), 0);
	PUMP_UNTIL(r[6].calls, 5000);
	cr_assert_eq(r[6].code, GK_ABORTED, "%s", r[6].msg);
	cr_assert_eq(gk_kube_call_delete(mux, &one, NULL, NULL, on_done, &r[7], NULL, &e), 0);
	PUMP_UNTIL(r[7].calls, 5000);
	cr_assert_eq(r[7].code, 0, "%s", r[7].msg);
	cr_assert_eq(ksim_count(&sim, "delete", "configmaps"), 2);
	cr_assert_eq(gk_kube_mux_calls(mux), 0);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(r[i].calls, 1, "call %d completed once", i);
	/* invalid references fail at once, without a callback */
	gk_kube_ref bad_ref = {"", NULL, "x", NULL, NULL, NULL};
	cr_assert_eq(gk_kube_call_get(mux, &bad_ref, NULL, on_done, &r[0], NULL, &e), GK_INVALID_ARGUMENT);
	cr_assert_eq(gk_kube_call_patch(mux, &CM, GK_PATCH_MERGE, "{}", NULL, false, NULL, on_done,
					&r[0], NULL, &e), GK_INVALID_ARGUMENT);
	cr_assert_eq(gk_kube_mux_calls(mux), 0);
}

Test(async, retry_after_and_server_errors, .init = setup, .fini = teardown)
{
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"get\",\"resource\":\"configmaps\",\"rate\":1,"
			  "\"code\":429,\"retryAfter\":7},"
			  "{\"verb\":\"create\",\"resource\":\"configmaps\",\"rate\":1,\"code\":503}]}");
	gk_err e = {0};
	res r[2] = {0};
	gk_kube_ref one = CM;
	one.name = "one";
	cr_assert_eq(gk_kube_call_get(mux, &one, NULL, on_done, &r[0], NULL, &e), 0);
	cJSON *o = cm("x", "1");
	cr_assert_eq(gk_kube_call_create(mux, &CM, o, NULL, on_done, &r[1], NULL, &e), 0);
	cJSON_Delete(o);
	PUMP_UNTIL(r[0].calls && r[1].calls, 5000);
	cr_assert_eq(r[0].code, GK_RESOURCE_EXHAUSTED);
	cr_assert_eq(r[0].retry_after, 7);
	cr_assert(gk_kube_retryable(r[0].code));
	cr_assert_eq(r[1].code, GK_UNAVAILABLE);
	cr_assert(gk_kube_retryable(r[1].code));
}

Test(async, slow_request_does_not_hold_up_others, .init = setup, .fini = teardown)
{
	/* writes take 1.5 s at the server; a GET started after the write finishes
	 * first, and the loop is never blocked meanwhile */
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"create\",\"resource\":\"configmaps\",\"rate\":1,"
			  "\"latencyMs\":1500}]}");
	gk_err e = {0};
	res slow = {0}, fast = {0};
	cJSON *o = cm("slow", "1");
	int64_t t0 = ksim_now_ms();
	cr_assert_eq(gk_kube_call_create(mux, &CM, o, NULL, on_done, &slow, NULL, &e), 0);
	cJSON_Delete(o);
	gk_kube_ref ns = {"", "v1", "namespaces", NULL, "a", NULL};
	cr_assert_eq(gk_kube_call_get(mux, &ns, NULL, on_done, &fast, NULL, &e), 0);
	cr_assert_lt(ksim_now_ms() - t0, 200, "starting calls does not wait for the server");
	int64_t longest = 0;
	while (!slow.calls && ksim_now_ms() - t0 < 5000) {
		int64_t a = ksim_now_ms();
		pump(20);
		if (ksim_now_ms() - a > longest)
			longest = ksim_now_ms() - a;
	}
	cr_assert_eq(slow.calls, 1);
	cr_assert_eq(slow.code, 0, "%s", slow.msg);
	cr_assert_eq(fast.calls, 1);
	cr_assert_lt(fast.order, slow.order, "the fast GET completed first");
	cr_assert_lt(fast.at_ms - t0, 1000);
	cr_assert_geq(slow.at_ms - t0, 1400);
	cr_assert_lt(longest, 300, "one mux run took %lld ms: something blocked", (long long)longest);
}

Test(async, per_call_timeout, .init = setup, .fini = teardown)
{
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"get\",\"resource\":\"namespaces\",\"rate\":1,"
			  "\"latencyMs\":3000}]}");
	gk_err e = {0};
	res r = {0};
	gk_kube_ref ns = {"", "v1", "namespaces", NULL, "a", NULL};
	gk_kube_call_opts o = {.timeout_ms = 300};
	int64_t t0 = ksim_now_ms();
	cr_assert_eq(gk_kube_call_get(mux, &ns, &o, on_done, &r, NULL, &e), 0);
	PUMP_UNTIL(r.calls, 3000);
	cr_assert_eq(r.code, GK_DEADLINE_EXCEEDED, "%s", r.msg);
	cr_assert_lt(r.at_ms - t0, 1500);
}

Test(async, qps_limit_waits_on_the_mux, .init = NULL, .fini = teardown)
{
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_start(&sim, NULL);
	client(NULL, 10, 1); /* one at once, then one every 100 ms */
	gk_err e = {0};
	res r[5] = {0}, urgent = {0};
	gk_kube_ref ns = {"", "v1", "namespaces", NULL, "default", NULL};
	int64_t t0 = ksim_now_ms();
	for (int i = 0; i < 5; i++)
		cr_assert_eq(gk_kube_call_get(mux, &ns, NULL, on_done, &r[i], NULL, &e), 0);
	gk_kube_call_opts uo = {.unthrottled = true};
	cr_assert_eq(gk_kube_call_get(mux, &ns, &uo, on_done, &urgent, NULL, &e), 0);
	cr_assert_lt(ksim_now_ms() - t0, 50, "throttled calls wait on the mux, not in the caller");
	cr_assert_eq(gk_kube_mux_calls(mux), 6);
	PUMP_UNTIL(r[4].calls, 5000);
	cr_assert_geq(r[4].at_ms - t0, 350, "5 calls at 10/s with burst 1 take >= 400 ms");
	cr_assert_lt(urgent.at_ms - t0, 300, "an unthrottled call does not queue behind them");
	for (int i = 0; i < 5; i++)
		cr_assert_eq(r[i].code, 0);
	gk_kube_client_stats s;
	gk_kube_client_stats_get(kc, &s);
	cr_assert_gt(s.throttled_ms, 0);
}

Test(async, bounded_in_flight_and_cancel, .init = setup, .fini = teardown)
{
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"get\",\"resource\":\"namespaces\",\"rate\":1,"
			  "\"latencyMs\":400}]}");
	gk_err e = {0};
	static res r[GK_KUBE_MAX_CALLS + 1];
	memset(r, 0, sizeof r);
	gk_kube_call *calls[GK_KUBE_MAX_CALLS] = {0};
	gk_kube_ref ns = {"", "v1", "namespaces", NULL, "a", NULL};
	for (int i = 0; i < GK_KUBE_MAX_CALLS; i++)
		cr_assert_eq(gk_kube_call_get(mux, &ns, NULL, on_done, &r[i], &calls[i], &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_call_get(mux, &ns, NULL, on_done, &r[GK_KUBE_MAX_CALLS], NULL, &e),
		     GK_RESOURCE_EXHAUSTED);
	cr_assert(strstr(e.msg, "in flight"), "%s", e.msg);
	/* cancel half: never called back */
	for (int i = 0; i < GK_KUBE_MAX_CALLS; i += 2)
		gk_kube_call_cancel(calls[i]);
	cr_assert_eq(gk_kube_mux_calls(mux), GK_KUBE_MAX_CALLS / 2);
	PUMP_UNTIL(gk_kube_mux_calls(mux) == 0, 10000);
	for (int i = 0; i < GK_KUBE_MAX_CALLS; i++)
		cr_assert_eq(r[i].calls, i % 2 ? 1 : 0, "call %d", i);
	cr_assert_eq(r[GK_KUBE_MAX_CALLS].calls, 0);
	/* calls still in flight when the mux is freed: dropped, no callback, no leak */
	res late = {0};
	cr_assert_eq(gk_kube_call_get(mux, &ns, NULL, on_done, &late, NULL, &e), 0);
	gk_kube_mux_free(mux);
	mux = NULL;
	cr_assert_eq(late.calls, 0);
}

static gk_kube_call *self_call;
static void cancel_self(void *user, int code, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	gk_kube_call_cancel(self_call); /* harmless inside its own callback */
	cJSON_Delete(out);
	(*(int *)user)++;
}

Test(async, cancel_inside_own_callback, .init = setup, .fini = teardown)
{
	int n = 0;
	gk_err e = {0};
	gk_kube_ref ns = {"", "v1", "namespaces", NULL, "a", NULL};
	cr_assert_eq(gk_kube_call_get(mux, &ns, NULL, cancel_self, &n, &self_call, &e), 0);
	PUMP_UNTIL(n == 1, 5000);
	cr_assert_eq(gk_kube_mux_calls(mux), 0);
}

Test(async, token_rotation_retries_once, .init = NULL, .fini = teardown)
{
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_tmpdir(&sim);
	ksim_write(&sim, "client-token", "tok-1\n");
	char cp[512];
	ksim_path(&sim, cp, sizeof cp, "client-token");
	const char *args[] = {"--token", "tok-2", NULL};
	ksim_start(&sim, args);
	client(cp, -1, 0);
	gk_err e = {0};
	res r = {0};
	gk_kube_ref nodes = {"", "v1", "nodes", NULL, NULL, NULL};
	cr_assert_eq(gk_kube_call_get(mux, &nodes, NULL, on_done, &r, NULL, &e), 0);
	PUMP_UNTIL(r.calls, 5000);
	cr_assert_eq(r.code, GK_UNAUTHENTICATED);
	cr_assert(!strstr(r.msg, "tok-1"), "token leaked into the error: %s", r.msg);
	gk_kube_client_stats s;
	gk_kube_client_stats_get(kc, &s);
	cr_assert_eq(s.unauthorized, 2, "one 401, one retry after re-reading");
	ksim_write(&sim, "client-token", "tok-2\n");
	memset(&r, 0, sizeof r);
	cr_assert_eq(gk_kube_call_get(mux, &nodes, NULL, on_done, &r, NULL, &e), 0);
	PUMP_UNTIL(r.calls, 5000);
	cr_assert_eq(r.code, 0, "%s", r.msg);
	gk_kube_client_stats_get(kc, &s);
	cr_assert_eq(s.unauthorized, 3);
	cr_assert_eq(s.token_reloads, 1);
}

typedef struct dres { int calls, r; } dres;
static void on_disc(void *user, int r, const gk_err *err)
{
	dres *d = user;
	d->calls++;
	d->r = r;
}

Test(async, discovery, .init = setup, .fini = teardown)
{
	gk_err e = {0};
	dres a = {0}, b = {0}, c = {0};
	cr_assert_eq(gk_kube_discover_async(mux, "apps", "v1", "daemonsets", on_disc, &a, NULL, &e), 0);
	cr_assert_eq(gk_kube_discover_async(mux, "kmm.sigs.x-k8s.io", "v1beta1", "modules", on_disc, &b,
					    NULL, &e), 0);
	cr_assert_eq(gk_kube_discover_async(mux, "", "v1", "nosuchthings", on_disc, &c, NULL, &e), 0);
	PUMP_UNTIL(a.calls && b.calls && c.calls, 5000);
	cr_assert_eq(a.r, 1);
	cr_assert_eq(b.r, 0, "KMM not installed");
	cr_assert_eq(c.r, 0);
	/* the blocking lookup answers from the cache the async one filled */
	long before = ksim_count(&sim, "get", "");
	cr_assert_eq(gk_kube_discover(kc, "apps", "v1", "daemonsets", 60000, false, &e), 1);
	cr_assert_eq(ksim_count(&sim, "get", ""), before);
	/* a cancelled discovery frees its adapter (ASan: no leak) */
	gk_kube_call *k;
	cr_assert_eq(gk_kube_discover_async(mux, "apps", "v1", "daemonsets", on_disc, &a, &k, &e), 0);
	gk_kube_call_cancel(k);
	/* a lying 200 for apps/v1 (not an APIResourceList of apps/v1): an error,
	 * never "absent" */
	static const char *lies[] = { "{}", "null", "{\"kind\":\"Status\",\"code\":500}",
				      "{\"kind\":\"APIResourceList\",\"groupVersion\":\"apps/v1\",\"resou",
				      "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":[]}" };
	for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
		cJSON *f = cJSON_Parse("{\"rules\":[{\"verb\":\"discovery\",\"path\":\"/apis/apps/v1\",\"code\":200}]}");
		cJSON_AddStringToObject(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "rules"), 0), "body", lies[i]);
		char *txt = cJSON_PrintUnformatted(f);
		ksim_faults(&sim, txt);
		free(txt);
		cJSON_Delete(f);
		dres l = {0};
		cr_assert_eq(gk_kube_discover_async(mux, "apps", "v1", "daemonsets", on_disc, &l, NULL, &e), 0);
		PUMP_UNTIL(l.calls, 5000);
		cr_assert_eq(l.r, -GK_INTERNAL, "lie %zu (%s): %d", i, lies[i], l.r);
		cr_assert_lt(gk_kube_discover(kc, "apps", "v1", "daemonsets", 60000, true, &e), 0,
			     "lie %zu: a blocking re-read is an error too", i);
	}
	ksim_faults(&sim, "{}");
	cr_assert_eq(gk_kube_discover(kc, "apps", "v1", "daemonsets", 60000, true, &e), 1);
	/* unreachable server: -UNAVAILABLE */
	ksim_stop(&sim);
	dres d = {0};
	cr_assert_eq(gk_kube_discover_async(mux, "apps", "v1", "daemonsets", on_disc, &d, NULL, &e), 0);
	PUMP_UNTIL(d.calls, 5000);
	cr_assert_eq(d.r, -GK_UNAVAILABLE);
}

#include "gpukmm/loop.h"

Test(async, attached_to_a_loop, .init = NULL, .fini = teardown)
{
	/* attached, the mux needs no pumping: the loop's fd watch and the timer
	 * the mux keeps armed (here: the QPS wait of a throttled call, which only
	 * a timer can end) drive every call to completion */
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_start(&sim, NULL);
	client(NULL, 5, 1);
	gk_loop *loop;
	gk_err e = {0};
	cr_assert_eq(gk_loop_new(&loop, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_mux_attach(mux, loop, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_mux_attach(mux, loop, &e), GK_FAILED_PRECONDITION);
	res r[3] = {0};
	gk_kube_ref ns = {"", "v1", "namespaces", NULL, "default", NULL};
	for (int i = 0; i < 3; i++)
		cr_assert_eq(gk_kube_call_get(mux, &ns, NULL, on_done, &r[i], NULL, &e), 0);
	int64_t dl = ksim_now_ms() + 5000;
	while (!r[2].calls && ksim_now_ms() < dl)
		gk_loop_once(loop, 100);
	cr_assert_eq(r[2].calls, 1, "the throttled calls completed through the loop alone");
	cr_assert_eq(r[0].code + r[1].code + r[2].code, 0);
	/* freeing the mux detaches it: the loop has nothing of it left */
	gk_kube_mux_free(mux);
	mux = NULL;
	gk_loop_once(loop, 0);
	gk_loop_free(loop);
}
