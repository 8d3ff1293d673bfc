/* gpukmm-statusd controller mode: the watcher view (see view.h). */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/log.h"
#include "gpukmm/wsub.h"
#include "view.h"

struct gk_sd_view {
	gk_sd_dirty_fn dirty;
	void *user;
	Gpukmm__ClusterPolicy *pol[GK_SD_VIEW_MAX_POLICIES];
	size_t n_pol;
	gk_sd_node **node; /* sorted by name */
	size_t n_node;
	bool synced, leader, kmm;
	uint64_t term;  /* Leadership.term: reports of another term are not used */
	uint64_t node_changes, node_dropped;
	uint64_t gen;   /* gk_sd_view_gen */
};

static const char *pname(const Gpukmm__ClusterPolicy *p)
{
	return p && p->metadata && p->metadata->name ? p->metadata->name : NULL;
}

static const char *nname(const Gpukmm__Node *n)
{
	return n && n->metadata && n->metadata->name && *n->metadata->name ? n->metadata->name : NULL;
}

/* index of the first node whose name is >= name */
static size_t lower(const gk_sd_view *v, const char *name)
{
	size_t lo = 0, hi = v->n_node;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(v->node[mid]->name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void clear(gk_sd_view *v)
{
	v->gen++;
	for (size_t i = 0; i < v->n_pol; i++)
		gpukmm__cluster_policy__free_unpacked(v->pol[i], NULL);
	v->n_pol = 0;
	for (size_t i = 0; i < v->n_node; i++) {
		gk_sd_node_clear(v->node[i]);
		free(v->node[i]);
	}
	v->n_node = 0;
}

int gk_sd_view_new(gk_sd_view **out, gk_sd_dirty_fn dirty, void *user, gk_err *err)
{
	gk_sd_view *v = calloc(1, sizeof(*v));
	if (v)
		v->node = calloc(GK_SD_VIEW_MAX_NODES, sizeof(*v->node));
	if (!v || !v->node) {
		free(v);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	v->dirty = dirty;
	v->user = user;
	v->leader = true;
	*out = v;
	return GK_OK;
}

void gk_sd_view_free(gk_sd_view *v)
{
	if (!v)
		return;
	clear(v);
	free(v->node);
	free(v);
}

static int put_policy(gk_sd_view *v, const Gpukmm__ClusterPolicy *p, bool del, gk_err *err)
{
	const char *name = pname(p);
	if (!name)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ClusterPolicy without a name");
	size_t i;
	for (i = 0; i < v->n_pol; i++)
		if (strcmp(pname(v->pol[i]), name) == 0)
			break;
	if (del) {
		if (i < v->n_pol) {
			gpukmm__cluster_policy__free_unpacked(v->pol[i], NULL);
			v->pol[i] = v->pol[--v->n_pol];
			v->gen++;
		}
		return GK_OK;
	}
	if (i == v->n_pol && v->n_pol >= GK_SD_VIEW_MAX_POLICIES)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "more than %d ClusterPolicies", GK_SD_VIEW_MAX_POLICIES);
	Gpukmm__ClusterPolicy *d = (Gpukmm__ClusterPolicy *)gk_wsub_clone(&p->base);
	if (!d)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	if (i < v->n_pol)
		gpukmm__cluster_policy__free_unpacked(v->pol[i], NULL);
	else
		v->n_pol++;
	v->pol[i] = d;
	v->gen++;
	return GK_OK;
}

/* 1 when the digest changed, 0 when not, < 0 on error */
static int put_node(gk_sd_view *v, const Gpukmm__Node *n, bool del, gk_err *err)
{
	const char *name = nname(n);
	if (!name || strlen(name) >= GK_SD_NODE_NAME_MAX)
		return -gk_err_set(err, GK_INVALID_ARGUMENT, "Node without a valid name");
	size_t i = lower(v, name);
	bool found = i < v->n_node && strcmp(v->node[i]->name, name) == 0;
	if (del) {
		if (!found)
			return 0;
		gk_sd_node_clear(v->node[i]);
		free(v->node[i]);
		memmove(&v->node[i], &v->node[i + 1], (v->n_node - i - 1) * sizeof(*v->node));
		v->n_node--;
		v->gen++;
		return 1;
	}
	gk_sd_node *d = malloc(sizeof(*d));
	if (!d)
		return -gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	int rc = gk_sd_node_digest(n, d, err);
	if (rc) {
		free(d);
		return -rc;
	}
	if (found) {
		bool same = gk_sd_node_equal(v->node[i], d);
		gk_sd_node_clear(v->node[i]);
		free(v->node[i]);
		v->node[i] = d;
		v->gen += !same;
		return same ? 0 : 1;
	}
	if (v->n_node >= GK_SD_VIEW_MAX_NODES) {
		gk_sd_node_clear(d);
		free(d);
		if (v->node_dropped++ == 0)
			GK_WARN("more than %d Nodes: the node summary leaves the rest out", GK_SD_VIEW_MAX_NODES);
		return 0;
	}
	memmove(&v->node[i + 1], &v->node[i], (v->n_node - i) * sizeof(*v->node));
	v->node[i] = d;
	v->n_node++;
	v->gen++;
	return 1;
}

int gk_sd_view_load_snapshot(gk_sd_view *v, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	clear(v);
	int rc = GK_OK;
	gk_err e;
	for (size_t i = 0; i < s->n_cluster_policies; i++)
		if (put_policy(v, s->cluster_policies[i], false, &e) && rc == GK_OK) {
			rc = e.code;
			*err = e;
		}
	for (size_t i = 0; i < s->n_nodes; i++)
		if (put_node(v, s->nodes[i], false, &e) < 0 && rc == GK_OK) {
			rc = e.code;
			*err = e;
		}
	v->kmm = s->discovery && s->discovery->has_kmm && s->discovery->kmm;
	gk_wsub_lead_update(&v->leader, &v->term, s->leadership);
	v->synced = s->has_synced && s->synced;
	if (v->dirty)
		v->dirty(v->user, NULL);
	return rc;
}

int gk_sd_view_apply(gk_sd_view *v, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	bool del = ev->has_type && ev->type == GPUKMM__EVENT_TYPE__DELETED;
	if (strcmp(topic, "clusterpolicy") == 0 && ev->cluster_policy) {
		int rc = put_policy(v, ev->cluster_policy, del, err);
		if (rc == GK_OK && v->dirty)
			v->dirty(v->user, pname(ev->cluster_policy));
		return rc;
	}
	if (strcmp(topic, "node") == 0 && ev->node) {
		int rc = put_node(v, ev->node, del, err);
		if (rc < 0)
			return -rc;
		if (rc > 0) {
			v->node_changes++;
			if (v->dirty)
				v->dirty(v->user, NULL);
		}
		return GK_OK;
	}
	if (strcmp(topic, "discovery") == 0 && ev->discovery) {
		v->kmm = ev->discovery->has_kmm && ev->discovery->kmm;
		return GK_OK;
	}
	if (strcmp(topic, "leadership") == 0 && ev->leadership) {
		bool was = v->leader;
		if (gk_wsub_lead_update(&v->leader, &v->term, ev->leadership)) {
			if (was != v->leader)
				GK_INFO("%s", v->leader ? "leader now: status writes resume once the components report"
							: "not the leader: no status writes");
			/* gaining (or a new term): write everything once the components
			 * reported in it; losing: drop the policy metrics */
			if (v->dirty)
				v->dirty(v->user, NULL);
		}
		return GK_OK;
	}
	return GK_OK; /* another topic or an empty event: nothing of ours */
}

const Gpukmm__ClusterPolicy *gk_sd_view_policy(const gk_sd_view *v, const char *name)
{
	for (size_t i = 0; i < v->n_pol; i++)
		if (strcmp(pname(v->pol[i]), name) == 0)
			return v->pol[i];
	return NULL;
}

size_t gk_sd_view_n_policies(const gk_sd_view *v)
{
	return v->n_pol;
}

const Gpukmm__ClusterPolicy *gk_sd_view_policy_at(const gk_sd_view *v, size_t i)
{
	return i < v->n_pol ? v->pol[i] : NULL;
}

uint64_t gk_sd_view_gen(const gk_sd_view *v)
{
	return v->gen;
}

const gk_sd_node *const *gk_sd_view_nodes(const gk_sd_view *v, size_t *n)
{
	*n = v->n_node;
	return (const gk_sd_node *const *)v->node;
}

bool gk_sd_view_synced(const gk_sd_view *v)
{
	return v->synced;
}

bool gk_sd_view_leader(const gk_sd_view *v)
{
	return v->leader;
}

uint64_t gk_sd_view_term(const gk_sd_view *v)
{
	return v->term;
}

void gk_sd_view_stats_get(const gk_sd_view *v, gk_sd_view_stats *out)
{
	*out = (gk_sd_view_stats){ .policies = v->n_pol, .nodes = v->n_node, .node_changes = v->node_changes,
				   .node_dropped = v->node_dropped, .synced = v->synced, .leader = v->leader,
				   .kmm = v->kmm };
}
