/* kubesim — deletions that wait for their content, as a real server's controllers
 * make them wait (mu held; run from ks_gc_run after every change that can matter):
 *
 * CustomResourceDefinitions (apiextensions' REST Delete + the CRD finalizer): the
 * first DELETE marks the CRD (deletionTimestamp, finalizer
 * customresourcecleanup.apiextensions.k8s.io, condition Terminating True
 * InstanceDeletionPending); then every custom resource of it is deleted (condition
 * InstanceDeletionInProgress) — the ones holding finalizers stay, Terminating, until
 * those are removed — and only when none is left the condition becomes False
 * InstanceDeletionCompleted, the finalizer goes and with it the CRD. Meanwhile new
 * custom resources are refused (405 "create not allowed while custom resource
 * definition is terminating").
 *
 * Namespaces (the namespace controller): while a terminating namespace still holds
 * objects, its status carries the controller's five deletion conditions, with
 * NamespaceContentRemaining / NamespaceFinalizersRemaining naming what remains
 * ("Some resources are remaining: widgets.example.com has 1 resource instances",
 * "Some content in the namespace has finalizers remaining: example.com/hold in 1
 * resource instances"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "jsonutil.h"
#include "kubesim.h"

#define CRD_FINALIZER "customresourcecleanup.apiextensions.k8s.io"

static int has_str(const cJSON *arr, const char *s)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, arr) if (cJSON_IsString(it) && strcmp(it->valuestring, s) == 0) return 1;
	return 0;
}

/* Sets (or replaces) the condition of that type in status.conditions; keeps the
 * lastTransitionTime when the status does not change. 1 when something changed. */
static int set_condition(cJSON *obj, const char *type, const char *status, const char *reason, const char *msg)
{
	cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
	if (!cJSON_IsObject(st)) {
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
		st = cJSON_AddObjectToObject(obj, "status");
	}
	cJSON *conds = st ? cJSON_GetObjectItemCaseSensitive(st, "conditions") : NULL;
	if (st && !cJSON_IsArray(conds)) {
		cJSON_DeleteItemFromObjectCaseSensitive(st, "conditions");
		conds = cJSON_AddArrayToObject(st, "conditions");
	}
	if (!conds)
		return 0;
	char ts[40];
	ks_now_rfc3339(ts, sizeof(ts));
	cJSON *c, *old = NULL;
	cJSON_ArrayForEach(c, conds) if (ks_jstr(c, "type") && strcmp(ks_jstr(c, "type"), type) == 0) old = c;
	if (old && ks_jstr(old, "status") && strcmp(ks_jstr(old, "status"), status) == 0) {
		if (ks_jstr(old, "reason") && strcmp(ks_jstr(old, "reason"), reason) == 0 && ks_jstr(old, "message") &&
		    strcmp(ks_jstr(old, "message"), msg) == 0)
			return 0;
		if (ks_jstr(old, "lastTransitionTime"))
			snprintf(ts, sizeof(ts), "%s", ks_jstr(old, "lastTransitionTime"));
	}
	cJSON *n = cJSON_CreateObject();
	if (!n)
		return 0;
	cJSON_AddStringToObject(n, "type", type);
	cJSON_AddStringToObject(n, "status", status);
	cJSON_AddStringToObject(n, "lastTransitionTime", ts);
	cJSON_AddStringToObject(n, "reason", reason);
	cJSON_AddStringToObject(n, "message", msg);
	if (old)
		cJSON_ReplaceItemViaPointer(conds, old, n);
	else
		cJSON_AddItemToArray(conds, n);
	return 1;
}

/* ---- CRDs -------------------------------------------------------------------- */
int ks_crd_mark_deleted(cJSON *crd)
{
	cJSON *m = ks_meta(crd);
	if (!m)
		return -1;
	cJSON *f = cJSON_GetObjectItemCaseSensitive(m, "finalizers");
	if (!cJSON_IsArray(f)) {
		cJSON_DeleteItemFromObjectCaseSensitive(m, "finalizers");
		f = cJSON_AddArrayToObject(m, "finalizers");
	}
	if (f && !has_str(f, CRD_FINALIZER))
		cJSON_AddItemToArray(f, cJSON_CreateString(CRD_FINALIZER));
	set_condition(crd, "Terminating", "True", "InstanceDeletionPending",
		      "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon");
	return 0;
}

