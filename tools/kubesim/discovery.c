/* kubesim — discovery (/api, /apis: legacy lists, or aggregated APIGroupDiscoveryList
 * when the client asks for it in Accept) and the OpenAPI v3 documents kubectl needs
 * to send fieldValidation=Strict instead of validating client-side. All called with
 * no lock held; they take srv->mu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim.h"
#include "versions.h"

static const char *verbs_all[] = { "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch" };

static cJSON *str_array(const char *csv)
{
	cJSON *a = cJSON_CreateArray();
	if (!a || !csv)
		return a;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", csv);
	char *save = NULL;
	for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
		cJSON_AddItemToArray(a, cJSON_CreateString(p));
	return a;
}

static cJSON *verbs(void)
{
	return cJSON_CreateStringArray(verbs_all, (int)(sizeof(verbs_all) / sizeof(verbs_all[0])));
}

/* Distinct (group, version) pairs in registry order. */
struct gv {
	const char *group, *version;
};

static int collect_gvs(const ks_registry *r, struct gv *out, int cap)
{
	int n = 0;
	for (int i = 0; i < r->n; i++) {
		int seen = 0;
		for (int j = 0; j < n; j++)
			if (strcmp(out[j].group, r->v[i]->group) == 0 && strcmp(out[j].version, r->v[i]->version) == 0)
				seen = 1;
		if (!seen && n < cap) {
			out[n].group = r->v[i]->group;
			out[n].version = r->v[i]->version;
			n++;
		}
	}
	return n;
}

/* One entry of an aggregated resource's subresources list. */
static void agg_sub(cJSON *o, const char *name, const char *group, const char *version, const char *kind,
		    const char *const *verbs, int nverbs)
{
	cJSON *subs = cJSON_GetObjectItemCaseSensitive(o, "subresources");
	if (!subs)
		subs = cJSON_AddArrayToObject(o, "subresources");
	cJSON *sr = cJSON_CreateObject();
	cJSON *rk = sr ? cJSON_AddObjectToObject(sr, "responseKind") : NULL;
	if (!subs || !rk) {
		cJSON_Delete(sr);
		return;
	}
	cJSON_AddStringToObject(sr, "subresource", name);
	cJSON_AddStringToObject(rk, "group", group);
	cJSON_AddStringToObject(rk, "version", version);
	cJSON_AddStringToObject(rk, "kind", kind);
	cJSON_AddItemToObject(sr, "verbs", cJSON_CreateStringArray((const char **)verbs, nverbs));
	cJSON_AddItemToArray(subs, sr);
}

