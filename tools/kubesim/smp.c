/* kubesim — strategic merge patch (application/strategic-merge-patch+json), the
 * way the API server applies it to built-in kinds (k8s.io/apimachinery
 * strategicpatch with MergeParallelList and IgnoreUnmatchedNulls):
 *   - the patch strategy of a list comes from the Go struct tags of the kind's type
 *     (table below): lists without patchStrategy:"merge" are replaced whole (Node
 *     spec.taints, tolerations, ...), merge lists are merged by their patchMergeKey
 *     (containers by name, conditions by type, ...) or as a set of scalars
 *     (finalizers, podCIDRs);
 *   - directives: "$patch": replace|delete on maps and list items, "$retainKeys",
 *     "$setElementOrder/<list>", "$deleteFromPrimitiveList/<list>";
 *   - the order of a merged list: items named by the patch (or its
 *     $setElementOrder) in that order, interleaved with the server-only items in
 *     their live order (normalizeElementOrder + mergeSortedSlice).
 * Directive keys and nulls left inside added values are dropped, as decoding into
 * the typed object does. */
#include "patch.h"
#include "jsonutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SMP_ATOMIC = 0, SMP_MERGE = 1 };

/* Type graph: (type, field) -> (type of the field / its items, strategy, merge key).
 * Only fields that lead to a merge list are listed; everything else is a struct or
 * map (merged key by key) or an atomic list. */
static const struct smp_field {
	const char *type, *field, *child;
	int strategy;
	const char *key; /* NULL for lists of scalars */
} fields[] = {
	{ "ObjectMeta", "finalizers", NULL, SMP_MERGE, NULL },
	{ "ObjectMeta", "ownerReferences", NULL, SMP_MERGE, "uid" },
	{ "Node", "spec", "NodeSpec", 0, NULL },
	{ "Node", "status", "NodeStatus", 0, NULL },
	{ "NodeSpec", "podCIDRs", NULL, SMP_MERGE, NULL },
	{ "NodeStatus", "conditions", NULL, SMP_MERGE, "type" },
	{ "NodeStatus", "addresses", NULL, SMP_MERGE, "type" },
	{ "Pod", "spec", "PodSpec", 0, NULL },
	{ "Pod", "status", "PodStatus", 0, NULL },
	{ "PodStatus", "conditions", NULL, SMP_MERGE, "type" },
	{ "PodStatus", "podIPs", NULL, SMP_MERGE, "ip" },
	{ "PodStatus", "hostIPs", NULL, SMP_MERGE, "ip" },
	{ "PodSpec", "volumes", NULL, SMP_MERGE, "name" },
	{ "PodSpec", "initContainers", "Container", SMP_MERGE, "name" },
	{ "PodSpec", "containers", "Container", SMP_MERGE, "name" },
	{ "PodSpec", "ephemeralContainers", "Container", SMP_MERGE, "name" },
	{ "PodSpec", "imagePullSecrets", NULL, SMP_MERGE, "name" },
	{ "PodSpec", "hostAliases", NULL, SMP_MERGE, "ip" },
	{ "PodSpec", "topologySpreadConstraints", NULL, SMP_MERGE, "topologyKey" },
	{ "PodSpec", "resourceClaims", NULL, SMP_MERGE, "name" },
	{ "PodSpec", "schedulingGates", NULL, SMP_MERGE, "name" },
	{ "Container", "ports", NULL, SMP_MERGE, "containerPort" },
	{ "Container", "env", NULL, SMP_MERGE, "name" },
	{ "Container", "volumeMounts", NULL, SMP_MERGE, "mountPath" },
	{ "Container", "volumeDevices", NULL, SMP_MERGE, "devicePath" },
	{ "DaemonSet", "spec", "DaemonSetSpec", 0, NULL },
	{ "DaemonSet", "status", "DaemonSetStatus", 0, NULL },
	{ "DaemonSetSpec", "template", "PodTemplateSpec", 0, NULL },
	{ "DaemonSetStatus", "conditions", NULL, SMP_MERGE, "type" },
	{ "PodTemplateSpec", "metadata", "ObjectMeta", 0, NULL },
	{ "PodTemplateSpec", "spec", "PodSpec", 0, NULL },
	{ "Namespace", "status", "NamespaceStatus", 0, NULL },
	{ "NamespaceStatus", "conditions", NULL, SMP_MERGE, "type" },
	{ "ServiceAccount", "secrets", NULL, SMP_MERGE, "name" },
};

