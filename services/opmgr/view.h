/* gpukmm-opmgr — the operand manager's view: ClusterPolicies, the operand
 * objects (watcher topic "operand", by kind/namespace/name), the DaemonSets
 * of the operator namespace (their status counts), whether a ResourceClaim
 * holds a GPU (the DRA teardown guard), what the Kueue quotas count (each
 * node's allocatable cpu, memory and GPUs; the ResourceSlices of driver
 * gpu.intel.com, while watched), discovery and leadership, and what the
 * watcher cannot vouch for of the claims, operands and policies. Rebuilt from
 * watcher snapshots, kept current by bus events; pure data.
 *
 * Dirty keys: a policy event → that policy; an operand or DaemonSet event →
 * the policy its controller owner reference (or its `owner` label) names, else
 * every policy (a configMapOverride ConfigMap is the user's); claims, discovery
 * and leadership → every policy when the answer flips; a node or slice change
 * that moves a Kueue input → the policies with enableKueue, through the `later`
 * callback (the caller coalesces: nodes come and go in bursts). Bounded like
 * every view (nodes and slices in hash maps: thousands of them). */
#ifndef GPUKMM_OPMGR_VIEW_H
#define GPUKMM_OPMGR_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.pb-c.h"
#include "gpukmm/err.h"
#include "gpukmm/operands.h"

typedef struct gk_opv gk_opv;
typedef void (*gk_opv_dirty_fn)(void *user, const char *policy);

typedef struct gk_opv_disc {
	bool known, kmm, dra, openshift, nfd, prometheus;
	bool nfd_namespaced, kueue, kueue_listed, resource_slices;
	char dra_version[16];
} gk_opv_disc;

int gk_opv_new(gk_opv **out, const char *ns, size_t max_objects, gk_opv_dirty_fn fn, void *user, gk_err *err);
void gk_opv_free(gk_opv *v);
/* Kueue inputs changed for these policies: the caller runs them a little later. */
void gk_opv_set_later(gk_opv *v, gk_opv_dirty_fn later);
int gk_opv_load_snapshot(gk_opv *v, const Gpukmm__SnapshotReply *s, gk_err *err);
int gk_opv_apply(gk_opv *v, const char *topic, const Gpukmm__Event *ev, gk_err *err);

const char *gk_opv_ns(const gk_opv *v);
bool gk_opv_leader(const gk_opv *v);
/* Leadership.term (0: not leading, or no election): stamped on status reports. */
uint64_t gk_opv_term(const gk_opv *v);
bool gk_opv_synced(const gk_opv *v);
const gk_opv_disc *gk_opv_discovery(const gk_opv *v);
bool gk_opv_claims_allocated(const gk_opv *v);
/* Why the watcher cannot vouch for (ARCHITECTURE.md §4), NULL = it can: the claims
 * (as a set); the operand `resource` ns/name (its kind, or that object unreadable;
 * ns and name NULL: any object of that kind unreadable);
 * the ClusterPolicy `name` (unreadable, or its kind). */
const char *gk_opv_claims_unconfirmed(const gk_opv *v);
const char *gk_opv_operand_unconfirmed(const gk_opv *v, const char *resource, const char *ns, const char *name);
const char *gk_opv_policy_unconfirmed(const gk_opv *v, const char *name);
const Gpukmm__ClusterPolicy *gk_opv_policy(const gk_opv *v, const char *name);
/* ns NULL or "" = cluster-scoped */
const Gpukmm__Object *gk_opv_obj(const gk_opv *v, const char *kind, const char *ns, const char *name);
const Gpukmm__DaemonSet *gk_opv_ds(const gk_opv *v, const char *ns, const char *name);
/* What the API returned after our own write (NULL = gone): the view holds it
 * until the watch confirms (an older resourceVersion never replaces a newer). */
int gk_opv_put_obj(gk_opv *v, const char *kind, const char *ns, const char *name, const Gpukmm__Object *o,
		   gk_err *err);
int gk_opv_put_policy(gk_opv *v, const Gpukmm__ClusterPolicy *cp, gk_err *err);
void gk_opv_touch(gk_opv *v, const char *policy);
void gk_opv_each_policy(const gk_opv *v, gk_opv_dirty_fn fn, void *user);
/* Every operand object of a kind (any order). */
void gk_opv_each_obj(const gk_opv *v, const char *kind, void (*fn)(void *user, const Gpukmm__Object *o),
		     void *user);

/* The Kueue inputs: every node (name, allocatable) and slice, borrowed from the view
 * until it changes. */
typedef struct gk_opv_kueue {
	gk_op_knode *nodes;
	size_t n_nodes;
	gk_op_kslice *slices;
	size_t n_slices;
	char **bufs; /* the decoded strings */
	size_t n_bufs;
} gk_opv_kueue;
int gk_opv_kueue_inputs(const gk_opv *v, gk_opv_kueue *out, gk_err *err);
void gk_opv_kueue_free(gk_opv_kueue *k);

typedef struct gk_opv_state {
	size_t policies, objects, daemonsets, claims, nodes, slices;
	uint64_t ignored;
} gk_opv_state;
void gk_opv_state_get(const gk_opv *v, gk_opv_state *out);

#endif
