/* lib/operands: shared pieces of the renderers (see internal.h) and the set. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/yamljson.h"
#include "internal.h"

const char *gk_op_component_name(int c)
{
	switch (c) {
	case GK_OP_DP: return "device plugin";
	case GK_OP_XPU: return "XPU Manager";
	case GK_OP_DRA: return "DRA driver";
	case GK_OP_NFD: return "NFD rule";
	case GK_OP_PROMETHEUS: return "Prometheus";
	case GK_OP_KUEUE: return "Kueue";
	default: return "operand";
	}
}

void gk_op_set_free(gk_op_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		gk_op_obj *o = &s->v[i];
		free(o->ns);
		free(o->name);
		cJSON_Delete(o->obj);
		for (size_t k = 0; k < o->n_rules; k++)
			free(o->rules[k].path);
		free(o->rules);
	}
	free(s->v);
	for (size_t i = 0; i < s->n_errors; i++)
		free(s->errors[i]);
	free(s->errors);
	memset(s, 0, sizeof(*s));
}

cJSON *gk_opr_template(gk_opr *r, const char *yaml)
{
	gk_yamljson_docs d = { 0 };
	gk_err e = { 0 };
	if (gk_yamljson_parse(yaml, strlen(yaml), &d, &e) != GK_OK) {
		if (e.code == GK_RESOURCE_EXHAUSTED) {
			r->oom = true;
			return NULL;
		}
		fprintf(stderr, "lib/operands: bad built-in template: %s\n", e.msg);
		abort();
	}
	cJSON *j = d.n ? d.doc[0] : NULL;
	if (d.n)
		d.doc[0] = NULL;
	gk_yamljson_free(&d);
	if (!j)
		r->oom = true;
	return j;
}

void gk_opr_error(gk_opr *r, const char *fmt, ...)
{
	char buf[GK_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < r->s->n_errors; i++)
		if (strcmp(r->s->errors[i], buf) == 0)
			return;
	char **nv = realloc(r->s->errors, (r->s->n_errors + 1) * sizeof(*nv));
	char *d = strdup(buf);
	if (!nv || !d) {
		if (nv)
			r->s->errors = nv;
		free(d);
		r->oom = true;
		return;
	}
	r->s->errors = nv;
	r->s->errors[r->s->n_errors++] = d;
}

cJSON *gk_opr_str(gk_opr *r, const char *s)
{
	cJSON *v = cJSON_CreateString(s ? s : "");
	if (!v)
		r->oom = true;
	return v;
}

cJSON *gk_opr_strf(gk_opr *r, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return gk_opr_str(r, buf);
}

void gk_opr_push(gk_opr *r, cJSON *arr, cJSON *v)
{
	if (!v || !arr) {
		cJSON_Delete(v);
		r->oom = true;
		return;
	}
	cJSON_AddItemToArray(arr, v);
}

char *gk_opr_name(gk_opr *r, const char *suffix)
{
	char *s = NULL;
	if (asprintf(&s, "%s%s", r->cpn, suffix) < 0) {
		r->oom = true;
		return NULL;
	}
	return s;
}

/* ---- JSON Pointer (with "@NAME" list elements) ---------------------------------- */

/* The next segment of p (unescaped into seg); returns the rest, or NULL at the end. */
static const char *segment(const char *p, char *seg, size_t cap)
{
	if (!p || *p != '/')
		return NULL;
	p++;
	size_t n = 0;
	while (*p && *p != '/') {
		char c = *p++;
		if (c == '~' && (*p == '0' || *p == '1'))
			c = *p++ == '0' ? '~' : '/';
		if (n + 1 < cap)
			seg[n++] = c;
	}
	seg[n] = 0;
	return p;
}

