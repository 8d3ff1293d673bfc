/* gpukmm-upgrader — the upgrader's view of the cluster: ClusterPolicies, the
 * KMM Modules of the operator namespace, every Node (only what a pass reads:
 * its label and annotation strings interned in one pool, since thousands of nodes
 * share most of them, and the upgrade-relevant digest of its
 * gpukmm.io/node-report, re-read only when the report changes), the names of the
 * ResourceClaims allocated to Intel GPUs (which pods the default drain selects),
 * KMM discovery and leadership. Rebuilt from watcher snapshots, kept
 * current by bus events; pure data (no sockets).
 *
 * Dirty keys: a policy → that policy; its Module (<cp>-gpu) → that policy; a
 * Node, discovery or leadership change → every policy (a node's labels decide
 * which policy it belongs to). A snapshot marks every key, old and new.
 *
 * Our own writes: what the API answered (gk_upv_put_node) goes into the view
 * at once, and a Node event or snapshot older than it (resourceVersion) never
 * replaces it — a pass right after a write, or after a bus gap, decides on the
 * node as written, never on the state before the write. Bounded: at most
 * max_objects of each kind. */
#ifndef GPUKMM_UPGRADER_VIEW_H
#define GPUKMM_UPGRADER_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decide.h"
#include "events.pb-c.h"
#include "gpukmm/err.h"

typedef struct gk_upv gk_upv;
typedef void (*gk_upv_dirty_fn)(void *user, const char *policy);

int gk_upv_new(gk_upv **out, const char *ns, size_t max_objects, gk_upv_dirty_fn fn, void *user, gk_err *err);
void gk_upv_free(gk_upv *v);
int gk_upv_load_snapshot(gk_upv *v, const Gpukmm__SnapshotReply *s, gk_err *err);
int gk_upv_apply(gk_upv *v, const char *topic, const Gpukmm__Event *ev, gk_err *err);

const char *gk_upv_ns(const gk_upv *v);
bool gk_upv_leader(const gk_upv *v);
/* the Leadership.term of the view (0 without an election) */
uint64_t gk_upv_term(const gk_upv *v);
bool gk_upv_kmm(const gk_upv *v);
/* false when a table refused an object (over its bound, or out of memory): the
 * view does not hold every node or claim, so nothing may be picked on it */
bool gk_upv_complete(const gk_upv *v);
const Gpukmm__ClusterPolicy *gk_upv_policy(const gk_upv *v, const char *name);
const Gpukmm__Module *gk_upv_module(const gk_upv *v, const char *name);
/* A Node as the upgrader keeps it: name, resourceVersion, uid, Ready,
 * unschedulable, labels, gpukmm.io annotations (the strings shared across nodes)
 * and the digest of its report. Valid until the view changes. */
typedef struct gk_upv_node gk_upv_node;
size_t gk_upv_n_nodes(const gk_upv *v);
/* The i-th node (any order; stable until the view changes). */
const gk_upv_node *gk_upv_node_at(const gk_upv *v, size_t i);
const gk_upv_node *gk_upv_node_get(const gk_upv *v, const char *name);
const char *gk_upv_node_name(const gk_upv_node *n);
const char *gk_upv_node_rv(const gk_upv_node *n);
const char *gk_upv_node_uid(const gk_upv_node *n);
/* true when the Ready condition is True or unknown */
bool gk_upv_node_ready(const gk_upv_node *n);
bool gk_upv_node_unschedulable(const gk_upv_node *n);
const char *gk_upv_node_label(const gk_upv_node *n, const char *key);
/* a gpukmm.io annotation other than the report */
const char *gk_upv_node_annotation(const gk_upv_node *n, const char *key);
/* the digest of its gpukmm.io/node-report, NULL when it has no readable one */
const gk_upg_report *gk_upv_node_report(const gk_upv_node *n);
/* A ResourceClaim ns/name allocated to the Intel GPU driver. */
bool gk_upv_gpu_claim(const gk_upv *v, const char *ns, const char *name);
void gk_upv_each_policy(const gk_upv *v, gk_upv_dirty_fn fn, void *user);

/* What the API returned for a Node (our write, a re-read, a fresh list). An
 * object older than the one held is ignored. Marks every policy. */
int gk_upv_put_node(gk_upv *v, const Gpukmm__Node *n, gk_err *err);
void gk_upv_touch_all(gk_upv *v);

/* The upgrade digest of a node report (gpukmm.io/node-report): present when
 * it is readable and covers a module (out->module says which; a policy of
 * another module treats it as absent). Pure; lib's report parser. */
void gk_upv_report_digest(const char *json, gk_upg_report *out);

typedef struct gk_upv_state {
	size_t policies, modules, nodes, claims;
	uint64_t ignored, stale;  /* events not applied: unusable / older than what we hold */
} gk_upv_state;
void gk_upv_state_get(const gk_upv *v, gk_upv_state *out);

#endif
