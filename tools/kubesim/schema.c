/* kubesim — openAPIV3Schema pruning, defaulting and validation. Messages follow the
 * API server's field.Error strings so kubectl prints what users know. */
#include "schema.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <math.h>
#include <stdarg.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KS_SCHEMA_MAX_DEPTH 64

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static int flag(const cJSON *s, const char *k)
{
	return cJSON_IsTrue(get(s, k));
}

static void join(char *dst, size_t cap, const char *parent, const char *key)
{
	if (parent[0])
		snprintf(dst, cap, "%s.%s", parent, key);
	else
		snprintf(dst, cap, "%s", key);
}

void ks_schema_add_cause(ks_schema_result *r, const char *reason, const char *field, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON *c = cJSON_CreateObject();
	if (c) {
		cJSON_AddStringToObject(c, "reason", reason);
		cJSON_AddStringToObject(c, "message", msg);
		cJSON_AddStringToObject(c, "field", field);
		cJSON_AddItemToArray(r->causes, c);
	}
	size_t used = strlen(r->summary);
	if (used < sizeof(r->summary) - 1)
		snprintf(r->summary + used, sizeof(r->summary) - used, "%s%s: %s", r->ncauses ? ", " : "", field, msg);
	r->ncauses++;
}

static void value_str(const cJSON *v, char *buf, size_t cap)
{
	if (cJSON_IsString(v))
		snprintf(buf, cap, "\"%s\"", v->valuestring);
	else if (cJSON_IsNumber(v))
		snprintf(buf, cap, "%.15g", v->valuedouble);
	else if (cJSON_IsBool(v))
		snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
	else if (cJSON_IsNull(v))
		snprintf(buf, cap, "null");
	else if (cJSON_IsArray(v))
		snprintf(buf, cap, "[]");
	else
		snprintf(buf, cap, "{}");
}

static const char *type_name(const cJSON *v)
{
	if (cJSON_IsString(v))
		return "string";
	if (cJSON_IsNumber(v))
		return v->valuedouble == floor(v->valuedouble) ? "integer" : "number";
	if (cJSON_IsBool(v))
		return "boolean";
	if (cJSON_IsArray(v))
		return "array";
	if (cJSON_IsObject(v))
		return "object";
	return "null";
}

/* ---- pruning --------------------------------------------------------------- */
void ks_schema_note_unknown(ks_schema_result *r, const char *path)
{
	size_t used = strlen(r->unknown);
	if (used < sizeof(r->unknown) - 1)
		snprintf(r->unknown + used, sizeof(r->unknown) - used, "%sunknown field \"%s\"", r->nunknown ? ", " : "",
			 path);
	r->nunknown++;
}

static void prune(const cJSON *s, cJSON *v, const char *path, int depth, int root, ks_schema_result *r)
{
	if (!s || depth > KS_SCHEMA_MAX_DEPTH)
		return;
	if (cJSON_IsArray(v)) {
		const cJSON *items = get(s, "items");
		cJSON *it;
		int i = 0;
		cJSON_ArrayForEach(it, v) {
			char p[1024];
			snprintf(p, sizeof(p), "%s[%d]", path, i++);
			prune(items, it, p, depth + 1, 0, r);
		}
		return;
	}
	if (!cJSON_IsObject(v))
		return;
	const cJSON *props = get(s, "properties");
	const cJSON *addl = get(s, "additionalProperties");
	int preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
	int embedded = flag(s, "x-kubernetes-embedded-resource");
	cJSON *it = v->child;
	while (it) {
		cJSON *next = it->next;
		char p[1024];
		join(p, sizeof(p), path, it->string);
		const cJSON *ps = get(props, it->string);
		int implicit = (root || embedded) && (strcmp(it->string, "apiVersion") == 0 ||
						      strcmp(it->string, "kind") == 0 || strcmp(it->string, "metadata") == 0);
		if (implicit && (!ps || strcmp(it->string, "metadata") == 0)) {
			/* metadata is ObjectMeta, validated by the server itself */
		} else if (ps) {
			prune(ps, it, p, depth + 1, 0, r);
		} else if (cJSON_IsObject(addl)) {
			prune(addl, it, p, depth + 1, 0, r);
		} else if (preserve || cJSON_IsTrue(addl)) {
			/* kept as is */
		} else {
			ks_schema_note_unknown(r, p);
			cJSON_Delete(cJSON_DetachItemViaPointer(v, it));
		}
		it = next;
	}
}

