/* gpukmm-statusd controller mode: what it knows from the watcher — the
 * ClusterPolicies (typed copies), a bounded digest per Node (nodes.h, sorted
 * by name), leadership and sync state. Pure data; the bus and snapshot I/O
 * are lib/wsub's (main.c). Changes call `dirty` with a policy name, or NULL when every
 * policy may be affected (a node changed, a snapshot was loaded, leadership
 * was gained). */
#ifndef GPUKMM_STATUSD_VIEW_H
#define GPUKMM_STATUSD_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.pb-c.h"
#include "gpukmm/err.h"
#include "nodes.h"

#define GK_SD_VIEW_MAX_POLICIES 1024
#define GK_SD_VIEW_MAX_NODES 50000 /* #21: 15,000 nodes and room above; ~0.3 KB each (nodes.h) */

typedef struct gk_sd_view gk_sd_view;
typedef void (*gk_sd_dirty_fn)(void *user, const char *policy);

typedef struct gk_sd_view_stats {
	size_t policies, nodes;
	uint64_t node_changes;  /* node events that changed a digest */
	uint64_t node_dropped;  /* nodes not kept: more than GK_SD_VIEW_MAX_NODES */
	bool synced, leader, kmm;
} gk_sd_view_stats;

int gk_sd_view_new(gk_sd_view **out, gk_sd_dirty_fn dirty, void *user, gk_err *err);
void gk_sd_view_free(gk_sd_view *v);
/* Replace everything with a snapshot; then dirty(NULL). */
int gk_sd_view_load_snapshot(gk_sd_view *v, const Gpukmm__SnapshotReply *s, gk_err *err);
/* One bus event of topic "clusterpolicy", "node", "discovery" or "leadership". */
int gk_sd_view_apply(gk_sd_view *v, const char *topic, const Gpukmm__Event *ev, gk_err *err);

const Gpukmm__ClusterPolicy *gk_sd_view_policy(const gk_sd_view *v, const char *name);
size_t gk_sd_view_n_policies(const gk_sd_view *v);
const Gpukmm__ClusterPolicy *gk_sd_view_policy_at(const gk_sd_view *v, size_t i);
const gk_sd_node *const *gk_sd_view_nodes(const gk_sd_view *v, size_t *n);
/* Moves on every change of what a policy's node summary is computed from: a
 * snapshot, a policy put or deleted, a node whose digest changed or that went.
 * Equal numbers: the same policies and nodes (a summary may be reused). */
uint64_t gk_sd_view_gen(const gk_sd_view *v);
bool gk_sd_view_synced(const gk_sd_view *v);
bool gk_sd_view_leader(const gk_sd_view *v);
/* The leadership term (Leadership.term; 0 without an election): the term the
 * components' reports must carry to be used. */
uint64_t gk_sd_view_term(const gk_sd_view *v);
void gk_sd_view_stats_get(const gk_sd_view *v, gk_sd_view_stats *out);

#endif
