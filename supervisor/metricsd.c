/* /metrics on --metrics-listen, served the way controller-runtime serves it in
 * a cluster: HTTPS, and the client's bearer token must be authenticated
 * (TokenReview) and allowed `get` on the non-resource URL /metrics
 * (SubjectAccessReview). The supervisor holds no API credentials
 * (ARCHITECTURE.md §1, §5): it asks a credentialed service (statusd; the
 * AccessReview RPC, gpukmm/review.h) and keeps the verdict briefly (allowed
 * 60 s, denied 10 s; a failed review is not kept: 503). With
 * --metrics-insecure: plain HTTP, no authentication, meant for loopback.
 *
 * Threads: the HTTP daemon's thread parses requests; a request whose token has
 * no verdict yet is suspended (MHD_suspend_connection), put on the pending
 * list and the loop is woken (eventfd). The loop runs the RPCs (asking again
 * every 50 ms while the reviewer answers PENDING, at most 5 s) and resumes
 * the requests when the verdict is known. The pending list and the verdict
 * cache are under mu; everything else of the loop side is the loop's. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "gpukmm/https.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "gpukmm/review.h"
#include "review.pb-c.h"
#include "sup.h"

#define RPC_TIMEOUT_MS 2000
#define REVIEW_DEADLINE_MS 5000 /* from the first ask to a verdict */
#define RETRY_MS 50
#define CERT_CHECK_MS 2000
#define MAX_PENDING 64

enum verdict { V_WAIT = 0, V_ALLOWED, V_DENIED, V_UNAUTHENTICATED, V_ERROR };

typedef struct mreq {
	struct mreq *next;
	struct MHD_Connection *c;
	gk_review_key k;
	char *token;              /* until handed to a review */
	enum verdict v;
	bool asking;              /* a review of its key is running */
	bool listed;              /* on the pending list */
} mreq;

typedef struct review {
	struct review *next;
	gk_sup_msrv *m;
	gk_review_key k;
	char *token;
	int64_t started_ms;
	gk_timer_id timer;
	bool in_flight;
} review;

struct gk_sup_msrv {
	gk_sup *sup;
	gk_httpd http;
	bool secure;
	bool cert_files;
	gk_tls_files certs;
	int efd;
	gk_ipc_client *reviewer;
	review *reviews;          /* loop side */
	gk_timer_id cert_timer;
	pthread_mutex_t mu;
	gk_review_cache cache;    /* under mu */
	mreq *pending;            /* under mu */
	size_t n_pending;
	bool stopping;            /* under mu */
};

static void count_request(gk_sup_msrv *m, unsigned code)
{
	char c[8];
	snprintf(c, sizeof(c), "%u", code);
	gk_metric_add(gk_sup_metric(m->sup, GK_SUP_M_REQUESTS), 1, GK_LV(c));
}

