/* kubesim — managedFields and server-side apply, after structured-merge-diff (SMD).
 *
 * A field set is a FieldsV1 tree. Path elements: "f:<field>", "k:<key fields as
 * JSON, sorted>" (an item of a map list), "v:<value as JSON>" (an item of a set).
 * Inside this file a set is kept in "member form": every path that belongs to the
 * set has a "." child, so the set operations are plain tree operations; on the wire
 * a member without children is written {} and one with children carries ".": {}.
 *
 * Types: a list is atomic (one leaf), a map list (items owned one by one, by their
 * keys) or a set (scalars owned one by one); a map/struct is granular unless marked
 * atomic. CRDs take that from x-kubernetes-list-type / -list-map-keys / -map-type
 * (lists default to atomic, like SMD's schema conversion); built-ins from the patch
 * tags in smp.c's type graph (merge + key -> map list, merge without key -> set),
 * with the few list-map-keys that differ from the patch merge key below. */
#include "ssa.h"
#include "jsonutil.h"
#include "patch.h"

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

/* ---- types ---------------------------------------------------------------- */
enum { L_ATOMIC, L_MAP, L_SET };
#define MAX_KEYS 4

typedef struct st {
	const cJSON *sch; /* CRD schema node of this value, or NULL */
	const char *bt;   /* built-in type (smp.c graph) of this value / of its items */
	int top;          /* 1: the object, 2: its metadata */
	int atomic;       /* map or struct owned as a whole */
	int list;         /* for arrays */
	const char *keys[MAX_KEYS];
	int nkeys;
} st;

/* Built-in lists whose list-map-keys are not just the patch merge key, and structs
 * marked atomic (+structType=atomic). */
static const struct {
	const char *type, *field;
	const char *keys[MAX_KEYS];
	int atomic;
} overrides[] = {
	{ "Container", "ports", { "containerPort", "protocol" }, 0 },
	{ "PodSpec", "topologySpreadConstraints", { "topologyKey", "whenUnsatisfiable" }, 0 },
	{ "DaemonSetSpec", "selector", { NULL }, 1 },
};

static void schema_attrs(st *c, const cJSON *s)
{
	c->sch = cJSON_IsObject(s) ? s : NULL;
	if (!c->sch)
		return;
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(s, "x-kubernetes-list-type");
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(s, "x-kubernetes-map-type");
	if (cJSON_IsString(lt) && strcmp(lt->valuestring, "set") == 0)
		c->list = L_SET;
	if (cJSON_IsString(lt) && strcmp(lt->valuestring, "map") == 0) {
		const cJSON *k;
		cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(s, "x-kubernetes-list-map-keys"))
			if (cJSON_IsString(k) && c->nkeys < MAX_KEYS)
				c->keys[c->nkeys++] = k->valuestring;
		c->list = c->nkeys ? L_MAP : L_ATOMIC;
	}
	if (cJSON_IsString(mt) && strcmp(mt->valuestring, "atomic") == 0)
		c->atomic = 1;
}

static st child_of(const st *p, const char *field)
{
	st c = { 0 };
	if (p->top == 1 && strcmp(field, "metadata") == 0) {
		c.bt = "ObjectMeta";
		c.top = 2;
		return c;
	}
	if (p->sch) {
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p->sch, "properties"),
								  field);
		if (!s)
			s = cJSON_GetObjectItemCaseSensitive(p->sch, "additionalProperties");
		schema_attrs(&c, s);
		return c;
	}
	if (!p->bt)
		return c;
	int merge = 0;
	const char *key = NULL;
	c.bt = ks_smp_field(p->bt, field, &merge, &key);
	if (merge) {
		c.list = key ? L_MAP : L_SET;
		if (key)
			c.keys[c.nkeys++] = key;
	}
	for (size_t i = 0; i < sizeof(overrides) / sizeof(overrides[0]); i++) {
		if (strcmp(overrides[i].type, p->bt) != 0 || strcmp(overrides[i].field, field) != 0)
			continue;
		c.atomic = overrides[i].atomic;
		if (overrides[i].keys[0]) {
			c.list = L_MAP;
			for (c.nkeys = 0; c.nkeys < MAX_KEYS && overrides[i].keys[c.nkeys]; c.nkeys++)
				c.keys[c.nkeys] = overrides[i].keys[c.nkeys];
		}
	}
	return c;
}

