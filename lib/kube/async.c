/* Async API calls on the mux (see kube.h "async calls on the mux"): one curl
 * easy handle per call on the shared multi handle, a task for the QPS wait,
 * the same setup/result/401 rules as the blocking client. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/log.h"
#include "internal.h"

struct gk_kube_call {
	gk_kube__task task;         /* first member: task ↔ call */
	gk_kube_mux *m;
	CURL *easy;
	struct curl_slist *hdrs;
	char *method, *path, *ct, *body;
	size_t body_len;
	gk_kube_call_opts o;
	gk_kube_call_fn fn;
	void *user;
	void *owned;                /* freed if the call is dropped without its callback */
	gk_kube_buf rb;
	gk_kube_status st;
	bool attached, token_reserved, unauth_retried, finished;
	char errbuf[CURL_ERROR_SIZE];
};

static void call_free(gk_kube_call *k)
{
	if (k->attached)
		gk_kube__mux_stop(k->m, k->easy);
	gk_kube__mux_del_task(k->m, &k->task);
	if (k->easy)
		curl_easy_cleanup(k->easy);
	curl_slist_free_all(k->hdrs);
	free(k->rb.data);
	free(k->method);
	free(k->path);
	free(k->ct);
	free(k->body);
	free(k->owned);
	free(k);
}

/* Deliver the result and free the call. */
static void finish(gk_kube_call *k, int code, cJSON *out, const gk_err *err)
{
	k->finished = true;
	if (k->attached) {
		gk_kube__mux_stop(k->m, k->easy);
		k->attached = false;
	}
	gk_kube__mux_del_task(k->m, &k->task);
	k->m->calls--;
	k->owned = NULL; /* the callback runs: what it owns is its own business now */
	if (k->fn)
		k->fn(k->user, code, out, &k->st, err);
	else
		cJSON_Delete(out);
	call_free(k);
}

/* 0 = transfer started or waiting for its QPS token; else an error (nothing started). */
static int start(gk_kube_call *k, gk_err *err)
{
	gk_kube_client *c = k->m->c;
	if (!k->o.unthrottled && !k->token_reserved) {
		int64_t wait = gk_kube_bucket_take(&c->bucket, gk_kube__mono_ms());
		if (wait > 0) {
			gk_kube__throttled(c, wait);
			k->token_reserved = true; /* taken: do not take another when due */
			k->task.due_ms = gk_kube__mono_ms() + wait;
			return 0;
		}
	}
	k->token_reserved = false;
	curl_easy_reset(k->easy);
	curl_slist_free_all(k->hdrs);
	k->hdrs = NULL;
	int rc = gk_kube__setup(c, k->easy, k->method, k->path, k->ct, &k->hdrs, err);
	if (rc)
		return rc;
	k->rb.len = 0;
	k->rb.overflow = false;
	k->rb.max = c->opts.max_response;
	memset(&k->st, 0, sizeof k->st);
	k->st.retry_after_s = -1;
	k->errbuf[0] = 0;
	curl_easy_setopt(k->easy, CURLOPT_PRIVATE, (char *)&k->task);
	curl_easy_setopt(k->easy, CURLOPT_ERRORBUFFER, k->errbuf);
	curl_easy_setopt(k->easy, CURLOPT_WRITEFUNCTION, gk_kube__write_buf);
	curl_easy_setopt(k->easy, CURLOPT_WRITEDATA, &k->rb);
	curl_easy_setopt(k->easy, CURLOPT_HEADERFUNCTION, gk_kube__header_cb);
	curl_easy_setopt(k->easy, CURLOPT_HEADERDATA, &k->st);
	curl_easy_setopt(k->easy, CURLOPT_TIMEOUT_MS,
			 (long)(k->o.timeout_ms > 0 ? k->o.timeout_ms : c->opts.timeout_ms));
	if (k->body) {
		curl_easy_setopt(k->easy, CURLOPT_POSTFIELDS, k->body);
		curl_easy_setopt(k->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)k->body_len);
	}
	c->stats.requests++;
	if (gk_kube__mux_start(k->m, k->easy))
		return gk_err_set(err, GK_INTERNAL, "%s %s: cannot add the transfer", k->method,
				  k->path);
	k->attached = true;
	return 0;
}

