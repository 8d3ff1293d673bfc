/* kubesim — the Kubernetes release kubesim acts as: /version, the resource.k8s.io
 * versions it serves and their object shapes.
 *
 * resource.k8s.io by release (a cluster with DRA on; --runtime-config turns versions
 * on and off like kube-apiserver's flag):
 *   1.31  v1alpha3
 *   1.32  v1beta1                 (v1alpha3 off by default)
 *   1.33  v1beta2, v1beta1
 *   1.34  v1                      (v1beta2, v1beta1 off by default)
 * Without --kube-version kubesim keeps the answer it always gave: /version 1.32 (the
 * kubectl dispatcher picks its client by it) and resource.k8s.io/v1.
 *
 * Shapes: v1alpha3 and v1beta1 write a claim request's class, selectors, count...
 * inline; v1beta2 and v1 nest them under `exactly`. A ResourceSlice device of
 * v1alpha3/v1beta1 keeps its attributes under `basic`, v1beta2/v1 flat; v1alpha3
 * capacities are bare quantities, later ones {value: quantity}. Allocation results
 * (request, driver, pool, device) are the same everywhere. Objects are stored in the
 * newest served version and converted on every read and write at another one. */
#include "versions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

static const struct release {
	int minor;
	const char *git, *go, *date;
} releases[] = {
	{ 31, "v1.31.9", "go1.23.8", "2025-05-15T08:58:35Z" },
	{ 32, "v1.32.4", "go1.23.6", "2025-04-22T16:03:06Z" },
	{ 33, "v1.33.2", "go1.24.4", "2025-06-17T18:27:42Z" },
	{ 34, "v1.34.1", "go1.24.6", "2025-09-09T19:39:08Z" },
};

/* resource.k8s.io versions per release, newest (preferred) first. */
struct rver {
	const char *version;
	int on; /* served by default */
};
#define KS_MAX_RVERS 4
static const struct rset {
	int minor; /* 0: kubesim's default */
	struct rver v[KS_MAX_RVERS];
} rsets[] = {
	{ 0, { { "v1", 1 }, { "v1beta2", 0 }, { "v1beta1", 0 } } },
	{ 31, { { "v1alpha3", 1 } } },
	{ 32, { { "v1beta1", 1 }, { "v1alpha3", 0 } } },
	{ 33, { { "v1beta2", 1 }, { "v1beta1", 1 } } },
	{ 34, { { "v1", 1 }, { "v1beta2", 0 }, { "v1beta1", 0 } } },
};

static const struct dra_kind {
	const char *resource, *singular, *kind;
	int namespaced, has_status;
} dra_kinds[] = {
	{ "deviceclasses", "deviceclass", "DeviceClass", 0, 0 },
	{ "resourceclaims", "resourceclaim", "ResourceClaim", 1, 1 },
	{ "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate", 1, 0 },
	{ "resourceslices", "resourceslice", "ResourceSlice", 0, 0 },
};

static const struct rset *rset_of(int minor)
{
	for (size_t i = 0; i < sizeof(rsets) / sizeof(rsets[0]); i++)
		if (rsets[i].minor == minor)
			return &rsets[i];
	return &rsets[0];
}

static const struct release *release_of(int minor)
{
	for (size_t i = 0; i < sizeof(releases) / sizeof(releases[0]); i++)
		if (releases[i].minor == minor)
			return &releases[i];
	return NULL;
}

static int parse_kube_version(const char *v, int *minor, gk_err *err)
{
	const char *p = v[0] == 'v' ? v + 1 : v;
	char *end;
	long maj = strtol(p, &end, 10);
	if (maj != 1 || *end != '.')
		goto bad;
	long min = strtol(end + 1, &end, 10);
	if (*end || min < KS_KUBE_MINOR_MIN || min > KS_KUBE_MINOR_MAX)
		goto bad;
	*minor = (int)min;
	return 0;
bad:
	return gk_err_set(err, GK_INVALID_ARGUMENT, "--kube-version '%s': want MAJOR.MINOR, 1.%d to 1.%d", v,
			  KS_KUBE_MINOR_MIN, KS_KUBE_MINOR_MAX);
}

