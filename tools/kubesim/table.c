/* kubesim — Table output for kubectl get (see table.h). */
#include "table.h"

#include "sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int ks_wants_table(const char *accept)
{
	if (!accept)
		return 0;
	/* the first media type that names a Table or plain JSON decides */
	const char *p = accept;
	while (*p) {
		size_t n = strcspn(p, ",");
		char one[256];
		snprintf(one, sizeof(one), "%.*s", (int)(n < sizeof(one) - 1 ? n : sizeof(one) - 1), p);
		if (strstr(one, "as=Table"))
			return strstr(one, "g=meta.k8s.io") && (strstr(one, "v=v1;") || strstr(one, "v=v1beta1") ||
								 (strlen(one) >= 4 && strcmp(one + strlen(one) - 4, "v=v1") == 0));
		if (strstr(one, "application/json") || strstr(one, "*/*"))
			return 0;
		p += n;
		if (*p == ',')
			p++;
		while (*p == ' ')
			p++;
	}
	return 0;
}

void ks_human_duration(long long s, char *b, size_t cap)
{
	if (s < -1) {
		snprintf(b, cap, "<invalid>");
		return;
	}
	if (s < 0)
		s = 0;
	if (s < 120) {
		snprintf(b, cap, "%llds", s);
		return;
	}
	long long m = s / 60, h = s / 3600, d = h / 24;
	if (m < 10) {
		if (s % 60)
			snprintf(b, cap, "%lldm%llds", m, s % 60);
		else
			snprintf(b, cap, "%lldm", m);
	} else if (m < 180) {
		snprintf(b, cap, "%lldm", m);
	} else if (h < 8) {
		if (m % 60)
			snprintf(b, cap, "%lldh%lldm", h, m % 60);
		else
			snprintf(b, cap, "%lldh", h);
	} else if (h < 48) {
		snprintf(b, cap, "%lldh", h);
	} else if (h < 24 * 8) {
		if (h % 24)
			snprintf(b, cap, "%lldd%lldh", d, h % 24);
		else
			snprintf(b, cap, "%lldd", d);
	} else if (h < 24 * 365 * 2) {
		snprintf(b, cap, "%lldd", d);
	} else if (h < 24 * 365 * 8) {
		if (d % 365)
			snprintf(b, cap, "%lldy%lldd", d / 365, d % 365);
		else
			snprintf(b, cap, "%lldy", d / 365);
	} else {
		snprintf(b, cap, "%lldy", d / 365);
	}
}

static void age_cell(cJSON *cells, const cJSON *ts, time_t now)
{
	char b[32];
	if (!cJSON_IsString(ts)) {
		cJSON_AddItemToArray(cells, cJSON_CreateString("<unknown>"));
		return;
	}
	long long t = ks_rfc3339_parse(ts->valuestring);
	if (t < 0) {
		cJSON_AddItemToArray(cells, cJSON_CreateString("<invalid>"));
		return;
	}
	ks_human_duration((long long)now - t, b, sizeof(b));
	cJSON_AddItemToArray(cells, cJSON_CreateString(b));
}

/* ---- JSONPath (the subset printer columns use) ---------------------------- */
static const cJSON *step_filter(const cJSON *arr, const char *expr, size_t n)
{
	/* ?(@.a.b=="v") or ?(@.a) */
	char buf[256], key[256], val[256] = "";
	snprintf(buf, sizeof(buf), "%.*s", (int)(n < sizeof(buf) - 1 ? n : sizeof(buf) - 1), expr);
	if (strncmp(buf, "?(@", 3) != 0 || buf[strlen(buf) - 1] != ')')
		return NULL;
	buf[strlen(buf) - 1] = 0;
	char *cond = buf + 3, *eq = strstr(cond, "==");
	int has_val = eq != NULL;
	if (eq) {
		*eq = 0;
		char *v = eq + 2;
		size_t vl = strlen(v);
		if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0]) {
			v[vl - 1] = 0;
			v++;
		}
		snprintf(val, sizeof(val), "%s", v);
	}
	snprintf(key, sizeof(key), "%s", cond);
	const cJSON *it;
	cJSON_ArrayForEach(it, arr) {
		const cJSON *x = ks_jsonpath_first(it, key);
		if (!x)
			continue;
		if (!has_val)
			return it;
		char num[64];
		const char *sv = cJSON_IsString(x) ? x->valuestring : NULL;
		if (cJSON_IsNumber(x)) {
			snprintf(num, sizeof(num), "%g", x->valuedouble);
			sv = num;
		} else if (cJSON_IsBool(x)) {
			sv = cJSON_IsTrue(x) ? "true" : "false";
		}
		if (sv && strcmp(sv, val) == 0)
			return it;
	}
	return NULL;
}

