/* gpukmm — the one consumer of the watcher bus (modmgr, gater, statusd).
 *
 * A service's view of the cluster is built from a Watcher.Snapshot and kept
 * current by the bus events that follow it. gk_wsub does the part every
 * consumer needs, on the service loop:
 *   - subscribes to the topics (each decoded as gpukmm.Event) and asks the
 *     watcher for a snapshot of them on open;
 *   - buffers (bounded) the events that arrive while a snapshot is in flight;
 *     when the snapshot comes the view is reset from it, then the buffered
 *     events newer than it are applied, in order;
 *   - resyncs by a new snapshot after a sequence gap or a publisher restart
 *     (epoch change) on the bus, and retries a snapshot that failed, was not
 *     synced yet, or during which the buffer overflowed;
 *   - resumes the subscription from the snapshot (its numbers and publisher
 *     epoch) so nothing is applied twice and nothing missed goes unnoticed.
 * The view itself is the caller's, behind three callbacks.
 *
 * Adopting it (what modmgr, the gater and statusd did): keep the view's own
 * load_snapshot/apply functions as the reset/apply callbacks; do in
 * `resynced` what followed the snapshot (log the view, gk_svc_ready on
 * first, schedule work); gate work on gk_wsub_synced(); point the
 * snapshots/gaps/events counters at gk_wsub_stats_get(). */
#ifndef GPUKMM_WSUB_H
#define GPUKMM_WSUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.pb-c.h"
#include "gpukmm/err.h"
#include "gpukmm/kmap.h"
#include "gpukmm/ipc.h"
#include "gpukmm/loop.h"

typedef struct gk_wsub gk_wsub;

typedef struct gk_wsub_view {
	void *user;
	/* Rebuild the view from a synced snapshot (an error is logged; the
	 * view keeps what it could load). */
	int (*reset)(void *user, const Gpukmm__SnapshotReply *s, gk_err *err);
	/* One event, in bus order: live, or buffered during the snapshot and
	 * newer than it (an error is logged and counted). */
	int (*apply)(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err);
	/* After reset and the buffered events: the view is consistent again
	 * (unless a gap during the snapshot already asked for the next one:
	 * gk_wsub_synced() says). first: the first time since open. May be NULL. */
	void (*resynced)(void *user, bool first);
} gk_wsub_view;

/* The default bound of a snapshot reply: every Node of a 15,000-node cluster with
 * its gpukmm.io/node-report (typically 1-2 KiB, at most 64 KiB each), or as many
 * claims; the ipc default of 4 MiB stopped at a few thousand nodes. */
#define GK_WSUB_SNAPSHOT_MAX ((size_t)64 << 20)

typedef struct gk_wsub_opts {
	const char *const *topics;   /* under 32 bytes each */
	size_t n_topics;
	size_t buffer_max;           /* events buffered during a snapshot; 0 = 4096 */
	size_t snapshot_max;         /* bytes of a snapshot reply; 0 = GK_WSUB_SNAPSHOT_MAX */
	int snapshot_timeout_ms;     /* 0 = 10000 */
	int retry_ms;                /* after a failed snapshot; 0 = 200 */
} gk_wsub_opts;

typedef struct gk_wsub_stats {
	uint64_t snapshots;          /* views rebuilt */
	uint64_t snapshot_failures;  /* snapshots refused, failed, not synced or overflowed (retried) */
	uint64_t gaps;               /* sequence gaps / publisher restarts seen on the bus */
	uint64_t events;             /* events received */
	uint64_t event_errors;       /* events the view could not apply */
	uint64_t overflows;          /* events dropped from a full buffer (the snapshot is retried) */
} gk_wsub_stats;

/* Subscribe on events_url, ask watcher_url for the first snapshot; fds and
 * timers on `loop`. opts and view are copied; the topic strings are not
 * (keep them: string constants). */
int gk_wsub_open(gk_wsub **out, gk_loop *loop, const char *events_url, const char *watcher_url,
		 const gk_wsub_opts *opts, const gk_wsub_view *view, gk_err *err);
/* Cancels an outstanding snapshot (no callback runs after it); call before
 * the view is freed. NULL is a no-op. */
void gk_wsub_close(gk_wsub *w);
/* A view has been built and no resync is in flight: work on it is safe. */
bool gk_wsub_synced(const gk_wsub *w);
const gk_wsub_stats *gk_wsub_stats_get(const gk_wsub *w);

/* The bus sequence number of `topic` at the time of the snapshot (0 if absent). */
uint64_t gk_wsub_snapshot_seq(const Gpukmm__SnapshotReply *s, const char *topic);

/* Leadership as a view keeps it, from a snapshot's or an event's Leadership
 * (no information = no election configured = we lead, term 0): *leader and
 * *term (the Leadership.term a component stamps its status reports with) set;
 * true when either changed. A view acts on a change of either (marks its keys
 * dirty): a new term with `leader` unchanged is a leadership lost and won again
 * (e.g. across a watcher restart). */
bool gk_wsub_lead_update(bool *leader, uint64_t *term, const Gpukmm__Leadership *l);