/* on[i] for rs->v[i] after runtime-config. */
static int apply_runtime_config(const struct rset *rs, const char *rc, int minor, int on[KS_MAX_RVERS], gk_err *err)
{
	for (int i = 0; i < KS_MAX_RVERS; i++)
		on[i] = rs->v[i].version && rs->v[i].on;
	if (!rc || !*rc)
		return 0;
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", rc);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		int val = 1;
		if (eq) {
			*eq = 0;
			if (strcmp(eq + 1, "true") == 0)
				val = 1;
			else if (strcmp(eq + 1, "false") == 0)
				val = 0;
			else
				return gk_err_set(err, GK_INVALID_ARGUMENT, "--runtime-config %s: want true or false", tok);
		}
		const char *slash = strchr(tok, '/');
		int found = 0;
		if (slash && (size_t)(slash - tok) == strlen("resource.k8s.io") && strncmp(tok, "resource.k8s.io", 15) == 0)
			for (int i = 0; i < KS_MAX_RVERS && rs->v[i].version; i++)
				if (strcmp(rs->v[i].version, slash + 1) == 0) {
					on[i] = val;
					found = 1;
				}
		if (!found) {
			char known[128] = "";
			for (int i = 0; i < KS_MAX_RVERS && rs->v[i].version; i++)
				snprintf(known + strlen(known), sizeof(known) - strlen(known), "%sresource.k8s.io/%s",
					 i ? ", " : "", rs->v[i].version);
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "--runtime-config: %s is not an API version of Kubernetes 1.%d (known: %s)", tok,
					  minor ? minor : 32, known);
		}
	}
	return 0;
}

static ks_rtype *dra_type(const struct dra_kind *k, const char *version, int storage)
{
	ks_rtype *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	char lk[128];
	snprintf(lk, sizeof(lk), "%sList", k->kind);
	t->group = strdup("resource.k8s.io");
	t->version = strdup(version);
	t->resource = strdup(k->resource);
	t->singular = strdup(k->singular);
	t->kind = strdup(k->kind);
	t->list_kind = strdup(lk);
	t->namespaced = k->namespaced;
	t->has_status = k->has_status;
	t->storage = storage;
	if (!t->group || !t->version || !t->resource || !t->singular || !t->kind || !t->list_kind) {
		ks_rtype_free(t);
		return NULL;
	}
	return t;
}

int ks_versions_set(ks_server *s, const char *kube_version, const char *runtime_config, gk_err *err)
{
	int minor = 0;
	if (kube_version && parse_kube_version(kube_version, &minor, err))
		return err->code;
	const struct rset *rs = rset_of(minor);
	int on[KS_MAX_RVERS];
	if (apply_runtime_config(rs, runtime_config, minor, on, err))
		return err->code;
	ks_registry reg;
	if (ks_registry_init_builtin(&reg)) {
		ks_registry_free(&reg);
		goto oom;
	}
	int storage = 1;
	for (int i = 0; i < KS_MAX_RVERS && rs->v[i].version; i++) {
		if (!on[i])
			continue;
		for (size_t k = 0; k < sizeof(dra_kinds) / sizeof(dra_kinds[0]); k++) {
			ks_rtype *t = dra_type(&dra_kinds[k], rs->v[i].version, storage);
			if (!t || ks_registry_add(&reg, t)) {
				ks_registry_free(&reg);
				goto oom;
			}
		}
		storage = 0;
	}
	ks_registry_free(&s->reg);
	s->reg = reg;
	s->kube_minor = minor;
	return 0;
oom:
	return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
}

const char *ks_version_git(const ks_server *s)
{
	const struct release *r = release_of(s->kube_minor);
	return r ? r->git : "v1.32.4";
}

cJSON *ks_version_doc(const ks_server *s)
{
	const struct release *r = release_of(s->kube_minor);
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	char minor[16], prev[16], git[48];
	snprintf(minor, sizeof(minor), "%d", r ? r->minor : 32);
	snprintf(prev, sizeof(prev), "%d", (r ? r->minor : 32) - 1);
	snprintf(git, sizeof(git), "%s-kubesim", r ? r->git : "v1.32.4");
	cJSON_AddStringToObject(j, "major", "1");
	cJSON_AddStringToObject(j, "minor", minor);
	if (r && r->minor >= 33) { /* compatibility versions appeared in 1.33's /version */
		cJSON_AddStringToObject(j, "emulationMajor", "1");
		cJSON_AddStringToObject(j, "emulationMinor", minor);
		cJSON_AddStringToObject(j, "minCompatibilityMajor", "1");
		cJSON_AddStringToObject(j, "minCompatibilityMinor", prev);
	}
	cJSON_AddStringToObject(j, "gitVersion", git);
	cJSON_AddStringToObject(j, "gitCommit", "0000000000000000000000000000000000000000");
	cJSON_AddStringToObject(j, "gitTreeState", "clean");
	cJSON_AddStringToObject(j, "buildDate", r ? r->date : "2026-01-01T00:00:00Z");
	cJSON_AddStringToObject(j, "goVersion", r ? r->go : "go1.23.6");
	cJSON_AddStringToObject(j, "compiler", "gc");
	cJSON_AddStringToObject(j, "platform", "linux/amd64");
	return j;
}

