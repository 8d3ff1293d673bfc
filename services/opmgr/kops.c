/* gpukmm-opmgr — the asynchronous writer (see kops.h); the entry bookkeeping
 * (one call, one timer, last error, backoff) is lib/kube kwriter. */
#include "kops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kmap.h"
#include "gpukmm/kobj.h"
#include "gpukmm/kube.h"
#include "gpukmm/kwriter.h"
#include "gpukmm/log.h"

#define MAX_ENTRIES 1024
#define CONFLICT_PAUSE_MS 1000

enum verb { V_CREATE, V_PATCH, V_DELETE, V_GET, V_FIN, V_PROBE };

/* What the writer keeps per object (the kwriter entry's data). */
typedef struct wdata {
	gk_opk *k;
	char api_version[96], kind[64], resource[64], ns[256], name[256];
	enum verb verb;          /* of the call in flight */
} wdata;

struct gk_opk {
	gk_loop *loop;
	gk_opv *view;
	gk_kube_conn conn;
	gk_kw *kw;
	gk_opk_stats st;
	gk_kmap absent; /* probes a GET answered 404 (kind/ns/name) */
};

static void count(gk_opk *k)
{
	k->st.inflight = gk_kw_inflight(k->kw);
}

/* What this writer may write, and nothing else (the RBAC table names the same). */
static const char *const WRITABLE[] = {
	"daemonsets", "configmaps", "serviceaccounts", "services", "clusterroles", "clusterrolebindings",
	"validatingadmissionpolicies", "validatingadmissionpolicybindings", "deviceclasses",
	"resourceclaimtemplates", "servicemonitors", "nodefeaturerules", "securitycontextconstraints",
	"clusterpolicies", "resourceflavors", "clusterqueues", "localqueues",
};

static bool writable(const char *resource)
{
	for (size_t i = 0; i < sizeof(WRITABLE) / sizeof(WRITABLE[0]); i++)
		if (strcmp(WRITABLE[i], resource) == 0)
			return true;
	return false;
}

static gk_kw_ent *get_entry(gk_opk *k, const gk_opp_ref *r)
{
	if (!writable(r->resource)) {
		GK_ERROR("refusing to write %s %s: not an operand resource", r->resource, r->name);
		return NULL;
	}
	char key[GK_KW_KEY_MAX];
	snprintf(key, sizeof(key), "%s/%s/%s", r->kind, r->ns ? r->ns : "", r->name);
	bool created;
	gk_kw_ent *e = gk_kw_get(k->kw, key, &created);
	if (e && created) {
		wdata *d = e->data;
		d->k = k;
		snprintf(d->api_version, sizeof(d->api_version), "%s", r->api_version);
		snprintf(d->kind, sizeof(d->kind), "%s", r->kind);
		snprintf(d->resource, sizeof(d->resource), "%s", r->resource);
		snprintf(d->ns, sizeof(d->ns), "%s", r->ns ? r->ns : "");
		snprintf(d->name, sizeof(d->name), "%s", r->name);
	}
	return e;
}

static gk_kube_ref kref(wdata *d, char *group, size_t cap)
{
	const char *slash = strchr(d->api_version, '/');
	const char *version = d->api_version;
	group[0] = 0;
	if (slash) {
		snprintf(group, cap, "%.*s", (int)(slash - d->api_version), d->api_version);
		version = slash + 1;
	}
	return (gk_kube_ref){ .group = group, .version = version, .resource = d->resource,
			      .ns = d->ns[0] ? d->ns : NULL, .name = d->name };
}

static bool is_policy(const wdata *d)
{
	return strcmp(d->kind, GK_POLICY_KIND) == 0;
}

static void touch_one(void *user, const char *policy)
{
	gk_opv_touch(user, policy);
}