static cJSON *named(cJSON *arr, const char *name)
{
	cJSON *e;
	cJSON_ArrayForEach(e, arr) {
		cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
			return e;
	}
	return NULL;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* The child of node for one segment; when create, missing objects / named list
 * elements are added (an index past the end is never created). */
static cJSON *child(cJSON *node, const char *seg, bool create, bool list, bool *oom)
{
	if (cJSON_IsArray(node)) {
		if (seg[0] == '@') {
			cJSON *e = named(node, seg + 1);
			if (!e && create) {
				e = cJSON_CreateObject();
				if (!e || !cJSON_AddStringToObject(e, "name", seg + 1)) {
					cJSON_Delete(e);
					*oom = true;
					return NULL;
				}
				cJSON_AddItemToArray(node, e);
			}
			return e;
		}
		return all_digits(seg) ? cJSON_GetArrayItem(node, atoi(seg)) : NULL;
	}
	if (!cJSON_IsObject(node))
		return NULL;
	cJSON *c = cJSON_GetObjectItemCaseSensitive(node, seg);
	if (!c && create) {
		/* what holds "@name" or an index is a list */
		c = list ? cJSON_AddArrayToObject(node, seg) : cJSON_AddObjectToObject(node, seg);
		if (!c)
			*oom = true;
	}
	return c;
}

/* last_list: a missing last node is created as a list */
static cJSON *walk(cJSON *root, const char *path, bool create, bool last_list, bool *oom)
{
	char seg[512], next[512];
	cJSON *n = root;
	const char *p = path;
	while (n && (p = segment(p, seg, sizeof(seg)))) {
		bool more = segment(p, next, sizeof(next)) != NULL;
		bool list = more ? (next[0] == '@' || all_digits(next)) : last_list;
		n = child(n, seg, create, list, oom);
	}
	return n;
}

cJSON *gk_op_pointer(cJSON *root, const char *path, bool create, bool *oom)
{
	return walk(root, path, create, false, oom);
}

cJSON *gk_opr_at(gk_opr *r, cJSON *root, const char *path)
{
	return gk_op_pointer(root, path, true, &r->oom);
}

/* Replace (or insert) the value at path, which must have a parent; takes v. */
bool gk_op_pointer_set(cJSON *root, const char *path, cJSON *v, bool *oom)
{
	const char *last = strrchr(path, '/');
	if (!v || !last) {
		cJSON_Delete(v);
		return false;
	}
	char parent_path[1024], seg[512];
	size_t pl = (size_t)(last - path);
	if (pl >= sizeof(parent_path)) {
		cJSON_Delete(v);
		return false;
	}
	memcpy(parent_path, path, pl);
	parent_path[pl] = 0;
	segment(last, seg, sizeof(seg));
	cJSON *parent = pl ? walk(root, parent_path, true, seg[0] == '@' || all_digits(seg), oom) : root;
	if (cJSON_IsObject(parent)) {
		if (cJSON_GetObjectItemCaseSensitive(parent, seg))
			cJSON_ReplaceItemInObjectCaseSensitive(parent, seg, v);
		else
			cJSON_AddItemToObject(parent, seg, v);
		return true;
	}
	if (cJSON_IsArray(parent)) {
		if (seg[0] == '@') {
			int i = 0;
			cJSON *e;
			cJSON_ArrayForEach(e, parent) {
				cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
				if (cJSON_IsString(n) && strcmp(n->valuestring, seg + 1) == 0) {
					cJSON_ReplaceItemInArray(parent, i, v);
					return true;
				}
				i++;
			}
			cJSON_AddItemToArray(parent, v);
			return true;
		}
		if (all_digits(seg) && atoi(seg) < cJSON_GetArraySize(parent)) {
			cJSON_ReplaceItemInArray(parent, atoi(seg), v);
			return true;
		}
	}
	cJSON_Delete(v);
	return false;
}

/* Remove the value at path (nothing when absent). */
void gk_op_pointer_del(cJSON *root, const char *path)
{
	const char *last = strrchr(path, '/');
	if (!last)
		return;
	char parent_path[1024], seg[512];
	size_t pl = (size_t)(last - path);
	if (pl >= sizeof(parent_path))
		return;
	memcpy(parent_path, path, pl);
	parent_path[pl] = 0;
	bool oom = false;
	cJSON *parent = pl ? gk_op_pointer(root, parent_path, false, &oom) : root;
	segment(last, seg, sizeof(seg));
	if (cJSON_IsObject(parent)) {
		cJSON_DeleteItemFromObjectCaseSensitive(parent, seg);
	} else if (cJSON_IsArray(parent)) {
		int i = 0;
		cJSON *e;
		cJSON_ArrayForEach(e, parent) {
			cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
			if ((seg[0] == '@' && cJSON_IsString(n) && strcmp(n->valuestring, seg + 1) == 0) ||
			    (seg[0] != '@' && all_digits(seg) && atoi(seg) == i)) {
				cJSON_DeleteItemFromArray(parent, i);
				return;
			}
			i++;
		}
	}
}

void gk_opr_set(gk_opr *r, cJSON *root, const char *path, cJSON *v)
{
	if (!v) {
		r->oom = true;
		return;
	}
	if (!gk_op_pointer_set(root, path, v, &r->oom))
		r->oom = true;
}

void gk_opr_set_str(gk_opr *r, cJSON *root, const char *path, const char *s)
{
	gk_opr_set(r, root, path, gk_opr_str(r, s));
}

/* ---- objects ------------------------------------------------------------------------ */

void gk_opr_rule(gk_opr *r, gk_op_obj *o, int mode, const char *path)
{
	if (!o)
		return;
	gk_op_rule *nv = realloc(o->rules, (o->n_rules + 1) * sizeof(*nv));
	char *p = strdup(path);
	if (!nv || !p) {
		if (nv)
			o->rules = nv;
		free(p);
		r->oom = true;
		return;
	}
	o->rules = nv;
	o->rules[o->n_rules++] = (gk_op_rule){ .path = p, .mode = mode };
}

gk_op_obj *gk_opr_add(gk_opr *r, int component, const char *api_version, const char *kind, const char *resource,
		      const char *ns, const char *name, const char *tmpl)
{
	if (r->oom || !name)
		return NULL;
	gk_op_set *s = r->s;
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 16;
		gk_op_obj *nv = realloc(s->v, nc * sizeof(*nv));
		if (!nv) {
			r->oom = true;
			return NULL;
		}
		s->v = nv;
		s->cap = nc;
	}
	/* apiVersion and kind first, as kubectl prints them, then the template's fields */
	cJSON *j = cJSON_CreateObject();
	cJSON *t = tmpl ? gk_opr_template(r, tmpl) : NULL;
	if (!j || (tmpl && !t) || !cJSON_AddStringToObject(j, "apiVersion", api_version) ||
	    !cJSON_AddStringToObject(j, "kind", kind)) {
		cJSON_Delete(j);
		cJSON_Delete(t);
		r->oom = true;
		return NULL;
	}
	if (t) {
		cJSON_DeleteItemFromObjectCaseSensitive(t, "apiVersion");
		cJSON_DeleteItemFromObjectCaseSensitive(t, "kind");
		while (t->child)
			cJSON_AddItemToArray(j, cJSON_DetachItemViaPointer(t, t->child));
		cJSON_Delete(t);
	}
	gk_op_obj *o = &s->v[s->n];
	memset(o, 0, sizeof(*o));
	o->component = component;
	o->api_version = api_version;
	o->kind = kind;
	o->resource = resource;
	o->obj = j;
	o->name = strdup(name);
	o->ns = ns ? strdup(ns) : NULL;
	if (!o->name || (ns && !o->ns)) {
		free(o->name);
		free(o->ns);
		cJSON_Delete(j);
		r->oom = true;
		return NULL;
	}
	s->n++;
	cJSON *md = gk_opr_at(r, j, "/metadata");
	gk_opr_set_str(r, md, "/name", name);
	if (ns)
		gk_opr_set_str(r, md, "/namespace", ns);
	else
		cJSON_DeleteItemFromObjectCaseSensitive(md, "namespace");
	gk_opr_set_str(r, md, "/labels/" "app.kubernetes.io~1managed-by", GK_OP_MANAGED_BY_VALUE);
	cJSON *refs = cJSON_CreateArray(), *ref = cJSON_CreateObject();
	if (!refs || !ref || !cJSON_AddStringToObject(ref, "apiVersion", GK_POLICY_API_VERSION) ||
	    !cJSON_AddStringToObject(ref, "kind", GK_POLICY_KIND) || !cJSON_AddStringToObject(ref, "name", r->cpn) ||
	    !cJSON_AddStringToObject(ref, "uid",
				     r->cp->metadata && r->cp->metadata->uid ? r->cp->metadata->uid : "") ||
	    !cJSON_AddTrueToObject(ref, "controller") || !cJSON_AddTrueToObject(ref, "blockOwnerDeletion")) {
		cJSON_Delete(refs);
		cJSON_Delete(ref);
		r->oom = true;
		return o;
	}
	cJSON_AddItemToArray(refs, ref);
	gk_opr_set(r, md, "/ownerReferences", refs);
	return o;
}