static const struct smp_field *lookup(const char *type, const char *field)
{
	static const struct smp_field meta = { "*", "metadata", "ObjectMeta", 0, NULL };
	if (!type)
		return NULL;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (strcmp(fields[i].type, type) == 0 && strcmp(fields[i].field, field) == 0)
			return &fields[i];
	/* every kind's top level (a kind name starts upper case, field types too, but
	 * only kinds reach here with "metadata") */
	if (strcmp(field, "metadata") == 0 && strcmp(type, "ObjectMeta") != 0 && strcmp(type, "PodSpec") != 0)
		return &meta;
	return NULL;
}

const char *ks_smp_field(const char *type, const char *field, int *merge, const char **merge_key)
{
	const struct smp_field *f = lookup(type, field);
	*merge = f ? f->strategy : SMP_ATOMIC;
	*merge_key = f ? f->key : NULL;
	return f ? f->child : NULL;
}

int ks_smp_list_strategy(const char *kind, const char *path, const char **merge_key)
{
	char buf[512], *save = NULL;
	const char *type = kind;
	const struct smp_field *f = NULL;
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
		f = lookup(type, tok);
		type = f ? f->child : NULL;
	}
	if (merge_key)
		*merge_key = f ? f->key : NULL;
	return f ? f->strategy : SMP_ATOMIC;
}

/* ---- helpers -------------------------------------------------------------- */
static int is_directive(const char *k)
{
	return k && k[0] == '$';
}

/* Copy without "$..." keys and nulls (what survives decoding into the typed object). */
static cJSON *clean_copy(const cJSON *v)
{
	if (cJSON_IsArray(v)) {
		cJSON *a = cJSON_CreateArray();
		const cJSON *it;
		cJSON_ArrayForEach(it, v) {
			cJSON *c = a ? clean_copy(it) : NULL;
			if (!c) {
				cJSON_Delete(a);
				return NULL;
			}
			cJSON_AddItemToArray(a, c);
		}
		return a;
	}
	if (!cJSON_IsObject(v))
		return cJSON_Duplicate(v, 1);
	cJSON *o = cJSON_CreateObject();
	const cJSON *it;
	cJSON_ArrayForEach(it, v) {
		if (is_directive(it->string) || cJSON_IsNull(it))
			continue;
		cJSON *c = o ? clean_copy(it) : NULL;
		if (!c) {
			cJSON_Delete(o);
			return NULL;
		}
		cJSON_AddItemToObject(o, it->string, c);
	}
	return o;
}

/* Removes "$..." keys left anywhere in the result. */
static void drop_directives(cJSON *v)
{
	cJSON *it = v ? v->child : NULL;
	while (it) {
		cJSON *next = it->next;
		if (cJSON_IsObject(v) && is_directive(it->string))
			cJSON_Delete(cJSON_DetachItemViaPointer(v, it));
		else
			drop_directives(it);
		it = next;
	}
}

static int same_shape(const cJSON *a, const cJSON *b)
{
	if (cJSON_IsObject(a) || cJSON_IsObject(b))
		return cJSON_IsObject(a) && cJSON_IsObject(b);
	if (cJSON_IsArray(a) || cJSON_IsArray(b))
		return cJSON_IsArray(a) && cJSON_IsArray(b);
	return 0; /* scalars: the patch value wins */
}

