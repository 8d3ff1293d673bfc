/* kubesim — the controllers a cluster runs beside its API server, in one thread:
 * the DaemonSet controller (dscontroller.c), the disruption controller for
 * PodDisruptionBudgets (disruption.c) and a kubelet for every node (kubelet.c).
 *
 * The thread follows the store's event history like a watch (ctrl.c): each event
 * only marks its object dirty; a pass then works on the dirty objects and the due
 * timers, so a change costs work for that object only (a node's label change: one
 * check per DaemonSet; a DaemonSet's template change: one check per node). A pass
 * holds srv->mu and writes straight into the store (no admission, no request
 * counters: these are the cluster's own writes); it stops after a bounded number of
 * writes and lets API requests in before it goes on. When the history it follows was
 * compacted past it, it rebuilds its state from the store. */
#ifndef KUBESIM_CTRL_H
#define KUBESIM_CTRL_H

#include <pthread.h>
#include <stdint.h>

#include "gpukmm/kmap.h"
#include "kubesim.h"

enum {
	KS_CTRL_DAEMONSET = 1,
	KS_CTRL_DISRUPTION = 2,
	KS_CTRL_KUBELET = 4,
	KS_CTRL_ALL = 7,
};

typedef struct ks_ctrl_opts {
	unsigned enabled;  /* KS_CTRL_* */
	int pod_ready_ms;  /* kubelet: a pod bound to a node is Running and Ready after this */
	int pod_stop_ms;   /* kubelet: a pod deleted gracefully is gone after this (or its grace period) */
} ks_ctrl_opts;

/* "*", "*,-daemonset", "daemonset,kubelet" (kube-controller-manager's --controllers
 * syntax; names daemonset, disruption, kubelet). */
int ks_ctrl_parse(const char *list, unsigned *enabled, gk_err *err);

typedef struct ks_timer {
	int64_t due; /* ks_mono_ms */
	int kind;    /* KS_T_* */
	char *key;
} ks_timer;

enum { KS_T_DS_NODE, KS_T_POD_START, KS_T_POD_STOP, KS_T_PDB };

struct ks_dsc;
struct ks_kubelet;
struct ks_pdbc;

typedef struct ks_ctrl {
	ks_ctrl_opts o;
	uint64_t cursor; /* last resourceVersion of the history consumed */
	int resync;      /* rebuild from the store on the next pass */
	gk_kmap dirty_nodes, dirty_pods, dirty_ds, dirty_pdbs; /* names / "ns/name" */
	gk_kmap dirty_pdb_ns; /* namespaces where pods or their controllers changed */
	gk_kmap pdb_pending;  /* PDBs to sync (kept past the budget) */
	ks_timer *heap;
	int nheap, capheap;
	int budget; /* writes left in this pass */
	int more;   /* a controller has writes pending past the budget */
	int64_t now;
	struct ks_dsc *dsc;
	struct ks_kubelet *kl;
	struct ks_pdbc *pdbc;
	pthread_t thread;
	int running;
	uint64_t writes; /* total, for /kubesim/stats */
} ks_ctrl;

int ks_ctrl_init(ks_server *s, const ks_ctrl_opts *o);
int ks_ctrl_start(ks_server *s); /* the thread; after the state is loaded */
/* /kubesim/stats "controllers": {"seen": last resourceVersion the controllers
 * handled, "busy": writes still pending, "writes": their writes so far} (mu held). */
void ks_ctrl_stats(ks_server *s, cJSON *stats);
void ks_ctrl_stop(ks_server *s);  /* after shutting_down is set */
void ks_ctrl_free(ks_server *s);
/* One pass, srv->mu held: the events since the last pass, then the due timers.
 * Returns ms until the next timer, -1 for none, 0 when work is left (budget spent).
 * Unit tests drive the controllers with it (now_ms: their clock). */
int64_t ks_ctrl_pass_locked(ks_server *s, int64_t now_ms);

/* for the controllers (mu held) */
void ks_ctrl_timer(ks_ctrl *c, int64_t due, int kind, const char *key);
int ks_ctrl_mark(gk_kmap *set, const char *key);
/* The set's keys (copies, *n of them) and the set emptied: work taken from a set
 * that the work itself may mark again. NULL with *n 0 when empty or out of memory
 * (then the set is left as it was). Free each key and the array. */
char **ks_ctrl_take(gk_kmap *set, size_t *n);
/* Stores obj (taken) as a write of the cluster's; 0 or an error. */
int ks_ctrl_put(ks_server *s, const char *group, const char *resource, const char *ns, const char *name, cJSON *obj);

/* controller hooks (dscontroller.c, kubelet.c, disruption.c), mu held */
int ks_dsc_init(ks_ctrl *c);
void ks_dsc_free(ks_ctrl *c);
void ks_dsc_resync(ks_server *s, ks_ctrl *c);
void ks_dsc_pass(ks_server *s, ks_ctrl *c);
void ks_dsc_timer(ks_server *s, ks_ctrl *c, const char *key);
int ks_kubelet_init(ks_ctrl *c);
void ks_kubelet_free(ks_ctrl *c);
void ks_kubelet_pass(ks_server *s, ks_ctrl *c);
void ks_kubelet_timer(ks_server *s, ks_ctrl *c, int kind, const char *key);
int ks_kubelet_take_removed(ks_ctrl *c); /* pods removed since the last call */
void ks_pdb_pass(ks_server *s, ks_ctrl *c);
void ks_pdb_timer(ks_server *s, ks_ctrl *c, const char *key);
/* [lo, hi) of a bucket's items in namespace ns (disruption.c) */
void ks_ns_range(const ks_bucket *b, const char *ns, int *lo, int *hi);

#endif
