/* lib/kube pure parts: watch framing, relist diff, paths, Status decoding,
 * token bucket and backoff. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "../../lib/kube/jparse.h"

typedef struct sink {
	char names[64][32];
	int n;
	int stop_at; /* stop after this many docs (0 = never) */
} sink;

static int collect(void *user, const cJSON *doc)
{
	sink *s = user;
	const cJSON *o = cJSON_GetObjectItem(doc, "object");
	const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "name");
	if (s->n < 64)
		snprintf(s->names[s->n++], 32, "%s", cJSON_IsString(n) ? n->valuestring : "?");
	return s->stop_at && s->n >= s->stop_at;
}

static void quiet(void)
{
	gk_log_set_stream(fopen("/dev/null", "w"));
}

#define EV(n) "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"" n "\",\"x\":\"a}\\\"{b\"}}}\n"

static const char stream3[] = EV("a") EV("b") EV("c");

Test(framer, every_chunking_of_a_stream, .init = quiet)
{
	size_t len = strlen(stream3);
	/* split at every pair of boundaries: every chunking into <= 3 pieces */
	for (size_t i = 0; i <= len; i++) {
		for (size_t j = i; j <= len; j++) {
			gk_kube_framer *f = gk_kube_framer_new(0);
			sink s = {0};
			cr_assert_eq(gk_kube_framer_feed(f, stream3, i, collect, &s), 0);
			cr_assert_eq(gk_kube_framer_feed(f, stream3 + i, j - i, collect, &s), 0);
			cr_assert_eq(gk_kube_framer_feed(f, stream3 + j, len - j, collect, &s), 0);
			cr_assert_eq(s.n, 3, "split %zu/%zu gave %d docs", i, j, s.n);
			cr_assert_str_eq(s.names[0], "a");
			cr_assert_str_eq(s.names[2], "c");
			cr_assert_eq(gk_kube_framer_bad(f), 0);
			gk_kube_framer_free(f);
		}
	}
}

Test(framer, byte_by_byte, .init = quiet)
{
	gk_kube_framer *f = gk_kube_framer_new(0);
	sink s = {0};
	for (size_t i = 0; stream3[i]; i++)
		cr_assert_eq(gk_kube_framer_feed(f, stream3 + i, 1, collect, &s), 0);
	cr_assert_eq(s.n, 3);
	gk_kube_framer_free(f);
}

Test(framer, documents_without_newlines_and_crlf, .init = quiet)
{
	const char *in = "{\"object\":{\"metadata\":{\"name\":\"a\"}}}{\"object\":{\"metadata\":"
			 "{\"name\":\"b\"}}}\r\n  {\"object\":{\"metadata\":{\"name\":\"c\"}}}";
	gk_kube_framer *f = gk_kube_framer_new(0);
	sink s = {0};
	gk_kube_framer_feed(f, in, strlen(in), collect, &s);
	cr_assert_eq(s.n, 3);
	gk_kube_framer_finish(f);
	cr_assert_eq(gk_kube_framer_bad(f), 0);
	gk_kube_framer_free(f);
}

Test(framer, garbage_lines_are_skipped_and_counted, .init = quiet)
{
	const char *in = EV("a") "garbage here {\"not\":1}\n" "{\"type\":\"ADDED\",\"object\":{bad json}}\n"
		"{\"type\":\"ADDED\",\"object\":{\"open\":\n" "]]]\n" EV("b")
		"{\"s\":\"newline in\nstring\"}\n" EV("c");
	gk_kube_framer *f = gk_kube_framer_new(0);
	sink s = {0};
	cr_assert_eq(gk_kube_framer_feed(f, in, strlen(in), collect, &s), 0);
	cr_assert_eq(s.n, 3, "got %d", s.n);
	cr_assert_str_eq(s.names[1], "b");
	cr_assert_str_eq(s.names[2], "c");
	cr_assert_eq(gk_kube_framer_bad(f), 6, "bad %llu", (unsigned long long)gk_kube_framer_bad(f));
	cr_assert_eq(gk_kube_framer_docs(f), 3);
	gk_kube_framer_free(f);
}

