/* gpukmm — Kubernetes API client (libcurl + cJSON), DESIGN.md §4.
 *
 * Pieces, from pure to I/O:
 *   config     in-cluster / kubeconfig (libyaml) → gk_kube_config
 *   path       (group, version, resource, namespace, name, subresource) → URL path
 *   status     HTTP status + `Status` body → gk_code, reason, message, Retry-After
 *   bucket     client-side QPS limit (token bucket), backoff (0.8 s ×2 → 30 s, jitter)
 *   framer     watch stream → one JSON document at a time, any chunking, bad lines skipped
 *   diff       relist: which cached keys vanished (synthesised DELETEs)
 *   client     blocking verbs on one reused connection (get/list/create/update/patch/delete)
 *   mux        curl multi + epoll behind one pollable fd: lists and watches of many
 *              kinds in one event loop (gk_kube_watch: list → watch → 410 → relist)
 *   discovery  does group/version/resource exist (cached with a TTL)
 *
 * Errors are gk_code values (err.h); HTTP classes map as: 400/422 INVALID_ARGUMENT,
 * 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 ALREADY_EXISTS
 * (reason AlreadyExists) or ABORTED (conflict), 410 OUT_OF_RANGE (expired RV /
 * continue token), 429 RESOURCE_EXHAUSTED, 500 INTERNAL, 502/503 UNAVAILABLE,
 * 504 DEADLINE_EXCEEDED; transport failures UNAVAILABLE. Tokens never reach logs. */
#ifndef GPUKMM_KUBE_H
#define GPUKMM_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "gpukmm/err.h"

/* ---- config ------------------------------------------------------------ */

typedef struct gk_kube_blob {
	unsigned char *data;     /* decoded PEM bytes (kubeconfig *-data), NULL if none */
	size_t len;
} gk_kube_blob;

typedef struct gk_kube_config {
	char *server;            /* "https://host:port" (no trailing slash) */
	char *ca_file;           /* or ca (in memory) */
	gk_kube_blob ca;
	char *cert_file;         /* client certificate: file or in memory */
	gk_kube_blob cert;
	char *key_file;
	gk_kube_blob key;
	char *token;             /* static token (kubeconfig `token`) */
	char *token_file;        /* re-read every 60 s and after a 401 */
	bool insecure;           /* only if the kubeconfig says insecure-skip-tls-verify */
	char *tls_server_name;   /* kubeconfig tls-server-name: the name sent as SNI and
				  * verified in the server's certificate (the TCP
				  * connection still goes to server's host), optional */
	struct gk_kube_exec *exec; /* exec credential plugin of the user, NULL = none */
} gk_kube_config;

/* An exec credential plugin (kubeconfig users[].user.exec), the way EKS, GKE
 * and AKS authenticate: run `command args...` (no shell; a command without '/'
 * is looked up in $PATH, one with '/' but relative was resolved against the
 * kubeconfig that names it) with env added to ours and KUBERNETES_EXEC_INFO
 * (spec.interactive false, spec.cluster when provideClusterInfo), stdin
 * /dev/null, stderr to our log, a bounded run time; its stdout is an
 * ExecCredential of the same apiVersion with status.token or
 * status.clientCertificateData + clientKeyData (PEM) and optionally
 * status.expirationTimestamp. We are never interactive: interactiveMode
 * Always is refused when the kubeconfig is read. Used only when the user has
 * no token, tokenFile or client certificate (client-go's precedence). */
#define GK_KUBE_EXEC_TIMEOUT_MS 30000
typedef struct gk_kube_exec {
	char *user;              /* the kubeconfig user's name (messages) */
	char *command;
	char **args;             /* NULL-terminated */
	char **env;              /* "NAME=value", NULL-terminated */
	char *api_version;       /* client.authentication.k8s.io/v1 or /v1beta1 */
	char *install_hint;      /* shown when the command cannot be run, may be NULL */
	bool provide_cluster_info;
	int timeout_ms;          /* 0 = GK_KUBE_EXEC_TIMEOUT_MS */
} gk_kube_exec;