/* ---- defaulting -------------------------------------------------------------- */
static void apply_defaults(const cJSON *s, cJSON *v, int depth)
{
	if (!s || depth > KS_SCHEMA_MAX_DEPTH)
		return;
	if (cJSON_IsArray(v)) {
		cJSON *it;
		cJSON_ArrayForEach(it, v) apply_defaults(get(s, "items"), it, depth + 1);
		return;
	}
	if (!cJSON_IsObject(v))
		return;
	const cJSON *props = get(s, "properties");
	const cJSON *ps;
	cJSON_ArrayForEach(ps, props) {
		cJSON *cur = cJSON_GetObjectItemCaseSensitive(v, ps->string);
		const cJSON *def = get(ps, "default");
		if (cur && cJSON_IsNull(cur) && !flag(ps, "nullable")) {
			cJSON_DeleteItemFromObjectCaseSensitive(v, ps->string);
			cur = NULL;
		}
		if (!cur && def) {
			cJSON *d = cJSON_Duplicate(def, 1);
			if (d) {
				cJSON_AddItemToObject(v, ps->string, d);
				cur = d;
			}
		}
		if (cur)
			apply_defaults(ps, cur, depth + 1);
	}
	const cJSON *addl = get(s, "additionalProperties");
	if (cJSON_IsObject(addl)) {
		cJSON *it;
		cJSON_ArrayForEach(it, v) if (!get(props, it->string)) apply_defaults(addl, it, depth + 1);
	}
}

/* ---- validation -------------------------------------------------------------- */
static int regex_match(const char *pattern, const char *subject, int *bad_pattern)
{
	int errcode;
	PCRE2_SIZE erroff;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &errcode, &erroff, NULL);
	if (!re) {
		*bad_pattern = 1;
		return 1;
	}
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
	int rc = md ? pcre2_match(re, (PCRE2_SPTR)subject, PCRE2_ZERO_TERMINATED, 0, 0, md, NULL) : -1;
	pcre2_match_data_free(md);
	pcre2_code_free(re);
	return rc >= 0;
}

static int type_ok(const char *type, const cJSON *v, int int_or_string)
{
	if (int_or_string)
		return cJSON_IsString(v) || (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble));
	if (!type)
		return 1;
	if (strcmp(type, "object") == 0)
		return cJSON_IsObject(v);
	if (strcmp(type, "array") == 0)
		return cJSON_IsArray(v);
	if (strcmp(type, "string") == 0)
		return cJSON_IsString(v);
	if (strcmp(type, "boolean") == 0)
		return cJSON_IsBool(v);
	if (strcmp(type, "number") == 0)
		return cJSON_IsNumber(v);
	if (strcmp(type, "integer") == 0)
		return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 9.3e18;
	return 1;
}

