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
#include "lease.h"
#include "store.h"

enum wr_topic { WT_CP, WT_MODULE, WT_NODE, WT_RC, WT_DS, WT_POD, WT_OP, WT_RS, WT_N };
/* WG_DRAV: some resource.k8s.io version of deviceclasses is served (the
 * operand sources of that group follow the newest one, wr.dra_version).
 * WG_KRF/KCQ/KLQ: each Kueue CRD; WG_KUEUE: all three (upstream's test).
 * WG_KSLICE: the ResourceSlices are watched (DRA and Kueue served, and a
 * ClusterPolicy wants Kueue in dra mode: they are its quotas' input). */
enum wr_gate { WG_NONE, WG_CP, WG_KMM, WG_DRA, WG_OPENSHIFT, WG_NFD, WG_PROM, WG_VAP, WG_DRAV,
	       WG_KRF, WG_KCQ, WG_KLQ, WG_KUEUE, WG_KSLICE, WG_N };
#define WR_NSRC 24
#define WR_NDISC 14

typedef struct wr wr;

typedef struct wr_src {
	wr *w;
	int idx;                 /* into the source table */
	gk_kube_watch *kw;       /* NULL when not running */
	bool synced;
} wr_src;

typedef struct wr_opts {
	const char *ns;               /* operator namespace */
	int64_t discovery_ms;         /* re-check period, default 10000 */
	bool leader_elect;
	const char *lease_name;       /* default "gpukmm-controller" */
	const char *identity;         /* default hostname_pid */
	wl_config lease;
	int watch_min_timeout_s, watch_max_timeout_s; /* 0 = lib default 300..600 */
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
	bool gate[WG_N];             /* indexed by wr_gate: served? (WG_NONE always true) */
	char dra_version[16];        /* newest served resource.k8s.io version of deviceclasses, "" = none */
	bool nfd_namespaced;         /* nodefeaturerules is namespaced (the NFD CRD's scope) */
	bool kueue_dra_wanted;       /* a ClusterPolicy wants Kueue in dra mode */
	char src_version[WR_NSRC][16]; /* the version a running DRA-versioned source watches */
	bool disc_known;
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
	uint64_t c_size[WT_N];
	uint64_t c_leader;
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

/* RPC handlers (registered by wr_init when srv is given). The reply's objects
 * are the store's packed bytes, attached as length-delimited unknown fields
 * (borrowed: pack or send the reply before the store changes); a receiver
 * unpacks them as the ordinary repeated fields. */
void wr_snapshot_fill(wr *w, const Gpukmm__SnapshotRequest *req, Gpukmm__SnapshotReply *rep,
		      Gpukmm__Discovery *disc, Gpukmm__Leadership *lead);
void wr_snapshot_free(Gpukmm__SnapshotReply *rep);
/* The discovery answers as published (strings borrowed from w). */
void wr_discovery_fill(wr *w, Gpukmm__Discovery *d);

#endif
