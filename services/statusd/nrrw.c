/* gpukmm-statusd controller mode: the NodeReportRequest inbox (nrrw.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/ipc.h"
#include "gpukmm/kmap.h"
#include "gpukmm/log.h"
#include "node.h"
#include "nrr.h"
#include "nrrw.h"

#define RETRY_MS 1000

typedef struct item {
	gk_sd_nrr r;
	int64_t not_before; /* mono ms: a failed call waits */
} item;

enum step { STEP_REVIEW, STEP_GET, STEP_PATCH, STEP_DELETE };

struct gk_sd_nrrw {
	gk_loop *loop;
	gk_kube_mux *mux;
	gk_kube_watch *watch;
	gk_sd_nrrw_opts o;
	char *ns;
	char want_user[600];
	gk_kmap pend; /* name → item */
	/* the chain in flight: a copy of the request */
	bool busy;
	bool watch_failing;        /* a watch error was logged; said again after a sync */
	gk_sd_nrr cur;
	enum step step;
	gk_kube_call *call;
	int conflicts, failing;
	Gpukmm__NodeReport *rep;
	gk_probe_json_info info;
	gk_timer_id timer;
	int64_t timer_at;
	gk_sd_nrrw_stats st;
};

static void next(gk_sd_nrrw *w);

static bool leading(const gk_sd_nrrw *w)
{
	return !w->o.leading || w->o.leading(w->o.user);
}

static void item_free(item *it)
{
	if (!it)
		return;
	gk_sd_nrr_clear(&it->r);
	free(it);
}

static void drop_item(gk_sd_nrrw *w, const char *name, const char *uid)
{
	gk_kmap_ent *e = gk_kmap_get(&w->pend, name);
	item *it = e ? e->ptr : NULL;
	if (!e || (uid && it && it->r.uid && strcmp(it->r.uid, uid) != 0))
		return; /* another request of that name arrived meanwhile: it stays */
	item_free(it);
	gk_kmap_del(&w->pend, name);
	w->st.pending = w->pend.n;
}

static void on_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sd_nrrw *w = user;
	w->timer = 0;
	next(w);
}

/* (Re)arm the timer to fire in ms (sooner wins over a later one armed). */
static void arm(gk_sd_nrrw *w, int64_t ms)
{
	int64_t at = gk_mono_ms() + (ms > 0 ? ms : 0);
	if (w->timer && w->timer_at <= at)
		return;
	if (w->timer)
		gk_loop_cancel(w->loop, w->timer);
	w->timer_at = at;
	w->timer = gk_loop_timer(w->loop, ms > 0 ? ms : 0, on_timer, w);
}

/* The chain ended: the next request. */
static void done(gk_sd_nrrw *w)
{
	w->busy = false;
	w->call = NULL;
	w->conflicts = 0;
	gk_sd_nrr_clear(&w->cur);
	gk_probe_report_free(w->rep);
	w->rep = NULL;
	arm(w, 0); /* not from inside the callback chain: one request per loop turn */
}

/* A call failed (no verdict): the request stays, retried after RETRY_MS. */
static void transient(gk_sd_nrrw *w, const char *what, const char *msg)
{
	w->st.errors++;
	if (w->failing++ == 0)
		GK_WARN("NodeReportRequest %s/%s: %s: %s (retried)", w->ns, w->cur.name, what, msg);
	gk_kmap_ent *e = gk_kmap_get(&w->pend, w->cur.name);
	item *it = e ? e->ptr : NULL;
	if (it)
		it->not_before = gk_mono_ms() + RETRY_MS;
	done(w);
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err);

