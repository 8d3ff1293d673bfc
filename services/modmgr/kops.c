/* gpukmm-modmgr — ops over lib/kube + lib/policy (see kops.h). */
#include "kops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/kube.h"
#include "gpukmm/kwriter.h"
#include "gpukmm/log.h"
#include "gpukmm/policy.h"
#include "gpukmm/wsub.h"

struct gk_mm_kops {
	gk_kube_conn conn;
	uint64_t *ev_written, *ev_failed;
	char *ns, *sa;
	gk_policy_opts popts;
};

static gk_kube_ref module_ref(const gk_mm_kops *k, const char *name)
{
	return (gk_kube_ref){ .group = "kmm.sigs.x-k8s.io", .version = "v1beta1", .resource = "modules",
			      .ns = k->ns, .name = name };
}

/* A Module / finalizer call in flight: its result goes to the pass. */
enum op_verb { OP_CREATE, OP_PATCH, OP_DEL, OP_GET, OP_POLICY };

typedef struct op_ctx {
	gk_mm_run *run;
	enum op_verb verb;
	bool policy;             /* the answer is a ClusterPolicy (else a Module) */
	char name[GK_MM_NAME_MAX];
} op_ctx;

static bool kind_is(const cJSON *j, const char *kind)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kind");
	return cJSON_IsString(k) && strcmp(k->valuestring, kind) == 0;
}

static void op_done(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	op_ctx *x = user;
	gk_mm_run *r = x->run;
	/* the API's own words when it sent a Status, else lib/kube's message */
	const char *msg = st && st->message[0] ? st->message : err && err->msg[0] ? err->msg : NULL;
	char why[GK_ERR_MSG_MAX];
	ProtobufCMessage *obj = NULL;
	gk_err e = { 0 };
	if (rc == GK_NOT_FOUND && !x->policy && !gk_kube_gone(rc, st, x->name)) {
		/* the safety rule: only a NotFound naming the Module says it is
		 * gone; a 404 of the path (the API not served, a proxy) does not */
		snprintf(why, sizeof(why), "the API answered 404 without naming KMM Module %.253s: not a confirmed absence (%.180s)",
			 x->name, msg ? msg : "no message");
		rc = GK_UNAVAILABLE;
		msg = why;
	} else if (rc == GK_OK) {
		if (x->policy) {
			Gpukmm__ClusterPolicy *cp = NULL;
			if (!kind_is(out, "ClusterPolicy"))
				rc = gk_err_set(&e, GK_INTERNAL, "the answer is not a ClusterPolicy");
			else
				rc = gk_kobj_cluster_policy_from_json(out, &cp, &e);
			obj = cp ? &cp->base : NULL;
		} else if (x->verb == OP_DEL && kind_is(out, "Status")) {
			/* a DELETE that finished at once answers with a Status: gone */
		} else if (!kind_is(out, "Module")) {
			rc = gk_err_set(&e, GK_INTERNAL, "the answer is not a Module");
		} else {
			Gpukmm__Module *m = NULL;
			rc = gk_kobj_module_from_json(out, &m, &e);
			obj = m ? &m->base : NULL;
		}
		if (rc != GK_OK)
			msg = e.msg;
	}
	free(x);
	cJSON_Delete(out);
	gk_mm_run_done(r, rc, obj, msg);
}

static op_ctx *op_ctx_new(gk_mm_run *r, enum op_verb verb, bool policy, const char *name, gk_err *err)
{
	op_ctx *x = calloc(1, sizeof(*x));
	if (!x) {
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		return NULL;
	}
	x->run = r;
	x->verb = verb;
	x->policy = policy;
	snprintf(x->name, sizeof(x->name), "%s", name ? name : "");
	return x;
}

/* After gk_kube_call_*: the ctx is the call's (freed if it is dropped), or freed now. */
static int op_started(int rc, gk_kube_call *call, op_ctx *x, void **handle)
{
	if (rc != GK_OK) {
		free(x);
		return rc;
	}
	gk_kube_call_free_on_drop(call, x);
	*handle = call;
	return GK_OK;
}

int gk_mm_kops_new(gk_mm_kops **out, const char *kubeconfig, const char *ns, const char *sa,
		   double qps, struct gk_loop *loop, uint64_t *ev_written, uint64_t *ev_failed,
		   gk_err *err)
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
	int rc = gk_kube_conn_open(&k->conn, kubeconfig, qps, "gpukmm-modmgr", loop, err);
	if (rc) {
		gk_mm_kops_free(k);
		return rc;
	}
	k->ev_written = ev_written;
	k->ev_failed = ev_failed;
	*out = k;
	return GK_OK;
}

void gk_mm_kops_free(gk_mm_kops *k)
{
	if (!k)
		return;
	gk_kube_conn_close(&k->conn); /* calls still in flight are dropped */
	free(k->ns);
	free(k->sa);
	free(k);
}

