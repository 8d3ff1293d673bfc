/* gpukmm-modmgr — the manager's view (see view.h). */
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/wsub.h"

/* sorted set of "ns/name" strings */
typedef struct keyset {
	char **v;
	size_t n, cap;
	bool saturated;          /* an insert was refused: answer "in use" */
} keyset;

/* What the watcher cannot vouch for, per topic we read (Discovery.unconfirmed). */
enum { UC_POLICY, UC_MODULE, UC_CLAIM, UC_POD, UC_N };
static const char *const uc_topic[UC_N] = { "clusterpolicy", "module", "resourceclaim", "pod" };
static const bool uc_whole[UC_N] = { false, false, true, true };

struct gk_mmv {
	char *ns;
	size_t max;
	gk_mmv_dirty_fn dirty;
	void *user;
	gk_wsub_tab policies, modules;
	keyset claims, pods;
	bool synced, kmm, dra, leader;
	gk_wsub_unconf uc;
	char why[2][GK_ERR_MSG_MAX]; /* the reasons of the last gk_mmv_view */
	uint64_t term;  /* Leadership.term, stamped on status reports */
	uint64_t ignored;
};

/* ---- key sets -------------------------------------------------------------------- */

static size_t set_pos(const keyset *s, const char *key, bool *found)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(s->v[mid], key);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static void set_put(gk_mmv *v, keyset *s, const char *key, bool in)
{
	bool found;
	size_t i = set_pos(s, key, &found);
	if (!in) {
		if (found) {
			free(s->v[i]);
			memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(char *));
			s->n--;
		}
		return;
	}
	if (found)
		return;
	if (s->n >= v->max) {
		s->saturated = true;
		return;
	}
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 16;
		char **nv = realloc(s->v, nc * sizeof(*nv));
		if (!nv) {
			s->saturated = true;
			return;
		}
		s->v = nv;
		s->cap = nc;
	}
	char *k = strdup(key);
	if (!k) {
		s->saturated = true;
		return;
	}
	memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(char *));
	s->v[i] = k;
	s->n++;
}

