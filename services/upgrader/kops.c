/* gpukmm-upgrader — the Node writer (see kops.h); the per-node bookkeeping
 * (one call, one timer, last error, backoff) is lib/kube kwriter. */
#include "kops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpukmm/kobj.h"
#include "gpukmm/kwriter.h"
#include "gpukmm/log.h"
#include "gpukmm/policy.h"

#define MAX_ENTRIES 1024
#define CONFLICT_PAUSE_MS 1000
#define CONFIRM_RETRY_MS 1000

static const gk_kube_ref NODES = { "", "v1", "nodes", NULL, NULL, NULL };
static const gk_kube_ref EVENTS = { "", "v1", "events", "default", NULL, NULL };

enum verb { V_PATCH, V_GET };

/* what the writer keeps per node (the kwriter entry's data) */
typedef struct wdata {
	gk_upk *k;
	char node[254];
	enum verb verb;
	bool has_ev, ev_warning;
	char ev_reason[64], ev_msg[512];
} wdata;

struct gk_upk {
	gk_loop *loop;
	gk_upv *view;
	gk_kube_conn conn;
	gk_kw *kw;
	char *instance;
	gk_kube_call *confirm;
	gk_timer_id confirm_timer;
	bool confirmed;
	uint64_t seq;
	gk_upk_stats st;
};

static void count(gk_upk *k)
{
	k->st.inflight = gk_kw_inflight(k->kw);
}

/* ---- Events ------------------------------------------------------------------------------ */

static void on_event_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	gk_upk *k = user;
	cJSON_Delete(out);
	if (rc != GK_OK) {
		k->st.event_errors++;
		GK_DEBUG("event: %s", st && st->message[0] ? st->message : err ? err->msg : "");
	}
}

static void record(gk_upk *k, const wdata *d)
{
	const gk_upv_node *n = gk_upv_node_get(k->view, d->node);
	char name[300], ts[GK_KUBE_TIME_LEN];
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	gk_kube_time(ts, sizeof(ts), (int64_t)now.tv_sec);
	/* unique: one Event per step, like a recorder's first occurrence */
	snprintf(name, sizeof(name), "%.200s.%llx%04llx", d->node,
		 (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec,
		 (unsigned long long)(k->seq++ & 0xffff));
	const gk_kobj_event e = { .name = name, .api_version = "v1", .kind = "Node", .object = d->node,
				  .uid = n ? gk_upv_node_uid(n) : NULL, .warning = d->ev_warning,
				  .reason = d->ev_reason, .message = d->ev_msg, .ts = ts,
				  .component = "gpukmm-upgrader", .reporting_component = "gpukmm.io/upgrader",
				  .instance = k->instance };
	cJSON *o = gk_kobj_event_json(&e);
	gk_err err = { 0 };
	if (!o || gk_kube_call_create(k->conn.mux, &EVENTS, o, NULL, on_event_call, k, NULL, &err) != GK_OK)
		k->st.event_errors++;
	else
		k->st.events++;
	cJSON_Delete(o);
}

/* ---- Node patches ------------------------------------------------------------------------ */

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err);

static int start(gk_kw_ent *e, enum verb v, const char *body)
{
	wdata *d = e->data;
	gk_kube_ref r = NODES;
	r.name = d->node;
	gk_err err = { 0 };
	int rc = v == V_PATCH ? gk_kube_call_patch(d->k->conn.mux, &r, GK_PATCH_MERGE, body, NULL, false, NULL, on_call,
						     e, &e->call, &err)
			      : gk_kube_call_get(d->k->conn.mux, &r, NULL, on_call, e, &e->call, &err);
	if (rc != GK_OK) {
		GK_WARN("node %s: %s", d->node, err.msg);
		e->call = NULL;
		return rc;
	}
	d->verb = v;
	return GK_OK;
}

