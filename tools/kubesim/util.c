/* kubesim — small helpers: time, uids, metadata access, Status responses. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "kubesim.h"
#include "jsonutil.h"

void ks_now_rfc3339(char *buf, size_t cap)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void ks_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *mu, int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (ms < 1)
		ms = 1;
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(c, mu, &ts);
}

int64_t ks_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ks_new_uid(ks_server *s, char *buf, size_t cap)
{
	unsigned char r[16];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		/* fall back to a counter: uniqueness is what matters */
		uint64_t c = ++s->uid_counter;
		memset(r, 0, sizeof(r));
		memcpy(r, &c, sizeof(c));
	}
	r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
	r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
	snprintf(buf, cap, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
		 r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
}

cJSON *ks_meta(cJSON *obj)
{
	cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	if (cJSON_IsObject(m))
		return m;
	if (m)
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "metadata");
	m = cJSON_CreateObject();
	if (m)
		cJSON_AddItemToObject(obj, "metadata", m);
	return m;
}

const char *ks_meta_str(const cJSON *obj, const char *field)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, field);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

uint64_t ks_obj_rv(const cJSON *obj)
{
	const char *s = ks_meta_str(obj, "resourceVersion");
	return s ? strtoull(s, NULL, 10) : 0;
}

const char *ks_req_param(const ks_req *r, const char *k)
{
	for (int i = 0; i < r->nquery; i++)
		if (strcmp(r->query[i].k, k) == 0)
			return r->query[i].v ? r->query[i].v : "";
	return NULL;
}

char *ks_status_json(int code, const char *reason, const char *message, const char *kind, const char *name,
		     const char *group, cJSON *causes)
{
	cJSON *j = cJSON_CreateObject();
	if (!j) {
		cJSON_Delete(causes);
		return NULL;
	}
	cJSON_AddStringToObject(j, "kind", "Status");
	cJSON_AddStringToObject(j, "apiVersion", "v1");
	cJSON_AddObjectToObject(j, "metadata");
	cJSON_AddStringToObject(j, "status", code < 300 ? "Success" : "Failure");
	if (message)
		cJSON_AddStringToObject(j, "message", message);
	if (reason && *reason)
		cJSON_AddStringToObject(j, "reason", reason);
	if (kind || name || causes) {
		cJSON *d = cJSON_AddObjectToObject(j, "details");
		if (d && name)
			cJSON_AddStringToObject(d, "name", name);
		if (d && group && *group)
			cJSON_AddStringToObject(d, "group", group);
		if (d && kind)
			cJSON_AddStringToObject(d, "kind", kind);
		if (d && causes)
			cJSON_AddItemToObject(d, "causes", causes);
		else
			cJSON_Delete(causes);
	}
	cJSON_AddNumberToObject(j, "code", code);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

void ks_resp_status(ks_resp *r, int code, const char *reason, const char *kind, const char *name, const char *group,
		    cJSON *causes, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	free(r->body);
	r->code = code;
	r->content_type = "application/json";
	r->body = ks_status_json(code, reason, msg, kind, name, group, causes);
}

void ks_resp_json(ks_resp *r, int code, cJSON *j)
{
	free(r->body);
	r->code = code;
	r->content_type = "application/json";
	r->body = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!r->body) {
		r->code = 500;
		r->body = ks_status_json(500, "InternalError", "out of memory", NULL, NULL, NULL, NULL);
	}
}

void ks_resp_free(ks_resp *r)
{
	free(r->body);
	r->body = NULL;
}

void ks_jset(cJSON *o, const char *k, cJSON *v)
{
	if (!v)
		return;
	if (cJSON_HasObjectItem(o, k))
		cJSON_ReplaceItemInObjectCaseSensitive(o, k, v);
	else
		cJSON_AddItemToObject(o, k, v);
}

int ks_json_equal(const cJSON *a, const cJSON *b)
{
	if (a == b)
		return 1;
	if (!a || !b || (a->type & 0xFF) != (b->type & 0xFF))
		return 0;
	switch (a->type & 0xFF) {
	case cJSON_False:
	case cJSON_True:
	case cJSON_NULL:
		return 1;
	case cJSON_Number:
		return a->valuedouble == b->valuedouble;
	case cJSON_String:
	case cJSON_Raw:
		return a->valuestring && b->valuestring && strcmp(a->valuestring, b->valuestring) == 0;
	case cJSON_Array: {
		const cJSON *x = a->child, *y = b->child;
		for (; x && y; x = x->next, y = y->next)
			if (!ks_json_equal(x, y))
				return 0;
		return !x && !y;
	}
	case cJSON_Object: {
		int na = 0, nb = 0;
		const cJSON *x;
		for (x = b->child; x; x = x->next)
			nb++;
		for (x = a->child; x; x = x->next) {
			na++;
			const cJSON *y = b->child;
			/* same order is the common case: try the positional sibling first */
			while (y && strcmp(y->string, x->string) != 0)
				y = y->next;
			if (!y || !ks_json_equal(x, y))
				return 0;
		}
		return na == nb;
	}
	default:
		return 0;
	}
}