/* The value identifying a list item: its merge key's value, or itself for scalars. */
static const cJSON *ident(const cJSON *item, const char *key)
{
	return key ? cJSON_GetObjectItemCaseSensitive(item, key) : item;
}

/* Index of the item whose identity equals that of v in list (-1: none). */
static int index_of(const cJSON *list, const cJSON *v, const char *key)
{
	const cJSON *want = ident(v, key);
	if (!want)
		return -1;
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, list) {
		const cJSON *have = ident(it, key);
		if (have && ks_json_equal(have, want))
			return i;
		i++;
	}
	return -1;
}

typedef struct vec {
	cJSON **v;
	int n;
} vec;

/* Stable insertion sort of items by their index in order (items all present). */
static void sort_by(vec *a, const cJSON *order, const char *key)
{
	for (int i = 1; i < a->n; i++) {
		cJSON *x = a->v[i];
		int xi = index_of(order, x, key);
		int j = i - 1;
		while (j >= 0) {
			int ji = index_of(order, a->v[j], key);
			if (xi < 0 || ji < 0 || ji <= xi)
				break;
			a->v[j + 1] = a->v[j];
			j--;
		}
		a->v[j + 1] = x;
	}
}

/* Reorders the items of `merged` in place: items present in `order` (the patch list
 * or $setElementOrder) sorted by it, server-only items sorted by `live`, then the two
 * interleaved by their positions in `live` (patch items first when unknown there). */
static int normalize_order(cJSON *merged, const cJSON *order, const cJSON *live, const char *key)
{
	int n = cJSON_GetArraySize(merged);
	if (n < 2)
		return 0;
	cJSON **buf = calloc((size_t)n * 2, sizeof(cJSON *));
	if (!buf)
		return -1;
	vec patch = { buf, 0 }, server = { buf + n, 0 };
	while (merged->child) {
		cJSON *it = cJSON_DetachItemViaPointer(merged, merged->child);
		if (index_of(order, it, key) >= 0)
			patch.v[patch.n++] = it;
		else
			server.v[server.n++] = it;
	}
	sort_by(&patch, order, key);
	sort_by(&server, live, key);
	int i = 0, j = 0;
	while (i < server.n || j < patch.n) {
		cJSON *next;
		if (j >= patch.n) {
			next = server.v[i++];
		} else if (i >= server.n) {
			next = patch.v[j++];
		} else {
			int li = index_of(live, server.v[i], key), ri = index_of(live, patch.v[j], key);
			next = li >= 0 && ri >= 0 && li < ri ? server.v[i++] : patch.v[j++];
		}
		cJSON_AddItemToArray(merged, next);
	}
	free(buf);
	return 0;
}

static cJSON *merge_map(cJSON *orig, const cJSON *patch, const char *type, gk_err *err);

#define OOM(err) gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory")

