/* lib/policy: does the existing Module already match the desired one, and if
 * not, the JSON merge patch that makes it so (upstream §2.5: managed fields
 * overwritten, keys that vanished become null, lists replaced wholesale;
 * fields gpukmm does not manage are never part of the patch). */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"

/* false booleans are Go's zero values: {insecure:false} == {} == absent flag */
static void drop_false_flags(cJSON *tls)
{
	if (!cJSON_IsObject(tls))
		return;
	const char *keys[] = { "insecure", "insecureSkipTLSVerify" };
	for (size_t i = 0; i < 2; i++) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(tls, keys[i]);
		if (v && cJSON_IsFalse(v))
			cJSON_DeleteItemFromObjectCaseSensitive(tls, keys[i]);
	}
}

static void normalise(cJSON *spec, const cJSON *desired_spec)
{
	cJSON *ml = cJSON_GetObjectItemCaseSensitive(spec, "moduleLoader");
	cJSON *ct = ml ? cJSON_GetObjectItemCaseSensitive(ml, "container") : NULL;
	if (!ct)
		return;
	drop_false_flags(cJSON_GetObjectItemCaseSensitive(ct, "registryTLS"));
	drop_false_flags(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ct, "sign"),
							  "unsignedImageRegistryTLS"));
	cJSON *maps = cJSON_GetObjectItemCaseSensitive(ct, "kernelMappings"), *m;
	cJSON_ArrayForEach(m, maps) {
		drop_false_flags(cJSON_GetObjectItemCaseSensitive(m, "registryTLS"));
		drop_false_flags(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "sign"),
								  "unsignedImageRegistryTLS"));
		cJSON *b = cJSON_GetObjectItemCaseSensitive(m, "build");
		cJSON *sel = b ? cJSON_GetObjectItemCaseSensitive(b, "selector") : NULL;
		if (sel && cJSON_GetArraySize(sel) == 0)
			cJSON_DeleteItemFromObjectCaseSensitive(b, "selector");
	}
	/* KMM's CRD defaults modprobe.dirName to /opt: not a difference unless we set it */
	cJSON *mp = cJSON_GetObjectItemCaseSensitive(ct, "modprobe");
	cJSON *dir = mp ? cJSON_GetObjectItemCaseSensitive(mp, "dirName") : NULL;
	const cJSON *dml = desired_spec ? cJSON_GetObjectItemCaseSensitive(desired_spec, "moduleLoader") : NULL;
	const cJSON *dct = dml ? cJSON_GetObjectItemCaseSensitive(dml, "container") : NULL;
	const cJSON *dmp = dct ? cJSON_GetObjectItemCaseSensitive(dct, "modprobe") : NULL;
	if (cJSON_IsString(dir) && strcmp(dir->valuestring, GK_POLICY_KMM_DIRNAME_DEFAULT) == 0 &&
	    !(dmp && cJSON_GetObjectItemCaseSensitive(dmp, "dirName")))
		cJSON_DeleteItemFromObjectCaseSensitive(mp, "dirName");
}

bool gk_policy_merge_diff(const cJSON *a, const cJSON *b, cJSON **out)
{
	*out = NULL;
	if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
		cJSON *p = cJSON_CreateObject();
		if (!p)
			return false;
		const cJSON *e;
		cJSON_ArrayForEach(e, a) {
			if (!cJSON_GetObjectItemCaseSensitive(b, e->string)) {
				cJSON *n = cJSON_CreateNull();
				if (!n) {
					cJSON_Delete(p);
					return false;
				}
				cJSON_AddItemToObject(p, e->string, n);
			}
		}
		cJSON_ArrayForEach(e, b) {
			const cJSON *old = cJSON_GetObjectItemCaseSensitive(a, e->string);
			cJSON *sub = NULL;
			if (!old) {
				if (!(sub = cJSON_Duplicate(e, 1))) {
					cJSON_Delete(p);
					return false;
				}
			} else if (!gk_policy_merge_diff(old, e, &sub)) {
				cJSON_Delete(p);
				return false;
			}
			if (sub)
				cJSON_AddItemToObject(p, e->string, sub);
		}
		if (cJSON_GetArraySize(p) == 0) {
			cJSON_Delete(p);
			return true;
		}
		*out = p;
		return true;
	}
	if (a && cJSON_Compare(a, b, 1))
		return true;
	return (*out = cJSON_Duplicate(b, 1)) != NULL;
}

static const char *group_of(const char *api_version)
{
	static const char core[] = "";
	const char *slash = api_version ? strchr(api_version, '/') : NULL;
	return slash ? api_version : core;
}

static bool same_group(const char *a, const char *b)
{
	const char *ga = group_of(a), *gb = group_of(b);
	size_t la = strchr(ga, '/') ? (size_t)(strchr(ga, '/') - ga) : 0;
	size_t lb = strchr(gb, '/') ? (size_t)(strchr(gb, '/') - gb) : 0;
	return la == lb && strncmp(ga, gb, la) == 0;
}