static st item_of(const st *p)
{
	st c = { 0 };
	if (p->sch)
		schema_attrs(&c, cJSON_GetObjectItemCaseSensitive(p->sch, "items"));
	else
		c.bt = p->bt;
	return c;
}

static st root_of(const ks_rtype *t)
{
	st r = { 0 };
	r.top = 1;
	if (t && t->is_crd)
		r.sch = t->schema;
	else if (t)
		r.bt = t->kind;
	return r;
}

/* Fields of an object that are not part of field sets. */
static int skipped(const st *t, const char *k)
{
	if (t->top == 1)
		return strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0;
	if (t->top == 2)
		return is_sys_meta(k);
	return 0;
}

/* ---- path elements ------------------------------------------------------- */
/* pfx + v as compact JSON (malloc'd, NULL on OOM). */
static char *prefixed_json(const char *pfx, const cJSON *v)
{
	char *j = v ? cJSON_PrintUnformatted(v) : NULL;
	if (!j)
		return NULL;
	size_t n = strlen(pfx) + strlen(j) + 1;
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "%s%s", pfx, j);
	free(j);
	return s;
}

/* "k:{...}" of an item of a map list (key fields sorted by name; a port's
 * protocol defaults to TCP as in the typed object), or "v:<json>" of a set item.
 * Returns malloc'd or NULL (OOM, or an item that is not an object). */
static char *element_of(const st *lt, const cJSON *item)
{
	if (lt->list == L_SET)
		return prefixed_json("v:", item);
	if (!cJSON_IsObject(item))
		return NULL;
	const char *keys[MAX_KEYS];
	int n = lt->nkeys;
	for (int i = 0; i < n; i++)
		keys[i] = lt->keys[i];
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
			const char *x = keys[j];
			keys[j] = keys[j - 1];
			keys[j - 1] = x;
		}
	cJSON *k = cJSON_CreateObject();
	if (!k)
		return NULL;
	for (int i = 0; i < n; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, keys[i]);
		cJSON *c = v ? cJSON_Duplicate(v, 1)
			     : (strcmp(keys[i], "protocol") == 0 && strcmp(keys[0], "containerPort") == 0
					? cJSON_CreateString("TCP")
					: NULL);
		if (c)
			cJSON_AddItemToObject(k, keys[i], c);
	}
	char *s = prefixed_json("k:", k);
	cJSON_Delete(k);
	return s;
}

/* The item of array `a` whose element name is pe (NULL if none). */
static cJSON *find_item(const cJSON *a, const st *lt, const char *pe)
{
	cJSON *it;
	cJSON_ArrayForEach(it, a) {
		char *e = element_of(lt, it);
		int eq = e && strcmp(e, pe) == 0;
		free(e);
		if (eq)
			return it;
	}
	return NULL;
}

/* ---- sets (member form) -------------------------------------------------- */
static cJSON *node(cJSON *set, const char *k)
{
	cJSON *c = cJSON_GetObjectItemCaseSensitive(set, k);
	if (!c && set) {
		c = cJSON_CreateObject();
		if (c)
			cJSON_AddItemToObject(set, k, c);
	}
	return c;
}

static cJSON *fnode(cJSON *set, const char *field)
{
	char k[512];
	snprintf(k, sizeof(k), "f:%s", field);
	return node(set, k);
}

static void mark(cJSON *n)
{
	if (n && !cJSON_GetObjectItemCaseSensitive(n, "."))
		cJSON_AddItemToObject(n, ".", cJSON_CreateObject());
}

static int is_member(const cJSON *n)
{
	return cJSON_GetObjectItemCaseSensitive(n, ".") != NULL;
}

/* Removes nodes that hold nothing. */
static void prune_empty(cJSON *set)
{
	cJSON *it = set ? set->child : NULL;
	while (it) {
		cJSON *next = it->next;
		if (strcmp(it->string, ".") != 0) {
			prune_empty(it);
			if (!it->child)
				cJSON_Delete(cJSON_DetachItemViaPointer(set, it));
		}
		it = next;
	}
}

static void set_union(cJSON *a, const cJSON *b)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, b) {
		cJSON *x = cJSON_GetObjectItemCaseSensitive(a, it->string);
		if (x)
			set_union(x, it);
		else
			cJSON_AddItemToObject(a, it->string, cJSON_Duplicate(it, 1));
	}
}

static void set_subtract(cJSON *a, const cJSON *b)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, b) {
		cJSON *x = cJSON_GetObjectItemCaseSensitive(a, it->string);
		if (!x)
			continue;
		if (strcmp(it->string, ".") != 0) {
			set_subtract(x, it);
			if (x->child)
				continue;
		}
		cJSON_Delete(cJSON_DetachItemViaPointer(a, x));
	}
}

