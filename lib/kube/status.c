/* API errors: HTTP status + Status body → gk_code, reason, message, Retry-After. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gpukmm/kube.h"

int gk_kube_code_of(long http, const char *reason)
{
	if (http >= 200 && http < 300)
		return GK_OK;
	switch (http) {
	case 0: return GK_UNAVAILABLE;
	case 400: case 422: return GK_INVALID_ARGUMENT;
	case 401: return GK_UNAUTHENTICATED;
	case 403: return GK_PERMISSION_DENIED;
	case 404: return GK_NOT_FOUND;
	case 405: return GK_UNIMPLEMENTED;
	case 409:
		return reason && !strcmp(reason, "AlreadyExists") ? GK_ALREADY_EXISTS : GK_ABORTED;
	case 410: return GK_OUT_OF_RANGE;
	case 413: return GK_RESOURCE_EXHAUSTED;
	case 415: return GK_INVALID_ARGUMENT;
	case 429: return GK_RESOURCE_EXHAUSTED;
	case 500: return GK_INTERNAL;
	case 501: return GK_UNIMPLEMENTED;
	case 504: return GK_DEADLINE_EXCEEDED;
	}
	if (http >= 500)
		return GK_UNAVAILABLE;
	if (http >= 400)
		return GK_FAILED_PRECONDITION;
	return GK_UNKNOWN;
}

bool gk_kube_retryable(int code)
{
	switch (code) {
	case GK_UNAVAILABLE: case GK_RESOURCE_EXHAUSTED: case GK_INTERNAL:
	case GK_DEADLINE_EXCEEDED: case GK_ABORTED:
		return true;
	}
	return false;
}

bool gk_kube_gone(int code, const gk_kube_status *st, const char *name)
{
	return code == GK_NOT_FOUND && st && name && strcmp(st->details_name, name) == 0;
}

static void copy_str(char *dst, size_t cap, const cJSON *v)
{
	if (cJSON_IsString(v) && v->valuestring)
		snprintf(dst, cap, "%s", v->valuestring);
}

long gk_kube_status_from_json(gk_kube_status *st, const cJSON *s)
{
	if (!st || !cJSON_IsObject(s))
		return 0;
	copy_str(st->reason, sizeof st->reason, cJSON_GetObjectItemCaseSensitive(s, "reason"));
	copy_str(st->message, sizeof st->message, cJSON_GetObjectItemCaseSensitive(s, "message"));
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(s, "details");
	copy_str(st->details_kind, sizeof st->details_kind, cJSON_GetObjectItemCaseSensitive(d, "kind"));
	copy_str(st->details_name, sizeof st->details_name, cJSON_GetObjectItemCaseSensitive(d, "name"));
	const cJSON *ra = cJSON_GetObjectItemCaseSensitive(d, "retryAfterSeconds");
	if (cJSON_IsNumber(ra) && ra->valuedouble >= 0 && ra->valuedouble < 86400 &&
	    st->retry_after_s < 0)
		st->retry_after_s = (int)ra->valuedouble;
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(s, "code");
	return cJSON_IsNumber(c) ? (long)c->valuedouble : 0;
}

void gk_kube_status_decode(gk_kube_status *st, const char *body, size_t len)
{
	if (!st || !body || !len)
		return;
	cJSON *j = cJSON_ParseWithLength(body, len);
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
	if (j && cJSON_IsString(kind) && !strcmp(kind->valuestring, "Status")) {
		gk_kube_status_from_json(st, j);
	} else if (!st->message[0]) {
		/* not a Status (a proxy's HTML page...): keep a printable prefix */
		size_t n = 0;
		for (size_t i = 0; i < len && n + 1 < sizeof st->message && n < 120; i++) {
			unsigned char ch = (unsigned char)body[i];
			st->message[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
		}
		st->message[n] = 0;
	}
	cJSON_Delete(j);
}

size_t gk_kube_time(char *buf, size_t cap, int64_t unix_s)
{
	time_t t = (time_t)unix_s;
	struct tm tm;
	size_t n = gmtime_r(&t, &tm) && cap ? strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) : 0;
	if (!n && cap)
		buf[0] = 0;
	return n;
}

int64_t gk_kube_time_parse(const char *s)
{
	struct tm tm = { 0 };
	const char *e = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!e)
		return -1;
	if (*e == '.') /* MicroTime: the fraction is dropped */
		for (e++; *e >= '0' && *e <= '9'; e++)
			;
	if (strcmp(e, "Z") != 0)
		return -1;
	return (int64_t)timegm(&tm);
}

int gk_kube_parse_retry_after(const char *v, int64_t now_s)
{
	if (!v)
		return -1;
	while (*v == ' ')
		v++;
	if (*v >= '0' && *v <= '9') {
		char *end;
		long s = strtol(v, &end, 10);
		while (*end == ' ' || *end == '\r' || *end == '\n')
			end++;
		if (*end || s < 0)
			return -1;
		return s > 86400 ? 86400 : (int)s;
	}
	struct tm tm = {0};
	const char *e = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!e)
		return -1;
	time_t t = timegm(&tm);
	int64_t d = (int64_t)t - now_s;
	if (d < 0)
		d = 0;
	return d > 86400 ? 86400 : (int)d;
}
