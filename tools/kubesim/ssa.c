/* kubesim — managedFields and server-side apply. */
#include "ssa.h"
#include "jsonutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *sys_meta[] = { "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
				  "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink",
				  "generateName" };

static int is_sys_meta(const char *k)
{
	for (size_t i = 0; i < sizeof(sys_meta) / sizeof(sys_meta[0]); i++)
		if (strcmp(k, sys_meta[i]) == 0)
			return 1;
	return 0;
}

static void fkey(char *buf, size_t cap, const char *k)
{
	snprintf(buf, cap, "f:%s", k);
}

/* Adds leaves of v into set (a FieldsV1 node). */
static void leaves(cJSON *set, const cJSON *v)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, v) {
		char k[512];
		fkey(k, sizeof(k), it->string);
		cJSON *child = cJSON_GetObjectItemCaseSensitive(set, k);
		if (!child) {
			child = cJSON_CreateObject();
			if (!child)
				return;
			cJSON_AddItemToObject(set, k, child);
		}
		if (cJSON_IsObject(it) && it->child)
			leaves(child, it);
	}
}

cJSON *ks_ssa_fieldset(const cJSON *obj, int skip_status)
{
	cJSON *set = cJSON_CreateObject();
	if (!set)
		return NULL;
	const cJSON *it;
	cJSON_ArrayForEach(it, obj) {
		if (strcmp(it->string, "apiVersion") == 0 || strcmp(it->string, "kind") == 0)
			continue;
		if (skip_status && strcmp(it->string, "status") == 0)
			continue;
		if (strcmp(it->string, "metadata") == 0) {
			cJSON *m = cJSON_CreateObject();
			const cJSON *mi;
			cJSON_ArrayForEach(mi, it) {
				if (is_sys_meta(mi->string) || !m)
					continue;
				char k[512];
				fkey(k, sizeof(k), mi->string);
				cJSON *c = cJSON_CreateObject();
				if (!c)
					continue;
				cJSON_AddItemToObject(m, k, c);
				if (cJSON_IsObject(mi))
					leaves(c, mi);
			}
			if (m && m->child)
				cJSON_AddItemToObject(set, "f:metadata", m);
			else
				cJSON_Delete(m);
			continue;
		}
		char k[512];
		fkey(k, sizeof(k), it->string);
		cJSON *c = cJSON_CreateObject();
		if (!c)
			continue;
		cJSON_AddItemToObject(set, k, c);
		if (cJSON_IsObject(it) && it->child)
			leaves(c, it);
	}
	return set;
}

/* Does `set` contain the leaf path of `node` under prefix? Helpers on FieldsV1 trees. */
static int set_is_leaf(const cJSON *n)
{
	return !n->child;
}

/* set a - b (removes from a every leaf in b, and subtrees under leaves of b). */
static void set_subtract(cJSON *a, const cJSON *b)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, b) {
		cJSON *x = cJSON_GetObjectItemCaseSensitive(a, it->string);
		if (!x)
			continue;
		if (set_is_leaf(it)) {
			cJSON_DeleteItemFromObjectCaseSensitive(a, it->string);
			continue;
		}
		if (set_is_leaf(x))
			continue; /* a owns the whole thing, b a part: keep a's claim */
		set_subtract(x, it);
		if (!x->child)
			cJSON_DeleteItemFromObjectCaseSensitive(a, it->string);
	}
}

static void set_union(cJSON *a, const cJSON *b)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, b) {
		cJSON *x = cJSON_GetObjectItemCaseSensitive(a, it->string);
		if (!x) {
			cJSON *c = cJSON_Duplicate(it, 1);
			if (c)
				cJSON_AddItemToObject(a, it->string, c);
			continue;
		}
		if (set_is_leaf(x) && !set_is_leaf(it))
			continue;
		if (!set_is_leaf(x) && set_is_leaf(it)) {
			cJSON_ReplaceItemInObjectCaseSensitive(a, it->string, cJSON_CreateObject());
			continue;
		}
		set_union(x, it);
	}
}

