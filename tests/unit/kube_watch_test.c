/* lib/kube reflector (mux + watch) against kubesim: ordered events, resume
 * after cut streams, 410 in-stream and as HTTP status → relist with
 * synthesised DELETEs, error storms back off (counted in /kubesim/stats). */
#include "kubesim_proc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include "gpukmm/kube.h"
#include "gpukmm/log.h"

#define MAXEV 4096

typedef struct rec {
	int n;
	char type[MAXEV];
	char key[MAXEV][32];
	char val[MAXEV][16];
	int synced, errors;
	gk_kube_watch *self;
	int stop_after; /* stop from inside the callback after this many events */
} rec;

static ksim sim;
static gk_kube_client *kc;
static gk_kube_mux *mux;

static void on_event(void *user, enum gk_kube_event t, const char *key, const cJSON *obj)
{
	rec *r = user;
	if (r->n >= MAXEV)
		return;
	r->type[r->n] = t == GK_KUBE_ADDED ? 'A' : t == GK_KUBE_MODIFIED ? 'M' : 'D';
	snprintf(r->key[r->n], 32, "%s", key);
	const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "data"), "v");
	snprintf(r->val[r->n], 16, "%s", !obj ? "<synth>" : cJSON_IsString(v) ? v->valuestring : "");
	r->n++;
	if (r->stop_after && r->n == r->stop_after) {
		gk_kube_watch_stop(r->self);
		r->self = NULL;
	}
}

static void on_synced(void *user) { ((rec *)user)->synced++; }
static void on_error(void *user, int code, const char *msg) { ((rec *)user)->errors++; }

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
			pump(50);                                             \
		cr_assert(cond, "timed out waiting for: %s", #cond);         \
	} while (0)

/* The namespace "w", created through the simulator (not through kc). */
static void make_ns_w(void)
{
	long code;
	free(ksim_raw(&sim, "POST", "/api/v1/namespaces",
		      "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"w\"}}", &code, NULL));
	cr_assert_eq(code, 201);
}

static void setup(void)
{
	gk_log_set_stream(fopen("/dev/null", "w"));
	ksim_start(&sim, NULL);
	gk_kube_config cfg = {.server = sim.url};
	gk_kube_opts o = {.qps = -1};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, &cfg, &o, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_mux_new(&mux, kc, &e), 0, "%s", e.msg);
	make_ns_w();
}

static void teardown(void)
{
	gk_kube_mux_free(mux);
	gk_kube_client_free(kc);
	ksim_cleanup(&sim);
}

static void cm_put(const char *name, const char *v)
{
	char body[256];
	snprintf(body, sizeof body, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"},\"data\":{\"v\":\"%s\"}}", name, v);
	gk_kube_ref r = {"", "v1", "configmaps", "w", name, NULL};
	gk_err e = {0};
	cr_assert_eq(gk_kube_patch(kc, &r, GK_PATCH_APPLY, body, "test", true, NULL, NULL, &e), 0,
		     "put %s: %s", name, e.msg);
}

static void cm_del(const char *name)
{
	gk_kube_ref r = {"", "v1", "configmaps", "w", name, NULL};
	gk_err e = {0};
	cr_assert_eq(gk_kube_delete(kc, &r, NULL, NULL, NULL, &e), 0, "del %s: %s", name, e.msg);
}

static gk_kube_watch *start(rec *r)
{
	gk_kube_ref ref = {"", "v1", "configmaps", "w", NULL, NULL};
	gk_kube_watch_opts o = {.page_limit = 7, .seed = 1};
	gk_kube_watch_cbs cbs = {.on_event = on_event, .on_synced = on_synced, .on_error = on_error};
	gk_kube_watch *w;
	gk_err e = {0};
	cr_assert_eq(gk_kube_watch_start(&w, mux, &ref, &o, &cbs, r, &e), 0, "%s", e.msg);
	r->self = w;
	return w;
}

static int count_key(const rec *r, char type, const char *key)
{
	int n = 0;
	for (int i = 0; i < r->n; i++)
		n += r->type[i] == type && !strcmp(r->key[i], key);
	return n;
}

