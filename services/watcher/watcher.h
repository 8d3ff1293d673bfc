/* gpukmm-watcher runtime: discovery, one reflector per kind (lib/kube mux),
 * typed cache, bus events, Watcher.Snapshot/Get, leader election.
 * main.c wires it to the service loop; tests drive it the same way. */
#ifndef GPUKMM_WATCHER_WATCHER_H
#define GPUKMM_WATCHER_WATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "events.pb-c.h"
#include "gpukmm/ipc.h"
#include "gpukmm/kube.h"
#include "gpukmm/loop.h"
#include "disc.h"
#include "lease.h"
#include "store.h"

enum wr_topic { WT_CP, WT_MODULE, WT_NODE, WT_RC, WT_DS, WT_POD, WT_OP, WT_RS, WT_N };
/* What starts a source: nothing (always), or its API being served (debounced,
 * disc.h). WG_DRA + i: resource.k8s.io/<wd_dra_versions[i]> resourceclaims,
 * newest first; WG_KRF/KCQ/KLQ: each Kueue CRD. Every gate before WG_DRAV is
 * one discovery query. Derived from those (not queried):
 * WG_DRAV: the newest of the DRA versions that is served (the operand
 * sources of that group follow it, wr.dra_version);
 * WG_KUEUE: all three Kueue CRDs served (upstream's test), absent once one is
 * confirmed absent;
 * WG_KSLICE: the ResourceSlices are watched (DRA and Kueue served, and a
 * ClusterPolicy wants Kueue in dra mode: they are its quotas' input). */
enum wr_gate { WG_NONE, WG_CP, WG_KMM, WG_OPENSHIFT, WG_NFD, WG_PROM, WG_VAP, WG_KRF, WG_KCQ, WG_KLQ,
	       WG_DRA, WG_DRAV = WG_DRA + WD_DRA_N, WG_KUEUE, WG_KSLICE, WG_N };
#define WR_NSRC 27
#define WR_NDISC (WG_DRAV - 1)  /* discovery queries: every gate from WG_CP up to WG_DRAV */
#define WR_BAD_MAX 1024         /* unreadable objects remembered per topic */

typedef struct wr wr;

typedef struct wr_src {
	wr *w;
	int idx;                 /* into the source table */
	gk_kube_watch *kw;       /* NULL when not running */
	bool synced;
	bool current;            /* synced and no failure since the last list or resume */
	char why[256];           /* the last failure, while not current */
} wr_src;

/* Objects that exist but failed conversion (the safety rule: an object we
 * cannot read is not absent). */
typedef struct wr_bad {
	char **keys, **errs;
	size_t n, cap;
	bool overflow;           /* more than WR_BAD_MAX: the topic is unconfirmed as a whole */
} wr_bad;

typedef struct wr_opts {
	const char *ns;               /* operator namespace */
	int64_t discovery_ms;         /* re-check period, default 10000 */
	bool leader_elect;
	const char *lease_name;       /* default "gpukmm-controller" */
	const char *identity;         /* default hostname_pid */
	wl_config lease;
	int watch_min_timeout_s, watch_max_timeout_s; /* 0 = lib default 300..600 */
	int64_t discovery_confirm_ms; /* an API is believed gone after WD_READS absent reads over this; 0 = WD_SPAN_MS */
} wr_opts;

struct wr {
	wr_opts o;
	char identity[256];
	gk_loop *loop;
	gk_kube_client *kc;          /* watches + discovery */
	gk_kube_client *lc;          /* blocking: only the lease release at SIGTERM */
	gk_kube_mux *mux;
	gk_ipc_pub *pub;
	gk_ipc_server *srv;
	Gpukmm__Watcher_Service rpc;
	ws_store store[WT_N];
	wr_src src[WR_NSRC];
	wd_gate gates[WG_N];         /* indexed by wr_gate (WG_NONE, WG_DRAV unused; WG_KUEUE, WG_KSLICE derived) */
	char dra_version[16];        /* newest served resource.k8s.io version, "" = none */
	bool nfd_namespaced;         /* nodefeaturerules is namespaced (the NFD CRD's scope) */
	bool kueue_dra_wanted;       /* a ClusterPolicy wants Kueue in dra mode */
	char src_version[WR_NSRC][16]; /* the version a running DRA-versioned source watches */
	wr_bad bad[WT_N];
	bool disc_known;             /* the ClusterPolicy and KMM APIs answered once */
	uint8_t *state_sent;         /* the last Discovery published (packed), to publish changes only */
	size_t state_sent_len;
	uint32_t unconfirmed_bits;   /* topics unconfirmed in it */
	wl_state ls;
	char holder[256];
	bool ready_sent;
	void (*on_ready)(void *user);
	void *on_ready_user;
	gk_timer_id disc_timer, tick_timer, lease_timer;
	gk_timer_id kslice_timer;    /* kueue_dra_wanted decided again (a ClusterPolicy moved) */
	/* async API calls on the mux: never block the loop */
	gk_kube_call *disc_calls[WR_NDISC];
	struct wr_disc_slot { wr *w; int i; } disc_slot[WR_NDISC];
	int disc_res[WR_NDISC];      /* 1 served, 0 absent, -code error */
	int disc_pending;
	gk_kube_call *lease_call;    /* the Lease GET or write in flight */
	enum wl_action lease_act;
	wl_lease lease_cur;          /* as read before the write */
	int64_t lease_write_ms;      /* when the write started */
	/* counters (heartbeats) */
	uint64_t c_events, c_errors, c_convert_errors, c_published;
	uint64_t c_snapshots_refused; /* over the size the caller can receive */
	uint64_t c_size[WT_N];
	uint64_t c_leader;
	uint64_t c_unconfirmed;      /* topics whose state is unconfirmed now */
	uint64_t term, last_term;    /* Leadership.term: 0 while not leading */
};

extern const char *const wr_topic_names[WT_N];

/* Everything but the sockets: pub/srv may be NULL (tests of the cache path). */
int wr_init(wr *w, const wr_opts *o, gk_loop *loop, gk_kube_client *kc, gk_kube_client *lc,
	    gk_ipc_pub *pub, gk_ipc_server *srv, gk_err *err);
/* Discovery now, start watches, timers. */
int wr_start(wr *w, gk_err *err);
/* SIGTERM: release the lease if we hold it. */
void wr_release(wr *w);
void wr_fini(wr *w);
/* true once every running watch has listed at least once */
bool wr_synced(const wr *w);

/* The Discovery message of now: believed-served APIs, the unconfirmed topics
 * (with their reasons and unreadable objects), the DRA version read. Free with
 * wr_state_free. */
void wr_state_fill(wr *w, Gpukmm__Discovery *d);
void wr_state_free(Gpukmm__Discovery *d);

/* RPC handlers (registered by wr_init when srv is given). The reply's objects
 * are the store's packed bytes, attached as length-delimited unknown fields
 * (borrowed: pack or send the reply before the store changes); a receiver
 * unpacks them as the ordinary repeated fields. */
void wr_snapshot_fill(wr *w, const Gpukmm__SnapshotRequest *req, Gpukmm__SnapshotReply *rep,
		      Gpukmm__Discovery *disc, Gpukmm__Leadership *lead);
void wr_snapshot_free(Gpukmm__SnapshotReply *rep);

#endif