Test(framer, truncated_tail_counted_at_finish, .init = quiet)
{
	gk_kube_framer *f = gk_kube_framer_new(0);
	sink s = {0};
	const char *in = EV("a") "{\"type\":\"ADD";
	gk_kube_framer_feed(f, in, strlen(in), collect, &s);
	cr_assert_eq(s.n, 1);
	gk_kube_framer_finish(f);
	cr_assert_eq(gk_kube_framer_bad(f), 1);
	/* usable again after finish */
	gk_kube_framer_feed(f, EV("z"), strlen(EV("z")), collect, &s);
	cr_assert_eq(s.n, 2);
	gk_kube_framer_free(f);
}

Test(framer, oversized_document_is_an_error, .init = quiet)
{
	gk_kube_framer *f = gk_kube_framer_new(64);
	sink s = {0};
	char big[200];
	memset(big, 'x', sizeof big);
	cr_assert_eq(gk_kube_framer_feed(f, "{\"a\":\"", 6, collect, &s), 0);
	cr_assert_eq(gk_kube_framer_feed(f, big, sizeof big, collect, &s), GK_RESOURCE_EXHAUSTED);
	/* then it starts clean */
	cr_assert_eq(gk_kube_framer_feed(f, EV("q"), strlen(EV("q")), collect, &s), 0);
	cr_assert_eq(s.n, 1);
	gk_kube_framer_free(f);
}

Test(framer, callback_can_stop_the_stream, .init = quiet)
{
	gk_kube_framer *f = gk_kube_framer_new(0);
	sink s = {.stop_at = 2};
	cr_assert_eq(gk_kube_framer_feed(f, stream3, strlen(stream3), collect, &s), GK_CANCELLED);
	cr_assert_eq(s.n, 2);
	gk_kube_framer_free(f);
}

Test(framer, many_documents_linear, .init = quiet)
{
	/* 200k small docs fed in 1000-byte chunks: would take ages if O(n^2) */
	size_t one = strlen(EV("n")), total = one * 200000;
	char *in = malloc(total);
	cr_assert(in);
	for (size_t i = 0; i < 200000; i++)
		memcpy(in + i * one, EV("n"), one);
	gk_kube_framer *f = gk_kube_framer_new(0);
	sink s = {0};
	for (size_t off = 0; off < total; off += 1000)
		gk_kube_framer_feed(f, in + off, off + 1000 > total ? total - off : 1000, collect, &s);
	cr_assert_eq(gk_kube_framer_docs(f), 200000);
	gk_kube_framer_free(f);
	free(in);
}

typedef struct same_sink {
	const char *want;
	int n, same;
} same_sink;

static int compare_doc(void *user, const cJSON *doc)
{
	same_sink *s = user;
	char *got = cJSON_PrintUnformatted(doc);
	s->n++;
	s->same += got && !strcmp(got, s->want);
	free(got);
	return 0;
}

Test(framer, a_watch_event_fed_every_way_gives_the_same_tree, .init = quiet)
{
	/* the fast path (whole line in the chunk), the scanner (split documents)
	 * and a last document without its newline all hand over cJSON's tree */
	const char *ev = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"n\\u00e9\\ud83d\\ude00\","
			 "\"labels\":{\"a\":\"x\\\"y\\\\z\\n}{\",\"e\":\"\"}},\"spec\":{\"taints\":[],"
			 "\"n\":[-1.5e3,0,12345678901,true,false,null,{}]}}}";
	cJSON *want = cJSON_Parse(ev);
	cr_assert(want);
	char *want_s = cJSON_PrintUnformatted(want);
	char in[1024];
	snprintf(in, sizeof in, "%s\n%s", ev, ev);
	size_t len = strlen(in);
	for (size_t cut = 0; cut <= len; cut++) {
		gk_kube_framer *f = gk_kube_framer_new(0);
		same_sink s = {want_s, 0, 0};
		cr_assert_eq(gk_kube_framer_feed(f, in, cut, compare_doc, &s), 0);
		cr_assert_eq(gk_kube_framer_feed(f, in + cut, len - cut, compare_doc, &s), 0);
		cr_assert_eq(s.n, 2, "cut %zu: %d docs", cut, s.n);
		cr_assert_eq(s.same, 2, "cut %zu: a different tree", cut);
		cr_assert_eq(gk_kube_framer_bad(f), 0);
		gk_kube_framer_free(f);
	}
	cJSON_Delete(want);
	free(want_s);
}

