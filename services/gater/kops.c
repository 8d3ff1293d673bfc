/* gpukmm-gater — the asynchronous DaemonSet writer (see kops.h). */
#include "kops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide.h"
#include "gpukmm/kobj.h"
#include "gpukmm/kube.h"
#include "gpukmm/log.h"

#define MAX_ENTRIES 4096 /* DaemonSets with a call, a backoff or an error: the view's bound */
#define CONFLICT_PAUSE_MS 1000 /* after GK_KUBE_CONFLICT_ATTEMPTS 409s in a row */
#define RETRY_MS 500     /* after an API error, doubled per failure in a row */
#define RETRY_MAX_MS 30000

/* One DaemonSet the writer knows about: heap-allocated (a call's and a
 * timer's user pointer), dropped when idle and without an error. */
typedef struct wentry {
	gk_gater_kops *k;
	char *ns, *name;
	gk_kube_call *call;    /* in flight */
	bool reading;          /* the call is the re-read after a 409 */
	gk_timer_id timer;
	bool reread_due;       /* the timer starts that re-read (else it wakes the policies) */
	int conflicts, failures;
	char err[512];         /* the last failed write's API message, "" = none */
} wentry;

struct gk_gater_kops {
	gk_loop *loop;
	gk_gtv *view;
	gk_kube_config cfg;
	gk_kube_client *kc;
	gk_kube_mux *mux;
	wentry **e;
	size_t n;
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
	uint64_t n = 0;
	for (size_t i = 0; i < k->n; i++)
		n += k->e[i]->call || k->e[i]->reread_due;
	k->st.inflight = n;
}

static void entry_free(wentry *e)
{
	if (e->call)
		gk_kube_call_cancel(e->call);
	if (e->timer)
		gk_loop_cancel(e->k->loop, e->timer);
	free(e->ns);
	free(e->name);
	free(e);
}

static void drop(gk_gater_kops *k, size_t i)
{
	entry_free(k->e[i]);
	k->e[i] = k->e[--k->n];
}

/* Forget e when nothing is left to remember about it. */
static void release(wentry *e)
{
	gk_gater_kops *k = e->k;
	if (e->call || e->timer || e->err[0])
		return;
	for (size_t i = 0; i < k->n; i++)
		if (k->e[i] == e) {
			drop(k, i);
			return;
		}
}

static wentry *find(const gk_gater_kops *k, const char *ns, const char *name)
{
	for (size_t i = 0; i < k->n; i++)
		if (strcmp(k->e[i]->ns, ns) == 0 && strcmp(k->e[i]->name, name) == 0)
			return k->e[i];
	return NULL;
}

static wentry *add(gk_gater_kops *k, const char *ns, const char *name)
{
	if (k->n >= MAX_ENTRIES) /* make room: an idle one only loses its last error */
		for (size_t i = 0; i < k->n; i++)
			if (!k->e[i]->call && !k->e[i]->timer) {
				drop(k, i);
				break;
			}
	if (k->n >= MAX_ENTRIES)
		return NULL;
	wentry *e = calloc(1, sizeof(*e));
	if (e) {
		e->ns = strdup(ns);
		e->name = strdup(name);
	}
	if (!e || !e->ns || !e->name) {
		if (e) {
			free(e->ns);
			free(e->name);
		}
		free(e);
		return NULL;
	}
	e->k = k;
	k->e[k->n++] = e;
	return e;
}

static void on_timer(gk_loop *l, gk_timer_id id, void *user);
static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err);

static void after(wentry *e, int ms, bool reread)
{
	if (e->timer)
		gk_loop_cancel(e->k->loop, e->timer);
	e->reread_due = reread;
	e->timer = gk_loop_timer(e->k->loop, ms, on_timer, e);
}

/* A failed call: keep the message, ask again after the backoff. */
static void failed(wentry *e, const char *msg)
{
	int n = e->failures++;
	int64_t ms = (int64_t)RETRY_MS << (n < 6 ? n : 6);
	snprintf(e->err, sizeof(e->err), "%s", msg);
	e->k->st.errors++;
	after(e, ms < RETRY_MAX_MS ? ms : RETRY_MAX_MS, false);
}

static int start(wentry *e, const char *body)
{
	gk_gater_kops *k = e->k;
	gk_kube_ref r = ds_ref(e->ns, e->name);
	gk_err err = { 0 };
	int rc = body ? gk_kube_call_patch(k->mux, &r, GK_PATCH_MERGE, body, NULL, false, NULL, on_call, e, &e->call,
					   &err)
		      : gk_kube_call_get(k->mux, &r, NULL, on_call, e, &e->call, &err);
	if (rc != GK_OK) {
		GK_WARN("DaemonSet %s/%s: %s", e->ns, e->name, err.msg);
		e->call = NULL;
		return rc;
	}
	e->reading = !body;
	return GK_OK;
}

