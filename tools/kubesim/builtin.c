/* kubesim — the API server's validation of built-in kinds, for the mistakes a
 * kubectl user makes by hand (pure): Node taints (key and effect), DaemonSet
 * selector/template agreement, Pod and pod-template containers (name, image,
 * unique names), resource.k8s.io device requests in the shape of their version
 * (the other versions' fields are unknown fields). Messages and cause fields are
 * the API server's. */
#include <stdio.h>
#include <string.h>

#include "jsonutil.h"
#include "builtin.h"
#include "sched.h"
#include "versions.h"

static void taints(const cJSON *list, const char *path, ks_schema_result *r)
{
	int i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, list) {
		char f[256];
		const char *key = ks_jstr(t, "key"), *eff = ks_jstr(t, "effect");
		if (!key || !*key) {
			snprintf(f, sizeof(f), "%s[%d].key", path, i);
			ks_schema_add_cause(r, "FieldValueRequired", f, "Required value");
		}
		snprintf(f, sizeof(f), "%s[%d].effect", path, i);
		if (!eff || !*eff)
			ks_schema_add_cause(r, "FieldValueRequired", f, "Required value");
		else if (strcmp(eff, "NoSchedule") && strcmp(eff, "PreferNoSchedule") && strcmp(eff, "NoExecute"))
			ks_schema_add_cause(r, "FieldValueNotSupported", f,
			      "Unsupported value: \"%s\": supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\"",
			      eff);
		/* the same key and effect twice */
		const cJSON *u;
		int j = 0;
		cJSON_ArrayForEach(u, list) {
			if (j++ >= i)
				break;
			const char *k2 = ks_jstr(u, "key"), *e2 = ks_jstr(u, "effect");
			if (key && eff && k2 && e2 && strcmp(key, k2) == 0 && strcmp(eff, e2) == 0) {
				snprintf(f, sizeof(f), "%s[%d]", path, i);
				ks_schema_add_cause(r, "FieldValueDuplicate", f,
				      "Duplicate value: \"%s\": taints must be unique by key and effect pair", key);
				break;
			}
		}
		i++;
	}
}

static void containers(const cJSON *pod_spec, const char *path, ks_schema_result *r)
{
	char f[256];
	const cJSON *cs = cJSON_GetObjectItemCaseSensitive(pod_spec, "containers");
	if (cJSON_GetArraySize(cs) == 0) {
		snprintf(f, sizeof(f), "%s.containers", path);
		ks_schema_add_cause(r, "FieldValueRequired", f, "Required value");
		return;
	}
	int i = 0;
	const cJSON *c;
	cJSON_ArrayForEach(c, cs) {
		const char *name = ks_jstr(c, "name"), *image = ks_jstr(c, "image");
		if (!name || !*name) {
			snprintf(f, sizeof(f), "%s.containers[%d].name", path, i);
			ks_schema_add_cause(r, "FieldValueRequired", f, "Required value");
		} else {
			const cJSON *d;
			int j = 0;
			cJSON_ArrayForEach(d, cs) {
				if (j++ >= i)
					break;
				const char *n2 = ks_jstr(d, "name");
				if (n2 && strcmp(n2, name) == 0) {
					snprintf(f, sizeof(f), "%s.containers[%d].name", path, i);
					ks_schema_add_cause(r, "FieldValueDuplicate", f, "Duplicate value: \"%s\"", name);
					break;
				}
			}
		}
		if (!image || !*image) {
			snprintf(f, sizeof(f), "%s.containers[%d].image", path, i);
			ks_schema_add_cause(r, "FieldValueRequired", f, "Required value");
		}
		i++;
	}
}

static void daemonset(const cJSON *o, ks_schema_result *r)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
	const cJSON *sel = cJSON_GetObjectItemCaseSensitive(spec, "selector");
	const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(spec, "template");
	const cJSON *labels =
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tmpl, "metadata"), "labels");
	if (!cJSON_IsObject(sel)) {
		ks_schema_add_cause(r, "FieldValueRequired", "spec.selector", "Required value");
	} else if (!cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sel, "matchLabels")) &&
		   !cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sel, "matchExpressions"))) {
		ks_schema_add_cause(r, "FieldValueInvalid", "spec.selector", "Invalid value: \"{}\": empty selector is invalid for daemonset");
	} else if (!ks_labelsel_match(sel, labels)) {
		char *ls = labels ? cJSON_PrintUnformatted(labels) : NULL;
		ks_schema_add_cause(r, "FieldValueInvalid", "spec.template.metadata.labels",
		      "Invalid value: %s: `selector` does not match template `labels`", ls ? ls : "null");
		cJSON_free(ls);
	}
	containers(cJSON_GetObjectItemCaseSensitive(tmpl, "spec"), "spec.template.spec", r);
}

/* resource.k8s.io device requests: exactly one of `exactly` / `firstAvailable`
 * (v1beta2, v1), or the class inline (v1alpha3, v1beta1). */