static void validate(const cJSON *s, const cJSON *v, const char *path, int depth, int root, ks_schema_result *r)
{
	if (!s || depth > KS_SCHEMA_MAX_DEPTH)
		return;
	char vs[256];
	const cJSON *t = get(s, "type");
	const char *type = cJSON_IsString(t) ? t->valuestring : NULL;
	int ios = flag(s, "x-kubernetes-int-or-string");
	if (cJSON_IsNull(v)) {
		if (!flag(s, "nullable") && type)
			ks_schema_add_cause(r, "FieldValueTypeInvalid", path, "Invalid value: \"null\": %s in body must be of type %s: \"null\"",
				  path, type);
		return;
	}
	if (!type_ok(type, v, ios)) {
		value_str(v, vs, sizeof(vs));
		ks_schema_add_cause(r, "FieldValueTypeInvalid", path, "Invalid value: \"%s\": %s in body must be of type %s: \"%s\"",
			  type_name(v), path, ios ? "integer,string" : type, type_name(v));
		return;
	}
	const cJSON *en = get(s, "enum");
	if (cJSON_IsArray(en)) {
		int found = 0;
		const cJSON *e;
		cJSON_ArrayForEach(e, en) {
			char a[256], b[256];
			value_str(e, a, sizeof(a));
			value_str(v, b, sizeof(b));
			if (strcmp(a, b) == 0 && cJSON_IsString(e) == cJSON_IsString(v))
				found = 1;
		}
		if (!found) {
			char sup[1024] = "";
			size_t used = 0;
			cJSON_ArrayForEach(e, en) {
				char a[256];
				value_str(e, a, sizeof(a));
				if (used < sizeof(sup))
					used += (size_t)snprintf(sup + used, sizeof(sup) - used, "%s%s", used ? ", " : "", a);
			}
			value_str(v, vs, sizeof(vs));
			ks_schema_add_cause(r, "FieldValueNotSupported", path, "Unsupported value: %s: supported values: %s", vs, sup);
		}
	}
	if (cJSON_IsNumber(v)) {
		const cJSON *mx = get(s, "maximum"), *mn = get(s, "minimum");
		int exmax = flag(s, "exclusiveMaximum"), exmin = flag(s, "exclusiveMinimum");
		double d = v->valuedouble;
		if (cJSON_IsNumber(mx) && (exmax ? d >= mx->valuedouble : d > mx->valuedouble))
			ks_schema_add_cause(r, "FieldValueInvalid", path, "Invalid value: %.15g: %s in body should be less than %s%.15g",
				  d, path, exmax ? "" : "or equal to ", mx->valuedouble);
		if (cJSON_IsNumber(mn) && (exmin ? d <= mn->valuedouble : d < mn->valuedouble))
			ks_schema_add_cause(r, "FieldValueInvalid", path,
				  "Invalid value: %.15g: %s in body should be greater than %s%.15g", d, path,
				  exmin ? "" : "or equal to ", mn->valuedouble);
		const cJSON *mo = get(s, "multipleOf");
		if (cJSON_IsNumber(mo) && mo->valuedouble > 0 && fmod(d, mo->valuedouble) != 0)
			ks_schema_add_cause(r, "FieldValueInvalid", path, "Invalid value: %.15g: %s in body should be a multiple of %.15g",
				  d, path, mo->valuedouble);
	}
	if (cJSON_IsString(v)) {
		size_t len = strlen(v->valuestring);
		const cJSON *mx = get(s, "maxLength"), *mn = get(s, "minLength"), *pat = get(s, "pattern");
		if (cJSON_IsNumber(mx) && (double)len > mx->valuedouble)
			ks_schema_add_cause(r, "FieldValueTooLong", path, "Too long: may not be more than %.0f bytes", mx->valuedouble);
		if (cJSON_IsNumber(mn) && (double)len < mn->valuedouble)
			ks_schema_add_cause(r, "FieldValueInvalid", path, "Invalid value: \"%s\": %s in body should be at least %.0f chars long",
				  v->valuestring, path, mn->valuedouble);
		if (cJSON_IsString(pat)) {
			int bad = 0;
			if (!regex_match(pat->valuestring, v->valuestring, &bad))
				ks_schema_add_cause(r, "FieldValueInvalid", path, "Invalid value: \"%s\": %s in body should match '%s'",
					  v->valuestring, path, pat->valuestring);
		}
	}
	if (cJSON_IsArray(v)) {
		int n = cJSON_GetArraySize(v);
		const cJSON *mx = get(s, "maxItems"), *mn = get(s, "minItems");
		if (cJSON_IsNumber(mx) && n > mx->valuedouble)
			ks_schema_add_cause(r, "FieldValueTooMany", path, "Too many: %d: must have at most %.0f items", n, mx->valuedouble);
		if (cJSON_IsNumber(mn) && n < mn->valuedouble)
			ks_schema_add_cause(r, "FieldValueInvalid", path, "Invalid value: %d: %s in body should have at least %.0f items",
				  n, path, mn->valuedouble);
		const cJSON *items = get(s, "items");
		const cJSON *it;
		int i = 0;
		cJSON_ArrayForEach(it, v) {
			char p[1024];
			snprintf(p, sizeof(p), "%s[%d]", path, i++);
			validate(items, it, p, depth + 1, 0, r);
		}
	}
	if (cJSON_IsObject(v)) {
		const cJSON *props = get(s, "properties");
		const cJSON *addl = get(s, "additionalProperties");
		const cJSON *req = get(s, "required");
		const cJSON *q;
		cJSON_ArrayForEach(q, req) {
			if (cJSON_IsString(q) && !cJSON_HasObjectItem(v, q->valuestring)) {
				char p[1024];
				join(p, sizeof(p), path, q->valuestring);
				ks_schema_add_cause(r, "FieldValueRequired", p, "Required value");
			}
		}
		int n = cJSON_GetArraySize(v);
		const cJSON *mxp = get(s, "maxProperties"), *mnp = get(s, "minProperties");
		if (cJSON_IsNumber(mxp) && n > mxp->valuedouble)
			ks_schema_add_cause(r, "FieldValueTooMany", path, "Too many: %d: must have at most %.0f items", n, mxp->valuedouble);
		if (cJSON_IsNumber(mnp) && n < mnp->valuedouble)
			ks_schema_add_cause(r, "FieldValueInvalid", path, "Invalid value: %d: %s in body should have at least %.0f properties",
				  n, path, mnp->valuedouble);
		const cJSON *it;
		cJSON_ArrayForEach(it, v) {
			if (root && (strcmp(it->string, "metadata") == 0))
				continue;
			char p[1024];
			join(p, sizeof(p), path, it->string);
			const cJSON *ps = get(props, it->string);
			if (ps)
				validate(ps, it, p, depth + 1, 0, r);
			else if (cJSON_IsObject(addl))
				validate(addl, it, p, depth + 1, 0, r);
		}
		if (flag(s, "x-kubernetes-embedded-resource")) {
			if (!cJSON_IsString(get(v, "apiVersion"))) {
				char p[1024];
				join(p, sizeof(p), path, "apiVersion");
				ks_schema_add_cause(r, "FieldValueRequired", p, "Required value: must not be empty");
			}
			if (!cJSON_IsString(get(v, "kind"))) {
				char p[1024];
				join(p, sizeof(p), path, "kind");
				ks_schema_add_cause(r, "FieldValueRequired", p, "Required value: must not be empty");
			}
		}
	}
}

int ks_schema_apply(const cJSON *schema, cJSON *obj, ks_schema_result *r)
{
	memset(r, 0, sizeof(*r));
	r->causes = cJSON_CreateArray();
	if (!r->causes)
		return 1;
	prune(schema, obj, "", 0, 1, r);
	apply_defaults(schema, obj, 0);
	validate(schema, obj, "", 0, 1, r);
	return r->ncauses;
}