/* ---- pod-spec pieces (operands.md §4) ----------------------------------------------------- */

cJSON *gk_opr_node_selector(gk_opr *r)
{
	char key[GK_POLICY_KEY_MAX];
	const char *ready = NULL;
	if (r->o->kmm && r->spec->kernel_module && gk_policy_ready_label(key, sizeof(key), r->ns, r->cpn) == 0)
		ready = key;
	gk_policy_selector sel = { 0 };
	if (gk_policy_node_selector(r->spec, ready, &sel) != 0) {
		r->oom = true;
		return NULL;
	}
	cJSON *o = cJSON_CreateObject();
	for (size_t i = 0; o && i < sel.n; i++)
		if (!cJSON_AddStringToObject(o, sel.kv[i]->key, sel.kv[i]->value ? sel.kv[i]->value : "")) {
			cJSON_Delete(o);
			o = NULL;
		}
	gk_policy_selector_free(&sel);
	if (!o)
		r->oom = true;
	return o;
}

/* The operands leave a node while its driver is replaced: a versioned,
 * gated policy's DaemonSets require gpukmm.io/upgrade-state not to be
 * unloading or loading (gpukmm-upgrader, ARCHITECTURE §5 "Driver upgrades");
 * the DaemonSet controller deletes their pods there and brings them back once
 * the new driver is confirmed. A policy without kernelModule (KMM served) keeps
 * them off the nodes that still carry its Module's ready label: dropping
 * kernelModule makes them leave before KMM unloads the out-of-tree driver they
 * hold open, and come back on the in-tree one once it is gone (ARCHITECTURE §5
 * "The operands leave before KMM unloads"). So does a policy whose Module is
 * being recreated (gk_policy_module_recreating): with the ready key in the node
 * selector as well, they run nowhere until the new Module is there. NULL
 * otherwise. */
