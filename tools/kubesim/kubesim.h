/* kubesim — a Kubernetes API server simulator (internal interfaces).
 *
 * Layers, one job per file:
 *   http.c       libmicrohttpd glue: request bodies, auth, TLS, streaming watch bodies
 *   handler.c    routes a ks_req to a verb and builds a ks_resp (no sockets: unit-testable)
 *   route.c      URL path -> (group, version, namespace, resource, name, subresource)
 *   registry.c   resource types: built-ins + CRD-defined kinds
 *   discovery.c  /api, /apis (legacy and aggregated), /openapi/v3
 *   store.c      objects, the global resourceVersion, event history
 *   api.c        create/update/patch/delete semantics (metadata, generation, status split)
 *   watch.c      watch streams over the event history (bookmarks, 410, timeouts)
 *   crd.c        CRD install/removal, Established conditions
 *   schema.c     openAPIV3Schema validation, defaulting and pruning
 *   patch.c      merge / JSON / strategic merge patch;  ssa.c server-side apply
 *   gc.c         finalizers, ownerReference garbage collection, namespace deletion
 *   webhook.c    admission webhooks;  faults.c fault injection + stats;  state.c --state-dir
 *   versions.c   --kube-version: /version, resource.k8s.io versions and their conversion
 *   finalize.c   CRD deletion through its cleanup finalizer, namespace termination conditions
 *   eviction.c   pods/eviction with PodDisruptionBudgets
 *   ctrl.c       the controllers' thread: dscontroller.c, kubelet.c, disruption.c (sched.c:
 *                predicates);  openshift.c --openshift's API groups
 * One mutex (srv->mu) guards the store, the registry and the history. */
#ifndef KUBESIM_H
#define KUBESIM_H

#include <cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "gpukmm/err.h"

#define KS_MAX_BODY (3u << 20) /* like the API server's 3 MiB request limit */

/* ---- resource types ------------------------------------------------------ */
typedef struct ks_rtype {
	char *group, *version, *resource, *singular, *kind, *list_kind;
	char *short_names; /* comma-separated, may be NULL */
	char *categories;  /* comma-separated, may be NULL */
	int namespaced, has_status, is_crd, storage;
	cJSON *schema; /* CRD openAPIV3Schema (owned) or NULL */
	cJSON *columns; /* CRD additionalPrinterColumns of this version (owned) or NULL */
	char *crd_name;
} ks_rtype;

typedef struct ks_registry {
	ks_rtype **v;
	int n, cap;
	ks_rtype **dead; /* types of removed CRDs, freed at shutdown */
	int ndead;
} ks_registry;

int ks_registry_init_builtin(ks_registry *r);
void ks_registry_free(ks_registry *r);
const ks_rtype *ks_registry_find(const ks_registry *r, const char *group, const char *version, const char *resource);
const ks_rtype *ks_registry_find_kind(const ks_registry *r, const char *group, const char *version, const char *kind);
/* Any version of group/resource (first served). */
const ks_rtype *ks_registry_find_gr(const ks_registry *r, const char *group, const char *resource);
int ks_registry_add(ks_registry *r, ks_rtype *t);      /* takes ownership */
void ks_registry_remove_crd(ks_registry *r, const char *crd_name);
void ks_rtype_free(ks_rtype *t);
/* "apps/v1" or "v1" into buf. */
const char *ks_rtype_api_version(const ks_rtype *t, char *buf, size_t cap);

/* ---- store --------------------------------------------------------------- */
enum ks_ev_type { KS_EV_ADDED, KS_EV_MODIFIED, KS_EV_DELETED, KS_EV_BOOKMARK, KS_EV_ERROR };
const char *ks_ev_name(int type);

/* One serialized version of an object, shared (reference counted, under srv->mu)
 * by the store item that holds it and by the history events that mention it: an
 * event costs one serialization and no object copy, and a MODIFIED event's "old"
 * state is the previous version's blob. */
typedef struct ks_blob {
	unsigned refs;
	size_t len;
	char *json;    /* the object, compact JSON */
	cJSON *labels; /* copy of metadata.labels (label selectors), or NULL */
	const char *name; /* metadata.name (inside the same allocation) */
	char ns[];     /* namespace, "" for cluster-scoped; then the name */
} ks_blob;

ks_blob *ks_blob_new(const char *ns, const cJSON *obj);
ks_blob *ks_blob_ref(ks_blob *b);
void ks_blob_unref(ks_blob *b);