static bool streq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* controller-runtime SetControllerReference: error if another controller owns it;
 * otherwise upsert our reference. *patch_refs NULL when already in place. */
static int owner_refs(const Gpukmm__Module *ex, const Gpukmm__Module *want, cJSON **patch_refs, gk_err *err)
{
	*patch_refs = NULL;
	const Gpukmm__ObjectMeta *em = ex->metadata, *wm = want->metadata;
	if (!wm || wm->n_owner_references == 0)
		return 0;
	const Gpukmm__OwnerReference *ours = wm->owner_references[0];
	size_t n = em ? em->n_owner_references : 0;
	bool have = false;
	for (size_t i = 0; i < n; i++) {
		const Gpukmm__OwnerReference *r = em->owner_references[i];
		/* the same policy by group, kind and name (as controller-runtime compares
		 * controllers): with an older uid (the policy was deleted and created
		 * again, or a migration) it is ours to adopt — replaced below, never a
		 * conflict that would leave the Module to the garbage collector */
		bool same_owner = same_group(r->api_version, ours->api_version) && streq(r->kind, ours->kind) &&
				  streq(r->name, ours->name);
		bool same = same_owner && (!ours->uid || streq(r->uid, ours->uid));
		if (r->has_controller && r->controller && !same_owner) {
			char msg[GK_ERR_MSG_MAX];
			gk_policy_msg_owner_conflict(msg, sizeof(msg), em->namespace_ ? em->namespace_ : "",
						     em->name ? em->name : "", r->kind, r->name);
			return gk_err_set(err, GK_FAILED_PRECONDITION, "%s", msg);
		}
		if (same && streq(r->api_version, ours->api_version) && r->has_controller && r->controller &&
		    r->has_block_owner_deletion && r->block_owner_deletion)
			have = true;
	}
	if (have)
		return 0;
	Gpukmm__ObjectMeta tmp = GPUKMM__OBJECT_META__INIT;
	Gpukmm__OwnerReference **refs = calloc(n + 1, sizeof(*refs));
	if (!refs)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const Gpukmm__OwnerReference *r = em->owner_references[i];
		if (same_group(r->api_version, ours->api_version) && streq(r->kind, ours->kind) &&
		    streq(r->name, ours->name))
			continue; /* replaced by ours */
		refs[k++] = em->owner_references[i];
	}
	refs[k++] = (Gpukmm__OwnerReference *)ours;
	tmp.owner_references = refs;
	tmp.n_owner_references = k;
	cJSON *m = gk_kobj_meta_to_json(&tmp);
	free(refs);
	cJSON *list = m ? cJSON_DetachItemFromObjectCaseSensitive(m, "ownerReferences") : NULL;
	cJSON_Delete(m);
	if (!list)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	*patch_refs = list;
	return 0;
}

int gk_policy_module_diff(const Gpukmm__Module *existing, const Gpukmm__Module *desired, cJSON **patch,
			  gk_err *err)
{
	*patch = NULL;
	cJSON *refs = NULL, *spec_patch = NULL;
	int rc = owner_refs(existing, desired, &refs, err);
	if (rc)
		return rc;
	cJSON *want = gk_kobj_module_spec_to_json(desired->spec);
	cJSON *have = gk_kobj_module_spec_to_json(existing->spec);
	if (!want || !have)
		goto oom;
	normalise(want, NULL);
	normalise(have, want);
	if (!gk_policy_merge_diff(have, want, &spec_patch))
		goto oom;
	cJSON_Delete(want);
	cJSON_Delete(have);
	want = have = NULL;
	if (!refs && !spec_patch)
		return 0;
	cJSON *p = cJSON_CreateObject();
	if (!p)
		goto oom;
	if (refs) {
		cJSON *meta = cJSON_AddObjectToObject(p, "metadata");
		if (!meta) {
			cJSON_Delete(p);
			goto oom;
		}
		cJSON_AddItemToObject(meta, "ownerReferences", refs);
		refs = NULL;
	}
	if (spec_patch) {
		cJSON_AddItemToObject(p, "spec", spec_patch);
		spec_patch = NULL;
	}
	*patch = p;
	return 0;
oom:
	cJSON_Delete(want);
	cJSON_Delete(have);
	cJSON_Delete(refs);
	cJSON_Delete(spec_patch);
	return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
}

static bool has_version(const Gpukmm__Module *m)
{
	const Gpukmm__ModuleLoader *ml = m && m->spec ? m->spec->module_loader : NULL;
	return ml && ml->container && ml->container->version && *ml->container->version;
}

bool gk_policy_version_toggled(const Gpukmm__Module *existing, const Gpukmm__Module *desired)
{
	return has_version(existing) != has_version(desired);
}