static void set_intersect(cJSON *a, const cJSON *b)
{
	cJSON *it = a ? a->child : NULL;
	while (it) {
		cJSON *next = it->next;
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(b, it->string);
		if (x && strcmp(it->string, ".") != 0)
			set_intersect(it, x);
		if (!x || (strcmp(it->string, ".") != 0 && !it->child))
			cJSON_Delete(cJSON_DetachItemViaPointer(a, it));
		it = next;
	}
}

/* Wire form <-> member form. */
static cJSON *from_wire(const cJSON *w)
{
	cJSON *n = cJSON_CreateObject();
	if (!n)
		return NULL;
	if (!w || !w->child) {
		mark(n);
		return n;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, w) {
		if (strcmp(it->string, ".") == 0)
			mark(n);
		else if (cJSON_IsObject(it))
			cJSON_AddItemToObject(n, it->string, from_wire(it));
	}
	return n;
}

static void to_wire(cJSON *n)
{
	cJSON *dot = cJSON_GetObjectItemCaseSensitive(n, ".");
	int others = 0;
	for (cJSON *it = n ? n->child : NULL; it; it = it->next)
		if (strcmp(it->string, ".") != 0) {
			others = 1;
			to_wire(it);
		}
	if (dot && !others)
		cJSON_Delete(cJSON_DetachItemViaPointer(n, dot));
}

static cJSON *fields_from_wire(const cJSON *w)
{
	cJSON *r = cJSON_CreateObject();
	const cJSON *it;
	cJSON_ArrayForEach(it, w) if (r && strcmp(it->string, ".") != 0 && cJSON_IsObject(it))
		cJSON_AddItemToObject(r, it->string, from_wire(it));
	return r;
}

/* ---- sets of objects ------------------------------------------------------- */
/* The FieldsV1 set of a value. all=0: what an applied configuration sets (SMD
 * ToFieldSet): leaves, atomic lists/maps and the items of map lists and sets, not
 * maps and structs themselves. all=1: every path, maps and items included (what an
 * Update that created the value owns). The node n itself is never marked at the root. */
static void set_of(cJSON *n, const cJSON *v, const st *t, int all, int root)
{
	int gmap = cJSON_IsObject(v) && !t->atomic;
	int glist = cJSON_IsArray(v) && t->list != L_ATOMIC;
	if (!root && (all || (!gmap && !glist)))
		mark(n);
	const cJSON *it;
	if (gmap) {
		cJSON_ArrayForEach(it, v) {
			if (skipped(t, it->string))
				continue;
			st c = child_of(t, it->string);
			set_of(fnode(n, it->string), it, &c, all, 0);
		}
	} else if (glist) {
		st ci = item_of(t);
		cJSON_ArrayForEach(it, v) {
			char *pe = element_of(t, it);
			cJSON *c = pe ? node(n, pe) : NULL;
			free(pe);
			mark(c);
			if (c && t->list == L_MAP)
				set_of(c, it, &ci, all, 0);
		}
	}
}

/* SMD Compare: paths added, modified (leaves, atomic values) and removed from o to n. */
static void compare(const cJSON *o, const cJSON *n, const st *t, cJSON *A, cJSON *M, cJSON *R)
{
	if (cJSON_IsObject(o) && cJSON_IsObject(n) && !t->atomic) {
		const cJSON *it;
		cJSON_ArrayForEach(it, n) {
			if (skipped(t, it->string))
				continue;
			st c = child_of(t, it->string);
			const cJSON *ov = cJSON_GetObjectItemCaseSensitive(o, it->string);
			if (!ov)
				set_of(fnode(A, it->string), it, &c, 1, 0);
			else
				compare(ov, it, &c, fnode(A, it->string), fnode(M, it->string), fnode(R, it->string));
		}
		cJSON_ArrayForEach(it, o) {
			if (skipped(t, it->string) || cJSON_GetObjectItemCaseSensitive(n, it->string))
				continue;
			st c = child_of(t, it->string);
			set_of(fnode(R, it->string), it, &c, 1, 0);
		}
		return;
	}
	if (cJSON_IsArray(o) && cJSON_IsArray(n) && t->list != L_ATOMIC) {
		st ci = item_of(t);
		const cJSON *it;
		cJSON_ArrayForEach(it, n) {
			char *pe = element_of(t, it);
			if (!pe)
				continue;
			const cJSON *oi = find_item(o, t, pe);
			if (!oi)
				set_of(node(A, pe), it, &ci, 1, 0);
			else if (t->list == L_MAP)
				compare(oi, it, &ci, node(A, pe), node(M, pe), node(R, pe));
			free(pe);
		}
		cJSON_ArrayForEach(it, o) {
			char *pe = element_of(t, it);
			if (pe && !find_item(n, t, pe))
				set_of(node(R, pe), it, &ci, 1, 0);
			free(pe);
		}
		return;
	}
	if (!ks_json_equal(o, n))
		mark(M);
}

