/* kubesim — RBAC rule evaluation (see rbac.h). */
#include "rbac.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cp(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strnlen(src, cap - 1) : 0;
	memcpy(dst, src ? src : "", n);
	dst[n] = 0;
}

static int truthy(const char *v)
{
	return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "True") == 0 ||
		     strcmp(v, "TRUE") == 0 || strcmp(v, "t") == 0 || strcmp(v, "T") == 0);
}

/* path.IsValidPathSegmentName: not "." or "..", no '/' or '%'. */
static int path_segment_ok(const char *s)
{
	return *s && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') && !strchr(s, '%');
}

/* fields.Selector.RequiresExactMatch("metadata.name") of a field selector string. */
static int selector_name(const char *sel, char *out, size_t cap)
{
	if (!sel)
		return 0;
	const char *p = sel;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		char term[512];
		if (n < sizeof(term)) {
			memcpy(term, p, n);
			term[n] = 0;
			const char *v = NULL;
			if (strncmp(term, "metadata.name==", 15) == 0)
				v = term + 15;
			else if (strncmp(term, "metadata.name=", 14) == 0)
				v = term + 14;
			if (v) {
				cp(out, cap, v);
				return 1;
			}
		}
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

void ks_rbac_attrs(const ks_req *r, const ks_route *rt, ks_attrs *a)
{
	memset(a, 0, sizeof(*a));
	const char *m = r->method ? r->method : "";
	if (!rt || rt->kind != KS_ROUTE_RESOURCE) {
		size_t i = 0;
		for (; m[i] && i + 1 < sizeof(a->verb); i++)
			a->verb[i] = (char)tolower((unsigned char)m[i]);
		a->verb[i] = 0;
		cp(a->path, sizeof(a->path), r->path);
		return;
	}
	a->resource_request = 1;
	cp(a->group, sizeof(a->group), rt->group);
	cp(a->resource, sizeof(a->resource), rt->resource);
	cp(a->sub, sizeof(a->sub), rt->sub);
	cp(a->name, sizeof(a->name), rt->name);
	cp(a->ns, sizeof(a->ns), rt->ns);
	/* /api/v1/namespaces/NAME: the namespace is the object itself */
	if (!rt->group[0] && strcmp(rt->resource, "namespaces") == 0 && rt->name[0])
		cp(a->ns, sizeof(a->ns), rt->name);
	const char *verb = "";
	if (rt->watch_prefix)
		verb = "watch";
	else if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
		verb = "get";
	else if (strcmp(m, "POST") == 0)
		verb = "create";
	else if (strcmp(m, "PUT") == 0)
		verb = "update";
	else if (strcmp(m, "PATCH") == 0)
		verb = "patch";
	else if (strcmp(m, "DELETE") == 0)
		verb = "delete";
	if (!a->name[0] && strcmp(verb, "get") == 0) {
		verb = truthy(ks_req_param(r, "watch")) ? "watch" : "list";
		char n[256];
		if (selector_name(ks_req_param(r, "fieldSelector"), n, sizeof(n)) && path_segment_ok(n))
			cp(a->name, sizeof(a->name), n);
	}
	if (!a->name[0] && strcmp(verb, "delete") == 0)
		verb = "deletecollection";
	cp(a->verb, sizeof(a->verb), verb);
}

static int has(const cJSON *arr, const char *v)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, arr) {
		if (cJSON_IsString(e) && strcmp(e->valuestring, v) == 0)
			return 1;
	}
	return 0;
}

static const cJSON *field(const cJSON *rule, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(rule, k);
}

static int verb_matches(const cJSON *rule, const char *verb)
{
	const cJSON *v = field(rule, "verbs");
	return has(v, "*") || has(v, verb);
}

static int resource_matches(const cJSON *rule, const char *combined, const char *sub)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, field(rule, "resources")) {
		if (!cJSON_IsString(e))
			continue;
		const char *rr = e->valuestring;
		if (strcmp(rr, "*") == 0 || strcmp(rr, combined) == 0)
			return 1;
		if (sub[0] && strncmp(rr, "*/", 2) == 0 && strcmp(rr + 2, sub) == 0)
			return 1;
	}
	return 0;
}

static int name_matches(const cJSON *rule, const char *name)
{
	const cJSON *n = field(rule, "resourceNames");
	return cJSON_GetArraySize(n) == 0 || has(n, name);
}

