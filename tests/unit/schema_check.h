/* Test helper (header-only, included by Criterion tests): a small checker of
 * JSON objects against a CRD's openAPIV3Schema (types, required, minItems,
 * enums, unknown fields) and a loader for CRD files relative to $GPUKMM_SRC. */
#ifndef GPUKMM_TESTS_SCHEMA_CHECK_H
#define GPUKMM_TESTS_SCHEMA_CHECK_H

#include <cJSON.h>
#include <stdbool.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/yamljson.h"

static void schema_check(const cJSON *v, const cJSON *schema, const char *path, char *errs, size_t cap)
{
	const cJSON *type = cJSON_GetObjectItem(schema, "type");
	const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
	size_t used = strlen(errs);
#define ERR(...) do { if (used < cap) snprintf(errs + used, cap - used, __VA_ARGS__); used = strlen(errs); } while (0)
	if (t && !strcmp(t, "object")) {
		if (!cJSON_IsObject(v)) {
			ERR("%s: not an object\n", path);
			return;
		}
		const cJSON *props = cJSON_GetObjectItem(schema, "properties");
		const cJSON *addl = cJSON_GetObjectItem(schema, "additionalProperties");
		const cJSON *req = cJSON_GetObjectItem(schema, "required"), *r;
		cJSON_ArrayForEach(r, req)
			if (!cJSON_GetObjectItem(v, r->valuestring))
				ERR("%s.%s: Required value\n", path, r->valuestring);
		const cJSON *e;
		cJSON_ArrayForEach(e, v) {
			char sub[512];
			snprintf(sub, sizeof(sub), "%s.%s", path, e->string);
			const cJSON *ps = props ? cJSON_GetObjectItem(props, e->string) : NULL;
			if (ps)
				schema_check(e, ps, sub, errs, cap);
			else if (addl)
				schema_check(e, addl, sub, errs, cap);
			else if (!cJSON_GetObjectItem(schema, "x-kubernetes-preserve-unknown-fields") && strcmp(path, ".metadata"))
				ERR("%s: unknown field (would be pruned)\n", sub);
			used = strlen(errs);
		}
	} else if (t && !strcmp(t, "array")) {
		if (!cJSON_IsArray(v)) {
			ERR("%s: not an array\n", path);
			return;
		}
		const cJSON *min = cJSON_GetObjectItem(schema, "minItems");
		if (min && cJSON_GetArraySize(v) < min->valueint)
			ERR("%s: fewer than %d items\n", path, min->valueint);
		const cJSON *e;
		int i = 0;
		cJSON_ArrayForEach(e, v) {
			char sub[512];
			snprintf(sub, sizeof(sub), "%s[%d]", path, i++);
			schema_check(e, cJSON_GetObjectItem(schema, "items"), sub, errs, cap);
			used = strlen(errs);
		}
	} else if (t && !strcmp(t, "string")) {
		const cJSON *en = cJSON_GetObjectItem(schema, "enum"), *x;
		bool found = !en;
		if (!cJSON_IsString(v)) {
			ERR("%s: not a string\n", path);
			found = true;
		}
		cJSON_ArrayForEach(x, en)
			found |= cJSON_IsString(x) && !strcmp(x->valuestring, v->valuestring);
		if (!found)
			ERR("%s: Unsupported value \"%s\"\n", path, v->valuestring);
	} else if (t && !strcmp(t, "boolean")) {
		if (!cJSON_IsBool(v))
			ERR("%s: not a boolean\n", path);
	} else if (t && !strcmp(t, "integer")) {
		const cJSON *mn = cJSON_GetObjectItem(schema, "minimum"), *mx = cJSON_GetObjectItem(schema, "maximum");
		if (!cJSON_IsNumber(v) || v->valuedouble != (double)(long long)v->valuedouble)
			ERR("%s: not an integer\n", path);
		else if ((mn && v->valuedouble < mn->valuedouble) || (mx && v->valuedouble > mx->valuedouble))
			ERR("%s: out of range\n", path);
	}
#undef ERR
}

static cJSON *crd_schema(const char *rel, cJSON **crd_out)
{
	const char *src = getenv("GPUKMM_SRC");
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", src ? src : ".", rel);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open %s", path);
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		fwrite(chunk, 1, n, mem);
	fclose(f);
	fclose(mem);
	gk_yamljson_docs d;
	gk_err e = { 0 };
	cr_assert_eq(gk_yamljson_parse(buf, len, &d, &e), 0, "%s", e.msg);
	free(buf);
	cr_assert_eq(d.n, 1);
	cJSON *crd = d.doc[0];
	free(d.doc);
	*crd_out = crd;
	cJSON *v0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(crd, "spec"), "versions"), 0);
	return cJSON_GetObjectItem(cJSON_GetObjectItem(v0, "schema"), "openAPIV3Schema");
}

#endif
