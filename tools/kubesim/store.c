/* kubesim — the object store: buckets of objects sorted by (namespace, name), one
 * global resourceVersion counter and a bounded ring of past events. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim.h"

const char *ks_ev_name(int type)
{
	static const char *n[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };
	return type >= 0 && type <= KS_EV_ERROR ? n[type] : "ERROR";
}

int ks_store_init(ks_store *s, int history)
{
	memset(s, 0, sizeof(*s));
	if (history < 1)
		history = 1;
	s->cap = history;
	s->ring = calloc((size_t)history, sizeof(*s->ring));
	s->rv = 1;
	return s->ring ? 0 : GK_RESOURCE_EXHAUSTED;
}

ks_blob *ks_blob_new(const char *ns, const cJSON *obj)
{
	size_t nl = strlen(ns ? ns : "");
	const char *name = ks_meta_str(obj, "name");
	size_t ml = strlen(name ? name : "");
	ks_blob *b = calloc(1, sizeof(*b) + nl + 1 + ml + 1);
	if (!b)
		return NULL;
	memcpy(b->ns, ns ? ns : "", nl + 1);
	memcpy(b->ns + nl + 1, name ? name : "", ml + 1);
	b->name = b->ns + nl + 1;
	b->refs = 1;
	b->json = cJSON_PrintUnformatted(obj);
	const cJSON *labels =
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
	if (labels)
		b->labels = cJSON_Duplicate(labels, 1);
	if (!b->json || (labels && !b->labels)) {
		ks_blob_unref(b);
		return NULL;
	}
	b->len = strlen(b->json);
	return b;
}

ks_blob *ks_blob_ref(ks_blob *b)
{
	if (b)
		b->refs++;
	return b;
}

void ks_blob_unref(ks_blob *b)
{
	if (!b || --b->refs > 0)
		return;
	free(b->json);
	cJSON_Delete(b->labels);
	free(b);
}

static void event_clear(ks_event *e)
{
	ks_blob_unref(e->cur);
	ks_blob_unref(e->old);
	memset(e, 0, sizeof(*e));
}

void ks_store_free(ks_store *s)
{
	for (int i = 0; i < s->nb; i++) {
		for (int j = 0; j < s->b[i].n; j++) {
			free(s->b[i].items[j].ns);
			free(s->b[i].items[j].name);
			cJSON_Delete(s->b[i].items[j].obj);
			ks_blob_unref(s->b[i].items[j].blob);
		}
		free(s->b[i].items);
		free(s->b[i].gr);
	}
	free(s->b);
	for (int i = 0; i < s->count; i++)
		event_clear(&s->ring[(s->head + i) % s->cap]);
	free(s->ring);
	memset(s, 0, sizeof(*s));
}

ks_bucket *ks_store_bucket(ks_store *s, const char *group, const char *resource, int create)
{
	char gr[256];
	snprintf(gr, sizeof(gr), "%s/%s", group, resource);
	for (int i = 0; i < s->nb; i++)
		if (strcmp(s->b[i].gr, gr) == 0)
			return &s->b[i];
	if (!create)
		return NULL;
	if (s->nb == s->capb) {
		int nc = s->capb ? s->capb * 2 : 32;
		ks_bucket *nb = realloc(s->b, sizeof(*nb) * (size_t)nc);
		if (!nb)
			return NULL;
		s->b = nb;
		s->capb = nc;
	}
	ks_bucket *b = &s->b[s->nb];
	memset(b, 0, sizeof(*b));
	if (!(b->gr = strdup(gr)))
		return NULL;
	s->nb++;
	return b;
}

static int cmp_key(const char *ns1, const char *n1, const char *ns2, const char *n2)
{
	int c = strcmp(ns1, ns2);
	return c ? c : strcmp(n1, n2);
}

/* Position of (ns,name) or where it would go; *found set. */
static int find_pos(const ks_bucket *b, const char *ns, const char *name, int *found)
{
	int lo = 0, hi = b->n;
	*found = 0;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		int c = cmp_key(b->items[mid].ns, b->items[mid].name, ns, name);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int ks_store_after(const ks_bucket *b, const char *ns, const char *name)
{
	int lo = 0, hi = b->n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (cmp_key(b->items[mid].ns, b->items[mid].name, ns, name) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

ks_item *ks_store_get(ks_store *s, const char *group, const char *resource, const char *ns, const char *name)
{
	ks_bucket *b = ks_store_bucket(s, group, resource, 0);
	if (!b)
		return NULL;
	int found;
	int i = find_pos(b, ns ? ns : "", name, &found);
	return found ? &b->items[i] : NULL;
}

static void set_rv(cJSON *obj, uint64_t rv)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRIu64, rv);
	cJSON *m = ks_meta(obj);
	if (!m)
		return;
	cJSON *s = cJSON_CreateString(buf);
	if (!s)
		return;
	if (cJSON_HasObjectItem(m, "resourceVersion"))
		cJSON_ReplaceItemInObjectCaseSensitive(m, "resourceVersion", s);
	else
		cJSON_AddItemToObject(m, "resourceVersion", s);
}

/* Records an event; takes the references cur and old (either may be NULL after an
 * allocation failure). O(1): the oldest event falls out of a full ring. */
static int record(ks_store *s, int type, const char *gr, ks_blob *cur, ks_blob *old)
{
	ks_event *e;
	if (s->count == s->cap) {
		e = &s->ring[s->head];
		s->compacted = e->rv;
		event_clear(e);
		s->head = (s->head + 1) % s->cap;
		s->count--;
	}
	if (!cur) {
		ks_blob_unref(old);
		/* history cannot be trusted past this point: force watchers to relist */
		s->compacted = s->rv;
		return GK_RESOURCE_EXHAUSTED;
	}
	e = &s->ring[(s->head + s->count) % s->cap];
	e->rv = s->rv;
	e->type = type;
	e->gr = gr;
	e->cur = cur;
	e->old = old;
	s->count++;
	return 0;
}

static void item_cache(ks_item *it)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(it->obj, "metadata");
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(m, "uid");
	it->uid = cJSON_IsString(uid) ? uid->valuestring : NULL;
	it->refs = cJSON_GetObjectItemCaseSensitive(m, "ownerReferences");
	it->deleting = cJSON_GetObjectItemCaseSensitive(m, "deletionTimestamp") != NULL;
}

