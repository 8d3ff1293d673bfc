/* kubesim — garbage collection by ownerReferences, the orphan/foregroundDeletion
 * finalizers and namespace termination. Runs with srv->mu held after writes that can
 * change the dependency graph, until nothing changes (bounded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "jsonutil.h"
#include "gpukmm/log.h"
#include "kubesim.h"

#define KS_GC_MAX_ROUNDS 16

/* A tiny open-addressing set of uid -> object state for one pass. */
struct owner {
	const char *uid;
	int deleting, orphan, foreground;
	int dependents;
};

struct uidmap {
	struct owner *v;
	size_t cap;
};

static size_t hash(const char *s)
{
	size_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct owner *um_get(struct uidmap *m, const char *uid, int insert)
{
	size_t i = hash(uid) & (m->cap - 1);
	for (;;) {
		if (!m->v[i].uid) {
			if (!insert)
				return NULL;
			m->v[i].uid = uid;
			return &m->v[i];
		}
		if (strcmp(m->v[i].uid, uid) == 0)
			return &m->v[i];
		i = (i + 1) & (m->cap - 1);
	}
}

static int has_fin(const cJSON *obj, const char *f)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "finalizers");
	const cJSON *it;
	cJSON_ArrayForEach(it, a) if (cJSON_IsString(it) && strcmp(it->valuestring, f) == 0) return 1;
	return 0;
}

static cJSON *without_fin(const cJSON *obj, const char *f)
{
	cJSON *n = cJSON_Duplicate(obj, 1);
	if (!n)
		return NULL;
	cJSON *a = cJSON_GetObjectItemCaseSensitive(ks_meta(n), "finalizers");
	for (int i = cJSON_GetArraySize(a) - 1; i >= 0; i--) {
		cJSON *it = cJSON_GetArrayItem(a, i);
		if (cJSON_IsString(it) && strcmp(it->valuestring, f) == 0)
			cJSON_DeleteItemFromArray(a, i);
	}
	if (cJSON_GetArraySize(a) == 0)
		cJSON_DeleteItemFromObjectCaseSensitive(ks_meta(n), "finalizers");
	return n;
}

struct action {
	int kind; /* 0 delete, 1 strip refs to orphaning owners, 2 drop finalizer, 3 remove (no finalizers) */
	const ks_rtype *t;
	char ns[256], name[256], fin[32];
};

static int one_round(ks_server *s)
{
	ks_store *st = &s->store;
	size_t cap = 64;
	while (cap < st->nobjs * 2 + 2)
		cap <<= 1;
	struct uidmap m = { calloc(cap, sizeof(struct owner)), cap };
	if (!m.v)
		return 0;
	/* pass 1: owners */
	for (int bi = 0; bi < st->nb; bi++) {
		ks_bucket *b = &st->b[bi];
		for (int i = 0; i < b->n; i++) {
			const ks_item *it = &b->items[i];
			if (!it->uid)
				continue;
			struct owner *o = um_get(&m, it->uid, 1);
			o->deleting = it->deleting;
			o->orphan = o->deleting && has_fin(it->obj, "orphan");
			o->foreground = o->deleting && has_fin(it->obj, "foregroundDeletion");
		}
	}
	/* pass 2: dependents decide; actions collected, applied after the scan */
	int nact = 0, capact = 64;
	struct action *acts = malloc(sizeof(*acts) * (size_t)capact);
	for (int bi = 0; acts && bi < st->nb; bi++) {
		ks_bucket *b = &st->b[bi];
		char grp[256], res[256];
		const char *slash = strchr(b->gr, '/');
		snprintf(grp, sizeof(grp), "%.*s", (int)(slash - b->gr), b->gr);
		snprintf(res, sizeof(res), "%s", slash + 1);
		const ks_rtype *t = ks_registry_find_gr(&s->reg, grp, res);
		if (!t)
			continue;
		for (int i = 0; i < b->n; i++) {
			const cJSON *refs = b->items[i].refs;
			if (!refs)
				continue;
			int nrefs = cJSON_GetArraySize(refs), dangling = 0, strip = 0, fg = 0;
			const cJSON *ref;
			cJSON_ArrayForEach(ref, refs) {
				const cJSON *u = cJSON_GetObjectItemCaseSensitive(ref, "uid");
				struct owner *o = cJSON_IsString(u) ? um_get(&m, u->valuestring, 0) : NULL;
				if (!o) {
					dangling++;
					continue;
				}
				o->dependents++;
				if (o->orphan)
					strip = 1;
				else if (o->foreground)
					fg = 1;
			}
			struct action a = { .t = t };
			if (strip)
				a.kind = 1;
			else if (!b->items[i].deleting && ((nrefs > 0 && dangling == nrefs) || fg))
				a.kind = 0;
			else
				continue;
			snprintf(a.ns, sizeof(a.ns), "%s", b->items[i].ns);
			snprintf(a.name, sizeof(a.name), "%s", b->items[i].name);
			if (nact == capact) {
				struct action *na = realloc(acts, sizeof(*acts) * (size_t)capact * 2);
				if (!na)
					break;
				acts = na;
				capact *= 2;
			}
			acts[nact++] = a;
		}
	}
	/* pass 3: owners whose orphan/foreground work is done drop the finalizer;
	 * terminating namespaces delete their content, then go */
	for (int bi = 0; acts && bi < st->nb; bi++) {
		ks_bucket *b = &st->b[bi];
		char grp[256], res[256];
		const char *slash = strchr(b->gr, '/');
		snprintf(grp, sizeof(grp), "%.*s", (int)(slash - b->gr), b->gr);
		snprintf(res, sizeof(res), "%s", slash + 1);
		const ks_rtype *t = ks_registry_find_gr(&s->reg, grp, res);
		if (!t)
			continue;
		int is_ns = !grp[0] && strcmp(res, "namespaces") == 0;
		for (int i = 0; i < b->n; i++) {
			if (!b->items[i].deleting || !b->items[i].uid)
				continue;
			const cJSON *obj = b->items[i].obj;
			struct owner *o = um_get(&m, b->items[i].uid, 0);
			if (!o || !o->deleting)
				continue;
			struct action a = { .t = t };
			snprintf(a.ns, sizeof(a.ns), "%s", b->items[i].ns);
			snprintf(a.name, sizeof(a.name), "%s", b->items[i].name);
			if (is_ns) {
				int content = 0;
				for (int bj = 0; bj < st->nb && !content; bj++)
					for (int k = 0; k < st->b[bj].n && !content; k++)
						if (strcmp(st->b[bj].items[k].ns, b->items[i].name) == 0)
							content = 1;
				if (content) {
					for (int bj = 0; bj < st->nb; bj++) {
						char g2[256], r2[256];
						const char *sl = strchr(st->b[bj].gr, '/');
						snprintf(g2, sizeof(g2), "%.*s", (int)(sl - st->b[bj].gr), st->b[bj].gr);
						snprintf(r2, sizeof(r2), "%s", sl + 1);
						const ks_rtype *t2 = ks_registry_find_gr(&s->reg, g2, r2);
						for (int k = 0; t2 && k < st->b[bj].n; k++) {
							if (strcmp(st->b[bj].items[k].ns, b->items[i].name) != 0)
								continue;
							if (st->b[bj].items[k].deleting)
								continue;
							struct action d = { .kind = 0, .t = t2 };
							snprintf(d.ns, sizeof(d.ns), "%s", st->b[bj].items[k].ns);
							snprintf(d.name, sizeof(d.name), "%s", st->b[bj].items[k].name);
							if (nact == capact) {
								struct action *na =
									realloc(acts, sizeof(*acts) * (size_t)capact * 2);
								if (!na)
									goto apply;
								acts = na;
								capact *= 2;
							}
							acts[nact++] = d;
						}
					}
					continue;
				}
			}
			if (o->orphan && o->dependents == 0)
				snprintf(a.fin, sizeof(a.fin), "orphan");
			else if (o->foreground && o->dependents == 0)
				snprintf(a.fin, sizeof(a.fin), "foregroundDeletion");
			const cJSON *gps = cJSON_GetObjectItemCaseSensitive(ks_meta((cJSON *)obj), "deletionGracePeriodSeconds");
			if (a.fin[0])
				a.kind = 2;
			else if (cJSON_IsNumber(gps) && gps->valuedouble > 0)
				continue; /* a graceful deletion: the kubelet removes it */
			else if (!cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ks_meta((cJSON *)obj), "finalizers")))
				a.kind = 3;
			else
				continue;
			if (nact == capact) {
				struct action *na = realloc(acts, sizeof(*acts) * (size_t)capact * 2);
				if (!na)
					goto apply;
				acts = na;
				capact *= 2;
			}
			acts[nact++] = a;
		}
	}