static cJSON *agg_resources(const ks_registry *r, const char *group, const char *version)
{
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; arr && i < r->n; i++) {
		const ks_rtype *t = r->v[i];
		if (strcmp(t->group, group) || strcmp(t->version, version))
			continue;
		cJSON *o = cJSON_CreateObject();
		if (!o)
			break;
		cJSON_AddStringToObject(o, "resource", t->resource);
		cJSON *rk = cJSON_AddObjectToObject(o, "responseKind");
		if (rk) {
			cJSON_AddStringToObject(rk, "group", t->group);
			cJSON_AddStringToObject(rk, "version", t->version);
			cJSON_AddStringToObject(rk, "kind", t->kind);
		}
		cJSON_AddStringToObject(o, "scope", t->namespaced ? "Namespaced" : "Cluster");
		cJSON_AddStringToObject(o, "singularResource", t->singular);
		cJSON_AddItemToObject(o, "verbs", verbs());
		if (t->short_names)
			cJSON_AddItemToObject(o, "shortNames", str_array(t->short_names));
		if (t->categories)
			cJSON_AddItemToObject(o, "categories", str_array(t->categories));
		if (!t->group[0] && strcmp(t->resource, "pods") == 0) {
			static const char *const ev[] = { "create" }; /* pods/eviction creates a policy/v1 Eviction */
			agg_sub(o, "eviction", "policy", "v1", "Eviction", ev, 1);
		}
		if (t->has_status) {
			static const char *const sv[] = { "get", "patch", "update" };
			agg_sub(o, "status", t->group, t->version, t->kind, sv, 3);
		}
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

/* Aggregated discovery document for core (core=1) or the named groups. */
static cJSON *aggregated(ks_server *s, int core)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "kind", "APIGroupDiscoveryList");
	cJSON_AddStringToObject(j, "apiVersion", "apidiscovery.k8s.io/v2");
	cJSON_AddObjectToObject(j, "metadata");
	cJSON *items = cJSON_AddArrayToObject(j, "items");
	pthread_mutex_lock(&s->mu);
	struct gv gvs[128];
	int n = collect_gvs(&s->reg, gvs, 128);
	for (int i = 0; items && i < n; i++) {
		if ((gvs[i].group[0] == 0) != core)
			continue;
		/* one item per group, versions in registry order */
		cJSON *grp = NULL;
		cJSON *it;
		cJSON_ArrayForEach(it, items) {
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(it, "metadata"),
									  "name");
			if (cJSON_IsString(nm) && strcmp(nm->valuestring, gvs[i].group) == 0)
				grp = it;
		}
		if (!grp) {
			grp = cJSON_CreateObject();
			if (!grp)
				break;
			cJSON *md = cJSON_AddObjectToObject(grp, "metadata");
			if (md)
				cJSON_AddStringToObject(md, "name", gvs[i].group);
			cJSON_AddArrayToObject(grp, "versions");
			cJSON_AddItemToArray(items, grp);
		}
		cJSON *vo = cJSON_CreateObject();
		if (!vo)
			break;
		cJSON_AddStringToObject(vo, "version", gvs[i].version);
		cJSON_AddItemToObject(vo, "resources", agg_resources(&s->reg, gvs[i].group, gvs[i].version));
		cJSON_AddStringToObject(vo, "freshness", "Current");
		cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(grp, "versions"), vo);
	}
	pthread_mutex_unlock(&s->mu);
	return j;
}

cJSON *ks_discovery_api(ks_server *s, int agg)
{
	if (agg)
		return aggregated(s, 1);
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "kind", "APIVersions");
	const char *v[] = { "v1" };
	cJSON_AddItemToObject(j, "versions", cJSON_CreateStringArray(v, 1));
	cJSON *sa = cJSON_AddArrayToObject(j, "serverAddressByClientCIDRs");
	cJSON *e = cJSON_CreateObject();
	if (sa && e) {
		cJSON_AddStringToObject(e, "clientCIDR", "0.0.0.0/0");
		cJSON_AddStringToObject(e, "serverAddress", s->server_addr);
		cJSON_AddItemToArray(sa, e);
	} else {
		cJSON_Delete(e);
	}
	return j;
}

cJSON *ks_discovery_apis(ks_server *s, int agg)
{
	if (agg)
		return aggregated(s, 0);
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "kind", "APIGroupList");
	cJSON_AddStringToObject(j, "apiVersion", "v1");
	cJSON *groups = cJSON_AddArrayToObject(j, "groups");
	pthread_mutex_lock(&s->mu);
	struct gv gvs[128];
	int n = collect_gvs(&s->reg, gvs, 128);
	for (int i = 0; groups && i < n; i++) {
		if (!gvs[i].group[0])
			continue;
		cJSON *g = NULL, *it;
		cJSON_ArrayForEach(it, groups) {
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
			if (strcmp(nm->valuestring, gvs[i].group) == 0)
				g = it;
		}
		char gvs_s[256];
		snprintf(gvs_s, sizeof(gvs_s), "%s/%s", gvs[i].group, gvs[i].version);
		cJSON *ver = cJSON_CreateObject();
		if (!ver)
			break;
		cJSON_AddStringToObject(ver, "groupVersion", gvs_s);
		cJSON_AddStringToObject(ver, "version", gvs[i].version);
		if (!g) {
			g = cJSON_CreateObject();
			if (!g) {
				cJSON_Delete(ver);
				break;
			}
			cJSON_AddStringToObject(g, "name", gvs[i].group);
			cJSON_AddArrayToObject(g, "versions");
			cJSON_AddItemToObject(g, "preferredVersion", cJSON_Duplicate(ver, 1));
			cJSON_AddItemToArray(groups, g);
		}
		cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(g, "versions"), ver);
	}
	pthread_mutex_unlock(&s->mu);
	return j;
}

