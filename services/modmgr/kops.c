/* gpukmm-modmgr — ops over lib/kube + lib/policy (see kops.h). */
#include "kops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "gpukmm/policy.h"

struct gk_mm_kops {
	gk_kube_config cfg;
	gk_kube_client *kc;
	gk_kube_mux *mux;        /* async Event writes (attached) */
	uint64_t *ev_written, *ev_failed;
	char *ns, *sa;
	gk_policy_opts popts;
};

static gk_kube_ref module_ref(const gk_mm_kops *k, const char *name)
{
	return (gk_kube_ref){ .group = "kmm.sigs.x-k8s.io", .version = "v1beta1", .resource = "modules",
			      .ns = k->ns, .name = name };
}

/* The API's own words when it sent a Status, else lib/kube's message. */
static int api_err(int rc, const gk_kube_status *st, gk_err *err)
{
	if (st->message[0])
		return gk_err_set(err, rc, "%s", st->message);
	return rc;
}

static int module_out(cJSON *obj, Gpukmm__Module **out, gk_err *err)
{
	int rc = GK_OK;
	if (out) {
		*out = NULL;
		/* a DELETE that finished at once answers with a Status, not the object */
		const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
		if (obj && cJSON_IsString(kind) && strcmp(kind->valuestring, "Module") == 0)
			rc = gk_kobj_module_from_json(obj, out, err);
	}
	cJSON_Delete(obj);
	return rc;
}