/* ---- a view's objects: typed copies of watcher objects by key ----------------------
 *
 * What a view keeps from snapshots and events (ClusterPolicies by name,
 * DaemonSets by "ns/name", ...): each entry owns a copy of the message, or
 * no message at all (a set: gk_wsub_tab_add, for a kind a view only counts or
 * looks up by name). Bounded: at most `max` entries. Lookups go through a hash
 * index (a view may hold every claim of a 15,000-node cluster). Iterate with
 * t->v[i], i < t->n (unordered; put/del move entries). */

typedef struct gk_wsub_obj {
	const char *key;       /* the index's copy */
	ProtobufCMessage *msg; /* NULL for an entry of a set */
} gk_wsub_obj;

/* The default bound of a view table: above the largest cluster we support (15,000
 * nodes, as many claims), still a bound. */
#define GK_WSUB_TAB_MAX 65536
/* A table that refused an object no longer holds the whole kind: a view must then
 * treat the kind as unconfirmed (gk_wsub_tab_overflow) until the next snapshot. */
typedef struct gk_wsub_tab {
	gk_wsub_obj *v;
	size_t n, cap, max;
	gk_kmap idx;   /* key → its index in v, plus one */
	bool overflow; /* a put was refused (over max, or out of memory) since the last clear */
	const char *kind;  /* what it holds, for the overflow message (gk_wsub_tab_kind) */
	char why[192];     /* the overflow message, set when a put is refused */
} gk_wsub_tab;

/* A deep copy of a message (pack + unpack), NULL on OOM or for NULL. */
ProtobufCMessage *gk_wsub_clone(const ProtobufCMessage *m);
/* An empty table of at most max (0 = GK_WSUB_TAB_MAX) entries; nothing to free yet. */
void gk_wsub_tab_init(gk_wsub_tab *t, size_t max);
/* Names what the table holds (a static string, e.g. "ResourceClaim"), for the message below;
 * kept across clears. */
void gk_wsub_tab_kind(gk_wsub_tab *t, const char *kind);
/* Why the table cannot vouch for its kind (it refused an object), NULL when it can. */
const char *gk_wsub_tab_overflow(const gk_wsub_tab *t);
/* Store a copy of msg under key, replacing what was there. GK_RESOURCE_EXHAUSTED
 * (err says which key) on OOM or when a new key would pass the bound. */
int gk_wsub_tab_put(gk_wsub_tab *t, const char *key, const ProtobufCMessage *msg, gk_err *err);
/* Store key with no message (a set's member); refused like a put. */
int gk_wsub_tab_add(gk_wsub_tab *t, const char *key, gk_err *err);
const ProtobufCMessage *gk_wsub_tab_get(const gk_wsub_tab *t, const char *key);
/* Whether key is held (with or without a message). */
bool gk_wsub_tab_has(const gk_wsub_tab *t, const char *key);
void gk_wsub_tab_del(gk_wsub_tab *t, const char *key);
/* Drop every entry (the table stays usable, with its bound). */
void gk_wsub_tab_clear(gk_wsub_tab *t);

/* ---- what the watcher cannot vouch for (Discovery.unconfirmed) ----------------------
 *
 * The safety rule (ARCHITECTURE.md §4): a view never reads an absence in a
 * topic the watcher cannot vouch for. Per topic a view reads: the reason the
 * whole kind is unconfirmed (NULL = confirmed), and the objects that exist but
 * could not be read. A "whole" topic (claims, pods: read as a set) takes one
 * unreadable object as the whole kind unconfirmed; so does any topic with more
 * unreadable objects than the watcher listed. */

#define GK_WSUB_UNCONF_MAX 8

typedef struct gk_wsub_unconf_topic {
	const char *topic;       /* "clusterpolicy", "module", ... (not owned) */
	bool whole;
	char *reason;            /* NULL = the kind is confirmed */
	char **keys, **errs;     /* unreadable objects ("ns/name") and why */
	size_t n;
} gk_wsub_unconf_topic;

typedef struct gk_wsub_unconf {
	gk_wsub_unconf_topic t[GK_WSUB_UNCONF_MAX];
	size_t n;
} gk_wsub_unconf;

/* topics[i] (kept, not copied), whole[i] (may be NULL = none). All confirmed. */
void gk_wsub_unconf_init(gk_wsub_unconf *u, const char *const *topics, const bool *whole, size_t n);
void gk_wsub_unconf_free(gk_wsub_unconf *u);
/* Take a Discovery in (NULL = every topic confirmed); true when what a
 * decision reads changed (a kind's confirmation, the unreadable keys). Out of
 * memory leaves the topic unconfirmed ("out of memory"). */
bool gk_wsub_unconf_load(gk_wsub_unconf *u, const Gpukmm__Discovery *d);
/* Why topic (its index) is unconfirmed as a whole, NULL when it is not. */
const char *gk_wsub_unconf_reason(const gk_wsub_unconf *u, size_t topic);
/* The error of an unreadable object of topic, NULL when it is readable. */
const char *gk_wsub_unconf_unreadable(const gk_wsub_unconf *u, size_t topic, const char *key);
/* The error of some unreadable object of topic whose key starts with prefix, NULL when none is. */
const char *gk_wsub_unconf_unreadable_under(const gk_wsub_unconf *u, size_t topic, const char *prefix);
/* Bit i: topic i is unconfirmed or has unreadable objects. */
unsigned gk_wsub_unconf_bits(const gk_wsub_unconf *u);

#endif