static enum MHD_Result reply(gk_sup_msrv *m, struct MHD_Connection *c, unsigned code, const char *type,
			     const char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, mode);
	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free((void *)body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	if (code == 401)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
	count_request(m, code);
	enum MHD_Result rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result text(gk_sup_msrv *m, struct MHD_Connection *c, unsigned code, const char *msg)
{
	return reply(m, c, code, "text/plain; charset=utf-8", msg, strlen(msg), MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result page(gk_sup_msrv *m, struct MHD_Connection *c)
{
	size_t len = 0;
	char *body = gk_sup_http_metrics(m->sup->http, &len);
	if (!body)
		return text(m, c, 503, "event loop not answering\n");
	return reply(m, c, 200, "text/plain; version=0.0.4; charset=utf-8", body, len, MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result answer(gk_sup_msrv *m, struct MHD_Connection *c, enum verdict v)
{
	switch (v) {
	case V_ALLOWED: return page(m, c);
	case V_DENIED: return text(m, c, 403, "forbidden: the token may not get /metrics\n");
	case V_UNAUTHENTICATED: return text(m, c, 401, "unauthorized: the token was not accepted\n");
	default: return text(m, c, 503, "the token could not be reviewed now; try again\n");
	}
}

static enum verdict from_cache(enum gk_review_verdict v)
{
	return v == GK_REVIEW_ALLOWED ? V_ALLOWED : v == GK_REVIEW_DENIED ? V_DENIED
					       : v == GK_REVIEW_UNAUTHENTICATED ? V_UNAUTHENTICATED : V_WAIT;
}

static void wake_loop(gk_sup_msrv *m)
{
	uint64_t one = 1;
	if (write(m->efd, &one, sizeof(one)) != sizeof(one))
		GK_DEBUG("metrics: eventfd write: %s", strerror(errno));
}

static void free_req(mreq *q)
{
	if (q->token) {
		OPENSSL_cleanse(q->token, strlen(q->token));
		free(q->token);
	}
	free(q);
}

/* HTTP thread. */
static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	gk_sup_msrv *m = cls;
	mreq *q = *con_cls;
	if (q) { /* resumed: the verdict is in */
		pthread_mutex_lock(&m->mu);
		enum verdict v = q->v;
		pthread_mutex_unlock(&m->mu);
		return answer(m, c, v);
	}
	if (strcmp(url, "/metrics") != 0)
		return text(m, c, 404, "not found\n");
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return text(m, c, 405, "method not allowed\n");
	if (!m->secure)
		return page(m, c);
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!auth || strncmp(auth, "Bearer ", 7) != 0 || !auth[7] || strlen(auth + 7) > GK_REVIEW_TOKEN_MAX)
		return text(m, c, 401, "unauthorized: a bearer token is required\n");
	gk_review_key k;
	gk_review_key_of(auth + 7, &k);
	pthread_mutex_lock(&m->mu);
	enum verdict v = m->stopping ? V_ERROR : from_cache(gk_review_cache_get(&m->cache, &k, gk_sup_now_ms()));
	if (v != V_WAIT || m->n_pending >= MAX_PENDING) {
		pthread_mutex_unlock(&m->mu);
		return answer(m, c, v == V_WAIT ? V_ERROR : v);
	}
	q = calloc(1, sizeof(*q));
	if (!q || !(q->token = strdup(auth + 7))) {
		pthread_mutex_unlock(&m->mu);
		free(q);
		return answer(m, c, V_ERROR);
	}
	q->c = c;
	q->k = k;
	q->listed = true;
	q->next = m->pending;
	m->pending = q;
	m->n_pending++;
	*con_cls = q;
	MHD_suspend_connection(c);
	pthread_mutex_unlock(&m->mu);
	wake_loop(m);
	return MHD_YES;
}

/* mu held. */
static void unlist(gk_sup_msrv *m, mreq *q)
{
	for (mreq **p = &m->pending; *p; p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			q->listed = false;
			m->n_pending--;
			return;
		}
}

/* HTTP thread: the request is over (answered, or its connection closed). */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
	gk_sup_msrv *m = cls;
	mreq *q = *con_cls;
	if (!q)
		return;
	pthread_mutex_lock(&m->mu);
	if (q->listed)
		unlist(m, q);
	pthread_mutex_unlock(&m->mu);
	free_req(q);
	*con_cls = NULL;
}

/* mu held: every pending request of key k (NULL: all) gets verdict v and
 * leaves the list; their connections go to c[] (at most MAX_PENDING), to be
 * resumed once mu is released (a suspended connection is neither polled nor
 * timed out, so it stays valid until then). Returns how many. */
static size_t resolve(gk_sup_msrv *m, const gk_review_key *k, enum verdict v, struct MHD_Connection **c)
{
	size_t n = 0;
	for (mreq **p = &m->pending; *p;) {
		mreq *q = *p;
		if (k && CRYPTO_memcmp(q->k.d, k->d, sizeof(k->d)) != 0) {
			p = &q->next;
			continue;
		}
		*p = q->next;
		q->listed = false;
		m->n_pending--;
		q->v = v;
		c[n++] = q->c;
	}
	return n;
}

static void resume(struct MHD_Connection **c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		MHD_resume_connection(c[i]);
}

/* ---- loop side: the reviews -------------------------------------------------------- */

static void review_free(gk_sup_msrv *m, review *r)
{
	for (review **p = &m->reviews; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	if (r->timer)
		gk_loop_cancel(m->sup->loop, r->timer);
	OPENSSL_cleanse(r->token, strlen(r->token));
	free(r->token);
	free(r);
}

static void ask(review *r);

static void on_retry(gk_loop *l, gk_timer_id id, void *user)
{
	review *r = user;
	r->timer = 0;
	ask(r);
}

static void finish(review *r, enum verdict v, const char *result)
{
	gk_sup_msrv *m = r->m;
	gk_metric_add(gk_sup_metric(m->sup, GK_SUP_M_REVIEWS), 1, GK_LV(result));
	struct MHD_Connection *c[MAX_PENDING];
	pthread_mutex_lock(&m->mu);
	if (v != V_ERROR)
		gk_review_cache_put(&m->cache, &r->k,
				    v == V_ALLOWED ? GK_REVIEW_ALLOWED
				    : v == V_DENIED ? GK_REVIEW_DENIED
						    : GK_REVIEW_UNAUTHENTICATED,
				    gk_sup_now_ms());
	size_t n = resolve(m, &r->k, v, c);
	pthread_mutex_unlock(&m->mu);
	resume(c, n);
	review_free(m, r);
}

static void on_reply(void *user, int code, ProtobufCMessage *reply, const char *errmsg)
{
	review *r = user;
	r->in_flight = false;
	Gpukmm__AccessReviewReply *a = (Gpukmm__AccessReviewReply *)reply;
	if (code == GK_CANCELLED) { /* the client is closing: stop() frees the rest */
		gk_ipc_free(reply);
		return;
	}
	if (code != GK_OK) {
		GK_WARN("metrics: token review failed: %s: %s (answering 503)", gk_code_name(code), errmsg ? errmsg : "");
		finish(r, V_ERROR, "error");
	} else if (a->state != GPUKMM__REVIEW_STATE__REVIEW_DONE) {
		if (gk_sup_now_ms() - r->started_ms > REVIEW_DEADLINE_MS) {
			GK_WARN("metrics: token review not done within %d ms (answering 503)", REVIEW_DEADLINE_MS);
			finish(r, V_ERROR, "error");
		} else {
			r->timer = gk_loop_timer(r->m->sup->loop, RETRY_MS, on_retry, r);
		}
	} else if (a->allowed) {
		finish(r, V_ALLOWED, "allowed");
	} else {
		GK_INFO("metrics: %s %s: %s", a->authenticated ? "denied" : "unauthenticated",
			a->user && *a->user ? a->user : "(no user)", a->reason ? a->reason : "");
		finish(r, a->authenticated ? V_DENIED : V_UNAUTHENTICATED, a->authenticated ? "denied" : "unauthenticated");
	}
	gk_ipc_free(reply);
}

static void ask(review *r)
{
	Gpukmm__AccessReviewRequest q = GPUKMM__ACCESS_REVIEW_REQUEST__INIT;
	q.token = r->token;
	q.verb = "get";
	q.path = "/metrics";
	gk_err err = { 0 };
	if (gk_ipc_call_async(r->m->reviewer, &gpukmm__access_review__descriptor, "Review", &q.base, RPC_TIMEOUT_MS,
			      on_reply, r, &err) != 0) {
		GK_WARN("metrics: token review: %s (answering 503)", err.msg);
		finish(r, V_ERROR, "error");
		return;
	}
	r->in_flight = true;
}

/* Loop: new suspended requests: one review per key. */
static void on_wake(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_sup_msrv *m = user;
	uint64_t v;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return;
	review *start = NULL;
	pthread_mutex_lock(&m->mu);
	for (mreq *q = m->pending; q; q = q->next) {
		if (q->asking)
			continue;
		q->asking = true;
		review *r = NULL;
		for (review *x = m->reviews; x && !r; x = x->next)
			if (CRYPTO_memcmp(x->k.d, q->k.d, sizeof(q->k.d)) == 0)
				r = x;
		for (review *x = start; x && !r; x = x->next)
			if (CRYPTO_memcmp(x->k.d, q->k.d, sizeof(q->k.d)) == 0)
				r = x;
		if (r)
			continue; /* its review is running: resolved with it */
		if (!(r = calloc(1, sizeof(*r)))) {
			q->asking = false;
			continue;
		}
		r->m = m;
		r->k = q->k;
		r->token = q->token; /* handed over */
		q->token = NULL;
		r->started_ms = gk_sup_now_ms();
		r->next = start;
		start = r;
	}
	pthread_mutex_unlock(&m->mu);
	while (start) {
		review *r = start;
		start = r->next;
		r->next = m->reviews;
		m->reviews = r;
		ask(r);
	}
}

static void on_reviewer(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_client_dispatch(user);
}

/* ---- certificate ------------------------------------------------------------------- */

static void check_cert(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sup_msrv *m = user;
	m->cert_timer = 0;
	char *cert = NULL, *key = NULL, msg[512] = "";
	int r = gk_tls_files_check(&m->certs, &cert, &key, msg, sizeof(msg));
	if (r > 0) {
		gk_err err;
		if (gk_tls_cert_current(cert, m->certs.cert_path, time(NULL), msg, sizeof(msg)) != 0) {
			/* msg says why */
		} else if (gk_httpd_swap(&m->http, cert, key, gk_sup_now_ms(), &err) == 0) {
			GK_INFO("metrics: serving the new certificate from %s", m->certs.cert_path);
			gk_tls_files_served(&m->certs);
		} else {
			snprintf(msg, sizeof(msg), "%s", err.msg);
		}
		free(cert);
		gk_tls_free_secret(key);
	}
	/* said once per version and reason; read again at every check */
	if (r != 0 && msg[0] && gk_tls_files_refuse(&m->certs, msg))
		GK_WARN("metrics: new certificate files not usable yet, the previous certificate is still served: %s",
			msg);
	gk_httpd_reap(&m->http, gk_sup_now_ms());
	m->cert_timer = gk_loop_timer(l, CERT_CHECK_MS, check_cert, m);
}

static int serving_pair(gk_sup_msrv *m, const gk_sup_opts *o, char **cert, char **key, gk_err *err)
{
	*cert = *key = NULL;
	if (o->metrics_cert) {
		char msg[512];
		m->cert_files = true;
		m->certs.cert_path = o->metrics_cert;
		m->certs.key_path = o->metrics_key;
		if (gk_tls_files_load(&m->certs, cert, key, msg, sizeof(msg)))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "--metrics-tls-cert: %s", msg);
		return 0;
	}
	char host[256] = "localhost";
	gethostname(host, sizeof(host) - 1);
	const char *sans[] = { host, "localhost", "IP:127.0.0.1", "IP:::1" };
	int rc = gk_tls_self_signed("gpukmm-metrics", sans, sizeof(sans) / sizeof(sans[0]), 365, cert, key, err);
	if (rc == 0)
		GK_INFO("metrics: no --metrics-tls-cert: serving a self-signed certificate (CN gpukmm-metrics, "
			"valid 1 year); scrapers must skip verification or pin it");
	return rc;
}

int gk_sup_msrv_start(gk_sup *s, gk_err *err)
{
	const gk_sup_opts *o = &s->opts;
	gk_sup_msrv *m = calloc(1, sizeof(*m));
	if (!m)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	s->msrv = m;
	m->sup = s;
	m->secure = !o->metrics_insecure;
	m->efd = -1;
	m->http = (gk_httpd)GK_HTTPD_INIT;
	m->http.tls = m->secure;
	m->http.o = (gk_httpd_opts){ .handler = handler, .cls = m, .completed = completed, .conn_limit = 64,
				     .timeout_s = 30, .suspend_resume = true };
	pthread_mutex_init(&m->mu, NULL);
	gk_review_cache_init(&m->cache, 60000, 10000);
	int rc = gk_sup_http_init(s, err);
	if (rc)
		return rc;
	if (m->secure) {
		char url[4200];
		/* a service of ours, or the socket of one in another container (ipc://...) */
		if (snprintf(url, sizeof(url), strstr(o->metrics_reviewer, "://") ? "%.0s%s" : "ipc://%s/%s.sock",
			     o->runtime_dir, o->metrics_reviewer) >= (int)sizeof(url))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "runtime dir path too long");
		gk_ipc_opts io = { .reconnect_min_ms = 10, .reconnect_max_ms = 500 };
		if ((m->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
			return gk_err_set(err, GK_INTERNAL, "eventfd: %s", strerror(errno));
		if ((rc = gk_loop_add_fd(s->loop, m->efd, EPOLLIN, on_wake, m, err)) ||
		    (rc = gk_ipc_client_open(&m->reviewer, url, &io, err)) ||
		    (rc = gk_loop_add_fd(s->loop, gk_ipc_client_fd(m->reviewer), EPOLLIN, on_reviewer, m->reviewer, err)))
			return rc;
	}
	char *cert = NULL, *key = NULL;
	if ((m->secure && (rc = serving_pair(m, o, &cert, &key, err))) ||
	    (rc = gk_httpd_listen(&m->http, o->metrics_listen, "--metrics-listen", err)) ||
	    (rc = gk_httpd_start(&m->http, cert, key, err))) {
		free(cert);
		gk_tls_free_secret(key);
		return rc;
	}
	free(cert);
	gk_tls_free_secret(key);
	if (m->cert_files)
		m->cert_timer = gk_loop_timer(s->loop, CERT_CHECK_MS, check_cert, m);
	const char *colon = strrchr(o->metrics_listen, ':');
	int hl = colon ? (int)(colon - o->metrics_listen) : 0;
	if (m->secure)
		GK_INFO("metrics: listening on %.*s:%d (https /metrics; bearer tokens reviewed by %s)", hl,
			o->metrics_listen, m->http.port, o->metrics_reviewer);
	else
		GK_WARN("metrics: listening on %.*s:%d (plain http /metrics, NO authentication: --metrics-insecure)",
			hl, o->metrics_listen, m->http.port);
	return 0;
}

void gk_sup_msrv_stop(gk_sup *s)
{
	gk_sup_msrv *m = s->msrv;
	if (!m)
		return;
	/* suspended requests are answered 503 before the daemon goes */
	struct MHD_Connection *c[MAX_PENDING];
	pthread_mutex_lock(&m->mu);
	m->stopping = true;
	size_t n = resolve(m, NULL, V_ERROR, c);
	pthread_mutex_unlock(&m->mu);
	resume(c, n);
	gk_httpd_stop(&m->http);
	if (m->reviewer) {
		if (s->loop)
			gk_loop_del_fd(s->loop, gk_ipc_client_fd(m->reviewer));
		gk_ipc_client_close(m->reviewer); /* in-flight calls: GK_CANCELLED */
	}
	while (m->reviews)
		review_free(m, m->reviews);
	if (m->cert_timer && s->loop)
		gk_loop_cancel(s->loop, m->cert_timer);
	if (m->efd >= 0) {
		if (s->loop)
			gk_loop_del_fd(s->loop, m->efd);
		close(m->efd);
	}
	pthread_mutex_destroy(&m->mu);
	free(m);
	s->msrv = NULL;
}