static void fold(gk_upk *k, const cJSON *out)
{
	Gpukmm__Node *n = NULL;
	gk_err err;
	if (out && gk_kobj_node_from_json(out, &n, &err) == GK_OK)
		gk_upv_put_node(k->view, n, NULL);
	else
		gk_upv_touch_all(k->view); /* unreadable: the watch brings the node */
	gk_kobj_free(n);
}

static void on_timer(void *user, gk_kw_ent *e, bool reread)
{
	gk_upk *k = user;
	if (reread) {
		if (start(e, V_GET, NULL) != GK_OK)
			gk_kw_failed(e, "cannot re-read the node (too many calls in flight)");
	} else {
		gk_upv_touch_all(k->view);
	}
	count(k);
	gk_kw_release(e);
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	gk_kw_ent *e = user;
	wdata *d = e->data;
	gk_upk *k = d->k;
	const char *msg = st && st->message[0] ? st->message : err && err->msg[0] ? err->msg : gk_code_name(rc);
	enum verb v = d->verb;
	e->call = NULL;
	if (rc == GK_OK) {
		if (v == V_PATCH) {
			gk_kw_ok(e);
			if (d->has_ev) {
				GK_INFO("node %s: %s: %s", d->node, d->ev_reason, d->ev_msg);
				fold(k, out);
				record(k, d);
				d->has_ev = false;
			} else {
				fold(k, out);
			}
		} else {
			fold(k, out);
		}
	} else if (rc == GK_NOT_FOUND) {
		gk_kw_ok(e);
		GK_INFO("node %s: gone", d->node);
		gk_upv_touch_all(k->view);
	} else if (v == V_PATCH && (rc == GK_ABORTED || rc == GK_FAILED_PRECONDITION)) {
		/* the node changed since the pass saw it: re-read, decide again (never a blind retry) */
		k->st.conflicts++;
		d->has_ev = false;
		int ms = gk_kube_conflict_delay(&e->conflicts, CONFLICT_PAUSE_MS);
		GK_DEBUG("node %s changed meanwhile (%s): re-reading", d->node, msg);
		if (gk_upv_leader(k->view))
			gk_kw_after(e, ms, true);
	} else {
		k->st.errors++;
		d->has_ev = false;
		GK_WARN("node %s: %s", d->node, msg);
		gk_kw_failed(e, msg);
		gk_upv_touch_all(k->view);
	}
	cJSON_Delete(out);
	count(k);
	gk_kw_release(e);
}

int gk_upk_patch(gk_upk *k, const char *node, const char *body, const gk_upk_event *ev, const char **last_err)
{
	*last_err = NULL;
	if (strlen(node) >= sizeof(((wdata *)0)->node))
		return GK_UPK_FAILED;
	bool created;
	gk_kw_ent *e = gk_kw_get(k->kw, node, &created);
	if (!e)
		return GK_UPK_FAILED;
	wdata *d = e->data;
	if (created) {
		d->k = k;
		snprintf(d->node, sizeof(d->node), "%s", node);
	}
	if (e->err[0])
		*last_err = e->err;
	if (e->call || e->reread_due)
		return GK_UPK_BUSY;
	if (e->timer)
		return GK_UPK_WAIT;
	d->has_ev = ev != NULL;
	if (ev) {
		d->ev_warning = ev->warning;
		snprintf(d->ev_reason, sizeof(d->ev_reason), "%s", ev->reason);
		snprintf(d->ev_msg, sizeof(d->ev_msg), "%s", ev->message);
	}
	if (start(e, V_PATCH, body) != GK_OK) {
		gk_kw_release(e);
		return GK_UPK_FAILED;
	}
	k->st.patches++;
	count(k);
	return GK_UPK_STARTED;
}

bool gk_upk_busy(gk_upk *k, const char *node)
{
	gk_kw_ent *e = gk_kw_find(k->kw, node);
	return e && (e->call || e->reread_due);
}

/* ---- the confirmation read ----------------------------------------------------------------- */

static void confirm_start(gk_upk *k);

