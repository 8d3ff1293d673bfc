/* kubesim — Table rendering of custom resources (see table.h). */
#include "table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ks_table_wanted(const char *accept)
{
	return accept && strstr(accept, "as=Table") != NULL;
}

/* One filter [?(@.a.b=="v")] (or 'v'): first element of arr matching. */
static const cJSON *filter(const cJSON *arr, const char *expr, size_t len)
{
	/* expr: @.a.b=="v" */
	char buf[256];
	if (len >= sizeof(buf) || len < 4 || expr[0] != '@')
		return NULL;
	memcpy(buf, expr, len);
	buf[len] = 0;
	char *eq = strstr(buf, "==");
	if (!eq)
		return NULL;
	*eq = 0;
	char *val = eq + 2;
	size_t vl = strlen(val);
	if (vl < 2 || (val[0] != '"' && val[0] != '\'') || val[vl - 1] != val[0])
		return NULL;
	val[vl - 1] = 0;
	val++;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		const cJSON *v = ks_table_jsonpath(it, buf + 1);
		if (cJSON_IsString(v) && strcmp(v->valuestring, val) == 0)
			return it;
	}
	return NULL;
}

const cJSON *ks_table_jsonpath(const cJSON *obj, const char *path)
{
	const char *p = path;
	if (!p)
		return NULL;
	while (*p && obj) {
		if (*p == '.') {
			p++;
			size_t n = strcspn(p, ".[");
			char key[256];
			if (n == 0 || n >= sizeof(key))
				return NULL;
			memcpy(key, p, n);
			key[n] = 0;
			obj = cJSON_GetObjectItemCaseSensitive(obj, key);
			p += n;
		} else if (*p == '[') {
			const char *end;
			if (p[1] == '?' && p[2] == '(') {
				end = strstr(p, ")]");
				if (!end || !cJSON_IsArray(obj))
					return NULL;
				obj = filter(obj, p + 3, (size_t)(end - (p + 3)));
				p = end + 2;
			} else {
				char *e;
				long i = strtol(p + 1, &e, 10);
				if (e == p + 1 || *e != ']' || !cJSON_IsArray(obj))
					return NULL;
				obj = cJSON_GetArrayItem(obj, (int)i);
				p = e + 1;
			}
		} else {
			return NULL;
		}
	}
	return *p ? NULL : obj;
}

void ks_table_age(char *buf, size_t cap, int64_t s)
{
	if (s < -1) {
		snprintf(buf, cap, "<invalid>");
		return;
	}
	if (s < 0)
		s = 0;
	int64_t m = s / 60, h = s / 3600, d = h / 24, y = d / 365;
	if (s < 120)
		snprintf(buf, cap, "%llds", (long long)s);
	else if (m < 10)
		s % 60 ? snprintf(buf, cap, "%lldm%llds", (long long)m, (long long)(s % 60))
		       : snprintf(buf, cap, "%lldm", (long long)m);
	else if (m < 180)
		snprintf(buf, cap, "%lldm", (long long)m);
	else if (h < 8)
		m % 60 ? snprintf(buf, cap, "%lldh%lldm", (long long)h, (long long)(m % 60))
		       : snprintf(buf, cap, "%lldh", (long long)h);
	else if (h < 48)
		snprintf(buf, cap, "%lldh", (long long)h);
	else if (h < 24 * 8)
		h % 24 ? snprintf(buf, cap, "%lldd%lldh", (long long)d, (long long)(h % 24))
		       : snprintf(buf, cap, "%lldd", (long long)d);
	else if (d < 365 * 2)
		snprintf(buf, cap, "%lldd", (long long)d);
	else if (y < 8)
		snprintf(buf, cap, "%lldy%lldd", (long long)y, (long long)(d % 365));
	else
		snprintf(buf, cap, "%lldy", (long long)y);
}

static int64_t parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *e = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!e)
		return -1;
	return (int64_t)timegm(&tm);
}

static cJSON *coldef(const char *name, const char *type, const char *format, const char *desc, int prio)
{
	cJSON *c = cJSON_CreateObject();
	if (!c || !cJSON_AddStringToObject(c, "name", name) || !cJSON_AddStringToObject(c, "type", type) ||
	    !cJSON_AddStringToObject(c, "format", format ? format : "") ||
	    !cJSON_AddStringToObject(c, "description", desc ? desc : "") || !cJSON_AddNumberToObject(c, "priority", prio)) {
		cJSON_Delete(c);
		return NULL;
	}
	return c;
}

static const cJSON *printer_columns(const cJSON *crd, const char *version)
{
	const cJSON *vs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(crd, "spec"), "versions");
	const cJSON *v;
	cJSON_ArrayForEach(v, vs)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(v, "name");
		if (cJSON_IsString(n) && version && strcmp(n->valuestring, version) == 0)
			return cJSON_GetObjectItemCaseSensitive(v, "additionalPrinterColumns");
	}
	return NULL;
}