Test(watch, list_then_events_in_order, .init = setup, .fini = teardown)
{
	for (int i = 0; i < 20; i++) {
		char n[16];
		snprintf(n, sizeof n, "pre%02d", i);
		cm_put(n, "0");
	}
	static rec r;
	gk_kube_watch *w = start(&r);
	PUMP_UNTIL(r.synced == 1, 10000);
	cr_assert_eq(r.n, 20, "listed in pages of 7: %d", r.n);
	for (int i = 0; i < 50; i++)
		cm_put("hot", (char[]){(char)('0' + i % 10), 0});
	cm_del("pre00");
	PUMP_UNTIL(count_key(&r, 'D', "w/pre00") == 1, 10000);
	/* one ADDED then 49 MODIFIED for "hot", values in order */
	int seen = 0;
	for (int i = 0; i < r.n; i++) {
		if (strcmp(r.key[i], "w/hot"))
			continue;
		cr_assert_eq(r.type[i], seen ? 'M' : 'A');
		cr_assert_eq(r.val[i][0], '0' + seen % 10, "event %d out of order", seen);
		seen++;
	}
	cr_assert_eq(seen, 50);
	gk_kube_watch_stats st;
	gk_kube_watch_stats_get(w, &st);
	cr_assert(st.synced);
	cr_assert_eq(st.cached, 20);
	cr_assert_eq(st.relists, 1);
	gk_kube_watch_stop(w);
}

/* A paged list under a client limit of 5/s, burst 1, that stands down under
 * API Priority and Fairness: against a server showing APF the pages after the
 * first are not held back; against one without it (--no-apf) they are. */
static int64_t paged_list_throttled_ms(bool apf, bool *apf_seen)
{
	gk_log_set_stream(fopen("/dev/null", "w"));
	const char *no_apf[] = {"--no-apf", NULL};
	ksim_start(&sim, apf ? NULL : no_apf);
	make_ns_w();
	long code;
	for (int i = 0; i < 20; i++) { /* not through kc: its limit is under test */
		char b[160];
		snprintf(b, sizeof b, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c%02d\"}}", i);
		free(ksim_raw(&sim, "POST", "/api/v1/namespaces/w/configmaps", b, &code, NULL));
		cr_assert_eq(code, 201);
	}
	gk_kube_config cfg = {.server = sim.url};
	gk_kube_opts o = {.qps = 5, .burst = 1, .qps_until_apf = true};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&kc, &cfg, &o, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_mux_new(&mux, kc, &e), 0, "%s", e.msg);
	static rec r;
	memset(&r, 0, sizeof r);
	gk_kube_watch *w = start(&r); /* pages of 7: 3 pages, then the watch */
	PUMP_UNTIL(r.synced == 1, 10000);
	cr_assert_eq(r.n, 20);
	gk_kube_watch_stop(w);
	gk_kube_client_stats s;
	gk_kube_client_stats_get(kc, &s);
	*apf_seen = s.apf;
	return (int64_t)s.throttled_ms;
}

Test(watch, the_limit_stands_down_under_priority_and_fairness, .init = NULL, .fini = teardown)
{
	bool seen = false;
	int64_t ms = paged_list_throttled_ms(true, &seen);
	cr_assert(seen, "the server's X-Kubernetes-PF-* headers were seen");
	cr_assert_eq(ms, 0, "no page waited once the first response showed APF (%lld ms)", (long long)ms);
}

Test(watch, the_limit_holds_without_priority_and_fairness, .init = NULL, .fini = teardown)
{
	bool seen = true;
	int64_t ms = paged_list_throttled_ms(false, &seen);
	cr_assert(!seen);
	cr_assert_geq(ms, 300, "pages 2, 3 and the watch waited 200 ms each at 5/s (%lld ms)", (long long)ms);
}

Test(watch, resumes_after_cut_streams_without_duplicates, .init = setup, .fini = teardown)
{
	static rec r;
	ksim_faults(&sim, "{\"watch\":{\"closeAfterEvents\":3}}");
	gk_kube_watch *w = start(&r);
	PUMP_UNTIL(r.synced == 1, 10000);
	for (int i = 0; i < 30; i++) {
		char n[16];
		snprintf(n, sizeof n, "c%02d", i);
		cm_put(n, "1");
	}
	PUMP_UNTIL(r.n >= 30, 15000);
	pump(100);
	cr_assert_eq(r.n, 30, "each object exactly once: %d", r.n);
	for (int i = 0; i < 30; i++)
		cr_assert_eq(r.type[i], 'A');
	gk_kube_watch_stats st;
	gk_kube_watch_stats_get(w, &st);
	cr_assert_eq(st.relists, 1, "a cut stream resumes from the RV, no relist");
	cr_assert_geq(st.http_requests, 10, "~10 watches of 3 events: %llu", (unsigned long long)st.http_requests);
	gk_kube_watch_stop(w);
}