/* the policy an operand entry belongs to is found by the view from the object */
static void touch(wdata *d)
{
	if (is_policy(d)) {
		gk_opv_touch(d->k->view, d->name);
		return;
	}
	const Gpukmm__Object *o = gk_opv_obj(d->k->view, d->kind, d->ns[0] ? d->ns : NULL, d->name);
	if (o && o->metadata)
		for (size_t i = 0; i < o->metadata->n_owner_references; i++)
			if (o->metadata->owner_references[i]->name)
				gk_opv_touch(d->k->view, o->metadata->owner_references[i]->name);
	if (!o) /* not in the view: every policy decides again (cheap, rare) */
		gk_opv_each_policy(d->k->view, touch_one, d->k->view);
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err);
static void failed(gk_kw_ent *e, const char *msg)
{
	((wdata *)e->data)->k->st.errors++;
	gk_kw_failed(e, msg);
}

static int start(gk_kw_ent *e, enum verb v, const char *body, const cJSON *obj, const char *uid)
{
	wdata *d = e->data;
	char group[96];
	gk_kube_ref r = kref(d, group, sizeof(group));
	gk_err err = { 0 };
	int rc;
	switch (v) {
	case V_CREATE:
		r.name = NULL;
		rc = gk_kube_call_create(d->k->conn.mux, &r, obj, NULL, on_call, e, &e->call, &err);
		break;
	case V_PATCH:
	case V_FIN:
		rc = gk_kube_call_patch(d->k->conn.mux, &r, GK_PATCH_MERGE, body, NULL, false, NULL, on_call, e, &e->call,
					&err);
		break;
	case V_DELETE: {
		gk_kube_delete_opts o = { .uid = uid, .propagation = "Background" };
		gk_kmap_del(&d->k->absent, e->key); /* asked again once it is gone */
		rc = gk_kube_call_delete(d->k->conn.mux, &r, &o, NULL, on_call, e, &e->call, &err);
		break;
	}
	default:
		rc = gk_kube_call_get(d->k->conn.mux, &r, NULL, on_call, e, &e->call, &err);
	}
	if (rc != GK_OK) {
		GK_WARN("%s %s: %s", d->kind, d->name, err.msg);
		e->call = NULL;
		return rc;
	}
	d->verb = v;
	return GK_OK;
}

static void on_timer(void *user, gk_kw_ent *e, bool reread)
{
	gk_opk *k = user;
	if (reread) {
		if (start(e, V_GET, NULL, NULL, NULL) != GK_OK)
			failed(e, "cannot re-read (too many calls in flight)");
	} else {
		touch(e->data);
	}
	count(k);
	gk_kw_release(e);
}

