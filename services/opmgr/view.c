/* gpukmm-opmgr — the view (see view.h). */
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kmap.h"
#include "gpukmm/kobj.h"
#include "gpukmm/operands.h"
#include "gpukmm/wsub.h"

struct gk_opv {
	char *ns;
	gk_opv_dirty_fn dirty, later;
	void *user;
	gk_wsub_tab policies, objects, daemonsets, claims;
	/* the Kueue inputs, encoded (enc_node, enc_slice): node name → allocatable,
	 * slice name → driver, node, pool, generation, devices */
	gk_kmap nodes, slices;
	gk_opv_disc disc;
	gk_wsub_unconf uc;       /* what the watcher cannot vouch for (ARCHITECTURE.md §4) */
	bool leader, synced;
	uint64_t term;  /* Leadership.term, stamped on status reports */
	uint64_t ignored;
};

/* the claims (the DRA guard: read as a set), the operands (an absence in the
 * teardown), the policies (a removal decided on a policy we cannot read) */
enum { UC_CLAIM, UC_OPERAND, UC_POLICY, UC_N };
static const char *const uc_topics[UC_N] = { "resourceclaim", "operand", "clusterpolicy" };
static const bool uc_whole[UC_N] = { true, false, false };

int gk_opv_new(gk_opv **out, const char *ns, size_t max, gk_opv_dirty_fn fn, void *user, gk_err *err)
{
	*out = NULL;
	gk_opv *v = calloc(1, sizeof(*v));
	if (!v || !(v->ns = strdup(ns && *ns ? ns : GK_POLICY_DEFAULT_NAMESPACE))) {
		free(v);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	}
	gk_wsub_tab_init(&v->policies, max);
	gk_wsub_tab_init(&v->objects, max);
	gk_wsub_tab_init(&v->daemonsets, max);
	gk_wsub_tab_init(&v->claims, max);
	gk_wsub_tab_kind(&v->objects, "operand object");
	gk_wsub_tab_kind(&v->daemonsets, "DaemonSet");
	gk_wsub_tab_kind(&v->claims, "ResourceClaim");
	gk_kmap_init(&v->nodes);
	gk_kmap_init(&v->slices);
	gk_wsub_unconf_init(&v->uc, uc_topics, uc_whole, UC_N);
	v->dirty = fn;
	v->user = user;
	v->leader = true;
	*out = v;
	return GK_OK;
}

void gk_opv_free(gk_opv *v)
{
	if (!v)
		return;
	gk_wsub_tab_clear(&v->policies);
	gk_wsub_tab_clear(&v->objects);
	gk_wsub_tab_clear(&v->daemonsets);
	gk_wsub_tab_clear(&v->claims);
	gk_kmap_clear(&v->nodes);
	gk_kmap_clear(&v->slices);
	gk_wsub_unconf_free(&v->uc);
	free(v->ns);
	free(v);
}

void gk_opv_set_later(gk_opv *v, gk_opv_dirty_fn later)
{
	v->later = later;
}

static void mark(gk_opv *v, const char *p)
{
	if (v->dirty && p && *p)
		v->dirty(v->user, p);
}

static void mark_all(gk_opv *v)
{
	for (size_t i = 0; i < v->policies.n; i++)
		mark(v, v->policies.v[i].key);
}

/* the Kueue inputs moved: the policies that count them, a little later */
static void mark_kueue(gk_opv *v)
{
	for (size_t i = 0; i < v->policies.n; i++) {
		const Gpukmm__ClusterPolicy *cp = (const Gpukmm__ClusterPolicy *)v->policies.v[i].msg;
		if (!cp->spec || !cp->spec->has_enable_kueue || !cp->spec->enable_kueue)
			continue;
		if (v->later)
			v->later(v->user, v->policies.v[i].key);
		else
			mark(v, v->policies.v[i].key);
	}
}

/* "<field>\n..." with "=value" for a present value, "" for an absent one */
static char *enc_node(const Gpukmm__Node *n)
{
	static const char *const keys[] = { "cpu", "memory", "gpu.intel.com/i915", "gpu.intel.com/xe" };
	const char *v[4];
	for (size_t i = 0; i < 4; i++)
		v[i] = gk_kv_get(n->allocatable, n->n_allocatable, keys[i]);
	char *s = NULL;
	if (asprintf(&s, "%s%s\n%s%s\n%s%s\n%s%s", v[0] ? "=" : "", v[0] ? v[0] : "", v[1] ? "=" : "",
		     v[1] ? v[1] : "", v[2] ? "=" : "", v[2] ? v[2] : "", v[3] ? "=" : "", v[3] ? v[3] : "") < 0)
		return NULL;
	return s;
}

