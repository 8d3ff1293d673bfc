/* gpukmm-upgrader — the view (see view.h). */
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/ipc.h"
#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "gpukmm/probe.h"
#include "gpukmm/wsub.h"
#include "status.pb-c.h"

#define REPORT_ANN "gpukmm.io/node-report"
#define REPORT_MAX (256 * 1024) /* larger annotations are not parsed */
#define GPU_DRIVER "gpu.intel.com"

/* a node's report digest, kept while the annotation is unchanged */
typedef struct digest {
	char *node;
	uint64_t hash;            /* FNV-1a of the annotation, 0 = none */
	gk_upg_report r;
} digest;

struct gk_upv {
	char *ns;
	gk_upv_dirty_fn dirty;
	void *user;
	size_t max;
	gk_wsub_tab policies, modules, nodes, claims;
	digest *dg;               /* one per node of the nodes table (by name) */
	size_t n_dg, cap_dg;
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
	gk_wsub_tab_init(&v->nodes, max);
	gk_wsub_tab_init(&v->claims, max);
	v->dirty = fn;
	v->user = user;
	v->leader = true;
	*out = v;
	return GK_OK;
}

static void dg_clear(gk_upv *v)
{
	for (size_t i = 0; i < v->n_dg; i++)
		free(v->dg[i].node);
	v->n_dg = 0;
}

void gk_upv_free(gk_upv *v)
{
	if (!v)
		return;
	gk_wsub_tab_clear(&v->policies);
	gk_wsub_tab_clear(&v->modules);
	gk_wsub_tab_clear(&v->nodes);
	gk_wsub_tab_clear(&v->claims);
	dg_clear(v);
	free(v->dg);
	free(v->ns);
	free(v);
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

/* ---- node report digests ------------------------------------------------------------ */

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

static digest *dg_find(gk_upv *v, const char *node)
{
	for (size_t i = 0; i < v->n_dg; i++)
		if (!strcmp(v->dg[i].node, node))
			return &v->dg[i];
	return NULL;
}

static void dg_del(gk_upv *v, const char *node)
{
	digest *d = dg_find(v, node);
	if (!d)
		return;
	free(d->node);
	*d = v->dg[--v->n_dg];
}

/* (re)digest the node's report when its annotation changed */
static int dg_update(gk_upv *v, const Gpukmm__Node *n, gk_err *err)
{
	const char *name = n->metadata->name;
	const char *json = gk_kv_get(n->metadata->annotations, n->metadata->n_annotations, REPORT_ANN);
	uint64_t h = json ? fnv(json) : 0;
	digest *d = dg_find(v, name);
	if (!d) {
		if (v->n_dg == v->cap_dg) {
			size_t nc = v->cap_dg ? v->cap_dg * 2 : 64;
			digest *nd = realloc(v->dg, nc * sizeof(*nd));
			if (!nd)
				return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
			v->dg = nd;
			v->cap_dg = nc;
		}
		d = &v->dg[v->n_dg];
		memset(d, 0, sizeof(*d));
		if (!(d->node = strdup(name)))
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
		v->n_dg++;
		d->hash = ~h; /* force */
	}
	if (d->hash == h)
		return GK_OK;
	d->hash = h;
	gk_upv_report_digest(json, &d->r);
	return GK_OK;
}

/* ---- nodes ----------------------------------------------------------------------------- */

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
	const Gpukmm__Node *old = (const Gpukmm__Node *)gk_wsub_tab_get(&v->nodes, n->metadata->name);
	if (old && old->metadata && older(n->metadata->resource_version, old->metadata->resource_version)) {
		v->stale++;
		return GK_OK;
	}
	int rc = gk_wsub_tab_put(&v->nodes, n->metadata->name, &n->base, err);
	if (rc == GK_OK)
		rc = dg_update(v, n, err);
	gk_upv_touch_all(v);
	return rc;
}

int gk_upv_put_node(gk_upv *v, const Gpukmm__Node *n, gk_err *err)
{
	return put_node(v, n, err);
}

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
		if ((r = gk_wsub_tab_put(&v->claims, key, &c->base, err)))
			rc = r;
	}
	/* nodes: keep what we hold when it is newer than the snapshot (our own
	 * write the watcher has not seen yet); drop nodes the snapshot lacks */
	gk_wsub_tab keep;
	gk_wsub_tab_init(&keep, v->max);
	for (size_t i = 0; i < s->n_nodes; i++) {
		const Gpukmm__Node *n = s->nodes[i];
		if (!n->metadata || !n->metadata->name) {
			v->ignored++;
			continue;
		}
		const Gpukmm__Node *old = (const Gpukmm__Node *)gk_wsub_tab_get(&v->nodes, n->metadata->name);
		if (old && old->metadata && older(n->metadata->resource_version, old->metadata->resource_version)) {
			v->stale++;
			n = old;
		}
		if ((r = gk_wsub_tab_put(&keep, n->metadata->name, &n->base, err)))
			rc = r;
	}
	gk_wsub_tab_clear(&v->nodes);
	v->nodes = keep;
	dg_clear(v);
	for (size_t i = 0; i < v->nodes.n; i++)
		if ((r = dg_update(v, (const Gpukmm__Node *)v->nodes.v[i].msg, err)))
			rc = r;
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
			gk_wsub_tab_del(&v->nodes, n->metadata->name);
			dg_del(v, n->metadata->name);
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
		return gk_wsub_tab_put(&v->claims, key, &c->base, err);
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

const Gpukmm__Node *gk_upv_node_at(const gk_upv *v, size_t i, const gk_upg_report **report)
{
	if (i >= v->nodes.n)
		return NULL;
	const Gpukmm__Node *n = (const Gpukmm__Node *)v->nodes.v[i].msg;
	if (report) {
		digest *d = dg_find((gk_upv *)v, v->nodes.v[i].key);
		*report = d ? &d->r : NULL;
	}
	return n;
}

const Gpukmm__Node *gk_upv_node(const gk_upv *v, const char *name)
{
	return (const Gpukmm__Node *)gk_wsub_tab_get(&v->nodes, name);
}

bool gk_upv_gpu_claim(const gk_upv *v, const char *ns, const char *name)
{
	char key[600];
	if (snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name ? name : "") >= (int)sizeof(key))
		return false;
	return gk_wsub_tab_get(&v->claims, key) != NULL;
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
