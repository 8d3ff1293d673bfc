/* gpukmm-gater — the gater's view (see view.h). */
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide.h"
#include "gpukmm/wsub.h"

enum { UC_POLICY, UC_MODULE, UC_N };
static const char *const uc_topic[UC_N] = { "clusterpolicy", "module" };

struct gk_gtv {
	char *ns;
	gk_gtv_dirty_fn dirty;
	void *user;
	gk_wsub_tab policies, daemonsets;
	bool synced, kmm, leader;
	gk_wsub_unconf uc;       /* what the watcher cannot vouch for */
	char why[GK_ERR_MSG_MAX];
	uint64_t term;  /* Leadership.term, stamped on status reports */
	uint64_t ignored;
};

/* ---- life cycle ------------------------------------------------------------------ */

int gk_gtv_new(gk_gtv **out, const gk_gtv_opts *o, gk_gtv_dirty_fn fn, void *user, gk_err *err)
{
	*out = NULL;
	gk_gtv *v = calloc(1, sizeof(*v));
	if (!v)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	v->ns = strdup(o && o->ns ? o->ns : "intel-gpu-base-operator");
	if (!v->ns) {
		free(v);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	}
	gk_wsub_tab_init(&v->policies, o ? o->max_objects : 0);
	gk_wsub_tab_init(&v->daemonsets, o ? o->max_objects : 0);
	gk_wsub_unconf_init(&v->uc, uc_topic, NULL, UC_N);
	v->dirty = fn;
	v->user = user;
	v->leader = true;
	*out = v;
	return GK_OK;
}

void gk_gtv_free(gk_gtv *v)
{
	if (!v)
		return;
	gk_wsub_tab_clear(&v->policies);
	gk_wsub_tab_clear(&v->daemonsets);
	gk_wsub_unconf_free(&v->uc);
	free(v->ns);
	free(v);
}

/* ---- keys ----------------------------------------------------------------------- */

static void mark(void *user, const char *policy)
{
	gk_gtv *v = user;
	if (v->dirty && policy && *policy)
		v->dirty(v->user, policy);
}

static void mark_ds(gk_gtv *v, const Gpukmm__DaemonSet *ds)
{
	gk_gater_ds_policies(ds, v->ns, mark, v);
}

static void mark_all(gk_gtv *v)
{
	for (size_t i = 0; i < v->policies.n; i++)
		mark(v, v->policies.v[i].key);
	/* policies that are gone but still have DaemonSets to ungate */
	for (size_t i = 0; i < v->daemonsets.n; i++)
		mark_ds(v, (const Gpukmm__DaemonSet *)v->daemonsets.v[i].msg);
}

static const char *meta_name(const Gpukmm__ObjectMeta *md)
{
	return md && md->name && *md->name ? md->name : NULL;
}