/* ---- values ---------------------------------------------------------------- */
/* SMD merge of an applied configuration into the live object: granular maps key by
 * key, map lists item by item (new items appended), sets by value, the rest replaced. */
static void merge_list(cJSON *d, const cJSON *src, const st *t);

static void merge_into(cJSON *dst, const cJSON *src, const st *t)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, src) {
		if (skipped(t, it->string))
			continue;
		st c = child_of(t, it->string);
		cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, it->string);
		if (cJSON_IsObject(it) && cJSON_IsObject(d) && !c.atomic) {
			merge_into(d, it, &c);
		} else if (cJSON_IsArray(it) && cJSON_IsArray(d) && c.list != L_ATOMIC) {
			merge_list(d, it, &c);
		} else {
			cJSON *v = cJSON_Duplicate(it, 1);
			if (!v)
				continue;
			if (d)
				cJSON_ReplaceItemViaPointer(dst, d, v);
			else
				cJSON_AddItemToObject(dst, it->string, v);
		}
	}
}

static void merge_list(cJSON *d, const cJSON *src, const st *t)
{
	st ci = item_of(t);
	const cJSON *it;
	cJSON_ArrayForEach(it, src) {
		char *pe = element_of(t, it);
		cJSON *di = pe ? find_item(d, t, pe) : NULL;
		free(pe);
		if (di && t->list == L_MAP && cJSON_IsObject(it))
			merge_into(di, it, &ci);
		else if (!di)
			cJSON_AddItemToArray(d, cJSON_Duplicate(it, 1));
	}
}

/* Removes from v the paths of rm (member form) that `keep` does not hold (neither
 * the path nor anything under it): what an applier stopped applying and nobody else
 * owns. Maps and lists emptied by the removal go too (metadata stays), as the
 * typed objects drop empty ones. */
static void remove_paths(cJSON *v, const cJSON *rm, const cJSON *keep, const st *t)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, rm) {
		if (strcmp(it->string, ".") == 0)
			continue;
		const cJSON *kp = cJSON_GetObjectItemCaseSensitive(keep, it->string);
		cJSON *child = NULL;
		st c = { 0 };
		if (cJSON_IsObject(v) && strncmp(it->string, "f:", 2) == 0) {
			child = cJSON_GetObjectItemCaseSensitive(v, it->string + 2);
			c = child_of(t, it->string + 2);
		} else if (cJSON_IsArray(v)) {
			child = find_item(v, t, it->string);
			c = item_of(t);
		}
		if (!child)
			continue;
		if (is_member(it) && !kp) {
			cJSON_Delete(cJSON_DetachItemViaPointer(v, child));
			continue;
		}
		int had = child->child != NULL;
		if (cJSON_IsArray(v) && t->list == L_MAP) {
			/* an item kept for another owner keeps its key fields (SMD adds owned
			 * items back with their keys) */
			cJSON *rmi = cJSON_Duplicate(it, 1);
			if (!rmi)
				continue;
			for (int i = 0; i < t->nkeys; i++) {
				char k[300];
				snprintf(k, sizeof(k), "f:%s", t->keys[i]);
				cJSON_DeleteItemFromObjectCaseSensitive(rmi, k);
			}
			remove_paths(child, rmi, kp, &c);
			cJSON_Delete(rmi);
			continue;
		}
		remove_paths(child, it, kp, &c);
		if ((cJSON_IsObject(child) || cJSON_IsArray(child)) && had && !child->child && cJSON_IsObject(v) &&
		    c.top != 2)
			cJSON_Delete(cJSON_DetachItemViaPointer(v, child));
	}
}

/* ---- managedFields entries -------------------------------------------------- */
typedef struct mentry {
	cJSON *e;      /* the entry (fieldsV1 detached) */
	cJSON *fields; /* member form */
} mentry;