static void expired_then_relist(const char *faults)
{
	static rec r;
	memset(&r, 0, sizeof r);
	for (int i = 0; i < 10; i++) {
		char n[16];
		snprintf(n, sizeof n, "o%d", i);
		cm_put(n, "1");
	}
	/* every watch stream is cut after one event */
	ksim_faults(&sim, faults);
	gk_kube_watch *w = start(&r);
	PUMP_UNTIL(r.synced == 1, 10000);
	int64_t t0 = ksim_now_ms();
	while (ksim_now_ms() - t0 < 300)
		pump(50); /* the watch is open now */
	/* while nobody reads: the stream carries the first delete and ends, the
	 * rest vanish, history is compacted → the re-watch gets an in-stream 410
	 * → relist → DELETEs synthesised for o2, o3 */
	cm_del("o1");
	cm_del("o2");
	cm_del("o3");
	cm_put("o4", "2");
	cm_put("new", "1");
	long code;
	free(ksim_raw(&sim, "POST", "/kubesim/compact", NULL, &code, NULL));
	cr_assert_eq(code, 200);
	PUMP_UNTIL(r.synced == 2, 15000);
	pump(100);
	for (int i = 1; i <= 3; i++) {
		char k[16];
		snprintf(k, sizeof k, "w/o%d", i);
		cr_assert_eq(count_key(&r, 'D', k), 1, "%s deleted once (synthesised or seen)", k);
	}
	cr_assert_eq(count_key(&r, 'A', "w/new"), 1);
	cr_assert_geq(count_key(&r, 'M', "w/o4"), 1);
	int synth = 0;
	for (int i = 0; i < r.n; i++)
		synth += !strcmp(r.val[i], "<synth>");
	cr_assert_geq(synth, 2, "o2 and o3 vanished unseen: DELETEs synthesised (%d)", synth);
	gk_kube_watch_stats st;
	gk_kube_watch_stats_get(w, &st);
	cr_assert_geq(st.expired, 1);
	cr_assert_eq(st.relists, 2);
	/* cache equals the server's list */
	cr_assert_eq(st.cached, 8, "o0 o4-o9 new: %zu", st.cached);
	gk_kube_watch_stop(w);
}

Test(watch, in_stream_410_relists_and_synthesises_deletes, .init = setup, .fini = teardown)
{
	expired_then_relist("{\"watch\":{\"closeAfterEvents\":1}}");
}

Test(watch, http_410_relists, .init = setup, .fini = teardown)
{
	static rec r;
	cm_put("a", "1");
	/* every watch request fails with HTTP 410 (not in-stream) */
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"watch\",\"resource\":\"configmaps\",\"code\":410}]}");
	gk_kube_watch *w = start(&r);
	PUMP_UNTIL(r.synced >= 2, 15000);
	gk_kube_watch_stats st;
	gk_kube_watch_stats_get(w, &st);
	cr_assert_geq(st.expired, 1);
	cr_assert_eq(count_key(&r, 'A', "w/a"), 1, "a relist of unchanged objects emits nothing");
	/* 410 right after each relist: backed off, not a hot loop */
	int64_t t0 = ksim_now_ms();
	long l0 = ksim_count(&sim, "list", "configmaps");
	while (ksim_now_ms() - t0 < 2000)
		pump(100);
	long l1 = ksim_count(&sim, "list", "configmaps");
	cr_assert_leq(l1 - l0, 3, "%ld relists in 2 s", l1 - l0);
	ksim_faults(&sim, "{}");
	cm_put("c", "1");
	PUMP_UNTIL(count_key(&r, 'A', "w/c") == 1, 40000);
	gk_kube_watch_stop(w);
}

Test(watch, error_storm_backs_off, .init = setup, .fini = teardown)
{
	static rec r;
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"list\",\"resource\":\"configmaps\",\"code\":503}]}");
	gk_kube_watch *w = start(&r);
	int64_t t0 = ksim_now_ms();
	while (ksim_now_ms() - t0 < 3000)
		pump(100);
	long lists = ksim_count(&sim, "list", "configmaps");
	/* 0.8 s ×2 with jitter: at most 1 + 3 attempts in 3 s (a hot loop makes thousands) */
	cr_assert(lists >= 2 && lists <= 4, "%ld list requests in 3 s", lists);
	cr_assert_geq(r.errors, 2);
	cr_assert_eq(r.synced, 0);
	/* 429 with Retry-After: the server's delay wins over a shorter backoff */
	ksim_faults(&sim, "{}");
	PUMP_UNTIL(r.synced == 1, 40000);
	gk_kube_watch_stop(w);
}

