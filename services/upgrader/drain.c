/* gpukmm-upgrader — the drainer (see drain.h). */
#include "drain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/log.h"

#define MAX_NODES 256
#define LIST_LIMIT 1000
#define NAME_MAX_ 254

typedef struct ent ent;

typedef struct evc {
	ent *e;
	char ns[NAME_MAX_], name[NAME_MAX_];
	gk_kube_call *call;
} evc;

struct ent {
	gk_upd *d;
	char node[NAME_MAX_];
	gk_policy_upgrade pol;
	char *selector;           /* pol.pod_selector, owned */
	int status;               /* enum gk_upg_drain_status */
	char msg[768];
	gk_kube_call *list;
	gk_timer_id timer;
	evc *evs[GK_UPD_EVICT_INFLIGHT];
	size_t n_evs;             /* evictions in flight */
	/* this round */
	int to_evict, terminating;
	bool more;                /* the list had another page */
	char refusal[320];        /* the first 429's or failure's "ns/name: message" */
};

struct gk_upd {
	gk_kube_mux *mux;
	gk_loop *loop;
	gk_upg_claim_fn gpu_claim;
	void *claim_user;
	void (*changed)(void *user);
	void *user;
	ent *ents[MAX_NODES];
	size_t n;
	gk_upd_stats st;
};

static const gk_kube_ref PODS = { "", "v1", "pods", NULL, NULL, NULL };

int gk_upd_new(gk_upd **out, gk_kube_mux *mux, gk_loop *loop, gk_upg_claim_fn gpu_claim, void *claim_user,
	       void (*changed)(void *user), void *user, gk_err *err)
{
	gk_upd *d = calloc(1, sizeof(*d));
	if (!d)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "drainer: out of memory");
	*d = (gk_upd){ .mux = mux, .loop = loop, .gpu_claim = gpu_claim, .claim_user = claim_user,
		       .changed = changed, .user = user };
	*out = d;
	return GK_OK;
}

static ent *find(gk_upd *d, const char *node, size_t *idx)
{
	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->ents[i]->node, node)) {
			if (idx)
				*idx = i;
			return d->ents[i];
		}
	return NULL;
}

static void ent_free(ent *e)
{
	if (e->list)
		gk_kube_call_cancel(e->list);
	for (size_t i = 0; i < e->n_evs; i++) {
		gk_kube_call_cancel(e->evs[i]->call);
		free(e->evs[i]);
	}
	if (e->timer)
		gk_loop_cancel(e->d->loop, e->timer);
	free(e->selector);
	free(e);
}