static void device_requests(const cJSON *devices, const char *path, int nested, ks_schema_result *r)
{
	int i = 0;
	const cJSON *req;
	cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(devices, "requests")) {
		char f[300];
		const char *name = ks_jstr(req, "name");
		if (!name || !*name) {
			snprintf(f, sizeof(f), "%s.requests[%d].name", path, i);
			ks_schema_add_cause(r, "FieldValueRequired", f, "Required value");
		}
		int first = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(req, "firstAvailable")) > 0;
		const cJSON *ex = cJSON_GetObjectItemCaseSensitive(req, "exactly");
		if (nested) {
			snprintf(f, sizeof(f), "%s.requests[%d]", path, i);
			if (!first && !ex)
				ks_schema_add_cause(r, "FieldValueRequired", f,
						    "Required value: exactly one of `exactly` or `firstAvailable` is required");
			else if (first && ex)
				ks_schema_add_cause(r, "FieldValueInvalid", f,
						    "Invalid value: null: exactly one of `exactly` or `firstAvailable` is "
						    "required, but multiple fields are set");
			else if (ex && !(ks_jstr(ex, "deviceClassName") && *ks_jstr(ex, "deviceClassName"))) {
				snprintf(f, sizeof(f), "%s.requests[%d].exactly.deviceClassName", path, i);
				ks_schema_add_cause(r, "FieldValueRequired", f, "Required value");
			}
		} else if (!first && !(ks_jstr(req, "deviceClassName") && *ks_jstr(req, "deviceClassName"))) {
			snprintf(f, sizeof(f), "%s.requests[%d].deviceClassName", path, i);
			ks_schema_add_cause(r, "FieldValueRequired", f, "Required value");
		}
		i++;
	}
}

static void dra(const ks_rtype *t, cJSON *obj, ks_schema_result *r)
{
	ks_conv_unknown_fields(t->resource, t->version, obj, r);
	int nested = strcmp(t->version, "v1") == 0 || strcmp(t->version, "v1beta2") == 0;
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	if (strcmp(t->resource, "resourceclaims") == 0)
		device_requests(cJSON_GetObjectItemCaseSensitive(spec, "devices"), "spec.devices", nested, r);
	else if (strcmp(t->resource, "resourceclaimtemplates") == 0)
		device_requests(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(spec, "spec"), "devices"),
				"spec.spec.devices", nested, r);
}

/* apps/v1 SetDefaults_DaemonSet: the update strategy and the history limit. */
static void daemonset_defaults(cJSON *obj)
{
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	if (!cJSON_IsObject(spec))
		return;
	cJSON *us = cJSON_GetObjectItemCaseSensitive(spec, "updateStrategy");
	if (!cJSON_IsObject(us)) {
		cJSON_DeleteItemFromObjectCaseSensitive(spec, "updateStrategy");
		us = cJSON_AddObjectToObject(spec, "updateStrategy");
	}
	if (us && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(us, "type"))) {
		cJSON_DeleteItemFromObjectCaseSensitive(us, "type");
		cJSON_AddStringToObject(us, "type", "RollingUpdate");
	}
	const char *type = us ? ks_jstr(us, "type") : NULL;
	if (type && strcmp(type, "RollingUpdate") == 0) {
		cJSON *ru = cJSON_GetObjectItemCaseSensitive(us, "rollingUpdate");
		if (!cJSON_IsObject(ru)) {
			cJSON_DeleteItemFromObjectCaseSensitive(us, "rollingUpdate");
			ru = cJSON_AddObjectToObject(us, "rollingUpdate");
		}
		if (ru && !cJSON_HasObjectItem(ru, "maxUnavailable"))
			cJSON_AddNumberToObject(ru, "maxUnavailable", 1);
		if (ru && !cJSON_HasObjectItem(ru, "maxSurge"))
			cJSON_AddNumberToObject(ru, "maxSurge", 0);
	}
	if (!cJSON_HasObjectItem(spec, "revisionHistoryLimit"))
		cJSON_AddNumberToObject(spec, "revisionHistoryLimit", 10);
}

void ks_builtin_default(const ks_rtype *t, cJSON *obj)
{
	if (!t->is_crd && strcmp(t->group, "apps") == 0 && strcmp(t->kind, "DaemonSet") == 0)
		daemonset_defaults(obj);
}

int ks_builtin_validate(const ks_rtype *t, cJSON *obj, ks_schema_result *r)
{
	memset(r, 0, sizeof(*r));
	if (!(r->causes = cJSON_CreateArray()))
		return -1;
	if (t->is_crd)
		return 0;
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	if (!t->group[0] && strcmp(t->kind, "Node") == 0)
		taints(cJSON_GetObjectItemCaseSensitive(spec, "taints"), "spec.taints", r);
	else if (!t->group[0] && strcmp(t->kind, "Pod") == 0)
		containers(spec, "spec", r);
	else if (strcmp(t->group, "apps") == 0 && strcmp(t->kind, "DaemonSet") == 0)
		daemonset(obj, r);
	else if (strcmp(t->group, "resource.k8s.io") == 0)
		dra(t, obj, r);
	return r->ncauses;
}
