/* kubesim — write verbs with the API server's metadata rules. */
#include "api.h"
#include "jsonutil.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "gpukmm/log.h"
#include "patch.h"
#include "ssa.h"
#include "versions.h"
#include "sched.h"
#include <time.h>

#define KS_MAX_ATTEMPTS 8
#define KS_MAX_ANNOTATIONS (256 * 1024)

static const char *group_of(const ks_rtype *t)
{
	return t->group;
}

static void set_str(cJSON *o, const char *k, const char *v)
{
	cJSON *s = cJSON_CreateString(v);
	if (!s)
		return;
	if (cJSON_HasObjectItem(o, k))
		cJSON_ReplaceItemInObjectCaseSensitive(o, k, s);
	else
		cJSON_AddItemToObject(o, k, s);
}

static void set_num(cJSON *o, const char *k, double v)
{
	cJSON *n = cJSON_CreateNumber(v);
	if (!n)
		return;
	if (cJSON_HasObjectItem(o, k))
		cJSON_ReplaceItemInObjectCaseSensitive(o, k, n);
	else
		cJSON_AddItemToObject(o, k, n);
}

static void copy_field(cJSON *dst, const cJSON *src, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, k);
	cJSON_DeleteItemFromObjectCaseSensitive(dst, k);
	if (v) {
		cJSON *c = cJSON_Duplicate(v, 1);
		if (c)
			cJSON_AddItemToObject(dst, k, c);
	}
}

static int dns_subdomain(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 253)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-' || c == '.'))
			return 0;
	}
	return isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
}

static cJSON *cause(const char *reason, const char *msg, const char *field)
{
	cJSON *c = cJSON_CreateObject();
	if (!c)
		return NULL;
	cJSON_AddStringToObject(c, "reason", reason);
	cJSON_AddStringToObject(c, "message", msg);
	cJSON_AddStringToObject(c, "field", field);
	return c;
}

static void invalid1(ks_resp *out, const ks_rtype *t, const char *name, const char *field, const char *reason,
		     const char *detail)
{
	cJSON *causes = cJSON_CreateArray();
	cJSON *c = cause(reason, detail, field);
	if (causes && c)
		cJSON_AddItemToArray(causes, c);
	else
		cJSON_Delete(c);
	ks_resp_status(out, 422, "Invalid", t->kind, name, group_of(t), causes, "%s \"%s\" is invalid: %s: %s", t->kind,
		       name, field, detail);
}

static void not_found(ks_resp *out, const ks_rtype *t, const char *name)
{
	ks_resp_status(out, 404, "NotFound", t->resource, name, group_of(t), NULL, "%s%s%s \"%s\" not found", t->resource,
		       t->group[0] ? "." : "", t->group, name);
}

static void conflict(ks_resp *out, const ks_rtype *t, const char *name)
{
	ks_resp_status(out, 409, "Conflict", t->resource, name, group_of(t), NULL,
		       "Operation cannot be fulfilled on %s%s%s \"%s\": the object has been modified; please apply your "
		       "changes to the latest version and try again",
		       t->resource, t->group[0] ? "." : "", t->group, name);
}

static int has_finalizers(const cJSON *obj)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "finalizers");
	return cJSON_GetArraySize(f) > 0;
}

static int has_finalizer(const cJSON *obj, const char *name)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "finalizers");
	const cJSON *it;
	cJSON_ArrayForEach(it, f) if (cJSON_IsString(it) && strcmp(it->valuestring, name) == 0) return 1;
	return 0;
}

static void add_finalizer(cJSON *obj, const char *name)
{
	if (has_finalizer(obj, name))
		return;
	cJSON *m = ks_meta(obj);
	cJSON *f = cJSON_GetObjectItemCaseSensitive(m, "finalizers");
	if (!cJSON_IsArray(f)) {
		cJSON_DeleteItemFromObjectCaseSensitive(m, "finalizers");
		f = cJSON_AddArrayToObject(m, "finalizers");
	}
	if (f)
		cJSON_AddItemToArray(f, cJSON_CreateString(name));
}

static double grace_of(const cJSON *obj)
{
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
							  "deletionGracePeriodSeconds");
	return cJSON_IsNumber(g) ? g->valuedouble : 0;
}

/* Everything but metadata and status: what bumps metadata.generation. */
static int spec_equal(const cJSON *a, const cJSON *b)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, a) {
		if (strcmp(it->string, "metadata") == 0 || strcmp(it->string, "status") == 0)
			continue;
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(b, it->string);
		if (!o || !ks_json_equal(it, o))
			return 0;
	}
	cJSON_ArrayForEach(it, b) {
		if (strcmp(it->string, "metadata") == 0 || strcmp(it->string, "status") == 0)
			continue;
		if (!cJSON_HasObjectItem(a, it->string))
			return 0;
	}
	return 1;
}

