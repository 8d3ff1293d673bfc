/* gpukmm-upgrader — the view (see view.h). */
#include "view.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/ipc.h"
#include "gpukmm/kmap.h"
#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "gpukmm/probe.h"
#include "gpukmm/strpool.h"
#include "gpukmm/wsub.h"
#include "status.pb-c.h"

#define REPORT_ANN "gpukmm.io/node-report"
#define REPORT_MAX (256 * 1024) /* larger annotations are not parsed */
#define GPU_DRIVER "gpu.intel.com"

/* A node as the upgrader needs it (see view.h): the strings of its labels and
 * gpukmm.io annotations (the report's excepted) interned in the view's pool, the
 * report's digest kept only while it has one. */
struct gk_upv_node {
	const char *name;        /* the by-name map entry's key */
	char *rv, *uid;
	bool ready, unschedulable;
	uint32_t n_labels, n_ann;
	const char **kv;         /* key, value pairs: labels, then annotations; pooled */
	uint64_t hash;           /* FNV-1a of the report annotation, 0 = none */
	gk_upg_report *report;   /* NULL: no readable report */
	size_t idx;              /* in nodeset.v */
};

/* the nodes: by name, and in an array for the passes (swap-removed) */
typedef struct nodeset {
	gk_kmap by_name;         /* name → gk_upv_node */
	gk_upv_node **v;
	size_t n, cap;
	bool overflow;           /* a node was refused since the last snapshot */
} nodeset;

struct gk_upv {
	char *ns;
	gk_upv_dirty_fn dirty;
	void *user;
	size_t max;
	gk_wsub_tab policies, modules;
	nodeset nodes;
	gk_wsub_tab claims;       /* the allocated GPU claims: a set of ns/name */
	gk_strpool pool;          /* the nodes' label and annotation strings */
	bool leader, kmm;
	uint64_t term; /* Leadership.term, stamped on status reports */
	uint64_t ignored, stale;
};

int gk_upv_new(gk_upv **out, const char *ns, size_t max, gk_upv_dirty_fn fn, void *user, gk_err *err)
{
	*out = NULL;
	gk_upv *v = calloc(1, sizeof(*v));
	if (!v || !(v->ns = strdup(ns && *ns ? ns : GK_POLICY_DEFAULT_NAMESPACE))) {
		free(v);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	}
	v->max = max ? max : GK_WSUB_TAB_MAX;
	gk_wsub_tab_init(&v->policies, max);
	gk_wsub_tab_init(&v->modules, max);
	gk_kmap_init(&v->nodes.by_name);
	gk_wsub_tab_init(&v->claims, max);
	gk_wsub_tab_kind(&v->claims, "ResourceClaim");
	v->dirty = fn;
	v->user = user;
	v->leader = true;
	*out = v;
	return GK_OK;
}

static void mark(gk_upv *v, const char *p)
{
	if (v->dirty && p && *p)
		v->dirty(v->user, p);
}

void gk_upv_touch_all(gk_upv *v)
{
	for (size_t i = 0; i < v->policies.n; i++)
		mark(v, v->policies.v[i].key);
}

/* ---- nodes ----------------------------------------------------------------------------- */

static void nodes_clear(gk_upv *v, nodeset *ns);

void gk_upv_free(gk_upv *v)
{
	if (!v)
		return;
	gk_wsub_tab_clear(&v->policies);
	gk_wsub_tab_clear(&v->modules);
	nodes_clear(v, &v->nodes);
	gk_wsub_tab_clear(&v->claims);
	gk_kmap_clear(&v->pool.m);
	free(v->ns);
	free(v);
}

static void node_free(gk_upv *v, gk_upv_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; n->kv && i < 2 * ((size_t)n->n_labels + n->n_ann); i++)
		gk_strpool_put(&v->pool, n->kv[i]);
	free(n->kv);
	free(n->rv);
	free(n->uid);
	free(n->report);
	free(n);
}

static void nodes_clear(gk_upv *v, nodeset *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		node_free(v, ns->v[i]);
	free(ns->v);
	gk_kmap_clear(&ns->by_name);
	memset(ns, 0, sizeof(*ns));
}

static gk_upv_node *node_get(const nodeset *ns, const char *name)
{
	gk_kmap_ent *e = name ? gk_kmap_get(&ns->by_name, name) : NULL;
	return e ? e->ptr : NULL;
}

