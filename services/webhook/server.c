/* gpukmm-webhook: libmicrohttpd glue (see server.h). Request handling proper
 * is admission.c; this file only routes, caps and counts. */
#include "server.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "scan.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"

#define DRAIN_MS 10000

static gk_metric *admissions, *latency;

static void count(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

/* One AdmissionReview answered (t0 = its first byte, 0 = unknown). */
static void admitted(bool mutate, const char *result, uint64_t t0)
{
	const char *wh = mutate ? "mutating" : "validating";
	gk_metric_add(admissions, 1, GK_LV(wh, result));
	if (t0)
		gk_metric_observe(latency, gk_metric_since(t0), GK_LV(wh));
}

/* An oversized body is read and dropped up to this much before the 413 goes
 * out: answering while the client still sends makes the kernel reset the
 * connection, and the client may lose the answer (curl saw status 000). A
 * bigger one is cut off at once. */
#define DRAIN_MAX (4u << 20)

/* Why a body is read and dropped and the review refused unparsed. */
enum refusal { REF_NONE, REF_VALUES, REF_DEPTH, REF_BUSY };

typedef struct req {
	uint64_t t0;
	char *buf;
	size_t len, cap;       /* cap is counted in the server's `buffered` */
	size_t declared;       /* Content-Length, 0 when chunked */
	size_t dropped;
	bool too_large;
	enum refusal refused;
	gk_wh_scan scan;
} req;

/* Room for `need` bytes of body in q, within the budget of every body being
 * received at once (s->max_buffered). */
static bool room(gk_wh_server *s, req *q, size_t need)
{
	if (need <= q->cap)
		return true;
	size_t cap = q->cap ? q->cap * 2 : q->declared ? q->declared + 1 : 64u << 10;
	while (cap < need)
		cap *= 2;
	if (cap > s->max_body + 1)
		cap = s->max_body + 1;
	size_t used = __atomic_load_n(&s->c.buffered, __ATOMIC_RELAXED);
	if (used - q->cap + cap > s->max_buffered)
		return false;
	char *nb = realloc(q->buf, cap);
	if (!nb)
		return false;
	q->buf = nb;
	__atomic_store_n(&s->c.buffered, used - q->cap + cap, __ATOMIC_RELAXED);
	q->cap = cap;
	return true;
}

static void release(gk_wh_server *s, req *q)
{
	__atomic_sub_fetch(&s->c.buffered, q->cap, __ATOMIC_RELAXED);
	free(q->buf);
	q->buf = NULL;
	q->len = q->cap = 0;
}

static void refuse(gk_wh_server *s, req *q, enum refusal why)
{
	q->refused = why;
	release(s, q);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *ct, const char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ct);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* The answer to a review refused unparsed: an AdmissionReview denying it when
 * its uid was seen (the API server shows the message), else a plain 413 / 429. */
static enum MHD_Result refused(gk_wh_server *s, struct MHD_Connection *c, const req *q, bool mutate)
{
	char msg[256];
	int code = q->refused == REF_BUSY ? 429 : 413;
	const char *reason = q->refused == REF_BUSY ? "TooManyRequests" : "RequestEntityTooLarge";
	if (q->refused == REF_VALUES)
		snprintf(msg, sizeof(msg),
			 "AdmissionReview too large to review: more than %zu JSON values (the largest ClusterPolicy the "
			 "CRD admits has about 27000)", q->scan.max_values);
	else if (q->refused == REF_DEPTH)
		snprintf(msg, sizeof(msg), "AdmissionReview too large to review: nested deeper than %d levels",
			 q->scan.max_depth);
	else
		snprintf(msg, sizeof(msg), "the webhook is receiving other reviews up to its budget (%zu bytes): retry later",
			 s->max_buffered);
	count(&s->c.refused);
	GK_WARN("review %s refused unparsed: %s", q->scan.uid[0] ? q->scan.uid : "(no uid seen)", msg);
	if (!q->scan.uid[0]) {
		char body[300];
		snprintf(body, sizeof(body), "%s\n", msg);
		count(&s->c.errors);
		admitted(mutate, "error", q->t0);
		return reply(c, (unsigned)code, "text/plain", body);
	}
	gk_webhook_result res;
	gk_webhook_refuse(q->scan.uid, code, reason, msg, &res);
	count(&s->c.denied);
	admitted(mutate, "denied", q->t0);
	enum MHD_Result ret = res.body ? reply(c, (unsigned)res.http_status, res.content_type, res.body)
				       : reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "internal error\n");
	gk_webhook_result_free(&res);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	gk_wh_server *s = cls;
	req *q = *con_cls;
	bool mutate = strcmp(url, GK_WEBHOOK_MUTATE_PATH) == 0, validate = strcmp(url, GK_WEBHOOK_VALIDATE_PATH) == 0;
	if (!q) {
		if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0) {
			if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
				return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "method not allowed\n");
			/* still serving (the last good certificate): ready, and says why
			 * the files on disk are not served */
			char body[sizeof(s->note) + 64] = "ok\n";
			pthread_mutex_lock(&s->note_mu);
			if (s->note[0])
				snprintf(body, sizeof(body), "ok\n%s\n", s->note);
			pthread_mutex_unlock(&s->note_mu);
			return reply(c, MHD_HTTP_OK, "text/plain", body);
		}
		if (!mutate && !validate) {
			count(&s->c.errors);
			return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n");
		}
		count(&s->c.requests);
		if (strcmp(method, "POST") != 0) {
			count(&s->c.errors);
			admitted(mutate, "error", 0);
			return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "method not allowed: use POST\n");
		}
		const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
		if (!gk_webhook_json_content_type(ct)) {
			count(&s->c.errors);
			admitted(mutate, "error", 0);
			return reply(c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "text/plain",
				     "unsupported content type: an AdmissionReview must be application/json\n");
		}
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
		if (declared > s->max_body + (unsigned long long)DRAIN_MAX) {
			count(&s->c.errors);
			admitted(mutate, "error", 0);
			return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "text/plain", "request body too large\n");
		}
		if (!(q = calloc(1, sizeof(*q))))
			return MHD_NO;
		q->t0 = gk_metric_now_us();
		q->too_large = declared > s->max_body; /* read and dropped, then answered */
		q->declared = q->too_large ? 0 : (size_t)declared;
		gk_wh_scan_init(&q->scan, s->max_values ? s->max_values : GK_WH_SCAN_MAX_VALUES, GK_WH_SCAN_MAX_DEPTH);
		*con_cls = q;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		if (!q->too_large && !q->refused) {
			/* looked at before it is kept: a review too big to parse is
			 * refused while it arrives, not after its tree was built */
			if (!gk_wh_scan_feed(&q->scan, upload, n)) {
				refuse(s, q, q->scan.over == GK_WH_SCAN_TOO_DEEP ? REF_DEPTH : REF_VALUES);
			} else if (q->len + n > s->max_body) {
				q->too_large = true;
				release(s, q);
			} else if (!room(s, q, q->len + n + 1)) {
				refuse(s, q, REF_BUSY);
			} else {
				memcpy(q->buf + q->len, upload, n);
				q->len += n;
				return MHD_YES;
			}
		}
		/* keep reading (and dropping) so the answer can be sent, up to a bound */
		q->dropped += n;
		return q->dropped > DRAIN_MAX ? MHD_NO : MHD_YES;
	}
	if (q->too_large) {
		count(&s->c.errors);
		admitted(mutate, "error", q->t0);
		return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "text/plain", "request body too large\n");
	}
	if (q->refused)
		return refused(s, c, q, mutate);
	gk_webhook_result res;
	gk_webhook_review(mutate ? GK_WEBHOOK_MUTATE : GK_WEBHOOK_VALIDATE, q->buf ? q->buf : "", q->len, &s->popts,
			  &res);
	switch (res.outcome) {
	case GK_WEBHOOK_ALLOWED: count(&s->c.allowed); break;
	case GK_WEBHOOK_DENIED: count(&s->c.denied); break;
	default: count(&s->c.errors); break;
	}
	admitted(mutate,
		 res.outcome == GK_WEBHOOK_ALLOWED ? "allowed" : res.outcome == GK_WEBHOOK_DENIED ? "denied" : "error",
		 q->t0);
	enum MHD_Result ret = res.body ? reply(c, (unsigned)res.http_status, res.content_type, res.body)
				       : reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "internal error\n");
	if (res.outcome == GK_WEBHOOK_BAD)
		GK_WARN("%s: %s", url, res.body ? res.body : "bad request");
	gk_webhook_result_free(&res);
	return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
	req *q = *con_cls;
	if (q) {
		release(cls, q);
		free(q);
		*con_cls = NULL;
	}
}

void gk_wh_setup(gk_wh_server *s)
{
	s->http.o = (gk_httpd_opts){ .handler = on_request, .cls = s, .completed = on_done, .conn_limit = 256,
				     .timeout_s = 30, .drain_ms = DRAIN_MS };
	if (!admissions) {
		admissions = gk_metric_counter("gpukmm_webhook_admissions_total",
					       "AdmissionReviews answered, by webhook (mutating, validating) and "
					       "result: allowed, denied, or error (the review could not be answered: "
					       "malformed, wrong method or content type, too large, internal).",
					       "webhook,result");
		latency = gk_metric_histogram("gpukmm_webhook_admission_duration_seconds",
					      "Time from an AdmissionReview's first byte to its answer, by webhook.",
					      "webhook", GK_METRIC_LATENCY_BUCKETS, GK_METRIC_N_LATENCY_BUCKETS);
	}
}

void gk_wh_set_note(gk_wh_server *s, const char *note)
{
	pthread_mutex_lock(&s->note_mu);
	snprintf(s->note, sizeof(s->note), "%s", note ? note : "");
	pthread_mutex_unlock(&s->note_mu);
	__atomic_store_n(&s->c.cert_stale, note && *note ? 1 : 0, __ATOMIC_RELAXED);
}