/* Whether an update (cur NULL: a create) sets, changes or drops ownerReferences. */
static int refs_changed(const cJSON *cur, const cJSON *n)
{
	const cJSON *a = ks_jget(ks_jget(cur, "metadata"), "ownerReferences");
	const cJSON *b = ks_jget(ks_jget(n, "metadata"), "ownerReferences");
	if (!a || !b)
		return a != b;
	return !ks_json_equal(a, b);
}

/* Equal except resourceVersion and managedFields timestamps: an update that changes
 * nothing (not even field ownership) is not a write. */
static int same_object(const cJSON *a, const cJSON *b)
{
	cJSON *x = cJSON_Duplicate(a, 1), *y = cJSON_Duplicate(b, 1);
	int eq = 0;
	if (x && y) {
		cJSON *mx = ks_meta(x), *my = ks_meta(y);
		cJSON_DeleteItemFromObjectCaseSensitive(mx, "resourceVersion");
		cJSON_DeleteItemFromObjectCaseSensitive(my, "resourceVersion");
		cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(mx, "managedFields"))
			cJSON_DeleteItemFromObjectCaseSensitive(e, "time");
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(my, "managedFields"))
			cJSON_DeleteItemFromObjectCaseSensitive(e, "time");
		eq = ks_json_equal(x, y);
	}
	cJSON_Delete(x);
	cJSON_Delete(y);
	return eq;
}

static size_t annotations_size(const cJSON *obj)
{
	size_t n = 0;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "annotations");
	const cJSON *it;
	cJSON_ArrayForEach(it, a) n += strlen(it->string) + (cJSON_IsString(it) ? strlen(it->valuestring) : 0);
	return n;
}

/* Checks on the object every write must pass (metadata shape, names). */
static int check_meta(const ks_rtype *t, const cJSON *obj, const char *name, ks_resp *out)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	static const char *maps[] = { "labels", "annotations" };
	for (int i = 0; i < 2; i++) {
		const cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, maps[i]);
		if (mp && !cJSON_IsObject(mp) && !cJSON_IsNull(mp)) {
			ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
				       "%s in version \"%s\" cannot be handled as a %s: json: cannot unmarshal into "
				       "Go struct field ObjectMeta.metadata.%s of type map[string]string",
				       t->kind, t->version, t->kind, maps[i]);
			return -1;
		}
		const cJSON *it;
		cJSON_ArrayForEach(it, mp) {
			if (!cJSON_IsString(it)) {
				ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
					       "%s in version \"%s\" cannot be handled as a %s: json: cannot unmarshal "
					       "into Go struct field ObjectMeta.metadata.%s of type string",
					       t->kind, t->version, t->kind, maps[i]);
				return -1;
			}
		}
	}
	if (annotations_size(obj) > KS_MAX_ANNOTATIONS) {
		invalid1(out, t, name, "metadata.annotations", "FieldValueTooLong",
			 "Too long: must have at most 262144 bytes");
		return -1;
	}
	return 0;
}

static void gen_name(char *buf, size_t cap, const char *prefix)
{
	static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
	unsigned char r[5];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		memset(r, 7, sizeof(r));
	char suf[6];
	for (int i = 0; i < 5; i++)
		suf[i] = alphabet[r[i] % (sizeof(alphabet) - 1)];
	suf[5] = 0;
	snprintf(buf, cap, "%.*s%s", 58, prefix, suf);
}

int ks_api_schema(const ks_rtype *t, cJSON *obj, const ks_opts *o, ks_resp *out);

/* ---- the commit step shared by create/update/patch/apply ------------------- */
typedef cJSON *(*mutate_fn)(void *ctx, const cJSON *cur, ks_resp *out);

struct write_req {
	ks_server *s;
	const ks_rtype *t;
	const char *ns, *name, *sub;
	const ks_opts *o;
	int allow_create; /* apply */
	int conflict_on_stale; /* PUT with resourceVersion: no retry */
	int is_apply;
	mutate_fn fn;
	void *ctx;
};