const cJSON *ks_jsonpath_first(const cJSON *obj, const char *path)
{
	const cJSON *cur = obj;
	const char *p = path;
	if (!p)
		return NULL;
	if (*p == '{') /* {.a.b} */
		p++;
	while (cur && *p && *p != '}') {
		if (*p == '.') {
			p++;
			if (*p == '.' || !*p)
				return NULL;
			size_t n = strcspn(p, ".[}");
			char k[256];
			snprintf(k, sizeof(k), "%.*s", (int)(n < sizeof(k) - 1 ? n : sizeof(k) - 1), p);
			cur = cJSON_GetObjectItemCaseSensitive(cur, k);
			p += n;
		} else if (*p == '[') {
			const char *end = strchr(p, ']');
			if (!end)
				return NULL;
			/* a filter may contain ']' only inside quotes: find the matching one */
			if (p[1] == '?') {
				const char *q = p + 1;
				char quote = 0;
				for (; *q; q++) {
					if (quote) {
						if (*q == quote)
							quote = 0;
					} else if (*q == '"' || *q == '\'') {
						quote = *q;
					} else if (*q == ']') {
						break;
					}
				}
				if (!*q)
					return NULL;
				end = q;
				cur = cJSON_IsArray(cur) ? step_filter(cur, p + 1, (size_t)(end - p - 1)) : NULL;
			} else if (p[1] == '*') {
				cur = cJSON_IsArray(cur) || cJSON_IsObject(cur) ? cur->child : NULL;
			} else {
				char *e;
				long i = strtol(p + 1, &e, 10);
				if (e != end)
					return NULL;
				int sz = cJSON_GetArraySize(cur);
				if (i < 0)
					i += sz;
				cur = cJSON_IsArray(cur) && i >= 0 && i < sz ? cJSON_GetArrayItem(cur, (int)i) : NULL;
			}
			p = end + 1;
		} else {
			return NULL;
		}
	}
	return cur;
}

/* ---- columns -------------------------------------------------------------- */
static void column(cJSON *defs, const char *name, const char *type, const char *format, const char *desc, int prio)
{
	cJSON *c = cJSON_CreateObject();
	if (!c)
		return;
	cJSON_AddStringToObject(c, "name", name);
	cJSON_AddStringToObject(c, "type", type);
	cJSON_AddStringToObject(c, "format", format);
	cJSON_AddStringToObject(c, "description", desc);
	cJSON_AddNumberToObject(c, "priority", prio);
	cJSON_AddItemToArray(defs, c);
}

static const char NAME_DESC[] = "Name must be unique within a namespace. Is required when creating resources, although "
				"some resources may allow a client to request the generation of an appropriate name "
				"automatically. Name is primarily intended for creation idempotence and configuration "
				"definition. Cannot be updated. More info: "
				"https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
static const char AGE_DESC[] = "CreationTimestamp is a timestamp representing the server time when this object was "
			       "created.";

enum kind { K_OTHER, K_NODE, K_NAMESPACE, K_POD, K_DAEMONSET, K_CONFIGMAP, K_SECRET, K_CRD, K_PDB };