static void on_timer(gk_loop *l, gk_timer_id id, void *user)
{
	wentry *e = user;
	gk_gater_kops *k = e->k;
	e->timer = 0;
	if (e->reread_due) {
		e->reread_due = false;
		if (start(e, NULL) != GK_OK)
			failed(e, "cannot re-read after a conflict (too many calls in flight)");
	} else {
		gk_gtv_touch_ds(k->view, e->ns, e->name); /* the pass asks again */
	}
	count(k);
	release(e);
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	wentry *e = user;
	gk_gater_kops *k = e->k;
	const char *msg = st && st->message[0] ? st->message : err && err->msg[0] ? err->msg : gk_code_name(rc);
	bool reading = e->reading;
	e->call = NULL;
	if (rc == GK_OK || rc == GK_NOT_FOUND) {
		Gpukmm__DaemonSet *ds = rc == GK_OK ? ds_of(out) : NULL;
		if (!reading) {
			e->err[0] = 0;
			e->failures = e->conflicts = 0;
			GK_INFO("DaemonSet %s/%s: %s", e->ns, e->name, rc == GK_OK ? "written" : "gone");
		}
		if (rc == GK_NOT_FOUND || ds)
			gk_gtv_put_ds(k->view, e->ns, e->name, ds, NULL); /* marks its policies */
		else /* unreadable answer: the watch brings the object */
			gk_gtv_touch_ds(k->view, e->ns, e->name);
		if (ds)
			protobuf_c_message_free_unpacked(&ds->base, NULL);
	} else if (!reading && (rc == GK_ABORTED || rc == GK_ALREADY_EXISTS)) {
		k->st.conflicts++;
		int ms = gk_kube_conflict_delay(&e->conflicts, CONFLICT_PAUSE_MS);
		GK_DEBUG("DaemonSet %s/%s changed meanwhile (%s): re-reading", e->ns, e->name, msg);
		if (gk_gtv_leader(k->view))
			after(e, ms, true);
		else
			gk_gtv_touch_ds(k->view, e->ns, e->name); /* no longer ours to write */
	} else {
		char hint[512];
		if (rc == GK_PERMISSION_DENIED) /* RBAC: not a namespace we may gate in (yet) */
			gk_gater_forbidden_hint(hint, sizeof(hint), e->ns, msg, gk_gtv_ns(k->view));
		GK_WARN("%s DaemonSet %s/%s: %s", reading ? "re-reading" : "writing", e->ns, e->name, msg);
		failed(e, rc == GK_PERMISSION_DENIED ? hint : msg);
		gk_gtv_touch_ds(k->view, e->ns, e->name); /* the pass reports the error */
	}
	cJSON_Delete(out);
	count(k);
	release(e);
}

static enum gk_gater_wr op_write(void *user, const char *ns, const char *name, const char *body,
				 const char **last_err)
{
	gk_gater_kops *k = user;
	*last_err = NULL;
	wentry *e = find(k, ns, name);
	if (e) {
		if (e->err[0])
			*last_err = e->err;
		if (e->call || e->reread_due)
			return GK_GATER_WR_BUSY;
		if (e->timer)
			return GK_GATER_WR_WAIT;
	} else if (!(e = add(k, ns, name))) {
		return GK_GATER_WR_FAILED;
	}
	if (start(e, body) != GK_OK) {
		release(e); /* keeps it when it has an error to report */
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
	if (k)
		k->e = calloc(MAX_ENTRIES, sizeof(*k->e));
	if (!k || !k->e) {
		free(k);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	k->loop = loop;
	k->view = view;
	int rc = gk_kube_config_load(&k->cfg, kubeconfig, err);
	if (rc == GK_OK) {
		/* writes are few (one per real change); reads come from the watcher */
		gk_kube_opts ko = { .qps = qps ? qps : 50, .burst = 100, .timeout_ms = 15000,
				    .user_agent = "gpukmm-gater" };
		rc = gk_kube_client_new(&k->kc, &k->cfg, &ko, err);
	}
	if (rc == GK_OK)
		rc = gk_kube_mux_new(&k->mux, k->kc, err);
	if (rc == GK_OK)
		rc = gk_kube_mux_attach(k->mux, loop, err);
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
	while (k->n)
		drop(k, 0); /* cancels the calls in flight and the timers */
	gk_kube_mux_free(k->mux);
	gk_kube_client_free(k->kc);
	gk_kube_config_free(&k->cfg);
	free(k->e);
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
