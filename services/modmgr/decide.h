/* gpukmm-modmgr — the pure reconcile decision of the KMM Module manager.
 *
 * Given what the watcher told us about one ClusterPolicy (the "view"), decide
 * what to write (the "plan"): create / merge-patch / delete the Module
 * `<cp>-gpu`, add or remove our finalizer on the ClusterPolicy, the kmmStatus,
 * errors and the ModuleLoaded condition to report, the requeue delay and the
 * Kubernetes Events to emit. No I/O: main.c/exec.c carry the plan out.
 *
 * Parity: reference gpu-base-operator §1.5, §2.1, §2.5, §2.6, §4, §5.2, §7.3
 * (exact strings). Deliberate differences (DESIGN.md §5):
 *  - every requeue is honoured ("Removing" and "Recreating" requeue too);
 *  - ClusterPolicy deletion goes through OUR finalizer, GK_MM_FINALIZER, so the
 *    Module is deleted under the same guard instead of being garbage collected
 *    past allocated claims. We use our own name, not upstream's
 *    `gpu.intel.com/clusterpolicy-protection`: if both operators ever run (a
 *    migration), each removes only its own finalizer and they never fight;
 *  - in `dp` mode (and when the policy is gone and its mode is unknown), pods
 *    requesting gpu.intel.com/... resources guard the Module like claims;
 *  - a Module controlled by someone else is never deleted;
 *  - KMM discovery comes from the view (re-checked while running);
 *  - the safety rule (ARCHITECTURE.md §4): no Module delete or recreate, and
 *    no removal of our finalizer from a policy being deleted, on an absence
 *    the view cannot vouch for (the *_unconfirmed reasons); the finalizer of
 *    a policy being deleted never goes while the guard blocks, whatever the
 *    Module looks like (its controller owner reference would let the garbage
 *    collector delete it). */
#ifndef GPUKMM_MODMGR_DECIDE_H
#define GPUKMM_MODMGR_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "kube.pb-c.h"

#define GK_MM_FINALIZER "gpukmm.io/module-protection"
/* gpukmm-opmgr's finalizer: while it is on a policy being deleted, its
 * operands are not torn down yet and the Module waits (it goes last) */
#define GK_MM_OPERAND_FINALIZER "gpukmm.io/operand-protection"
#define GK_MM_REQUEUE_MS 5000            /* upstream RequeueDelay */
#define GK_MM_GPU_DRIVER "gpu.intel.com" /* ResourceClaim allocation result driver */
#define GK_MM_MAX_ERRORS 10              /* upstream keeps at most 10 */
#define GK_MM_MAX_EVENTS 4
#define GK_MM_NAME_MAX 256

typedef struct gk_mm_view {
	const char *policy_name;              /* the key; required */
	const Gpukmm__ClusterPolicy *policy;  /* NULL = gone (NotFound) */
	const Gpukmm__Module *module;         /* <cp>-gpu in ns; NULL = absent */
	const char *ns;                       /* operator namespace */
	bool leader;                          /* only the leader writes */
	bool kmm;                             /* kmm.sigs.x-k8s.io modules served */
	bool dra;                             /* resource.k8s.io resourceclaims served */
	bool claims_allocated;                /* a claim allocated to gpu.intel.com (or unknown) */
	bool gpu_pods;                        /* a live pod requests a gpu.intel.com/... resource */
	/* The safety rule (ARCHITECTURE.md §4): why the watcher cannot vouch for
	 * a state right now (NULL = confirmed). An absence is only believed
	 * where its reason is NULL; every write that deletes, recreates or
	 * un-finalizes waits on these, and the plan says why.
	 *   policy   this ClusterPolicy: its kind (discovery, list, watch) or
	 *            the object itself (it failed conversion);
	 *   module   KMM's API (discovery), the Modules' list/watch, or <cp>-gpu
	 *            itself (it failed conversion);
	 *   claims   resource.k8s.io's discovery, the claims' list/watch, or a
	 *            claim that failed conversion;
	 *   pods     the pods' list/watch, or a pod that failed conversion. */
	const char *policy_unconfirmed;
	const char *module_unconfirmed;
	const char *claims_unconfirmed;
	const char *pods_unconfirmed;
	bool policy_unreadable, module_unreadable; /* the object itself failed conversion */
	/* Does the existing Module already carry the desired managed fields
	 * (ownerRef, selector, tolerations, imageRepoSecret, moduleLoader)?
	 * Computed by lib/policy's comparison; ignored when module is NULL. */
	bool module_up_to_date;
} gk_mm_view;