static enum kind kind_of(const ks_rtype *t)
{
	if (t->is_crd)
		return K_OTHER;
	if (!t->group[0]) {
		if (strcmp(t->kind, "Node") == 0)
			return K_NODE;
		if (strcmp(t->kind, "Namespace") == 0)
			return K_NAMESPACE;
		if (strcmp(t->kind, "Pod") == 0)
			return K_POD;
		if (strcmp(t->kind, "ConfigMap") == 0)
			return K_CONFIGMAP;
		if (strcmp(t->kind, "Secret") == 0)
			return K_SECRET;
	}
	if (strcmp(t->group, "apps") == 0 && strcmp(t->kind, "DaemonSet") == 0)
		return K_DAEMONSET;
	if (strcmp(t->group, "apiextensions.k8s.io") == 0)
		return K_CRD;
	if (strcmp(t->group, "policy") == 0 && strcmp(t->kind, "PodDisruptionBudget") == 0)
		return K_PDB;
	return K_OTHER;
}

static void definitions(const ks_rtype *t, cJSON *defs)
{
	column(defs, "Name", "string", "name", NAME_DESC, 0);
	if (t->is_crd) {
		const cJSON *c;
		int n = 0;
		cJSON_ArrayForEach(c, t->columns) {
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(c, "name");
			const cJSON *ty = cJSON_GetObjectItemCaseSensitive(c, "type");
			const cJSON *fo = cJSON_GetObjectItemCaseSensitive(c, "format");
			const cJSON *de = cJSON_GetObjectItemCaseSensitive(c, "description");
			const cJSON *pr = cJSON_GetObjectItemCaseSensitive(c, "priority");
			column(defs, cJSON_IsString(nm) ? nm->valuestring : "", cJSON_IsString(ty) ? ty->valuestring : "string",
			       cJSON_IsString(fo) ? fo->valuestring : "", cJSON_IsString(de) ? de->valuestring : "",
			       cJSON_IsNumber(pr) ? pr->valueint : 0);
			n++;
		}
		if (!n)
			column(defs, "Age", "date", "", AGE_DESC, 0);
		return;
	}
	switch (kind_of(t)) {
	case K_NODE:
		column(defs, "Status", "string", "", "The status of the node", 0);
		column(defs, "Roles", "string", "", "The roles of the node", 0);
		column(defs, "Age", "string", "", AGE_DESC, 0);
		column(defs, "Version", "string", "", "Kubelet Version reported by the node.", 0);
		column(defs, "Kernel-Version", "string", "", "Kernel Version reported by the node.", 1);
		break;
	case K_NAMESPACE:
		column(defs, "Status", "string", "", "The status of the namespace", 0);
		column(defs, "Age", "string", "", AGE_DESC, 0);
		break;
	case K_POD:
		column(defs, "Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0);
		column(defs, "Status", "string", "", "The aggregate status of the containers in this pod.", 0);
		column(defs, "Restarts", "string", "", "The number of times the containers in this pod have been restarted.", 0);
		column(defs, "Age", "string", "", AGE_DESC, 0);
		column(defs, "Node", "string", "", "Node the pod runs on.", 1);
		break;
	case K_DAEMONSET:
		column(defs, "Desired", "integer", "", "The desired number of pods.", 0);
		column(defs, "Current", "integer", "", "The current number of pods.", 0);
		column(defs, "Ready", "integer", "", "The number of ready pods.", 0);
		column(defs, "Up-to-date", "integer", "", "The number of updated pods.", 0);
		column(defs, "Available", "integer", "", "The number of available pods.", 0);
		column(defs, "Node Selector", "string", "", "The node selector of the pod template.", 0);
		column(defs, "Age", "string", "", AGE_DESC, 0);
		break;
	case K_CONFIGMAP:
		column(defs, "Data", "integer", "", "Number of keys in data and binaryData.", 0);
		column(defs, "Age", "string", "", AGE_DESC, 0);
		break;
	case K_SECRET:
		column(defs, "Type", "string", "", "The type of the secret", 0);
		column(defs, "Data", "integer", "", "Number of keys in data.", 0);
		column(defs, "Age", "string", "", AGE_DESC, 0);
		break;
	case K_CRD:
		column(defs, "Created At", "date", "", AGE_DESC, 0);
		break;
	case K_PDB:
		column(defs, "Min Available", "string", "", "The minimum number of pods that must be available", 0);
		column(defs, "Max Unavailable", "string", "", "The maximum number of pods that may be unavailable", 0);
		column(defs, "Allowed Disruptions", "integer", "", "Calculated number of pods that may be disrupted at this time", 0);
		column(defs, "Age", "string", "", AGE_DESC, 0);
		break;
	default:
		column(defs, "Age", "string", "", AGE_DESC, 0);
	}
}

static const cJSON *at(const cJSON *o, const char *path)
{
	return ks_jsonpath_first(o, path);
}

static void num_cell(cJSON *cells, const cJSON *v)
{
	cJSON_AddItemToArray(cells, cJSON_CreateNumber(cJSON_IsNumber(v) ? v->valuedouble : 0));
}

static void str_cell(cJSON *cells, const char *s)
{
	cJSON_AddItemToArray(cells, cJSON_CreateString(s));
}

/* A printer-column value: strings as they are, other JSON printed compactly. */
static cJSON *custom_cell(const cJSON *col, const cJSON *obj, time_t now)
{
	const cJSON *jp = cJSON_GetObjectItemCaseSensitive(col, "jsonPath");
	const cJSON *ty = cJSON_GetObjectItemCaseSensitive(col, "type");
	const char *type = cJSON_IsString(ty) ? ty->valuestring : "string";
	const cJSON *v = cJSON_IsString(jp) ? ks_jsonpath_first(obj, jp->valuestring) : NULL;
	if (!v || cJSON_IsNull(v))
		return cJSON_CreateNull();
	if (strcmp(type, "string") == 0) {
		if (cJSON_IsString(v))
			return cJSON_CreateString(v->valuestring);
		char *s = cJSON_PrintUnformatted(v);
		cJSON *c = cJSON_CreateString(s ? s : "");
		free(s);
		return c;
	}
	if (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0)
		return cJSON_IsNumber(v) ? cJSON_CreateNumber(v->valuedouble) : cJSON_CreateNull();
	if (strcmp(type, "boolean") == 0)
		return cJSON_IsBool(v) ? cJSON_CreateBool(cJSON_IsTrue(v)) : cJSON_CreateNull();
	if (strcmp(type, "date") == 0 && cJSON_IsString(v)) {
		cJSON *tmp = cJSON_CreateArray();
		if (!tmp)
			return NULL;
		age_cell(tmp, v, now);
		cJSON *c = cJSON_DetachItemFromArray(tmp, 0);
		cJSON_Delete(tmp);
		return c;
	}
	return cJSON_CreateNull();
}

static void node_cells(cJSON *cells, const cJSON *o, time_t now)
{
	const cJSON *ready = at(o, ".status.conditions[?(@.type==\"Ready\")].status");
	char st[64];
	snprintf(st, sizeof(st), "%s", cJSON_IsString(ready) ? (strcmp(ready->valuestring, "True") == 0 ? "Ready" : "NotReady")
								  : "Unknown");
	if (cJSON_IsTrue(at(o, ".spec.unschedulable")))
		strncat(st, ",SchedulingDisabled", sizeof(st) - strlen(st) - 1);
	str_cell(cells, st);
	char roles[256] = "";
	const cJSON *l;
	cJSON_ArrayForEach(l, at(o, ".metadata.labels")) {
		const char *r = NULL;
		if (strncmp(l->string, "node-role.kubernetes.io/", 24) == 0 && l->string[24])
			r = l->string + 24;
		else if (strcmp(l->string, "kubernetes.io/role") == 0 && cJSON_IsString(l))
			r = l->valuestring;
		if (r && strlen(roles) + strlen(r) + 2 < sizeof(roles)) {
			if (roles[0])
				strcat(roles, ",");
			strcat(roles, r);
		}
	}
	str_cell(cells, roles[0] ? roles : "<none>");
	age_cell(cells, at(o, ".metadata.creationTimestamp"), now);
	const cJSON *kv = at(o, ".status.nodeInfo.kubeletVersion");
	str_cell(cells, cJSON_IsString(kv) ? kv->valuestring : "");
	const cJSON *kern = at(o, ".status.nodeInfo.kernelVersion");
	str_cell(cells, cJSON_IsString(kern) ? kern->valuestring : "<unknown>");
}

static void pod_cells(cJSON *cells, const cJSON *o, time_t now)
{
	int total = cJSON_GetArraySize(at(o, ".spec.containers")), ready = 0, restarts = 0;
	const cJSON *cs;
	cJSON_ArrayForEach(cs, at(o, ".status.containerStatuses")) {
		ready += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "ready"));
		const cJSON *rc = cJSON_GetObjectItemCaseSensitive(cs, "restartCount");
		restarts += cJSON_IsNumber(rc) ? rc->valueint : 0;
	}
	char b[64];
	snprintf(b, sizeof(b), "%d/%d", ready, total);
	str_cell(cells, b);
	const cJSON *ph = at(o, ".status.phase");
	const cJSON *dt = at(o, ".metadata.deletionTimestamp");
	str_cell(cells, dt ? "Terminating" : cJSON_IsString(ph) ? ph->valuestring : "Pending");
	snprintf(b, sizeof(b), "%d", restarts);
	str_cell(cells, b);
	age_cell(cells, at(o, ".metadata.creationTimestamp"), now);
	const cJSON *nn = at(o, ".spec.nodeName");
	str_cell(cells, cJSON_IsString(nn) ? nn->valuestring : "<none>");
}

