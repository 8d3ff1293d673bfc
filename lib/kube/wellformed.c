/* Is an answer of HTTP 200 really what was asked for? (the safety rule,
 * ARCHITECTURE.md §4: an absence counts only when a successful, well-formed
 * read shows it). A proxy, an aggregated API server or a bug can answer 200
 * with `{}`, `null`, a Status or half a document; read as a list, any of
 * those is an empty cluster, and every cached object would be "deleted". */
#include <stdio.h>
#include <string.h>

#include "gpukmm/kube.h"

/* "group/version" as apiVersion spells it ("v1" for the core group). */
static void api_version(char *buf, size_t cap, const char *group, const char *version)
{
	if (group && *group)
		snprintf(buf, cap, "%s/%s", group, version ? version : "");
	else
		snprintf(buf, cap, "%s", version ? version : "");
}

static const char *type_name(const cJSON *j)
{
	return !j ? "nothing" : cJSON_IsNull(j) ? "null" : cJSON_IsObject(j) ? "an object" :
	       cJSON_IsArray(j) ? "an array" : cJSON_IsString(j) ? "a string" :
	       cJSON_IsNumber(j) ? "a number" : "a boolean";
}

/* kind / apiVersion, when present, must be the expected ones. */
static int check_kind(const cJSON *j, const char *what, const char *want_suffix, const char *want_kind,
		      const char *gv, gk_err *err)
{
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
	const cJSON *av = cJSON_GetObjectItemCaseSensitive(j, "apiVersion");
	if (kind) {
		if (!cJSON_IsString(kind))
			return gk_err_set(err, GK_INTERNAL, "%s: kind is %s", what, type_name(kind));
		size_t kl = strlen(kind->valuestring), sl = want_suffix ? strlen(want_suffix) : 0;
		bool ok = want_kind ? !strcmp(kind->valuestring, want_kind)
				    : kl > sl && !strcmp(kind->valuestring + kl - sl, want_suffix);
		if (!ok)
			return gk_err_set(err, GK_INTERNAL, "%s: kind is \"%.64s\"", what, kind->valuestring);
	}
	if (av && gv && (!cJSON_IsString(av) || strcmp(av->valuestring, gv) != 0))
		return gk_err_set(err, GK_INTERNAL, "%s: apiVersion is \"%.64s\", not %s", what,
				  cJSON_IsString(av) ? av->valuestring : type_name(av), gv);
	return GK_OK;
}

int gk_kube_check_list(const cJSON *j, const char *group, const char *version, gk_err *err)
{
	char gv[256], what[360];
	api_version(gv, sizeof gv, group, version);
	snprintf(what, sizeof what, "the %s list answer is not a list", gv);
	if (!cJSON_IsObject(j))
		return gk_err_set(err, GK_INTERNAL, "%s: the body is %s", what, type_name(j));
	int rc = check_kind(j, what, "List", NULL, gv, err);
	if (rc)
		return rc;
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
	if (!cJSON_IsArray(items))
		return gk_err_set(err, GK_INTERNAL, "%s: items is %s", what, type_name(items));
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(j, "metadata");
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
	if (!cJSON_IsString(rv) || !rv->valuestring[0])
		return gk_err_set(err, GK_INTERNAL, "%s: no metadata.resourceVersion", what);
	const cJSON *cont = cJSON_GetObjectItemCaseSensitive(md, "continue");
	if (cont && !cJSON_IsString(cont))
		return gk_err_set(err, GK_INTERNAL, "%s: metadata.continue is %s", what, type_name(cont));
	const cJSON *it;
	int i = 0;
	cJSON_ArrayForEach(it, items) {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(it, "metadata"), "name");
		if (!cJSON_IsObject(it))
			return gk_err_set(err, GK_INTERNAL, "%s: items[%d] is %s", what, i, type_name(it));
		if (!cJSON_IsString(name) || !name->valuestring[0])
			return gk_err_set(err, GK_INTERNAL, "%s: items[%d] has no metadata.name", what, i);
		i++;
	}
	return GK_OK;
}

int gk_kube_check_resource_list(const cJSON *j, const char *group, const char *version, gk_err *err)
{
	char gv[256], what[360];
	api_version(gv, sizeof gv, group, version);
	snprintf(what, sizeof what, "the %s discovery answer is not an APIResourceList", gv);
	if (!cJSON_IsObject(j))
		return gk_err_set(err, GK_INTERNAL, "%s: the body is %s", what, type_name(j));
	int rc = check_kind(j, what, NULL, "APIResourceList", NULL, err);
	if (rc)
		return rc;
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "groupVersion");
	if (!cJSON_IsString(g) || strcmp(g->valuestring, gv) != 0)
		return gk_err_set(err, GK_INTERNAL, "%s: groupVersion is %s%.64s%s", what,
				  cJSON_IsString(g) ? "\"" : "", cJSON_IsString(g) ? g->valuestring : type_name(g),
				  cJSON_IsString(g) ? "\"" : "");
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "resources"), *it;
	if (!cJSON_IsArray(res))
		return gk_err_set(err, GK_INTERNAL, "%s: resources is %s", what, type_name(res));
	int i = 0;
	cJSON_ArrayForEach(it, res) {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
		if (!cJSON_IsObject(it) || !cJSON_IsString(name) || !name->valuestring[0])
			return gk_err_set(err, GK_INTERNAL, "%s: resources[%d] has no name", what, i);
		i++;
	}
	return GK_OK;
}