/* A credential from a plugin. */
typedef struct gk_kube_cred {
	char *token;             /* or cert + key (PEM) */
	gk_kube_blob cert, key;
	int64_t expiry_ms;       /* expirationTimestamp, unix ms; 0 = none (kept until a 401) */
} gk_kube_cred;

/* Run the plugin of c->exec once (blocking, at most its timeout). 0 and *out
 * filled, or an error naming the user and the command (and the installHint
 * when the command is not there). Never logs the credential. */
int gk_kube_exec_run(const gk_kube_config *c, gk_kube_cred *out, gk_err *err);
/* Pure: the plugin's stdout → credential (checks kind, apiVersion, status). */
int gk_kube_exec_parse(const gk_kube_exec *x, const char *out, size_t len, gk_kube_cred *cred,
		       gk_err *err);
/* KUBERNETES_EXEC_INFO's value for c (malloc'd JSON), NULL on OOM. */
char *gk_kube_exec_info(const gk_kube_config *c);
void gk_kube_cred_free(gk_kube_cred *cred);
void gk_kube_exec_free(gk_kube_exec *x);
int gk_kube_exec_dup(gk_kube_exec **dst, const gk_kube_exec *src);
/* metav1.Time / RFC 3339 ("2024-01-02T03:04:05Z", fractions and offsets too) → unix ms; -1 bad. */
int64_t gk_kube_parse_time(const char *s);

/* Default in-cluster paths. `sa_dir` NULL = /var/run/secrets/kubernetes.io/serviceaccount.
 * Reads KUBERNETES_SERVICE_HOST / _PORT (IPv6 hosts bracketed). */
int gk_kube_config_in_cluster(gk_kube_config *c, const char *sa_dir, gk_err *err);
/* Parse kubeconfig YAML text. `context` NULL = current-context. `base_dir` resolves
 * relative file paths (the kubeconfig's directory), may be NULL. */
int gk_kube_config_parse(gk_kube_config *c, const char *yaml, size_t len, const char *context,
			 const char *base_dir, gk_err *err);
/* Read a kubeconfig file. */
int gk_kube_config_file(gk_kube_config *c, const char *path, const char *context, gk_err *err);
/* A ':'-separated list of kubeconfig files merged with kubectl's rules: files
 * that do not exist are skipped (at least one must exist); the first file to
 * name a cluster, context or user wins it; current-context comes from the
 * first file that sets one; relative paths are resolved against the file that
 * names them. A file that exists but cannot be read or parsed is an error. */
int gk_kube_config_files(gk_kube_config *c, const char *list, const char *context, gk_err *err);
/* The usual chain: explicit path (one file, like kubectl --kubeconfig), else
 * $KUBECONFIG (the merged list), else in-cluster, else $HOME/.kube/config. */
int gk_kube_config_load(gk_kube_config *c, const char *kubeconfig, gk_err *err);
/* The process's API token file (a service's --token-file / $GPUKMM_TOKEN_FILE,
 * set once by gk_svc_init): every later gk_kube_config_load of this process
 * reads its token from there, whatever the configuration names. NULL: none. */
void gk_kube_config_token_override(const char *path);
void gk_kube_config_free(gk_kube_config *c);

/* ---- paths ------------------------------------------------------------- */

typedef struct gk_kube_ref {
	const char *group;       /* "" or NULL = core ("/api/v1") */
	const char *version;     /* "v1" */
	const char *resource;    /* plural: "nodes" */
	const char *ns;          /* NULL/"" = cluster-scoped or all namespaces */
	const char *name;        /* NULL = collection */
	const char *subresource; /* "status", NULL */
} gk_kube_ref;

/* Writes "/apis/<g>/<v>/namespaces/<ns>/<res>/<name>/<sub>" (segments
 * percent-escaped). Returns the length, or -1 if it does not fit / a field is
 * invalid (missing version/resource, subresource without name). */
int gk_kube_path(char *buf, size_t cap, const gk_kube_ref *r);
/* Append "?k=v" / "&k=v" with v percent-escaped. Returns new length or -1. */
int gk_kube_query_add(char *buf, size_t cap, const char *key, const char *value);

