/* gpukmm-webhook: libmicrohttpd glue (see server.h). Request handling proper
 * is admission.c; this file only routes, caps and counts. */
#include "server.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
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

typedef struct req {
	uint64_t t0;
	char *buf;
	size_t len;
	size_t dropped;
	bool too_large;
} req;

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
		*con_cls = q;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!q->too_large && q->len + *upload_size <= s->max_body) {
			char *nb = realloc(q->buf, q->len + *upload_size + 1);
			if (!nb)
				return MHD_NO;
			q->buf = nb;
			memcpy(q->buf + q->len, upload, *upload_size);
			q->len += *upload_size;
		} else {
			/* keep reading (and dropping) so the answer can be sent, up to a bound */
			q->too_large = true;
			q->dropped += *upload_size;
			if (q->dropped > DRAIN_MAX)
				return MHD_NO;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (q->too_large) {
		count(&s->c.errors);
		admitted(mutate, "error", q->t0);
		return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "text/plain", "request body too large\n");
	}
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
		free(q->buf);
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