/* Keeps only paths present in obj's fieldset. */
static void set_intersect(cJSON *a, const cJSON *objset)
{
	cJSON *it = a ? a->child : NULL;
	while (it) {
		cJSON *next = it->next;
		cJSON *x = cJSON_GetObjectItemCaseSensitive(objset, it->string);
		if (!x) {
			cJSON_Delete(cJSON_DetachItemViaPointer(a, it));
		} else if (!set_is_leaf(it)) {
			if (set_is_leaf(x)) {
				/* owned subtree collapsed in the object (e.g. map emptied): keep as leaf */
				while (it->child)
					cJSON_Delete(cJSON_DetachItemViaPointer(it, it->child));
			} else {
				set_intersect(it, x);
				if (!it->child)
					cJSON_Delete(cJSON_DetachItemViaPointer(a, it));
			}
		}
		it = next;
	}
}

static cJSON *new_entry(const char *manager, const char *op, const char *apiv, cJSON *fields)
{
	cJSON *e = cJSON_CreateObject();
	if (!e) {
		cJSON_Delete(fields);
		return NULL;
	}
	char ts[40];
	ks_now_rfc3339(ts, sizeof(ts));
	cJSON_AddStringToObject(e, "manager", manager);
	cJSON_AddStringToObject(e, "operation", op);
	cJSON_AddStringToObject(e, "apiVersion", apiv);
	cJSON_AddStringToObject(e, "time", ts);
	cJSON_AddStringToObject(e, "fieldsType", "FieldsV1");
	cJSON_AddItemToObject(e, "fieldsV1", fields);
	return e;
}

static cJSON *entry_find(cJSON *mf, const char *manager, const char *op)
{
	cJSON *e;
	cJSON_ArrayForEach(e, mf) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "manager");
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "operation");
		if (cJSON_IsString(m) && cJSON_IsString(o) && strcmp(m->valuestring, manager) == 0 &&
		    strcmp(o->valuestring, op) == 0)
			return e;
	}
	return NULL;
}

static void drop_empty(cJSON *mf)
{
	cJSON *e = mf ? mf->child : NULL;
	while (e) {
		cJSON *next = e->next;
		cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "fieldsV1");
		if (!f || !f->child)
			cJSON_Delete(cJSON_DetachItemViaPointer(mf, e));
		e = next;
	}
}

/* Leaf paths whose value differs between a and b (both objects), as a fieldset.
 * Objects are walked, only leaves compared: linear in the size of the documents. */
static void diff_set(cJSON *set, const cJSON *a, const cJSON *b, int top)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, b) {
		if (top && (strcmp(it->string, "apiVersion") == 0 || strcmp(it->string, "kind") == 0))
			continue;
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(a, it->string);
		int both_obj = cJSON_IsObject(it) && cJSON_IsObject(o);
		if (!both_obj && o && ks_json_equal(o, it))
			continue;
		char k[512];
		fkey(k, sizeof(k), it->string);
		cJSON *c = cJSON_CreateObject();
		if (!c)
			return;
		cJSON_AddItemToObject(set, k, c);
		if (both_obj) {
			diff_set(c, o, it, 0);
			if (!c->child)
				cJSON_DeleteItemFromObjectCaseSensitive(set, k);
		} else if (cJSON_IsObject(it) && it->child) {
			leaves(c, it);
		}
	}
}