static void set_clear(keyset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static bool set_any(const keyset *s)
{
	return s->n > 0 || s->saturated;
}

/* ---- life cycle ------------------------------------------------------------------ */

int gk_mmv_new(gk_mmv **out, const gk_mmv_opts *o, gk_mmv_dirty_fn fn, void *user, gk_err *err)
{
	*out = NULL;
	gk_mmv *v = calloc(1, sizeof(*v));
	if (!v)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	v->ns = strdup(o && o->ns ? o->ns : "intel-gpu-base-operator");
	if (!v->ns) {
		free(v);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	}
	v->max = o && o->max_objects ? o->max_objects : 4096;
	gk_wsub_tab_init(&v->policies, v->max);
	gk_wsub_tab_init(&v->modules, v->max);
	gk_wsub_unconf_init(&v->uc, uc_topic, uc_whole, UC_N);
	v->dirty = fn;
	v->user = user;
	v->leader = true;
	*out = v;
	return GK_OK;
}

void gk_mmv_free(gk_mmv *v)
{
	if (!v)
		return;
	gk_wsub_unconf_free(&v->uc);
	gk_wsub_tab_clear(&v->policies);
	gk_wsub_tab_clear(&v->modules);
	set_clear(&v->claims);
	set_clear(&v->pods);
	free(v->ns);
	free(v);
}

/* ---- keys ----------------------------------------------------------------------- */

static void mark(gk_mmv *v, const char *policy)
{
	if (v->dirty && policy && *policy)
		v->dirty(v->user, policy);
}

/* The policy a Module belongs to: its ClusterPolicy controller, and the name
 * `<cp>-gpu` (a Module without owner reference still maps to its policy). */
static void module_keys(gk_mmv *v, const char *name, const Gpukmm__Module *m,
			void (*fn)(gk_mmv *, const char *))
{
	char buf[GK_MM_NAME_MAX];
	size_t len = name ? strlen(name) : 0;
	if (len > 4 && len - 4 < sizeof(buf) && strcmp(name + len - 4, "-gpu") == 0) {
		memcpy(buf, name, len - 4);
		buf[len - 4] = 0;
		fn(v, buf);
	}
	if (m && m->metadata) {
		for (size_t i = 0; i < m->metadata->n_owner_references; i++) {
			const Gpukmm__OwnerReference *r = m->metadata->owner_references[i];
			/* duplicates with the name-derived key are fine: the queue dedups */
			if (r && r->has_controller && r->controller && r->kind &&
			    strcmp(r->kind, "ClusterPolicy") == 0 && r->name)
				fn(v, r->name);
		}
	}
}

static void mark_all(gk_mmv *v)
{
	for (size_t i = 0; i < v->policies.n; i++)
		mark(v, v->policies.v[i].key);
	for (size_t i = 0; i < v->modules.n; i++)
		module_keys(v, v->modules.v[i].key, (const Gpukmm__Module *)v->modules.v[i].msg, mark);
}

void gk_mmv_each_key(const gk_mmv *v, gk_mmv_dirty_fn fn, void *user)
{
	gk_mmv tmp = *v;
	tmp.dirty = fn;
	tmp.user = user;
	mark_all(&tmp);
}

static const char *meta_name(const Gpukmm__ObjectMeta *md)
{
	return md && md->name && *md->name ? md->name : NULL;
}

static bool in_ns(const gk_mmv *v, const Gpukmm__ObjectMeta *md)
{
	return md && md->namespace_ && strcmp(md->namespace_, v->ns) == 0;
}

static void ns_key(char *buf, size_t cap, const Gpukmm__ObjectMeta *md)
{
	snprintf(buf, cap, "%s/%s", md && md->namespace_ ? md->namespace_ : "",
		 md && md->name ? md->name : "");
}

/* ---- snapshot ------------------------------------------------------------------ */

int gk_mmv_load_snapshot(gk_mmv *v, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	/* old keys dirty first: a policy gone meanwhile is reconciled as gone */
	mark_all(v);
	gk_wsub_tab_clear(&v->policies);
	gk_wsub_tab_clear(&v->modules);
	set_clear(&v->claims);
	set_clear(&v->pods);
	int rc = GK_OK;
	for (size_t i = 0; i < s->n_cluster_policies; i++) {
		const Gpukmm__ClusterPolicy *cp = s->cluster_policies[i];
		const char *name = cp ? meta_name(cp->metadata) : NULL;
		if (!name) {
			v->ignored++;
			continue;
		}
		int r = gk_wsub_tab_put(&v->policies, name, &cp->base, err);
		if (r)
			rc = r;
	}
	for (size_t i = 0; i < s->n_modules; i++) {
		const Gpukmm__Module *m = s->modules[i];
		const char *name = m ? meta_name(m->metadata) : NULL;
		if (!name || !in_ns(v, m->metadata)) {
			v->ignored++;
			continue;
		}
		int r = gk_wsub_tab_put(&v->modules, name, &m->base, err);
		if (r)
			rc = r;
	}
	char key[600];
	for (size_t i = 0; i < s->n_resource_claims; i++) {
		const Gpukmm__ResourceClaim *c = s->resource_claims[i];
		if (c && gk_mm_claim_blocks(c)) {
			ns_key(key, sizeof(key), c->metadata);
			set_put(v, &v->claims, key, true);
		}
	}
	for (size_t i = 0; i < s->n_pods; i++) {
		const Gpukmm__Pod *p = s->pods[i];
		if (p && gk_mm_pod_blocks(p) && !gk_mm_pod_is_operand(p, v->ns)) {
			ns_key(key, sizeof(key), p->metadata);
			set_put(v, &v->pods, key, true);
		}
	}
	v->kmm = s->discovery && s->discovery->has_kmm && s->discovery->kmm;
	v->dra = s->discovery && s->discovery->has_dra && s->discovery->dra;
	gk_wsub_unconf_load(&v->uc, s->discovery);
	gk_wsub_lead_update(&v->leader, &v->term, s->leadership);
	v->synced = s->has_synced && s->synced;
	mark_all(v);
	return rc;
}

/* ---- events -------------------------------------------------------------------- */

/* The cached object is this very version already (the echo of our own write,
 * folded in from the API's answer, or a re-list): nothing changed, no pass. */
static bool same_version(const Gpukmm__ObjectMeta *have, const Gpukmm__ObjectMeta *md)
{
	return have && md && have->resource_version && md->resource_version && *md->resource_version &&
	       strcmp(have->resource_version, md->resource_version) == 0;
}

int gk_mmv_apply(gk_mmv *v, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	if (!ev || !topic) {
		v->ignored++;
		return GK_OK;
	}
	bool del = ev->has_type && ev->type == GPUKMM__EVENT_TYPE__DELETED;
	char key[600];
	switch (ev->object_case) {
	case GPUKMM__EVENT__OBJECT_CLUSTER_POLICY: {
		const char *name = meta_name(ev->cluster_policy->metadata);
		if (!name)
			break;
		const Gpukmm__ClusterPolicy *old = gk_mmv_policy(v, name);
		if (!del && old && same_version(old->metadata, ev->cluster_policy->metadata))
			return GK_OK;
		int rc = GK_OK;
		if (del)
			gk_wsub_tab_del(&v->policies, name);
		else
			rc = gk_wsub_tab_put(&v->policies, name, &ev->cluster_policy->base, err);
		mark(v, name);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_MODULE: {
		const Gpukmm__Module *m = ev->module;
		const char *name = meta_name(m->metadata);
		if (!name || !in_ns(v, m->metadata))
			break;
		/* the old owner too, should the ownerRef have changed */
		const Gpukmm__Module *old = (const Gpukmm__Module *)gk_wsub_tab_get(&v->modules, name);
		if (!del && old && same_version(old->metadata, m->metadata))
			return GK_OK;
		if (old)
			module_keys(v, name, old, mark);
		int rc = GK_OK;
		if (del)
			gk_wsub_tab_del(&v->modules, name);
		else
			rc = gk_wsub_tab_put(&v->modules, name, &m->base, err);
		module_keys(v, name, m, mark);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_RESOURCE_CLAIM: {
		bool before = set_any(&v->claims);
		ns_key(key, sizeof(key), ev->resource_claim->metadata);
		set_put(v, &v->claims, key, !del && gk_mm_claim_blocks(ev->resource_claim));
		if (set_any(&v->claims) != before)
			mark_all(v);
		return GK_OK;
	}
	case GPUKMM__EVENT__OBJECT_POD: {
		bool before = set_any(&v->pods);
		ns_key(key, sizeof(key), ev->pod->metadata);
		set_put(v, &v->pods, key, !del && gk_mm_pod_blocks(ev->pod) && !gk_mm_pod_is_operand(ev->pod, v->ns));
		if (set_any(&v->pods) != before)
			mark_all(v);
		return GK_OK;
	}
	case GPUKMM__EVENT__OBJECT_DISCOVERY: {
		const Gpukmm__Discovery *d = ev->discovery;
		bool kmm = d->has_kmm && d->kmm, dra = d->has_dra && d->dra;
		bool uc = gk_wsub_unconf_load(&v->uc, d);
		if (kmm != v->kmm || dra != v->dra || uc) {
			v->kmm = kmm;
			v->dra = dra;
			mark_all(v);
		}
		return GK_OK;
	}
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

/* ---- queries -------------------------------------------------------------------- */

const Gpukmm__ClusterPolicy *gk_mmv_policy(const gk_mmv *v, const char *name)
{
	return (const Gpukmm__ClusterPolicy *)gk_wsub_tab_get(&v->policies, name);
}

const Gpukmm__Module *gk_mmv_module(const gk_mmv *v, const char *name)
{
	return (const Gpukmm__Module *)gk_wsub_tab_get(&v->modules, name);
}

void gk_mmv_view(gk_mmv *v, const char *policy, gk_mm_view *out)
{
	char mname[GK_MM_NAME_MAX], mkey[GK_MM_NAME_MAX + 300];
	snprintf(mname, sizeof(mname), "%s-gpu", policy);
	snprintf(mkey, sizeof(mkey), "%s/%s", v->ns, mname);
	*out = (gk_mm_view){
		.policy_name = policy,
		.policy = gk_mmv_policy(v, policy),
		.module = gk_mmv_module(v, mname),
		.ns = v->ns,
		.leader = v->leader,
		.kmm = v->kmm,
		.dra = v->dra,
		.claims_allocated = set_any(&v->claims),
		.gpu_pods = set_any(&v->pods),
		.module_up_to_date = false,
	};
	const char *pe = gk_wsub_unconf_unreadable(&v->uc, UC_POLICY, policy);
	const char *me = gk_wsub_unconf_unreadable(&v->uc, UC_MODULE, mkey);
	const char *pr = gk_wsub_unconf_reason(&v->uc, UC_POLICY), *mr = gk_wsub_unconf_reason(&v->uc, UC_MODULE);
	out->policy_unreadable = pe != NULL;
	out->module_unreadable = me != NULL;
	if (pe)
		snprintf(v->why[0], sizeof(v->why[0]), "ClusterPolicy %.253s could not be read: %.220s", policy, pe);
	else if (pr)
		snprintf(v->why[0], sizeof(v->why[0]), "%s", pr);
	if (me)
		snprintf(v->why[1], sizeof(v->why[1]), "KMM Module %.300s could not be read: %.180s", mkey, me);
	else if (mr)
		snprintf(v->why[1], sizeof(v->why[1]), "%s", mr);
	out->policy_unconfirmed = pe || pr ? v->why[0] : NULL;
	out->module_unconfirmed = me || mr ? v->why[1] : NULL;
	out->claims_unconfirmed = gk_wsub_unconf_reason(&v->uc, UC_CLAIM);
	out->pods_unconfirmed = gk_wsub_unconf_reason(&v->uc, UC_POD);
}

int gk_mmv_put_module(gk_mmv *v, const char *name, const Gpukmm__Module *m, gk_err *err)
{
	if (!m) {
		gk_wsub_tab_del(&v->modules, name);
		return GK_OK;
	}
	return gk_wsub_tab_put(&v->modules, name, &m->base, err);
}

int gk_mmv_put_policy(gk_mmv *v, const char *name, const Gpukmm__ClusterPolicy *cp, gk_err *err)
{
	if (!cp) {
		gk_wsub_tab_del(&v->policies, name);
		return GK_OK;
	}
	return gk_wsub_tab_put(&v->policies, name, &cp->base, err);
}

void gk_mmv_state_get(const gk_mmv *v, gk_mmv_state *out)
{
	*out = (gk_mmv_state){
		.synced = v->synced, .kmm = v->kmm, .dra = v->dra, .leader = v->leader, .term = v->term,
		.policies = v->policies.n, .modules = v->modules.n,
		.blocking_claims = v->claims.n, .blocking_pods = v->pods.n, .ignored = v->ignored,
	};
	out->unconfirmed = gk_wsub_unconf_bits(&v->uc);
}