static int url_matches(const cJSON *rule, const char *path)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, field(rule, "nonResourceURLs")) {
		if (!cJSON_IsString(e))
			continue;
		const char *u = e->valuestring;
		size_t n = strlen(u);
		if (strcmp(u, "*") == 0 || strcmp(u, path) == 0 || (n && u[n - 1] == '*' && strncmp(u, path, n - 1) == 0))
			return 1;
	}
	return 0;
}

int ks_rbac_rule_allows(const cJSON *rule, const ks_attrs *a)
{
	if (!a->resource_request)
		return verb_matches(rule, a->verb) && url_matches(rule, a->path);
	char combined[200];
	snprintf(combined, sizeof(combined), "%s%s%s", a->resource, a->sub[0] ? "/" : "", a->sub);
	const cJSON *g = field(rule, "apiGroups");
	return verb_matches(rule, a->verb) && (has(g, "*") || has(g, a->group)) &&
	       resource_matches(rule, combined, a->sub) && name_matches(rule, a->name);
}

int ks_user_in_group(const ks_user *u, const char *group)
{
	for (int i = 0; i < u->ngroups; i++)
		if (strcmp(u->groups[i], group) == 0)
			return 1;
	return 0;
}

int ks_rbac_subject_applies(const cJSON *subj, const ks_user *u, const char *binding_ns)
{
	const cJSON *k = field(subj, "kind"), *n = field(subj, "name"), *ns = field(subj, "namespace");
	if (!cJSON_IsString(k) || !cJSON_IsString(n))
		return 0;
	if (strcmp(k->valuestring, "User") == 0)
		return strcmp(u->name, n->valuestring) == 0;
	if (strcmp(k->valuestring, "Group") == 0)
		return ks_user_in_group(u, n->valuestring);
	if (strcmp(k->valuestring, "ServiceAccount") == 0) {
		const char *sns = cJSON_IsString(ns) && ns->valuestring[0] ? ns->valuestring : binding_ns;
		if (!sns || !*sns)
			return 0;
		char want[600];
		snprintf(want, sizeof(want), "system:serviceaccount:%s:%s", sns, n->valuestring);
		return strcmp(u->name, want) == 0;
	}
	return 0;
}

/* ---- escalation: Covers ---------------------------------------------------- */

static int has_all(const cJSON *set, const cJSON *want)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, want) {
		if (!cJSON_IsString(e) || !has(set, e->valuestring))
			return 0;
	}
	return 1;
}

static int resource_covers_all(const cJSON *set, const cJSON *want)
{
	if (has(set, "*") || has_all(set, want))
		return 1;
	const cJSON *e;
	cJSON_ArrayForEach(e, want) {
		if (!cJSON_IsString(e))
			return 0;
		const char *p = e->valuestring;
		if (has(set, p))
			continue;
		const char *slash = strchr(p, '/');
		if (!slash)
			return 0;
		char star[200];
		snprintf(star, sizeof(star), "*%s", slash);
		if (!has(set, star))
			return 0;
	}
	return 1;
}

static int url_covers(const char *owner, const char *sub)
{
	size_t n = strlen(owner);
	return strcmp(owner, sub) == 0 || (n && owner[n - 1] == '*' && strncmp(owner, sub, n - 1) == 0);
}

static int urls_cover_all(const cJSON *set, const cJSON *want)
{
	const cJSON *w, *o;
	cJSON_ArrayForEach(w, want) {
		int ok = 0;
		cJSON_ArrayForEach(o, set) {
			if (cJSON_IsString(o) && cJSON_IsString(w) && url_covers(o->valuestring, w->valuestring)) {
				ok = 1;
				break;
			}
		}
		if (!ok)
			return 0;
	}
	return 1;
}

static int rule_covers(const cJSON *owner, const cJSON *sub)
{
	const cJSON *ov = field(owner, "verbs"), *og = field(owner, "apiGroups"), *on = field(owner, "resourceNames");
	const cJSON *sn = field(sub, "resourceNames");
	int verbs = has(ov, "*") || has_all(ov, field(sub, "verbs"));
	int groups = has(og, "*") || has_all(og, field(sub, "apiGroups"));
	int res = resource_covers_all(field(owner, "resources"), field(sub, "resources"));
	int urls = urls_cover_all(field(owner, "nonResourceURLs"), field(sub, "nonResourceURLs"));
	int names = cJSON_GetArraySize(sn) == 0 ? cJSON_GetArraySize(on) == 0
						: (cJSON_GetArraySize(on) == 0 || has_all(on, sn));
	return verbs && groups && res && urls && names;
}