/* ---- status decoding ---------------------------------------------------- */

typedef struct gk_kube_status {
	long http;               /* HTTP status, 0 = transport failure */
	char reason[64];         /* Status.reason ("NotFound", "Expired", "Conflict"...) */
	char message[256];       /* Status.message */
	int retry_after_s;       /* Retry-After header or details.retryAfterSeconds, -1 = none */
	char details_kind[64];   /* Status.details.kind ("modules"): a NotFound naming the object is */
	char details_name[254];  /* Status.details.name  an absence; a 404 without them is not */
} gk_kube_status;

/* Map HTTP status (+ reason) to a gk_code. 2xx → GK_OK. */
int gk_kube_code_of(long http, const char *reason);
/* The safety rule (ARCHITECTURE.md §4): a 404 confirms that object `name` is gone only
 * when its Status names it (details.name); a 404 of the path (an API not served, a
 * proxy) does not. */
bool gk_kube_gone(int code, const gk_kube_status *st, const char *name);
/* Fill st->reason/message from a Status JSON body (tolerates non-Status bodies). */
void gk_kube_status_decode(gk_kube_status *st, const char *body, size_t len);
/* Fill from a parsed Status object (e.g. a watch ERROR event's object); returns
 * its code (Status.code, 0 if absent). */
long gk_kube_status_from_json(gk_kube_status *st, const cJSON *status);
/* Retry-After header value: seconds or HTTP date (now = unix seconds). -1 invalid. */
int gk_kube_parse_retry_after(const char *v, int64_t now_s);
/* A Kubernetes timestamp (metav1.Time: RFC 3339, UTC, whole seconds), e.g.
 * "2015-10-21T07:28:00Z", for unix_s (seconds since the epoch; callers pass
 * gk_now_ms() / 1000). Needs GK_KUBE_TIME_LEN bytes; returns the length, 0 if
 * cap is too small (buf is then ""). */
#define GK_KUBE_TIME_LEN 32
size_t gk_kube_time(char *buf, size_t cap, int64_t unix_s);
/* The other way: "2015-10-21T07:28:00Z" (a fraction of a second is dropped)
 * → unix seconds; -1 when it is not that form (UTC only). */
int64_t gk_kube_time_parse(const char *s);
/* The verb of a request as the API server counts it: GET, LIST (a GET of a
 * collection), WATCH (?watch=true or a /watch/ path), POST, PUT, PATCH,
 * DELETE, HEAD, else OTHER. path: the URL path with its query. */
const char *gk_kube_verb(const char *method, const char *path);
/* Should the operation be retried (after a backoff)? 429, 5xx, transport, 409-conflict. */
bool gk_kube_retryable(int code);

/* ---- rate limit and backoff (pure: time is passed in, ms) --------------- */

typedef struct gk_kube_bucket {
	double qps, burst, tokens;
	int64_t last_ms;
} gk_kube_bucket;

void gk_kube_bucket_init(gk_kube_bucket *b, double qps, int burst, int64_t now_ms);
/* Take one token; returns 0 if allowed now, else the ms to wait (a token is
 * reserved: the caller proceeds after waiting). qps <= 0 = unlimited. */
int64_t gk_kube_bucket_take(gk_kube_bucket *b, int64_t now_ms);

typedef struct gk_kube_backoff {
	int64_t initial_ms, max_ms, reset_after_ms; /* 800, 30000, 120000 */
	double factor, jitter;                      /* 2.0, 1.0 */
	int64_t cur_ms;                             /* next base delay */
	int64_t last_ms;                            /* time of the last failure, 0 = none */
	uint64_t rng;                               /* xorshift state */
} gk_kube_backoff;

void gk_kube_backoff_init(gk_kube_backoff *b, uint64_t seed);
/* Next delay after a failure at now_ms: base × (1 + jitter·U[0,1)), base doubles
 * up to max; resets to initial when the previous failure is older than reset_after. */