/* jparse.c builds the same tree as cJSON_Parse, and refuses what it refuses */
Test(jparse, same_trees_as_cjson)
{
	static const char *ok[] = {
		"{}", "[]", "{\"a\":[]}", " {\"a\" : 1 , \"b\":[1,2, 3]}\t",
		"{\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20ac\\ud83d\\ude00\"}",
		"{\"n\":[0,-0,1.25,-3e-2,1E+3,2147483648,-2147483649,1e308]}",
		"{\"t\":true,\"f\":false,\"z\":null,\"o\":{\"p\":{\"q\":[{}]}}}",
		"{\"dup\":1,\"dup\":2}", "\"just a string\"", "42", "{\"raw\":\"tab\tin string\"}",
	};
	gk_jarena a = {0};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		cJSON *c = cJSON_Parse(ok[i]);
		size_t used = 0;
		const cJSON *j = gk_jparse(&a, ok[i], strlen(ok[i]), &used);
		cr_assert(c, "cJSON refuses %s", ok[i]);
		cr_assert(j, "jparse refuses %s", ok[i]);
		char *cs = cJSON_PrintUnformatted(c), *js = cJSON_PrintUnformatted(j);
		cr_assert_str_eq(js, cs, "%s", ok[i]);
		cJSON *d = cJSON_Duplicate(j, true); /* an arena tree copies out fine */
		if (!strstr(ok[i], "dup")) { /* cJSON_Compare cannot tell duplicate keys apart */
			cr_assert(cJSON_Compare(c, j, true), "%s", ok[i]);
			cr_assert(cJSON_Compare(c, d, true));
		}
		cJSON_Delete(d);
		free(cs);
		free(js);
		cJSON_Delete(c);
		gk_jarena_reset(&a);
	}
	static const char *bad[] = {
		"", "{", "{\"a\":}", "{\"a\" 1}", "{\"a\":1,}", "[1,]", "{a:1}", "{\"a\":tru}",
		"{\"a\":\"\\x\"}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}", "{\"a\":\"\\u12\"}",
		"{\"a\":\"open}", "{\"a\":-}", "{\"a\":[1 2]}", "}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		cr_assert_null(cJSON_Parse(bad[i]), "cJSON accepts %s", bad[i]);
		cr_assert_null(gk_jparse(&a, bad[i], strlen(bad[i]), NULL), "jparse accepts %s", bad[i]);
		gk_jarena_reset(&a);
	}
	/* nesting limit as cJSON's (1000) */
	char deep[2100];
	for (int d = 999; d <= 1001; d++) {
		memset(deep, '[', (size_t)d);
		memset(deep + d, ']', (size_t)d);
		deep[2 * d] = 0;
		cJSON *c = cJSON_Parse(deep);
		const cJSON *j = gk_jparse(&a, deep, strlen(deep), NULL);
		cr_assert_eq(c != NULL, j != NULL, "depth %d", d);
		cJSON_Delete(c);
		gk_jarena_reset(&a);
	}
	/* only len bytes are read; *used ends at the value */
	size_t used;
	cr_assert(gk_jparse(&a, "{\"a\":1}{\"b\"", 7, &used));
	cr_assert_eq(used, 7);
	cr_assert_null(gk_jparse(&a, "{\"a\":12}", 6, NULL));
	gk_jarena_free(&a);
}