enum gk_mm_module_op { GK_MM_MOD_NONE = 0, GK_MM_MOD_CREATE, GK_MM_MOD_PATCH, GK_MM_MOD_DELETE };
enum gk_mm_fin_op { GK_MM_FIN_NONE = 0, GK_MM_FIN_ADD, GK_MM_FIN_REMOVE };

typedef struct gk_mm_event {
	bool warning;                         /* type Warning, else Normal */
	char reason[64];
	char message[384];
} gk_mm_event;

typedef struct gk_mm_plan {
	bool idle;                            /* not the leader: write and report nothing */
	char policy[GK_MM_NAME_MAX];
	char module[GK_MM_NAME_MAX];          /* <cp>-gpu */
	int module_op;                        /* enum gk_mm_module_op */
	bool delete_for_version_change;
	int finalizer_op;                     /* enum gk_mm_fin_op; executed ADD before, REMOVE after the module op */
	bool ordered_upgrade;                 /* log the node-labelling reminder (§2.5) */

	/* the StatusReport */
	bool report;
	bool report_deleted;                  /* the policy is gone */
	int64_t generation;
	bool has_kmm_status;                  /* absent = leave as is */
	char kmm_status[32];
	size_t n_errors;
	char errors[GK_MM_MAX_ERRORS][GK_ERR_MSG_MAX];
	char cond_status[8];                  /* ModuleLoaded: "True" | "False" | "Unknown" */
	char cond_reason[64];
	char cond_message[384];

	int64_t requeue_after_ms;             /* 0 = none */
	bool failed;                          /* an ordinary error: requeue with backoff */
	bool conflict;                        /* a 409: re-read, retried soon (not a failure) */
	bool held;                            /* fail closed: a state could not be confirmed, nothing written */
	char hold[GK_ERR_MSG_MAX];            /* why (logged; in the status when a deletion waits on it) */

	size_t n_events;                      /* emit now */
	gk_mm_event events[GK_MM_MAX_EVENTS];
	bool has_success_event;               /* emit once module_op succeeded */
	gk_mm_event success_event;
} gk_mm_plan;

/* Fill *plan from *view. Never fails (bounded strings are truncated). */
void gk_mm_decide(const gk_mm_view *view, gk_mm_plan *plan);

/* What failed while carrying the plan out. */
enum gk_mm_failure {
	GK_MM_FAIL_GET = 1,         /* re-reading the Module */
	GK_MM_FAIL_APPLY,           /* create or patch */
	GK_MM_FAIL_DELETE,
	GK_MM_FAIL_DELETE_VERSION,  /* the delete of a version-toggle recreate */
	GK_MM_FAIL_FINALIZER,
};
/* Record an API failure in the plan (exact upstream wording, §5.2): adds the
 * error, marks the plan failed (backoff), sets the condition and a Warning
 * event. `apierr` is the API's message, surfaced verbatim. */
void gk_mm_plan_fail(gk_mm_plan *plan, int failure, const char *apierr);

/* Add an error string (deduplicated; the oldest is dropped beyond the bound). */
void gk_mm_plan_add_error(gk_mm_plan *plan, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "<available>/<desired>" of a Module (missing counts are 0). */
void gk_mm_kmm_status_of(const Gpukmm__Module *m, char *buf, size_t cap);

/* Guard helpers over the watcher's objects (§4.1 and the dp-mode extension). */
bool gk_mm_claim_blocks(const Gpukmm__ResourceClaim *c);
bool gk_mm_pod_blocks(const Gpukmm__Pod *p);
/* A pod of gpukmm's own operands (a DaemonSet's pod in the operator namespace,
 * e.g. the XPU Manager requesting gpu.intel.com/monitoring): not a GPU user the
 * dp-mode guard waits for — it would block its own teardown. */
bool gk_mm_pod_is_operand(const Gpukmm__Pod *p, const char *ns);
bool gk_mm_has_operand_finalizer(const Gpukmm__ClusterPolicy *cp);

/* Our finalizer is on the policy. */
bool gk_mm_has_finalizer(const Gpukmm__ClusterPolicy *cp);
/* The Module's controller owner, if it is not ClusterPolicy `policy`: fills
 * kind/name and returns true. */
bool gk_mm_owned_by_other(const Gpukmm__Module *m, const char *policy, const char **kind,
			  const char **name);
/* spec.moduleLoader.container.version of a Module ("" when unset). */
const char *gk_mm_module_version(const Gpukmm__Module *m);

#endif