/* New object for an update: body semantics merged with the current object. */
static cJSON *prepare_update(const struct write_req *w, const cJSON *cur, cJSON *desired, ks_resp *out)
{
	const ks_rtype *t = w->t;
	cJSON *n;
	if (w->sub && strcmp(w->sub, "status") == 0) {
		n = cJSON_Duplicate(cur, 1);
		if (!n) {
			cJSON_Delete(desired);
			return NULL;
		}
		copy_field(n, desired, "status");
		cJSON_Delete(desired);
		return n;
	}
	n = desired;
	char av[256];
	set_str(n, "apiVersion", ks_rtype_api_version(t, av, sizeof(av)));
	set_str(n, "kind", t->kind);
	cJSON *m = ks_meta(n);
	const cJSON *cm = cJSON_GetObjectItemCaseSensitive(cur, "metadata");
	static const char *sys[] = { "name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
				     "deletionGracePeriodSeconds", "generation", "managedFields", "generateName" };
	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
		if (!(w->is_apply && strcmp(sys[i], "managedFields") == 0))
			copy_field(m, cm, sys[i]);
	if (t->has_status)
		copy_field(n, cur, "status");
	return n;
}

static cJSON *prepare_create(const struct write_req *w, cJSON *n, char *name_out, size_t cap, ks_resp *out)
{
	const ks_rtype *t = w->t;
	char av[256];
	ks_rtype_api_version(t, av, sizeof(av));
	const cJSON *bav = cJSON_GetObjectItemCaseSensitive(n, "apiVersion");
	const cJSON *bk = cJSON_GetObjectItemCaseSensitive(n, "kind");
	if (cJSON_IsString(bav) && bav->valuestring[0] && strcmp(bav->valuestring, av) != 0) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "the API version in the data (%s) does not match the expected API version (%s)",
			       bav->valuestring, av);
		goto fail;
	}
	if (cJSON_IsString(bk) && bk->valuestring[0] && strcmp(bk->valuestring, t->kind) != 0) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "the kind in the data (%s) does not match the expected kind (%s)", bk->valuestring,
			       t->kind);
		goto fail;
	}
	set_str(n, "apiVersion", av);
	set_str(n, "kind", t->kind);
	cJSON *m = ks_meta(n);
	if (!m)
		goto fail;
	const char *bns = ks_meta_str(n, "namespace");
	if (t->namespaced) {
		if (bns && *bns && w->ns && strcmp(bns, w->ns) != 0) {
			ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
				       "the namespace of the provided object does not match the namespace sent on the "
				       "request");
			goto fail;
		}
		set_str(m, "namespace", w->ns);
	} else {
		cJSON_DeleteItemFromObjectCaseSensitive(m, "namespace");
	}
	const char *name = ks_meta_str(n, "name");
	const char *gen = ks_meta_str(n, "generateName");
	char gname[256];
	if ((!name || !*name) && gen && *gen) {
		gen_name(gname, sizeof(gname), gen);
		set_str(m, "name", gname);
		name = ks_meta_str(n, "name");
	}
	if (!name || !*name) {
		invalid1(out, t, "", "metadata.name", "FieldValueRequired", "Required value: name or generateName is required");
		goto fail;
	}
	if (w->name && *w->name && strcmp(w->name, name) != 0) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "the name of the object (%s) does not match the name on the URL (%s)", name, w->name);
		goto fail;
	}
	if (!dns_subdomain(name)) {
		char d[512];
		snprintf(d, sizeof(d),
			 "Invalid value: \"%s\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
			 "characters, '-' or '.', and must start and end with an alphanumeric character",
			 name);
		invalid1(out, t, name, "metadata.name", "FieldValueInvalid", d);
		goto fail;
	}
	snprintf(name_out, cap, "%s", name);
	static const char *drop[] = { "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
				      "deletionGracePeriodSeconds", "generation", "managedFields", "selfLink" };
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (!(w->is_apply && strcmp(drop[i], "managedFields") == 0))
			cJSON_DeleteItemFromObjectCaseSensitive(m, drop[i]);
	if (t->has_status && t->is_crd)
		cJSON_DeleteItemFromObjectCaseSensitive(n, "status");
	return n;
fail:
	cJSON_Delete(n);
	return NULL;
}

static void finish_new(ks_server *s, cJSON *n)
{
	cJSON *m = ks_meta(n);
	char uid[40], ts[40];
	ks_new_uid(s, uid, sizeof(uid));
	ks_now_rfc3339(ts, sizeof(ts));
	set_str(m, "uid", uid);
	set_str(m, "creationTimestamp", ts);
	set_num(m, "generation", 1);
}

