/* The API verbs as requests (method, path with query, content type, body):
 * pure builders shared by the blocking client (client.c) and the async calls
 * on the mux (async.c), so both send exactly the same thing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void gk_kube__rq_free(gk_kube__rq *q)
{
	free(q->body);
	q->body = NULL;
	q->body_len = 0;
}

int gk_kube__path_of(const gk_kube_ref *r, char *buf, size_t cap, gk_err *err)
{
	if (gk_kube_path(buf, cap, r) < 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "invalid resource reference (%s/%s %s %s/%s)",
				  r->group ? r->group : "", r->version ? r->version : "?",
				  r->resource ? r->resource : "?", r->ns ? r->ns : "",
				  r->name ? r->name : "");
	return 0;
}

static void rq_init(gk_kube__rq *q, const char *method)
{
	memset(q, 0, sizeof *q);
	q->method = method;
}

int gk_kube__rq_get(gk_kube__rq *q, const gk_kube_ref *r, gk_err *err)
{
	rq_init(q, "GET");
	return gk_kube__path_of(r, q->path, sizeof q->path, err);
}

static int set_body(gk_kube__rq *q, const cJSON *obj, gk_err *err)
{
	q->body = cJSON_PrintUnformatted(obj);
	if (!q->body)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	q->body_len = strlen(q->body);
	q->ct = "application/json";
	return 0;
}

int gk_kube__rq_list(gk_kube__rq *q, const gk_kube_ref *r, const gk_kube_list_opts *lo, const char *cont,
		     gk_err *err)
{
	rq_init(q, "GET");
	gk_kube_ref coll = *r;
	coll.name = NULL;
	coll.subresource = NULL;
	int rc = gk_kube__path_of(&coll, q->path, sizeof q->path, err);
	if (rc)
		return rc;
	char lim[16];
	snprintf(lim, sizeof lim, "%d", lo && lo->limit > 0 ? lo->limit : 500);
	bool ok = gk_kube_query_add(q->path, sizeof q->path, "limit", lim) >= 0;
	if (ok && lo && lo->label_selector)
		ok = gk_kube_query_add(q->path, sizeof q->path, "labelSelector", lo->label_selector) >= 0;
	if (ok && lo && lo->field_selector)
		ok = gk_kube_query_add(q->path, sizeof q->path, "fieldSelector", lo->field_selector) >= 0;
	if (ok && cont)
		ok = gk_kube_query_add(q->path, sizeof q->path, "continue", cont) >= 0;
	else if (ok && lo && lo->resource_version) {
		ok = gk_kube_query_add(q->path, sizeof q->path, "resourceVersion", lo->resource_version) >= 0;
		if (ok && lo->resource_version_match)
			ok = gk_kube_query_add(q->path, sizeof q->path, "resourceVersionMatch", lo->resource_version_match) >= 0;
	}
	return ok ? 0 : gk_err_set(err, GK_INVALID_ARGUMENT, "list: query too long");
}

int gk_kube__rq_create(gk_kube__rq *q, const gk_kube_ref *r, const cJSON *obj, gk_err *err)
{
	rq_init(q, "POST");
	gk_kube_ref coll = *r;
	/* a create of a subresource (pods/NAME/eviction) posts to it; else to the collection */
	if (!r->subresource)
		coll.name = NULL;
	int rc = gk_kube__path_of(&coll, q->path, sizeof q->path, err);
	return rc ? rc : set_body(q, obj, err);
}

int gk_kube__rq_update(gk_kube__rq *q, const gk_kube_ref *r, const cJSON *obj, gk_err *err)
{
	rq_init(q, "PUT");
	if (!r->name)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "update needs a name");
	int rc = gk_kube__path_of(r, q->path, sizeof q->path, err);
	return rc ? rc : set_body(q, obj, err);
}

int gk_kube__rq_patch(gk_kube__rq *q, const gk_kube_ref *r, enum gk_kube_patch_type type,
		      const char *body, const char *field_manager, bool force, gk_err *err)
{
	rq_init(q, "PATCH");
	if (!r->name || !body)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "patch needs a name and a body");
	int rc = gk_kube__path_of(r, q->path, sizeof q->path, err);
	if (rc)
		return rc;
	switch (type) {
	case GK_PATCH_MERGE: q->ct = "application/merge-patch+json"; break;
	case GK_PATCH_JSON: q->ct = "application/json-patch+json"; break;
	case GK_PATCH_APPLY: q->ct = "application/apply-patch+yaml"; break;
	default: return gk_err_set(err, GK_INVALID_ARGUMENT, "unknown patch type %d", (int)type);
	}
	if (type == GK_PATCH_APPLY && (!field_manager || !*field_manager))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "server-side apply needs a field manager");
	if (field_manager &&
	    gk_kube_query_add(q->path, sizeof q->path, "fieldManager", field_manager) < 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "path too long");
	if (force && type == GK_PATCH_APPLY &&
	    gk_kube_query_add(q->path, sizeof q->path, "force", "true") < 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "path too long");
	q->body = strdup(body);
	if (!q->body)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	q->body_len = strlen(body);
	return 0;
}

int gk_kube__rq_delete(gk_kube__rq *q, const gk_kube_ref *r, const gk_kube_delete_opts *d,
		       gk_err *err)
{
	rq_init(q, "DELETE");
	if (!r->name)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "delete needs a name");
	int rc = gk_kube__path_of(r, q->path, sizeof q->path, err);
	if (rc || !d || (!d->uid && !d->resource_version && !d->propagation))
		return rc;
	cJSON *o = cJSON_CreateObject();
	bool ok = o && cJSON_AddStringToObject(o, "kind", "DeleteOptions") &&
		  cJSON_AddStringToObject(o, "apiVersion", "v1");
	if (ok && (d->uid || d->resource_version)) {
		cJSON *pre = cJSON_AddObjectToObject(o, "preconditions");
		ok = pre && (!d->uid || cJSON_AddStringToObject(pre, "uid", d->uid)) &&
		     (!d->resource_version ||
		      cJSON_AddStringToObject(pre, "resourceVersion", d->resource_version));
	}
	if (ok && d->propagation)
		ok = cJSON_AddStringToObject(o, "propagationPolicy", d->propagation) != NULL;
	rc = ok ? set_body(q, o, err) : gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	cJSON_Delete(o);
	return rc;
}