static void node_del(gk_upv *v, const char *name)
{
	gk_kmap_ent *e = gk_kmap_get(&v->nodes.by_name, name);
	gk_upv_node *n = e ? e->ptr : NULL;
	if (!n)
		return;
	nodeset *ns = &v->nodes;
	ns->v[n->idx] = ns->v[--ns->n];
	ns->v[n->idx]->idx = n->idx;
	node_free(v, n);
	gk_kmap_del(&ns->by_name, name);
}

/* Stores n under its name in ns (replacing and freeing what was there); n->name
 * then points at the map's copy. On a refusal n is freed and the set overflows. */
static int node_set(gk_upv *v, nodeset *ns, gk_upv_node *n, const char *name, gk_err *err)
{
	gk_kmap_ent *e = gk_kmap_get(&ns->by_name, name);
	if (e && e->ptr) {
		gk_upv_node *old = e->ptr;
		n->idx = old->idx;
		ns->v[n->idx] = n;
		n->name = e->key;
		e->ptr = n;
		node_free(v, old);
		return GK_OK;
	}
	if (ns->n >= v->max || (ns->n == ns->cap && ns->cap >= SIZE_MAX / 2 / sizeof(*ns->v))) {
		ns->overflow = true;
		node_free(v, n);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: more than %zu nodes, dropping %s", v->max, name);
	}
	if (ns->n == ns->cap) {
		size_t nc = ns->cap ? ns->cap * 2 : 64;
		gk_upv_node **nv = realloc(ns->v, nc * sizeof(*nv));
		if (!nv)
			goto oom;
		ns->v = nv;
		ns->cap = nc;
	}
	if (!(e = gk_kmap_put(&ns->by_name, name, NULL, NULL)))
		goto oom;
	e->ptr = n;
	n->name = e->key;
	n->idx = ns->n;
	ns->v[ns->n++] = n;
	return GK_OK;
oom:
	ns->overflow = true;
	node_free(v, n);
	return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory, dropping %s", name);
}

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h ? h : 1;
}

void gk_upv_report_digest(const char *json, gk_upg_report *out)
{
	memset(out, 0, sizeof(*out));
	if (!json || strlen(json) > REPORT_MAX)
		return;
	Gpukmm__NodeReport *r = NULL;
	gk_probe_json_info info;
	gk_err e;
	/* the node's own report, strictly parsed: anything else is no report */
	if (gk_probe_report_parse(json, strlen(json), &r, &info, &e) != GK_OK || !r)
		return;
	const Gpukmm__KernelModuleInfo *m = r->module;
	const char *name = m && m->name ? m->name : r->module_name;
	if (m && name && *name) {
		out->present = true;
		snprintf(out->module, sizeof(out->module), "%s", name);
		out->loaded = m->has_loaded && m->loaded;
		out->oot = m->has_source && m->source == GPUKMM__MODULE_SOURCE__SOURCE_OOT;
		snprintf(out->version, sizeof(out->version), "%s", m->version ? m->version : "");
		snprintf(out->srcversion, sizeof(out->srcversion), "%s", m->srcversion ? m->srcversion : "");
		out->can_unload = r->has_can_unload ? (int)r->can_unload : GPUKMM__TRI_STATE__TRI_UNKNOWN;
		snprintf(out->blocker, sizeof(out->blocker), "%s", r->unload_blocker ? r->unload_blocker : "");
		uint32_t pfs = 0, vfs = 0;
		gk_probe_counts(r, &pfs, &vfs);
		out->vfs = vfs > info.vfs ? vfs : info.vfs; /* a summarized report keeps only the counts */
	}
	gk_probe_report_free(r);
}

/* The upgrader's copy of a Node; the report is digested again only when its
 * annotation differs from prev's (whose digest is then taken over). */