int64_t gk_kube_backoff_next(gk_kube_backoff *b, int64_t now_ms);
void gk_kube_backoff_reset(gk_kube_backoff *b);
/* Uniform random in [lo, hi] from the backoff's generator (timeoutSeconds). */
int64_t gk_kube_rand_range(gk_kube_backoff *b, int64_t lo, int64_t hi);

/* The wait before re-reading after a 409 Conflict (optimistic concurrency):
 * GK_KUBE_CONFLICT_MS doubled per 409 in a row — *streak counts them and is
 * advanced here (the caller zeroes it after a success). The 409 after
 * GK_KUBE_CONFLICT_ATTEMPTS in a row waits pause_ms instead and starts the
 * streak over: 20, 40, 80, 160, 320, pause_ms, 20, … */
#define GK_KUBE_CONFLICT_MS 20
#define GK_KUBE_CONFLICT_ATTEMPTS 5
int gk_kube_conflict_delay(int *streak, int pause_ms);

/* ---- watch framing (pure) ---------------------------------------------- */

typedef struct gk_kube_framer gk_kube_framer;
/* Called once per complete, parsed document. `doc` is borrowed and read-only:
 * it lives in the framer's arena until the callback returns (never
 * cJSON_Delete or modify it; cJSON_Duplicate what must outlive the call).
 * Return 0 to go on, non-zero to stop: feed then drops the rest of the stream
 * and returns GK_CANCELLED (e.g. an in-stream 410). */
typedef int (*gk_kube_doc_fn)(void *user, const cJSON *doc);

/* max_doc: the largest document accepted (0 = 16 MiB). */
gk_kube_framer *gk_kube_framer_new(size_t max_doc);
void gk_kube_framer_free(gk_kube_framer *f);
void gk_kube_framer_reset(gk_kube_framer *f);
/* Feed bytes. Documents end at their closing brace (newline or not); a line that
 * is not a JSON object, or does not parse, is skipped and counted. Returns 0, or
 * GK_RESOURCE_EXHAUSTED when one document exceeds max_doc (stream must restart),
 * GK_CANCELLED when fn asked to stop. */
int gk_kube_framer_feed(gk_kube_framer *f, const char *data, size_t len, gk_kube_doc_fn fn,
			void *user);
/* At end of stream: a trailing complete document without newline is emitted by
 * feed already; anything left is a truncated document: counted bad, dropped. */
void gk_kube_framer_finish(gk_kube_framer *f);
uint64_t gk_kube_framer_bad(const gk_kube_framer *f);
uint64_t gk_kube_framer_docs(const gk_kube_framer *f);

/* ---- relist diff (pure) ------------------------------------------------ */

/* Keys in `old` that are not in `cur` (both arrays of "ns/name" strings, any
 * order, not modified). Calls fn for each, in sorted order. Returns the count,
 * or -1 on allocation failure. */
long gk_kube_relist_gone(const char *const *old, size_t n_old, const char *const *cur,
			 size_t n_cur, void (*fn)(void *user, const char *key), void *user);
/* "ns/name" (or "name" when cluster-scoped) of an object JSON; NULL if no name. */
char *gk_kube_obj_key(const cJSON *obj);

/* ---- well-formed answers (pure) ---------------------------------------------
 * A 200 is not enough to believe an answer: a proxy or an aggregated server can
 * send `{}`, `null`, a Status or half a document. Before anything is read as an
 * absence, the answer must be what was asked for. GK_OK, or GK_INTERNAL with
 * err saying what is wrong. */

/* A list of group/version (one page): an object, kind "...List" and apiVersion
 * group/version when present, an `items` array of objects that each have a
 * metadata.name, a non-empty metadata.resourceVersion. */
int gk_kube_check_list(const cJSON *j, const char *group, const char *version, gk_err *err);
/* A group-version's discovery document: kind APIResourceList when present,
 * groupVersion = group/version, a `resources` array of objects with a name. */
int gk_kube_check_resource_list(const cJSON *j, const char *group, const char *version, gk_err *err);

