/* gpukmm-gater — the gater's view of the cluster: ClusterPolicies and the
 * watched DaemonSets (operator namespace + gpukmm.io/gate-labelled ones),
 * KMM discovery and leadership; rebuilt from watcher snapshots, kept current
 * by bus events (DESIGN.md §2). Pure data: no sockets.
 *
 * Every change reports which ClusterPolicy keys became dirty:
 *   clusterpolicy events   → that policy
 *   daemonset events       → the policies the old and the new object concern
 *                            (gate label value, <cp>-device-plugin/-gpu-dra/
 *                            -xpu-manager names in the operator namespace)
 *   discovery / leadership → every known policy, when the value changes (the
 *                            unconfirmed topics and unreadable policies included)
 *   our own write / re-read of a DaemonSet (gk_gtv_put_ds), or its end
 *   (gk_gtv_touch_ds)      → the policies the DaemonSet concerns
 * A snapshot makes every known key dirty (old and new).
 *
 * Memory is bounded: at most max_objects policies and DaemonSets each. */
#ifndef GPUKMM_GATER_VIEW_H
#define GPUKMM_GATER_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.pb-c.h"
#include "gpukmm/err.h"

typedef struct gk_gtv gk_gtv;
typedef void (*gk_gtv_dirty_fn)(void *user, const char *policy);

typedef struct gk_gtv_opts {
	const char *ns;          /* operator namespace */
	size_t max_objects;      /* per kind; 0 = 4096 */
} gk_gtv_opts;

int gk_gtv_new(gk_gtv **out, const gk_gtv_opts *o, gk_gtv_dirty_fn fn, void *user, gk_err *err);
void gk_gtv_free(gk_gtv *v);

int gk_gtv_load_snapshot(gk_gtv *v, const Gpukmm__SnapshotReply *s, gk_err *err);
int gk_gtv_apply(gk_gtv *v, const char *topic, const Gpukmm__Event *ev, gk_err *err);

const char *gk_gtv_ns(const gk_gtv *v);
bool gk_gtv_kmm(const gk_gtv *v);
bool gk_gtv_leader(const gk_gtv *v);
/* The safety rule (ARCHITECTURE.md §4): why the watcher cannot vouch for the
 * policy `name` (its kind, or the object failed conversion: *unreadable), or
 * NULL. Valid until the next call. */
const char *gk_gtv_policy_unconfirmed(gk_gtv *v, const char *name, bool *unreadable);
/* Why KMM's API state (discovery, the Modules' list) cannot be vouched for, or NULL. */
const char *gk_gtv_kmm_unconfirmed(const gk_gtv *v);
const Gpukmm__ClusterPolicy *gk_gtv_policy(const gk_gtv *v, const char *name);
/* DaemonSet by namespace and name (NULL when absent). */
const Gpukmm__DaemonSet *gk_gtv_ds(const gk_gtv *v, const char *ns, const char *name);
/* Every cached DaemonSet: fn(user, ds). The view must not change meanwhile. */
void gk_gtv_each_ds(const gk_gtv *v, void (*fn)(void *user, const Gpukmm__DaemonSet *ds), void *user);
/* Overwrite a cached DaemonSet with what the API returned (after our own
 * write or a re-read); ds NULL removes it. Marks like an event. */
int gk_gtv_put_ds(gk_gtv *v, const char *ns, const char *name, const Gpukmm__DaemonSet *ds, gk_err *err);
/* Mark the policies the cached DaemonSet ns/name concerns dirty. */
void gk_gtv_touch_ds(gk_gtv *v, const char *ns, const char *name);

typedef struct gk_gtv_state {
	bool synced, kmm, leader;
	unsigned unconfirmed;    /* bits: clusterpolicy, module */
	uint64_t term;           /* Leadership.term (0: not leading, or no election) */
	size_t policies, daemonsets;
	uint64_t ignored;
} gk_gtv_state;
void gk_gtv_state_get(const gk_gtv *v, gk_gtv_state *out);

#endif