static void do_write(struct write_req *w, ks_resp *out)
{
	ks_server *s = w->s;
	const ks_rtype *t = w->t;
	const char *ns = t->namespaced ? w->ns : "";
	for (int attempt = 0; attempt < KS_MAX_ATTEMPTS; attempt++) {
		pthread_mutex_lock(&s->mu);
		ks_item *it = w->name ? ks_store_get(&s->store, t->group, t->resource, ns, w->name) : NULL;
		cJSON *cur = it ? cJSON_Duplicate(it->obj, 1) : NULL;
		int existed = it != NULL;
		pthread_mutex_unlock(&s->mu);
		if (existed && (!cur || ks_conv(cur, t->group, t->resource, t->version))) {
			cJSON_Delete(cur); /* stored in another version: the caller sees its own */
			ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
			return;
		}
		uint64_t cur_rv = cur ? ks_obj_rv(cur) : 0;
		if (!cur && w->name && !w->allow_create) {
			not_found(out, t, w->name);
			return;
		}
		if (!cur && t->is_crd) {
			pthread_mutex_lock(&s->mu);
			int terminating = ks_crd_terminating(s, t);
			pthread_mutex_unlock(&s->mu);
			if (terminating) {
				ks_resp_status(out, 405, "MethodNotAllowed", t->resource, NULL, t->group, NULL,
					       "create not allowed while custom resource definition is terminating");
				return;
			}
		}
		cJSON *desired = w->fn(w->ctx, cur, out);
		if (!desired) {
			cJSON_Delete(cur);
			return;
		}
		char name[256];
		cJSON *n;
		if (cur) {
			n = prepare_update(w, cur, desired, out);
			snprintf(name, sizeof(name), "%s", w->name);
		} else {
			n = prepare_create(w, desired, name, sizeof(name), out);
		}
		if (!n) {
			if (!out->body)
				ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
			cJSON_Delete(cur);
			return;
		}
		if (check_meta(t, n, name, out) || ks_api_schema(t, n, w->o, out)) {
			cJSON_Delete(n);
			cJSON_Delete(cur);
			return;
		}
		if (strcmp(t->resource, "customresourcedefinitions") == 0 && strcmp(t->group, "apiextensions.k8s.io") == 0) {
			gk_err e = { 0 };
			if (ks_crd_check(n, &e)) {
				invalid1(out, t, name, "spec", "FieldValueInvalid", e.msg);
				cJSON_Delete(n);
				cJSON_Delete(cur);
				return;
			}
		}
		if (cur) {
			const cJSON *dt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cur, "metadata"),
									   "deletionTimestamp");
			const cJSON *nf = cJSON_GetObjectItemCaseSensitive(ks_meta(n), "finalizers");
			const cJSON *f;
			cJSON_ArrayForEach(f, nf) {
				if (dt && cJSON_IsString(f) && !has_finalizer(cur, f->valuestring)) {
					invalid1(out, t, name, "metadata.finalizers", "FieldValueForbidden",
						 "Forbidden: no new finalizers can be added if the object is being deleted");
					cJSON_Delete(n);
					cJSON_Delete(cur);
					return;
				}
			}
			if (!spec_equal(cur, n)) {
				const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cur, "metadata"),
										  "generation");
				set_num(ks_meta(n), "generation", (cJSON_IsNumber(g) ? g->valuedouble : 0) + 1);
			}
		} else {
			finish_new(s, n);
		}
		ks_ssa_track(cur, n, w->o->manager, w->sub, w->is_apply, t);
		if (ks_admit(s, t, w->sub, cur ? "UPDATE" : "CREATE", ns, name, &n, cur, w->o, out)) {
			cJSON_Delete(n);
			cJSON_Delete(cur);
			return;
		}
		pthread_mutex_lock(&s->mu);
		it = ks_store_get(&s->store, t->group, t->resource, ns, name);
		if ((it ? ks_obj_rv(it->obj) : 0) != cur_rv || (!cur && it)) {
			int was_create = !cur;
			pthread_mutex_unlock(&s->mu);
			cJSON_Delete(n);
			cJSON_Delete(cur);
			if (was_create && !w->allow_create) {
				ks_resp_status(out, 409, "AlreadyExists", t->resource, name, t->group, NULL,
					       "%s%s%s \"%s\" already exists", t->resource, t->group[0] ? "." : "", t->group,
					       name);
				return;
			}
			if (w->conflict_on_stale) {
				conflict(out, t, name);
				return;
			}
			continue;
		}
		if (cur && same_object(cur, n)) {
			pthread_mutex_unlock(&s->mu);
			cJSON_Delete(n);
			ks_resp_json(out, 200, cur);
			return;
		}
		if (w->o->dry_run) {
			pthread_mutex_unlock(&s->mu);
			cJSON_Delete(cur);
			ks_resp_json(out, cur ? 200 : 201, n);
			return;
		}
		int is_crd = strcmp(t->resource, "customresourcedefinitions") == 0 &&
			     strcmp(t->group, "apiextensions.k8s.io") == 0;
		if (is_crd) {
			gk_err e = { 0 };
			if (ks_crd_install(s, n, &e)) {
				pthread_mutex_unlock(&s->mu);
				invalid1(out, t, name, "spec", "FieldValueInvalid", e.msg);
				cJSON_Delete(n);
				cJSON_Delete(cur);
				return;
			}
		}
		const cJSON *dt = cJSON_GetObjectItemCaseSensitive(ks_meta(n), "deletionTimestamp");
		/* ShouldDeleteDuringUpdate: the last finalizer removed once the grace period is over */
		int gone = dt && !has_finalizers(n) && cur && has_finalizers(cur) && grace_of(n) == 0;
		/* the collector scans every object: run it only when this write can change what
		 * it decides (owners, a deletion), as the real one reacts to such events only */
		int gc = gone || dt || refs_changed(cur, n);
		cJSON *reply = cJSON_Duplicate(n, 1);
		const ks_rtype *st = ks_registry_find_gr(&s->reg, t->group, t->resource);
		int rc = st && st != t && ks_conv(n, t->group, t->resource, st->version) ? GK_RESOURCE_EXHAUSTED : 0;
		if (rc)
			cJSON_Delete(n);
		else
			rc = ks_store_put(&s->store, t->group, t->resource, ns, name, n);
		if (rc == 0 && gone) {
			ks_store_remove(&s->store, t->group, t->resource, ns, name);
			if (is_crd)
				ks_crd_uninstall(s, reply);
		}
		if (rc == 0 && reply) {
			/* the reply carries the RV the store handed out */
			ks_item *ni = gone ? NULL : ks_store_get(&s->store, t->group, t->resource, ns, name);
			if (ni)
				set_str(ks_meta(reply), "resourceVersion", ks_meta_str(ni->obj, "resourceVersion"));
		}
		s->dirty = 1;
		if (gc)
			ks_gc_run(s);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->mu);
		cJSON_Delete(cur);
		if (rc) {
			cJSON_Delete(reply);
			ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "store: out of memory");
			return;
		}
		ks_resp_json(out, existed ? 200 : 201, reply);
		return;
	}
	conflict(out, t, w->name ? w->name : "");
}