void ks_ssa_track(const cJSON *cur, cJSON *n, const char *manager, int is_apply, const ks_rtype *t)
{
	if (is_apply)
		return;
	char apiv[256];
	ks_rtype_api_version(t, apiv, sizeof(apiv));
	cJSON *m = ks_meta(n);
	if (!m)
		return;
	cJSON *mf = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(
					    cJSON_GetObjectItemCaseSensitive(cur, "metadata"), "managedFields"),
				    1);
	if (!cJSON_IsArray(mf)) {
		cJSON_Delete(mf);
		mf = cJSON_CreateArray();
	}
	cJSON *objset = ks_ssa_fieldset(n, 0);
	cJSON *changed = cJSON_CreateObject();
	if (!mf || !objset || !changed)
		goto out;
	if (cur) {
		cJSON *a = ks_ssa_fieldset(cur, 0);
		/* compare values: build from the objects without system metadata */
		cJSON *ca = cJSON_Duplicate(cur, 1), *cb = cJSON_Duplicate(n, 1);
		if (ca && cb) {
			for (size_t i = 0; i < sizeof(sys_meta) / sizeof(sys_meta[0]); i++) {
				cJSON_DeleteItemFromObjectCaseSensitive(ks_meta(ca), sys_meta[i]);
				cJSON_DeleteItemFromObjectCaseSensitive(ks_meta(cb), sys_meta[i]);
			}
			diff_set(changed, ca, cb, 1);
		}
		cJSON_Delete(ca);
		cJSON_Delete(cb);
		cJSON_Delete(a);
	} else {
		cJSON_Delete(changed);
		changed = cJSON_Duplicate(objset, 1);
		if (!changed)
			goto out;
	}
	cJSON *e;
	cJSON_ArrayForEach(e, mf) {
		cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "fieldsV1");
		if (f) {
			set_subtract(f, changed);
			set_intersect(f, objset);
		}
	}
	if (changed->child) {
		const char *mgr = manager && *manager ? manager : "unknown";
		cJSON *mine = entry_find(mf, mgr, "Update");
		if (mine) {
			cJSON *f = cJSON_GetObjectItemCaseSensitive(mine, "fieldsV1");
			if (f)
				set_union(f, changed);
			char ts[40];
			ks_now_rfc3339(ts, sizeof(ts));
			cJSON_ReplaceItemInObjectCaseSensitive(mine, "time", cJSON_CreateString(ts));
		} else {
			cJSON *ne = new_entry(mgr, "Update", apiv, changed);
			changed = NULL;
			if (ne)
				cJSON_AddItemToArray(mf, ne);
		}
	}
	drop_empty(mf);
	cJSON_DeleteItemFromObjectCaseSensitive(m, "managedFields");
	if (cJSON_GetArraySize(mf) > 0) {
		cJSON_AddItemToObject(m, "managedFields", mf);
		mf = NULL;
	}
out:
	cJSON_Delete(mf);
	cJSON_Delete(objset);
	cJSON_Delete(changed);
}

/* ---- apply --------------------------------------------------------------- */
static void path_str(char *buf, size_t cap, const char *prefix, const char *k)
{
	snprintf(buf, cap, "%s.%s", prefix, k);
}

/* Collect conflicts: leaves of `aset` (applied fieldset) where value(applied) != value(cur)
 * and another manager's set owns it. Removes them from others when force. */
struct conflicts {
	cJSON *causes;
	char msg[1536];
	int n;
};

static int owned_by(const cJSON *set, const cJSON *path_set)
{
	/* path_set: a single-path chain; true if set contains it or a leaf prefix of it */
	const cJSON *p = path_set->child;
	const cJSON *s = set;
	while (p) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, p->string);
		if (!x)
			return 0;
		if (set_is_leaf(x) || set_is_leaf(p))
			return 1;
		s = x;
		p = p->child;
	}
	return 0;
}