static void fire(gk_kube__task *t)
{
	gk_kube_call *k = (gk_kube_call *)t;
	gk_err err = {0};
	if (start(k, &err))
		finish(k, err.code ? err.code : GK_INTERNAL, NULL, &err);
}

static void done(gk_kube__task *t, CURLcode cc)
{
	gk_kube_call *k = (gk_kube_call *)t;
	gk_kube_client *c = k->m->c;
	k->attached = false;
	long http = 0;
	curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &http);
	gk_err err = {0};
	int rc = gk_kube__result(c, cc, http, k->errbuf, &k->rb, &k->st, k->method, k->path, &err);
	if (rc == GK_UNAUTHENTICATED) {
		c->stats.unauthorized++;
		if (!k->unauth_retried && gk_kube__refreshable(c)) {
			/* rotated token: re-read at once and retry once */
			k->unauth_retried = true;
			gk_kube__token(c, true);
			k->token_reserved = true;
			gk_err e2 = {0};
			if (start(k, &e2))
				finish(k, e2.code ? e2.code : GK_INTERNAL, NULL, &e2);
			return;
		}
	}
	cJSON *out = NULL;
	if (rc == 0 && k->rb.len) {
		out = cJSON_ParseWithLength(k->rb.data, k->rb.len);
		if (!out)
			rc = gk_err_set(&err, GK_INTERNAL, "%s %s: response is not JSON", k->method,
					k->path);
	}
	finish(k, rc, out, &err);
}

static void kill_call(gk_kube__task *t)
{
	gk_kube_call *k = (gk_kube_call *)t;
	k->m->calls--;
	call_free(k);
}