/* what the API answered goes into the view */
static void fold(wdata *e, const cJSON *out, bool gone)
{
	gk_opv *v = e->k->view;
	if (is_policy(e)) {
		Gpukmm__ClusterPolicy *cp = NULL;
		if (out && gk_kobj_cluster_policy_from_json(out, &cp, NULL) == GK_OK)
			gk_opv_put_policy(v, cp, NULL);
		gk_kobj_free(cp);
		gk_opv_touch(v, e->name);
		return;
	}
	if (gone) {
		touch(e);
		gk_opv_put_obj(v, e->kind, e->ns[0] ? e->ns : NULL, e->name, NULL, NULL);
		return;
	}
	Gpukmm__Object *o = NULL;
	if (out && gk_kobj_object_from_json(out, &o, NULL) == GK_OK)
		gk_opv_put_obj(v, e->kind, e->ns[0] ? e->ns : NULL, e->name, o, NULL);
	else
		touch(e); /* unreadable answer: the watch brings the object */
	gk_kobj_free(o);
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	gk_kw_ent *e = user;
	wdata *d = e->data;
	gk_opk *k = d->k;
	const char *msg = st && st->message[0] ? st->message : err && err->msg[0] ? err->msg : gk_code_name(rc);
	enum verb v = d->verb;
	char why[GK_ERR_MSG_MAX + 512];
	e->call = NULL;
	if (rc == GK_NOT_FOUND && !is_policy(d) && !gk_kube_gone(rc, st, d->name)) {
		/* the safety rule: only a NotFound naming the object says it is gone (the
		 * teardown reads "gone" from the view); a 404 of the path does not */
		snprintf(why, sizeof(why), "the API answered 404 without naming %.60s %.253s: not a confirmed absence (%.180s)",
			 d->kind, d->name, msg);
		rc = GK_UNAVAILABLE;
		msg = why;
	}
	if (v == V_PROBE) {
		/* a read of an object the view cannot see: 404 is remembered, a 2xx goes into the view */
		if (rc == GK_OK || rc == GK_NOT_FOUND) {
			gk_kw_ok(e);
			if (rc == GK_NOT_FOUND)
				gk_kmap_put(&k->absent, e->key, NULL, NULL);
			else
				GK_INFO("%s %s%s%s exists: read it", d->kind, d->ns, d->ns[0] ? "/" : "", d->name);
			fold(d, rc == GK_OK ? out : NULL, rc == GK_NOT_FOUND);
		} else {
			GK_WARN("%s %s%s%s: %s", d->kind, d->ns, d->ns[0] ? "/" : "", d->name, msg);
			failed(e, msg);
			touch(d);
		}
	} else if (rc == GK_OK || (rc == GK_NOT_FOUND && v != V_CREATE && v != V_FIN)) {
		if (v != V_GET) {
			gk_kw_ok(e);
			GK_INFO("%s %s%s%s: %s", d->kind, d->ns, d->ns[0] ? "/" : "", d->name,
				rc == GK_NOT_FOUND ? "gone" : v == V_CREATE ? "created" : v == V_DELETE ? "deleted"
							     : "patched");
		}
		fold(d, rc == GK_OK && v != V_DELETE ? out : NULL, rc == GK_NOT_FOUND || v == V_DELETE);
	} else if (v == V_CREATE && rc == GK_ALREADY_EXISTS) {
		/* there, but not in our view (no label yet): read it, the pass adopts it */
		GK_INFO("%s %s%s%s exists: reading it to adopt it", d->kind, d->ns, d->ns[0] ? "/" : "", d->name);
		if (start(e, V_GET, NULL, NULL, NULL) != GK_OK)
			failed(e, "cannot read the existing object");
	} else if (v != V_GET && (rc == GK_ABORTED || rc == GK_ALREADY_EXISTS || rc == GK_FAILED_PRECONDITION)) {
		k->st.conflicts++;
		int ms = gk_kube_conflict_delay(&e->conflicts, CONFLICT_PAUSE_MS);
		if (is_policy(d)) /* its finalizers: a deletion waits on it, say so (issue #15 item 6) */
			GK_INFO("ClusterPolicy %s: conflict (409) writing its finalizers: retrying on the watched "
				"policy in %d ms", d->name, ms);
		else
			GK_DEBUG("%s %s changed meanwhile (%s): re-reading", d->kind, d->name, msg);
		if (is_policy(d))
			gk_kw_after(e, ms, false); /* the watch brings the policy */
		else if (gk_opv_leader(k->view))
			gk_kw_after(e, ms, true);
	} else {
		GK_WARN("%s %s%s%s: %s", d->kind, d->ns, d->ns[0] ? "/" : "", d->name, msg);
		failed(e, msg);
		touch(d);
	}
	cJSON_Delete(out);
	count(k);
	gk_kw_release(e);
}

static int launch(gk_opk *k, const gk_opp_ref *r, enum verb v, const char *body, const cJSON *obj, const char *uid,
		  const char **last_err)
{
	*last_err = NULL;
	gk_kw_ent *e = get_entry(k, r);
	if (!e)
		return GK_OPP_WR_FAILED;
	if (e->err[0])
		*last_err = e->err;
	if (e->call || e->reread_due)
		return GK_OPP_WR_BUSY;
	if (e->timer)
		return GK_OPP_WR_WAIT;
	if (start(e, v, body, obj, uid) != GK_OK) {
		gk_kw_release(e);
		return GK_OPP_WR_FAILED;
	}
	switch (v) {
	case V_CREATE: k->st.creates++; break;
	case V_PATCH: k->st.patches++; break;
	case V_DELETE: k->st.deletes++; break;
	case V_FIN: k->st.finalizer_writes++; break;
	default: break;
	}
	count(k);
	return GK_OPP_WR_STARTED;
}