/* ---- create -------------------------------------------------------------- */
static cJSON *create_fn(void *ctx, const cJSON *cur, ks_resp *out)
{
	cJSON *body = ctx;
	(void)cur;
	cJSON *d = cJSON_Duplicate(body, 1);
	if (!d)
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
	return d;
}

void ks_api_create(ks_server *s, const ks_rtype *t, const char *ns, cJSON *body, const ks_opts *o, ks_resp *out)
{
	if (!cJSON_IsObject(body)) {
		cJSON_Delete(body);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "the request body must be a JSON object");
		return;
	}
	if (t->namespaced) {
		pthread_mutex_lock(&s->mu);
		ks_item *nsi = ks_store_get(&s->store, "", "namespaces", "", ns);
		int terminating = nsi && cJSON_GetObjectItemCaseSensitive(ks_meta(nsi->obj), "deletionTimestamp");
		pthread_mutex_unlock(&s->mu);
		if (!nsi) {
			ks_resp_status(out, 404, "NotFound", "namespaces", ns, "", NULL, "namespaces \"%s\" not found", ns);
			cJSON_Delete(body);
			return;
		}
		if (terminating) {
			ks_resp_status(out, 403, "Forbidden", t->resource, ks_meta_str(body, "name"), t->group, NULL,
				       "%s \"%s\" is forbidden: unable to create new content in namespace %s because it "
				       "is being terminated",
				       t->resource, ks_meta_str(body, "name") ? ks_meta_str(body, "name") : "", ns);
			cJSON_Delete(body);
			return;
		}
	}
	struct write_req w = { .s = s, .t = t, .ns = ns, .name = NULL, .sub = NULL, .o = o, .fn = create_fn, .ctx = body };
	do_write(&w, out);
	cJSON_Delete(body);
}

/* ---- update (PUT) -------------------------------------------------------- */
struct update_ctx {
	cJSON *body;
	const ks_rtype *t;
	const char *name;
};

static cJSON *update_fn(void *ctx, const cJSON *cur, ks_resp *out)
{
	struct update_ctx *u = ctx;
	const char *brv = ks_meta_str(u->body, "resourceVersion");
	if (brv && *brv && strtoull(brv, NULL, 10) != ks_obj_rv(cur)) {
		conflict(out, u->t, u->name);
		return NULL;
	}
	const char *bname = ks_meta_str(u->body, "name");
	if (bname && strcmp(bname, u->name) != 0) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "the name of the object (%s) does not match the name on the URL (%s)", bname, u->name);
		return NULL;
	}
	cJSON *d = cJSON_Duplicate(u->body, 1);
	if (!d)
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
	return d;
}