Test(jparse, big_documents_span_blocks)
{
	/* a list page: many objects, far beyond one arena block */
	size_t n = 20000, cap = n * 40 + 64, len = 0;
	char *s = malloc(cap);
	cr_assert(s);
	len += (size_t)sprintf(s + len, "{\"items\":[");
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(s + len, "%s{\"metadata\":{\"name\":\"o%zu\"}}", i ? "," : "", i);
	len += (size_t)sprintf(s + len, "]}");
	gk_jarena a = {0};
	for (int round = 0; round < 2; round++) {
		const cJSON *j = gk_jparse(&a, s, len, NULL);
		cr_assert(j);
		const cJSON *items = cJSON_GetObjectItem(j, "items");
		cr_assert_eq(cJSON_GetArraySize(items), (int)n);
		const cJSON *last = cJSON_GetArrayItem(items, (int)n - 1);
		cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(last, "metadata"), "name")->valuestring,
				 "o19999");
		gk_jarena_reset(&a);
	}
	gk_jarena_free(&a);
	free(s);
}

Test(jparse, a_rewind_keeps_every_block_for_the_next_page)
{
	/* the pages of one list: each needs several blocks; after a rewind the
	 * next page is built in the blocks the last one used, none allocated */
	size_t n = 20000, cap = n * 40 + 64;
	char *s[2];
	size_t len[2];
	for (int p = 0; p < 2; p++) {
		cr_assert((s[p] = malloc(cap)));
		len[p] = (size_t)sprintf(s[p], "{\"items\":[");
		for (size_t i = 0; i < n; i++)
			len[p] += (size_t)sprintf(s[p] + len[p], "%s{\"metadata\":{\"name\":\"p%d-%zu\"}}", i ? "," : "",
						  p, i);
		len[p] += (size_t)sprintf(s[p] + len[p], "]}");
	}
	gk_jarena a = {0};
	cr_assert(gk_jparse(&a, s[0], len[0], NULL));
	gk_jblk *head = a.b;
	cr_assert(head);
	gk_jarena_rewind(&a);
	cr_assert_null(a.b);
	cr_assert(a.spare);
	const cJSON *j = gk_jparse(&a, s[1], len[1], NULL);
	cr_assert(j);
	/* the same sizes again: every spare block taken, in the order they grew,
	 * so the last one is the head of before */
	cr_assert_null(a.spare);
	cr_assert_eq(a.b, head);
	const cJSON *items = cJSON_GetObjectItem(j, "items");
	cr_assert_eq(cJSON_GetArraySize(items), (int)n);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(items, 0), "metadata"), "name")
				 ->valuestring,
			 "p1-0");
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(items, (int)n - 1), "metadata"),
					     "name")
				 ->valuestring,
			 "p1-19999");
	/* a reset after the list keeps one moderate block and no spares */
	gk_jarena_rewind(&a);
	gk_jarena_reset(&a);
	cr_assert_null(a.spare);
	cr_assert(a.b);
	gk_jarena_free(&a);
	cr_assert_null(a.b);
	cr_assert_null(a.spare);
	free(s[0]);
	free(s[1]);
}

/* ---- relist diff ---- */

static void count_key(void *user, const char *key)
{
	char *acc = user;
	strcat(acc, key);
	strcat(acc, ";");
}

Test(diff, vanished_keys)
{
	const char *old[] = {"ns/c", "ns/a", "ns/b", "x/d", "ns/a"};
	const char *cur[] = {"ns/b", "ns/e", "ns/a"};
	char acc[256] = "";
	cr_assert_eq(gk_kube_relist_gone(old, 5, cur, 3, count_key, acc), 2);
	cr_assert_str_eq(acc, "ns/c;x/d;");
	acc[0] = 0;
	cr_assert_eq(gk_kube_relist_gone(old, 5, NULL, 0, count_key, acc), 4);
	cr_assert_eq(gk_kube_relist_gone(NULL, 0, cur, 3, count_key, acc), 0);
}

Test(diff, object_keys)
{
	cJSON *o = cJSON_Parse("{\"metadata\":{\"name\":\"n1\",\"namespace\":\"ns\"}}");
	char *k = gk_kube_obj_key(o);
	cr_assert_str_eq(k, "ns/n1");
	free(k);
	cJSON_Delete(o);
	o = cJSON_Parse("{\"metadata\":{\"name\":\"node1\"}}");
	k = gk_kube_obj_key(o);
	cr_assert_str_eq(k, "node1");
	free(k);
	cJSON_Delete(o);
	o = cJSON_Parse("{\"metadata\":{\"name\":5}}");
	cr_assert_null(gk_kube_obj_key(o));
	cJSON_Delete(o);
	cr_assert_null(gk_kube_obj_key(NULL));
}