typedef struct mlist {
	mentry *v;
	int n;
} mlist;

static const char *estr(const cJSON *e, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static int mlist_load(mlist *l, const cJSON *obj)
{
	const cJSON *mf = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
							   "managedFields");
	l->n = 0;
	l->v = calloc((size_t)cJSON_GetArraySize(mf) + 1, sizeof(mentry));
	if (!l->v)
		return -1;
	const cJSON *e;
	cJSON_ArrayForEach(e, mf) {
		if (!cJSON_IsObject(e))
			continue;
		mentry *m = &l->v[l->n];
		m->e = cJSON_Duplicate(e, 1);
		if (!m->e)
			return -1;
		cJSON *fw = cJSON_DetachItemFromObjectCaseSensitive(m->e, "fieldsV1");
		m->fields = fields_from_wire(fw);
		cJSON_Delete(fw);
		l->n++;
		if (!m->fields)
			return -1;
	}
	return 0;
}

static void mlist_free(mlist *l)
{
	for (int i = 0; i < l->n; i++) {
		cJSON_Delete(l->v[i].e);
		cJSON_Delete(l->v[i].fields);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int same_manager(const mentry *m, const char *manager, const char *op, const char *sub)
{
	return strcmp(estr(m->e, "manager"), manager) == 0 && strcmp(estr(m->e, "operation"), op) == 0 &&
	       strcmp(estr(m->e, "subresource"), sub ? sub : "") == 0;
}

static mentry *mlist_find(mlist *l, const char *manager, const char *op, const char *sub)
{
	for (int i = 0; i < l->n; i++)
		if (same_manager(&l->v[i], manager, op, sub))
			return &l->v[i];
	return NULL;
}

static void touch(mentry *m, const char *apiv)
{
	char ts[40];
	ks_now_rfc3339(ts, sizeof(ts));
	cJSON_ReplaceItemInObjectCaseSensitive(m->e, "apiVersion", cJSON_CreateString(apiv));
	cJSON_ReplaceItemInObjectCaseSensitive(m->e, "time", cJSON_CreateString(ts));
}

/* Adds an entry (l->v has room for one more than it was loaded with). */
static mentry *mlist_add(mlist *l, const char *manager, const char *op, const char *sub, const char *apiv)
{
	cJSON *e = cJSON_CreateObject();
	cJSON *f = cJSON_CreateObject();
	if (!e || !f) {
		cJSON_Delete(e);
		cJSON_Delete(f);
		return NULL;
	}
	char ts[40];
	ks_now_rfc3339(ts, sizeof(ts));
	cJSON_AddStringToObject(e, "manager", manager);
	cJSON_AddStringToObject(e, "operation", op);
	cJSON_AddStringToObject(e, "apiVersion", apiv);
	cJSON_AddStringToObject(e, "time", ts);
	cJSON_AddStringToObject(e, "fieldsType", "FieldsV1");
	if (sub && *sub)
		cJSON_AddStringToObject(e, "subresource", sub);
	mentry *m = &l->v[l->n++];
	m->e = e;
	m->fields = f;
	return m;
}

/* Writes the entries that still own something into obj's metadata.managedFields
 * (each set first cut down to the paths obj still has). */
static void mlist_store(mlist *l, cJSON *obj, const st *root)
{
	cJSON *all = cJSON_CreateObject();
	set_of(all, obj, root, 1, 1);
	cJSON *mf = cJSON_CreateArray();
	for (int i = 0; mf && all && i < l->n; i++) {
		mentry *m = &l->v[i];
		set_intersect(m->fields, all);
		if (!m->fields || !m->fields->child)
			continue;
		to_wire(m->fields);
		cJSON_AddItemToObject(m->e, "fieldsV1", m->fields);
		m->fields = NULL;
		cJSON *sub = cJSON_DetachItemFromObjectCaseSensitive(m->e, "subresource");
		if (sub)
			cJSON_AddItemToObject(m->e, "subresource", sub); /* after fieldsV1, as the API server */
		cJSON_AddItemToArray(mf, m->e);
		m->e = NULL;
	}
	cJSON_Delete(all);
	cJSON *meta = ks_meta(obj);
	cJSON_DeleteItemFromObjectCaseSensitive(meta, "managedFields");
	if (mf && mf->child)
		cJSON_AddItemToObject(meta, "managedFields", mf);
	else
		cJSON_Delete(mf);
}

/* ---- public --------------------------------------------------------------- */
cJSON *ks_ssa_config_set(const cJSON *applied, const ks_rtype *t)
{
	st r = root_of(t);
	cJSON *set = cJSON_CreateObject();
	if (!set)
		return NULL;
	set_of(set, applied, &r, 0, 1);
	prune_empty(set);
	cJSON_DeleteItemFromObjectCaseSensitive(set, ".");
	to_wire(set);
	return set;
}

/* The state an Update is compared with when it creates the object: metadata (name,
 * ...) exists before, and a built-in's spec and status exist as empty structs (Go
 * zero values), so neither is owned as a map; a custom resource's spec is. */
static cJSON *create_base(const cJSON *n, const ks_rtype *t)
{
	cJSON *b = cJSON_CreateObject();
	if (!b)
		return NULL;
	cJSON_AddObjectToObject(b, "metadata");
	if (t && !t->is_crd) {
		if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(n, "spec")))
			cJSON_AddObjectToObject(b, "spec");
		if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(n, "status")))
			cJSON_AddObjectToObject(b, "status");
	}
	return b;
}