static int node_build(gk_upv *v, const Gpukmm__Node *src, gk_upv_node *prev, gk_upv_node **out, gk_err *err)
{
	*out = NULL;
	const Gpukmm__ObjectMeta *md = src->metadata;
	const char *json = gk_kv_get(md->annotations, md->n_annotations, REPORT_ANN);
	size_t nl = md->n_labels, na = 0;
	for (size_t i = 0; i < md->n_annotations; i++)
		if (md->annotations[i]->key && strcmp(md->annotations[i]->key, REPORT_ANN))
			na++;
	gk_upv_node *n = calloc(1, sizeof(*n));
	if (!n)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	n->ready = !src->has_ready || src->ready;
	n->unschedulable = src->has_unschedulable && src->unschedulable;
	bool oom = (md->resource_version && !(n->rv = strdup(md->resource_version))) ||
		   (md->uid && !(n->uid = strdup(md->uid))) || ((nl || na) && !(n->kv = calloc(2 * (nl + na), sizeof(*n->kv))));
	size_t k = 0;
	for (size_t i = 0; !oom && i < md->n_labels; i++, n->n_labels++) {
		const Gpukmm__KeyValue *kv = md->labels[i];
		oom = !(n->kv[k++] = gk_strpool_get(&v->pool, kv->key, SIZE_MAX)) ||
		      !(n->kv[k++] = gk_strpool_get(&v->pool, kv->value, SIZE_MAX));
	}
	for (size_t i = 0; !oom && i < md->n_annotations; i++) {
		const Gpukmm__KeyValue *kv = md->annotations[i];
		if (!kv->key || !strcmp(kv->key, REPORT_ANN))
			continue;
		n->n_ann++;
		oom = !(n->kv[k++] = gk_strpool_get(&v->pool, kv->key, SIZE_MAX)) ||
		      !(n->kv[k++] = gk_strpool_get(&v->pool, kv->value, SIZE_MAX));
	}
	if (!oom) {
		n->hash = json ? fnv(json) : 0;
		if (prev && prev->hash == n->hash) {
			n->report = prev->report;
			prev->report = NULL;
		} else if (json) {
			gk_upg_report r;
			gk_upv_report_digest(json, &r);
			if (r.present && !(n->report = malloc(sizeof(r))))
				oom = true;
			else if (r.present)
				*n->report = r;
		}
	}
	if (oom) {
		node_free(v, n);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	}
	*out = n;
	return GK_OK;
}

/* resourceVersions are opaque, but the API server's are increasing integers */
static bool older(const char *a, const char *b)
{
	if (!a || !b)
		return false;
	char *ea, *eb;
	unsigned long long x = strtoull(a, &ea, 10), y = strtoull(b, &eb, 10);
	return !*ea && !*eb && x < y;
}

static int put_node(gk_upv *v, const Gpukmm__Node *n, gk_err *err)
{
	if (!n->metadata || !n->metadata->name) {
		v->ignored++;
		return GK_OK;
	}
	gk_upv_node *old = node_get(&v->nodes, n->metadata->name), *nn;
	if (old && older(n->metadata->resource_version, old->rv)) {
		v->stale++;
		return GK_OK;
	}
	int rc = node_build(v, n, old, &nn, err);
	if (rc == GK_OK)
		rc = node_set(v, &v->nodes, nn, n->metadata->name, err);
	else
		v->nodes.overflow = true; /* this node's state is not held: the fleet is not confirmed */
	gk_upv_touch_all(v);
	return rc;
}

int gk_upv_put_node(gk_upv *v, const Gpukmm__Node *n, gk_err *err)
{
	return put_node(v, n, err);
}

/* ---- claims ---------------------------------------------------------------------------- */

static bool claim_gpu(const Gpukmm__ResourceClaim *c)
{
	if (!c || !c->has_allocated || !c->allocated)
		return false;
	for (size_t i = 0; i < c->n_allocated_drivers; i++)
		if (c->allocated_drivers[i] && !strcmp(c->allocated_drivers[i], GPU_DRIVER))
			return true;
	return false;
}