/* ---- conversion ------------------------------------------------------------ */
/* 0 v1alpha3, 1 v1beta1, 2 v1beta2, 3 v1; -1 unknown */
static int rank(const char *v)
{
	static const char *order[] = { "v1alpha3", "v1beta1", "v1beta2", "v1" };
	for (int i = 0; i < 4; i++)
		if (strcmp(v, order[i]) == 0)
			return i;
	return -1;
}

/* the fields of one exact device request (v1beta2/v1 `exactly`) */
static const char *exact_keys[] = { "deviceClassName", "selectors", "allocationMode", "count",
				    "adminAccess", "tolerations", "capacity" };
#define NEXACT (sizeof(exact_keys) / sizeof(exact_keys[0]))

static int move_key(cJSON *from, cJSON *to, const char *k)
{
	cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(from, k);
	if (v)
		cJSON_AddItemToObject(to, k, v);
	return 0;
}

static int requests_conv(cJSON *devices, int nested)
{
	cJSON *req;
	cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(devices, "requests")) {
		if (!cJSON_IsObject(req))
			continue;
		if (nested) { /* inline -> exactly */
			if (cJSON_HasObjectItem(req, "firstAvailable") || cJSON_HasObjectItem(req, "exactly"))
				continue;
			int any = 0;
			for (size_t i = 0; i < NEXACT; i++)
				any |= cJSON_HasObjectItem(req, exact_keys[i]);
			if (!any)
				continue;
			cJSON *ex = cJSON_CreateObject();
			if (!ex)
				return -1;
			for (size_t i = 0; i < NEXACT; i++)
				move_key(req, ex, exact_keys[i]);
			cJSON_AddItemToObject(req, "exactly", ex);
		} else { /* exactly -> inline */
			cJSON *ex = cJSON_DetachItemFromObjectCaseSensitive(req, "exactly");
			if (!ex)
				continue;
			for (size_t i = 0; i < NEXACT; i++)
				move_key(ex, req, exact_keys[i]);
			cJSON_Delete(ex);
		}
	}
	return 0;
}

/* capacity map: {"memory":"16Gi"} (v1alpha3) <-> {"memory":{"value":"16Gi"}} */
static int capacity_conv(cJSON *cap, int wrap)
{
	cJSON *c;
	cJSON_ArrayForEach(c, cap) {
		if (wrap && !cJSON_IsObject(c)) {
			cJSON *o = cJSON_CreateObject(), *dup = cJSON_Duplicate(c, 1);
			if (!o || !dup) {
				cJSON_Delete(o);
				cJSON_Delete(dup);
				return -1;
			}
			cJSON_AddItemToObject(o, "value", dup);
			cJSON_ReplaceItemInObjectCaseSensitive(cap, c->string, o);
			c = o;
		} else if (!wrap && cJSON_IsObject(c)) {
			cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(c, "value");
			if (!v)
				continue;
			cJSON_ReplaceItemInObjectCaseSensitive(cap, c->string, v);
			c = v;
		}
	}
	return 0;
}

static int slice_conv(cJSON *spec, int from, int to)
{
	cJSON *dev;
	cJSON_ArrayForEach(dev, cJSON_GetObjectItemCaseSensitive(spec, "devices")) {
		if (!cJSON_IsObject(dev))
			continue;
		if (from <= 1 && to >= 2) { /* basic -> flat */
			cJSON *basic = cJSON_DetachItemFromObjectCaseSensitive(dev, "basic");
			if (basic) {
				while (basic->child) {
					cJSON *k = cJSON_DetachItemViaPointer(basic, basic->child);
					cJSON_AddItemToObject(dev, k->string, k);
				}
				cJSON_Delete(basic);
			}
		} else if (from >= 2 && to <= 1) { /* flat -> basic */
			cJSON *basic = cJSON_CreateObject();
			if (!basic)
				return -1;
			cJSON *k = dev->child;
			while (k) {
				cJSON *next = k->next;
				if (strcmp(k->string, "name") != 0)
					cJSON_AddItemToObject(basic, k->string, cJSON_DetachItemViaPointer(dev, k));
				k = next;
			}
			cJSON_AddItemToObject(dev, "basic", basic);
		}
		if ((from == 0) != (to == 0)) {
			cJSON *holder = to <= 1 ? cJSON_GetObjectItemCaseSensitive(dev, "basic") : dev;
			if (capacity_conv(cJSON_GetObjectItemCaseSensitive(holder, "capacity"), to > 0))
				return -1;
		}
	}
	return 0;
}