Test(watch, retry_after_is_honoured, .init = setup, .fini = teardown)
{
	static rec r;
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"list\",\"resource\":\"configmaps\",\"code\":429,\"retryAfter\":5}]}");
	gk_kube_watch *w = start(&r);
	int64_t t0 = ksim_now_ms();
	while (ksim_now_ms() - t0 < 3000)
		pump(100);
	cr_assert_eq(ksim_count(&sim, "list", "configmaps"), 1, "Retry-After 5 s: no retry within 3 s");
	gk_kube_watch_stop(w);
}

Test(watch, garbage_free_stop_inside_callback, .init = setup, .fini = teardown)
{
	static rec r;
	r.stop_after = 3;
	for (int i = 0; i < 10; i++) {
		char n[16];
		snprintf(n, sizeof n, "s%d", i);
		cm_put(n, "1");
	}
	start(&r);
	int64_t t0 = ksim_now_ms();
	while (ksim_now_ms() - t0 < 500)
		pump(50);
	cr_assert_eq(r.n, 3, "no callback after stop");
	cr_assert_eq(r.synced, 0);
}

Test(watch, survives_server_restart_cycle, .init = setup, .fini = teardown)
{
	static rec r;
	gk_kube_watch *w = start(&r);
	PUMP_UNTIL(r.synced == 1, 10000);
	ksim_faults(&sim, "{\"watch\":{\"closeAfterEvents\":1}}");
	cm_put("x", "1");
	cm_put("y", "1");
	ksim_faults(&sim, "{\"refuseConnectionsSeconds\":1}");
	PUMP_UNTIL(count_key(&r, 'A', "w/y") == 1, 20000);
	cr_assert_eq(count_key(&r, 'A', "w/x"), 1);
	gk_kube_watch_stop(w);
}

static void lie_on_relist(const char *body)
{
	cJSON *f = cJSON_CreateObject(), *rules = cJSON_AddArrayToObject(f, "rules");
	cJSON *w410 = cJSON_CreateObject(), *lie = cJSON_CreateObject();
	cJSON_AddStringToObject(w410, "verb", "watch");
	cJSON_AddNumberToObject(w410, "code", 410);
	cJSON_AddStringToObject(lie, "verb", "list");
	cJSON_AddStringToObject(lie, "path", "/api/v1/namespaces/w/configmaps");
	cJSON_AddNumberToObject(lie, "code", 200);
	cJSON_AddStringToObject(lie, "body", body);
	cJSON_AddItemToArray(rules, w410);
	cJSON_AddItemToArray(rules, lie);
	char *txt = cJSON_PrintUnformatted(f);
	ksim_faults(&sim, txt);
	free(txt);
	cJSON_Delete(f);
}

Test(watch, a_lying_200_list_is_a_failed_list, .init = setup, .fini = teardown)
{
	/* the relist after a 410 is answered 200 with something that is not a
	 * list: an error and a backoff, never an empty cluster (no DELETE of
	 * what the cache holds); once the lists are true again, only what is
	 * really gone is deleted. (Every shape is covered by
	 * wellformed/lists_and_discovery_documents; here the live path, one
	 * fresh watch per lie so the backoff does not add up.) */
	static const char *lies[] = {
		"{}", "null",
		"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"code\":500}",
		"{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[",
		"{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[{}]}",
	};
	cm_put("a", "1");
	for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
		static rec r;
		memset(&r, 0, sizeof r);
		char b[8];
		snprintf(b, sizeof b, "b%zu", i);
		cm_put(b, "1");
		gk_kube_ref ref = {"", "v1", "configmaps", "w", NULL, NULL};
		gk_kube_watch_opts o = {.page_limit = 7, .seed = 1, .min_timeout_s = 1, .max_timeout_s = 1};
		gk_kube_watch_cbs cbs = {.on_event = on_event, .on_synced = on_synced, .on_error = on_error};
		gk_kube_watch *w;
		gk_err e = {0};
		cr_assert_eq(gk_kube_watch_start(&w, mux, &ref, &o, &cbs, &r, &e), 0, "%s", e.msg);
		PUMP_UNTIL(r.synced == 1, 10000);
		cm_del(b); /* really gone while the lists lie */
		lie_on_relist(lies[i]);
		gk_kube_watch_stats st;
		PUMP_UNTIL((gk_kube_watch_stats_get(w, &st), st.bad_lists >= 1), 20000);
		cr_assert_not(st.current, "lie %zu: the cache is not current", i);
		cr_assert_eq(count_key(&r, 'D', "w/a"), 0, "lie %zu (%s) read as an absence", i, lies[i]);
		ksim_faults(&sim, "{}");
		PUMP_UNTIL(r.synced == 2 || count_key(&r, 'D', b) == 1, 20000);
		PUMP_UNTIL(r.synced == 2, 20000);
		cr_assert_eq(count_key(&r, 'D', "w/a"), 0, "lie %zu: a is still there", i);
		char k[16];
		snprintf(k, sizeof k, "w/%s", b);
		cr_assert_eq(count_key(&r, 'D', k), 1, "lie %zu: %s, really deleted, is deleted once", i, b);
		gk_kube_watch_stats_get(w, &st);
		cr_assert(st.current);
		cr_assert_eq(st.cached, 1);
		gk_kube_watch_stop(w);
	}
}

