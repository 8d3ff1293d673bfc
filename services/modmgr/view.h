/* gpukmm-modmgr — the manager's view of the cluster, rebuilt from watcher
 * snapshots and kept current by watcher events (DESIGN.md §2).
 *
 * Pure data: no sockets. Every change reports which ClusterPolicy keys became
 * dirty through a callback (the service adds them to its work queue):
 *   clusterpolicy events  → that policy
 *   module events         → the owning policy (controller ownerRef) and the
 *                           policy the name `<cp>-gpu` belongs to
 *   claim / pod events    → every policy, when "any GPU claim allocated" or
 *                           "any GPU pod" flips (the decision reads only that)
 *   discovery/leadership  → every policy, when the value changes (the
 *                           unconfirmed topics and unreadable objects included)
 * A snapshot makes every known key dirty (old and new), so a policy that
 * vanished while events were lost is still reconciled once more (as gone).
 *
 * Memory is bounded: at most max_objects policies and Modules each; blocking
 * claims and pods are kept as key sets, bounded the same way (beyond the bound
 * the set saturates to "in use", which is the fail-safe answer). */
#ifndef GPUKMM_MODMGR_VIEW_H
#define GPUKMM_MODMGR_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decide.h"
#include "events.pb-c.h"
#include "gpukmm/err.h"

typedef struct gk_mmv gk_mmv;
typedef void (*gk_mmv_dirty_fn)(void *user, const char *policy);

typedef struct gk_mmv_opts {
	const char *ns;                  /* operator namespace (Modules elsewhere are ignored) */
	size_t max_objects;              /* per kind; 0 = 4096 */
} gk_mmv_opts;

int gk_mmv_new(gk_mmv **out, const gk_mmv_opts *o, gk_mmv_dirty_fn fn, void *user, gk_err *err);
void gk_mmv_free(gk_mmv *v);

/* Replace everything with the snapshot's content (objects are copied). */
int gk_mmv_load_snapshot(gk_mmv *v, const Gpukmm__SnapshotReply *s, gk_err *err);
/* Apply one bus event of `topic` (objects are copied). Unknown topics and
 * events without an object are counted and ignored. */
int gk_mmv_apply(gk_mmv *v, const char *topic, const Gpukmm__Event *ev, gk_err *err);

/* Fill a decision view for `policy` (pointers valid until the next change or
 * the next gk_mmv_view). The *_unconfirmed reasons come from the watcher's
 * Discovery.unconfirmed: a kind it cannot vouch for, or this policy's / this
 * Module's object failing conversion; one unreadable claim or pod makes the
 * claims / pods unconfirmed as a whole. */
void gk_mmv_view(gk_mmv *v, const char *policy, gk_mm_view *out);
/* The cached objects (NULL when absent). */
const Gpukmm__ClusterPolicy *gk_mmv_policy(const gk_mmv *v, const char *name);
const Gpukmm__Module *gk_mmv_module(const gk_mmv *v, const char *name);

/* Every policy key known (policies and Module owners); fn per key. */
void gk_mmv_each_key(const gk_mmv *v, gk_mmv_dirty_fn fn, void *user);

/* Overwrite a cached Module with what the API returned (after our own write),
 * so the next pass does not act on a stale object before the watch catches up.
 * m == NULL removes it. */
int gk_mmv_put_module(gk_mmv *v, const char *name, const Gpukmm__Module *m, gk_err *err);
int gk_mmv_put_policy(gk_mmv *v, const char *name, const Gpukmm__ClusterPolicy *cp, gk_err *err);

typedef struct gk_mmv_state {
	bool synced, kmm, dra, leader;
	unsigned unconfirmed;            /* bits: clusterpolicy, module, resourceclaim, pod */
	uint64_t term;                   /* Leadership.term (0: not leading, or no election) */
	size_t policies, modules, blocking_claims, blocking_pods;
	uint64_t ignored;                /* events ignored (unknown topic, no object, other ns) */
} gk_mmv_state;
void gk_mmv_state_get(const gk_mmv *v, gk_mmv_state *out);


#endif