int ks_conv(cJSON *obj, const char *group, const char *resource, const char *to)
{
	const cJSON *av = cJSON_GetObjectItemCaseSensitive(obj, "apiVersion");
	const char *from = NULL;
	if (cJSON_IsString(av)) {
		const char *slash = strrchr(av->valuestring, '/');
		from = slash ? slash + 1 : av->valuestring;
	}
	char want[256];
	if (group[0])
		snprintf(want, sizeof(want), "%s/%s", group, to);
	else
		snprintf(want, sizeof(want), "%s", to);
	if (cJSON_IsString(av) && strcmp(av->valuestring, want) == 0)
		return 0;
	if (from && strcmp(group, "resource.k8s.io") == 0 && rank(from) >= 0 && rank(to) >= 0) {
		int rf = rank(from), rt = rank(to);
		cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
		int rc = 0;
		if ((rf >= 2) != (rt >= 2)) {
			if (strcmp(resource, "resourceclaims") == 0)
				rc = requests_conv(cJSON_GetObjectItemCaseSensitive(spec, "devices"), rt >= 2);
			else if (strcmp(resource, "resourceclaimtemplates") == 0)
				rc = requests_conv(cJSON_GetObjectItemCaseSensitive(
							   cJSON_GetObjectItemCaseSensitive(spec, "spec"), "devices"),
						   rt >= 2);
		}
		if (rc == 0 && strcmp(resource, "resourceslices") == 0)
			rc = slice_conv(spec, rf, rt);
		if (rc)
			return -1;
	}
	cJSON *nv = cJSON_CreateString(want);
	if (!nv)
		return -1;
	if (av)
		cJSON_ReplaceItemInObjectCaseSensitive(obj, "apiVersion", nv);
	else
		cJSON_AddItemToObject(obj, "apiVersion", nv);
	return 0;
}

/* ---- the other versions' fields ------------------------------------------- */
static void drop(cJSON *o, const char *k, const char *path, ks_schema_result *r)
{
	if (!cJSON_HasObjectItem(o, k))
		return;
	char p[512];
	snprintf(p, sizeof(p), "%s.%s", path, k);
	ks_schema_note_unknown(r, p);
	cJSON_DeleteItemFromObjectCaseSensitive(o, k);
}

static void requests_unknown(cJSON *devices, const char *path, int rk, ks_schema_result *r)
{
	int i = 0;
	cJSON *req;
	cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(devices, "requests")) {
		char p[400];
		snprintf(p, sizeof(p), "%s.requests[%d]", path, i++);
		if (rk >= 2)
			for (size_t k = 0; k < NEXACT; k++)
				drop(req, exact_keys[k], p, r);
		else
			drop(req, "exactly", p, r);
	}
}

void ks_conv_unknown_fields(const char *resource, const char *version, cJSON *obj, ks_schema_result *r)
{
	int rk = rank(version);
	if (rk < 0)
		return;
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	if (strcmp(resource, "resourceclaims") == 0) {
		requests_unknown(cJSON_GetObjectItemCaseSensitive(spec, "devices"), "spec.devices", rk, r);
	} else if (strcmp(resource, "resourceclaimtemplates") == 0) {
		requests_unknown(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(spec, "spec"), "devices"),
				 "spec.spec.devices", rk, r);
	} else if (strcmp(resource, "resourceslices") == 0) {
		int i = 0;
		cJSON *dev;
		cJSON_ArrayForEach(dev, cJSON_GetObjectItemCaseSensitive(spec, "devices")) {
			char p[128];
			snprintf(p, sizeof(p), "spec.devices[%d]", i++);
			if (rk >= 2) {
				drop(dev, "basic", p, r);
			} else {
				static const char *flat[] = { "attributes", "capacity", "consumesCounters", "nodeName",
							      "nodeSelector", "allNodes", "taints" };
				for (size_t k = 0; k < sizeof(flat) / sizeof(flat[0]); k++)
					drop(dev, flat[k], p, r);
			}
		}
	}
}
