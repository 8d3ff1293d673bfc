/* kubesim — --state-dir: every object and the resourceVersion counter in one JSON
 * file (state.json), written atomically (temp file + rename), loaded at start. CRDs
 * are re-installed on load so their kinds are served again. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpukmm/log.h"
#include "kubesim.h"

int ks_state_save(ks_server *s, const char *dir, gk_err *err)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	char rv[32];
	snprintf(rv, sizeof(rv), "%" PRIu64, s->store.rv);
	cJSON_AddStringToObject(j, "resourceVersion", rv);
	cJSON *buckets = cJSON_AddObjectToObject(j, "objects");
	for (int i = 0; buckets && i < s->store.nb; i++) {
		cJSON *arr = cJSON_AddArrayToObject(buckets, s->store.b[i].gr);
		for (int k = 0; arr && k < s->store.b[i].n; k++)
			cJSON_AddItemReferenceToArray(arr, s->store.b[i].items[k].obj);
	}
	char *txt = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (!txt)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	char path[4096], tmp[4200];
	snprintf(path, sizeof(path), "%s/state.json", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(txt);
		return gk_err_set(err, GK_UNAVAILABLE, "open %s: %s", tmp, strerror(errno));
	}
	size_t len = strlen(txt), off = 0;
	while (off < len) {
		ssize_t w = write(fd, txt + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = errno;
			close(fd);
			free(txt);
			unlink(tmp);
			return gk_err_set(err, GK_UNAVAILABLE, "write %s: %s", tmp, strerror(e));
		}
		off += (size_t)w;
	}
	free(txt);
	if (fsync(fd) || close(fd) || rename(tmp, path)) {
		int e = errno;
		unlink(tmp);
		return gk_err_set(err, GK_UNAVAILABLE, "save %s: %s", path, strerror(e));
	}
	s->dirty = 0;
	return 0;
}

int ks_state_load(ks_server *s, const char *dir, gk_err *err)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/state.json", dir);
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		return gk_err_set(err, GK_UNAVAILABLE, "open %s: %s", path, strerror(errno));
	}
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 65536 > cap) {
			cap = cap ? cap * 2 : 1 << 20;
			char *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
			}
			buf = nb;
		}
		size_t r = fread(buf + len, 1, cap - len, f);
		len += r;
		if (r == 0)
			break;
	}
	fclose(f);
	cJSON *j = cJSON_ParseWithLength(buf, len);
	free(buf);
	if (!j)
		return gk_err_set(err, GK_DATA_LOSS, "%s: not valid JSON", path);
	const cJSON *objs = cJSON_GetObjectItemCaseSensitive(j, "objects");
	/* CRDs first so their kinds exist */
	const cJSON *crds = cJSON_GetObjectItemCaseSensitive(objs, "apiextensions.k8s.io/customresourcedefinitions");
	const cJSON *o;
	cJSON_ArrayForEach(o, crds) {
		cJSON *c = cJSON_Duplicate(o, 1);
		gk_err e = { 0 };
		if (c && ks_crd_check(c, &e) == 0 && ks_crd_install(s, c, &e) == 0)
			ks_store_put(&s->store, "apiextensions.k8s.io", "customresourcedefinitions", "",
				     ks_meta_str(c, "name"), c);
		else {
			GK_WARN("state: skipping CRD: %s", e.msg);
			cJSON_Delete(c);
		}
	}
	const cJSON *b;
	cJSON_ArrayForEach(b, objs) {
		if (b == crds)
			continue;
		const char *slash = strchr(b->string, '/');
		if (!slash)
			continue;
		char grp[256];
		snprintf(grp, sizeof(grp), "%.*s", (int)(slash - b->string), b->string);
		cJSON_ArrayForEach(o, b) {
			const char *name = ks_meta_str(o, "name");
			const char *ns = ks_meta_str(o, "namespace");
			cJSON *c = name ? cJSON_Duplicate(o, 1) : NULL;
			if (c)
				ks_store_put(&s->store, grp, slash + 1, ns ? ns : "", name, c);
		}
	}
	/* objects keep their stored resourceVersions; the counter resumes past them */
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(j, "resourceVersion");
	uint64_t saved = cJSON_IsString(rv) ? strtoull(rv->valuestring, NULL, 10) : 0;
	/* restore original RVs (put re-stamped them) */
	cJSON_ArrayForEach(b, objs) {
		const char *slash = strchr(b->string, '/');
		if (!slash)
			continue;
		char grp[256];
		snprintf(grp, sizeof(grp), "%.*s", (int)(slash - b->string), b->string);
		cJSON_ArrayForEach(o, b) {
			const char *name = ks_meta_str(o, "name");
			const char *ns = ks_meta_str(o, "namespace");
			const char *orv = ks_meta_str(o, "resourceVersion");
			ks_item *it = name ? ks_store_get(&s->store, grp, slash + 1, ns ? ns : "", name) : NULL;
			if (it && orv) {
				cJSON *m = ks_meta(it->obj);
				cJSON_ReplaceItemInObjectCaseSensitive(m, "resourceVersion", cJSON_CreateString(orv));
				/* the blob is the object as stored: lists are written from it */
				ks_blob *nb = ks_blob_new(it->ns, it->obj);
				if (nb) {
					ks_blob_unref(it->blob);
					it->blob = nb;
				}
			}
		}
	}
	if (saved > s->store.rv)
		s->store.rv = saved;
	/* history from before the restart is gone: watchers must relist */
	ks_store_compact(&s->store);
	cJSON_Delete(j);
	GK_INFO("state loaded from %s: %" PRIu64 " objects, resourceVersion %" PRIu64, path, s->store.nobjs,
		s->store.rv);
	return 0;
}