static void ds_cells(cJSON *cells, const cJSON *o, time_t now)
{
	num_cell(cells, at(o, ".status.desiredNumberScheduled"));
	num_cell(cells, at(o, ".status.currentNumberScheduled"));
	num_cell(cells, at(o, ".status.numberReady"));
	num_cell(cells, at(o, ".status.updatedNumberScheduled"));
	num_cell(cells, at(o, ".status.numberAvailable"));
	char sel[512] = "";
	const cJSON *l;
	cJSON_ArrayForEach(l, at(o, ".spec.template.spec.nodeSelector")) {
		if (!cJSON_IsString(l))
			continue;
		size_t n = strlen(sel);
		snprintf(sel + n, sizeof(sel) - n, "%s%s=%s", n ? "," : "", l->string, l->valuestring);
	}
	str_cell(cells, sel[0] ? sel : "<none>");
	age_cell(cells, at(o, ".metadata.creationTimestamp"), now);
}

static void row_cells(const ks_rtype *t, cJSON *cells, const cJSON *o, time_t now)
{
	const cJSON *name = at(o, ".metadata.name");
	str_cell(cells, cJSON_IsString(name) ? name->valuestring : "");
	const cJSON *created = at(o, ".metadata.creationTimestamp");
	if (t->is_crd) {
		const cJSON *c;
		int n = 0;
		cJSON_ArrayForEach(c, t->columns) {
			cJSON *cell = custom_cell(c, o, now);
			if (cell)
				cJSON_AddItemToArray(cells, cell);
			n++;
		}
		if (!n)
			age_cell(cells, created, now);
		return;
	}
	switch (kind_of(t)) {
	case K_NODE:
		node_cells(cells, o, now);
		break;
	case K_NAMESPACE: {
		const cJSON *ph = at(o, ".status.phase");
		str_cell(cells, cJSON_IsString(ph) ? ph->valuestring : "Active");
		age_cell(cells, created, now);
		break;
	}
	case K_POD:
		pod_cells(cells, o, now);
		break;
	case K_DAEMONSET:
		ds_cells(cells, o, now);
		break;
	case K_CONFIGMAP:
		cJSON_AddItemToArray(cells, cJSON_CreateNumber(cJSON_GetArraySize(at(o, ".data")) +
							       cJSON_GetArraySize(at(o, ".binaryData"))));
		age_cell(cells, created, now);
		break;
	case K_SECRET: {
		const cJSON *ty = at(o, ".type");
		str_cell(cells, cJSON_IsString(ty) ? ty->valuestring : "Opaque");
		cJSON_AddItemToArray(cells, cJSON_CreateNumber(cJSON_GetArraySize(at(o, ".data"))));
		age_cell(cells, created, now);
		break;
	}
	case K_CRD:
		str_cell(cells, cJSON_IsString(created) ? created->valuestring : "");
		break;
	case K_PDB: {
		static const char *f[] = { ".spec.minAvailable", ".spec.maxUnavailable" };
		for (int i = 0; i < 2; i++) {
			const cJSON *v = at(o, f[i]);
			char b[32];
			if (cJSON_IsNumber(v))
				snprintf(b, sizeof(b), "%d", (int)v->valuedouble);
			else
				snprintf(b, sizeof(b), "%s", cJSON_IsString(v) ? v->valuestring : "N/A");
			str_cell(cells, b);
		}
		num_cell(cells, at(o, ".status.disruptionsAllowed"));
		age_cell(cells, created, now);
		break;
	}
	default:
		age_cell(cells, created, now);
	}
}