/* ---- label and field selectors (pure) ------------------------------------------
 *
 * Label selectors: "a=b", "a==b", "a!=b", "a in (x,y)", "a notin (x)", "a", "!a",
 * comma-separated, all terms ANDed (Kubernetes labels.Parse syntax).
 * Field selectors: "path=v", "path==v", "path!=v", comma-separated, where path is a
 * dotted JSON path into the object (metadata.name, spec.nodeName, involvedObject.uid...). */

enum gk_sel_op { GK_SEL_EQ, GK_SEL_NE, GK_SEL_IN, GK_SEL_NOTIN, GK_SEL_EXISTS, GK_SEL_NOTEXISTS };

#define GK_SEL_MAX_TERMS 32
#define GK_SEL_MAX_VALUES 32

typedef struct gk_sel_term {
	enum gk_sel_op op;
	char *key;
	int nvalues;
	char *values[GK_SEL_MAX_VALUES];
} gk_sel_term;

typedef struct gk_selector {
	int nterms;
	gk_sel_term terms[GK_SEL_MAX_TERMS];
} gk_selector;

/* Parse; NULL or "" gives the empty selector (matches everything). Errors:
 * INVALID_ARGUMENT ("unable to parse requirement: ..."), RESOURCE_EXHAUSTED. */
int gk_label_selector_parse(const char *s, gk_selector *out, gk_err *err);
int gk_field_selector_parse(const char *s, gk_selector *out, gk_err *err);
void gk_selector_free(gk_selector *s);
/* One term against a value (NULL = the label is absent). */
int gk_selector_term_match(const gk_sel_term *t, const char *val);
/* labels: a JSON object (metadata.labels, may be NULL). */
int gk_label_selector_match_json(const gk_selector *s, const cJSON *labels);
/* labels: typed (proto/kube.proto KeyValue list). */
struct Gpukmm__KeyValue;
int gk_label_selector_match_kv(const gk_selector *s, const struct Gpukmm__KeyValue *const *kv, size_t n);
/* obj: the whole object. */
int gk_field_selector_match_json(const gk_selector *s, const cJSON *obj);
/* Value at a dotted path as a string ("" if absent; numbers and bools printed). */
void gk_field_value(const cJSON *obj, const char *path, char *buf, size_t cap);

/* ---- blocking client ------------------------------------------------------ */

typedef struct gk_kube_client gk_kube_client;

/* The client-side limit of the controller's writing services (--kube-qps):
 * a cold start or a fleet-wide change writes a few requests per policy and per
 * object at once; client-go's 5/s (burst 10) would queue them 200 ms apart. */
#define GK_KUBE_WRITER_QPS 50
#define GK_KUBE_WRITER_BURST 100

typedef struct gk_kube_opts {
	double qps;              /* 0 = 5 (client-go), <0 = unlimited */
	int burst;               /* 0 = 10 */
	/* the qps limit stands down for good once a response shows that the server
	 * applies API Priority and Fairness (X-Kubernetes-PF-* headers): the server
	 * then queues and sheds by priority, and SIG API Machinery advises clients
	 * to rely on it (controller-runtime's default since 2025) */
	bool qps_until_apf;
	int timeout_ms;          /* whole request, 0 = 30000 (not for watches) */
	int connect_timeout_ms;  /* 0 = 10000 */
	size_t max_response;     /* 0 = 64 MiB */
	int token_refresh_ms;    /* 0 = 60000 */
	const char *user_agent;  /* NULL = "gpukmm" */
} gk_kube_opts;

int gk_kube_client_new(gk_kube_client **out, const gk_kube_config *cfg, const gk_kube_opts *opts,
		       gk_err *err);
void gk_kube_client_free(gk_kube_client *c);

typedef struct gk_kube_client_stats {
	uint64_t requests, errors, unauthorized, token_reloads, throttled_ms;
	bool apf;                /* qps_until_apf: the server showed APF, the limit is off */
} gk_kube_client_stats;
void gk_kube_client_stats_get(const gk_kube_client *c, gk_kube_client_stats *out);

/* Raw request: `path` includes the query. body may be NULL. On 2xx *out (if
 * non-NULL) gets the parsed JSON (NULL for an empty body). On error returns the
 * code, fills st (if non-NULL) and err. A 401 re-reads the token and retries once. */