static int resumed_n;
static void on_resumed(void *user) { resumed_n++; }

Test(watch, a_failed_watch_resumes_and_says_so, .init = setup, .fini = teardown)
{
	/* 503 on the watch requests: the cache is not current (on_error); once a
	 * watch from the same resourceVersion is open again, on_resumed — no
	 * relist, the changes made meanwhile arrive through the resumed watch */
	static rec r;
	resumed_n = 0;
	gk_kube_ref ref = {"", "v1", "configmaps", "w", NULL, NULL};
	gk_kube_watch_opts o = {.seed = 1, .min_timeout_s = 1, .max_timeout_s = 1};
	gk_kube_watch_cbs cbs = {.on_event = on_event, .on_synced = on_synced, .on_error = on_error,
				 .on_resumed = on_resumed};
	gk_kube_watch *w;
	gk_err e = {0};
	cr_assert_eq(gk_kube_watch_start(&w, mux, &ref, &o, &cbs, &r, &e), 0, "%s", e.msg);
	PUMP_UNTIL(r.synced == 1, 10000);
	ksim_faults(&sim, "{\"rules\":[{\"verb\":\"watch\",\"code\":503}]}");
	PUMP_UNTIL(r.errors >= 1, 10000);
	gk_kube_watch_stats st;
	gk_kube_watch_stats_get(w, &st);
	cr_assert_not(st.current);
	cm_put("late", "1");
	ksim_faults(&sim, "{}");
	PUMP_UNTIL(resumed_n == 1 && count_key(&r, 'A', "w/late") == 1, 20000);
	gk_kube_watch_stats_get(w, &st);
	cr_assert(st.current);
	cr_assert_eq(r.synced, 1, "resumed, not relisted");
	gk_kube_watch_stop(w);
}

Test(wellformed, lists_and_discovery_documents)
{
	static const struct { const char *j; int ok; } lists[] = {
		{"{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}", 1},
		{"{\"metadata\":{\"resourceVersion\":\"5\",\"continue\":\"x\"},\"items\":[{\"metadata\":{\"name\":\"a\"}}]}", 1},
		{"{}", 0}, {"null", 0}, {"[]", 0},
		{"{\"kind\":\"Status\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}", 0},
		{"{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":null}", 0},
		{"{\"metadata\":{\"resourceVersion\":\"\"},\"items\":[]}", 0},
		{"{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{\"metadata\":{}}]}", 0},
		{"{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[3]}", 0},
		{"{\"apiVersion\":\"apps/v1\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}", 0},
		{"{\"metadata\":{\"resourceVersion\":\"5\",\"continue\":1},\"items\":[]}", 0},
	};
	for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
		cJSON *j = cJSON_Parse(lists[i].j);
		gk_err e = {0};
		int rc = gk_kube_check_list(j, "", "v1", &e);
		cr_assert_eq(rc == 0, lists[i].ok, "%s: %s", lists[i].j, e.msg);
		if (!lists[i].ok)
			cr_assert(strstr(e.msg, "not a list"), "%s", e.msg);
		cJSON_Delete(j);
	}
	static const struct { const char *j; int ok; } docs[] = {
		{"{\"kind\":\"APIResourceList\",\"groupVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"resources\":[{\"name\":\"modules\"}]}", 1},
		{"{\"groupVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"resources\":[]}", 1},
		{"{}", 0}, {"null", 0},
		{"{\"kind\":\"Status\",\"groupVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"resources\":[]}", 0},
		{"{\"groupVersion\":\"kmm.sigs.x-k8s.io/v1\",\"resources\":[]}", 0},
		{"{\"groupVersion\":\"kmm.sigs.x-k8s.io/v1beta1\"}", 0},
		{"{\"groupVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"resources\":[{}]}", 0},
	};
	for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
		cJSON *j = cJSON_Parse(docs[i].j);
		gk_err e = {0};
		int rc = gk_kube_check_resource_list(j, "kmm.sigs.x-k8s.io", "v1beta1", &e);
		cr_assert_eq(rc == 0, docs[i].ok, "%s: %s", docs[i].j, e.msg);
		cJSON_Delete(j);
	}
}

