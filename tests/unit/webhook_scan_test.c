/* gpukmm-webhook's body look-ahead (services/webhook/scan.c): the values it
 * counts are the nodes cJSON builds, whatever the chunking; request.uid is
 * kept; the budgets stop it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "../../services/webhook/scan.h"

/* cJSON's node count, member names excluded (they live in the nodes) */
static size_t nodes(const cJSON *j)
{
	size_t n = 1;
	for (const cJSON *c = j->child; c; c = c->next)
		n += nodes(c);
	return n;
}

/* scans `s` in chunks of `chunk` bytes */
static gk_wh_scan scan(const char *s, size_t chunk, size_t max_values, int max_depth)
{
	gk_wh_scan sc;
	gk_wh_scan_init(&sc, max_values, max_depth);
	size_t n = strlen(s);
	for (size_t i = 0; i < n; i += chunk)
		if (!gk_wh_scan_feed(&sc, s + i, n - i < chunk ? n - i : chunk))
			break;
	return sc;
}

static const char *const docs[] = {
	"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"0f3c-uid\","
	"\"operation\":\"CREATE\",\"object\":{\"a\":[1,2.5e3,-3,true,false,null,\"s\\\"x\\\\\"],\"b\":{},\"c\":[]}}}",
	"  [ 1 , [ ] , { \"k\" : { \"k\" : [ \"v\" , { } ] } } ]  ",
	"{\"request\":{\"object\":{\"uid\":\"not-this\"},\"uid\":\"this\"}}",
	"{\"x\":{\"request\":{\"uid\":\"nested: not the review's\"}},\"request\":{\"uid\":\"u\\u00e9\"}}",
	"\"just a string\"",
	"{\"request\":{\"uid\":\"a\",\"object\":{\"request\":{\"uid\":\"b\"}}},\"uid\":\"c\"}",
	"{\"k:\\\"x\":\"{[,]}\",\"request\":{\"uid\":\"with{brackets},inside\"}}",
};
static const char *const uids[] = { "0f3c-uid", "", "this", "", "", "a", "with{brackets},inside" };

Test(scan, counts_what_cjson_builds_at_any_chunking)
{
	for (size_t d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
		cJSON *j = cJSON_Parse(docs[d]);
		cr_assert(j, "test doc %zu is not JSON", d);
		size_t want = nodes(j);
		cJSON_Delete(j);
		for (size_t chunk = 1; chunk <= strlen(docs[d]); chunk++) {
			gk_wh_scan s = scan(docs[d], chunk, 1000, 64);
			cr_assert_eq(s.values, want, "doc %zu chunk %zu: %zu values, cJSON %zu", d, chunk, s.values, want);
			cr_assert_eq(s.over, GK_WH_SCAN_OK);
			cr_assert_eq(s.depth, 0, "doc %zu chunk %zu: depth %d at the end", d, chunk, s.depth);
			cr_assert_str_eq(s.uid, uids[d], "doc %zu chunk %zu", d, chunk);
		}
	}
}

Test(scan, a_uid_with_an_escape_or_too_long_is_not_kept)
{
	gk_wh_scan s = scan("{\"request\":{\"uid\":\"a\\\"b\"}}", 3, 100, 64);
	cr_assert_str_eq(s.uid, "");
	char big[400];
	snprintf(big, sizeof(big), "{\"request\":{\"uid\":\"%0200d\"}}", 0);
	s = scan(big, 7, 100, 64);
	cr_assert_str_eq(s.uid, "");
}

Test(scan, the_value_budget_stops_it_early)
{
	/* the review of the issue: an array of 1.45 million zeros */
	size_t n = 1450000;
	char *b = malloc(2 * n + 200);
	cr_assert(b);
	size_t l = (size_t)sprintf(b, "{\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{\"uid\":\"u-1\",\"object\":{\"x\":[");
	for (size_t i = 0; i < n; i++) {
		b[l++] = '0';
		b[l++] = ',';
	}
	strcpy(b + l - 1, "]}}}");
	gk_wh_scan s;
	gk_wh_scan_init(&s, GK_WH_SCAN_MAX_VALUES, GK_WH_SCAN_MAX_DEPTH);
	size_t fed = 0;
	while (fed < strlen(b) && gk_wh_scan_feed(&s, b + fed, 4096))
		fed += 4096;
	cr_assert_eq(s.over, GK_WH_SCAN_TOO_MANY);
	cr_assert_eq(s.values, GK_WH_SCAN_MAX_VALUES + 1);
	cr_assert(fed < 2 * GK_WH_SCAN_MAX_VALUES + 4096, "stopped after %zu bytes", fed);
	cr_assert_str_eq(s.uid, "u-1");
	free(b);
	/* exactly at the budget is fine */
	s = scan("[1,2,3]", 2, 4, 64);
	cr_assert_eq(s.over, GK_WH_SCAN_OK);
	s = scan("[1,2,3,4]", 2, 4, 64);
	cr_assert_eq(s.over, GK_WH_SCAN_TOO_MANY);
}

Test(scan, the_depth_budget)
{
	char deep[200] = "{\"request\":{\"uid\":\"d\",\"object\":";
	for (int i = 0; i < 62; i++)
		strcat(deep, "[");
	gk_wh_scan s = scan(deep, 5, 1000, 64);
	cr_assert_eq(s.over, GK_WH_SCAN_OK, "64 levels are fine");
	strcat(deep, "[");
	s = scan(deep, 5, 1000, 64);
	cr_assert_eq(s.over, GK_WH_SCAN_TOO_DEEP);
	cr_assert_str_eq(s.uid, "d");
}