typedef struct ks_item {
	char *ns, *name; /* ns "" for cluster-scoped */
	cJSON *obj;
	ks_blob *blob; /* obj as last stored (same resourceVersion) */
	/* what the garbage collector reads of obj, set by ks_store_put (pointers into obj):
	 * it scans every object after each write that can matter, and looking these up in
	 * a Node's metadata by name at every pass cost 200 ms at 30,000 objects */
	const char *uid;      /* metadata.uid or NULL */
	const cJSON *refs;    /* metadata.ownerReferences or NULL */
	unsigned char deleting; /* metadata.deletionTimestamp set */
} ks_item;

typedef struct ks_bucket {
	char *gr; /* "group/resource" */
	ks_item *items;
	int n, cap;
} ks_bucket;

typedef struct ks_event {
	uint64_t rv;
	int type;
	const char *gr; /* the bucket's "group/resource" (buckets live as long as the store) */
	ks_blob *cur;   /* state after (or last state for DELETED) */
	ks_blob *old;   /* state before, for MODIFIED (selector transitions); may be NULL */
} ks_event;

typedef struct ks_store {
	ks_bucket *b;
	int nb, capb;
	uint64_t rv;        /* last resourceVersion handed out */
	ks_event *ring;     /* event history, oldest at ring[head] */
	int cap, head, count;
	uint64_t compacted; /* events with rv <= compacted are gone */
	uint64_t nobjs;
} ks_store;

int ks_store_init(ks_store *s, int history);
void ks_store_free(ks_store *s);
ks_bucket *ks_store_bucket(ks_store *s, const char *group, const char *resource, int create);
ks_item *ks_store_get(ks_store *s, const char *group, const char *resource, const char *ns, const char *name);
/* The index of the first item of b after (ns, name) in the bucket's order. */
int ks_store_after(const ks_bucket *b, const char *ns, const char *name);
/* Insert or replace; assigns the next RV into metadata.resourceVersion and records
 * the event (ADDED when new, MODIFIED otherwise). Takes ownership of obj. */
int ks_store_put(ks_store *s, const char *group, const char *resource, const char *ns, const char *name,
		 cJSON *obj);
/* Removes the object, records DELETED with a fresh RV. */
int ks_store_remove(ks_store *s, const char *group, const char *resource, const char *ns, const char *name);
/* Drops all history (POST /kubesim/compact). */
void ks_store_compact(ks_store *s);
/* Index of the first event with rv > after; count if none. -1 if history older than
 * `after` is gone (410). */
int ks_store_history_from(const ks_store *s, uint64_t after);
const ks_event *ks_store_event(const ks_store *s, int i); /* i-th oldest */

/* ---- request / response -------------------------------------------------- */
typedef struct ks_kv {
	char *k, *v;
} ks_kv;

typedef struct ks_req {
	const char *method, *path;
	ks_kv *query;
	int nquery;
	const char *accept, *content_type, *user_agent, *auth;
	const char *body;
	size_t body_len;
} ks_req;

struct ks_watch;

typedef struct ks_resp {
	int code;
	char *body; /* malloc'd, NUL-terminated */
	size_t body_len; /* 0: strlen(body); set for binary bodies */
	const char *content_type;
	char warning[2100]; /* warnings, one per line (Warning: 299 headers) */
	int retry_after;
	struct ks_watch *watch; /* set for a streaming watch */
} ks_resp;

const char *ks_req_param(const ks_req *r, const char *k);

/* ---- faults & stats ------------------------------------------------------ */
#define KS_MAX_FAULT_RULES 32
#define KS_FAULT_BODY_POOL 32768 /* bytes of every rule's "body" together */
typedef struct ks_fault_rule {
	char verb[16], resource[64];
	char path[256];  /* request path prefix, "" = any */
	double rate;
	int code; /* 500, 503, 429, 409, ...; 2xx only with a body (a lying answer) */
	int retry_after;
	int latency_ms;
	int body_off, body_len; /* into ks_faults.body_pool; body_len < 0 = none (a Status) */
	int times;       /* 0 = unlimited, else the rule is spent after injecting this many */
	int used;        /* faults injected by this rule */
} ks_fault_rule;

typedef struct ks_faults {
	uint64_t seed, rng;
	int nrules;
	ks_fault_rule rules[KS_MAX_FAULT_RULES];
	int watch_close_after_events; /* 0 = never */
	int watch_close_after_ms;
	int force_410_next_watch;
	int64_t refuse_until_ms; /* monotonic ms */
	int latency_ms;          /* every request */
	char body_pool[KS_FAULT_BODY_POOL];
	int body_used;
} ks_faults;

/* What ks_faults_decide chose for one request. */
typedef struct ks_fault_hit {
	int code;            /* 0 = no fault */
	int retry_after;
	int latency_ms;
	const char *body;    /* the rule's body (into the faults' pool, copy it), NULL = a Status */
	int body_len;
} ks_fault_hit;