/* mergeSlice: takes orig (an array), returns the merged array or NULL. */
static cJSON *merge_list(cJSON *orig, const cJSON *patch, const struct smp_field *f, int delete_list, gk_err *err)
{
	const char *key = f->key;
	if (!cJSON_GetArraySize(orig) && !cJSON_GetArraySize(patch))
		return orig;
	const cJSON *first = orig->child ? orig->child : patch->child;
	if (!cJSON_IsObject(first)) {
		/* a set of scalars */
		if (delete_list) {
			const cJSON *d;
			cJSON_ArrayForEach(d, patch) {
				for (int i = cJSON_GetArraySize(orig) - 1; i >= 0; i--)
					if (ks_json_equal(cJSON_GetArrayItem(orig, i), d))
						cJSON_DeleteItemFromArray(orig, i);
			}
			return orig;
		}
		cJSON *live = cJSON_Duplicate(orig, 1);
		if (!live)
			goto oom;
		const cJSON *p;
		cJSON_ArrayForEach(p, patch) {
			if (index_of(orig, p, NULL) >= 0)
				continue;
			cJSON *c = cJSON_Duplicate(p, 1);
			if (!c) {
				cJSON_Delete(live);
				goto oom;
			}
			cJSON_AddItemToArray(orig, c);
		}
		int rc = normalize_order(orig, patch, live, NULL);
		cJSON_Delete(live);
		if (rc)
			goto oom;
		return orig;
	}
	if (!key) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "cannot merge lists without merge key for %s", f->field);
		goto fail;
	}
	/* special elements: {"$patch": "delete", key: v} and {"$patch": "replace"} */
	int replace = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, patch) {
		const cJSON *dir = cJSON_GetObjectItemCaseSensitive(p, "$patch");
		if (!dir)
			continue;
		const char *d = cJSON_IsString(dir) ? dir->valuestring : "";
		if (strcmp(d, "delete") == 0) {
			const cJSON *kv = cJSON_GetObjectItemCaseSensitive(p, key);
			if (!kv) {
				gk_err_set(err, GK_INVALID_ARGUMENT, "map: %s does not contain declared merge key: %s",
					   f->field, key);
				goto fail;
			}
			int i;
			while ((i = index_of(orig, p, key)) >= 0)
				cJSON_DeleteItemFromArray(orig, i);
		} else if (strcmp(d, "replace") == 0) {
			replace = 1;
		} else if (strcmp(d, "merge") == 0) {
			gk_err_set(err, GK_INVALID_ARGUMENT, "merging lists cannot yet be specified in the patch");
			goto fail;
		} else {
			gk_err_set(err, GK_INVALID_ARGUMENT, "unknown patch type: %s in list %s", d, f->field);
			goto fail;
		}
	}
	cJSON *plain = cJSON_CreateArray(); /* the patch without special elements */
	if (!plain)
		goto oom;
	cJSON_ArrayForEach(p, patch) {
		if (cJSON_GetObjectItemCaseSensitive(p, "$patch"))
			continue;
		if (!cJSON_IsObject(p)) {
			cJSON_Delete(plain);
			gk_err_set(err, GK_INVALID_ARGUMENT, "list element types are not identical in %s", f->field);
			goto fail;
		}
		if (!cJSON_AddItemReferenceToArray(plain, (cJSON *)p)) { /* a reference, not a copy */
			cJSON_Delete(plain);
			goto oom;
		}
	}
	if (replace) {
		cJSON_Delete(orig);
		orig = clean_copy(plain);
		cJSON_Delete(plain);
		if (!orig)
			goto oom;
		return orig;
	}
	cJSON *live = cJSON_Duplicate(orig, 1);
	if (!live) {
		cJSON_Delete(plain);
		goto oom;
	}
	cJSON_ArrayForEach(p, plain) {
		if (!cJSON_GetObjectItemCaseSensitive(p, key)) {
			gk_err_set(err, GK_INVALID_ARGUMENT, "map: %s does not contain declared merge key: %s", f->field,
				   key);
			goto fail2;
		}
		int i = index_of(orig, p, key);
		if (i >= 0) {
			cJSON *cur = cJSON_DetachItemFromArray(orig, i);
			cJSON *m = merge_map(cur, p, f->child, err);
			if (!m)
				goto fail2;
			/* back into place: rebuild the tail (cJSON_InsertItemInArray is unreliable) */
			cJSON *tail = cJSON_CreateArray();
			if (!tail) {
				cJSON_Delete(m);
				OOM(err);
				goto fail2;
			}
			while (cJSON_GetArraySize(orig) > i)
				cJSON_AddItemToArray(tail, cJSON_DetachItemFromArray(orig, i));
			cJSON_AddItemToArray(orig, m);
			while (tail->child)
				cJSON_AddItemToArray(orig, cJSON_DetachItemViaPointer(tail, tail->child));
			cJSON_Delete(tail);
		} else {
			cJSON *c = clean_copy(p);
			if (!c) {
				OOM(err);
				goto fail2;
			}
			cJSON_AddItemToArray(orig, c);
		}
	}
	if (normalize_order(orig, plain, live, key)) {
		OOM(err);
		goto fail2;
	}
	cJSON_Delete(live);
	cJSON_Delete(plain);
	return orig;
