/* Discovery: is group/version/resource served? One GET of the group-version's
 * APIResourceList, cached per group/version with a TTL (a missing group is
 * cached as absent too, so a watcher re-checking every few seconds costs one
 * request per TTL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DISC_MAX 64

struct gk_kube_disc_entry {
	gk_kube_disc_entry *next;
	char *gv;            /* "group/version" or "v1" */
	char **resources;    /* served resource names (including subresources "x/status") */
	bool *namespaced;    /* ... and whether each is namespaced */
	size_t n;
	bool present;
	int64_t fetched_ms;
};

static void entry_free(gk_kube_disc_entry *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->resources[i]);
	free(e->resources);
	free(e->namespaced);
	free(e->gv);
	free(e);
}

void gk_kube__disc_free(gk_kube_client *c)
{
	while (c->disc) {
		gk_kube_disc_entry *n = c->disc->next;
		entry_free(c->disc);
		c->disc = n;
	}
}

/* The entry for "group/version", created if missing (NULL: out of memory). */
static gk_kube_disc_entry *entry_of(gk_kube_client *c, const char *group, const char *version,
				    bool *created)
{
	char gv[256];
	snprintf(gv, sizeof gv, "%s/%s", group ? group : "", version);
	gk_kube_disc_entry *e = c->disc;
	size_t count = 0;
	*created = false;
	for (; e; e = e->next, count++)
		if (!strcmp(e->gv, gv))
			return e;
	if (count >= DISC_MAX)
		gk_kube__disc_free(c); /* bounded: start over */
	e = calloc(1, sizeof *e);
	if (!e || !(e->gv = strdup(gv))) {
		free(e);
		return NULL;
	}
	e->next = c->disc;
	c->disc = e;
	*created = true;
	return e;
}

/* Fill e from a finished GET of the group-version (rc its code, j its body).
 * Only a 404 or a well-formed APIResourceList of that group-version changes
 * the entry: an error or a 200 that is something else (`{}`, a Status, a
 * proxy's page) is an error and leaves the last answer as it was. */
static int store(gk_kube_disc_entry *e, const char *group, const char *version, int rc, const cJSON *j,
		 gk_err *err)
{
	if (rc && rc != GK_NOT_FOUND) {
		e->fetched_ms = 0; /* retry next time */
		return rc;
	}
	if (!rc && gk_kube_check_resource_list(j, group, version, err)) {
		e->fetched_ms = 0;
		return GK_INTERNAL;
	}
	const cJSON *res = rc ? NULL : cJSON_GetObjectItemCaseSensitive(j, "resources"), *it;
	size_t n = (size_t)cJSON_GetArraySize(res);
	char **names = calloc(n ? n : 1, sizeof *names);
	bool *namespaced = calloc(n ? n : 1, sizeof *namespaced);
	if (!names || !namespaced) {
		free(names);
		free(namespaced);
		e->fetched_ms = 0;
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	for (size_t i = 0; i < e->n; i++)
		free(e->resources[i]);
	free(e->resources);
	free(e->namespaced);
	e->resources = names;
	e->namespaced = namespaced;
	e->n = 0;
	cJSON_ArrayForEach(it, res) {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
		if (cJSON_IsString(name) && e->n < n && (e->resources[e->n] = strdup(name->valuestring))) {
			e->namespaced[e->n] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "namespaced"));
			e->n++;
		}
	}
	e->present = rc == 0;
	e->fetched_ms = gk_kube__mono_ms();
	return 0;
}

static int answer(const gk_kube_disc_entry *e, const char *resource)
{
	if (!e->present)
		return 0;
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->resources[i], resource))
			return 1;
	return 0;
}

int gk_kube__disc_store(gk_kube_client *c, const char *group, const char *version, int rc,
			const cJSON *j, gk_err *err)
{
	bool created;
	gk_kube_disc_entry *e = entry_of(c, group, version, &created);
	if (!e)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	return store(e, group, version, rc, j, err);
}

int gk_kube_disc_namespaced(gk_kube_client *c, const char *group, const char *version, const char *resource)
{
	for (gk_kube_disc_entry *e = c->disc; e; e = e->next) {
		char gv[256];
		snprintf(gv, sizeof gv, "%s/%s", group ? group : "", version);
		if (strcmp(e->gv, gv) != 0)
			continue;
		for (size_t i = 0; e->present && i < e->n; i++)
			if (!strcmp(e->resources[i], resource))
				return e->namespaced[i] ? 1 : 0;
		return -1;
	}
	return -1;
}

int gk_kube__disc_lookup(gk_kube_client *c, const char *group, const char *version,
			 const char *resource)
{
	bool created;
	gk_kube_disc_entry *e = entry_of(c, group, version, &created);
	return e ? answer(e, resource) : 0;
}

static int fetch(gk_kube_client *c, const char *group, const char *version,
		 gk_kube_disc_entry *e, gk_err *err)
{
	char p[512];
	if (group && *group)
		snprintf(p, sizeof p, "/apis/%s/%s", group, version);
	else
		snprintf(p, sizeof p, "/api/%s", version);
	cJSON *j = NULL;
	gk_kube_status st;
	gk_err lerr = {0};
	int rc = gk_kube_request(c, "GET", p, NULL, NULL, 0, &j, &st, &lerr);
	int r = store(e, group, version, rc, j, &lerr);
	cJSON_Delete(j);
	if (r && err)
		*err = lerr;
	return r;
}

int gk_kube_discover(gk_kube_client *c, const char *group, const char *version,
		     const char *resource, int64_t ttl_ms, bool refresh, gk_err *err)
{
	if (!version || !resource)
		return -gk_err_set(err, GK_INVALID_ARGUMENT, "discover: version and resource needed");
	if (ttl_ms <= 0)
		ttl_ms = 30000;
	bool created;
	gk_kube_disc_entry *e = entry_of(c, group, version, &created);
	if (!e)
		return -gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	if (created || refresh || gk_kube__mono_ms() - e->fetched_ms >= ttl_ms) {
		int rc = fetch(c, group, version, e, err);
		if (rc)
			return -rc;
	}
	return answer(e, resource);
}