static int start(gk_sd_nrrw *w, enum step step, const cJSON *obj, const char *body)
{
	gk_err err = { 0 };
	int rc;
	w->step = step;
	gk_kube_ref node = { .version = "v1", .resource = "nodes", .name = w->cur.name };
	if (step == STEP_REVIEW) {
		gk_kube_ref ref = { .group = "authentication.k8s.io", .version = "v1", .resource = "tokenreviews" };
		rc = gk_kube_call_create(w->mux, &ref, obj, NULL, on_call, w, &w->call, &err);
	} else if (step == STEP_GET) {
		rc = gk_kube_call_get(w->mux, &node, NULL, on_call, w, &w->call, &err);
	} else if (step == STEP_PATCH) {
		rc = gk_kube_call_patch(w->mux, &node, GK_PATCH_MERGE, body, NULL, false, NULL, on_call, w, &w->call, &err);
	} else {
		gk_kube_ref ref = { .group = GK_SD_NRR_GROUP, .version = GK_SD_NRR_VERSION, .resource = "nodereportrequests",
				    .ns = w->ns, .name = w->cur.name };
		gk_kube_delete_opts d = { .uid = w->cur.uid, .resource_version = w->cur.rv };
		rc = gk_kube_call_delete(w->mux, &ref, &d, NULL, on_call, w, &w->call, &err);
	}
	if (rc != GK_OK) {
		w->call = NULL;
		transient(w, "cannot start the call", err.msg);
	}
	return rc;
}

static void refuse(gk_sd_nrrw *w, const char *why)
{
	w->st.refused++;
	GK_WARN("NodeReportRequest %s/%s refused: %s; Node %s left as it is", w->ns, w->cur.name, why, w->cur.name);
	start(w, STEP_DELETE, NULL, NULL);
}

static void after_review(gk_sd_nrrw *w, const cJSON *review)
{
	char why[512];
	if (!gk_sd_nrr_verdict(review, w->cur.name, w->want_user, why, sizeof(why)) ||
	    !gk_sd_nrr_report(w->cur.name, w->cur.report, &w->rep, &w->info, why, sizeof(why))) {
		refuse(w, why);
		return;
	}
	start(w, STEP_GET, NULL, NULL);
}

static void after_get(gk_sd_nrrw *w, const cJSON *node)
{
	if (!leading(w)) {
		done(w); /* the new leader applies it; we wait for a kick */
		return;
	}
	bool oom = false;
	cJSON *p = gk_sd_node_patch(node, w->rep, &w->info, w->cur.report, &oom);
	if (oom) {
		cJSON_Delete(p);
		transient(w, "patch", "out of memory");
		return;
	}
	if (!p) {
		GK_DEBUG("Node %s: labels and report already right", w->cur.name);
		w->st.applied++;
		start(w, STEP_DELETE, NULL, NULL);
		return;
	}
	char *body = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	if (!body) {
		transient(w, "patch", "out of memory");
		return;
	}
	start(w, STEP_PATCH, NULL, body);
	free(body);
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	gk_sd_nrrw *w = user;
	const char *msg = st && st->message[0] ? st->message : err ? err->msg : gk_code_name(rc);
	w->call = NULL;
	switch (w->step) {
	case STEP_REVIEW:
		if (rc == GK_OK)
			after_review(w, out);
		else
			transient(w, "TokenReview", msg);
		break;
	case STEP_GET:
		if (rc == GK_OK) {
			after_get(w, out);
		} else if (rc == GK_NOT_FOUND) {
			refuse(w, "no Node of that name"); /* a read, not an absence of ours to act on: only the request goes */
		} else {
			transient(w, "read the Node", msg);
		}
		break;
	case STEP_PATCH:
		if (rc == GK_OK) {
			w->st.node_writes++;
			w->st.applied++;
			if (w->info.form != GK_PROBE_JSON_FULL)
				GK_INFO("Node %s: gpukmm.io labels and report written; the report is summarized: %s",
					w->cur.name, w->info.reason);
			else
				GK_INFO("Node %s: gpukmm.io labels and report written", w->cur.name);
			start(w, STEP_DELETE, NULL, NULL);
		} else if (rc == GK_ABORTED && w->conflicts < GK_KUBE_CONFLICT_ATTEMPTS) {
			w->conflicts++;
			start(w, STEP_GET, NULL, NULL); /* changed since read: read again */
		} else {
			transient(w, "patch the Node", msg);
		}
		break;
	case STEP_DELETE:
		if (rc == GK_OK || rc == GK_NOT_FOUND) {
			w->failing = 0;
			drop_item(w, w->cur.name, w->cur.uid);
			done(w);
		} else {
			/* a 409 too: the request is still there (a precondition failed:
			 * the watch brings the version that differs, or none changed and
			 * the 409 was the server's own). Forgotten here, it would stay
			 * unapplied for good — the watch tells nothing of an object that
			 * did not change — and the node's creates would meet it (409)
			 * forever: the version the inbox holds now goes through again. */
			transient(w, "delete the request", msg);
		}
		break;
	}
	cJSON_Delete(out);
}