static int ds_key(char *buf, size_t cap, const char *ns, const char *name)
{
	int n = snprintf(buf, cap, "%s/%s", ns ? ns : "", name ? name : "");
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* ---- snapshot ------------------------------------------------------------------ */

static int put_ds(gk_gtv *v, const Gpukmm__DaemonSet *ds, gk_err *err)
{
	char key[600];
	const Gpukmm__ObjectMeta *md = ds ? ds->metadata : NULL;
	if (!meta_name(md) || ds_key(key, sizeof(key), md->namespace_, md->name)) {
		v->ignored++;
		return GK_OK;
	}
	return gk_wsub_tab_put(&v->daemonsets, key, &ds->base, err);
}

int gk_gtv_load_snapshot(gk_gtv *v, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	mark_all(v);
	gk_wsub_tab_clear(&v->policies);
	gk_wsub_tab_clear(&v->daemonsets);
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
	for (size_t i = 0; i < s->n_daemon_sets; i++) {
		int r = put_ds(v, s->daemon_sets[i], err);
		if (r)
			rc = r;
	}
	v->kmm = s->discovery && s->discovery->has_kmm && s->discovery->kmm;
	gk_wsub_unconf_load(&v->uc, s->discovery);
	gk_wsub_lead_update(&v->leader, &v->term, s->leadership);
	v->synced = s->has_synced && s->synced;
	mark_all(v);
	return rc;
}

/* ---- events -------------------------------------------------------------------- */

int gk_gtv_apply(gk_gtv *v, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	if (!ev || !topic) {
		v->ignored++;
		return GK_OK;
	}
	bool del = ev->has_type && ev->type == GPUKMM__EVENT_TYPE__DELETED;
	switch (ev->object_case) {
	case GPUKMM__EVENT__OBJECT_CLUSTER_POLICY: {
		const char *name = meta_name(ev->cluster_policy->metadata);
		if (!name)
			break;
		int rc = GK_OK;
		if (del)
			gk_wsub_tab_del(&v->policies, name);
		else
			rc = gk_wsub_tab_put(&v->policies, name, &ev->cluster_policy->base, err);
		mark(v, name);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_DAEMON_SET: {
		const Gpukmm__DaemonSet *ds = ev->daemon_set;
		const Gpukmm__ObjectMeta *md = ds->metadata;
		char key[600];
		if (!meta_name(md) || ds_key(key, sizeof(key), md->namespace_, md->name))
			break;
		const ProtobufCMessage *old = gk_wsub_tab_get(&v->daemonsets, key);
		if (old)
			mark_ds(v, (const Gpukmm__DaemonSet *)old);
		int rc = GK_OK;
		if (del)
			gk_wsub_tab_del(&v->daemonsets, key);
		else
			rc = gk_wsub_tab_put(&v->daemonsets, key, &ds->base, err);
		mark_ds(v, ds);
		return rc;
	}
	case GPUKMM__EVENT__OBJECT_DISCOVERY: {
		const Gpukmm__Discovery *d = ev->discovery;
		bool kmm = d->has_kmm && d->kmm;
		bool uc = gk_wsub_unconf_load(&v->uc, d);
		if (kmm != v->kmm || uc) {
			v->kmm = kmm;
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

const char *gk_gtv_ns(const gk_gtv *v)
{
	return v->ns;
}

bool gk_gtv_kmm(const gk_gtv *v)
{
	return v->kmm;
}

bool gk_gtv_leader(const gk_gtv *v)
{
	return v->leader;
}

const char *gk_gtv_policy_unconfirmed(gk_gtv *v, const char *name, bool *unreadable)
{
	const char *e = gk_wsub_unconf_unreadable(&v->uc, UC_POLICY, name);
	const char *r = gk_wsub_unconf_reason(&v->uc, UC_POLICY);
	*unreadable = e != NULL;
	if (e)
		snprintf(v->why, sizeof(v->why), "ClusterPolicy %.253s could not be read: %.220s", name, e);
	return e ? v->why : r;
}

const char *gk_gtv_kmm_unconfirmed(const gk_gtv *v)
{
	return gk_wsub_unconf_reason(&v->uc, UC_MODULE);
}

const Gpukmm__ClusterPolicy *gk_gtv_policy(const gk_gtv *v, const char *name)
{
	return (const Gpukmm__ClusterPolicy *)gk_wsub_tab_get(&v->policies, name);
}

const Gpukmm__DaemonSet *gk_gtv_ds(const gk_gtv *v, const char *ns, const char *name)
{
	char key[600];
	if (ds_key(key, sizeof(key), ns, name))
		return NULL;
	return (const Gpukmm__DaemonSet *)gk_wsub_tab_get(&v->daemonsets, key);
}

void gk_gtv_each_ds(const gk_gtv *v, void (*fn)(void *user, const Gpukmm__DaemonSet *ds), void *user)
{
	for (size_t i = 0; i < v->daemonsets.n; i++)
		fn(user, (const Gpukmm__DaemonSet *)v->daemonsets.v[i].msg);
}

int gk_gtv_put_ds(gk_gtv *v, const char *ns, const char *name, const Gpukmm__DaemonSet *ds, gk_err *err)
{
	char key[600];
	if (ds_key(key, sizeof(key), ns, name))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "view: DaemonSet name too long");
	const ProtobufCMessage *old = gk_wsub_tab_get(&v->daemonsets, key);
	if (old)
		mark_ds(v, (const Gpukmm__DaemonSet *)old);
	if (!ds) {
		gk_wsub_tab_del(&v->daemonsets, key);
		return GK_OK;
	}
	mark_ds(v, ds);
	return gk_wsub_tab_put(&v->daemonsets, key, &ds->base, err);
}

void gk_gtv_touch_ds(gk_gtv *v, const char *ns, const char *name)
{
	const Gpukmm__DaemonSet *ds = gk_gtv_ds(v, ns, name);
	if (ds)
		mark_ds(v, ds);
}

void gk_gtv_state_get(const gk_gtv *v, gk_gtv_state *out)
{
	*out = (gk_gtv_state){
		.synced = v->synced, .kmm = v->kmm, .leader = v->leader, .term = v->term,
		.policies = v->policies.n, .daemonsets = v->daemonsets.n, .ignored = v->ignored,
		.unconfirmed = gk_wsub_unconf_bits(&v->uc),
	};
}