void ks_api_update(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const char *sub, cJSON *body,
		   const ks_opts *o, ks_resp *out)
{
	if (!cJSON_IsObject(body)) {
		cJSON_Delete(body);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "the request body must be a JSON object");
		return;
	}
	struct update_ctx u = { body, t, name };
	const char *brv = ks_meta_str(body, "resourceVersion");
	struct write_req w = { .s = s, .t = t, .ns = ns, .name = name, .sub = sub, .o = o, .fn = update_fn, .ctx = &u,
			       .conflict_on_stale = brv && *brv };
	do_write(&w, out);
	cJSON_Delete(body);
}

/* ---- patch --------------------------------------------------------------- */
struct patch_ctx {
	const char *type;
	const cJSON *patch;
	const ks_rtype *t;
	const char *name;
	const ks_opts *o;
	const char *sub;
};

static cJSON *patch_fn(void *ctx, const cJSON *cur, ks_resp *out)
{
	struct patch_ctx *p = ctx;
	gk_err e = { 0 };
	cJSON *r;
	if (strcmp(p->type, "apply") == 0)
		return ks_ssa_apply(cur, p->patch, p->o->manager, p->sub, p->o->force, p->t, p->name, out);
	cJSON *base = cJSON_Duplicate(cur, 1);
	if (!base) {
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return NULL;
	}
	if (strcmp(p->type, "merge") == 0)
		r = ks_merge_patch(base, p->patch, &e);
	else if (strcmp(p->type, "json") == 0)
		r = ks_json_patch(base, p->patch, &e);
	else
		r = ks_strategic_merge_patch(p->t->kind, base, p->patch, &e);
	if (!r) {
		ks_resp_status(out, e.code == GK_RESOURCE_EXHAUSTED ? 500 : (strcmp(p->type, "json") == 0 ? 422 : 400),
			       e.code == GK_RESOURCE_EXHAUSTED ? "InternalError" : (strcmp(p->type, "json") == 0 ? "Invalid" : "BadRequest"),
			       NULL, NULL, NULL, NULL, "%s", e.msg);
		return NULL;
	}
	if (!cJSON_IsObject(r)) {
		cJSON_Delete(r);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "the patch result is not an object");
		return NULL;
	}
	const char *prv = ks_meta_str(r, "resourceVersion");
	if (prv && *prv && strtoull(prv, NULL, 10) != ks_obj_rv(cur)) {
		cJSON_Delete(r);
		conflict(out, p->t, p->name);
		return NULL;
	}
	return r;
}

void ks_api_patch(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const char *sub,
		  const char *patch_type, cJSON *patch, const ks_opts *o, ks_resp *out)
{
	if (strcmp(patch_type, "apply") == 0 && (!o->manager || !*o->manager)) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for "
			       "apply patch");
		cJSON_Delete(patch);
		return;
	}
	if (strcmp(patch_type, "json") != 0 && !cJSON_IsObject(patch)) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "the patch must be a JSON object");
		cJSON_Delete(patch);
		return;
	}
	struct patch_ctx p = { patch_type, patch, t, name, o, sub };
	struct write_req w = { .s = s, .t = t, .ns = ns, .name = name, .sub = sub, .o = o, .fn = patch_fn, .ctx = &p,
			       .allow_create = strcmp(patch_type, "apply") == 0 && !sub,
			       .is_apply = strcmp(patch_type, "apply") == 0 };
	const char *prv = cJSON_IsObject(patch) ? ks_meta_str(patch, "resourceVersion") : NULL;
	w.conflict_on_stale = prv && *prv;
	if (w.allow_create && t->namespaced) {
		pthread_mutex_lock(&s->mu);
		int nsok = ks_store_get(&s->store, "", "namespaces", "", ns) != NULL;
		pthread_mutex_unlock(&s->mu);
		if (!nsok) {
			ks_resp_status(out, 404, "NotFound", "namespaces", ns, "", NULL, "namespaces \"%s\" not found", ns);
			cJSON_Delete(patch);
			return;
		}
	}
	do_write(&w, out);
	cJSON_Delete(patch);
}

/* ---- delete -------------------------------------------------------------- */
/* The pod strategy's CheckGracefulDelete: the requested period, else the pod's
 * terminationGracePeriodSeconds (30 when unset); 0 for a pod not bound to a node or
 * already terminated. */