static void on_confirm_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_upk *k = user;
	k->confirm_timer = 0;
	confirm_start(k);
}

static void on_confirm(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	gk_upk *k = user;
	k->confirm = NULL;
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(out, "items"), *it;
	const cJSON *cont = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(out, "metadata"), "continue");
	bool whole = rc == GK_OK && (!items || cJSON_IsArray(items)) && !(cJSON_IsString(cont) && cont->valuestring[0]);
	if (!whole) {
		/* not confirmed by a failed, malformed or partial read: try again */
		GK_WARN("reading the nodes in an upgrade step failed (%s): picks wait",
			rc != GK_OK ? (st && st->message[0] ? st->message : err ? err->msg : gk_code_name(rc))
				    : "malformed or partial list");
		cJSON_Delete(out);
		k->confirm_timer = gk_loop_timer(k->loop, CONFIRM_RETRY_MS, on_confirm_timer, k);
		return;
	}
	size_t n = 0;
	cJSON_ArrayForEach(it, items) {
		Gpukmm__Node *node = NULL;
		gk_err e;
		if (gk_kobj_node_from_json(it, &node, &e) == GK_OK)
			gk_upv_put_node(k->view, node, NULL);
		gk_kobj_free(node);
		n++;
	}
	cJSON_Delete(out);
	k->confirmed = true;
	GK_INFO("read the nodes in an upgrade step afresh: %zu", n);
	gk_upv_touch_all(k->view);
}

static void confirm_start(gk_upk *k)
{
	if (k->confirm || k->confirm_timer)
		return;
	gk_kube_list_opts lo = { .label_selector = GK_POLICY_UPGRADE_STATE_LABEL, .limit = 5000 };
	gk_err err = { 0 };
	if (gk_kube_call_list(k->conn.mux, &NODES, &lo, NULL, on_confirm, k, &k->confirm, &err) != GK_OK) {
		k->confirm = NULL;
		GK_WARN("reading the nodes in an upgrade step: %s", err.msg);
		k->confirm_timer = gk_loop_timer(k->loop, CONFIRM_RETRY_MS, on_confirm_timer, k);
		return;
	}
	k->st.confirm_lists++;
}

bool gk_upk_confirmed(gk_upk *k)
{
	if (!k->confirmed)
		confirm_start(k);
	return k->confirmed;
}

void gk_upk_unconfirm(gk_upk *k)
{
	k->confirmed = false;
	if (k->confirm) {
		gk_kube_call_cancel(k->confirm);
		k->confirm = NULL;
	}
	if (k->confirm_timer) {
		gk_loop_cancel(k->loop, k->confirm_timer);
		k->confirm_timer = 0;
	}
}

/* ---- life ------------------------------------------------------------------------------------ */

int gk_upk_new(gk_upk **out, const char *kubeconfig, double qps, gk_loop *loop, gk_upv *view, const char *instance,
	       gk_err *err)
{
	*out = NULL;
	gk_upk *k = calloc(1, sizeof(*k));
	if (!k || !(k->instance = strdup(instance ? instance : "")) ||
	    gk_kw_new(&k->kw, loop, MAX_ENTRIES, sizeof(wdata), on_timer, k)) {
		if (k)
			free(k->instance);
		free(k);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	k->loop = loop;
	k->view = view;
	int rc = gk_kube_conn_open(&k->conn, kubeconfig, qps, "gpukmm-upgrader", loop, err);
	if (rc) {
		gk_upk_free(k);
		return rc;
	}
	*out = k;
	return GK_OK;
}

void gk_upk_free(gk_upk *k)
{
	if (!k)
		return;
	gk_upk_unconfirm(k);
	gk_kw_free(k->kw);
	gk_kube_conn_close(&k->conn);
	free(k->instance);
	free(k);
}

gk_kube_mux *gk_upk_mux(gk_upk *k)
{
	return k->conn.mux;
}

const gk_upk_stats *gk_upk_stats_get(const gk_upk *k)
{
	return &k->st;
}