int gk_kube_request(gk_kube_client *c, const char *method, const char *path,
		    const char *content_type, const char *body, size_t body_len, cJSON **out,
		    gk_kube_status *st, gk_err *err);

int gk_kube_get(gk_kube_client *c, const gk_kube_ref *r, cJSON **out, gk_kube_status *st,
		gk_err *err);

typedef struct gk_kube_list_opts {
	const char *label_selector;
	const char *field_selector;
	const char *resource_version;    /* NULL = unset (consistent read) */
	const char *resource_version_match;
	int limit;                       /* page size, 0 = 500 */
} gk_kube_list_opts;
/* Every item of every page → fn (borrowed; detach to keep). The list's
 * resourceVersion is copied into rv (if non-NULL). An expired continue token
 * returns GK_OUT_OF_RANGE: the caller starts over. */
typedef void (*gk_kube_item_fn)(void *user, const cJSON *item);
int gk_kube_list(gk_kube_client *c, const gk_kube_ref *r, const gk_kube_list_opts *lo,
		 gk_kube_item_fn fn, void *user, char *rv, size_t rv_cap, gk_kube_status *st,
		 gk_err *err);

/* POST to the collection, or to r->name's r->subresource when set (pods/NAME/eviction). */
int gk_kube_create(gk_kube_client *c, const gk_kube_ref *r, const cJSON *obj, cJSON **out,
		   gk_kube_status *st, gk_err *err);
/* PUT; obj must carry metadata.resourceVersion (409 → ABORTED on a stale one). */
int gk_kube_update(gk_kube_client *c, const gk_kube_ref *r, const cJSON *obj, cJSON **out,
		   gk_kube_status *st, gk_err *err);

enum gk_kube_patch_type { GK_PATCH_MERGE, GK_PATCH_JSON, GK_PATCH_APPLY };
/* field_manager required for APPLY; force only for APPLY. */
int gk_kube_patch(gk_kube_client *c, const gk_kube_ref *r, enum gk_kube_patch_type type,
		  const char *body, const char *field_manager, bool force, cJSON **out,
		  gk_kube_status *st, gk_err *err);

typedef struct gk_kube_delete_opts {
	const char *uid;                 /* preconditions.uid */
	const char *resource_version;    /* preconditions.resourceVersion */
	const char *propagation;         /* "Background" | "Foreground" | "Orphan" | NULL */
} gk_kube_delete_opts;
int gk_kube_delete(gk_kube_client *c, const gk_kube_ref *r, const gk_kube_delete_opts *d,
		   cJSON **out, gk_kube_status *st, gk_err *err);

/* ---- discovery ---------------------------------------------------------- */

/* Is resource `resource` of group/version served? (group "" = core). Cached per
 * group/version for ttl_ms (0 = 30 s); `refresh` forces a re-read. Returns 1
 * yes, 0 no (a 404 for the group-version, or a well-formed APIResourceList
 * without the resource), or -code on API error — a 200 that is not a
 * well-formed APIResourceList of that group-version is an error (GK_INTERNAL),
 * never an absence. */
int gk_kube_discover(gk_kube_client *c, const char *group, const char *version,
		     const char *resource, int64_t ttl_ms, bool refresh, gk_err *err);
/* From the discovery cache (filled by gk_kube_discover or gk_kube_discover_async):
 * is that served resource namespaced? 1 yes, 0 cluster-scoped, -1 not known. */
int gk_kube_disc_namespaced(gk_kube_client *c, const char *group, const char *version, const char *resource);

/* ---- async engine: curl multi behind one pollable fd ------------------------
 *
 * Register gk_kube_mux_fd() for EPOLLIN in the service loop, and arm a timer for
 * gk_kube_mux_timeout_ms(); on either call gk_kube_mux_run(). Everything
 * (callbacks of watches) runs inside gk_kube_mux_run(). */

typedef struct gk_kube_mux gk_kube_mux;