int ks_crd_terminating(ks_server *s, const ks_rtype *t)
{
	if (!t->is_crd || !t->crd_name)
		return 0;
	ks_item *it = ks_store_get(&s->store, "apiextensions.k8s.io", "customresourcedefinitions", "", t->crd_name);
	return it && ks_jget(ks_jget(it->obj, "metadata"), "deletionTimestamp") != NULL;
}

/* One terminating CRD: delete its custom resources; done when none is left. */
static int finalize_crd(ks_server *s, ks_item *crd_item)
{
	const cJSON *spec = ks_jget(crd_item->obj, "spec");
	const char *group = ks_jstr(spec, "group"), *plural = ks_jstr(ks_jget(spec, "names"), "plural");
	const char *crd_name = crd_item->name;
	if (!group || !plural)
		return 0;
	const ks_rtype *t = ks_registry_find_gr(&s->reg, group, plural);
	ks_bucket *b = ks_store_bucket(&s->store, group, plural, 0);
	int changed = 0;
	if (t && b) {
		/* names first: deleting changes the bucket */
		int n = b->n;
		char(*keys)[2][256] = n ? calloc((size_t)n, sizeof(*keys)) : NULL;
		int k = 0;
		for (int i = 0; keys && i < b->n; i++) {
			if (ks_jget(ks_jget(b->items[i].obj, "metadata"), "deletionTimestamp"))
				continue;
			snprintf(keys[k][0], 256, "%s", b->items[i].ns);
			snprintf(keys[k][1], 256, "%s", b->items[i].name);
			k++;
		}
		for (int i = 0; i < k; i++) {
			ks_api_delete_locked(s, t, keys[i][0], keys[i][1], "Background");
			changed = 1;
		}
		free(keys);
	}
	b = ks_store_bucket(&s->store, group, plural, 0);
	int left = b ? b->n : 0;
	crd_item = ks_store_get(&s->store, "apiextensions.k8s.io", "customresourcedefinitions", "", crd_name);
	if (!crd_item)
		return changed;
	cJSON *n = cJSON_Duplicate(crd_item->obj, 1);
	if (!n)
		return changed;
	int upd;
	if (left)
		upd = set_condition(n, "Terminating", "True", "InstanceDeletionInProgress", "CustomResource deletion is in progress");
	else
		upd = set_condition(n, "Terminating", "False", "InstanceDeletionCompleted", "removed all instances");
	if (!left) {
		cJSON *f = cJSON_GetObjectItemCaseSensitive(ks_meta(n), "finalizers");
		for (int i = cJSON_GetArraySize(f) - 1; i >= 0; i--)
			if (strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(f, i)) ? cJSON_GetStringValue(cJSON_GetArrayItem(f, i)) : "",
				   CRD_FINALIZER) == 0)
				cJSON_DeleteItemFromArray(f, i);
		if (cJSON_GetArraySize(f) == 0)
			cJSON_DeleteItemFromObjectCaseSensitive(ks_meta(n), "finalizers");
		upd = 1;
	}
	if (!upd) {
		cJSON_Delete(n);
		return changed;
	}
	char name[256];
	snprintf(name, sizeof(name), "%s", crd_name);
	int gone = !left && !cJSON_GetObjectItemCaseSensitive(ks_meta(n), "finalizers");
	cJSON *copy = gone ? cJSON_Duplicate(n, 1) : NULL;
	ks_store_put(&s->store, "apiextensions.k8s.io", "customresourcedefinitions", "", name, n);
	if (gone) {
		ks_store_remove(&s->store, "apiextensions.k8s.io", "customresourcedefinitions", "", name);
		if (copy)
			ks_crd_uninstall(s, copy);
	}
	cJSON_Delete(copy);
	return 1;
}

int ks_crd_finalize(ks_server *s)
{
	ks_bucket *b = ks_store_bucket(&s->store, "apiextensions.k8s.io", "customresourcedefinitions", 0);
	int changed = 0;
	for (int i = 0; b && i < b->n; i++) {
		const cJSON *md = ks_jget(b->items[i].obj, "metadata");
		if (!ks_jget(md, "deletionTimestamp") || !has_str(ks_jget(md, "finalizers"), CRD_FINALIZER))
			continue;
		char name[256];
		snprintf(name, sizeof(name), "%s", b->items[i].name);
		ks_item *it = ks_store_get(&s->store, "apiextensions.k8s.io", "customresourcedefinitions", "", name);
		if (it && finalize_crd(s, it)) {
			changed = 1;
			b = ks_store_bucket(&s->store, "apiextensions.k8s.io", "customresourcedefinitions", 0);
			i = -1; /* the bucket may have changed: again from the start */
		}
	}
	return changed;
}