/* The desired Module of a policy (defaulted copy, rendered by lib/policy). */
static int desired(gk_mm_kops *k, const Gpukmm__ClusterPolicy *cp, Gpukmm__Module **out, gk_err *err)
{
	*out = NULL;
	Gpukmm__ClusterPolicy *c = (Gpukmm__ClusterPolicy *)gk_wsub_clone(&cp->base);
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

static int op_create(void *user, gk_mm_run *run, const cJSON *obj, void **handle, gk_err *err)
{
	gk_mm_kops *k = user;
	gk_kube_ref r = module_ref(k, NULL);
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(md, "name");
	op_ctx *x = op_ctx_new(run, OP_CREATE, false, cJSON_IsString(nm) ? nm->valuestring : "", err);
	if (!x)
		return GK_RESOURCE_EXHAUSTED;
	gk_kube_call *call = NULL;
	int rc = gk_kube_call_create(k->conn.mux, &r, obj, NULL, op_done, x, &call, err);
	return op_started(rc, call, x, handle);
}

static int op_patch(void *user, gk_mm_run *run, const char *name, const char *patch, void **handle,
		    gk_err *err)
{
	gk_mm_kops *k = user;
	gk_kube_ref r = module_ref(k, name);
	op_ctx *x = op_ctx_new(run, OP_PATCH, false, name, err);
	if (!x)
		return GK_RESOURCE_EXHAUSTED;
	gk_kube_call *call = NULL;
	int rc = gk_kube_call_patch(k->conn.mux, &r, GK_PATCH_MERGE, patch, NULL, false, NULL, op_done, x, &call,
				    err);
	return op_started(rc, call, x, handle);
}

static int op_del(void *user, gk_mm_run *run, const char *name, const char *uid, void **handle,
		  gk_err *err)
{
	gk_mm_kops *k = user;
	gk_kube_ref r = module_ref(k, name);
	gk_kube_delete_opts d = { .uid = uid, .propagation = "Background" };
	op_ctx *x = op_ctx_new(run, OP_DEL, false, name, err);
	if (!x)
		return GK_RESOURCE_EXHAUSTED;
	gk_kube_call *call = NULL;
	int rc = gk_kube_call_delete(k->conn.mux, &r, &d, NULL, op_done, x, &call, err);
	return op_started(rc, call, x, handle);
}

static int op_get(void *user, gk_mm_run *run, const char *name, void **handle, gk_err *err)
{
	gk_mm_kops *k = user;
	gk_kube_ref r = module_ref(k, name);
	op_ctx *x = op_ctx_new(run, OP_GET, false, name, err);
	if (!x)
		return GK_RESOURCE_EXHAUSTED;
	gk_kube_call *call = NULL;
	int rc = gk_kube_call_get(k->conn.mux, &r, NULL, op_done, x, &call, err);
	return op_started(rc, call, x, handle);
}

static int op_set_finalizers(void *user, gk_mm_run *run, const char *policy, const char *rv,
			     char *const *fins, size_t n, void **handle, gk_err *err)
{
	gk_mm_kops *k = user;
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
	op_ctx *x = body ? op_ctx_new(run, OP_POLICY, true, policy, err) : NULL;
	if (!x) {
		free(body);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	gk_kube_ref r = { .group = "intel.com", .version = "v1alpha1", .resource = "clusterpolicies",
			  .name = policy };
	gk_kube_call *call = NULL;
	int rc = gk_kube_call_patch(k->conn.mux, &r, GK_PATCH_MERGE, body, NULL, false, NULL, op_done, x, &call,
				    err);
	free(body);
	return op_started(rc, call, x, handle);
}

static int op_get_policy(void *user, gk_mm_run *run, const char *policy, void **handle, gk_err *err)
{
	gk_mm_kops *k = user;
	gk_kube_ref r = { .group = "intel.com", .version = "v1alpha1", .resource = "clusterpolicies",
			  .name = policy };
	op_ctx *x = op_ctx_new(run, OP_POLICY, true, policy, err);
	if (!x)
		return GK_RESOURCE_EXHAUSTED;
	gk_kube_call *call = NULL;
	int rc = gk_kube_call_get(k->conn.mux, &r, NULL, op_done, x, &call, err);
	return op_started(rc, call, x, handle);
}

static void op_cancel(void *user, void *handle)
{
	(void)user;
	gk_kube_call_cancel(handle); /* frees its ctx */
}

void gk_mm_kops_ops(gk_mm_kops *k, gk_mm_ops *ops)
{
	*ops = (gk_mm_ops){
		.user = k, .diff = op_diff, .render = op_render, .create = op_create, .patch = op_patch,
		.del = op_del, .get = op_get, .set_finalizers = op_set_finalizers, .get_policy = op_get_policy,
		.cancel = op_cancel,
	};
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
		rc = gk_kube_call_get(c->k->conn.mux, &r, NULL, ev_done, c, &call, &e);
	} else {
		char *p = gk_mm_event_bump_patch(c->count, c->ts);
		rc = p ? gk_kube_call_patch(c->k->conn.mux, &r, GK_PATCH_MERGE, p, NULL, false, NULL, ev_done, c,
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

int gk_mm_kops_event(gk_mm_kops *k, const char *policy, const char *uid, const gk_mm_event *ev,
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
	int rc = gk_kube_call_create(k->conn.mux, &r, o, NULL, ev_done, c, &call, err);
	cJSON_Delete(o);
	if (rc != GK_OK) {
		free(c);
		return rc;
	}
	gk_kube_call_free_on_drop(call, c);
	return GK_OK;
}