int ks_store_put(ks_store *s, const char *group, const char *resource, const char *ns, const char *name,
		 cJSON *obj)
{
	ks_bucket *b = ks_store_bucket(s, group, resource, 1);
	if (!b) {
		cJSON_Delete(obj);
		return GK_RESOURCE_EXHAUSTED;
	}
	ns = ns ? ns : "";
	int found;
	int i = find_pos(b, ns, name, &found);
	s->rv++;
	set_rv(obj, s->rv);
	ks_blob *blob = ks_blob_new(ns, obj), *old = NULL;
	if (found) {
		cJSON_Delete(b->items[i].obj);
		b->items[i].obj = obj;
		item_cache(&b->items[i]);
		old = b->items[i].blob; /* the item's reference moves to the event */
		b->items[i].blob = ks_blob_ref(blob);
	} else {
		if (b->n == b->cap) {
			int nc = b->cap ? b->cap * 2 : 16;
			ks_item *ni = realloc(b->items, sizeof(*ni) * (size_t)nc);
			if (!ni) {
				cJSON_Delete(obj);
				ks_blob_unref(blob);
				return GK_RESOURCE_EXHAUSTED;
			}
			b->items = ni;
			b->cap = nc;
		}
		char *nsd = strdup(ns), *nd = strdup(name);
		if (!nsd || !nd) {
			free(nsd);
			free(nd);
			cJSON_Delete(obj);
			ks_blob_unref(blob);
			return GK_RESOURCE_EXHAUSTED;
		}
		memmove(&b->items[i + 1], &b->items[i], sizeof(ks_item) * (size_t)(b->n - i));
		b->items[i].ns = nsd;
		b->items[i].name = nd;
		b->items[i].obj = obj;
		item_cache(&b->items[i]);
		b->items[i].blob = ks_blob_ref(blob);
		b->n++;
		s->nobjs++;
	}
	return record(s, found ? KS_EV_MODIFIED : KS_EV_ADDED, b->gr, blob, old);
}

int ks_store_remove(ks_store *s, const char *group, const char *resource, const char *ns, const char *name)
{
	ks_bucket *b = ks_store_bucket(s, group, resource, 0);
	if (!b)
		return GK_NOT_FOUND;
	ns = ns ? ns : "";
	int found;
	int i = find_pos(b, ns, name, &found);
	if (!found)
		return GK_NOT_FOUND;
	ks_item it = b->items[i];
	memmove(&b->items[i], &b->items[i + 1], sizeof(ks_item) * (size_t)(b->n - i - 1));
	b->n--;
	s->nobjs--;
	s->rv++;
	set_rv(it.obj, s->rv);
	int rc = record(s, KS_EV_DELETED, b->gr, ks_blob_new(ns, it.obj), NULL);
	free(it.ns);
	free(it.name);
	cJSON_Delete(it.obj);
	ks_blob_unref(it.blob);
	return rc;
}

void ks_store_compact(ks_store *s)
{
	for (int i = 0; i < s->count; i++)
		event_clear(&s->ring[(s->head + i) % s->cap]);
	s->head = 0;
	s->count = 0;
	s->compacted = s->rv;
}

int ks_store_history_from(const ks_store *s, uint64_t after)
{
	if (after < s->compacted)
		return -1;
	int lo = 0, hi = s->count;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (s->ring[(s->head + mid) % s->cap].rv <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const ks_event *ks_store_event(const ks_store *s, int i)
{
	if (i < 0 || i >= s->count)
		return NULL;
	return &s->ring[(s->head + i) % s->cap];
}