static int claim_key(char *buf, size_t cap, const Gpukmm__ObjectMeta *m)
{
	if (!m || !m->name)
		return -1;
	int n = snprintf(buf, cap, "%s/%s", m->namespace_ ? m->namespace_ : "", m->name);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* the policy a Module belongs to: <cp>-gpu in the operator namespace */
static void mark_module(gk_upv *v, const Gpukmm__Module *m)
{
	if (!m || !m->metadata || !m->metadata->name)
		return;
	const char *name = m->metadata->name;
	size_t n = strlen(name), s = strlen(GK_POLICY_MODULE_SUFFIX);
	if (n <= s || strcmp(name + n - s, GK_POLICY_MODULE_SUFFIX))
		return;
	char cp[GK_POLICY_KEY_MAX];
	snprintf(cp, sizeof(cp), "%.*s", (int)(n - s), name);
	mark(v, cp);
}

static bool in_ns(const gk_upv *v, const Gpukmm__ObjectMeta *m)
{
	return m && m->namespace_ && !strcmp(m->namespace_, v->ns);
}

int gk_upv_load_snapshot(gk_upv *v, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	gk_upv_touch_all(v);
	gk_wsub_tab_clear(&v->policies);
	gk_wsub_tab_clear(&v->modules);
	gk_wsub_tab_clear(&v->claims);
	int rc = GK_OK, r;
	char key[600];
	for (size_t i = 0; i < s->n_cluster_policies; i++) {
		const Gpukmm__ClusterPolicy *cp = s->cluster_policies[i];
		if (!cp->metadata || !cp->metadata->name) {
			v->ignored++;
			continue;
		}
		if ((r = gk_wsub_tab_put(&v->policies, cp->metadata->name, &cp->base, err)))
			rc = r;
	}
	for (size_t i = 0; i < s->n_modules; i++) {
		const Gpukmm__Module *m = s->modules[i];
		if (!m->metadata || !m->metadata->name || !in_ns(v, m->metadata)) {
			v->ignored++;
			continue;
		}
		if ((r = gk_wsub_tab_put(&v->modules, m->metadata->name, &m->base, err)))
			rc = r;
	}
	for (size_t i = 0; i < s->n_resource_claims; i++) {
		const Gpukmm__ResourceClaim *c = s->resource_claims[i];
		if (!claim_gpu(c) || claim_key(key, sizeof(key), c->metadata))
			continue;
		if ((r = gk_wsub_tab_add(&v->claims, key, err)))
			rc = r;
	}
	/* nodes: keep what we hold when it is newer than the snapshot (our own
	 * write the watcher has not seen yet); drop nodes the snapshot lacks */
	nodeset keep = { 0 };
	gk_kmap_init(&keep.by_name);
	for (size_t i = 0; i < s->n_nodes; i++) {
		const Gpukmm__Node *n = s->nodes[i];
		if (!n->metadata || !n->metadata->name) {
			v->ignored++;
			continue;
		}
		const char *name = n->metadata->name;
		if (node_get(&keep, name))
			continue; /* listed twice: the first one stands */
		gk_kmap_ent *oe = gk_kmap_get(&v->nodes.by_name, name);
		gk_upv_node *old = oe ? oe->ptr : NULL, *nn = NULL;
		if (old && older(n->metadata->resource_version, old->rv)) {
			v->stale++;
			/* moved over as it is: the old set no longer owns it */
			oe->ptr = NULL;
			v->nodes.v[old->idx] = NULL;
			r = node_set(v, &keep, old, name, err);
		} else if ((r = node_build(v, n, old, &nn, err)) == GK_OK) {
			r = node_set(v, &keep, nn, name, err);
		} else {
			keep.overflow = true;
		}
		if (r)
			rc = r;
	}
	for (size_t i = 0; i < v->nodes.n; i++)
		node_free(v, v->nodes.v[i]); /* NULL for those moved over */
	v->nodes.n = 0;
	nodes_clear(v, &v->nodes);
	v->nodes = keep;
	v->kmm = s->discovery && s->discovery->has_kmm && s->discovery->kmm;
	gk_wsub_lead_update(&v->leader, &v->term, s->leadership);
	gk_upv_touch_all(v);
	return rc;
}

int gk_upv_apply(gk_upv *v, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	if (!ev) {
		v->ignored++;
		return GK_OK;
	}
	bool del = ev->has_type && ev->type == GPUKMM__EVENT_TYPE__DELETED;
	char key[600];
	switch (ev->object_case) {
	case GPUKMM__EVENT__OBJECT_CLUSTER_POLICY: {
		const Gpukmm__ObjectMeta *md = ev->cluster_policy->metadata;
		if (!md || !md->name)
			break;
		int rc = GK_OK;
		if (del)
			gk_wsub_tab_del(&v->policies, md->name);
		else
			rc = gk_wsub_tab_put(&v->policies, md->name, &ev->cluster_policy->base, err);
		mark(v, md->name);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_MODULE: {
		const Gpukmm__Module *m = ev->module;
		if (!m->metadata || !m->metadata->name || !in_ns(v, m->metadata))
			break;
		int rc = GK_OK;
		if (del)
			gk_wsub_tab_del(&v->modules, m->metadata->name);
		else
			rc = gk_wsub_tab_put(&v->modules, m->metadata->name, &m->base, err);
		mark_module(v, m);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_NODE: {
		const Gpukmm__Node *n = ev->node;
		if (!n->metadata || !n->metadata->name)
			break;
		if (del) {
			node_del(v, n->metadata->name);
			gk_upv_touch_all(v);
			return GK_OK;
		}
		return put_node(v, n, err);
	}
	case GPUKMM__EVENT__OBJECT_RESOURCE_CLAIM: {
		const Gpukmm__ResourceClaim *c = ev->resource_claim;
		if (claim_key(key, sizeof(key), c->metadata))
			break;
		if (del || !claim_gpu(c)) {
			gk_wsub_tab_del(&v->claims, key);
			return GK_OK;
		}
		return gk_wsub_tab_add(&v->claims, key, err);
	}
	case GPUKMM__EVENT__OBJECT_DISCOVERY: {
		bool k = ev->discovery->has_kmm && ev->discovery->kmm;
		if (k != v->kmm) {
			v->kmm = k;
			gk_upv_touch_all(v);
		}
		return GK_OK;
	}
	case GPUKMM__EVENT__OBJECT_LEADERSHIP: {
		if (gk_wsub_lead_update(&v->leader, &v->term, ev->leadership))
			gk_upv_touch_all(v);
		return GK_OK;
	}
	default:
		break;
	}
	v->ignored++;
	return GK_OK;
}

const char *gk_upv_ns(const gk_upv *v)
{
	return v->ns;
}

bool gk_upv_leader(const gk_upv *v)
{
	return v->leader;
}

uint64_t gk_upv_term(const gk_upv *v)
{
	return v->term;
}

bool gk_upv_kmm(const gk_upv *v)
{
	return v->kmm;
}

const Gpukmm__ClusterPolicy *gk_upv_policy(const gk_upv *v, const char *name)
{
	return (const Gpukmm__ClusterPolicy *)gk_wsub_tab_get(&v->policies, name);
}

const Gpukmm__Module *gk_upv_module(const gk_upv *v, const char *name)
{
	return (const Gpukmm__Module *)gk_wsub_tab_get(&v->modules, name);
}

size_t gk_upv_n_nodes(const gk_upv *v)
{
	return v->nodes.n;
}

const gk_upv_node *gk_upv_node_at(const gk_upv *v, size_t i)
{
	return i < v->nodes.n ? v->nodes.v[i] : NULL;
}

const gk_upv_node *gk_upv_node_get(const gk_upv *v, const char *name)
{
	return node_get(&v->nodes, name);
}

static const char *kv_get(const char *const *kv, size_t n, const char *key)
{
	for (size_t i = 0; key && i < n; i++)
		if (!strcmp(kv[2 * i], key))
			return kv[2 * i + 1];
	return NULL;
}

const char *gk_upv_node_label(const gk_upv_node *n, const char *key)
{
	return n->kv ? kv_get(n->kv, n->n_labels, key) : NULL;
}

const char *gk_upv_node_annotation(const gk_upv_node *n, const char *key)
{
	return n->kv ? kv_get(n->kv + 2 * (size_t)n->n_labels, n->n_ann, key) : NULL;
}

const char *gk_upv_node_name(const gk_upv_node *n)
{
	return n->name;
}

const char *gk_upv_node_rv(const gk_upv_node *n)
{
	return n->rv;
}

const char *gk_upv_node_uid(const gk_upv_node *n)
{
	return n->uid;
}

bool gk_upv_node_ready(const gk_upv_node *n)
{
	return n->ready;
}

bool gk_upv_node_unschedulable(const gk_upv_node *n)
{
	return n->unschedulable;
}

const gk_upg_report *gk_upv_node_report(const gk_upv_node *n)
{
	return n->report;
}

bool gk_upv_gpu_claim(const gk_upv *v, const char *ns, const char *name)
{
	char key[600];
	if (snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name ? name : "") >= (int)sizeof(key))
		return false;
	return gk_wsub_tab_has(&v->claims, key);
}

void gk_upv_each_policy(const gk_upv *v, gk_upv_dirty_fn fn, void *user)
{
	for (size_t i = 0; i < v->policies.n; i++)
		fn(user, v->policies.v[i].key);
}

void gk_upv_state_get(const gk_upv *v, gk_upv_state *out)
{
	*out = (gk_upv_state){ .policies = v->policies.n, .modules = v->modules.n, .nodes = v->nodes.n,
			       .claims = v->claims.n, .ignored = v->ignored, .stale = v->stale };
}

bool gk_upv_complete(const gk_upv *v)
{
	return !v->nodes.overflow && !v->claims.overflow && !v->modules.overflow && !v->policies.overflow;
}