static long pod_grace(const cJSON *pod, long requested)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	const cJSON *tg = cJSON_GetObjectItemCaseSensitive(spec, "terminationGracePeriodSeconds");
	long period = requested >= 0 ? requested : cJSON_IsNumber(tg) ? (long)tg->valuedouble : 30;
	const cJSON *node = cJSON_GetObjectItemCaseSensitive(spec, "nodeName");
	const cJSON *ph = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "status"), "phase");
	if (!cJSON_IsString(node) || !node->valuestring[0])
		period = 0;
	if (cJSON_IsString(ph) && (strcmp(ph->valuestring, "Succeeded") == 0 || strcmp(ph->valuestring, "Failed") == 0))
		period = 0;
	return period < 0 ? 0 : period;
}

static void deletion_at(cJSON *m, time_t when, long period)
{
	char ts[40];
	struct tm tm;
	gmtime_r(&when, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	set_str(m, "deletionTimestamp", ts);
	set_num(m, "deletionGracePeriodSeconds", (double)period);
}

int ks_api_delete_locked(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const char *propagation)
{
	return ks_api_delete_grace_locked(s, t, ns, name, propagation, -1);
}

int ks_api_delete_grace_locked(ks_server *s, const ks_rtype *t, const char *ns, const char *name,
			       const char *propagation, long grace)
{
	ks_item *it = ks_store_get(&s->store, t->group, t->resource, ns, name);
	if (!it)
		return 1;
	int is_pod = !t->group[0] && strcmp(t->resource, "pods") == 0;
	const cJSON *dt0 = cJSON_GetObjectItemCaseSensitive(ks_meta(it->obj), "deletionTimestamp");
	if (is_pod && dt0 && grace_of(it->obj) > 0) {
		/* a graceful deletion is pending: it may only be shortened */
		double g0 = grace_of(it->obj);
		if (grace < 0 || grace >= g0)
			return 0;
		if (grace == 0 && !has_finalizers(it->obj)) {
			ks_store_remove(&s->store, t->group, t->resource, ns, name);
			s->dirty = 1;
			return 1;
		}
		cJSON *n = cJSON_Duplicate(it->obj, 1);
		if (!n)
			return 0;
		time_t end = (time_t)ks_rfc3339_parse(dt0->valuestring) - (time_t)g0 + grace;
		deletion_at(ks_meta(n), end, grace);
		ks_store_put(&s->store, t->group, t->resource, ns, name, n);
		s->dirty = 1;
		return 0;
	}
	long period = is_pod && !dt0 ? pod_grace(it->obj, grace) : 0;
	cJSON *n = cJSON_Duplicate(it->obj, 1);
	if (!n)
		return 0;
	int is_ns = strcmp(t->resource, "namespaces") == 0 && !t->group[0];
	if (propagation && strcmp(propagation, "Orphan") == 0)
		add_finalizer(n, "orphan");
	else if (propagation && strcmp(propagation, "Foreground") == 0)
		add_finalizer(n, "foregroundDeletion");
	cJSON *m = ks_meta(n);
	int is_crd_obj = strcmp(t->resource, "customresourcedefinitions") == 0 && strcmp(t->group, "apiextensions.k8s.io") == 0;
	if (is_crd_obj && !dt0) {
		/* a CRD goes through its cleanup finalizer: its custom resources first (finalize.c) */
		ks_crd_mark_deleted(n);
		deletion_at(m, time(NULL), 0);
		ks_store_put(&s->store, t->group, t->resource, ns, name, n);
		s->dirty = 1;
		return 0;
	}
	if (period > 0) {
		/* graceful: the kubelet (kubelet.c) stops the pod and makes the final delete */
		deletion_at(m, time(NULL) + period, period);
		ks_store_put(&s->store, t->group, t->resource, ns, name, n);
		s->dirty = 1;
		return 0;
	}
	if (!has_finalizers(n) && !is_ns) {
		cJSON_Delete(n);
		int is_crd = strcmp(t->resource, "customresourcedefinitions") == 0;
		cJSON *copy = is_crd ? cJSON_Duplicate(it->obj, 1) : NULL;
		ks_store_remove(&s->store, t->group, t->resource, ns, name);
		if (copy) {
			ks_crd_uninstall(s, copy);
			cJSON_Delete(copy);
		}
		s->dirty = 1;
		return 1;
	}
	if (!cJSON_GetObjectItemCaseSensitive(m, "deletionTimestamp")) {
		char ts[40];
		ks_now_rfc3339(ts, sizeof(ts));
		set_str(m, "deletionTimestamp", ts);
		set_num(m, "deletionGracePeriodSeconds", 0);
		if (is_ns) {
			cJSON *st = cJSON_GetObjectItemCaseSensitive(n, "status");
			if (!cJSON_IsObject(st)) {
				cJSON_DeleteItemFromObjectCaseSensitive(n, "status");
				st = cJSON_AddObjectToObject(n, "status");
			}
			if (st)
				set_str(st, "phase", "Terminating");
		}
	} else if (ks_json_equal(n, it->obj)) {
		cJSON_Delete(n);
		return 0;
	}
	ks_store_put(&s->store, t->group, t->resource, ns, name, n);
	s->dirty = 1;
	return 0;
}

void ks_api_delete(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const cJSON *delopts,
		   const ks_opts *o, ks_resp *out)
{
	ns = t->namespaced ? ns : "";
	const cJSON *pre = cJSON_GetObjectItemCaseSensitive(delopts, "preconditions");
	const cJSON *puid = cJSON_GetObjectItemCaseSensitive(pre, "uid");
	const cJSON *prv = cJSON_GetObjectItemCaseSensitive(pre, "resourceVersion");
	const cJSON *pp = cJSON_GetObjectItemCaseSensitive(delopts, "propagationPolicy");
	const cJSON *orphan = cJSON_GetObjectItemCaseSensitive(delopts, "orphanDependents");
	const char *prop = o->propagation;
	if (cJSON_IsString(pp))
		prop = pp->valuestring;
	else if (cJSON_IsTrue(orphan))
		prop = "Orphan";
	const cJSON *gps = cJSON_GetObjectItemCaseSensitive(delopts, "gracePeriodSeconds");
	long grace = cJSON_IsNumber(gps) ? (long)gps->valuedouble : o->grace;
	if (prop && strcmp(prop, "Orphan") && strcmp(prop, "Foreground") && strcmp(prop, "Background")) {
		ks_resp_status(out, 422, "Invalid", NULL, NULL, NULL, NULL,
			       "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"%s\": "
			       "supported values: \"Foreground\", \"Background\", \"Orphan\"",
			       prop);
		return;
	}
	pthread_mutex_lock(&s->mu);
	ks_item *it = ks_store_get(&s->store, t->group, t->resource, ns, name);
	cJSON *cur = it ? cJSON_Duplicate(it->obj, 1) : NULL;
	pthread_mutex_unlock(&s->mu);
	if (!it) {
		not_found(out, t, name);
		return;
	}
	if (!cur || ks_conv(cur, t->group, t->resource, t->version)) {
		cJSON_Delete(cur);
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return;
	}
	const char *uid = ks_meta_str(cur, "uid");
	if (cJSON_IsString(puid) && (!uid || strcmp(uid, puid->valuestring) != 0)) {
		ks_resp_status(out, 409, "Conflict", t->resource, name, t->group, NULL,
			       "Operation cannot be fulfilled on %s \"%s\": Precondition failed: UID in precondition: %s, "
			       "UID in object meta: %s",
			       t->resource, name, puid->valuestring, uid ? uid : "");
		cJSON_Delete(cur);
		return;
	}
	if (cJSON_IsString(prv) && strtoull(prv->valuestring, NULL, 10) != ks_obj_rv(cur)) {
		ks_resp_status(out, 409, "Conflict", t->resource, name, t->group, NULL,
			       "Operation cannot be fulfilled on %s \"%s\": Precondition failed: ResourceVersion in "
			       "precondition: %s, ResourceVersion in object meta: %" PRIu64,
			       t->resource, name, prv->valuestring, ks_obj_rv(cur));
		cJSON_Delete(cur);
		return;
	}
	cJSON *tmp = cJSON_Duplicate(cur, 1);
	if (!tmp || ks_admit(s, t, NULL, "DELETE", ns, name, &tmp, cur, o, out)) {
		cJSON_Delete(tmp);
		cJSON_Delete(cur);
		if (!out->body)
			ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return;
	}
	cJSON_Delete(tmp);
	if (o->dry_run) {
		ks_resp_json(out, 200, cur);
		return;
	}
	pthread_mutex_lock(&s->mu);
	int removed = ks_api_delete_grace_locked(s, t, ns, name, prop, grace);
	ks_item *after = removed ? NULL : ks_store_get(&s->store, t->group, t->resource, ns, name);
	cJSON *reply = after ? cJSON_Duplicate(after->obj, 1) : NULL;
	ks_gc_run(s);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	if (reply) {
		cJSON_Delete(cur);
		/* a graceful deletion answers 200 with the object, one deferred by finalizers 202 */
		int graceful = grace_of(reply) > 0;
		if (ks_conv(reply, t->group, t->resource, t->version)) {
			cJSON_Delete(reply);
			reply = NULL;
		}
		ks_resp_json(out, graceful ? 200 : 202, reply);
		return;
	}
	ks_resp_json(out, 200, cur);
}