static cJSON *one(const char *v)
{
	const char *a[] = { v };
	return cJSON_CreateStringArray(a, 1);
}

/* One atomic rule: each list with at most one element. */
static cJSON *atom(const char *group, const char *res, const char *name, const char *url, const char *verb)
{
	cJSON *r = cJSON_CreateObject();
	if (!r)
		return NULL;
	int ok = 1;
	if (group)
		ok &= cJSON_AddItemToObject(r, "apiGroups", one(group));
	if (res)
		ok &= cJSON_AddItemToObject(r, "resources", one(res));
	if (name)
		ok &= cJSON_AddItemToObject(r, "resourceNames", one(name));
	if (url)
		ok &= cJSON_AddItemToObject(r, "nonResourceURLs", one(url));
	ok &= cJSON_AddItemToObject(r, "verbs", one(verb));
	if (!ok) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}

/* BreakdownRule: appends the rule's atomic rules to out; 0 on OOM. */
static int breakdown(const cJSON *rule, cJSON *out)
{
	const cJSON *g, *r, *n, *v, *u;
	cJSON_ArrayForEach(g, field(rule, "apiGroups")) {
		cJSON_ArrayForEach(r, field(rule, "resources")) {
			cJSON_ArrayForEach(v, field(rule, "verbs")) {
				if (!cJSON_IsString(g) || !cJSON_IsString(r) || !cJSON_IsString(v))
					continue;
				if (cJSON_GetArraySize(field(rule, "resourceNames")) == 0) {
					cJSON *a = atom(g->valuestring, r->valuestring, NULL, NULL, v->valuestring);
					if (!a || !cJSON_AddItemToArray(out, a))
						return 0;
				}
				cJSON_ArrayForEach(n, field(rule, "resourceNames")) {
					if (!cJSON_IsString(n))
						continue;
					cJSON *a = atom(g->valuestring, r->valuestring, n->valuestring, NULL, v->valuestring);
					if (!a || !cJSON_AddItemToArray(out, a))
						return 0;
				}
			}
		}
	}
	cJSON_ArrayForEach(u, field(rule, "nonResourceURLs")) {
		cJSON_ArrayForEach(v, field(rule, "verbs")) {
			if (!cJSON_IsString(u) || !cJSON_IsString(v))
				continue;
			cJSON *a = atom(NULL, NULL, NULL, u->valuestring, v->valuestring);
			if (!a || !cJSON_AddItemToArray(out, a))
				return 0;
		}
	}
	return 1;
}

static const char *first(const cJSON *rule, const char *k)
{
	const cJSON *a = cJSON_GetArrayItem(field(rule, k), 0);
	return cJSON_IsString(a) ? a->valuestring : NULL;
}

static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* CompactRules: atomic resource rules that differ only by verb become one rule
 * (non-resource ones stay as they are). */
static cJSON *compact(const cJSON *atoms)
{
	cJSON *out = cJSON_CreateArray();
	const cJSON *a;
	cJSON_ArrayForEach(a, atoms) {
		if (!out)
			return NULL;
		cJSON *m = NULL, *x, *pool = first(a, "nonResourceURLs") ? NULL : out;
		cJSON_ArrayForEach(x, pool) {
			if (same(first(x, "apiGroups"), first(a, "apiGroups")) &&
			    same(first(x, "resources"), first(a, "resources")) &&
			    same(first(x, "resourceNames"), first(a, "resourceNames")) &&
			    same(first(x, "nonResourceURLs"), first(a, "nonResourceURLs"))) {
				m = x;
				break;
			}
		}
		const char *verb = first(a, "verbs");
		if (m) {
			cJSON *vs = cJSON_GetObjectItemCaseSensitive(m, "verbs");
			if (verb && !has(vs, verb) && !cJSON_AddItemToArray(vs, cJSON_CreateString(verb))) {
				cJSON_Delete(out);
				return NULL;
			}
		} else {
			cJSON *d = cJSON_Duplicate(a, 1);
			if (!d || !cJSON_AddItemToArray(out, d)) {
				cJSON_Delete(d);
				cJSON_Delete(out);
				return NULL;
			}
		}
	}
	return out;
}

