/* gpukmm-upgrader — the pure rollout decision (ARCHITECTURE.md §5 "Driver
 * upgrades"). Given one ClusterPolicy's rollout view — the target version, the
 * resolved upgradePolicy, and per node what the API says (labels, cordon,
 * annotations, KMM's labels, the node's own report) plus how this process's
 * drain of it is going — decide which nodes move to which state, and what the
 * rollout looks like (status.upgrade). No I/O, no clock (now is passed in).
 *
 * Everything a decision needs is in the API, so a restarted or new leader
 * decides the same from the same objects:
 *   label gpukmm.io/upgrade-state   draining → unloading → loading → done,
 *                                   or failed (retry: the admin removes it)
 *   label gpukmm.io/upgrade-skip    "true": never picked; a node still draining
 *                                   or unloading is released
 *   annotation gpukmm.io/upgrade-cordoned  "true": the cordon is ours (written
 *                                   in the same patch as the cordon); an admin's
 *                                   cordon carries none and survives the upgrade
 *   annotation gpukmm.io/upgrade-started   the drain's start (its timeout)
 *   annotation gpukmm.io/upgrade-from      the srcversion of the module loaded
 *                                   before the unload (what "new" means)
 *   annotation gpukmm.io/upgrade-reason    why the node failed
 *   label kmm.node.kubernetes.io/version-module.<ns>.<m>  KMM's ordered-upgrade
 *                                   input, moved by the upgrader
 *
 * Per node (a state in the API, an action here):
 *   no version label, autoUpgrade      LABEL   the version label (a first
 *                                              install: nothing loaded to drain)
 *   old version, picked                START   cordon (unless cordoned) +
 *                                              draining (unloading when drain
 *                                              is off)
 *   draining                           DRAIN   the drainer evicts; done →
 *                                              UNLOAD; timeout or a pod that
 *                                              may not be evicted → FAIL
 *   unloading (operands paused)        MOVE    once the report says the module
 *                                              can be unloaded: version label
 *                                              → target, state loading
 *   loading                            FINISH  once KMM's ready + version.ready
 *                                              labels and the node's report
 *                                              show the new module: uncordon
 *                                              (if ours), done
 * Picks: at most maxParallel nodes in draining/unloading/loading, and
 * unavailable nodes (those, failed ones, not-Ready nodes, labelled nodes
 * without KMM's ready label) at most maxUnavailable — a pick that is already
 * unavailable costs nothing. Picks need `confirmed` (the in-progress states
 * were read fresh from the API since this process started leading): otherwise
 * the plan asks for that read first (plan.need_confirm) and picks nothing. */
#ifndef GPUKMM_UPGRADER_DECIDE_H
#define GPUKMM_UPGRADER_DECIDE_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/policy.h"
#include "kube.pb-c.h"

#define GK_UPG_MAX_PROBLEMS 10
#define GK_UPG_MSG_MAX 384
#define GK_UPG_VER_MAX 128

typedef enum gk_upg_state {
	GK_UPG_S_NONE = 0,   /* no state label */
	GK_UPG_S_DRAINING,
	GK_UPG_S_UNLOADING,
	GK_UPG_S_LOADING,
	GK_UPG_S_DONE,
	GK_UPG_S_FAILED,
	GK_UPG_S_UNKNOWN,    /* a value we did not write: left alone, counted as failed */
} gk_upg_state;

gk_upg_state gk_upg_state_parse(const char *label_value);
const char *gk_upg_state_name(gk_upg_state s);

/* The node's own report, as far as the upgrade needs it. */
typedef struct gk_upg_report {
	bool present;                 /* a readable report for the policy's module */
	char module[64];              /* the module it covers */
	bool loaded, oot;             /* the module is loaded, from outside the kernel tree */
	char version[GK_UPG_VER_MAX]; /* its modinfo version, "" when none */
	char srcversion[64];
	int can_unload;               /* Gpukmm__TriState */
	char blocker[256];            /* why not, the report's sentence */
	uint32_t vfs;                 /* active SR-IOV VFs */
} gk_upg_report;

/* How this process's drain of a node is going (drain.c). */
enum gk_upg_drain_status {
	GK_UPG_DRAIN_NONE = 0,  /* not running here (yet) */
	GK_UPG_DRAIN_RUNNING,   /* pods left or being evicted */
	GK_UPG_DRAIN_DONE,      /* a successful list showed no pod to evict and none terminating */
	GK_UPG_DRAIN_FAILED,    /* a pod that may not be evicted (unmanaged, emptyDir), or the list is refused */
};

typedef struct gk_upg_node {
	const char *name;
	bool ready;                   /* Node Ready condition True */
	bool unschedulable;           /* cordoned */
	const char *version;          /* KMM version-module label, NULL = absent */
	gk_upg_state state;
	const char *state_raw;        /* the label's value (for UNKNOWN), NULL = absent */
	bool skip;                    /* gpukmm.io/upgrade-skip: "true" */
	bool cordoned_by_us;          /* gpukmm.io/upgrade-cordoned: "true" */
	int64_t started_s;            /* gpukmm.io/upgrade-started (unix s), 0 = absent or unreadable */
	const char *from_srcversion;  /* gpukmm.io/upgrade-from, NULL = absent */
	const char *fail_reason;      /* gpukmm.io/upgrade-reason, NULL = absent */
	bool kmm_ready;               /* kmm.node.kubernetes.io/<ns>.<m>.ready present */
	const char *kmm_version_ready;/* its .version.ready value, NULL = absent */
	gk_upg_report report;
	int drain;                    /* enum gk_upg_drain_status */
	const char *drain_msg;        /* pods left / the last eviction answer / why it failed, NULL = none */
	bool write_pending;           /* a write of this node is in flight: decide nothing for it */
} gk_upg_node;