int gk_kube_mux_new(gk_kube_mux **out, gk_kube_client *c, gk_err *err);
void gk_kube_mux_free(gk_kube_mux *m);
int gk_kube_mux_fd(const gk_kube_mux *m);
/* ms until gk_kube_mux_run() must be called even without I/O; -1 = no deadline. */
int64_t gk_kube_mux_timeout_ms(gk_kube_mux *m);
/* Process ready sockets, timeouts and due restarts. Returns transfers completed. */
int gk_kube_mux_run(gk_kube_mux *m);

/* Run the mux on a service loop (gpukmm/loop.h): registers its fd and keeps a
 * loop timer armed for its next deadline, re-armed by the mux itself whenever
 * it changes (after every run, call or watch start) — callers do nothing
 * else. Detach before freeing the loop; gk_kube_mux_free detaches. */
struct gk_loop;
int gk_kube_mux_attach(gk_kube_mux *m, struct gk_loop *loop, gk_err *err);
void gk_kube_mux_detach(gk_kube_mux *m);

/* ---- async calls on the mux ------------------------------------------------
 *
 * The verbs of the blocking client, run as transfers on the mux (same curl
 * multi handle as the watches: shared connections, one event loop). The
 * completion callback runs from gk_kube_mux_run(), never from inside the
 * call that starts it. Same rules as the blocking client: client-side QPS
 * limit (a call waits for its token on the mux, it never blocks), token
 * re-read after a 401 (retried once), error classification and Status
 * decoding (st->retry_after_s from Retry-After), bounded response size.
 * At most GK_KUBE_MAX_CALLS calls are in flight on one mux: past that a call
 * fails at once with GK_RESOURCE_EXHAUSTED (callers retry later). */

#define GK_KUBE_MAX_CALLS 64

typedef struct gk_kube_call gk_kube_call;

/* code: GK_OK or the error (err.h classes as above); out: the parsed body of a
 * 2xx (NULL for an empty one), owned by the callee (cJSON_Delete); st: HTTP
 * status, Status reason/message, Retry-After; err: a message for logs. */
typedef void (*gk_kube_call_fn)(void *user, int code, cJSON *out, const gk_kube_status *st,
				const gk_err *err);

typedef struct gk_kube_call_opts {
	int timeout_ms;          /* whole request, 0 = the client's timeout_ms */
	bool unthrottled;        /* not counted by the QPS limit (leader election) */
} gk_kube_call_opts;

/* Start a raw request (path with query; body copied). *out (if non-NULL) gets
 * a handle for gk_kube_call_cancel, valid until the callback has returned.
 * Returns 0, or an error (then fn is never called). */
int gk_kube_call_raw(gk_kube_mux *m, const char *method, const char *path,
		     const char *content_type, const char *body, size_t body_len,
		     const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user, gk_kube_call **out,
		     gk_err *err);
int gk_kube_call_get(gk_kube_mux *m, const gk_kube_ref *r, const gk_kube_call_opts *o,
		     gk_kube_call_fn fn, void *user, gk_kube_call **out, gk_err *err);
int gk_kube_call_create(gk_kube_mux *m, const gk_kube_ref *r, const cJSON *obj,
			const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user,
			gk_kube_call **out, gk_err *err);
int gk_kube_call_update(gk_kube_mux *m, const gk_kube_ref *r, const cJSON *obj,
			const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user,
			gk_kube_call **out, gk_err *err);
/* One page of a list (the List object: items, metadata.continue when more
 * are left, metadata.resourceVersion); lo may be NULL (limit 500, a
 * consistent read). r->name and r->subresource are ignored. */
int gk_kube_call_list(gk_kube_mux *m, const gk_kube_ref *r, const gk_kube_list_opts *lo,
		      const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user, gk_kube_call **out, gk_err *err);
int gk_kube_call_patch(gk_kube_mux *m, const gk_kube_ref *r, enum gk_kube_patch_type type,
		       const char *body, const char *field_manager, bool force,
		       const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user,
		       gk_kube_call **out, gk_err *err);