#define KS_STATS_MAX 128
typedef struct ks_stat_ent {
	char verb[16], resource[64];
	uint64_t n;
} ks_stat_ent;

/* writes by client program (the user agent's first word) */
typedef struct ks_agent_ent {
	char agent[48], verb[16], resource[80];
	uint64_t n;
} ks_agent_ent;

typedef struct ks_stats {
	ks_stat_ent req[KS_STATS_MAX];
	int nreq;
	ks_agent_ent wagent[KS_STATS_MAX];
	int nwagent;
	uint64_t requests, writes, faults_injected, watch_events, watchers, watches_opened, refused, http_errors;
	uint64_t gc_runs; /* passes of the garbage collector (gc.c) */
	ks_stat_ent fault[KS_STATS_MAX];
	int nfault;
} ks_stats;

/* One write of `agent` (mu held); resource may carry "/subresource". */
void ks_stats_count_agent(ks_stats *s, const char *agent, const char *verb, const char *resource);
int ks_faults_parse(ks_faults *f, const cJSON *j, gk_err *err);
cJSON *ks_faults_to_json(const ks_faults *f);
/* Decide whether a request (verb, resource, path) gets a fault: fills *hit (code 0
 * = none, latency always). Deterministic given the seed. path may be NULL. */
void ks_faults_decide(ks_faults *f, const char *verb, const char *resource, const char *path, ks_fault_hit *hit);
struct ks_server;
/* The request's fault, if any, applied: counted in the stats, its latency slept,
 * and when it injects one, *out is the answer (the rule's body, or a Status
 * naming kind/name/group) and 1 is returned. Locks s->mu itself. */
int ks_faults_respond(struct ks_server *s, const ks_req *r, const char *verb, const char *resource,
		      const char *kind, const char *name, const char *group, ks_resp *out);
void ks_stats_count(ks_stat_ent *t, int *n, const char *verb, const char *resource);
cJSON *ks_stats_to_json(const ks_stats *s);
int ks_verb_is_write(const char *verb);

/* ---- identities (auth.c, satoken.c; authz.c decides with --rbac) ---------- */
#define KS_USER_MAX_GROUPS 8
typedef struct ks_user {
	char name[256], uid[64];
	char groups[KS_USER_MAX_GROUPS][128];
	int ngroups;
	char node[256]; /* extra authentication.kubernetes.io/node-name of a bound token, "" = none */
} ks_user;

/* ---- server -------------------------------------------------------------- */
typedef struct ks_svc_url {
	char *ns_name; /* "ns/name" */
	char *url;     /* --service-url: the base URL; --service-addr: "host:port" */
	int addr;      /* --service-addr: dialled, with NAME.NS.svc verified as the API server does */
} ks_svc_url;

typedef struct ks_server {
	pthread_mutex_t mu;
	pthread_cond_t cond; /* broadcast on new events, compaction and shutdown */
	ks_registry reg;
	ks_store store;
	ks_faults faults;
	ks_stats stats;
	int shutting_down;
	int bookmark_ms;
	char *token;     /* bearer token or NULL (not owned, or token_buf) */
	char *token_file; /* --token-file, re-read when it changes (auth.c) */
	char *token_buf;
	uint64_t token_sig[4];
	char *state_dir; /* or NULL */
	char server_addr[128];
	ks_svc_url *svc_urls;
	int nsvc_urls;
	int dirty;
	uint64_t uid_counter;
	pthread_cond_t gc_cond;
	int gc_pending;
	int rbac;             /* --rbac: every request authorized by the stored RBAC objects */
	struct ks_auth *auth; /* users, the token signing key, the RBAC record (authz.c) */
	int kube_minor; /* --kube-version 1.MINOR; 0: the default (versions.c) */
	struct ks_ctrl *ctrl; /* the controllers (ctrl.h), NULL without */
	int openshift;        /* --openshift (openshift.c) */
	int no_apf;           /* --no-apf: no X-Kubernetes-PF-* headers (http.c) */
} ks_server;

int ks_server_init(ks_server *s, int history);
/* Creates default, kube-system, kube-public, kube-node-lease if absent. */
int ks_server_seed(ks_server *s);
void ks_server_free(ks_server *s);

/* auth.c: who sends the request. The --token / --token-file token is the admin
 * (kubesim-admin, groups system:masters); a ServiceAccount token (satoken.c) and a
 * --token-auth-file line name their user; without --rbac and without an admin
 * token any token is the admin, as is a request without one. With --rbac a
 * request without a token is system:anonymous. 0, or -1 (401). The token file is
 * re-read when it changes. */