/* ---- a canned watch stream (what kubesim never sends: a garbage line) ---- */

typedef struct canned {
	int lfd;
	const char *body;
	const char *body2;   /* for the second and later connections (NULL = body) */
	int max_conns;       /* connections to serve (0 = 1) */
	int hold_ms;         /* after the body: keep the connection open and silent */
	bool keepalive;      /* answer every request of a connection (Content-Length) */
	_Atomic int accepts;
	_Atomic int64_t second_accept_ms;
	char request[4096];  /* the first request line */
} canned;

/* Reads one request's headers; false at EOF. Keeps the first request line. */
static bool read_request(canned *c, int fd)
{
	char req[4096];
	size_t n = 0;
	ssize_t r;
	while (n < sizeof req - 1 && (r = read(fd, req + n, sizeof req - 1 - n)) > 0) {
		n += (size_t)r;
		req[n] = 0;
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	if (n == 0)
		return false;
	req[n] = 0;
	char *eol = strstr(req, "\r\n");
	if (eol)
		*eol = 0;
	if (!c->request[0])
		memcpy(c->request, req, strlen(req) + 1);
	return true;
}

static void *serve(void *arg)
{
	canned *c = arg;
	for (int k = 0; k < (c->max_conns ? c->max_conns : 1); k++) {
		struct pollfd lp = {c->lfd, POLLIN, 0};
		if (poll(&lp, 1, 10000) <= 0)
			break;
		int fd = accept(c->lfd, NULL, NULL);
		if (fd < 0)
			break;
		if (++c->accepts == 2)
			c->second_accept_ms = ksim_now_ms();
		char hdr[256];
		bool ok = true;
		const char *body = c->accepts >= 2 && c->body2 ? c->body2 : c->body;
		while (ok && read_request(c, fd)) {
			if (c->keepalive)
				snprintf(hdr, sizeof hdr, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
					 "Content-Length: %zu\r\n\r\n", strlen(body));
			else
				snprintf(hdr, sizeof hdr, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
					 "Connection: close\r\n\r\n");
			/* MSG_NOSIGNAL: a client already gone must not SIGPIPE the test */
			ok = send(fd, hdr, strlen(hdr), MSG_NOSIGNAL) >= 0 &&
			     send(fd, body, strlen(body), MSG_NOSIGNAL) >= 0;
			if (!c->keepalive)
				break;
		}
		if (c->hold_ms) {
			struct pollfd p = {fd, POLLIN, 0};
			poll(&p, 1, c->hold_ms); /* until the client gives up, or hold_ms */
		}
		close(fd);
	}
	return NULL;
}

/* A loopback listener served by a thread; *url receives its address. */
static pthread_t canned_start(canned *c, char *url, size_t cap)
{
	c->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	cr_assert_eq(bind(c->lfd, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(listen(c->lfd, 4), 0);
	cr_assert_eq(getsockname(c->lfd, (struct sockaddr *)&a, &al), 0);
	snprintf(url, cap, "http://127.0.0.1:%d", ntohs(a.sin_port));
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, serve, c), 0);
	return th;
}

/* A client, a mux and a watch of w/configmaps against a canned server. */
typedef struct canned_client {
	gk_kube_client *kc;
	gk_kube_mux *mux;
	gk_kube_watch *w;
} canned_client;

static void canned_watch(canned_client *cl, const char *url, const gk_kube_watch_opts *o, rec *r)
{
	gk_kube_config cfg = {.server = (char *)url};
	gk_kube_opts ko = {.qps = -1};
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&cl->kc, &cfg, &ko, &e), 0, "%s", e.msg);
	cr_assert_eq(gk_kube_mux_new(&cl->mux, cl->kc, &e), 0, "%s", e.msg);
	gk_kube_ref ref = {"", "v1", "configmaps", "w", NULL, NULL};
	gk_kube_watch_cbs cbs = {.on_event = on_event, .on_synced = on_synced, .on_error = on_error};
	cr_assert_eq(gk_kube_watch_start(&cl->w, cl->mux, &ref, o, &cbs, r, &e), 0, "%s", e.msg);
}