typedef struct gk_upg_input {
	/* The version nodes move to: the Module's container.version once it is
	 * the policy's kernelModule.version; NULL = hold (no picks, no moves). */
	const char *target;
	/* The policy no longer wants a rollout (gone, being deleted, no
	 * kernelModule or no version): nodes still draining/unloading/loading
	 * are released (uncordoned if ours, state removed). */
	bool release;
	const char *policy_version;   /* kernelModule.version (for the wait message), may be NULL */
	const char *module;           /* kernelModule.moduleName (messages), may be NULL */
	gk_policy_upgrade pol;
	int64_t now_s;
	const gk_upg_node *nodes;     /* the nodes the Module selects, sorted by name */
	size_t n;
	bool confirmed;               /* in-progress states read fresh since we lead: picks allowed */
} gk_upg_input;

enum gk_upg_action {
	GK_UPG_A_NONE = 0,
	GK_UPG_A_LABEL,     /* version label = target (first install) */
	GK_UPG_A_START,     /* cordon (unless cordoned) + state draining/unloading + started */
	GK_UPG_A_DRAIN,     /* keep the drainer running on it (no write) */
	GK_UPG_A_UNLOAD,    /* state unloading (the operands leave) */
	GK_UPG_A_MOVE,      /* version label = target, state loading, from = srcversion */
	GK_UPG_A_FINISH,    /* state done, our annotations removed, uncordon if ours */
	GK_UPG_A_FAIL,      /* state failed + reason, uncordon if ours and the driver was not touched */
	GK_UPG_A_RELEASE,   /* state and our annotations removed, uncordon if ours */
};
const char *gk_upg_action_name(int a);

typedef struct gk_upg_step {
	size_t node;                  /* index into input.nodes */
	int action;                   /* enum gk_upg_action */
	bool cordon;                  /* START: the node is not cordoned yet: cordon it, mark it ours */
	bool uncordon;                /* FINISH/FAIL/RELEASE: our cordon is lifted */
	char reason[32];              /* FAIL: CamelCase; events */
	char message[GK_UPG_MSG_MAX]; /* FAIL: the reason annotation; every step: the event's message */
} gk_upg_step;

typedef struct gk_upg_problem {
	size_t node;
	const char *state;            /* static */
	const char *reason;           /* static CamelCase */
	char message[GK_UPG_MSG_MAX];
} gk_upg_problem;

typedef struct gk_upg_plan {
	gk_upg_step *steps;           /* at most one per node, in node order; caller frees with gk_upg_plan_free */
	size_t n_steps;
	bool need_confirm;            /* picks wanted but not confirmed: read the states fresh, decide again */
	/* the rollout */
	uint32_t nodes, up_to_date, pending, draining, unloading, loading, failed, skipped;
	uint32_t unavailable;
	int max_unavailable;          /* resolved */
	bool halted;                  /* failures use up maxUnavailable while nodes wait */
	bool blocked;                 /* unavailable nodes (not failures) use it up, nothing in progress */
	gk_upg_problem problems[GK_UPG_MAX_PROBLEMS];
	size_t n_problems;
	uint32_t problem_nodes;       /* all of them (problems[] lists the first few) */
	/* the Upgraded condition */
	const char *cond_status;      /* "True" | "False" */
	const char *cond_reason;      /* UpgradeComplete | Upgrading | UpgradeHalted | UpgradeBlocked |
					 ManualUpgrade | WaitingForModule */
	char cond_message[1024];
} gk_upg_plan;

/* Decide. GK_RESOURCE_EXHAUSTED on OOM (plan empty). */
int gk_upg_decide(const gk_upg_input *in, gk_upg_plan *plan, gk_err *err);
void gk_upg_plan_free(gk_upg_plan *plan);

/* The merge patch of the Node for one step (with the node's resourceVersion
 * as a precondition when rv is set): labels, our annotations and
 * spec.unschedulable. version_key: KMM's version-module label key. NULL on
 * OOM or for actions without a write (NONE, DRAIN). now_s: the started stamp. */
cJSON *gk_upg_patch(const gk_upg_input *in, const gk_upg_step *s, const char *version_key, const char *rv);

/* status.upgrade of the plan (typed, for the StatusReport); free with
 * gk_upg_status_free. NULL on OOM. */
Gpukmm__UpgradeStatus *gk_upg_status(const gk_upg_input *in, const gk_upg_plan *plan);
void gk_upg_status_free(Gpukmm__UpgradeStatus *s);

/* "2026-01-02T03:04:05Z" → unix seconds; 0 when unreadable. */
int64_t gk_upg_parse_time(const char *s);

#endif