static void check_conflicts(const cJSON *applied, const cJSON *cur, cJSON *chain, cJSON *chain_tail,
			    const char *prefix, cJSON *mf, const char *manager, int force, struct conflicts *c, int top)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, applied) {
		if (top && (strcmp(it->string, "apiVersion") == 0 || strcmp(it->string, "kind") == 0))
			continue;
		if (top == 2 && is_sys_meta(it->string))
			continue;
		const cJSON *cv = cJSON_GetObjectItemCaseSensitive(cur, it->string);
		char k[512], path[1024];
		fkey(k, sizeof(k), it->string);
		path_str(path, sizeof(path), prefix, it->string);
		cJSON *link = cJSON_CreateObject();
		if (!link)
			return;
		cJSON_AddItemToObject(chain_tail, k, link);
		if (cJSON_IsObject(it) && it->child && cJSON_IsObject(cv)) {
			check_conflicts(it, cv, chain, link, path, mf, manager, force, c,
					top && strcmp(it->string, "metadata") == 0 ? 2 : 0);
		} else if (cv && !ks_json_equal(cv, it)) {
			cJSON *e;
			cJSON_ArrayForEach(e, mf) {
				const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "manager");
				const cJSON *op = cJSON_GetObjectItemCaseSensitive(e, "operation");
				cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "fieldsV1");
				if (!cJSON_IsString(m) || !f)
					continue;
				if (strcmp(m->valuestring, manager) == 0 && cJSON_IsString(op) &&
				    strcmp(op->valuestring, "Apply") == 0)
					continue;
				if (!owned_by(f, chain))
					continue;
				if (force) {
					set_subtract(f, chain);
					continue;
				}
				c->n++;
				char cm[256];
				snprintf(cm, sizeof(cm), "conflict with \"%s\"", m->valuestring);
				cJSON *cause = cJSON_CreateObject();
				if (cause) {
					cJSON_AddStringToObject(cause, "reason", "FieldManagerConflict");
					cJSON_AddStringToObject(cause, "message", cm);
					cJSON_AddStringToObject(cause, "field", path);
					cJSON_AddItemToArray(c->causes, cause);
				}
				size_t used = strlen(c->msg);
				snprintf(c->msg + used, sizeof(c->msg) - used, "\n- %s: %s", cm, path);
			}
		}
		cJSON_Delete(cJSON_DetachItemViaPointer(chain_tail, link));
	}
}

/* Deep-set every leaf of applied into dst. */
static void apply_values(cJSON *dst, const cJSON *applied, int top)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, applied) {
		if (top == 2 && is_sys_meta(it->string))
			continue;
		cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, it->string);
		if (cJSON_IsObject(it) && it->child && cJSON_IsObject(d)) {
			apply_values(d, it, top && strcmp(it->string, "metadata") == 0 ? 2 : 0);
			continue;
		}
		cJSON *c = cJSON_Duplicate(it, 1);
		if (!c)
			return;
		if (d)
			cJSON_ReplaceItemInObjectCaseSensitive(dst, it->string, c);
		else
			cJSON_AddItemToObject(dst, it->string, c);
	}
}

/* Removes from obj the leaves in `gone` (a fieldset), pruning emptied maps. */
static void remove_fields(cJSON *obj, const cJSON *gone)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, gone) {
		if (strncmp(it->string, "f:", 2) != 0)
			continue;
		const char *k = it->string + 2;
		cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, k);
		if (!v)
			continue;
		if (set_is_leaf(it)) {
			cJSON_DeleteItemFromObjectCaseSensitive(obj, k);
		} else if (cJSON_IsObject(v)) {
			remove_fields(v, it);
			if (!v->child && strcmp(k, "metadata") != 0)
				cJSON_DeleteItemFromObjectCaseSensitive(obj, k);
		}
	}
}