static int copy_nrr(gk_sd_nrr *dst, const gk_sd_nrr *src)
{
	memset(dst, 0, sizeof(*dst));
	memcpy(dst->bad, src->bad, sizeof(dst->bad));
	const char *s[] = { src->name, src->uid, src->rv, src->token, src->report };
	char **d[] = { &dst->name, &dst->uid, &dst->rv, &dst->token, &dst->report };
	for (size_t i = 0; i < 5; i++)
		if (s[i] && !(*d[i] = strdup(s[i]))) {
			gk_sd_nrr_clear(dst);
			return -1;
		}
	return 0;
}

/* Start the chain of the first request due; re-arm for the earliest one later. */
static void next(gk_sd_nrrw *w)
{
	if (w->busy || !w->pend.n || !leading(w))
		return;
	int64_t now = gk_mono_ms(), soonest = -1;
	item *pick = NULL;
	for (size_t b = 0; b < w->pend.nb && !pick; b++)
		for (gk_kmap_ent *e = w->pend.b[b]; e && !pick; e = e->next) {
			item *it = e->ptr;
			if (it->not_before <= now)
				pick = it;
			else if (soonest < 0 || it->not_before < soonest)
				soonest = it->not_before;
		}
	if (!pick) {
		if (soonest >= 0)
			arm(w, soonest - now);
		return;
	}
	if (copy_nrr(&w->cur, &pick->r)) {
		pick->not_before = now + RETRY_MS;
		arm(w, RETRY_MS);
		return;
	}
	w->busy = true;
	if (w->cur.bad[0]) {
		refuse(w, w->cur.bad);
		return;
	}
	cJSON *review = gk_sd_nrr_review(w->cur.token);
	if (!review) {
		transient(w, "TokenReview", "out of memory");
		return;
	}
	start(w, STEP_REVIEW, review, NULL);
	cJSON_Delete(review);
}

/* ---- the watch ----------------------------------------------------------------- */

static void on_event(void *user, enum gk_kube_event type, const char *key, const cJSON *obj)
{
	gk_sd_nrrw *w = user;
	if (type == GK_KUBE_DELETED) {
		const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(meta, "name");
		const char *name = cJSON_IsString(n) ? n->valuestring : key;
		if (!cJSON_IsString(n) && key && strrchr(key, '/'))
			name = strrchr(key, '/') + 1; /* the key is "ns/name" */
		if (name)
			drop_item(w, name, NULL);
		return;
	}
	w->st.seen++;
	gk_err err = { 0 };
	item *it = calloc(1, sizeof(*it));
	if (!it || gk_sd_nrr_from_json(obj, &it->r, &err) != GK_OK) {
		GK_WARN("NodeReportRequest %s ignored: %s", key ? key : "?", it ? err.msg : "out of memory");
		free(it);
		return;
	}
	gk_kmap_ent *e = gk_kmap_get(&w->pend, it->r.name);
	if (!e && w->pend.n >= GK_SD_NRRW_MAX_PENDING) {
		if (w->st.errors++ % 1000 == 0)
			GK_WARN("more than %d NodeReportRequests waiting: %s left for later", GK_SD_NRRW_MAX_PENDING,
				it->r.name);
		item_free(it);
		return;
	}
	if (!e && !(e = gk_kmap_put(&w->pend, it->r.name, NULL, NULL))) {
		item_free(it);
		return;
	}
	item_free(e->ptr);
	e->ptr = it;
	w->st.pending = w->pend.n;
	arm(w, 0); /* not from inside the watch's callback: a call cannot start there */
}