/* ---- paths ---- */

Test(path, every_shape)
{
	char b[256];
	gk_kube_ref r = {.version = "v1", .resource = "nodes"};
	cr_assert_gt(gk_kube_path(b, sizeof b, &r), 0);
	cr_assert_str_eq(b, "/api/v1/nodes");
	r = (gk_kube_ref){"apps", "v1", "daemonsets", "ops", "dp", NULL};
	gk_kube_path(b, sizeof b, &r);
	cr_assert_str_eq(b, "/apis/apps/v1/namespaces/ops/daemonsets/dp");
	r = (gk_kube_ref){"intel.com", "v1alpha1", "clusterpolicies", NULL, "cp", "status"};
	gk_kube_path(b, sizeof b, &r);
	cr_assert_str_eq(b, "/apis/intel.com/v1alpha1/clusterpolicies/cp/status");
	r = (gk_kube_ref){"", "v1", "pods", "default", NULL, NULL};
	gk_kube_path(b, sizeof b, &r);
	cr_assert_str_eq(b, "/api/v1/namespaces/default/pods");
	/* invalid */
	r = (gk_kube_ref){"", "v1", "pods", NULL, NULL, "status"};
	cr_assert_eq(gk_kube_path(b, sizeof b, &r), -1);
	r = (gk_kube_ref){"", "v1", "pods", "../x", "a", NULL};
	cr_assert_eq(gk_kube_path(b, sizeof b, &r), -1);
	r = (gk_kube_ref){"", "v1", "pods", NULL, "a?b", NULL};
	cr_assert_eq(gk_kube_path(b, sizeof b, &r), -1);
	r = (gk_kube_ref){"", NULL, "pods", NULL, NULL, NULL};
	cr_assert_eq(gk_kube_path(b, sizeof b, &r), -1);
	r = (gk_kube_ref){"", "v1", "nodes", NULL, NULL, NULL};
	cr_assert_eq(gk_kube_path(b, 10, &r), -1);
}

Test(path, query_escaping)
{
	char b[128] = "/api/v1/pods";
	cr_assert_gt(gk_kube_query_add(b, sizeof b, "labelSelector", "gpukmm.io/gate in (a,b)"), 0);
	cr_assert_gt(gk_kube_query_add(b, sizeof b, "limit", "500"), 0);
	cr_assert_str_eq(b, "/api/v1/pods?labelSelector=gpukmm.io%2Fgate%20in%20%28a%2Cb%29&limit=500");
	char s[20] = "/x";
	cr_assert_eq(gk_kube_query_add(s, sizeof s, "k", "a very long value"), -1);
	cr_assert_str_eq(s, "/x");
}

/* ---- status ---- */

Test(status, classes)
{
	cr_assert_eq(gk_kube_code_of(200, NULL), GK_OK);
	cr_assert_eq(gk_kube_code_of(201, NULL), GK_OK);
	cr_assert_eq(gk_kube_code_of(404, NULL), GK_NOT_FOUND);
	cr_assert_eq(gk_kube_code_of(409, "AlreadyExists"), GK_ALREADY_EXISTS);
	cr_assert_eq(gk_kube_code_of(409, "Conflict"), GK_ABORTED);
	cr_assert_eq(gk_kube_code_of(410, "Expired"), GK_OUT_OF_RANGE);
	cr_assert_eq(gk_kube_code_of(429, NULL), GK_RESOURCE_EXHAUSTED);
	cr_assert_eq(gk_kube_code_of(401, NULL), GK_UNAUTHENTICATED);
	cr_assert_eq(gk_kube_code_of(403, NULL), GK_PERMISSION_DENIED);
	cr_assert_eq(gk_kube_code_of(422, NULL), GK_INVALID_ARGUMENT);
	cr_assert_eq(gk_kube_code_of(500, NULL), GK_INTERNAL);
	cr_assert_eq(gk_kube_code_of(503, NULL), GK_UNAVAILABLE);
	cr_assert_eq(gk_kube_code_of(504, NULL), GK_DEADLINE_EXCEEDED);
	cr_assert_eq(gk_kube_code_of(0, NULL), GK_UNAVAILABLE);
	cr_assert(gk_kube_retryable(GK_RESOURCE_EXHAUSTED));
	cr_assert(gk_kube_retryable(GK_UNAVAILABLE));
	cr_assert(gk_kube_retryable(GK_ABORTED));
	cr_assert_not(gk_kube_retryable(GK_NOT_FOUND));
	cr_assert_not(gk_kube_retryable(GK_INVALID_ARGUMENT));
}