static char *enc_slice(const Gpukmm__ResourceSlice *r)
{
	char *s = NULL;
	if (asprintf(&s, "%s\n%s\n%s\n%lld\n%d", r->driver ? r->driver : "", r->node_name ? r->node_name : "",
		     r->pool ? r->pool : "", (long long)r->generation, r->devices) < 0)
		return NULL;
	return s;
}

/* one node or slice into its map (del: gone); true when a Kueue input changed */
static int put_enc(gk_kmap *m, const char *key, char *enc, bool del, bool *changed, gk_err *err)
{
	gk_kmap_ent *e = gk_kmap_get(m, key);
	if (del) {
		*changed = e != NULL;
		gk_kmap_del(m, key);
		free(enc);
		return GK_OK;
	}
	if (!enc)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	*changed = !e || strcmp(e->val ? e->val : "", enc) != 0;
	if (*changed && !gk_kmap_put(m, key, enc, NULL)) {
		free(enc);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	}
	free(enc);
	return GK_OK;
}

/* the policy an object belongs to: its controller ClusterPolicy reference, or its owner label */
static void mark_meta(gk_opv *v, const Gpukmm__ObjectMeta *md)
{
	if (!md)
		return;
	for (size_t i = 0; i < md->n_owner_references; i++) {
		const Gpukmm__OwnerReference *r = md->owner_references[i];
		if (r->kind && strcmp(r->kind, GK_POLICY_KIND) == 0 && r->name) {
			mark(v, r->name);
			return;
		}
	}
	for (size_t i = 0; i < md->n_labels; i++)
		if (md->labels[i]->key && strcmp(md->labels[i]->key, "owner") == 0) {
			mark(v, md->labels[i]->value);
			return;
		}
	mark_all(v);
}