static void on_synced(void *user)
{
	gk_sd_nrrw *w = user;
	if (w->watch_failing)
		GK_INFO("NodeReportRequests: listed again");
	w->watch_failing = false;
	arm(w, 0);
}

/* A failing list/watch of the inbox is said once per outage (the watch retries
 * with its backoff): no request is applied meanwhile, nothing is lost. */
static void on_error(void *user, int code, const char *msg)
{
	gk_sd_nrrw *w = user;
	w->st.errors++;
	if (!w->watch_failing)
		GK_WARN("NodeReportRequests in %s: list/watch failed: %s (retried; no request applied meanwhile)", w->ns,
			msg ? msg : gk_code_name(code));
	w->watch_failing = true;
}

int gk_sd_nrrw_new(gk_sd_nrrw **out, gk_loop *loop, gk_kube_client *kc, const gk_sd_nrrw_opts *o, gk_err *err)
{
	gk_sd_nrrw *w = calloc(1, sizeof(*w));
	if (!w || !(w->ns = strdup(o->ns))) {
		free(w);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	w->loop = loop;
	w->o = *o;
	w->o.ns = w->ns;
	snprintf(w->want_user, sizeof(w->want_user), "system:serviceaccount:%s:%s", o->ns,
		 o->node_sa && *o->node_sa ? o->node_sa : "gpukmm-node");
	gk_kmap_init(&w->pend);
	int rc = gk_kube_mux_new(&w->mux, kc, err);
	if (rc == GK_OK && (rc = gk_kube_mux_attach(w->mux, loop, err)) != GK_OK) {
		gk_kube_mux_free(w->mux);
		w->mux = NULL;
	}
	static const gk_kube_watch_cbs cbs = { .on_event = on_event, .on_synced = on_synced, .on_error = on_error };
	gk_kube_ref ref = { .group = GK_SD_NRR_GROUP, .version = GK_SD_NRR_VERSION, .resource = "nodereportrequests",
			    .ns = w->ns };
	gk_kube_watch_opts wo = { 0 };
	if (rc == GK_OK)
		rc = gk_kube_watch_start(&w->watch, w->mux, &ref, &wo, &cbs, w, err);
	if (rc != GK_OK) {
		gk_sd_nrrw_free(w);
		return rc;
	}
	*out = w;
	return GK_OK;
}

void gk_sd_nrrw_free(gk_sd_nrrw *w)
{
	if (!w)
		return;
	if (w->call)
		gk_kube_call_cancel(w->call);
	if (w->watch)
		gk_kube_watch_stop(w->watch);
	if (w->timer)
		gk_loop_cancel(w->loop, w->timer);
	gk_kube_mux_free(w->mux);
	for (size_t b = 0; b < w->pend.nb; b++)
		for (gk_kmap_ent *e = w->pend.b[b]; e; e = e->next)
			item_free(e->ptr);
	gk_kmap_clear(&w->pend);
	gk_sd_nrr_clear(&w->cur);
	gk_probe_report_free(w->rep);
	free(w->ns);
	free(w);
}

void gk_sd_nrrw_kick(gk_sd_nrrw *w)
{
	if (w)
		arm(w, 0);
}

const gk_sd_nrrw_stats *gk_sd_nrrw_stats_get(const gk_sd_nrrw *w)
{
	return &w->st;
}