/* ---- namespaces ---------------------------------------------------------------- */
struct tally {
	char key[300];
	int n;
};

static void count(struct tally *t, int *nt, int cap, const char *key)
{
	for (int i = 0; i < *nt; i++)
		if (strcmp(t[i].key, key) == 0) {
			t[i].n++;
			return;
		}
	if (*nt < cap) {
		snprintf(t[*nt].key, sizeof(t[*nt].key), "%s", key);
		t[(*nt)++].n = 1;
	}
}

static int by_key(const void *a, const void *b)
{
	return strcmp(((const struct tally *)a)->key, ((const struct tally *)b)->key);
}

static void join(const struct tally *t, int nt, const char *fmt, char *out, size_t cap)
{
	out[0] = 0;
	for (int i = 0; i < nt; i++) {
		size_t u = strlen(out);
		snprintf(out + u, cap - u, "%s", i ? ", " : "");
		u = strlen(out);
		snprintf(out + u, cap - u, fmt, t[i].key, t[i].n);
	}
}

#define KS_NS_TALLY 64

static void ns_conditions(ks_server *s, const char *ns)
{
	struct tally res[KS_NS_TALLY], fins[KS_NS_TALLY];
	int nres = 0, nfins = 0;
	for (int bi = 0; bi < s->store.nb; bi++) {
		ks_bucket *b = &s->store.b[bi];
		const char *slash = strchr(b->gr, '/');
		if (!slash)
			continue;
		for (int i = 0; i < b->n; i++) {
			if (strcmp(b->items[i].ns, ns) != 0)
				continue;
			char gr[300]; /* GroupResource.String(): resource[.group] */
			if (slash == b->gr)
				snprintf(gr, sizeof(gr), "%s", slash + 1);
			else
				snprintf(gr, sizeof(gr), "%s.%.*s", slash + 1, (int)(slash - b->gr), b->gr);
			count(res, &nres, KS_NS_TALLY, gr);
			const cJSON *f;
			cJSON_ArrayForEach(f, ks_jget(ks_jget(b->items[i].obj, "metadata"), "finalizers"))
				if (cJSON_IsString(f)) count(fins, &nfins, KS_NS_TALLY, f->valuestring);
		}
	}
	if (nres == 0)
		return; /* empty: the namespace goes (gc.c) */
	qsort(res, (size_t)nres, sizeof(res[0]), by_key);
	qsort(fins, (size_t)nfins, sizeof(fins[0]), by_key);
	ks_item *it = ks_store_get(&s->store, "", "namespaces", "", ns);
	cJSON *n = it ? cJSON_Duplicate(it->obj, 1) : NULL;
	if (!n)
		return;
	char list[3000], msg[3200];
	int upd = 0;
	upd |= set_condition(n, "NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered",
			     "All resources successfully discovered");
	upd |= set_condition(n, "NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions",
			     "All legacy kube types successfully parsed");
	upd |= set_condition(n, "NamespaceDeletionContentFailure", "False", "ContentDeleted",
			     "All content successfully deleted, may be waiting on finalization");
	join(res, nres, "%s has %d resource instances", list, sizeof(list));
	snprintf(msg, sizeof(msg), "Some resources are remaining: %s", list);
	upd |= set_condition(n, "NamespaceContentRemaining", "True", "SomeResourcesRemain", msg);
	if (nfins) {
		join(fins, nfins, "%s in %d resource instances", list, sizeof(list));
		snprintf(msg, sizeof(msg), "Some content in the namespace has finalizers remaining: %s", list);
		upd |= set_condition(n, "NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain", msg);
	} else {
		upd |= set_condition(n, "NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers",
				     "All content-preserving finalizers finished");
	}
	if (!upd) {
		cJSON_Delete(n);
		return;
	}
	ks_store_put(&s->store, "", "namespaces", "", ns, n); /* ns: the caller's copy, not the store's */
}

void ks_ns_termination(ks_server *s)
{
	ks_bucket *b = ks_store_bucket(&s->store, "", "namespaces", 0);
	char names[64][256];
	int n = 0;
	for (int i = 0; b && i < b->n && n < 64; i++)
		if (ks_jget(ks_jget(b->items[i].obj, "metadata"), "deletionTimestamp"))
			snprintf(names[n++], 256, "%s", b->items[i].name);
	for (int i = 0; i < n; i++)
		ns_conditions(s, names[i]);
}