Test(status, decode_bodies)
{
	gk_kube_status st = {.retry_after_s = -1};
	const char *b = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
			"\"modules.kmm.sigs.x-k8s.io \\\"x\\\" not found\",\"reason\":\"NotFound\","
			"\"details\":{\"retryAfterSeconds\":3},\"code\":404}";
	gk_kube_status_decode(&st, b, strlen(b));
	cr_assert_str_eq(st.reason, "NotFound");
	cr_assert_str_eq(st.message, "modules.kmm.sigs.x-k8s.io \"x\" not found");
	cr_assert_eq(st.retry_after_s, 3);
	gk_kube_status st2 = {.retry_after_s = -1};
	gk_kube_status_decode(&st2, "<html>\x01oops</html>", 18);
	cr_assert_str_eq(st2.reason, "");
	cr_assert_str_eq(st2.message, "<html> oops</html>");
	gk_kube_status st3 = {.retry_after_s = -1};
	gk_kube_status_decode(&st3, "{\"kind\":\"Status\",\"reason\":7}", 28);
	cr_assert_str_eq(st3.reason, "");
	cJSON *ev = cJSON_Parse("{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
				"\"message\":\"too old resource version: 1 (5)\"}");
	gk_kube_status st4 = {.retry_after_s = -1};
	cr_assert_eq(gk_kube_status_from_json(&st4, ev), 410);
	cr_assert_str_eq(st4.reason, "Expired");
	cJSON_Delete(ev);
}

/* the safety rule: only a NotFound that names the object confirms its absence */
Test(status, a_404_confirms_only_the_object_it_names)
{
	gk_kube_status st = {.retry_after_s = -1};
	const char *b = "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"details\":{\"name\":\"gpu-gpu-dra\","
			"\"kind\":\"daemonsets\"},\"code\":404}";
	gk_kube_status_decode(&st, b, strlen(b));
	cr_assert(gk_kube_gone(GK_NOT_FOUND, &st, "gpu-gpu-dra"));
	cr_assert_not(gk_kube_gone(GK_NOT_FOUND, &st, "gpu-device-plugin"), "another object's NotFound");
	cr_assert_not(gk_kube_gone(GK_OK, &st, "gpu-gpu-dra"));
	cr_assert_not(gk_kube_gone(GK_UNAVAILABLE, &st, "gpu-gpu-dra"));
	gk_kube_status path = {.retry_after_s = -1}; /* a 404 of the path: no details */
	gk_kube_status_decode(&path, "404 page not found", 18);
	cr_assert_not(gk_kube_gone(GK_NOT_FOUND, &path, "gpu-gpu-dra"));
	cr_assert_not(gk_kube_gone(GK_NOT_FOUND, NULL, "gpu-gpu-dra"));
	cr_assert_not(gk_kube_gone(GK_NOT_FOUND, &st, NULL));
}

Test(status, retry_after)
{
	cr_assert_eq(gk_kube_parse_retry_after("7", 0), 7);
	cr_assert_eq(gk_kube_parse_retry_after(" 0", 0), 0);
	cr_assert_eq(gk_kube_parse_retry_after("-3", 0), -1);
	cr_assert_eq(gk_kube_parse_retry_after("3x", 0), -1);
	cr_assert_eq(gk_kube_parse_retry_after("999999", 0), 86400);
	/* Wed, 21 Oct 2015 07:28:00 GMT = 1445412480 */
	cr_assert_eq(gk_kube_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470), 10);
	cr_assert_eq(gk_kube_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490), 0);
	cr_assert_eq(gk_kube_parse_retry_after("soon", 0), -1);
	cr_assert_eq(gk_kube_parse_retry_after(NULL, 0), -1);
}