static void canned_pump(canned_client *cl)
{
	struct pollfd p = {gk_kube_mux_fd(cl->mux), POLLIN, 0};
	poll(&p, 1, 50);
	gk_kube_mux_run(cl->mux);
}

static void canned_client_free(canned_client *cl)
{
	gk_kube_watch_stop(cl->w);
	gk_kube_mux_free(cl->mux);
	gk_kube_client_free(cl->kc);
}

#define CEV(t, n, rv) "{\"type\":\"" t "\",\"object\":{\"metadata\":{\"name\":\"" n "\",\"namespace\":\"w\"," \
		      "\"resourceVersion\":\"" rv "\"},\"data\":{\"v\":\"" n "\"}}}\n"

static void quiet(void) { gk_log_set_stream(fopen("/dev/null", "w")); }

Test(watch, garbage_line_bookmark_and_query_from_a_canned_stream, .init = quiet)
{
	/* a stream with a garbage line, a BOOKMARK and a split last event: the
	 * events of the stream are applied, the bookmark moves the
	 * resourceVersion without an event, and the garbage line is counted and
	 * makes the watch give the stream up and relist (it may have been an
	 * event): the next request is a list, which here answers a list without
	 * "a" → "a" is deleted, "b" (same resourceVersion) is not repeated. The
	 * request asks for bookmarks and a timeoutSeconds inside the range. */
	static canned c;
	c.body = CEV("ADDED", "a", "11") "this is not json {\n" CEV("MODIFIED", "a", "12")
		"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"40\"}}}\n"
		CEV("ADDED", "b", "41");
	c.body2 = "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"50\"},"
		  "\"items\":[{\"metadata\":{\"name\":\"b\",\"namespace\":\"w\",\"resourceVersion\":\"41\"}}]}";
	c.max_conns = 2;
	char url[64];
	pthread_t th = canned_start(&c, url, sizeof url);
	static rec r;
	gk_kube_watch_opts o = {.start_resource_version = "10", .min_timeout_s = 301, .max_timeout_s = 302, .seed = 1};
	canned_client cl;
	canned_watch(&cl, url, &o, &r);
	int64_t dl = ksim_now_ms() + 15000;
	while (r.synced < 1 && ksim_now_ms() < dl)
		canned_pump(&cl);
	cr_assert_eq(r.synced, 1, "relisted after the garbage line");
	cr_assert_eq(r.n, 4, "a, a, b, then the relist's DELETE of a: %d", r.n);
	cr_assert_str_eq(r.key[2], "w/b");
	cr_assert_eq(r.type[1], 'M');
	cr_assert_eq(r.type[3], 'D');
	cr_assert_str_eq(r.key[3], "w/a");
	cr_assert_geq(r.errors, 1, "the unreadable line is reported");
	gk_kube_watch_stats st;
	gk_kube_watch_stats_get(cl.w, &st);
	cr_assert_eq(st.bad_docs, 1, "the garbage line is counted: %llu", (unsigned long long)st.bad_docs);
	cr_assert_eq(st.bookmarks, 1);
	cr_assert_eq(st.cached, 1);
	pthread_join(th, NULL);
	cr_assert(strstr(c.request, "GET /api/v1/namespaces/w/configmaps?"), "%s", c.request);
	cr_assert(strstr(c.request, "watch=1"), "%s", c.request);
	cr_assert(strstr(c.request, "resourceVersion=10"), "%s", c.request);
	cr_assert(strstr(c.request, "allowWatchBookmarks=true"), "%s", c.request);
	cr_assert(strstr(c.request, "timeoutSeconds=301") || strstr(c.request, "timeoutSeconds=302"),
		  "%s", c.request);
	canned_client_free(&cl);
	close(c.lfd);
}