fail2:
	cJSON_Delete(live);
	cJSON_Delete(plain);
	goto fail;
oom:
	OOM(err);
fail:
	cJSON_Delete(orig);
	return NULL;
}

/* mergeSliceHandler: a merge list is merged, any other list replaced by the patch. */
static cJSON *merge_list_field(cJSON *orig, const cJSON *patch, const char *type, const char *field, int delete_list,
			       gk_err *err)
{
	const struct smp_field *f = lookup(type, field);
	if (!f || f->strategy != SMP_MERGE) {
		cJSON_Delete(orig);
		if (delete_list) /* $deleteFromPrimitiveList on an atomic list: nothing to do */
			return cJSON_CreateArray();
		cJSON *c = clean_copy(patch);
		if (!c)
			OOM(err);
		return c;
	}
	return merge_list(orig, patch, f, delete_list, err);
}

static int in_list(const cJSON *list, const char *s)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, list) if (cJSON_IsString(it) && strcmp(it->valuestring, s) == 0) return 1;
	return 0;
}

static const char SEO[] = "$setElementOrder/";
static const char DFPL[] = "$deleteFromPrimitiveList/";

/* mergeMap: takes orig (an object or NULL), returns the merged object or NULL. */
static cJSON *merge_map(cJSON *orig, const cJSON *patch, const char *type, gk_err *err)
{
	const cJSON *dir = cJSON_GetObjectItemCaseSensitive(patch, "$patch");
	if (dir) {
		const char *d = cJSON_IsString(dir) ? dir->valuestring : "";
		cJSON_Delete(orig);
		if (strcmp(d, "replace") == 0) {
			cJSON *c = clean_copy(patch);
			if (!c)
				OOM(err);
			return c;
		}
		if (strcmp(d, "delete") == 0) {
			cJSON *c = cJSON_CreateObject();
			if (!c)
				OOM(err);
			return c;
		}
		gk_err_set(err, GK_INVALID_ARGUMENT, "unknown patch type: %s in map", d);
		return NULL;
	}
	if (!cJSON_IsObject(orig)) {
		cJSON_Delete(orig);
		if (!(orig = cJSON_CreateObject())) {
			OOM(err);
			return NULL;
		}
	}
	/* $retainKeys: every key set by the patch must be listed; other keys are cleared */
	const cJSON *rk = cJSON_GetObjectItemCaseSensitive(patch, "$retainKeys");
	if (rk) {
		if (!cJSON_IsArray(rk))
			goto bad_retain;
		const cJSON *p;
		cJSON_ArrayForEach(p, patch) {
			if (cJSON_IsNull(p) || is_directive(p->string))
				continue;
			if (!in_list(rk, p->string))
				goto bad_retain;
		}
		cJSON *it = orig->child;
		while (it) {
			cJSON *next = it->next;
			if (!in_list(rk, it->string))
				cJSON_Delete(cJSON_DetachItemViaPointer(orig, it));
			it = next;
		}
	}
	/* $setElementOrder/<list> (with the list itself, if patched) */
	const cJSON *p;
	cJSON_ArrayForEach(p, patch) {
		if (strncmp(p->string, SEO, sizeof(SEO) - 1) != 0)
			continue;
		const char *k = p->string + sizeof(SEO) - 1;
		if (!cJSON_IsArray(p) || !*k) {
			gk_err_set(err, GK_INVALID_ARGUMENT, "invalid patch format of setElementOrder list");
			goto fail;
		}
		const cJSON *pl = cJSON_GetObjectItemCaseSensitive(patch, k);
		cJSON *ol = cJSON_DetachItemFromObjectCaseSensitive(orig, k);
		if (pl && !cJSON_IsArray(pl)) {
			cJSON_Delete(ol);
			gk_err_set(err, GK_INVALID_ARGUMENT, "%s: expected a list", k);
			goto fail;
		}
		if (!ol && !pl)
			continue;
		cJSON *live = ol ? cJSON_Duplicate(ol, 1) : cJSON_CreateArray();
		cJSON *merged;
		if (!live) {
			cJSON_Delete(ol);
			OOM(err);
			goto fail;
		}
		if (ol && cJSON_IsArray(ol) && pl)
			merged = merge_list_field(ol, pl, type, k, 0, err);
		else if (pl) {
			cJSON_Delete(ol);
			merged = clean_copy(pl);
			if (!merged)
				OOM(err);
		} else {
			merged = ol;
		}
		if (!merged) {
			cJSON_Delete(live);
			goto fail;
		}
		const struct smp_field *f = lookup(type, k);
		if (f && f->strategy == SMP_MERGE && cJSON_IsArray(merged) &&
		    normalize_order(merged, p, live, cJSON_IsObject(merged->child) ? f->key : NULL)) {
			cJSON_Delete(live);
			cJSON_Delete(merged);
			OOM(err);
			goto fail;
		}
		cJSON_Delete(live);
		cJSON_AddItemToObject(orig, k, merged);
	}
	cJSON_ArrayForEach(p, patch) {
		const char *k = p->string;
		int delete_list = 0;
		if (strncmp(k, DFPL, sizeof(DFPL) - 1) == 0) {
			if (!cJSON_IsArray(p)) {
				gk_err_set(err, GK_INVALID_ARGUMENT, "invalid patch format of primitive list");
				goto fail;
			}
			k += sizeof(DFPL) - 1;
			delete_list = 1;
		} else if (is_directive(k)) {
			continue;
		} else {
			/* a list already handled with its $setElementOrder */
			char seo[600];
			snprintf(seo, sizeof(seo), "%s%s", SEO, k);
			if (cJSON_GetObjectItemCaseSensitive(patch, seo))
				continue;
		}
		const cJSON *sub = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "$patch") : NULL;
		if (cJSON_IsNull(p) || (cJSON_IsString(sub) && strcmp(sub->valuestring, "delete") == 0)) {
			/* a map deleted with "$patch": delete ends up empty, which the typed
			 * object omits */
			cJSON_DeleteItemFromObjectCaseSensitive(orig, k);
			continue;
		}
		cJSON *cur = cJSON_DetachItemFromObjectCaseSensitive(orig, k);
		cJSON *m;
		if (!cur) {
			if (delete_list)
				continue; /* nothing to delete from */
			m = clean_copy(p);
			if (!m)
				OOM(err);
		} else if (!same_shape(cur, p)) {
			cJSON_Delete(cur);
			m = clean_copy(p);
			if (!m)
				OOM(err);
		} else if (cJSON_IsObject(p)) {
			const struct smp_field *f = lookup(type, k);
			m = merge_map(cur, p, f ? f->child : NULL, err);
		} else {
			m = merge_list_field(cur, p, type, k, delete_list, err);
		}
		if (!m)
			goto fail;
		cJSON_AddItemToObject(orig, k, m);
	}
	return orig;
bad_retain:
	gk_err_set(err, GK_INVALID_ARGUMENT, "invalid patch format of retainKeys");
fail:
	cJSON_Delete(orig);
	return NULL;
}

cJSON *ks_strategic_merge_patch(const char *kind, cJSON *target, const cJSON *patch, gk_err *err)
{
	if (!cJSON_IsObject(patch)) {
		cJSON_Delete(target);
		gk_err_set(err, GK_INVALID_ARGUMENT, "strategic merge patch must be a JSON object");
		return NULL;
	}
	cJSON *r = merge_map(target, patch, kind, err);
	drop_directives(r);
	return r;
}