void ks_ssa_track(const cJSON *cur, cJSON *n, const char *manager, const char *sub, int is_apply, const ks_rtype *t)
{
	if (is_apply)
		return;
	const char *mgr = manager && *manager ? manager : "unknown";
	char apiv[256];
	ks_rtype_api_version(t, apiv, sizeof(apiv));
	st root = root_of(t);
	mlist l = { 0 };
	cJSON *base = cur ? NULL : create_base(n, t);
	cJSON *A = cJSON_CreateObject(), *M = cJSON_CreateObject(), *R = cJSON_CreateObject();
	if (mlist_load(&l, cur) || !A || !M || !R || (!cur && !base))
		goto out;
	compare(cur ? cur : base, n, &root, A, M, R);
	set_union(A, M);
	prune_empty(A);
	prune_empty(R);
	for (int i = 0; i < l.n; i++)
		if (!same_manager(&l.v[i], mgr, "Update", sub))
			set_subtract(l.v[i].fields, A);
	mentry *mine = mlist_find(&l, mgr, "Update", sub);
	if (A->child || R->child) {
		if (!mine && A->child)
			mine = mlist_add(&l, mgr, "Update", sub, apiv);
		if (mine) {
			set_union(mine->fields, A);
			set_subtract(mine->fields, R);
			touch(mine, apiv);
		}
	}
	mlist_store(&l, n, &root);
out:
	mlist_free(&l);
	cJSON_Delete(base);
	cJSON_Delete(A);
	cJSON_Delete(M);
	cJSON_Delete(R);
}

/* ---- conflicts -------------------------------------------------------------- */
/* ".spec.containers[name=\"c\"].image" from a path of elements. */
static void path_append(char *buf, size_t cap, const char *pe)
{
	size_t u = strlen(buf);
	if (strncmp(pe, "f:", 2) == 0) {
		snprintf(buf + u, cap - u, ".%s", pe + 2);
	} else if (strncmp(pe, "v:", 2) == 0) {
		snprintf(buf + u, cap - u, "[=%s]", pe + 2);
	} else if (strncmp(pe, "k:", 2) == 0) {
		cJSON *k = cJSON_Parse(pe + 2);
		snprintf(buf + u, cap - u, "[");
		const cJSON *it;
		cJSON_ArrayForEach(it, k) {
			char *v = cJSON_PrintUnformatted(it);
			u = strlen(buf);
			snprintf(buf + u, cap - u, "%s%s=%s", it == k->child ? "" : ",", it->string, v ? v : "");
			free(v);
		}
		u = strlen(buf);
		snprintf(buf + u, cap - u, "]");
		cJSON_Delete(k);
	} else {
		snprintf(buf + u, cap - u, "[%s]", pe + 2);
	}
}

struct conflicts {
	cJSON *causes;
	char *msg;
	size_t len, cap;
	int n;
	const char *label; /* of the manager being listed */
	int grouped;
};

static void cat(struct conflicts *c, const char *s)
{
	size_t n = strlen(s);
	if (c->len + n + 1 > c->cap) {
		size_t nc = (c->len + n + 1) * 2;
		char *m = realloc(c->msg, nc);
		if (!m)
			return;
		c->msg = m;
		c->cap = nc;
	}
	memcpy(c->msg + c->len, s, n + 1);
	c->len += n;
}

