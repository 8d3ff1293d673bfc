/* gpukmm-gater — the asynchronous DaemonSet writer (see kops.h); the entry
 * bookkeeping (one call, one timer, last error, backoff) is lib/kube kwriter. */
#include "kops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide.h"
#include "gpukmm/kobj.h"
#include "gpukmm/kube.h"
#include "gpukmm/kwriter.h"
#include "gpukmm/log.h"

#define MAX_ENTRIES 4096 /* DaemonSets with a call, a backoff or an error: the view's bound */
#define CONFLICT_PAUSE_MS 1000 /* after GK_KUBE_CONFLICT_ATTEMPTS 409s in a row */

/* What the gater keeps per DaemonSet (the entry's data). */
typedef struct wdata {
	gk_gater_kops *k;
	char ns[256], name[256];
	bool reading;            /* the call in flight is the re-read after a 409 */
} wdata;

struct gk_gater_kops {
	gk_loop *loop;
	gk_gtv *view;
	gk_kube_conn conn;
	gk_kw *kw;
	gk_gater_kops_stats st;
};

static gk_kube_ref ds_ref(const char *ns, const char *name)
{
	return (gk_kube_ref){ .group = "apps", .version = "v1", .resource = "daemonsets", .ns = ns, .name = name };
}

/* The DaemonSet in an API answer (NULL when it is not one or cannot be read). */
static Gpukmm__DaemonSet *ds_of(const cJSON *obj)
{
	Gpukmm__DaemonSet *ds = NULL;
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
	/* kubesim and the API server both answer with the object; be strict anyway */
	if (obj && (!kind || (cJSON_IsString(kind) && strcmp(kind->valuestring, "DaemonSet") == 0)))
		gk_kobj_daemon_set_from_json(obj, &ds, NULL);
	return ds;
}

static void count(gk_gater_kops *k)
{
	k->st.inflight = gk_kw_inflight(k->kw);
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err);

static int start(gk_kw_ent *e, const char *body)
{
	wdata *d = e->data;
	gk_kube_ref r = ds_ref(d->ns, d->name);
	gk_err err = { 0 };
	int rc = body ? gk_kube_call_patch(d->k->conn.mux, &r, GK_PATCH_MERGE, body, NULL, false, NULL, on_call, e, &e->call,
					   &err)
		      : gk_kube_call_get(d->k->conn.mux, &r, NULL, on_call, e, &e->call, &err);
	if (rc != GK_OK) {
		GK_WARN("DaemonSet %s/%s: %s", d->ns, d->name, err.msg);
		e->call = NULL;
		return rc;
	}
	d->reading = !body;
	return GK_OK;
}

static void failed(gk_kw_ent *e, const char *msg)
{
	((wdata *)e->data)->k->st.errors++;
	gk_kw_failed(e, msg);
}