static void set(ent *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set(ent *e, int status, const char *fmt, ...)
{
	char m[sizeof(e->msg)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	if (status == e->status && !strcmp(m, e->msg))
		return;
	if (status != e->status && (status == GK_UPG_DRAIN_DONE || status == GK_UPG_DRAIN_FAILED))
		GK_INFO("node %s: drain %s%s%s", e->node, status == GK_UPG_DRAIN_DONE ? "done" : "failed", *m ? ": " : "",
			m);
	e->status = status;
	snprintf(e->msg, sizeof(e->msg), "%s", m);
	if (e->d->changed)
		e->d->changed(e->d->user);
}

static void start_list(ent *e);

static void on_round(gk_loop *l, gk_timer_id id, void *user)
{
	ent *e = user;
	e->timer = 0;
	start_list(e);
}

static void next_round(ent *e)
{
	if (!e->timer)
		e->timer = gk_loop_timer(e->d->loop, GK_UPD_ROUND_MS, on_round, e);
}

/* the round's message, once its evictions have answered */
static void round_done(ent *e)
{
	if (e->status == GK_UPG_DRAIN_FAILED || e->status == GK_UPG_DRAIN_DONE)
		return;
	set(e, GK_UPG_DRAIN_RUNNING, "%d pod(s) to evict, %d terminating%s%s%s", e->to_evict, e->terminating,
	    e->more ? ", more on the next page" : "", e->refusal[0] ? "; " : "", e->refusal);
	next_round(e);
}

static void on_evict(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	evc *v = user;
	ent *e = v->e;
	gk_upd *d = e->d;
	cJSON_Delete(out);
	const char *msg = st && st->message[0] ? st->message : err && err->msg[0] ? err->msg : gk_code_name(rc);
	if (rc == GK_OK) {
		d->st.evicted++;
		GK_INFO("node %s: evicted pod %s/%s", e->node, v->ns, v->name);
	} else if (rc == GK_NOT_FOUND) {
		/* gone already */
	} else {
		if (rc == GK_RESOURCE_EXHAUSTED)
			d->st.budget_refusals++;
		else
			d->st.eviction_errors++;
		if (!e->refusal[0])
			snprintf(e->refusal, sizeof(e->refusal), "%.63s/%.63s: %.180s", v->ns, v->name, msg);
		GK_DEBUG("node %s: eviction of %s/%s: %s", e->node, v->ns, v->name, msg);
	}
	for (size_t i = 0; i < e->n_evs; i++)
		if (e->evs[i] == v) {
			e->evs[i] = e->evs[--e->n_evs];
			break;
		}
	free(v);
	if (!e->n_evs)
		round_done(e);
}

static void evict(ent *e, const Gpukmm__Pod *p)
{
	gk_upd *d = e->d;
	if (e->n_evs >= GK_UPD_EVICT_INFLIGHT)
		return; /* the next round */
	evc *v = calloc(1, sizeof(*v));
	cJSON *body = cJSON_CreateObject(), *md = body ? cJSON_AddObjectToObject(body, "metadata") : NULL;
	bool ok = v && md && cJSON_AddStringToObject(body, "apiVersion", "policy/v1") &&
		  cJSON_AddStringToObject(body, "kind", "Eviction") &&
		  cJSON_AddStringToObject(md, "name", p->metadata->name) &&
		  cJSON_AddStringToObject(md, "namespace", p->metadata->namespace_);
	if (ok && e->pol.has_grace_period) {
		cJSON *o = cJSON_AddObjectToObject(body, "deleteOptions");
		ok = o && cJSON_AddNumberToObject(o, "gracePeriodSeconds", (double)e->pol.grace_period_s);
	}
	if (ok) {
		v->e = e;
		snprintf(v->ns, sizeof(v->ns), "%s", p->metadata->namespace_);
		snprintf(v->name, sizeof(v->name), "%s", p->metadata->name);
		gk_kube_ref r = PODS;
		r.ns = v->ns;
		r.name = v->name;
		r.subresource = "eviction";
		gk_err err = { 0 };
		if (gk_kube_call_create(d->mux, &r, body, NULL, on_evict, v, &v->call, &err) == GK_OK) {
			e->evs[e->n_evs++] = v;
			d->st.evictions++;
			v = NULL;
		} else if (!e->refusal[0]) {
			snprintf(e->refusal, sizeof(e->refusal), "%.63s/%.63s: %.180s", p->metadata->namespace_, p->metadata->name,
				 err.msg);
		}
	}
	free(v);
	cJSON_Delete(body);
}

static void on_list(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	ent *e = user;
	gk_upd *d = e->d;
	e->list = NULL;
	const char *msg = st && st->message[0] ? st->message : err && err->msg[0] ? err->msg : gk_code_name(rc);
	if (rc != GK_OK) {
		d->st.list_errors++;
		cJSON_Delete(out);
		if (rc == GK_INVALID_ARGUMENT && e->selector) {
			set(e, GK_UPG_DRAIN_FAILED, "the API server refused drain.podSelector \"%s\": %s", e->selector, msg);
			return;
		}
		/* not an absence: nothing is evicted on a failed read, the next round reads again */
		set(e, GK_UPG_DRAIN_RUNNING, "listing the node's pods failed: %s", msg);
		next_round(e);
		return;
	}
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(out, "items"), *it;
	const cJSON *cont = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(out, "metadata"), "continue");
	if (items && !cJSON_IsArray(items)) {
		cJSON_Delete(out);
		set(e, GK_UPG_DRAIN_RUNNING, "the pod list is malformed (items is not an array)");
		next_round(e);
		return;
	}
	e->to_evict = e->terminating = 0;
	e->more = cJSON_IsString(cont) && cont->valuestring[0];
	e->refusal[0] = 0;
	int unreadable = 0;
	char refuse[512] = "", bad[320] = "";
	/* first the verdicts: a refusal fails the node before anything is evicted */
	Gpukmm__Pod **evict_list = calloc((size_t)cJSON_GetArraySize(items) + 1, sizeof(*evict_list));
	size_t n_ev = 0;
	if (!evict_list) {
		cJSON_Delete(out);
		set(e, GK_UPG_DRAIN_RUNNING, "out of memory reading the pod list");
		next_round(e);
		return;
	}
	cJSON_ArrayForEach(it, items) {
		Gpukmm__Pod *p = NULL;
		gk_err pe;
		if (gk_kobj_pod_from_json(it, &p, &pe) != GK_OK || !p->metadata || !p->metadata->name ||
		    !p->metadata->namespace_) {
			unreadable++;
			if (!bad[0])
				snprintf(bad, sizeof(bad), "a pod is unreadable: %.280s", p ? "no name or namespace" : pe.msg);
			gk_kobj_free(p);
			continue;
		}
		char why[512];
		switch (gk_upg_pod_verdict(p, &e->pol, d->gpu_claim, d->claim_user, why, sizeof(why))) {
		case GK_UPG_POD_WAIT:
			e->terminating++;
			break;
		case GK_UPG_POD_REFUSE:
			if (!refuse[0])
				snprintf(refuse, sizeof(refuse), "%s", why);
			break;
		case GK_UPG_POD_EVICT:
			e->to_evict++;
			evict_list[n_ev++] = p;
			p = NULL;
			break;
		default:
			break;
		}
		gk_kobj_free(p);
	}
	cJSON_Delete(out);
	if (refuse[0]) {
		set(e, GK_UPG_DRAIN_FAILED, "%s", refuse);
	} else if (!e->to_evict && !e->terminating && !e->more && !unreadable) {
		set(e, GK_UPG_DRAIN_DONE, "no pod left to evict");
	} else {
		if (unreadable && !e->refusal[0])
			snprintf(e->refusal, sizeof(e->refusal), "%s", bad);
		for (size_t i = 0; i < n_ev; i++)
			evict(e, evict_list[i]);
		if (!e->n_evs)
			round_done(e);
	}
	for (size_t i = 0; i < n_ev; i++)
		gk_kobj_free(evict_list[i]);
	free(evict_list);
}

static void start_list(ent *e)
{
	gk_upd *d = e->d;
	if (e->list || e->n_evs || e->status == GK_UPG_DRAIN_DONE || e->status == GK_UPG_DRAIN_FAILED)
		return;
	char fs[NAME_MAX_ + 32];
	snprintf(fs, sizeof(fs), "spec.nodeName=%s", e->node);
	gk_kube_list_opts lo = { .field_selector = fs, .label_selector = e->selector, .limit = LIST_LIMIT };
	gk_err err = { 0 };
	if (gk_kube_call_list(d->mux, &PODS, &lo, NULL, on_list, e, &e->list, &err) != GK_OK) {
		e->list = NULL;
		set(e, GK_UPG_DRAIN_RUNNING, "cannot list the node's pods: %s", err.msg);
		next_round(e);
		return;
	}
	d->st.lists++;
}

void gk_upd_drain(gk_upd *d, const char *node, const gk_policy_upgrade *pol)
{
	ent *e = find(d, node, NULL);
	bool sel_changed = e && (!e->selector != !pol->pod_selector ||
				 (e->selector && pol->pod_selector && strcmp(e->selector, pol->pod_selector)));
	if (e && sel_changed) {
		gk_upd_stop(d, node); /* a new selector: start over */
		e = NULL;
	}
	if (!e) {
		if (d->n >= MAX_NODES || strlen(node) >= NAME_MAX_) {
			GK_WARN("node %s: not drained now (%zu nodes draining already)", node, d->n);
			return;
		}
		if (!(e = calloc(1, sizeof(*e))) || (pol->pod_selector && !(e->selector = strdup(pol->pod_selector)))) {
			free(e);
			GK_ERROR("node %s: drain: out of memory", node);
			return;
		}
		e->d = d;
		snprintf(e->node, sizeof(e->node), "%s", node);
		e->status = GK_UPG_DRAIN_RUNNING;
		snprintf(e->msg, sizeof(e->msg), "listing the node's pods");
		d->ents[d->n++] = e;
		d->st.draining = d->n;
		GK_INFO("node %s: draining (%s)", node, pol->pod_selector ? pol->pod_selector : "pods using Intel GPUs");
	}
	e->pol = *pol;
	e->pol.pod_selector = e->selector;
	if (!e->timer)
		start_list(e);
}

int gk_upd_status(gk_upd *d, const char *node, const char **msg)
{
	ent *e = find(d, node, NULL);
	if (msg)
		*msg = e && e->msg[0] ? e->msg : NULL;
	return e ? e->status : GK_UPG_DRAIN_NONE;
}

void gk_upd_stop(gk_upd *d, const char *node)
{
	size_t i;
	ent *e = find(d, node, &i);
	if (!e)
		return;
	d->ents[i] = d->ents[--d->n];
	d->st.draining = d->n;
	ent_free(e);
}

void gk_upd_stop_all(gk_upd *d)
{
	while (d->n)
		ent_free(d->ents[--d->n]);
	d->st.draining = 0;
}

void gk_upd_free(gk_upd *d)
{
	if (!d)
		return;
	gk_upd_stop_all(d);
	free(d);
}

const gk_upd_stats *gk_upd_stats_get(const gk_upd *d)
{
	return &d->st;
}