int gk_kube_call_delete(gk_kube_mux *m, const gk_kube_ref *r, const gk_kube_delete_opts *d,
			const gk_kube_call_opts *o, gk_kube_call_fn fn, void *user,
			gk_kube_call **out, gk_err *err);
/* Abandon a call: its transfer stops, its callback is never called. */
void gk_kube_call_cancel(gk_kube_call *call);
/* free(p) if the call is dropped without its callback (cancel, mux freed):
 * the callback's context does not leak at shutdown. Once the callback runs,
 * p is the callback's to free. */
void gk_kube_call_free_on_drop(gk_kube_call *call, void *p);
/* Calls in flight on the mux (including those waiting for a QPS token). */
size_t gk_kube_mux_calls(const gk_kube_mux *m);

/* Discovery without blocking: fetches group/version's resource list, updates
 * the client's discovery cache (as gk_kube_discover with refresh) and calls
 * fn(user, r) with r = 1 served, 0 absent, or -code on API error. */
typedef void (*gk_kube_disc_fn)(void *user, int r, const gk_err *err);
int gk_kube_discover_async(gk_kube_mux *m, const char *group, const char *version,
			   const char *resource, gk_kube_disc_fn fn, void *user, gk_kube_call **out,
			   gk_err *err);

/* ---- reflector (list + watch of one kind) ------------------------------- */

typedef struct gk_kube_watch gk_kube_watch;

enum gk_kube_event { GK_KUBE_ADDED = 1, GK_KUBE_MODIFIED, GK_KUBE_DELETED };

typedef struct gk_kube_watch_cbs {
	/* An object changed. `obj` is borrowed; for a synthesised DELETE (vanished
	 * during a relist) obj is NULL and key names it. */
	void (*on_event)(void *user, enum gk_kube_event type, const char *key, const cJSON *obj);
	/* Initial list (and every relist) applied. */
	void (*on_synced)(void *user);
	/* A failure (logged by the watch too), or code GK_OUT_OF_RANGE: the
	 * resourceVersion expired (410), a relist follows (not counted as an
	 * error). The watch retries by itself. From here until on_synced or
	 * on_resumed the cache may lag or miss changes. */
	void (*on_error)(void *user, int code, const char *msg);
	/* After a failure that needed no relist: a watch from the last
	 * resourceVersion is open again (HTTP 200), the changes missed meanwhile
	 * are replayed by it. May be NULL. */
	void (*on_resumed)(void *user);
} gk_kube_watch_cbs;

typedef struct gk_kube_watch_opts {
	const char *label_selector;
	const char *field_selector;
	int min_timeout_s, max_timeout_s; /* watch timeoutSeconds range, 0 = 300..600 */
	int low_speed_s;                  /* no byte for this long → restart, 0 = 90 */
	int page_limit;                   /* list page size, 0 = 500 */
	uint64_t seed;                    /* rng seed (0 = from time/pid) */
	/* Watch from this resourceVersion without listing first (replay of the
	 * history; benchmarks and resumption). The cache starts empty; a 410
	 * falls back to a normal relist. NULL = list first (the normal case). */
	const char *start_resource_version;
} gk_kube_watch_opts;

typedef struct gk_kube_watch_stats {
	uint64_t events, bookmarks, relists, expired, restarts, errors, bad_docs, http_requests;
	uint64_t bad_lists;               /* 200 list answers that were not well-formed lists */
	size_t cached;                    /* keys known */
	bool synced;
	bool current;                     /* synced, and no failure since the last list or resume */
	char rv[64];
} gk_kube_watch_stats;

/* Starts at once (list). `r->name` must be NULL. Strings in r/opts are copied. */
int gk_kube_watch_start(gk_kube_watch **out, gk_kube_mux *m, const gk_kube_ref *r,
			const gk_kube_watch_opts *opts, const gk_kube_watch_cbs *cbs, void *user,
			gk_err *err);
/* Stops and frees (no more callbacks). Safe from inside a callback of this watch. */
void gk_kube_watch_stop(gk_kube_watch *w);
void gk_kube_watch_stats_get(const gk_kube_watch *w, gk_kube_watch_stats *out);

#endif