static void on_timer(void *user, gk_kw_ent *e, bool reread)
{
	gk_gater_kops *k = user;
	wdata *d = e->data;
	if (reread) {
		if (start(e, NULL) != GK_OK)
			failed(e, "cannot re-read after a conflict (too many calls in flight)");
	} else {
		gk_gtv_touch_ds(k->view, d->ns, d->name); /* the pass asks again */
	}
	count(k);
	gk_kw_release(e);
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	gk_kw_ent *e = user;
	wdata *d = e->data;
	gk_gater_kops *k = d->k;
	const char *msg = st && st->message[0] ? st->message : err && err->msg[0] ? err->msg : gk_code_name(rc);
	bool reading = d->reading;
	e->call = NULL;
	if (rc == GK_OK || rc == GK_NOT_FOUND) {
		Gpukmm__DaemonSet *ds = rc == GK_OK ? ds_of(out) : NULL;
		if (!reading) {
			gk_kw_ok(e);
			GK_INFO("DaemonSet %s/%s: %s", d->ns, d->name, rc == GK_OK ? "written" : "gone");
		}
		if (rc == GK_NOT_FOUND || ds)
			gk_gtv_put_ds(k->view, d->ns, d->name, ds, NULL); /* marks its policies */
		else /* unreadable answer: the watch brings the object */
			gk_gtv_touch_ds(k->view, d->ns, d->name);
		if (ds)
			protobuf_c_message_free_unpacked(&ds->base, NULL);
	} else if (!reading && (rc == GK_ABORTED || rc == GK_ALREADY_EXISTS)) {
		k->st.conflicts++;
		int ms = gk_kube_conflict_delay(&e->conflicts, CONFLICT_PAUSE_MS);
		GK_DEBUG("DaemonSet %s/%s changed meanwhile (%s): re-reading", d->ns, d->name, msg);
		if (gk_gtv_leader(k->view))
			gk_kw_after(e, ms, true);
		else
			gk_gtv_touch_ds(k->view, d->ns, d->name); /* no longer ours to write */
	} else {
		char hint[512];
		if (rc == GK_PERMISSION_DENIED) /* RBAC: not a namespace we may gate in (yet) */
			gk_gater_forbidden_hint(hint, sizeof(hint), d->ns, msg, gk_gtv_ns(k->view));
		GK_WARN("%s DaemonSet %s/%s: %s", reading ? "re-reading" : "writing", d->ns, d->name, msg);
		failed(e, rc == GK_PERMISSION_DENIED ? hint : msg);
		gk_gtv_touch_ds(k->view, d->ns, d->name); /* the pass reports the error */
	}
	cJSON_Delete(out);
	count(k);
	gk_kw_release(e);
}

static enum gk_gater_wr op_write(void *user, const char *ns, const char *name, const char *body,
				 const char **last_err)
{
	gk_gater_kops *k = user;
	*last_err = NULL;
	char key[GK_KW_KEY_MAX];
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	bool created;
	gk_kw_ent *e = gk_kw_get(k->kw, key, &created);
	if (!e)
		return GK_GATER_WR_FAILED;
	wdata *d = e->data;
	if (created) {
		d->k = k;
		snprintf(d->ns, sizeof(d->ns), "%s", ns);
		snprintf(d->name, sizeof(d->name), "%s", name);
	}
	if (e->err[0])
		*last_err = e->err;
	if (e->call || e->reread_due)
		return GK_GATER_WR_BUSY;
	if (e->timer)
		return GK_GATER_WR_WAIT;
	if (start(e, body) != GK_OK) {
		gk_kw_release(e); /* keeps it when it has an error to report */
		return GK_GATER_WR_FAILED;
	}
	k->st.writes++;
	count(k);
	return GK_GATER_WR_STARTED;
}

int gk_gater_kops_new(gk_gater_kops **out, const char *kubeconfig, double qps, gk_loop *loop, gk_gtv *view,
		      gk_err *err)
{
	*out = NULL;
	gk_gater_kops *k = calloc(1, sizeof(*k));
	if (!k || gk_kw_new(&k->kw, loop, MAX_ENTRIES, sizeof(wdata), on_timer, k)) {
		free(k);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	k->loop = loop;
	k->view = view;
	int rc = gk_kube_conn_open(&k->conn, kubeconfig, qps, "gpukmm-gater", loop, err);
	if (rc) {
		gk_gater_kops_free(k);
		return rc;
	}
	*out = k;
	return GK_OK;
}

void gk_gater_kops_free(gk_gater_kops *k)
{
	if (!k)
		return;
	gk_kw_free(k->kw); /* cancels the calls in flight and the timers */
	gk_kube_conn_close(&k->conn);
	free(k);
}

void gk_gater_kops_ops(gk_gater_kops *k, gk_gater_ops *ops)
{
	*ops = (gk_gater_ops){ .user = k, .write = op_write };
}

const gk_gater_kops_stats *gk_gater_kops_stats_get(const gk_gater_kops *k)
{
	return &k->st;
}
