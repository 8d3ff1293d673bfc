/* lib/kube private: shared between client.c, mux.c, watch.c. Not installed. */
#ifndef GPUKMM_KUBE_INTERNAL_H
#define GPUKMM_KUBE_INTERNAL_H

#include <curl/curl.h>
#include <pthread.h>

#include "gpukmm/kube.h"

typedef struct gk_kube_disc_entry gk_kube_disc_entry;

/* The credential of an exec plugin (client.c): the current one is in the
 * client (token, cfg.cert/cfg.key); a refresh before expiry runs on a thread
 * of its own and is picked up by the next request. */
typedef struct gk_kube__execst {
	pthread_mutex_t mu;
	pthread_t th;
	bool running;               /* a refresh thread exists (to be joined) */
	bool done;                  /* under mu: it finished, result below */
	int rc;
	gk_err err;
	gk_kube_cred next;
	int64_t expiry_ms, got_ms;  /* current credential, unix ms (0 = no expiry) */
	int64_t fail_ms;            /* monotonic ms of the last failed run, 0 = none */
	int64_t forced_ms;          /* monotonic ms of the last run forced by a 401, 0 = none */
	uint64_t runs;
} gk_kube__execst;

struct gk_kube_client {
	gk_kube_config cfg;         /* deep copy */
	gk_kube_opts opts;
	char *user_agent;
	CURL *easy;                 /* blocking requests: one handle = connection reuse */
	char *token;                /* current bearer token (never logged) */
	int64_t token_read_ms;      /* monotonic time of the last read, 0 = never */
	gk_kube_bucket bucket;
	gk_kube_client_stats stats;
	gk_kube_disc_entry *disc;   /* discovery cache (list) */
	gk_kube__execst *ex;        /* exec plugin state, NULL = no plugin */
	char *url_base;             /* tls-server-name: server URL naming it, else NULL */
	struct curl_slist *connect_to; /* tls-server-name: name:port -> host:port */
	char *host_hdr;             /* tls-server-name: "Host: host:port" */
};

/* Response accumulation with a cap. */
typedef struct gk_kube_buf {
	char *data;
	size_t len, cap, max;
	bool overflow;
} gk_kube_buf;

size_t gk_kube__write_buf(char *ptr, size_t size, size_t nmemb, void *user);
size_t gk_kube__header_cb(char *ptr, size_t size, size_t nmemb, void *user);

/* Current token, re-read from token_file when stale or when force; with an
 * exec plugin: refreshed before it expires, re-run when expired or when force
 * (a 401). May be NULL. Updates cfg.cert/cfg.key for a plugin's certificate. */
const char *gk_kube__token(gk_kube_client *c, bool force);
/* Can a 401 be cured by re-reading the credential (token file, exec plugin)? */
bool gk_kube__refreshable(const gk_kube_client *c);
/* Common options of every handle: URL, TLS, auth, timeouts, keepalive. `hdrs`
 * receives the header list the caller frees after the transfer. */
int gk_kube__setup(gk_kube_client *c, CURL *e, const char *method, const char *path,
		   const char *content_type, struct curl_slist **hdrs, gk_err *err);
int64_t gk_kube__mono_ms(void);
/* Fill st/err from a finished transfer (curl result, HTTP status, body). */
int gk_kube__result(gk_kube_client *c, CURLcode cc, long http, const char *errbuf,
		    const gk_kube_buf *body, gk_kube_status *st, const char *method,
		    const char *path, gk_err *err);
void gk_kube__disc_free(gk_kube_client *c);
/* Count and time one finished request (metrics.c): gpukmm_api_requests_total
 * and gpukmm_api_request_duration_seconds{verb,code}; with opts.qps_until_apf,
 * a response showing API Priority and Fairness turns the client's limit off. */
void gk_kube__observe(gk_kube_client *c, CURL *e);
/* A request waited wait_ms in the client-side limiter (stats and metric). */
void gk_kube__throttled(gk_kube_client *c, int64_t wait_ms);

/* A verb as a request (verbs.c): shared by the blocking and the async paths. */
#define GK_KUBE__PATH_CAP 4096 /* the path with its query (a list's continue token) */
typedef struct gk_kube__rq {
	const char *method;
	char path[GK_KUBE__PATH_CAP];
	const char *ct;          /* content type, NULL = no body */
	char *body;              /* owned, NULL = none */
	size_t body_len;
} gk_kube__rq;
int gk_kube__rq_get(gk_kube__rq *q, const gk_kube_ref *r, gk_err *err);
int gk_kube__rq_create(gk_kube__rq *q, const gk_kube_ref *r, const cJSON *obj, gk_err *err);
/* GET of the collection of r with the list options' query (limit, default
 * 500; selectors; continue, else resourceVersion[Match]). */
int gk_kube__rq_list(gk_kube__rq *q, const gk_kube_ref *r, const gk_kube_list_opts *lo, const char *cont,
		     gk_err *err);
int gk_kube__rq_update(gk_kube__rq *q, const gk_kube_ref *r, const cJSON *obj, gk_err *err);
int gk_kube__rq_patch(gk_kube__rq *q, const gk_kube_ref *r, enum gk_kube_patch_type type,
		      const char *body, const char *field_manager, bool force, gk_err *err);
int gk_kube__rq_delete(gk_kube__rq *q, const gk_kube_ref *r, const gk_kube_delete_opts *d,
		       gk_err *err);
void gk_kube__rq_free(gk_kube__rq *q);
/* The API path of r into buf, or INVALID_ARGUMENT naming the bad reference. */
int gk_kube__path_of(const gk_kube_ref *r, char *buf, size_t cap, gk_err *err);
/* Discovery cache update from a finished GET of a group-version (discovery.c):
 * rc = the request's code, j = its body (borrowed). */
int gk_kube__disc_store(gk_kube_client *c, const char *group, const char *version, int rc,
			const cJSON *j, gk_err *err);
int gk_kube__disc_lookup(gk_kube_client *c, const char *group, const char *version,
			 const char *resource);

#endif

/* ---- mux private ---- */
typedef struct gk_kube__task gk_kube__task;
struct gk_kube__task {
	gk_kube__task *next, *prev;
	int64_t due_ms;                              /* -1 = not armed */
	void (*fire)(gk_kube__task *t);              /* due: called from mux_run */
	void (*done)(gk_kube__task *t, CURLcode cc); /* its easy handle finished */
	void (*kill)(gk_kube__task *t);              /* mux freed under it (async calls) */
};

struct gk_kube_mux {
	gk_kube_client *c;
	CURLM *multi;
	int epfd;
	int64_t curl_due_ms;     /* -1 = none */
	gk_kube__task tasks;     /* list head */
	size_t calls, max_calls; /* async calls in flight (queued for QPS included) */
	struct gk_loop *loop;    /* gk_kube_mux_attach: fd + timer managed here */
	uint64_t timer;          /* gk_timer_id, 0 = none */
	int64_t timer_due_ms;
	uint64_t calls_started, calls_rejected;
};

void gk_kube__mux_add_task(gk_kube_mux *m, gk_kube__task *t);
void gk_kube__mux_del_task(gk_kube_mux *m, gk_kube__task *t);
/* The easy handle's CURLOPT_PRIVATE must be the task. */
int gk_kube__mux_start(gk_kube_mux *m, CURL *e);
void gk_kube__mux_stop(gk_kube_mux *m, CURL *e);
/* The mux's next deadline may have moved: re-arm the loop timer (attached only). */
void gk_kube__mux_changed(gk_kube_mux *m);
