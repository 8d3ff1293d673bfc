/* lib/operands: does a live object carry what we manage, and the JSON merge
 * patch that makes it (see gk_op_sync in operands.h).
 *
 * As upstream's CreateOrPatch: the managed fields are written onto a copy of
 * the live object and the difference becomes a merge patch, so fields we do
 * not manage (and what other controllers set) stay as they are, lists inside a
 * changed field go whole, vanished map keys become null. Unlike a plain
 * equality, a managed object is compared key by key against the live one:
 * what the API server defaults into it (probe successThreshold, hostPath type,
 * port protocol, ...) is not a difference, so a resync writes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static bool empty(const cJSON *v)
{
	return !v || cJSON_IsNull(v) || ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child);
}

/* Does live carry every part of want? */
static bool covers(const cJSON *want, const cJSON *live)
{
	if (cJSON_IsObject(want)) {
		if (!want->child)
			return empty(live) || cJSON_IsObject(live);
		if (!cJSON_IsObject(live))
			return false;
		const cJSON *k;
		cJSON_ArrayForEach(k, want) {
			if (!covers(k, cJSON_GetObjectItemCaseSensitive(live, k->string)))
				return false;
		}
		return true;
	}
	if (cJSON_IsArray(want)) {
		if (!want->child)
			return empty(live);
		if (!cJSON_IsArray(live) || cJSON_GetArraySize(live) != cJSON_GetArraySize(want))
			return false;
		for (const cJSON *a = want->child, *b = live->child; a && b; a = a->next, b = b->next)
			if (!covers(a, b))
				return false;
		return true;
	}
	if (cJSON_IsNull(want))
		return !live || cJSON_IsNull(live);
	if (!live)
		return false;
	if (cJSON_IsNumber(want))
		return cJSON_IsNumber(live) && want->valuedouble == live->valuedouble;
	return cJSON_Compare(want, live, 1);
}

static bool exact(const cJSON *want, const cJSON *live)
{
	if (empty(want) && empty(live))
		return true;
	return want && live && cJSON_Compare(want, live, 1);
}

/* live := live with want merged in (objects key by key, everything else replaced) */
static bool merge_into(cJSON *live, const cJSON *want)
{
	const cJSON *k;
	cJSON_ArrayForEach(k, want) {
		cJSON *l = cJSON_GetObjectItemCaseSensitive(live, k->string);
		if (cJSON_IsObject(l) && cJSON_IsObject(k)) {
			if (!merge_into(l, k))
				return false;
			continue;
		}
		cJSON *d = cJSON_Duplicate(k, 1);
		if (!d)
			return false;
		if (l)
			cJSON_ReplaceItemInObjectCaseSensitive(live, k->string, d);
		else
			cJSON_AddItemToObject(live, k->string, d);
	}
	return true;
}

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool group_is(const char *api_version, const char *group)
{
	size_t n = strlen(group);
	return api_version && strncmp(api_version, group, n) == 0 && api_version[n] == '/';
}

/* A reference to ClusterPolicy `cp` (any version of intel.com, any uid). */
static bool names_policy(const cJSON *ref, const char *cp)
{
	const char *kind = str(ref, "kind"), *name = str(ref, "name");
	return kind && strcmp(kind, GK_POLICY_KIND) == 0 && name && cp && strcmp(name, cp) == 0 &&
	       group_is(str(ref, "apiVersion"), "intel.com");
}

bool gk_op_is_ours(const cJSON *live, const char *cp)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(live, "metadata");
	const cJSON *ref;
	cJSON_ArrayForEach(ref, cJSON_GetObjectItemCaseSensitive(md, "ownerReferences")) {
		/* the controller decides: another policy's object of a shared name (the
		 * DeviceClasses) carries our label too, and is not this policy's */
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "controller")))
			return names_policy(ref, cp);
	}
	const char *mb = str(cJSON_GetObjectItemCaseSensitive(md, "labels"), GK_OP_MANAGED_BY_KEY);
	return mb && strcmp(mb, GK_OP_MANAGED_BY_VALUE) == 0;
}

bool gk_op_is_upstream(const cJSON *live, const char *cp, const char *app)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(live, "metadata");
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
	const char *a = str(labels, "app"), *o = str(labels, "owner");
	if (!app || !cp || !a || !o || strcmp(a, app) != 0 || strcmp(o, cp) != 0)
		return false;
	const cJSON *ref;
	cJSON_ArrayForEach(ref, cJSON_GetObjectItemCaseSensitive(md, "ownerReferences")) {
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "controller")) && !names_policy(ref, cp))
			return false; /* someone else controls it now */
	}
	return true;
}

bool gk_op_kueue_mine(const cJSON *live, const char *cp)
{
	if (gk_op_is_upstream(live, cp, GK_OP_KUEUE_APP))
		return true;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(live, "metadata");
	const char *mb = str(cJSON_GetObjectItemCaseSensitive(md, "labels"), GK_OP_MANAGED_BY_KEY);
	const cJSON *ref;
	if (!mb || strcmp(mb, GK_OP_MANAGED_BY_VALUE) != 0)
		return false;
	cJSON_ArrayForEach(ref, cJSON_GetObjectItemCaseSensitive(md, "ownerReferences")) {
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "controller")) && names_policy(ref, cp))
			return true;
	}
	return false;
}