static int obj_key(char *buf, size_t cap, const char *kind, const char *ns, const char *name)
{
	int n = snprintf(buf, cap, "%s/%s/%s", kind ? kind : "", ns ? ns : "", name ? name : "");
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static bool claim_blocks(const Gpukmm__ResourceClaim *c)
{
	if (!c || !c->has_allocated || !c->allocated)
		return false;
	for (size_t i = 0; i < c->n_allocated_drivers; i++)
		if (c->allocated_drivers[i] && strcmp(c->allocated_drivers[i], GK_OP_GPU_DRIVER) == 0)
			return true;
	return false;
}

static void set_disc(gk_opv *v, const Gpukmm__Discovery *d)
{
	gk_opv_disc n = { .known = true };
	if (d) {
		n.kmm = d->has_kmm && d->kmm;
		n.dra = d->has_dra && d->dra;
		n.openshift = d->has_openshift && d->openshift;
		n.nfd = d->has_nfd && d->nfd;
		n.prometheus = d->has_prometheus && d->prometheus;
		n.nfd_namespaced = d->has_nfd_namespaced && d->nfd_namespaced;
		n.kueue = d->has_kueue && d->kueue;
		n.kueue_listed = n.kueue && d->has_kueue_listed && d->kueue_listed;
		n.resource_slices = d->has_resource_slices && d->resource_slices;
		snprintf(n.dra_version, sizeof(n.dra_version), "%s", d->dra_version ? d->dra_version : "");
	}
	bool uc = gk_wsub_unconf_load(&v->uc, d);
	if (memcmp(&n, &v->disc, sizeof(n)) != 0 || uc) {
		v->disc = n;
		mark_all(v);
	}
}

static int put_typed(gk_wsub_tab *t, const char *key, const ProtobufCMessage *m, bool del, gk_err *err)
{
	if (del) {
		gk_wsub_tab_del(t, key);
		return GK_OK;
	}
	return gk_wsub_tab_put(t, key, m, err);
}

int gk_opv_load_snapshot(gk_opv *v, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	mark_all(v);
	gk_wsub_tab_clear(&v->policies);
	gk_wsub_tab_clear(&v->objects);
	gk_wsub_tab_clear(&v->daemonsets);
	gk_wsub_tab_clear(&v->claims);
	gk_kmap_clear(&v->nodes);
	gk_kmap_clear(&v->slices);
	int rc = GK_OK, r;
	bool changed;
	char key[800];
	for (size_t i = 0; i < s->n_cluster_policies; i++) {
		const Gpukmm__ClusterPolicy *cp = s->cluster_policies[i];
		if (!cp->metadata || !cp->metadata->name) {
			v->ignored++;
			continue;
		}
		if ((r = gk_wsub_tab_put(&v->policies, cp->metadata->name, &cp->base, err)))
			rc = r;
	}
	for (size_t i = 0; i < s->n_operands; i++) {
		const Gpukmm__Object *o = s->operands[i];
		if (!o->metadata || obj_key(key, sizeof(key), o->kind, o->metadata->namespace_, o->metadata->name)) {
			v->ignored++;
			continue;
		}
		if ((r = gk_wsub_tab_put(&v->objects, key, &o->base, err)))
			rc = r;
	}
	for (size_t i = 0; i < s->n_daemon_sets; i++) {
		const Gpukmm__DaemonSet *d = s->daemon_sets[i];
		if (!d->metadata || obj_key(key, sizeof(key), "", d->metadata->namespace_, d->metadata->name))
			continue;
		if ((r = gk_wsub_tab_put(&v->daemonsets, key, &d->base, err)))
			rc = r;
	}
	for (size_t i = 0; i < s->n_resource_claims; i++) {
		const Gpukmm__ResourceClaim *c = s->resource_claims[i];
		if (!claim_blocks(c) || !c->metadata ||
		    obj_key(key, sizeof(key), "", c->metadata->namespace_, c->metadata->name))
			continue;
		if ((r = gk_wsub_tab_add(&v->claims, key, err)))
			rc = r;
	}
	for (size_t i = 0; i < s->n_nodes; i++) {
		const Gpukmm__Node *n = s->nodes[i];
		if (n->metadata && n->metadata->name &&
		    (r = put_enc(&v->nodes, n->metadata->name, enc_node(n), false, &changed, err)))
			rc = r;
	}
	for (size_t i = 0; i < s->n_resource_slices; i++) {
		const Gpukmm__ResourceSlice *sl = s->resource_slices[i];
		if (sl->metadata && sl->metadata->name &&
		    (r = put_enc(&v->slices, sl->metadata->name, enc_slice(sl), false, &changed, err)))
			rc = r;
	}
	v->disc.known = false;
	set_disc(v, s->discovery);
	gk_wsub_lead_update(&v->leader, &v->term, s->leadership);
	v->synced = s->has_synced && s->synced;
	mark_all(v);
	return rc;
}

int gk_opv_apply(gk_opv *v, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	if (!ev) {
		v->ignored++;
		return GK_OK;
	}
	bool del = ev->has_type && ev->type == GPUKMM__EVENT_TYPE__DELETED;
	char key[800];
	switch (ev->object_case) {
	case GPUKMM__EVENT__OBJECT_CLUSTER_POLICY: {
		const Gpukmm__ObjectMeta *md = ev->cluster_policy->metadata;
		if (!md || !md->name)
			break;
		int rc = put_typed(&v->policies, md->name, &ev->cluster_policy->base, del, err);
		mark(v, md->name);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_OPERAND: {
		const Gpukmm__Object *o = ev->operand;
		if (!o->metadata || obj_key(key, sizeof(key), o->kind, o->metadata->namespace_, o->metadata->name))
			break;
		const Gpukmm__Object *old = (const Gpukmm__Object *)gk_wsub_tab_get(&v->objects, key);
		if (old)
			mark_meta(v, old->metadata);
		int rc = put_typed(&v->objects, key, &o->base, del, err);
		mark_meta(v, o->metadata);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_DAEMON_SET: {
		const Gpukmm__DaemonSet *d = ev->daemon_set;
		if (!d->metadata || obj_key(key, sizeof(key), "", d->metadata->namespace_, d->metadata->name))
			break;
		int rc = put_typed(&v->daemonsets, key, &d->base, del, err);
		mark_meta(v, d->metadata);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_RESOURCE_CLAIM: {
		const Gpukmm__ResourceClaim *c = ev->resource_claim;
		if (!c->metadata || obj_key(key, sizeof(key), "", c->metadata->namespace_, c->metadata->name))
			break;
		bool before = v->claims.n > 0;
		int rc = GK_OK;
		if (del || !claim_blocks(c))
			gk_wsub_tab_del(&v->claims, key);
		else
			rc = gk_wsub_tab_add(&v->claims, key, err);
		if ((v->claims.n > 0) != before || rc != GK_OK) /* a refused claim: the guard must look again */
			mark_all(v);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_NODE:
	case GPUKMM__EVENT__OBJECT_RESOURCE_SLICE: {
		bool node = ev->object_case == GPUKMM__EVENT__OBJECT_NODE;
		const Gpukmm__ObjectMeta *md = node ? ev->node->metadata : ev->resource_slice->metadata;
		if (!md || !md->name)
			break;
		bool changed = false;
		int rc = put_enc(node ? &v->nodes : &v->slices, md->name,
				 del ? NULL : node ? enc_node(ev->node) : enc_slice(ev->resource_slice), del, &changed, err);
		if (changed)
			mark_kueue(v);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_DISCOVERY:
		set_disc(v, ev->discovery);
		return GK_OK;
	case GPUKMM__EVENT__OBJECT_LEADERSHIP: {
		if (gk_wsub_lead_update(&v->leader, &v->term, ev->leadership))
			mark_all(v);
		return GK_OK;
	}
	default:
		break;
	}
	v->ignored++;
	return GK_OK;
}

const char *gk_opv_ns(const gk_opv *v)
{
	return v->ns;
}

bool gk_opv_leader(const gk_opv *v)
{
	return v->leader;
}

uint64_t gk_opv_term(const gk_opv *v)
{
	return v->term;
}

bool gk_opv_synced(const gk_opv *v)
{
	return v->synced;
}

const gk_opv_disc *gk_opv_discovery(const gk_opv *v)
{
	return &v->disc;
}

bool gk_opv_claims_allocated(const gk_opv *v)
{
	return v->claims.n > 0;
}

const char *gk_opv_claims_unconfirmed(const gk_opv *v)
{
	const char *o = gk_wsub_tab_overflow(&v->claims);
	return o ? o : gk_wsub_unconf_reason(&v->uc, UC_CLAIM);
}

const char *gk_opv_operand_unconfirmed(const gk_opv *v, const char *resource, const char *ns, const char *name)
{
	const char *r = gk_wsub_unconf_reason(&v->uc, UC_OPERAND);
	if (r)
		return r;
	if ((r = gk_wsub_tab_overflow(&v->objects)) || (r = gk_wsub_tab_overflow(&v->daemonsets)))
		return r;
	char key[800]; /* the watcher's key of an operand: resource/[ns/]name */
	int n = snprintf(key, sizeof(key), "%s/%s%s%s", resource ? resource : "", ns && *ns ? ns : "",
			 ns && *ns ? "/" : "", name ? name : "");
	if (n < 0 || (size_t)n >= sizeof(key))
		return "the object's name is too long to look up";
	if (!name) /* any object of the kind: "resource/" */
		return gk_wsub_unconf_unreadable_under(&v->uc, UC_OPERAND, key);
	return gk_wsub_unconf_unreadable(&v->uc, UC_OPERAND, key);
}

const char *gk_opv_policy_unconfirmed(const gk_opv *v, const char *name)
{
	const char *e = gk_wsub_unconf_unreadable(&v->uc, UC_POLICY, name);
	return e ? e : gk_wsub_unconf_reason(&v->uc, UC_POLICY);
}

const Gpukmm__ClusterPolicy *gk_opv_policy(const gk_opv *v, const char *name)
{
	return (const Gpukmm__ClusterPolicy *)gk_wsub_tab_get(&v->policies, name);
}

const Gpukmm__Object *gk_opv_obj(const gk_opv *v, const char *kind, const char *ns, const char *name)
{
	char key[800];
	if (obj_key(key, sizeof(key), kind, ns, name))
		return NULL;
	return (const Gpukmm__Object *)gk_wsub_tab_get(&v->objects, key);
}

const Gpukmm__DaemonSet *gk_opv_ds(const gk_opv *v, const char *ns, const char *name)
{
	char key[800];
	if (obj_key(key, sizeof(key), "", ns, name))
		return NULL;
	return (const Gpukmm__DaemonSet *)gk_wsub_tab_get(&v->daemonsets, key);
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

int gk_opv_put_obj(gk_opv *v, const char *kind, const char *ns, const char *name, const Gpukmm__Object *o,
		   gk_err *err)
{
	char key[800];
	if (obj_key(key, sizeof(key), kind, ns, name))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "name too long");
	const Gpukmm__Object *old = (const Gpukmm__Object *)gk_wsub_tab_get(&v->objects, key);
	if (old)
		mark_meta(v, old->metadata);
	if (o && old && old->metadata && o->metadata && older(o->metadata->resource_version, old->metadata->resource_version))
		return GK_OK;
	int rc = put_typed(&v->objects, key, o ? &o->base : NULL, !o, err);
	if (o)
		mark_meta(v, o->metadata);
	return rc;
}

int gk_opv_put_policy(gk_opv *v, const Gpukmm__ClusterPolicy *cp, gk_err *err)
{
	if (!cp->metadata || !cp->metadata->name)
		return GK_OK;
	const Gpukmm__ClusterPolicy *old = gk_opv_policy(v, cp->metadata->name);
	if (old && old->metadata && older(cp->metadata->resource_version, old->metadata->resource_version))
		return GK_OK;
	int rc = gk_wsub_tab_put(&v->policies, cp->metadata->name, &cp->base, err);
	mark(v, cp->metadata->name);
	return rc;
}

void gk_opv_touch(gk_opv *v, const char *policy)
{
	mark(v, policy);
}

void gk_opv_each_policy(const gk_opv *v, gk_opv_dirty_fn fn, void *user)
{
	for (size_t i = 0; i < v->policies.n; i++)
		fn(user, v->policies.v[i].key);
}

void gk_opv_state_get(const gk_opv *v, gk_opv_state *out)
{
	*out = (gk_opv_state){ .policies = v->policies.n, .objects = v->objects.n, .daemonsets = v->daemonsets.n,
			       .claims = v->claims.n, .nodes = v->nodes.n, .slices = v->slices.n,
			       .ignored = v->ignored };
}

void gk_opv_each_obj(const gk_opv *v, const char *kind, void (*fn)(void *user, const Gpukmm__Object *o),
		     void *user)
{
	for (size_t i = 0; i < v->objects.n; i++) {
		const Gpukmm__Object *o = (const Gpukmm__Object *)v->objects.v[i].msg;
		if (o->kind && strcmp(o->kind, kind) == 0)
			fn(user, o);
	}
}

/* ---- the Kueue inputs ------------------------------------------------------------------- */

void gk_opv_kueue_free(gk_opv_kueue *k)
{
	for (size_t i = 0; i < k->n_bufs; i++)
		free(k->bufs[i]);
	free(k->bufs);
	free(k->nodes);
	free(k->slices);
	memset(k, 0, sizeof(*k));
}

/* split a copy of enc into n fields at '\n' (fields[] point into the copy, kept in k->bufs) */
static bool split(gk_opv_kueue *k, const char *enc, char **fields, size_t n)
{
	char *c = strdup(enc ? enc : "");
	if (!c)
		return false;
	k->bufs[k->n_bufs++] = c;
	for (size_t i = 0; i < n; i++) {
		fields[i] = c;
		char *nl = c ? strchr(c, '\n') : NULL;
		if (nl) {
			*nl = 0;
			c = nl + 1;
		} else {
			c = NULL;
		}
		if (!fields[i])
			fields[i] = "";
	}
	return true;
}

int gk_opv_kueue_inputs(const gk_opv *v, gk_opv_kueue *k, gk_err *err)
{
	memset(k, 0, sizeof(*k));
	k->nodes = calloc(v->nodes.n + 1, sizeof(*k->nodes));
	k->slices = calloc(v->slices.n + 1, sizeof(*k->slices));
	k->bufs = calloc(v->nodes.n + v->slices.n + 1, sizeof(*k->bufs));
	bool ok = k->nodes && k->slices && k->bufs;
	for (size_t b = 0; ok && b < v->nodes.nb; b++)
		for (const gk_kmap_ent *e = v->nodes.b[b]; ok && e; e = e->next) {
			char *f[4];
			if (!(ok = split(k, e->val, f, 4)))
				break;
			gk_op_knode *n = &k->nodes[k->n_nodes++];
			n->name = e->key;
			const char **dst[] = { &n->cpu, &n->memory, &n->i915, &n->xe };
			for (size_t i = 0; i < 4; i++)
				*dst[i] = f[i][0] == '=' ? f[i] + 1 : NULL;
		}
	for (size_t b = 0; ok && b < v->slices.nb; b++)
		for (const gk_kmap_ent *e = v->slices.b[b]; ok && e; e = e->next) {
			char *f[5];
			if (!(ok = split(k, e->val, f, 5)))
				break;
			gk_op_kslice *s = &k->slices[k->n_slices++];
			s->driver = f[0];
			s->node = f[1][0] ? f[1] : NULL;
			s->pool = f[2];
			s->generation = strtoll(f[3], NULL, 10);
			s->devices = (int32_t)strtol(f[4], NULL, 10);
		}
	if (!ok) {
		gk_opv_kueue_free(k);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	}
	return GK_OK;
}