static char *dup_n(const char *s, size_t n, bool *fail)
{
	if (!s)
		return NULL;
	char *d = malloc(n + 1);
	if (!d) {
		*fail = true;
		return NULL;
	}
	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

int gk_kube_call_raw(gk_kube_mux *m, const char *method, const char *path,
		     const char *content_type, const char *body, size_t body_len,
		     const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user, gk_kube_call **out,
		     gk_err *err)
{
	if (out)
		*out = NULL;
	if (!m || !method || !path || path[0] != '/')
		return gk_err_set(err, GK_INVALID_ARGUMENT, "async call: method and path needed");
	if (m->calls >= m->max_calls) {
		m->calls_rejected++;
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED,
				  "%s %s: %zu API calls already in flight", method, path, m->calls);
	}
	gk_kube_call *k = calloc(1, sizeof *k);
	if (!k)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	bool fail = false;
	k->m = m;
	k->method = dup_n(method, strlen(method), &fail);
	k->path = dup_n(path, strlen(path), &fail);
	k->ct = dup_n(content_type, content_type ? strlen(content_type) : 0, &fail);
	k->body = dup_n(body, body_len, &fail);
	k->body_len = body ? body_len : 0;
	if (o)
		k->o = *o;
	k->fn = fn;
	k->user = user;
	k->task.fire = fire;
	k->task.done = done;
	k->task.kill = kill_call;
	k->task.due_ms = -1;
	if (fail || !(k->easy = curl_easy_init())) {
		gk_kube__mux_del_task(m, &k->task);
		call_free(k);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	gk_kube__mux_add_task(m, &k->task);
	int rc = start(k, err);
	if (rc) {
		call_free(k);
		return rc;
	}
	m->calls++;
	m->calls_started++;
	if (out)
		*out = k;
	gk_kube__mux_changed(m);
	return 0;
}

void gk_kube_call_cancel(gk_kube_call *k)
{
	if (!k || k->finished)
		return; /* inside its own callback: freed when it returns */
	k->m->calls--;
	call_free(k);
}

void gk_kube_call_free_on_drop(gk_kube_call *k, void *p)
{
	if (k && !k->finished)
		k->owned = p;
}

size_t gk_kube_mux_calls(const gk_kube_mux *m)
{
	return m->calls;
}

static int call_rq(gk_kube_mux *m, gk_kube__rq *q, int rc, const gk_kube_call_opts *o,
		   gk_kube_call_fn fn, void *user, gk_kube_call **out, gk_err *err)
{
	if (out)
		*out = NULL;
	if (rc == 0)
		rc = gk_kube_call_raw(m, q->method, q->path, q->ct, q->body, q->body_len, o, fn, user,
				      out, err);
	gk_kube__rq_free(q);
	return rc;
}

int gk_kube_call_get(gk_kube_mux *m, const gk_kube_ref *r, const gk_kube_call_opts *o,
		     gk_kube_call_fn fn, void *user, gk_kube_call **out, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_get(&q, r, err);
	return call_rq(m, &q, rc, o, fn, user, out, err);
}

int gk_kube_call_create(gk_kube_mux *m, const gk_kube_ref *r, const cJSON *obj,
			const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user,
			gk_kube_call **out, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_create(&q, r, obj, err);
	return call_rq(m, &q, rc, o, fn, user, out, err);
}

int gk_kube_call_list(gk_kube_mux *m, const gk_kube_ref *r, const gk_kube_list_opts *lo,
		      const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user, gk_kube_call **out, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_list(&q, r, lo, NULL, err);
	return call_rq(m, &q, rc, o, fn, user, out, err);
}

int gk_kube_call_update(gk_kube_mux *m, const gk_kube_ref *r, const cJSON *obj,
			const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user,
			gk_kube_call **out, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_update(&q, r, obj, err);
	return call_rq(m, &q, rc, o, fn, user, out, err);
}

int gk_kube_call_patch(gk_kube_mux *m, const gk_kube_ref *r, enum gk_kube_patch_type type,
		       const char *body, const char *field_manager, bool force,
		       const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user,
		       gk_kube_call **out, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_patch(&q, r, type, body, field_manager, force, err);
	return call_rq(m, &q, rc, o, fn, user, out, err);
}

int gk_kube_call_delete(gk_kube_mux *m, const gk_kube_ref *r, const gk_kube_delete_opts *d,
			const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user,
			gk_kube_call **out, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_delete(&q, r, d, err);
	return call_rq(m, &q, rc, o, fn, user, out, err);
}

/* ---- discovery ---- */

typedef struct disc_ad {
	gk_kube_client *c;
	gk_kube_disc_fn fn;
	void *user;
	char group[128], version[32], resource[128];
} disc_ad;

static void disc_done(void *user, int code, cJSON *out, const gk_kube_status *st,
		      const gk_err *err)
{
	disc_ad *a = user;
	gk_err e = {0};
	int rc = gk_kube__disc_store(a->c, a->group, a->version, code, out, &e);
	cJSON_Delete(out);
	int r = rc ? -rc : gk_kube__disc_lookup(a->c, a->group, a->version, a->resource);
	if (a->fn)
		a->fn(a->user, r, rc ? (code ? err : &e) : NULL);
	free(a);
}

int gk_kube_discover_async(gk_kube_mux *m, const char *group, const char *version,
			   const char *resource, gk_kube_disc_fn fn, void *user, gk_kube_call **out,
			   gk_err *err)
{
	if (out)
		*out = NULL;
	if (!version || !resource || strlen(version) >= 32 || strlen(resource) >= 128 ||
	    (group && strlen(group) >= 128))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "discover: bad group/version/resource");
	disc_ad *a = calloc(1, sizeof *a);
	if (!a)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	a->c = m->c;
	a->fn = fn;
	a->user = user;
	snprintf(a->group, sizeof a->group, "%s", group ? group : "");
	snprintf(a->version, sizeof a->version, "%s", version);
	snprintf(a->resource, sizeof a->resource, "%s", resource);
	char p[512];
	if (a->group[0])
		snprintf(p, sizeof p, "/apis/%s/%s", a->group, a->version);
	else
		snprintf(p, sizeof p, "/api/%s", a->version);
	gk_kube_call *k;
	int rc = gk_kube_call_raw(m, "GET", p, NULL, NULL, 0, NULL, disc_done, a, &k, err);
	if (rc) {
		free(a);
		return rc;
	}
	gk_kube_call_free_on_drop(k, a);
	if (out)
		*out = k;
	return 0;
}