apply:;
	int changed = 0;
	for (int i = 0; acts && i < nact; i++) {
		struct action *a = &acts[i];
		ks_item *it = ks_store_get(st, a->t->group, a->t->resource, a->ns, a->name);
		if (!it)
			continue;
		if (a->kind == 0) {
			ks_api_delete_locked(s, a->t, a->ns, a->name, "Background");
			changed = 1;
		} else if (a->kind == 1) {
			cJSON *n = cJSON_Duplicate(it->obj, 1);
			if (!n)
				continue;
			cJSON *refs = cJSON_GetObjectItemCaseSensitive(ks_meta(n), "ownerReferences");
			for (int k = cJSON_GetArraySize(refs) - 1; k >= 0; k--) {
				const cJSON *u = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(refs, k), "uid");
				struct owner *o = cJSON_IsString(u) ? um_get(&m, u->valuestring, 0) : NULL;
				if (o && o->orphan)
					cJSON_DeleteItemFromArray(refs, k);
			}
			if (cJSON_GetArraySize(refs) == 0)
				cJSON_DeleteItemFromObjectCaseSensitive(ks_meta(n), "ownerReferences");
			ks_store_put(st, a->t->group, a->t->resource, a->ns, a->name, n);
			changed = 1;
		} else if (a->kind == 2) {
			cJSON *n = without_fin(it->obj, a->fin);
			if (!n)
				continue;
			int gone = !cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ks_meta(n), "finalizers"));
			ks_store_put(st, a->t->group, a->t->resource, a->ns, a->name, n);
			if (gone)
				ks_store_remove(st, a->t->group, a->t->resource, a->ns, a->name);
			changed = 1;
		} else {
			cJSON *copy = NULL;
			if (strcmp(a->t->resource, "customresourcedefinitions") == 0)
				copy = cJSON_Duplicate(it->obj, 1);
			ks_store_remove(st, a->t->group, a->t->resource, a->ns, a->name);
			if (copy) {
				ks_crd_uninstall(s, copy);
				cJSON_Delete(copy);
			}
			changed = 1;
		}
	}
	free(acts);
	free(m.v);
	return changed;
}

void ks_gc_run(ks_server *s)
{
	s->stats.gc_runs++;
	for (int i = 0; i < KS_GC_MAX_ROUNDS; i++) {
		int changed = one_round(s);
		changed |= ks_crd_finalize(s);
		if (!changed)
			break;
	}
	ks_ns_termination(s);
	s->dirty = 1;
}