cJSON *ks_ssa_apply(const cJSON *cur, const cJSON *applied, const char *manager, int force, const ks_rtype *t,
		    const char *name, ks_resp *out)
{
	char apiv[256];
	ks_rtype_api_version(t, apiv, sizeof(apiv));
	const cJSON *av = cJSON_GetObjectItemCaseSensitive(applied, "apiVersion");
	const cJSON *kd = cJSON_GetObjectItemCaseSensitive(applied, "kind");
	if (!cJSON_IsString(av) || !cJSON_IsString(kd)) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "apiVersion and kind are required in the applied configuration");
		return NULL;
	}
	const char *an = ks_meta_str(applied, "name");
	if (an && strcmp(an, name) != 0) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "the name of the object (%s) does not match the name on the URL (%s)", an, name);
		return NULL;
	}
	cJSON *aset = ks_ssa_fieldset(applied, 0);
	cJSON *res = cur ? cJSON_Duplicate(cur, 1) : cJSON_Duplicate(applied, 1);
	cJSON *mf = NULL;
	if (!aset || !res)
		goto oom;
	if (!cur) {
		cJSON *m = ks_meta(res);
		if (!m)
			goto oom;
		if (!ks_meta_str(res, "name"))
			cJSON_AddStringToObject(m, "name", name);
		cJSON_DeleteItemFromObjectCaseSensitive(m, "managedFields");
		mf = cJSON_AddArrayToObject(m, "managedFields");
		cJSON *e = mf ? new_entry(manager, "Apply", apiv, aset) : NULL;
		aset = NULL;
		if (!e)
			goto oom;
		cJSON_AddItemToArray(mf, e);
		return res;
	}
	cJSON *m = ks_meta(res);
	mf = cJSON_DetachItemFromObjectCaseSensitive(m, "managedFields");
	if (!cJSON_IsArray(mf)) {
		cJSON_Delete(mf);
		mf = cJSON_CreateArray();
		if (!mf)
			goto oom;
	}
	struct conflicts c = { .causes = cJSON_CreateArray() };
	cJSON *chain = cJSON_CreateObject();
	if (!c.causes || !chain) {
		cJSON_Delete(c.causes);
		cJSON_Delete(chain);
		goto oom;
	}
	check_conflicts(applied, cur, chain, chain, "", mf, manager, force, &c, 1);
	cJSON_Delete(chain);
	if (c.n) {
		ks_resp_status(out, 409, "Conflict", t->kind, name, t->group, c.causes,
			       "Apply failed with %d conflict%s: %s", c.n, c.n > 1 ? "s" : "", c.msg + 1);
		cJSON_Delete(aset);
		cJSON_Delete(res);
		cJSON_Delete(mf);
		return NULL;
	}
	cJSON_Delete(c.causes);
	/* fields this manager applied before and no longer applies: removed unless others own them */
	cJSON *mine = entry_find(mf, manager, "Apply");
	if (mine) {
		cJSON *prev = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(mine, "fieldsV1"), 1);
		if (prev) {
			set_subtract(prev, aset);
			cJSON *e;
			cJSON_ArrayForEach(e, mf) {
				if (e == mine)
					continue;
				const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "fieldsV1");
				if (f)
					set_subtract(prev, f);
			}
			remove_fields(res, prev);
			cJSON_Delete(prev);
		}
		cJSON_ReplaceItemInObjectCaseSensitive(mine, "fieldsV1", aset);
		char ts[40];
		ks_now_rfc3339(ts, sizeof(ts));
		cJSON_ReplaceItemInObjectCaseSensitive(mine, "time", cJSON_CreateString(ts));
		aset = NULL;
	} else {
		cJSON *e = new_entry(manager, "Apply", apiv, aset);
		aset = NULL;
		if (!e)
			goto oom;
		cJSON_AddItemToArray(mf, e);
	}
	apply_values(res, applied, 1);
	/* fields the apply changed are no longer owned by Update managers */
	cJSON *ch = cJSON_CreateObject();
	if (ch)
		diff_set(ch, cur, res, 1);
	cJSON *e;
	cJSON_ArrayForEach(e, mf) {
		const cJSON *op = cJSON_GetObjectItemCaseSensitive(e, "operation");
		cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "fieldsV1");
		if (ch && f && cJSON_IsString(op) && strcmp(op->valuestring, "Update") == 0)
			set_subtract(f, ch);
	}
	cJSON_Delete(ch);
	drop_empty(mf);
	m = ks_meta(res);
	cJSON_DeleteItemFromObjectCaseSensitive(m, "managedFields");
	cJSON_AddItemToObject(m, "managedFields", mf);
	return res;
oom:
	cJSON_Delete(aset);
	cJSON_Delete(res);
	cJSON_Delete(mf);
	ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
	return NULL;
}
