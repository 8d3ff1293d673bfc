/* gpukmm-statusd node mode: hands the node report to the controller as a
 * NodeReportRequest (nodew.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/probe.h"
#include "nodew.h"
#include "nrr.h"

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
#define TOKEN_MAX 8192

struct gk_sd_nodew {
	gk_loop *loop;
	gk_kube_mux *mux;
	gk_sd_nodew_opts o;
	char *name, *ns, *token_file;
	Gpukmm__NodeReport *rep;
	bool dirty;            /* rep not handed in yet */
	bool have_sent;
	uint64_t sent_fp;      /* the fingerprint of the last request created */
	int64_t sent_at_ms;
	gk_probe_json_form logged_form; /* the form last logged (log on change) */
	gk_kube_call *call;
	uint64_t inflight_fp;  /* the fingerprint of the report being handed in */
	int backoff_ms;
	int failing;           /* errors in a row (logged once) */
	gk_timer_id timer;
	gk_sd_nodew_stats st;
};

static void on_timer(gk_loop *l, gk_timer_id id, void *user);

static void pending(gk_sd_nodew *w)
{
	w->st.pending = w->dirty || w->call;
}

static void arm(gk_sd_nodew *w, int64_t ms)
{
	if (w->timer)
		gk_loop_cancel(w->loop, w->timer);
	w->timer = gk_loop_timer(w->loop, ms, on_timer, w);
	pending(w);
}

static void retry(gk_sd_nodew *w)
{
	w->backoff_ms = w->backoff_ms ? w->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (w->backoff_ms > BACKOFF_MAX_MS)
		w->backoff_ms = BACKOFF_MAX_MS;
	w->dirty = true;
	arm(w, w->backoff_ms);
}

static void on_created(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	gk_sd_nodew *w = user;
	uint64_t fp = w->inflight_fp;
	w->call = NULL;
	cJSON_Delete(out);
	const char *msg = st && st->message[0] ? st->message : err ? err->msg : gk_code_name(rc);
	if (rc == GK_OK) {
		w->st.writes++;
		w->st.passes++;
		w->have_sent = true;
		w->sent_fp = fp;
		w->sent_at_ms = gk_mono_ms();
		w->backoff_ms = 0;
		if (w->failing)
			GK_INFO("node report handed in again (NodeReportRequest %s/%s)", w->ns, w->name);
		w->failing = 0;
		GK_DEBUG("NodeReportRequest %s/%s created", w->ns, w->name);
		/* a newer report arrived meanwhile: its turn; else resend after a while */
		arm(w, w->dirty ? w->o.debounce_ms : w->o.resend_ms);
		return;
	}
	if (rc == GK_ALREADY_EXISTS) {
		/* the previous request is not consumed yet (no leader, or one busy):
		 * it cannot be replaced (create is all we may do), so wait */
		w->st.conflicts++;
		if (w->failing++ == 0)
			GK_INFO("NodeReportRequest %s/%s still pending: the controller has not applied the previous "
				"report yet; retrying with backoff",
				w->ns, w->name);
	} else {
		w->st.errors++;
		if (w->failing++ == 0)
			GK_WARN("create NodeReportRequest %s/%s: %s; retrying with backoff", w->ns, w->name, msg);
	}
	retry(w);
}

/* The projected token of the node pod (audience gpukmm.io/node-report), read
 * anew each time: the kubelet rotates it. */