static cJSON *row(const ks_rtype *t, const cJSON *o, const char *include, time_t now)
{
	cJSON *r = cJSON_CreateObject(), *cells = r ? cJSON_AddArrayToObject(r, "cells") : NULL;
	if (!cells) {
		cJSON_Delete(r);
		return NULL;
	}
	row_cells(t, cells, o, now);
	if (include && strcasecmp(include, "None") == 0)
		return r;
	cJSON *obj;
	if (include && strcasecmp(include, "Object") == 0) {
		obj = cJSON_Duplicate(o, 1);
	} else {
		obj = cJSON_CreateObject();
		if (obj) {
			cJSON_AddStringToObject(obj, "kind", "PartialObjectMetadata");
			cJSON_AddStringToObject(obj, "apiVersion", "meta.k8s.io/v1");
			const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "metadata");
			cJSON_AddItemToObject(obj, "metadata", m ? cJSON_Duplicate(m, 1) : cJSON_CreateObject());
		}
	}
	if (obj)
		cJSON_AddItemToObject(r, "object", obj);
	return r;
}

cJSON *ks_table(const ks_rtype *t, const cJSON *src, const char *include, time_t now)
{
	cJSON *tb = cJSON_CreateObject();
	if (!tb)
		return NULL;
	cJSON_AddStringToObject(tb, "kind", "Table");
	cJSON_AddStringToObject(tb, "apiVersion", "meta.k8s.io/v1");
	cJSON *meta = cJSON_AddObjectToObject(tb, "metadata");
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(src, "items");
	const cJSON *sm = cJSON_GetObjectItemCaseSensitive(src, "metadata");
	if (meta && cJSON_IsArray(items)) { /* a list: its resourceVersion and continue */
		const cJSON *v;
		cJSON_ArrayForEach(v, sm) if (cJSON_IsString(v) && (strcmp(v->string, "resourceVersion") == 0 ||
								    strcmp(v->string, "continue") == 0))
			cJSON_AddStringToObject(meta, v->string, v->valuestring);
	} else if (meta) {
		const cJSON *rv = cJSON_GetObjectItemCaseSensitive(sm, "resourceVersion");
		if (cJSON_IsString(rv))
			cJSON_AddStringToObject(meta, "resourceVersion", rv->valuestring);
	}
	cJSON *defs = cJSON_AddArrayToObject(tb, "columnDefinitions");
	cJSON *rows = cJSON_AddArrayToObject(tb, "rows");
	if (!defs || !rows) {
		cJSON_Delete(tb);
		return NULL;
	}
	definitions(t, defs);
	if (cJSON_IsArray(items)) {
		const cJSON *it;
		cJSON_ArrayForEach(it, items) {
			cJSON *r = row(t, it, include, now);
			if (!r) {
				cJSON_Delete(tb);
				return NULL;
			}
			cJSON_AddItemToArray(rows, r);
		}
	} else {
		cJSON *r = row(t, src, include, now);
		if (!r) {
			cJSON_Delete(tb);
			return NULL;
		}
		cJSON_AddItemToArray(rows, r);
	}
	return tb;
}