Test(status, kube_time)
{
	char b[GK_KUBE_TIME_LEN];
	cr_assert_eq(gk_kube_time(b, sizeof(b), 1445412480), 20);
	cr_assert_str_eq(b, "2015-10-21T07:28:00Z");
	cr_assert_eq(gk_kube_time(b, sizeof(b), 0), 20);
	cr_assert_str_eq(b, "1970-01-01T00:00:00Z");
	cr_assert_eq(gk_kube_time(b, sizeof(b), 4102444799), 20);
	cr_assert_str_eq(b, "2099-12-31T23:59:59Z");
	char small[20]; /* one short of the NUL */
	cr_assert_eq(gk_kube_time(small, sizeof(small), 1445412480), 0);
	cr_assert_str_eq(small, "");
}

/* ---- bucket and backoff ---- */

Test(bucket, burst_then_rate)
{
	gk_kube_bucket b;
	gk_kube_bucket_init(&b, 5, 10, 1000);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(gk_kube_bucket_take(&b, 1000), 0);
	cr_assert_eq(gk_kube_bucket_take(&b, 1000), 200);
	cr_assert_eq(gk_kube_bucket_take(&b, 1000), 400); /* queued behind the previous */
	/* 1 s later: 5 tokens back, 2 already owed */
	int allowed = 0;
	for (int i = 0; i < 10; i++)
		allowed += gk_kube_bucket_take(&b, 2000) == 0;
	cr_assert_eq(allowed, 3);
	gk_kube_bucket u;
	gk_kube_bucket_init(&u, -1, 0, 0);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(gk_kube_bucket_take(&u, 0), 0);
}

Test(backoff, conflict_delay_doubles_then_pauses_and_starts_over)
{
	/* the spacing gater and statusd re-read with after 409s in a row */
	static const int want[] = {20, 40, 80, 160, 320, 777, 20, 40, 80, 160, 320, 777, 20};
	int streak = 0;
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		cr_assert_eq(gk_kube_conflict_delay(&streak, 777), want[i], "409 #%zu", i + 1);
	cr_assert_eq(streak, 1);
	streak = 0; /* what a success does */
	cr_assert_eq(gk_kube_conflict_delay(&streak, 1000), 20);
	streak = -3; /* never negative in use: treated as a fresh streak */
	cr_assert_eq(gk_kube_conflict_delay(&streak, 1000), 20);
	cr_assert_eq(streak, 1);
}

Test(backoff, doubles_caps_jitters_resets)
{
	gk_kube_backoff b;
	gk_kube_backoff_init(&b, 42);
	int64_t now = 1000000, base = 800;
	for (int i = 0; i < 10; i++) {
		int64_t d = gk_kube_backoff_next(&b, now);
		int64_t lo = base < 30000 ? base : 30000;
		cr_assert_geq(d, lo, "step %d: %lld < %lld", i, (long long)d, (long long)lo);
		cr_assert_leq(d, 30000, "step %d: %lld", i, (long long)d);
		cr_assert_leq(d, 2 * base);
		base *= 2;
		now += d;
	}
	/* after 2 minutes of health the next failure starts over */
	int64_t d = gk_kube_backoff_next(&b, now + 121000);
	cr_assert(d >= 800 && d <= 1600, "%lld", (long long)d);
	/* jitter actually varies */
	gk_kube_backoff a, c;
	gk_kube_backoff_init(&a, 1);
	gk_kube_backoff_init(&c, 2);
	int diff = 0;
	for (int i = 0; i < 5; i++)
		diff += gk_kube_backoff_next(&a, 1) != gk_kube_backoff_next(&c, 1);
	cr_assert_gt(diff, 0);
	for (int i = 0; i < 100; i++) {
		int64_t t = gk_kube_rand_range(&a, 300, 600);
		cr_assert(t >= 300 && t <= 600);
	}
}