/* Our controller reference on the copy: 0 done, 1 foreign controller, -1 OOM. */
static int owner(cJSON *mut, const cJSON *ours, const char *cp, char *msg, size_t cap)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(mut, "metadata");
	cJSON *refs = cJSON_GetObjectItemCaseSensitive(md, "ownerReferences");
	const cJSON *ref;
	bool have = false;
	cJSON_ArrayForEach(ref, refs) {
		bool ctl = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "controller"));
		if (ctl && !names_policy(ref, cp)) {
			snprintf(msg, cap, "controlled by %s %s", str(ref, "kind") ? str(ref, "kind") : "?",
				 str(ref, "name") ? str(ref, "name") : "?");
			return 1;
		}
		if (cJSON_Compare(ref, ours, 1))
			have = true;
	}
	if (have && cJSON_GetArraySize(refs) >= 1) {
		/* ours is there; other references to the same policy (an old uid) go */
		int n_same = 0;
		cJSON_ArrayForEach(ref, refs) n_same += names_policy(ref, cp);
		if (n_same == 1)
			return 0;
	}
	cJSON *nl = cJSON_CreateArray();
	if (!nl)
		return -1;
	cJSON_ArrayForEach(ref, refs) {
		if (names_policy(ref, cp))
			continue; /* replaced by ours: adoption of an old uid */
		cJSON *d = cJSON_Duplicate(ref, 1);
		if (!d) {
			cJSON_Delete(nl);
			return -1;
		}
		cJSON_AddItemToArray(nl, d);
	}
	cJSON *d = cJSON_Duplicate(ours, 1);
	if (!d) {
		cJSON_Delete(nl);
		return -1;
	}
	cJSON_AddItemToArray(nl, d);
	if (!md && !(md = cJSON_AddObjectToObject(mut, "metadata"))) {
		cJSON_Delete(nl);
		return -1;
	}
	if (refs)
		cJSON_ReplaceItemInObjectCaseSensitive(md, "ownerReferences", nl);
	else
		cJSON_AddItemToObject(md, "ownerReferences", nl);
	return 0;
}

static int apply_rule(cJSON *mut, const cJSON *want_obj, const gk_op_rule *r)
{
	bool oom = false;
	cJSON *want = gk_op_pointer((cJSON *)want_obj, r->path, false, &oom);
	cJSON *live = gk_op_pointer(mut, r->path, false, &oom);
	switch (r->mode) {
	case GK_OP_REPLACE:
		return exact(want, live) ? 0 : 2;
	case GK_OP_QUOTAS:
		if (gk_op_kueue_groups_equal(want, live))
			return 0;
		break;
	case GK_OP_ABSENT:
		if (live && !cJSON_IsNull(live))
			gk_op_pointer_del(mut, r->path);
		return 0;
	case GK_OP_EXACT:
		if (exact(want, live))
			return 0;
		if (!want) {
			gk_op_pointer_del(mut, r->path);
			return 0;
		}
		break;
	default:
		if (!want || covers(want, live))
			return 0;
		if (cJSON_IsObject(live) && cJSON_IsObject(want))
			return merge_into(live, want) ? 0 : -1;
		break;
	}
	cJSON *d = cJSON_Duplicate(want, 1);
	if (!d)
		return -1;
	if (!gk_op_pointer_set(mut, r->path, d, &oom))
		return oom ? -1 : 0; /* no parent to hold it (e.g. no container 0): not ours to invent */
	return 0;
}

int gk_op_sync(const gk_op_obj *want, const cJSON *live, cJSON **patch, char *msg, size_t cap)
{
	*patch = NULL;
	if (msg && cap)
		msg[0] = 0;
	const cJSON *wmd = cJSON_GetObjectItemCaseSensitive(want->obj, "metadata");
	const cJSON *ours = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(wmd, "ownerReferences"), 0);
	const char *cp = ours ? str(ours, "name") : NULL;
	cJSON *mut = cJSON_Duplicate(live, 1);
	if (!mut)
		return -1;
	int rc = ours ? owner(mut, ours, cp, msg, cap) : 0;
	if (rc == 1) {
		cJSON_Delete(mut);
		return GK_OP_FOREIGN;
	}
	static const gk_op_rule label = { .path = "/metadata/labels/app.kubernetes.io~1managed-by", .mode = GK_OP_SUBSET };
	if (rc == 0)
		rc = apply_rule(mut, want->obj, &label);
	for (size_t i = 0; rc == 0 && i < want->n_rules; i++)
		rc = apply_rule(mut, want->obj, &want->rules[i]);
	if (rc == 2) {
		cJSON_Delete(mut);
		return GK_OP_RECREATE;
	}
	cJSON *p = NULL;
	if (rc == 0 && !gk_policy_merge_diff(live, mut, &p))
		rc = -1;
	cJSON_Delete(mut);
	if (rc)
		return -1;
	if (!p)
		return GK_OP_IN_SYNC;
	/* the resourceVersion we decided on: a concurrent change is a 409, never overwritten */
	const char *rv = str(cJSON_GetObjectItemCaseSensitive(live, "metadata"), "resourceVersion");
	if (rv) {
		cJSON *pmd = cJSON_GetObjectItemCaseSensitive(p, "metadata");
		if (!pmd)
			pmd = cJSON_AddObjectToObject(p, "metadata");
		if (!pmd || !cJSON_AddStringToObject(pmd, "resourceVersion", rv)) {
			cJSON_Delete(p);
			return -1;
		}
	}
	*patch = p;
	return GK_OP_PATCH;
}
