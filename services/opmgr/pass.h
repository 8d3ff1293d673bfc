/* gpukmm-opmgr — one pass for one ClusterPolicy (operands.md §5–9, with our
 * differences, ARCHITECTURE.md §5):
 *
 *  policy alive   our finalizer gpukmm.io/operand-protection first; every
 *                 rendered object (lib/operands) created when absent from the
 *                 view (an AlreadyExists means an object we do not see yet —
 *                 upstream's, without our label — is read and then adopted),
 *                 patched when its managed fields differ (gk_op_sync), left
 *                 alone when another controller owns it (an error says so);
 *                 every object of the catalogue that is ours but no longer
 *                 rendered (dp<->dra, resourceMonitoring off, NFD or Prometheus
 *                 off) deleted — the DRA ones only while no ResourceClaim holds
 *                 a GPU (upstream's guard, requeued every 5 s);
 *  policy deleted the ordered teardown (upstream §9.3): device plugin and XPU
 *                 Manager, then (guarded) DRA, then NFD and Prometheus, each
 *                 stage once the previous one is gone from the view; then our
 *                 finalizer and upstream's gpu.intel.com/clusterpolicy-protection
 *                 (taken over: nobody else removes it once the Go operator is
 *                 gone) are removed — modmgr deletes the Module only after that;
 *  policy absent  nothing is deleted on an absence (the safety rule): the
 *                 owner references let the garbage collector, which checks the
 *                 owner's uid with the API server, remove what is left.
 *
 * Kueue: the ResourceFlavor, ClusterQueues and LocalQueues of the policy that
 * the view holds (upstream's label app=gpu.intel.com-kueue-queue, owner=<cp>)
 * and that are no longer rendered are deleted (queues dropped from the spec,
 * enableKueue off, teardown with NFD and Prometheus); quotas come from the
 * view's nodes (dp) or ResourceSlices (dra, once listed). A LocalQueue moved to
 * another ClusterQueue is deleted and created again (immutable in Kueue).
 *
 * Upstream's leftovers: an object of the catalogue that is not rendered and is
 * not ours, but carries gpu-base-operator's markers for this policy (its `app`
 * and `owner: <cp>` labels, or its controller reference to the policy), is
 * deleted like ours. The markers are read from the view (DaemonSets of the
 * operator namespace, ConfigMaps, Kueue objects) or, for the kinds the watcher
 * only sees by our label, from one GET per object (ops->probe), whose 404 is
 * remembered; nothing is deleted without that successful read.
 *
 * Fail closed (ARCHITECTURE.md §4): the DRA guard blocks while the watcher
 * cannot vouch for the claims; in the teardown an object missing from the view
 * is gone only when the watcher can vouch for the operands (else the
 * finalizers wait: "deletion of ClusterPolicy … waits: … could not be confirmed
 * gone"); no operand of a live policy is removed on a copy of the policy the
 * watcher cannot vouch for (unreadable, or its kind in a gap).
 *
 * Deletes are by uid precondition of the object seen; patches carry its
 * resourceVersion. Writes go through an ops table (kops.c; fakes in tests),
 * one call in flight per object; a call's end marks the policy dirty again.
 * The report: devicePluginStatus / draStatus / xpuManagerStatus from the
 * DaemonSets' status ("N/A" when absent) and the errors of this pass. */
#ifndef GPUKMM_OPMGR_PASS_H
#define GPUKMM_OPMGR_PASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/operands.h"
#include "view.h"

#define GK_OPP_MAX_ERRORS 10
#define GK_OPP_REQUEUE_MS 5000
/* node and ResourceSlice changes run a Kueue policy's pass this much later: a
 * burst of them costs one pass, and a quota is written once it has settled */
#define GK_OPP_KUEUE_COALESCE_MS 2000

enum gk_opp_wr {
	GK_OPP_WR_STARTED, /* the call is in flight now */
	GK_OPP_WR_BUSY,    /* a call for that object is already in flight */
	GK_OPP_WR_WAIT,    /* backing off after a failure */
	GK_OPP_WR_FAILED,  /* not started: retry the pass */
	GK_OPP_WR_ABSENT,  /* probe: a GET answered 404 (remembered) */
};

/* An object's address for the API. */
typedef struct gk_opp_ref {
	const char *api_version, *kind, *resource, *ns, *name;
} gk_opp_ref;

typedef struct gk_opp_ops {
	void *user;
	/* create `obj` (copied); *last_err: the API's message of the last failed call on that
	 * object until one succeeds, else NULL */
	int (*create)(void *user, const gk_opp_ref *r, const cJSON *obj, const char **last_err);
	int (*patch)(void *user, const gk_opp_ref *r, const char *merge_patch, const char **last_err);
	int (*del)(void *user, const gk_opp_ref *r, const char *uid, const char **last_err);
	/* read an object the view cannot see into it (GK_OPP_WR_ABSENT once a GET said 404) */
	int (*probe)(void *user, const gk_opp_ref *r, const char **last_err);
	/* the policy's finalizers := fins, guarded by its resourceVersion */
	int (*finalizers)(void *user, const char *policy, const char *rv, char *const *fins, size_t n,
			  const char **last_err);
} gk_opp_ops;

typedef struct gk_opp_cfg {
	const char *operator_secret;  /* $OPERATOR_SECRET */
} gk_opp_cfg;

typedef struct gk_opp_result {
	bool idle;        /* not the leader (or no discovery yet): nothing written, no report */
	bool deleted;     /* the policy is gone */
	bool failed;      /* retry with backoff */
	int64_t requeue_ms;
	int64_t generation;
	char dp[32], dra[32], xpu[32];
	char *errors[GK_OPP_MAX_ERRORS];
	size_t n_errors;
	size_t writes, pending;
} gk_opp_result;

int gk_opp_pass(const gk_opv *v, const char *policy, const gk_opp_cfg *cfg, const gk_opp_ops *ops,
		gk_opp_result *res, gk_err *err);
void gk_opp_result_free(gk_opp_result *res);

#endif