cJSON *gk_opr_affinity(gk_opr *r)
{
	const Gpukmm__KernelModuleSpec *km = r->spec->kernel_module;
	char key[GK_POLICY_KEY_MAX];
	if (r->o->kmm && (!km || gk_policy_module_recreating(r->cp)) &&
	    gk_policy_ready_label(key, sizeof(key), r->ns, r->cpn) == 0) {
		char js[GK_POLICY_KEY_MAX + 192];
		snprintf(js, sizeof(js),
			 "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
			 "[{\"matchExpressions\":[{\"key\":\"%s\",\"operator\":\"DoesNotExist\"}]}]}}}",
			 key);
		cJSON *a = cJSON_Parse(js); /* the key: a label key, no quote or backslash */
		if (!a)
			r->oom = true;
		return a;
	}
	if (!r->o->kmm || !km || !km->version || !*km->version)
		return NULL;
	cJSON *a = cJSON_Parse("{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
			       "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"" GK_POLICY_UPGRADE_STATE_LABEL
			       "\",\"operator\":\"NotIn\",\"values\":[\"" GK_POLICY_UPGRADE_UNLOADING "\",\""
			       GK_POLICY_UPGRADE_LOADING "\"]}]}]}}}");
	if (!a)
		r->oom = true;
	return a;
}