int ks_rbac_covers(const cJSON *owner, const cJSON *servant, cJSON **missing)
{
	if (missing)
		*missing = NULL;
	cJSON *atoms = cJSON_CreateArray(), *left = cJSON_CreateArray();
	int ok = atoms && left;
	const cJSON *r;
	cJSON_ArrayForEach(r, servant) {
		if (ok && !breakdown(r, atoms))
			ok = 0;
	}
	const cJSON *a, *o;
	cJSON_ArrayForEach(a, atoms) {
		if (!ok)
			break;
		int covered = 0;
		cJSON_ArrayForEach(o, owner) {
			if (rule_covers(o, a)) {
				covered = 1;
				break;
			}
		}
		if (!covered) {
			cJSON *d = cJSON_Duplicate(a, 1);
			if (!d || !cJSON_AddItemToArray(left, d)) {
				cJSON_Delete(d);
				ok = 0;
			}
		}
	}
	int covered = ok && cJSON_GetArraySize(left) == 0;
	if (!covered && missing)
		*missing = ok ? compact(left) : NULL;
	cJSON_Delete(atoms);
	cJSON_Delete(left);
	return covered;
}

/* ---- messages ---------------------------------------------------------------- */

void ks_rbac_quote_list(const char *const *v, int n, char *buf, size_t cap)
{
	size_t o = 0;
	o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, "[");
	for (int i = 0; i < n; i++)
		o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, "%s\"%s\"", i ? " " : "", v[i]);
	snprintf(buf + (o < cap ? o : cap - 1), o < cap ? cap - o : 1, "]");
}

static void quote_json(const cJSON *arr, char *buf, size_t cap)
{
	const char *v[64];
	int n = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, arr) {
		if (cJSON_IsString(e) && n < 64)
			v[n++] = e->valuestring;
	}
	ks_rbac_quote_list(v, n, buf, cap);
}

void ks_rbac_compact_string(const cJSON *rule, char *buf, size_t cap)
{
	static const char *const keys[] = { "apiGroups", "resources", "nonResourceURLs", "resourceNames", "verbs" };
	static const char *const names[] = { "APIGroups", "Resources", "NonResourceURLs", "ResourceNames", "Verbs" };
	size_t o = (size_t)snprintf(buf, cap, "{");
	int any = 0;
	for (size_t i = 0; i < 5 && o < cap; i++) {
		const cJSON *a = field(rule, keys[i]);
		if (cJSON_GetArraySize(a) == 0)
			continue;
		char q[512];
		quote_json(a, q, sizeof(q));
		o += (size_t)snprintf(buf + o, cap - o, "%s%s:%s", any ? ", " : "", names[i], q);
		any = 1;
	}
	if (o < cap)
		snprintf(buf + o, cap - o, "}");
}

void ks_rbac_denial(const ks_user *u, const ks_attrs *a, char *buf, size_t cap)
{
	if (!a->resource_request) {
		snprintf(buf, cap, "User \"%s\" cannot %s path \"%s\"", u->name, a->verb, a->path);
		return;
	}
	char res[200];
	snprintf(res, sizeof(res), "%s%s%s", a->resource, a->sub[0] ? "/" : "", a->sub);
	if (a->ns[0])
		snprintf(buf, cap, "User \"%s\" cannot %s resource \"%s\" in API group \"%s\" in the namespace \"%s\"",
			 u->name, a->verb, res, a->group, a->ns);
	else
		snprintf(buf, cap, "User \"%s\" cannot %s resource \"%s\" in API group \"%s\" at the cluster scope",
			 u->name, a->verb, res, a->group);
}

void ks_rbac_forbid(ks_resp *out, const ks_user *u, const ks_attrs *a, const char *reason)
{
	char msg[1200];
	ks_rbac_denial(u, a, msg, sizeof(msg));
	const char *sep = reason && *reason ? ": " : "";
	const char *rs = reason ? reason : "";
	if (!a->resource_request) {
		ks_resp_status(out, 403, "Forbidden", NULL, NULL, NULL, NULL, "forbidden: %s%s%s", msg, sep, rs);
		return;
	}
	char gr[300];
	snprintf(gr, sizeof(gr), "%s%s%s", a->resource, a->group[0] ? "." : "", a->group);
	if (a->name[0])
		ks_resp_status(out, 403, "Forbidden", a->resource, a->name, a->group, NULL, "%s \"%s\" is forbidden: %s%s%s",
			       gr, a->name, msg, sep, rs);
	else
		ks_resp_status(out, 403, "Forbidden", a->resource, NULL, a->group, NULL, "%s is forbidden: %s%s%s", gr,
			       msg, sep, rs);
}