static int op_create(void *user, const gk_opp_ref *r, const cJSON *obj, const char **last)
{
	return launch(user, r, V_CREATE, NULL, obj, NULL, last);
}

static int op_patch(void *user, const gk_opp_ref *r, const char *body, const char **last)
{
	return launch(user, r, V_PATCH, body, NULL, NULL, last);
}

static int op_del(void *user, const gk_opp_ref *r, const char *uid, const char **last)
{
	return launch(user, r, V_DELETE, NULL, NULL, uid, last);
}

static int op_probe(void *user, const gk_opp_ref *r, const char **last)
{
	gk_opk *k = user;
	char key[GK_KW_KEY_MAX];
	snprintf(key, sizeof(key), "%s/%s/%s", r->kind, r->ns ? r->ns : "", r->name);
	*last = NULL;
	if (gk_kmap_get(&k->absent, key))
		return GK_OPP_WR_ABSENT;
	int w = launch(k, r, V_PROBE, NULL, NULL, NULL, last);
	if (w == GK_OPP_WR_STARTED)
		k->st.reads++;
	return w;
}

static int op_fin(void *user, const char *policy, const char *rv, char *const *fins, size_t n, const char **last)
{
	/* a merge patch with the resourceVersion: 409 when the policy moved meanwhile */
	cJSON *p = cJSON_CreateObject();
	cJSON *md = p ? cJSON_AddObjectToObject(p, "metadata") : NULL;
	cJSON *arr = md ? cJSON_AddArrayToObject(md, "finalizers") : NULL;
	bool ok = arr && (!rv || cJSON_AddStringToObject(md, "resourceVersion", rv));
	for (size_t i = 0; ok && i < n; i++) {
		cJSON *s = cJSON_CreateString(fins[i]);
		ok = s != NULL;
		if (s)
			cJSON_AddItemToArray(arr, s);
	}
	char *body = ok ? cJSON_PrintUnformatted(p) : NULL;
	cJSON_Delete(p);
	*last = NULL;
	if (!body)
		return GK_OPP_WR_FAILED;
	gk_opp_ref r = { GK_POLICY_API_VERSION, GK_POLICY_KIND, "clusterpolicies", NULL, policy };
	int w = launch(user, &r, V_FIN, body, NULL, NULL, last);
	free(body);
	return w;
}

int gk_opk_new(gk_opk **out, const char *kubeconfig, double qps, gk_loop *loop, gk_opv *view, gk_err *err)
{
	*out = NULL;
	gk_opk *k = calloc(1, sizeof(*k));
	if (!k || gk_kw_new(&k->kw, loop, MAX_ENTRIES, sizeof(wdata), on_timer, k)) {
		free(k);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	k->loop = loop;
	k->view = view;
	int rc = gk_kube_conn_open(&k->conn, kubeconfig, qps, "gpukmm-opmgr", loop, err);
	if (rc) {
		gk_opk_free(k);
		return rc;
	}
	*out = k;
	return GK_OK;
}

void gk_opk_free(gk_opk *k)
{
	if (!k)
		return;
	gk_kw_free(k->kw); /* cancels the calls in flight and the timers */
	gk_kmap_clear(&k->absent);
	gk_kube_conn_close(&k->conn);
	free(k);
}

void gk_opk_ops(gk_opk *k, gk_opp_ops *ops)
{
	*ops = (gk_opp_ops){ .user = k, .create = op_create, .patch = op_patch, .del = op_del, .probe = op_probe,
			     .finalizers = op_fin };
}

const gk_opk_stats *gk_opk_stats_get(const gk_opk *k)
{
	return &k->st;
}