int ks_token_file_load(ks_server *s, const char *path, gk_err *err);
int ks_authenticate(ks_server *s, const char *authorization, ks_user *u);
struct ks_route;
/* authz.c: the hooks of handler.c. ks_auth_request authenticates the request and,
 * with --rbac, authorizes it: 0 go on (*u = the user), else *out is the 401/403.
 * ks_auth_serve answers what the authentication and authorization APIs serve
 * (TokenRequest, SelfSubjectAccessReview, SubjectAccessReview,
 * SelfSubjectRulesReview, SelfSubjectReview, GET /kubesim/rbac): 1 when it did. */
int ks_auth_request(ks_server *s, const ks_req *r, const struct ks_route *rt, ks_user *u, ks_resp *out);
int ks_auth_serve(ks_server *s, const ks_req *r, const struct ks_route *rt, const ks_user *u, ks_resp *out);
/* --token-auth-file (token,user,uid,"group1,group2" per line), the ServiceAccount
 * token signing key (kept in state_dir when given) and, with --rbac, the bootstrap
 * ClusterRoles and bindings every cluster has. */
int ks_auth_init(ks_server *s, const char *token_auth_file, const char *state_dir, gk_err *err);
void ks_auth_free(ks_server *s);

/* review.c: TokenReview. true when r was one (out filled). */
bool ks_review_route(ks_server *s, const ks_req *r, const struct ks_route *rt, ks_resp *out);

/* handler.c: everything except the socket. */
void ks_handle(ks_server *s, const ks_req *r, ks_resp *out);
void ks_resp_free(ks_resp *r);

/* status.c: Status objects. */
char *ks_status_json(int code, const char *reason, const char *message, const char *kind, const char *name,
		     const char *group, cJSON *causes);
void ks_resp_status(ks_resp *r, int code, const char *reason, const char *kind, const char *name,
		    const char *group, cJSON *causes, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
void ks_resp_json(ks_resp *r, int code, cJSON *j); /* takes j */

/* util */
void ks_now_rfc3339(char *buf, size_t cap);
void ks_new_uid(ks_server *s, char *buf, size_t cap); /* 36 chars + NUL */
int64_t ks_mono_ms(void);
/* pthread_cond_timedwait for ms (at least 1) from now, on srv->cond's clock. */
void ks_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *mu, int64_t ms);
const char *ks_meta_str(const cJSON *obj, const char *field);
cJSON *ks_meta(cJSON *obj); /* metadata object, created if absent */
uint64_t ks_obj_rv(const cJSON *obj);

/* discovery.c */
cJSON *ks_discovery_api(ks_server *s, int aggregated);
cJSON *ks_discovery_apis(ks_server *s, int aggregated);
cJSON *ks_discovery_gv(ks_server *s, const char *group, const char *version); /* NULL: unknown */
cJSON *ks_openapi_root(ks_server *s);
cJSON *ks_openapi_gv(ks_server *s, const char *group, const char *version);
/* openapiv2.c: the protobuf OpenAPI v2 document kubectl <= 1.28 needs (malloc'd). */
unsigned char *ks_openapi_v2_pb(ks_server *s, size_t *len);

/* crd.c (called with mu held) */
int ks_crd_install(ks_server *s, cJSON *crd, gk_err *err); /* sets status, registers */
void ks_crd_uninstall(ks_server *s, const cJSON *crd);
int ks_crd_check(const cJSON *crd, gk_err *err);

/* gc.c (mu held) — finalizer/ownerReference processing until stable */
void ks_gc_run(ks_server *s);

/* finalize.c (mu held): CRD deletion through its cleanup finalizer, namespace
 * termination conditions */
int ks_crd_mark_deleted(cJSON *crd);                       /* the first DELETE */
int ks_crd_terminating(ks_server *s, const ks_rtype *t);  /* t's CRD is being deleted */
int ks_crd_finalize(ks_server *s);                         /* 1 when something changed */
void ks_ns_termination(ks_server *s);

/* watch.c */
struct ks_watch *ks_watch_open(ks_server *s, const ks_rtype *t, const char *ns, const ks_req *r, ks_resp *out);
/* Fills buf with up to max bytes of stream; blocks until data, returns 0 at end of stream. */
size_t ks_watch_read(ks_server *s, struct ks_watch *w, char *buf, size_t max);
void ks_watch_close(ks_server *s, struct ks_watch *w);

/* openshift.c: --openshift's API groups (after ks_versions_set) and default SCCs */
int ks_openshift_setup(ks_server *s);
int ks_openshift_seed(ks_server *s);

/* state.c */
int ks_state_load(ks_server *s, const char *dir, gk_err *err);
int ks_state_save(ks_server *s, const char *dir, gk_err *err);

#endif
