/* gpukmm-statusd node mode: asynchronous writer of the own Node (nodew.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "node.h"
#include "nodew.h"

#define RETRY_MS 1000   /* after an API error, and after GK_KUBE_CONFLICT_ATTEMPTS 409s in a row */

enum step { STEP_GET, STEP_PATCH };

struct gk_sd_nodew {
	gk_loop *loop;
	gk_kube_mux *mux;
	char *name;
	int debounce_ms;
	Gpukmm__NodeReport *rep;
	bool dirty;            /* rep not yet written */
	gk_kube_call *call;    /* the chain in flight */
	enum step step;
	int conflicts;
	gk_timer_id timer;
	gk_sd_nodew_stats st;
};

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err);

static void pending(gk_sd_nodew *w)
{
	w->st.pending = w->dirty || w->call;
}

static void on_timer(gk_loop *l, gk_timer_id id, void *user);

static void arm(gk_sd_nodew *w, int ms)
{
	if (!w->timer)
		w->timer = gk_loop_timer(w->loop, ms, on_timer, w);
	pending(w);
}

/* The chain ended: done (pass counted) or retry after ms. */
static void finish(gk_sd_nodew *w, bool done, int ms)
{
	w->call = NULL;
	if (done) {
		w->st.passes++;
		w->conflicts = 0;
		if (w->dirty)
			arm(w, w->debounce_ms); /* a report arrived meanwhile */
	} else {
		w->dirty = true;
		arm(w, ms);
	}
	pending(w);
}

static int start(gk_sd_nodew *w, enum step step, const char *body)
{
	gk_kube_ref ref = { .version = "v1", .resource = "nodes", .name = w->name };
	gk_err err = { 0 };
	gk_kube_call *call = NULL;
	int rc = step == STEP_GET ? gk_kube_call_get(w->mux, &ref, NULL, on_call, w, &call, &err)
				  : gk_kube_call_patch(w->mux, &ref, GK_PATCH_MERGE, body, NULL, false, NULL,
						       on_call, w, &call, &err);
	if (rc != GK_OK) {
		GK_WARN("Node %s: %s", w->name, err.msg);
		return rc;
	}
	w->call = call;
	w->step = step;
	return GK_OK;
}

/* The compact report JSON for the annotation, shortened past the bound. */
static char *report_json(const Gpukmm__NodeReport *r)
{
	char *json = gk_pb_to_json(&r->base);
	if (json && strlen(json) > GK_SD_NODE_ANNOTATION_MAX) {
		free(json);
		if (asprintf(&json, "{\"node_name\":\"%.253s\",\"truncated\":true}",
			     r->node_name ? r->node_name : "") < 0)
			json = NULL;
	}
	return json;
}

static void after_get(gk_sd_nodew *w, const cJSON *node)
{
	char *json = report_json(w->rep);
	bool oom = !json;
	cJSON *p = json ? gk_sd_node_patch(node, w->rep, json, &oom) : NULL;
	free(json);
	if (oom) {
		cJSON_Delete(p);
		finish(w, false, RETRY_MS);
		return;
	}
	if (!p) {
		finish(w, true, 0);
		return;
	}
	char *body = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	w->call = NULL;
	int rc = body ? start(w, STEP_PATCH, body) : GK_RESOURCE_EXHAUSTED;
	free(body);
	if (rc != GK_OK) {
		w->st.errors++;
		finish(w, false, RETRY_MS);
	}
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	gk_sd_nodew *w = user;
	const char *msg = st && st->message[0] ? st->message : err ? err->msg : gk_code_name(rc);
	w->call = NULL;
	if (w->step == STEP_GET) {
		if (rc == GK_OK) {
			after_get(w, out);
		} else {
			w->st.errors++;
			GK_WARN("read Node %s: %s", w->name, msg);
			finish(w, false, RETRY_MS);
		}
		cJSON_Delete(out);
		return;
	}
	cJSON_Delete(out);
	if (rc == GK_OK) {
		w->st.writes++;
		GK_INFO("Node %s: labels/annotation written", w->name);
		finish(w, true, 0);
	} else if (rc == GK_ABORTED) {
		w->st.conflicts++;
		finish(w, false, gk_kube_conflict_delay(&w->conflicts, RETRY_MS));
	} else {
		w->st.errors++;
		GK_WARN("write Node %s: %s", w->name, msg);
		finish(w, false, RETRY_MS);
	}
}

static void on_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sd_nodew *w = user;
	w->timer = 0;
	if (!w->rep || !w->dirty || w->call) {
		pending(w);
		return; /* in flight: finish() re-arms while dirty */
	}
	w->dirty = false;
	if (start(w, STEP_GET, NULL) != GK_OK) {
		w->st.errors++;
		w->dirty = true;
		arm(w, RETRY_MS);
	}
	pending(w);
}

int gk_sd_nodew_new(gk_sd_nodew **out, gk_loop *loop, gk_kube_client *kc, const char *node_name,
		    int debounce_ms, gk_err *err)
{
	gk_sd_nodew *w = calloc(1, sizeof(*w));
	if (w)
		w->name = strdup(node_name);
	if (!w || !w->name) {
		free(w);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	w->loop = loop;
	w->debounce_ms = debounce_ms > 0 ? debounce_ms : 100;
	int rc = gk_kube_mux_new(&w->mux, kc, err);
	if (rc == GK_OK && (rc = gk_kube_mux_attach(w->mux, loop, err)) != GK_OK)
		gk_kube_mux_free(w->mux);
	if (rc != GK_OK) {
		free(w->name);
		free(w);
		return rc;
	}
	*out = w;
	return GK_OK;
}

void gk_sd_nodew_free(gk_sd_nodew *w)
{
	if (!w)
		return;
	if (w->call)
		gk_kube_call_cancel(w->call);
	if (w->timer)
		gk_loop_cancel(w->loop, w->timer);
	gk_kube_mux_free(w->mux);
	if (w->rep)
		gpukmm__node_report__free_unpacked(w->rep, NULL);
	free(w->name);
	free(w);
}

int gk_sd_nodew_report(gk_sd_nodew *w, const Gpukmm__NodeReport *in, gk_err *err)
{
	size_t len = protobuf_c_message_get_packed_size(&in->base);
	uint8_t *buf = malloc(len ? len : 1);
	Gpukmm__NodeReport *d = NULL;
	if (buf) {
		protobuf_c_message_pack(&in->base, buf);
		d = gpukmm__node_report__unpack(NULL, len, buf);
		free(buf);
	}
	if (!d)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	/* a chain in flight holds no pointer into the report (its patch body
	 * is a copy), so it can be replaced */
	if (w->rep)
		gpukmm__node_report__free_unpacked(w->rep, NULL);
	w->rep = d;
	w->st.reports++;
	w->dirty = true;
	arm(w, w->debounce_ms);
	return GK_OK;
}

const gk_sd_nodew_stats *gk_sd_nodew_stats_get(const gk_sd_nodew *w)
{
	return &w->st;
}
