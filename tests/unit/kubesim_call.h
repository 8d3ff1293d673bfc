/* Test helper (header-only, included by Criterion tests of kubesim): requests
 * through kubesim's handler without sockets, against the server in S.
 *   call("PATCH", "/api/v1/nodes/n?fieldManager=x", body, ctype, &code) -> parsed body
 *   do_(method, url, body, ctype) -> HTTP code
 *   str(obj, "items.0.metadata.name") -> the value as a string (static buffer)
 *   watch_all(url) -> the whole watch stream (the URL sets timeoutSeconds), malloc'd
 *   count(haystack, needle) */
#ifndef GPUKMM_TEST_KUBESIM_CALL_H
#define GPUKMM_TEST_KUBESIM_CALL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/kubesim/kubesim.h"

static ks_server *S;

/* Splits url into path (in buf) and query pairs (in place). */
static inline int split_url(const char *url, char *path, size_t cap, char *qs, size_t qcap, ks_kv *kv, int max)
{
	snprintf(path, cap, "%s", url);
	char *q = strchr(path, '?');
	int n = 0;
	if (!q)
		return 0;
	*q = 0;
	snprintf(qs, qcap, "%s", q + 1);
	char *save = NULL;
	for (char *p = strtok_r(qs, "&", &save); p && n < max; p = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(p, '=');
		if (eq)
			*eq = 0;
		kv[n].k = p;
		kv[n].v = eq ? eq + 1 : "";
		n++;
	}
	return n;
}

static inline cJSON *call(const char *method, const char *url, const char *body, const char *ctype, int *code)
{
	char path[1024], qs[1024] = "";
	ks_kv kv[16];
	int n = split_url(url, path, sizeof(path), qs, sizeof(qs), kv, 16);
	ks_req r = { .method = method, .path = path, .query = kv, .nquery = n, .content_type = ctype,
		     .user_agent = "unit-test/1.0", .body = body, .body_len = body ? strlen(body) : 0 };
	ks_resp out;
	ks_handle(S, &r, &out);
	*code = out.code;
	cr_assert_null(out.watch, "unexpected watch");
	cJSON *j = out.body ? cJSON_Parse(out.body) : NULL;
	ks_resp_free(&out);
	return j;
}

static inline int do_(const char *method, const char *url, const char *body, const char *ctype)
{
	int code;
	cJSON_Delete(call(method, url, body, ctype, &code));
	return code;
}

/* dotted path; a numeric segment indexes an array ("items.0.metadata.name") */
static inline const char *str(const cJSON *j, const char *path)
{
	static char buf[1024];
	char seg[256];
	const cJSON *cur = j;
	buf[0] = 0;
	while (cur && *path) {
		size_t n = strcspn(path, ".");
		snprintf(seg, sizeof(seg), "%.*s", (int)n, path);
		if (cJSON_IsArray(cur) && seg[0] >= '0' && seg[0] <= '9')
			cur = cJSON_GetArrayItem(cur, atoi(seg));
		else
			cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, seg) : NULL;
		path += n + (path[n] == '.');
	}
	if (cJSON_IsString(cur))
		snprintf(buf, sizeof(buf), "%s", cur->valuestring);
	else if (cJSON_IsBool(cur))
		snprintf(buf, sizeof(buf), "%s", cJSON_IsTrue(cur) ? "true" : "false");
	else if (cJSON_IsNumber(cur))
		snprintf(buf, sizeof(buf), "%.17g", cur->valuedouble);
	return buf;
}

static inline char *watch_all(const char *url)
{
	char path[512], qs[512];
	ks_kv kv[8];
	int n = split_url(url, path, sizeof(path), qs, sizeof(qs), kv, 8);
	ks_req r = { .method = "GET", .path = path, .query = kv, .nquery = n };
	ks_resp out;
	ks_handle(S, &r, &out);
	cr_assert_eq(out.code, 200);
	cr_assert(out.watch);
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	cr_assert(buf);
	for (;;) {
		size_t got = ks_watch_read(S, out.watch, buf + len, cap - len - 1);
		if (!got)
			break;
		len += got;
		cr_assert(len < cap - 1);
	}
	buf[len] = 0;
	ks_watch_close(S, out.watch);
	ks_resp_free(&out);
	return buf;
}

static inline int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

#endif