static void list_paths(struct conflicts *c, const cJSON *set, char *path, size_t cap)
{
	size_t u = strlen(path);
	if (is_member(set) && u) {
		c->n++;
		char cm[600];
		snprintf(cm, sizeof(cm), "conflict with %s", c->label);
		cJSON *cause = cJSON_CreateObject();
		if (cause) {
			cJSON_AddStringToObject(cause, "reason", "FieldManagerConflict");
			cJSON_AddStringToObject(cause, "message", cm);
			cJSON_AddStringToObject(cause, "field", path);
			cJSON_AddItemToArray(c->causes, cause);
		}
		cat(c, "\n- ");
		cat(c, path);
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, set) {
		if (strcmp(it->string, ".") == 0)
			continue;
		path_append(path, cap, it->string);
		list_paths(c, it, path, cap);
		path[u] = 0;
	}
}

/* The API server's name for a manager in conflicts: "name" for appliers,
 * "name" [with subresource "s"] using apiVersion for updaters. */
static void manager_label(const mentry *m, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "\"%s\"", estr(m->e, "manager"));
	if (*estr(m->e, "subresource") && n > 0 && (size_t)n < cap)
		n += snprintf(buf + n, cap - (size_t)n, " with subresource \"%s\"", estr(m->e, "subresource"));
	if (strcmp(estr(m->e, "operation"), "Update") == 0 && n > 0 && (size_t)n < cap)
		snprintf(buf + n, cap - (size_t)n, " using %s", estr(m->e, "apiVersion"));
}

static int cmp_manager(const void *a, const void *b)
{
	const mentry *x = *(const mentry *const *)a, *y = *(const mentry *const *)b;
	static const char *keys[] = { "manager", "operation", "apiVersion", "subresource" };
	for (size_t i = 0; i < 4; i++) {
		int r = strcmp(estr(x->e, keys[i]), estr(y->e, keys[i]));
		if (r)
			return r;
	}
	return 0;
}

/* Fills the 409 for conflicts[] (sets of each manager that the apply changes). */
static void conflict_status(mentry **who, cJSON **sets, int n, ks_resp *out)
{
	struct conflicts c = { .causes = cJSON_CreateArray() };
	/* sort by manager, keeping each set with its manager */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && cmp_manager(&who[j - 1], &who[j]) > 0; j--) {
			mentry *w = who[j];
			cJSON *s = sets[j];
			who[j] = who[j - 1];
			sets[j] = sets[j - 1];
			who[j - 1] = w;
			sets[j - 1] = s;
		}
	char label[600], path[2048];
	for (int i = 0; i < n; i++) {
		manager_label(who[i], label, sizeof(label));
		c.label = label;
		char head[700];
		snprintf(head, sizeof(head), "%sconflicts with %s:", i ? "\n" : "", label);
		cat(&c, head);
		path[0] = 0;
		list_paths(&c, sets[i], path, sizeof(path));
	}
	if (c.n == 1) {
		const cJSON *cause = cJSON_GetArrayItem(c.causes, 0);
		ks_resp_status(out, 409, "Conflict", NULL, NULL, NULL, c.causes, "Apply failed with 1 conflict: %s: %s",
			       estr(cause, "message"), estr(cause, "field"));
	} else {
		ks_resp_status(out, 409, "Conflict", NULL, NULL, NULL, c.causes, "Apply failed with %d conflicts: %s", c.n,
			       c.msg ? c.msg : "");
	}
	free(c.msg);
}

/* The part of an applied configuration the endpoint writes: with a status
 * subresource, the main resource ignores status and /status everything but status
 * (the API server's reset fields), so neither is merged nor claimed. */
static cJSON *endpoint_part(const cJSON *applied, const char *sub, const ks_rtype *t)
{
	cJSON *a = cJSON_Duplicate(applied, 1);
	if (!a || !t || !t->has_status)
		return a;
	int status = sub && strcmp(sub, "status") == 0;
	cJSON *it = a->child;
	while (it) {
		cJSON *next = it->next;
		int keep = strcmp(it->string, "apiVersion") == 0 || strcmp(it->string, "kind") == 0 ||
			   strcmp(it->string, "metadata") == 0 || (strcmp(it->string, "status") == 0) == status;
		if (!keep)
			cJSON_Delete(cJSON_DetachItemViaPointer(a, it));
		it = next;
	}
	cJSON *m = cJSON_GetObjectItemCaseSensitive(a, "metadata");
	if (status && m) { /* name and namespace only */
		cJSON *mi = m->child;
		while (mi) {
			cJSON *next = mi->next;
			if (strcmp(mi->string, "name") != 0 && strcmp(mi->string, "namespace") != 0)
				cJSON_Delete(cJSON_DetachItemViaPointer(m, mi));
			mi = next;
		}
	}
	return a;
}