static char *read_token(const char *path, gk_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		gk_err_set(err, GK_FAILED_PRECONDITION, "report token %s: %s", path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(TOKEN_MAX + 1);
	ssize_t n = buf ? read(fd, buf, TOKEN_MAX + 1) : -1;
	int e = errno;
	close(fd);
	if (!buf || n <= 0 || n > TOKEN_MAX) {
		free(buf);
		gk_err_set(err, GK_FAILED_PRECONDITION, "report token %s: %s", path,
			   !buf ? "out of memory" : n < 0 ? strerror(e) : n ? "larger than 8192 bytes" : "empty");
		return NULL;
	}
	buf[n] = 0;
	buf[strcspn(buf, "\r\n")] = 0;
	return buf;
}

static cJSON *request(const gk_sd_nodew *w, const char *token, const char *report)
{
	cJSON *o = cJSON_CreateObject(), *m, *s;
	if (o && cJSON_AddStringToObject(o, "apiVersion", GK_SD_NRR_GROUP "/" GK_SD_NRR_VERSION) &&
	    cJSON_AddStringToObject(o, "kind", "NodeReportRequest") && (m = cJSON_AddObjectToObject(o, "metadata")) &&
	    cJSON_AddStringToObject(m, "name", w->name) && cJSON_AddStringToObject(m, "namespace", w->ns) &&
	    (s = cJSON_AddObjectToObject(o, "spec")) && cJSON_AddStringToObject(s, "token", token) &&
	    cJSON_AddStringToObject(s, "report", report))
		return o;
	cJSON_Delete(o);
	return NULL;
}

static void hand_in(gk_sd_nodew *w)
{
	uint64_t fp = gk_probe_fingerprint(w->rep);
	if (w->have_sent && fp == w->sent_fp && gk_mono_ms() - w->sent_at_ms < w->o.resend_ms) {
		w->st.passes++; /* handed in already (a prober restart re-probes the same state) */
		arm(w, w->sent_at_ms + w->o.resend_ms - gk_mono_ms());
		return;
	}
	gk_probe_json_info info;
	char *json = gk_probe_report_json(w->rep, GK_PROBE_JSON_BUDGET, false, &info);
	gk_err err = { 0 };
	char *token = json ? read_token(w->token_file, &err) : NULL;
	cJSON *obj = token ? request(w, token, json) : NULL;
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (json && info.form != w->logged_form) {
		if (info.form != GK_PROBE_JSON_FULL)
			GK_WARN("node report summarized for the Node annotation: %s", info.reason);
		else
			GK_INFO("node report fits the Node annotation again (%zu bytes)", info.bytes);
		w->logged_form = info.form;
	}
	w->st.summarized = info.form != GK_PROBE_JSON_FULL;
	free(json);
	if (!obj) {
		w->st.errors++;
		if (w->failing++ == 0)
			GK_WARN("node report not handed in: %s; retrying with backoff", err.msg[0] ? err.msg : "out of memory");
		retry(w);
		return;
	}
	gk_kube_ref ref = { .group = GK_SD_NRR_GROUP, .version = GK_SD_NRR_VERSION, .resource = "nodereportrequests",
			    .ns = w->ns };
	int rc = gk_kube_call_create(w->mux, &ref, obj, NULL, on_created, w, &w->call, &err);
	cJSON_Delete(obj);
	if (rc != GK_OK) {
		w->call = NULL;
		w->st.errors++;
		GK_WARN("create NodeReportRequest %s/%s: %s", w->ns, w->name, err.msg);
		retry(w);
		return;
	}
	w->inflight_fp = fp;
}

static void on_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sd_nodew *w = user;
	w->timer = 0;
	if (w->call || !w->rep) {
		pending(w);
		return; /* in flight: on_created re-arms */
	}
	w->dirty = false;
	hand_in(w);
	pending(w);
}

int gk_sd_nodew_new(gk_sd_nodew **out, gk_loop *loop, gk_kube_client *kc, const gk_sd_nodew_opts *o, gk_err *err)
{
	gk_sd_nodew *w = calloc(1, sizeof(*w));
	if (w) {
		w->name = strdup(o->node_name);
		w->ns = strdup(o->ns);
		w->token_file = strdup(o->token_file);
	}
	if (!w || !w->name || !w->ns || !w->token_file) {
		if (w) {
			free(w->name);
			free(w->ns);
			free(w->token_file);
		}
		free(w);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	w->loop = loop;
	w->o = *o;
	w->o.debounce_ms = o->debounce_ms > 0 ? o->debounce_ms : 100;
	w->o.resend_ms = o->resend_ms > 0 ? o->resend_ms : GK_SD_NODEW_RESEND_MS;
	int rc = gk_kube_mux_new(&w->mux, kc, err);
	if (rc == GK_OK && (rc = gk_kube_mux_attach(w->mux, loop, err)) != GK_OK)
		gk_kube_mux_free(w->mux);
	if (rc != GK_OK) {
		free(w->name);
		free(w->ns);
		free(w->token_file);
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
	free(w->ns);
	free(w->token_file);
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
	/* the node name is ours, whatever the prober put in */
	free(d->node_name);
	if (!(d->node_name = strdup(w->name))) {
		gpukmm__node_report__free_unpacked(d, NULL);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	/* a create in flight holds no pointer into the report (its body is a copy) */
	bool same = w->rep && gk_probe_fingerprint(d) == gk_probe_fingerprint(w->rep);
	if (w->rep)
		gpukmm__node_report__free_unpacked(w->rep, NULL);
	w->rep = d;
	w->st.reports++;
	if (same) {
		/* the prober restating what we hold (every interval): whatever we are
		 * doing with it (handed in, waiting out a 409, in flight) goes on as
		 * it is — no new create, no backoff reset */
		return GK_OK;
	}
	w->dirty = true;
	w->backoff_ms = 0;
	if (!w->call)
		arm(w, w->o.debounce_ms);
	pending(w);
	return GK_OK;
}

const gk_sd_nodew_stats *gk_sd_nodew_stats_get(const gk_sd_nodew *w)
{
	return &w->st;
}