int gk_mm_kops_new(gk_mm_kops **out, const char *kubeconfig, const char *ns, const char *sa,
		   double qps, gk_err *err)
{
	*out = NULL;
	gk_mm_kops *k = calloc(1, sizeof(*k));
	if (!k)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	k->ns = strdup(ns ? ns : GK_POLICY_DEFAULT_NAMESPACE);
	k->sa = strdup(sa ? sa : GK_POLICY_DEFAULT_SA);
	if (!k->ns || !k->sa) {
		gk_mm_kops_free(k);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	k->popts.namespace_ = k->ns;
	k->popts.service_account = k->sa;
	int rc = gk_kube_config_load(&k->cfg, kubeconfig, err);
	if (rc == GK_OK) {
		/* writes are few (one per real change); reads come from the watcher */
		gk_kube_opts ko = { .qps = qps ? qps : 50, .burst = 100, .timeout_ms = 15000,
				    .user_agent = "gpukmm-modmgr" };
		rc = gk_kube_client_new(&k->kc, &k->cfg, &ko, err);
	}
	if (rc) {
		gk_mm_kops_free(k);
		return rc;
	}
	*out = k;
	return GK_OK;
}

void gk_mm_kops_free(gk_mm_kops *k)
{
	if (!k)
		return;
	gk_kube_mux_free(k->mux); /* Event writes still in flight are dropped */
	gk_kube_client_free(k->kc);
	gk_kube_config_free(&k->cfg);
	free(k->ns);
	free(k->sa);
	free(k);
}

/* The desired Module of a policy (defaulted copy, rendered by lib/policy). */
static int desired(gk_mm_kops *k, const Gpukmm__ClusterPolicy *cp, Gpukmm__Module **out, gk_err *err)
{
	*out = NULL;
	Gpukmm__ClusterPolicy *c = (Gpukmm__ClusterPolicy *)gk_mmv_clone(&cp->base);
	if (!c)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	int rc = GK_OK;
	if (gk_policy_default(c) < 0)
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	else
		rc = gk_policy_render_module(c, &k->popts, out, err);
	protobuf_c_message_free_unpacked(&c->base, NULL);
	return rc;
}

static int op_diff(void *user, const Gpukmm__ClusterPolicy *cp, const Gpukmm__Module *have, char **patch,
		   gk_err *err)
{
	gk_mm_kops *k = user;
	*patch = NULL;
	Gpukmm__Module *want;
	int rc = desired(k, cp, &want, err);
	if (rc)
		return rc;
	cJSON *p = NULL;
	rc = gk_policy_module_diff(have, want, &p, err);
	gk_kobj_free(want);
	if (rc == GK_OK && p) {
		*patch = cJSON_PrintUnformatted(p);
		if (!*patch)
			rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	cJSON_Delete(p);
	return rc;
}

static int op_render(void *user, const Gpukmm__ClusterPolicy *cp, cJSON **obj, gk_err *err)
{
	gk_mm_kops *k = user;
	*obj = NULL;
	Gpukmm__Module *want;
	int rc = desired(k, cp, &want, err);
	if (rc)
		return rc;
	*obj = gk_policy_module_to_json(want);
	gk_kobj_free(want);
	return *obj ? GK_OK : gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
}

static int op_create(void *user, const cJSON *obj, Gpukmm__Module **out, gk_err *err)
{
	gk_mm_kops *k = user;
	gk_kube_ref r = module_ref(k, NULL);
	gk_kube_status st = { 0 };
	cJSON *res = NULL;
	int rc = gk_kube_create(k->kc, &r, obj, &res, &st, err);
	if (rc)
		return api_err(rc, &st, err);
	return module_out(res, out, err);
}

static int op_patch(void *user, const char *name, const char *patch, Gpukmm__Module **out, gk_err *err)
{
	gk_mm_kops *k = user;
	gk_kube_ref r = module_ref(k, name);
	gk_kube_status st = { 0 };
	cJSON *res = NULL;
	int rc = gk_kube_patch(k->kc, &r, GK_PATCH_MERGE, patch, NULL, false, &res, &st, err);
	if (rc)
		return api_err(rc, &st, err);
	return module_out(res, out, err);
}

static int op_del(void *user, const char *name, const char *uid, Gpukmm__Module **out, gk_err *err)
{
	gk_mm_kops *k = user;
	gk_kube_ref r = module_ref(k, name);
	gk_kube_status st = { 0 };
	gk_kube_delete_opts d = { .uid = uid, .propagation = "Background" };
	cJSON *res = NULL;
	int rc = gk_kube_delete(k->kc, &r, &d, &res, &st, err);
	if (rc)
		return api_err(rc, &st, err);
	return module_out(res, out, err);
}

static int op_get(void *user, const char *name, Gpukmm__Module **out, gk_err *err)
{
	gk_mm_kops *k = user;
	gk_kube_ref r = module_ref(k, name);
	gk_kube_status st = { 0 };
	cJSON *res = NULL;
	int rc = gk_kube_get(k->kc, &r, &res, &st, err);
	if (rc)
		return api_err(rc, &st, err);
	return module_out(res, out, err);
}

static int op_set_finalizers(void *user, const char *policy, const char *rv, char *const *fins, size_t n,
			     Gpukmm__ClusterPolicy **out, gk_err *err)
{
	gk_mm_kops *k = user;
	*out = NULL;
	/* merge patch with the resourceVersion: optimistic concurrency (409 if it moved) */
	cJSON *p = cJSON_CreateObject();
	cJSON *md = cJSON_AddObjectToObject(p, "metadata");
	cJSON *arr = cJSON_AddArrayToObject(md, "finalizers");
	bool ok = p && md && arr && (!rv || cJSON_AddStringToObject(md, "resourceVersion", rv));
	for (size_t i = 0; ok && i < n; i++) {
		cJSON *s = cJSON_CreateString(fins[i]);
		ok = s && cJSON_AddItemToArray(arr, s);
	}
	char *body = ok ? cJSON_PrintUnformatted(p) : NULL;
	cJSON_Delete(p);
	if (!body)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	gk_kube_ref r = { .group = "intel.com", .version = "v1alpha1", .resource = "clusterpolicies",
			  .name = policy };
	gk_kube_status st = { 0 };
	cJSON *res = NULL;
	int rc = gk_kube_patch(k->kc, &r, GK_PATCH_MERGE, body, NULL, false, &res, &st, err);
	free(body);
	if (rc)
		return api_err(rc, &st, err);
	rc = res ? gk_kobj_cluster_policy_from_json(res, out, err) : GK_OK;
	cJSON_Delete(res);
	return rc;
}

void gk_mm_kops_ops(gk_mm_kops *k, gk_mm_ops *ops)
{
	*ops = (gk_mm_ops){
		.user = k, .diff = op_diff, .render = op_render, .create = op_create, .patch = op_patch,
		.del = op_del, .get = op_get, .set_finalizers = op_set_finalizers,
	};
}

int gk_mm_kops_attach(gk_mm_kops *k, struct gk_loop *loop, uint64_t *written, uint64_t *failed,
		      gk_err *err)
{
	int rc = gk_kube_mux_new(&k->mux, k->kc, err);
	if (rc == GK_OK && (rc = gk_kube_mux_attach(k->mux, loop, err)) != GK_OK) {
		gk_kube_mux_free(k->mux);
		k->mux = NULL;
	}
	k->ev_written = written;
	k->ev_failed = failed;
	return rc;
}

static void count(uint64_t *c)
{
	if (c)
		(*c)++;
}

/* ---- async Event writes: create → (AlreadyExists) get → bump patch ---- */

enum ev_step { EV_CREATE, EV_GET, EV_PATCH };

typedef struct ev_ctx {
	gk_mm_kops *k;
	enum ev_step step;
	int32_t count;
	char name[GK_MM_NAME_MAX + 20];
	char policy[GK_MM_NAME_MAX];
	char ts[40];
} ev_ctx;

static void ev_done(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err);

static void ev_finish(ev_ctx *c, int rc, const char *msg)
{
	if (rc == GK_OK) {
		count(c->k->ev_written);
	} else {
		count(c->k->ev_failed);
		GK_WARN("event %s on ClusterPolicy %s: %s", c->name, c->policy, msg ? msg : gk_code_name(rc));
	}
	free(c);
}

/* Start the ctx's current step; on failure to start, finish it. */
static void ev_next(ev_ctx *c)
{
	gk_kube_ref r = { .version = "v1", .resource = "events", .ns = "default", .name = c->name };
	gk_kube_call *call = NULL;
	gk_err e = { 0 };
	int rc;
	if (c->step == EV_GET) {
		rc = gk_kube_call_get(c->k->mux, &r, NULL, ev_done, c, &call, &e);
	} else {
		char *p = gk_mm_event_bump_patch(c->count, c->ts);
		rc = p ? gk_kube_call_patch(c->k->mux, &r, GK_PATCH_MERGE, p, NULL, false, NULL, ev_done, c,
					    &call, &e)
		       : gk_err_set(&e, GK_RESOURCE_EXHAUSTED, "out of memory");
		free(p);
	}
	if (rc != GK_OK) {
		ev_finish(c, rc, e.msg);
		return;
	}
	gk_kube_call_free_on_drop(call, c);
}

static void ev_done(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	ev_ctx *c = user;
	const char *msg = st && st->message[0] ? st->message : err ? err->msg : NULL;
	switch (c->step) {
	case EV_CREATE:
		cJSON_Delete(out);
		if (rc == GK_ALREADY_EXISTS) {
			/* there from before a restart: continue its count */
			c->step = EV_GET;
			ev_next(c);
			return;
		}
		ev_finish(c, rc, msg);
		return;
	case EV_GET:
		if (rc == GK_OK) {
			const cJSON *n = cJSON_GetObjectItemCaseSensitive(out, "count");
			c->count = (cJSON_IsNumber(n) ? (int32_t)n->valuedouble : 1) + 1;
			cJSON_Delete(out);
			c->step = EV_PATCH;
			ev_next(c);
			return;
		}
		cJSON_Delete(out);
		ev_finish(c, rc, msg);
		return;
	case EV_PATCH:
		cJSON_Delete(out);
		ev_finish(c, rc, msg);
		return;
	}
}

static int event_async(gk_mm_kops *k, const char *policy, const char *uid, const gk_mm_event *ev,
		       const gk_mm_evwrite *w, const char *ts, const char *instance, gk_err *err)
{
	ev_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	c->k = k;
	c->count = w->count;
	snprintf(c->name, sizeof(c->name), "%s", w->name);
	snprintf(c->policy, sizeof(c->policy), "%s", policy);
	snprintf(c->ts, sizeof(c->ts), "%s", ts);
	if (w->op != GK_MM_EV_CREATE) {
		c->step = EV_PATCH;
		ev_next(c);
		return GK_OK;
	}
	c->step = EV_CREATE;
	cJSON *o = gk_mm_event_json("default", policy, uid, ev, w, ts, instance);
	if (!o) {
		free(c);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	gk_kube_ref r = { .version = "v1", .resource = "events", .ns = "default" };
	gk_kube_call *call = NULL;
	int rc = gk_kube_call_create(k->mux, &r, o, NULL, ev_done, c, &call, err);
	cJSON_Delete(o);
	if (rc != GK_OK) {
		free(c);
		return rc;
	}
	gk_kube_call_free_on_drop(call, c);
	return GK_OK;
}

int gk_mm_kops_event(gk_mm_kops *k, const char *policy, const char *uid, const gk_mm_event *ev,
		     const gk_mm_evwrite *w, const char *ts, const char *instance, gk_err *err)
{
	if (k->mux)
		return event_async(k, policy, uid, ev, w, ts, instance, err);
	gk_kube_ref r = { .version = "v1", .resource = "events", .ns = "default" };
	gk_kube_status st = { 0 };
	int rc;
	gk_mm_evwrite bump = *w;
	if (w->op == GK_MM_EV_CREATE) {
		cJSON *o = gk_mm_event_json("default", policy, uid, ev, w, ts, instance);
		if (!o)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		rc = gk_kube_create(k->kc, &r, o, NULL, &st, err);
		cJSON_Delete(o);
		if (rc != GK_ALREADY_EXISTS)
			return rc ? api_err(rc, &st, err) : GK_OK;
		/* there from before a restart: continue its count */
		r.name = w->name;
		cJSON *got = NULL;
		rc = gk_kube_get(k->kc, &r, &got, &st, err);
		if (rc)
			return api_err(rc, &st, err);
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(got, "count");
		bump.count = (cJSON_IsNumber(c) ? (int32_t)c->valuedouble : 1) + 1;
		cJSON_Delete(got);
	}
	r.name = w->name;
	char *p = gk_mm_event_bump_patch(bump.count, ts);
	if (!p)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	rc = gk_kube_patch(k->kc, &r, GK_PATCH_MERGE, p, NULL, false, NULL, &st, err);
	free(p);
	return rc ? api_err(rc, &st, err) : GK_OK;
}
