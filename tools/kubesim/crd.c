/* kubesim — CustomResourceDefinitions: shape checks, registration of the kinds they
 * define (established synchronously), removal with their objects. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/log.h"
#include "kubesim.h"

static const char *str_at(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int ks_crd_check(const cJSON *crd, gk_err *err)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(crd, "spec");
	if (!cJSON_IsObject(spec))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "spec: Required value");
	const char *group = str_at(spec, "group");
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(spec, "names");
	const char *plural = str_at(names, "plural"), *kind = str_at(names, "kind");
	const char *scope = str_at(spec, "scope");
	if (!group || !*group)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "spec.group: Required value");
	if (!plural || !*plural || !kind || !*kind)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "spec.names.plural, spec.names.kind: Required value");
	if (!scope || (strcmp(scope, "Namespaced") && strcmp(scope, "Cluster")))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "spec.scope: Unsupported value: supported values: "
							   "\"Cluster\", \"Namespaced\"");
	char want[512];
	snprintf(want, sizeof(want), "%s.%s", plural, group);
	const char *name = ks_meta_str(crd, "name");
	if (!name || strcmp(name, want) != 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "metadata.name: Invalid value: \"%s\": must be spec.names.plural+\".\"+spec.group",
				  name ? name : "");
	const cJSON *versions = cJSON_GetObjectItemCaseSensitive(spec, "versions");
	if (!cJSON_IsArray(versions) || cJSON_GetArraySize(versions) == 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "spec.versions: Invalid value: must have exactly one version marked as storage version");
	int storage = 0;
	const cJSON *v;
	cJSON_ArrayForEach(v, versions) {
		if (!str_at(v, "name"))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "spec.versions[].name: Required value");
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "storage")))
			storage++;
		const cJSON *sch = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v, "schema"),
								   "openAPIV3Schema");
		if (!cJSON_IsObject(sch))
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "spec.versions[].schema.openAPIV3Schema: Required value: schemas are required");
	}
	if (storage != 1)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "spec.versions: Invalid value: must have exactly one version marked as storage version");
	return 0;
}

static int count_cel(const cJSON *sch)
{
	int n = 0;
	if (!sch)
		return 0;
	if (cJSON_IsObject(sch)) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(sch, "x-kubernetes-validations");
		n += cJSON_GetArraySize(v);
	}
	const cJSON *c;
	cJSON_ArrayForEach(c, sch) {
		if (c->string && strcmp(c->string, "x-kubernetes-validations") == 0)
			continue;
		if (cJSON_IsObject(c) || cJSON_IsArray(c))
			n += count_cel(c);
	}
	return n;
}

static cJSON *condition(const char *type, const char *reason, const char *msg, const char *ts)
{
	cJSON *c = cJSON_CreateObject();
	if (c) {
		cJSON_AddStringToObject(c, "type", type);
		cJSON_AddStringToObject(c, "status", "True");
		cJSON_AddStringToObject(c, "lastTransitionTime", ts);
		cJSON_AddStringToObject(c, "reason", reason);
		cJSON_AddStringToObject(c, "message", msg);
	}
	return c;
}

static char *csv(const cJSON *arr)
{
	char buf[512] = "";
	size_t used = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr) {
		if (cJSON_IsString(it) && used < sizeof(buf))
			used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s", used ? "," : "", it->valuestring);
	}
	return used ? strdup(buf) : NULL;
}

int ks_crd_install(ks_server *s, cJSON *crd, gk_err *err)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(crd, "spec");
	const char *name = ks_meta_str(crd, "name");
	const char *group = str_at(spec, "group");
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(spec, "names");
	const char *plural = str_at(names, "plural"), *kind = str_at(names, "kind");
	const char *singular = str_at(names, "singular");
	const char *list_kind = str_at(names, "listKind");
	int namespaced = strcmp(str_at(spec, "scope"), "Namespaced") == 0;
	/* names must not collide with another CRD's or a built-in's */
	for (int i = 0; i < s->reg.n; i++) {
		const ks_rtype *t = s->reg.v[i];
		if (strcmp(t->group, group) == 0 && strcmp(t->resource, plural) == 0 &&
		    (!t->crd_name || strcmp(t->crd_name, name) != 0))
			return gk_err_set(err, GK_ALREADY_EXISTS, "spec.names.plural: Invalid value: \"%s\": already in use",
					  plural);
	}
	ks_rtype *nt[16];
	int nn = 0;
	const cJSON *v;
	int cel = 0;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(spec, "versions")) {
		if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(v, "served")))
			continue;
		if (nn >= 16)
			break;
		ks_rtype *t = calloc(1, sizeof(*t));
		if (!t)
			goto oom;
		nt[nn++] = t;
		char lk[256];
		snprintf(lk, sizeof(lk), "%sList", kind);
		char sing[256];
		snprintf(sing, sizeof(sing), "%s", singular ? singular : kind);
		for (char *p = sing; *p; p++)
			if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p - 'A' + 'a');
		t->group = strdup(group);
		t->version = strdup(str_at(v, "name"));
		t->resource = strdup(plural);
		t->singular = strdup(sing);
		t->kind = strdup(kind);
		t->list_kind = strdup(list_kind ? list_kind : lk);
		t->short_names = csv(cJSON_GetObjectItemCaseSensitive(names, "shortNames"));
		t->categories = csv(cJSON_GetObjectItemCaseSensitive(names, "categories"));
		t->crd_name = strdup(name);
		t->namespaced = namespaced;
		t->is_crd = 1;
		t->storage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "storage"));
		const cJSON *subs = cJSON_GetObjectItemCaseSensitive(v, "subresources");
		t->has_status = cJSON_HasObjectItem(subs, "status");
		const cJSON *sch = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v, "schema"),
								   "openAPIV3Schema");
		t->schema = cJSON_Duplicate(sch, 1);
		const cJSON *cols = cJSON_GetObjectItemCaseSensitive(v, "additionalPrinterColumns");
		if (cJSON_IsArray(cols) && !(t->columns = cJSON_Duplicate(cols, 1)))
			goto oom;
		cel += count_cel(sch);
		if (!t->group || !t->version || !t->resource || !t->singular || !t->kind || !t->list_kind ||
		    !t->crd_name || !t->schema)
			goto oom;
	}
	/* status: the API server's controllers set these; kubesim establishes at once */
	char ts[40];
	ks_now_rfc3339(ts, sizeof(ts));
	cJSON *st = cJSON_CreateObject();
	if (!st)
		goto oom;
	cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
	if (conds) {
		cJSON_AddItemToArray(conds, condition("NamesAccepted", "NoConflicts", "no conflicts found", ts));
		cJSON_AddItemToArray(conds, condition("Established", "InitialNamesAccepted",
						      "the initial names have been accepted", ts));
	}
	cJSON_AddItemToObject(st, "acceptedNames", cJSON_Duplicate(names, 1));
	cJSON *stored = cJSON_AddArrayToObject(st, "storedVersions");
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(spec, "versions")) {
		if (stored && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "storage")))
			cJSON_AddItemToArray(stored, cJSON_CreateString(str_at(v, "name")));
	}
	/* a CRD being deleted keeps its Terminating condition (finalize.c) */
	const cJSON *oc;
	cJSON_ArrayForEach(oc, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(crd, "status"), "conditions")) {
		const cJSON *ty = cJSON_GetObjectItemCaseSensitive(oc, "type");
		if (conds && cJSON_IsString(ty) && strcmp(ty->valuestring, "Terminating") == 0)
			cJSON_AddItemToArray(conds, cJSON_Duplicate(oc, 1));
	}
	cJSON_DeleteItemFromObjectCaseSensitive(crd, "status");
	cJSON_AddItemToObject(crd, "status", st);
	ks_registry_remove_crd(&s->reg, name);
	for (int i = 0; i < nn; i++)
		if (ks_registry_add(&s->reg, nt[i]))
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	if (cel)
		GK_WARN("CRD %s: %d x-kubernetes-validations (CEL) rule%s skipped: kubesim does not evaluate CEL", name,
			cel, cel > 1 ? "s" : "");
	GK_INFO("CRD %s established (%d served version%s)", name, nn, nn == 1 ? "" : "s");
	return 0;
oom:
	for (int i = 0; i < nn; i++)
		ks_rtype_free(nt[i]);
	return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
}

void ks_crd_uninstall(ks_server *s, const cJSON *crd)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(crd, "spec");
	const char *group = str_at(spec, "group");
	const char *plural = str_at(cJSON_GetObjectItemCaseSensitive(spec, "names"), "plural");
	const char *name = ks_meta_str(crd, "name");
	if (!group || !plural || !name)
		return;
	ks_bucket *b = ks_store_bucket(&s->store, group, plural, 0);
	while (b && b->n > 0) {
		char ns[256], nm[256];
		snprintf(ns, sizeof(ns), "%s", b->items[b->n - 1].ns);
		snprintf(nm, sizeof(nm), "%s", b->items[b->n - 1].name);
		if (ks_store_remove(&s->store, group, plural, ns, nm))
			break;
	}
	ks_registry_remove_crd(&s->reg, name);
	GK_INFO("CRD %s removed with its objects", name);
}