static cJSON *apply_part(const cJSON *cur, const cJSON *applied, const char *manager, const char *sub, int force,
			 const ks_rtype *t, const char *name, ks_resp *out);

cJSON *ks_ssa_apply(const cJSON *cur, const cJSON *applied, const char *manager, const char *sub, int force,
		    const ks_rtype *t, const char *name, ks_resp *out)
{
	cJSON *a = endpoint_part(applied, sub, t);
	if (!a) {
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return NULL;
	}
	cJSON *r = apply_part(cur, a, manager, sub, force, t, name, out);
	cJSON_Delete(a);
	return r;
}

static cJSON *apply_part(const cJSON *cur, const cJSON *applied, const char *manager, const char *sub, int force,
			 const ks_rtype *t, const char *name, ks_resp *out)
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
	st root = root_of(t);
	mlist l = { 0 };
	cJSON *res = NULL, *A = NULL, *M = NULL, *R = NULL, *cfg = NULL, *keep = NULL;
	mentry **who = NULL;
	cJSON **sets = NULL;
	if (mlist_load(&l, cur))
		goto oom;
	cfg = cJSON_CreateObject();
	if (!cfg)
		goto oom;
	set_of(cfg, applied, &root, 0, 1);
	prune_empty(cfg);
	if (!cur) {
		res = cJSON_Duplicate(applied, 1);
		cJSON *m = res ? ks_meta(res) : NULL;
		if (!m)
			goto oom;
		if (!ks_meta_str(res, "name"))
			cJSON_AddStringToObject(m, "name", name);
	} else {
		res = cJSON_Duplicate(cur, 1);
		if (!res)
			goto oom;
		merge_into(res, applied, &root);
	}
	A = cJSON_CreateObject();
	M = cJSON_CreateObject();
	R = cJSON_CreateObject();
	who = calloc((size_t)l.n + 1, sizeof(*who));
	sets = calloc((size_t)l.n + 1, sizeof(*sets));
	if (!A || !M || !R || !who || !sets)
		goto oom;
	if (cur) {
		compare(cur, res, &root, A, M, R);
		set_union(A, M);
		prune_empty(A);
	}
	/* other managers that own what this apply changes: conflicts, or lose it (force) */
	int nc = 0;
	for (int i = 0; i < l.n; i++) {
		if (same_manager(&l.v[i], manager, "Apply", sub))
			continue;
		cJSON *x = cJSON_Duplicate(l.v[i].fields, 1);
		if (!x)
			goto oom;
		set_intersect(x, A);
		if (!x->child) {
			cJSON_Delete(x);
			continue;
		}
		if (force) {
			set_subtract(l.v[i].fields, x);
			cJSON_Delete(x);
			continue;
		}
		who[nc] = &l.v[i];
		sets[nc++] = x;
	}
	if (nc) {
		conflict_status(who, sets, nc, out);
		for (int i = 0; i < nc; i++)
			cJSON_Delete(sets[i]);
		goto fail;
	}
	/* what this manager applied before and no longer applies goes, unless another
	 * manager owns it (or something under it) */
	mentry *mine = mlist_find(&l, manager, "Apply", sub);
	if (mine) {
		cJSON *rm = cJSON_Duplicate(mine->fields, 1);
		keep = cJSON_Duplicate(cfg, 1);
		if (!rm || !keep) {
			cJSON_Delete(rm);
			goto oom;
		}
		for (int i = 0; i < l.n; i++)
			if (&l.v[i] != mine)
				set_union(keep, l.v[i].fields);
		set_subtract(rm, cfg);
		remove_paths(res, rm, keep, &root);
		cJSON_Delete(rm);
	} else {
		mine = mlist_add(&l, manager, "Apply", sub, apiv);
		if (!mine)
			goto oom;
	}
	cJSON_Delete(mine->fields);
	mine->fields = cfg;
	cfg = NULL;
	touch(mine, apiv);
	mlist_store(&l, res, &root);
	goto done;
oom:
	ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
fail:
	cJSON_Delete(res);
	res = NULL;
done:
	mlist_free(&l);
	cJSON_Delete(A);
	cJSON_Delete(M);
	cJSON_Delete(R);
	cJSON_Delete(cfg);
	cJSON_Delete(keep);
	free(who);
	free(sets);
	return res;
}