static cJSON *cell(const cJSON *val, const char *type, int64_t now_s)
{
	if (!val || cJSON_IsNull(val))
		return cJSON_CreateNull();
	if (strcmp(type, "date") == 0) {
		char b[32];
		int64_t t = cJSON_IsString(val) ? parse_time(val->valuestring) : -1;
		if (t < 0)
			return cJSON_CreateString("<unknown>");
		ks_table_age(b, sizeof(b), now_s - t);
		return cJSON_CreateString(b);
	}
	if ((strcmp(type, "integer") == 0 || strcmp(type, "number") == 0) && cJSON_IsNumber(val))
		return cJSON_CreateNumber(val->valuedouble);
	if (strcmp(type, "boolean") == 0 && cJSON_IsBool(val))
		return cJSON_CreateBool(cJSON_IsTrue(val));
	if (cJSON_IsString(val))
		return cJSON_CreateString(val->valuestring);
	char *s = cJSON_PrintUnformatted(val);
	cJSON *c = s ? cJSON_CreateString(s) : NULL;
	cJSON_free(s);
	return c;
}

cJSON *ks_table_build(const cJSON *crd, const char *version, const cJSON *const *objs, int n, const char *rv,
		      int64_t now_s)
{
	cJSON *t = cJSON_CreateObject();
	cJSON *defs, *rows, *md;
	if (!t || !cJSON_AddStringToObject(t, "kind", "Table") || !cJSON_AddStringToObject(t, "apiVersion", "meta.k8s.io/v1") ||
	    !(md = cJSON_AddObjectToObject(t, "metadata")) || (rv && !cJSON_AddStringToObject(md, "resourceVersion", rv)) ||
	    !(defs = cJSON_AddArrayToObject(t, "columnDefinitions")) || !(rows = cJSON_AddArrayToObject(t, "rows")))
		goto fail;
	const cJSON *pcs = printer_columns(crd, version);
	cJSON *c = coldef("Name", "string", "name", "Name must be unique within a namespace.", 0);
	if (!c)
		goto fail;
	cJSON_AddItemToArray(defs, c);
	int ncols = cJSON_GetArraySize(pcs);
	if (ncols == 0) {
		if (!(c = coldef("Age", "date", "", "", 0)))
			goto fail;
		cJSON_AddItemToArray(defs, c);
	}
	const cJSON *pc;
	cJSON_ArrayForEach(pc, pcs)
	{
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(pc, "name"), *ty = cJSON_GetObjectItemCaseSensitive(pc, "type"),
			    *fm = cJSON_GetObjectItemCaseSensitive(pc, "format"),
			    *de = cJSON_GetObjectItemCaseSensitive(pc, "description"),
			    *pr = cJSON_GetObjectItemCaseSensitive(pc, "priority");
		if (!(c = coldef(cJSON_IsString(nm) ? nm->valuestring : "", cJSON_IsString(ty) ? ty->valuestring : "string",
				 cJSON_IsString(fm) ? fm->valuestring : NULL, cJSON_IsString(de) ? de->valuestring : NULL,
				 cJSON_IsNumber(pr) ? (int)pr->valuedouble : 0)))
			goto fail;
		cJSON_AddItemToArray(defs, c);
	}
	for (int i = 0; i < n; i++) {
		const cJSON *o = objs[i], *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
		cJSON *row = cJSON_CreateObject(), *cells, *po, *pm;
		if (!row)
			goto fail;
		cJSON_AddItemToArray(rows, row);
		if (!(cells = cJSON_AddArrayToObject(row, "cells")) || !(po = cJSON_AddObjectToObject(row, "object")) ||
		    !cJSON_AddStringToObject(po, "kind", "PartialObjectMetadata") ||
		    !cJSON_AddStringToObject(po, "apiVersion", "meta.k8s.io/v1") || !(pm = cJSON_Duplicate(meta, 1)))
			goto fail;
		cJSON_AddItemToObject(po, "metadata", pm);
		if (!(c = cell(name, "string", now_s)))
			goto fail;
		cJSON_AddItemToArray(cells, c);
		if (ncols == 0 && !(c = cell(cJSON_GetObjectItemCaseSensitive(meta, "creationTimestamp"), "date", now_s)))
			goto fail;
		if (ncols == 0)
			cJSON_AddItemToArray(cells, c);
		cJSON_ArrayForEach(pc, pcs)
		{
			const cJSON *jp = cJSON_GetObjectItemCaseSensitive(pc, "jsonPath"), *ty = cJSON_GetObjectItemCaseSensitive(pc, "type");
			if (!(c = cell(cJSON_IsString(jp) ? ks_table_jsonpath(o, jp->valuestring) : NULL,
				       cJSON_IsString(ty) ? ty->valuestring : "string", now_s)))
				goto fail;
			cJSON_AddItemToArray(cells, c);
		}
	}
	return t;
fail:
	cJSON_Delete(t);
	return NULL;
}
