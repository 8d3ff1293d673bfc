/* lib/kube: an asynchronous writer's bookkeeping (see kwriter.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kwriter.h"

struct gk_kw {
	gk_loop *loop;
	gk_kw_ent **e;
	size_t n, max, data_size;
	gk_kw_timer_fn fn;
	void *user;
};

int gk_kw_new(gk_kw **out, gk_loop *loop, size_t max, size_t data_size, gk_kw_timer_fn fn, void *user)
{
	*out = NULL;
	gk_kw *kw = calloc(1, sizeof(*kw));
	if (kw)
		kw->e = calloc(max ? max : 1, sizeof(*kw->e));
	if (!kw || !kw->e) {
		free(kw);
		return GK_RESOURCE_EXHAUSTED;
	}
	*kw = (gk_kw){ .loop = loop, .e = kw->e, .max = max ? max : 1, .data_size = data_size, .fn = fn, .user = user };
	*out = kw;
	return GK_OK;
}

static void ent_free(gk_kw_ent *e)
{
	if (e->call)
		gk_kube_call_cancel(e->call);
	if (e->timer)
		gk_loop_cancel(e->kw->loop, e->timer);
	free(e->data);
	free(e);
}

static void drop(gk_kw *kw, size_t i)
{
	ent_free(kw->e[i]);
	kw->e[i] = kw->e[--kw->n];
}

void gk_kw_free(gk_kw *kw)
{
	if (!kw)
		return;
	while (kw->n)
		drop(kw, 0);
	free(kw->e);
	free(kw);
}

gk_kw_ent *gk_kw_find(gk_kw *kw, const char *key)
{
	for (size_t i = 0; i < kw->n; i++)
		if (strcmp(kw->e[i]->key, key) == 0)
			return kw->e[i];
	return NULL;
}

gk_kw_ent *gk_kw_get(gk_kw *kw, const char *key, bool *created)
{
	if (created)
		*created = false;
	gk_kw_ent *e = gk_kw_find(kw, key);
	if (e)
		return e;
	if (strlen(key) >= GK_KW_KEY_MAX)
		return NULL;
	if (kw->n >= kw->max) /* make room: an idle one only loses its last error */
		for (size_t i = 0; i < kw->n; i++)
			if (!kw->e[i]->call && !kw->e[i]->timer) {
				drop(kw, i);
				break;
			}
	if (kw->n >= kw->max || !(e = calloc(1, sizeof(*e))))
		return NULL;
	if (kw->data_size && !(e->data = calloc(1, kw->data_size))) {
		free(e);
		return NULL;
	}
	e->kw = kw;
	snprintf(e->key, sizeof(e->key), "%s", key);
	kw->e[kw->n++] = e;
	if (created)
		*created = true;
	return e;
}

void gk_kw_release(gk_kw_ent *e)
{
	gk_kw *kw = e->kw;
	if (e->call || e->timer || e->err[0])
		return;
	for (size_t i = 0; i < kw->n; i++)
		if (kw->e[i] == e) {
			drop(kw, i);
			return;
		}
}

static void on_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_kw_ent *e = user;
	bool reread = e->reread_due;
	e->timer = 0;
	e->reread_due = false;
	e->kw->fn(e->kw->user, e, reread);
}

void gk_kw_after(gk_kw_ent *e, int ms, bool reread)
{
	if (e->timer)
		gk_loop_cancel(e->kw->loop, e->timer);
	e->reread_due = reread;
	e->timer = gk_loop_timer(e->kw->loop, ms, on_timer, e);
}

void gk_kw_failed(gk_kw_ent *e, const char *msg)
{
	int n = e->failures++;
	int64_t ms = (int64_t)GK_KW_RETRY_MS << (n < 6 ? n : 6);
	snprintf(e->err, sizeof(e->err), "%s", msg ? msg : "failed");
	gk_kw_after(e, ms < GK_KW_RETRY_MAX_MS ? (int)ms : GK_KW_RETRY_MAX_MS, false);
}

void gk_kw_ok(gk_kw_ent *e)
{
	e->err[0] = 0;
	e->failures = e->conflicts = 0;
}

uint64_t gk_kw_inflight(const gk_kw *kw)
{
	uint64_t n = 0;
	for (size_t i = 0; i < kw->n; i++)
		n += kw->e[i]->call || kw->e[i]->reread_due;
	return n;
}

int gk_kube_conn_open(gk_kube_conn *c, const char *kubeconfig, double qps, const char *user_agent, gk_loop *loop,
		      gk_err *err)
{
	memset(c, 0, sizeof(*c));
	int rc = gk_kube_config_load(&c->cfg, kubeconfig, err);
	if (rc == GK_OK) {
		gk_kube_opts ko = { .qps = qps ? qps : GK_KUBE_WRITER_QPS, .burst = GK_KUBE_WRITER_BURST,
				    .timeout_ms = 15000, .user_agent = user_agent };
		rc = gk_kube_client_new(&c->kc, &c->cfg, &ko, err);
	}
	if (rc == GK_OK)
		rc = gk_kube_mux_new(&c->mux, c->kc, err);
	if (rc == GK_OK)
		rc = gk_kube_mux_attach(c->mux, loop, err);
	if (rc)
		gk_kube_conn_close(c);
	return rc;
}

void gk_kube_conn_close(gk_kube_conn *c)
{
	gk_kube_mux_free(c->mux); /* calls still in flight are dropped */
	gk_kube_client_free(c->kc);
	gk_kube_config_free(&c->cfg);
	memset(c, 0, sizeof(*c));
}