cJSON *gk_opr_tolerations(gk_opr *r)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && i < r->spec->n_tolerations; i++) {
		const Gpukmm__Toleration *t = r->spec->tolerations[i];
		cJSON *o = cJSON_CreateObject();
		bool ok = o != NULL;
		if (ok && t->key)
			ok = cJSON_AddStringToObject(o, "key", t->key) != NULL;
		if (ok && t->operator_)
			ok = cJSON_AddStringToObject(o, "operator", t->operator_) != NULL;
		if (ok && t->value)
			ok = cJSON_AddStringToObject(o, "value", t->value) != NULL;
		if (ok && t->effect)
			ok = cJSON_AddStringToObject(o, "effect", t->effect) != NULL;
		if (ok && t->has_toleration_seconds)
			ok = cJSON_AddNumberToObject(o, "tolerationSeconds", (double)t->toleration_seconds) != NULL;
		if (!ok) {
			cJSON_Delete(o);
			cJSON_Delete(a);
			a = NULL;
			break;
		}
		cJSON_AddItemToArray(a, o);
	}
	if (!a)
		r->oom = true;
	return a;
}

static bool add_secret(cJSON *a, const char *name)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !cJSON_AddStringToObject(o, "name", name)) {
		cJSON_Delete(o);
		return false;
	}
	cJSON_AddItemToArray(a, o);
	return true;
}

cJSON *gk_opr_pull_secrets(gk_opr *r)
{
	const char *op = r->o->operator_secret;
	const char *ps = r->spec->pull_secret;
	bool has_op = op && *op, has_ps = ps != NULL;
	if (!has_op && !has_ps)
		return NULL;
	cJSON *a = cJSON_CreateArray();
	if (!a || (has_op && !add_secret(a, op)) || (has_ps && !add_secret(a, ps))) {
		cJSON_Delete(a);
		r->oom = true;
		return NULL;
	}
	return a;
}

void gk_opr_pod_common(gk_opr *r, gk_op_obj *o)
{
	if (!o)
		return;
	gk_opr_set(r, o->obj, "/spec/template/spec/nodeSelector", gk_opr_node_selector(r));
	gk_opr_rule(r, o, GK_OP_EXACT, "/spec/template/spec/nodeSelector");
	cJSON *aff = gk_opr_affinity(r);
	if (aff) {
		gk_opr_set(r, o->obj, "/spec/template/spec/affinity", aff);
		gk_opr_rule(r, o, GK_OP_EXACT, "/spec/template/spec/affinity");
	} else {
		gk_opr_rule(r, o, GK_OP_ABSENT, "/spec/template/spec/affinity");
	}
	/* the list is replaced whole, as upstream's patch does (an empty list = none) */
	if (r->spec->n_tolerations) {
		gk_opr_set(r, o->obj, "/spec/template/spec/tolerations", gk_opr_tolerations(r));
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/tolerations");
	} else {
		gk_opr_rule(r, o, GK_OP_ABSENT, "/spec/template/spec/tolerations");
	}
	cJSON *ps = gk_opr_pull_secrets(r);
	if (ps) {
		gk_opr_set(r, o->obj, "/spec/template/spec/imagePullSecrets", ps);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/imagePullSecrets");
	} else {
		gk_opr_rule(r, o, GK_OP_ABSENT, "/spec/template/spec/imagePullSecrets");
	}
}

int32_t gk_opr_level(const Gpukmm__ClusterPolicySpec *s, int32_t component_level, bool has)
{
	int32_t n = 0;
	if (s->has_log_level && s->log_level > n)
		n = s->log_level;
	if (has && component_level > n)
		n = component_level;
	return n;
}

int gk_op_ds_status(char *buf, size_t cap, const Gpukmm__DaemonSet *ds)
{
	if (!ds)
		return snprintf(buf, cap, "%s", GK_POLICY_STATUS_NA);
	return snprintf(buf, cap, "%d/%d", ds->has_number_ready ? ds->number_ready : 0,
			ds->has_desired_number_scheduled ? ds->desired_number_scheduled : 0);
}