cJSON *ks_discovery_gv(ks_server *s, const char *group, const char *version)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	char gv[256];
	if (group[0])
		snprintf(gv, sizeof(gv), "%s/%s", group, version);
	else
		snprintf(gv, sizeof(gv), "%s", version);
	cJSON_AddStringToObject(j, "kind", "APIResourceList");
	cJSON_AddStringToObject(j, "apiVersion", "v1");
	cJSON_AddStringToObject(j, "groupVersion", gv);
	cJSON *res = cJSON_AddArrayToObject(j, "resources");
	int found = 0;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; res && i < s->reg.n; i++) {
		const ks_rtype *t = s->reg.v[i];
		if (strcmp(t->group, group) || strcmp(t->version, version))
			continue;
		found = 1;
		cJSON *o = cJSON_CreateObject();
		if (!o)
			break;
		cJSON_AddStringToObject(o, "name", t->resource);
		cJSON_AddStringToObject(o, "singularName", t->singular);
		cJSON_AddBoolToObject(o, "namespaced", t->namespaced);
		cJSON_AddStringToObject(o, "kind", t->kind);
		cJSON_AddItemToObject(o, "verbs", verbs());
		if (t->short_names)
			cJSON_AddItemToObject(o, "shortNames", str_array(t->short_names));
		if (t->categories)
			cJSON_AddItemToObject(o, "categories", str_array(t->categories));
		cJSON_AddItemToArray(res, o);
		if (!t->group[0] && strcmp(t->resource, "pods") == 0) {
			cJSON *ev = cJSON_CreateObject();
			if (!ev)
				break;
			cJSON_AddStringToObject(ev, "name", "pods/eviction");
			cJSON_AddStringToObject(ev, "singularName", "");
			cJSON_AddBoolToObject(ev, "namespaced", 1);
			cJSON_AddStringToObject(ev, "group", "policy");
			cJSON_AddStringToObject(ev, "version", "v1");
			cJSON_AddStringToObject(ev, "kind", "Eviction");
			const char *cv[] = { "create" };
			cJSON_AddItemToObject(ev, "verbs", cJSON_CreateStringArray(cv, 1));
			cJSON_AddItemToArray(res, ev);
		}
		if (t->has_status) {
			cJSON *st = cJSON_CreateObject();
			if (!st)
				break;
			char nm[200];
			snprintf(nm, sizeof(nm), "%s/status", t->resource);
			cJSON_AddStringToObject(st, "name", nm);
			cJSON_AddStringToObject(st, "singularName", "");
			cJSON_AddBoolToObject(st, "namespaced", t->namespaced);
			cJSON_AddStringToObject(st, "kind", t->kind);
			const char *sv[] = { "get", "patch", "update" };
			cJSON_AddItemToObject(st, "verbs", cJSON_CreateStringArray(sv, 3));
			cJSON_AddItemToArray(res, st);
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (!found) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* ---- OpenAPI v3 ------------------------------------------------------------ */
static void gv_hash(ks_server *s, const char *group, const char *version, char *out, size_t cap)
{
	/* changes whenever the set of types of the group-version changes */
	unsigned long h = 5381;
	for (int i = 0; i < s->reg.n; i++) {
		const ks_rtype *t = s->reg.v[i];
		if (strcmp(t->group, group) || strcmp(t->version, version))
			continue;
		for (const char *p = t->resource; *p; p++)
			h = h * 33 + (unsigned char)*p;
		if (t->schema) {
			char *js = cJSON_PrintUnformatted(t->schema);
			for (const char *p = js; p && *p; p++)
				h = h * 33 + (unsigned char)*p;
			free(js);
		}
	}
	snprintf(out, cap, "%016lX", h);
}

cJSON *ks_openapi_root(ks_server *s)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *paths = j ? cJSON_AddObjectToObject(j, "paths") : NULL;
	if (!paths)
		return j;
	pthread_mutex_lock(&s->mu);
	struct gv gvs[128];
	int n = collect_gvs(&s->reg, gvs, 128);
	for (int i = 0; i < n; i++) {
		char key[256], url[512], h[32];
		if (gvs[i].group[0])
			snprintf(key, sizeof(key), "apis/%s/%s", gvs[i].group, gvs[i].version);
		else
			snprintf(key, sizeof(key), "api/%s", gvs[i].version);
		gv_hash(s, gvs[i].group, gvs[i].version, h, sizeof(h));
		snprintf(url, sizeof(url), "/openapi/v3/%s?hash=%s", key, h);
		cJSON *e = cJSON_CreateObject();
		if (!e)
			break;
		cJSON_AddStringToObject(e, "serverRelativeURL", url);
		cJSON_AddItemToObject(paths, key, e);
	}
	pthread_mutex_unlock(&s->mu);
	return j;
}

static cJSON *gvk(const ks_rtype *t)
{
	cJSON *o = cJSON_CreateObject();
	if (o) {
		cJSON_AddStringToObject(o, "group", t->group);
		cJSON_AddStringToObject(o, "version", t->version);
		cJSON_AddStringToObject(o, "kind", t->kind);
	}
	return o;
}

static cJSON *operation(const ks_rtype *t, const char *action, const char *schema_ref, int field_validation)
{
	cJSON *op = cJSON_CreateObject();
	if (!op)
		return NULL;
	char id[256];
	snprintf(id, sizeof(id), "%s%s", action, t->kind);
	cJSON_AddStringToObject(op, "operationId", id);
	cJSON_AddStringToObject(op, "x-kubernetes-action", action);
	cJSON_AddItemToObject(op, "x-kubernetes-group-version-kind", gvk(t));
	cJSON *params = cJSON_AddArrayToObject(op, "parameters");
	const char *names[] = { "dryRun", "fieldManager", "fieldValidation", "force" };
	for (int i = 0; params && i < (field_validation ? 4 : 0); i++) {
		cJSON *p = cJSON_CreateObject();
		if (!p)
			break;
		cJSON_AddStringToObject(p, "name", names[i]);
		cJSON_AddStringToObject(p, "in", "query");
		cJSON *sch = cJSON_AddObjectToObject(p, "schema");
		if (sch)
			cJSON_AddStringToObject(sch, "type", i == 3 ? "boolean" : "string");
		cJSON_AddItemToArray(params, p);
	}
	cJSON *resp = cJSON_AddObjectToObject(op, "responses");
	cJSON *ok = resp ? cJSON_AddObjectToObject(resp, "200") : NULL;
	if (ok) {
		cJSON_AddStringToObject(ok, "description", "OK");
		cJSON *content = cJSON_AddObjectToObject(ok, "content");
		cJSON *aj = content ? cJSON_AddObjectToObject(content, "application/json") : NULL;
		cJSON *sch = aj ? cJSON_AddObjectToObject(aj, "schema") : NULL;
		if (sch)
			cJSON_AddStringToObject(sch, "$ref", schema_ref);
	}
	return op;
}

static void schema_name(const ks_rtype *t, char *buf, size_t cap)
{
	/* reverse-DNS like the API server: io.k8s.api.core.v1.Node, or group reversed */
	char rev[256] = "";
	if (!t->group[0]) {
		snprintf(rev, sizeof(rev), "io.k8s.api.core");
	} else {
		char g[200];
		snprintf(g, sizeof(g), "%s", t->group);
		char *parts[32];
		int n = 0;
		char *save = NULL;
		for (char *p = strtok_r(g, ".", &save); p && n < 32; p = strtok_r(NULL, ".", &save))
			parts[n++] = p;
		size_t used = 0;
		for (int i = n - 1; i >= 0; i--)
			used += (size_t)snprintf(rev + used, sizeof(rev) - (used < sizeof(rev) ? used : sizeof(rev)),
						 "%s%s", parts[i], i ? "." : "");
	}
	snprintf(buf, cap, "%s.%s.%s", rev, t->version, t->kind);
}

cJSON *ks_openapi_gv(ks_server *s, const char *group, const char *version)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "openapi", "3.0.0");
	cJSON *info = cJSON_AddObjectToObject(j, "info");
	if (info) {
		cJSON_AddStringToObject(info, "title", "Kubernetes");
		cJSON_AddStringToObject(info, "version", ks_version_git(s));
	}
	cJSON *paths = cJSON_AddObjectToObject(j, "paths");
	cJSON *comp = cJSON_AddObjectToObject(j, "components");
	cJSON *schemas = comp ? cJSON_AddObjectToObject(comp, "schemas") : NULL;
	int found = 0;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; paths && schemas && i < s->reg.n; i++) {
		const ks_rtype *t = s->reg.v[i];
		if (strcmp(t->group, group) || strcmp(t->version, version))
			continue;
		found = 1;
		char sname[300], ref[400], base[400], item[500];
		schema_name(t, sname, sizeof(sname));
		snprintf(ref, sizeof(ref), "#/components/schemas/%s", sname);
		if (group[0])
			snprintf(base, sizeof(base), "/apis/%s/%s/%s%s", group, version,
				 t->namespaced ? "namespaces/{namespace}/" : "", t->resource);
		else
			snprintf(base, sizeof(base), "/api/%s/%s%s", version, t->namespaced ? "namespaces/{namespace}/" : "",
				 t->resource);
		snprintf(item, sizeof(item), "%s/{name}", base);
		cJSON *coll = cJSON_CreateObject(), *obj = cJSON_CreateObject();
		if (!coll || !obj) {
			cJSON_Delete(coll);
			cJSON_Delete(obj);
			break;
		}
		cJSON_AddItemToObject(coll, "get", operation(t, "list", ref, 0));
		cJSON_AddItemToObject(coll, "post", operation(t, "post", ref, 1));
		cJSON_AddItemToObject(obj, "get", operation(t, "get", ref, 0));
		cJSON_AddItemToObject(obj, "put", operation(t, "put", ref, 1));
		cJSON_AddItemToObject(obj, "patch", operation(t, "patch", ref, 1));
		cJSON_AddItemToObject(obj, "delete", operation(t, "delete", ref, 0));
		cJSON_AddItemToObject(paths, base, coll);
		cJSON_AddItemToObject(paths, item, obj);
		cJSON *sch = t->schema ? cJSON_Duplicate(t->schema, 1) : cJSON_CreateObject();
		if (!sch)
			break;
		if (!t->schema) {
			cJSON_AddStringToObject(sch, "type", "object");
			cJSON_AddBoolToObject(sch, "x-kubernetes-preserve-unknown-fields", 1);
		}
		cJSON *g = cJSON_CreateArray();
		if (g) {
			cJSON_AddItemToArray(g, gvk(t));
			cJSON_DeleteItemFromObjectCaseSensitive(sch, "x-kubernetes-group-version-kind");
			cJSON_AddItemToObject(sch, "x-kubernetes-group-version-kind", g);
		}
		cJSON_AddItemToObject(schemas, sname, sch);
	}
	pthread_mutex_unlock(&s->mu);
	if (!found) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}