Test(watch, unreadable_events_relist_instead_of_being_skipped, .init = quiet)
{
	/* each of these may have been an event we would miss: the stream is
	 * given up and the kind relisted, never skipped */
	static const char *bad[] = {
		"{\"type\":\"ADDED\"}\n",
		"{\"type\":\"ADDED\",\"object\":\"x\"}\n",
		"{\"type\":\"ADDDED\",\"object\":{\"metadata\":{\"name\":\"z\"}}}\n",
		"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"13\"}}}\n",
		"{\"object\":{\"metadata\":{\"name\":\"z\"}}}\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		static canned c;
		static char body[512];
		memset(&c, 0, sizeof c);
		snprintf(body, sizeof body, "%s%s%s", CEV("ADDED", "a", "11"), bad[i], CEV("ADDED", "b", "14"));
		c.body = body;
		c.body2 = "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"50\"},\"items\":[]}";
		c.max_conns = 2;
		char url[64];
		pthread_t th = canned_start(&c, url, sizeof url);
		static rec r;
		memset(&r, 0, sizeof r);
		gk_kube_watch_opts o = {.start_resource_version = "10", .seed = 1};
		canned_client cl;
		canned_watch(&cl, url, &o, &r);
		int64_t dl = ksim_now_ms() + 15000;
		while (r.synced < 1 && ksim_now_ms() < dl)
			canned_pump(&cl);
		cr_assert_eq(r.synced, 1, "case %zu: relisted", i);
		cr_assert_geq(r.errors, 1, "case %zu: reported", i);
		cr_assert_eq(count_key(&r, 'A', "w/b"), 0, "case %zu: the stream was given up at the bad document", i);
		cr_assert_eq(count_key(&r, 'D', "w/a"), 1, "case %zu: the relist is the truth", i);
		canned_client_free(&cl);
		pthread_join(th, NULL);
		close(c.lfd);
	}
}

Test(watch, a_silent_stream_is_cut_by_the_low_speed_limit, .init = quiet)
{
	/* a peer that stops sending (dead node, broken NAT) without closing: the
	 * watch gives up after low_speed_s and starts a new one, long before the
	 * server would have closed the stream */
	static canned c;
	c.body = CEV("ADDED", "a", "11");
	c.max_conns = 2;
	c.hold_ms = 20000;
	char url[64];
	pthread_t th = canned_start(&c, url, sizeof url);
	static rec r;
	gk_kube_watch_opts o = {.start_resource_version = "10", .low_speed_s = 1, .seed = 1};
	canned_client cl;
	int64_t t0 = ksim_now_ms();
	canned_watch(&cl, url, &o, &r);
	while (c.accepts < 2 && ksim_now_ms() - t0 < 25000)
		canned_pump(&cl);
	cr_assert_eq(c.accepts, 2, "a second watch was started");
	cr_assert_geq(r.n, 1);
	cr_assert_geq(r.errors, 1, "the silent stream is reported as a failure");
	/* curl averages the speed over ~5 s: a 1 s limit cuts after ~6 s */
	cr_assert_lt(c.second_accept_ms - t0, 15000, "restarted after %lld ms: not by the low-speed limit",
		     (long long)(c.second_accept_ms - t0));
	canned_client_free(&cl);
	pthread_join(th, NULL);
	close(c.lfd);
}

Test(client_conn, requests_reuse_one_connection, .init = quiet)
{
	/* the server answers on the first connection only: a client that opened
	 * a new connection per request would wait for an answer that never comes */
	static canned c;
	c.body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\",\"namespace\":\"w\"}}";
	c.keepalive = true;
	char url[64];
	pthread_t th = canned_start(&c, url, sizeof url);
	gk_kube_config cfg = {.server = url};
	gk_kube_opts ko = {.qps = -1, .timeout_ms = 3000};
	gk_kube_client *cc;
	gk_err e = {0};
	cr_assert_eq(gk_kube_client_new(&cc, &cfg, &ko, &e), 0, "%s", e.msg);
	gk_kube_ref ref = {"", "v1", "configmaps", "w", "x", NULL};
	for (int i = 0; i < 3; i++) {
		cJSON *out = NULL;
		cr_assert_eq(gk_kube_get(cc, &ref, &out, NULL, &e), 0, "request %d: %s", i, e.msg);
		cJSON_Delete(out);
	}
	cr_assert_eq(c.accepts, 1);
	gk_kube_client_free(cc);
	pthread_join(th, NULL);
	close(c.lfd);
}
