/* Relist diff: keys the cache knows that the fresh list no longer has get a
 * synthesised DELETE. Pure; O((n+m) log(n+m)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kube.h"

static int cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

long gk_kube_relist_gone(const char *const *old, size_t n_old, const char *const *cur,
			 size_t n_cur, void (*fn)(void *user, const char *key), void *user)
{
	const char **a = malloc((n_old ? n_old : 1) * sizeof *a);
	const char **b = malloc((n_cur ? n_cur : 1) * sizeof *b);
	if (!a || !b) {
		free(a);
		free(b);
		return -1;
	}
	if (n_old)
		memcpy(a, old, n_old * sizeof *a);
	if (n_cur)
		memcpy(b, cur, n_cur * sizeof *b);
	qsort(a, n_old, sizeof *a, cmp);
	qsort(b, n_cur, sizeof *b, cmp);
	long gone = 0;
	size_t j = 0;
	for (size_t i = 0; i < n_old; i++) {
		if (i && !strcmp(a[i], a[i - 1]))
			continue; /* duplicate in old */
		while (j < n_cur && strcmp(b[j], a[i]) < 0)
			j++;
		if (j < n_cur && !strcmp(b[j], a[i]))
			continue;
		gone++;
		if (fn)
			fn(user, a[i]);
	}
	free(a);
	free(b);
	return gone;
}

char *gk_kube_obj_key(const cJSON *obj)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(md, "name");
	const cJSON *ns = cJSON_GetObjectItemCaseSensitive(md, "namespace");
	if (!cJSON_IsString(name) || !name->valuestring[0])
		return NULL;
	char *k;
	int r;
	if (cJSON_IsString(ns) && ns->valuestring[0])
		r = asprintf(&k, "%s/%s", ns->valuestring, name->valuestring);
	else
		r = asprintf(&k, "%s", name->valuestring);
	return r < 0 ? NULL : k;
}
