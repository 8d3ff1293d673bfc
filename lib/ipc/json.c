/* gpukmm — JSON <-> protobuf through protobuf-c descriptors (cJSON for the
 * text). Mapping, close to proto3's JSON mapping: proto field names (or
 * lowerCamelCase on input), enums by name (numbers accepted), 64-bit integers
 * as strings (numbers up to 2^53 accepted), bytes as base64, NaN/Infinity as
 * strings. Unknown fields are errors naming the field. */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_DEPTH 64

/* ---- base64 ------------------------------------------------------------------ */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const uint8_t *p, size_t n)
{
	char *out = malloc((n + 2) / 3 * 4 + 1);
	if (!out)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);
		out[k++] = b64[v >> 18 & 63];
		out[k++] = b64[v >> 12 & 63];
		out[k++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
		out[k++] = i + 2 < n ? b64[v & 63] : '=';
	}
	out[k] = 0;
	return out;
}

static int b64_val(int c)
{
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == '+' || c == '-') return 62;
	if (c == '/' || c == '_') return 63;
	return -1;
}

/* Standard or URL-safe alphabet, padding optional. -1 on bad input. */
static int b64_decode(const char *s, uint8_t **out, size_t *outlen)
{
	size_t n = strlen(s);
	while (n && s[n - 1] == '=')
		n--;
	if (n % 4 == 1)
		return -1;
	uint8_t *b = malloc(n * 3 / 4 + 1);
	if (!b)
		return -1;
	size_t k = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		int v = b64_val((unsigned char)s[i]);
		if (v < 0) {
			free(b);
			return -1;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			b[k++] = (uint8_t)(acc >> bits);
		}
	}
	*out = b;
	*outlen = k;
	return 0;
}

/* ---- helpers --------------------------------------------------------------------- */

static void *field_ptr(void *msg, unsigned off)
{
	return (char *)msg + off;
}

static size_t elem_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	}
	return 0;
}

static int is_oneof(const ProtobufCFieldDescriptor *f)
{
	return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
}

/* snake_case -> lowerCamelCase comparison without allocating */
static int camel_eq(const char *snake, const char *camel)
{
	int up = 0;
	for (; *snake; snake++) {
		if (*snake == '_') {
			up = 1;
			continue;
		}
		char want = up && *snake >= 'a' && *snake <= 'z' ? (char)(*snake - 32) : *snake;
		up = 0;
		if (*camel++ != want)
			return 0;
	}
	return *camel == 0;
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d, const char *name)
{
	const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
	if (f)
		return f;
	for (unsigned i = 0; i < d->n_fields; i++)
		if (camel_eq(d->fields[i].name, name))
			return &d->fields[i];
	return NULL;
}

/* ---- JSON -> message ------------------------------------------------------------- */

typedef struct jctx {
	gk_err *err;
	char path[256];
} jctx;

static int jfail(jctx *c, const char *fmt, const char *a, const char *b)
{
	char m[300];
	snprintf(m, sizeof(m), fmt, a, b);
	gk_err_set(c->err, GK_INVALID_ARGUMENT, "%s%s%s", c->path, *c->path ? ": " : "", m);
	return -1;
}

static int get_i64(jctx *c, const cJSON *j, int64_t lo, int64_t hi, int64_t *out, const char *fname)
{
	if (cJSON_IsString(j)) {
		char *end;
		errno = 0;
		long long v = strtoll(j->valuestring, &end, 10);
		if (!*j->valuestring || *end || errno || v < lo || v > hi)
			return jfail(c, "field %s: '%s' is not an integer in range", fname, j->valuestring);
		*out = v;
		return 0;
	}
	if (!cJSON_IsNumber(j))
		return jfail(c, "field %s: expected an integer%s", fname, "");
	double d = j->valuedouble;
	if (d != floor(d) || fabs(d) >= 9007199254740992.0 || d < (double)lo || d > (double)hi)
		return jfail(c, "field %s: number out of range or not an integer%s (pass 64-bit values as strings)",
			     fname, "");
	*out = (int64_t)d;
	return 0;
}

static int get_u64(jctx *c, const cJSON *j, uint64_t hi, uint64_t *out, const char *fname)
{
	if (cJSON_IsString(j)) {
		char *end;
		errno = 0;
		const char *s = j->valuestring;
		unsigned long long v = strtoull(s, &end, 10);
		if (!*s || *s == '-' || *s == ' ' || *end || errno || v > hi)
			return jfail(c, "field %s: '%s' is not an unsigned integer in range", fname, s);
		*out = v;
		return 0;
	}
	if (!cJSON_IsNumber(j))
		return jfail(c, "field %s: expected an unsigned integer%s", fname, "");
	double d = j->valuedouble;
	if (d != floor(d) || d < 0 || d >= 9007199254740992.0 || d > (double)hi)
		return jfail(c, "field %s: number out of range or not an integer%s (pass 64-bit values as strings)",
			     fname, "");
	*out = (uint64_t)d;
	return 0;
}

static int get_double(jctx *c, const cJSON *j, double *out, const char *fname)
{
	if (cJSON_IsNumber(j)) {
		*out = j->valuedouble;
		return 0;
	}
	if (cJSON_IsString(j)) {
		if (!strcmp(j->valuestring, "NaN")) { *out = NAN; return 0; }
		if (!strcmp(j->valuestring, "Infinity")) { *out = INFINITY; return 0; }
		if (!strcmp(j->valuestring, "-Infinity")) { *out = -INFINITY; return 0; }
	}
	return jfail(c, "field %s: expected a number%s", fname, "");
}

static int from_obj(jctx *c, const ProtobufCMessageDescriptor *d, const cJSON *obj, ProtobufCMessage **out,
		    int depth);

/* Parses one value of field f into dst (an element slot). The slot is only
 * written when parsing succeeds, so the message stays freeable on error. */
static int parse_value(jctx *c, const ProtobufCFieldDescriptor *f, const cJSON *j, void *dst, int depth)
{
	int64_t i;
	uint64_t u;
	double dv;
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
		if (get_i64(c, j, INT32_MIN, INT32_MAX, &i, f->name)) return -1;
		*(int32_t *)dst = (int32_t)i;
		return 0;
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
		if (get_u64(c, j, UINT32_MAX, &u, f->name)) return -1;
		*(uint32_t *)dst = (uint32_t)u;
		return 0;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
		if (get_i64(c, j, INT64_MIN, INT64_MAX, &i, f->name)) return -1;
		*(int64_t *)dst = i;
		return 0;
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		if (get_u64(c, j, UINT64_MAX, &u, f->name)) return -1;
		*(uint64_t *)dst = u;
		return 0;
	case PROTOBUF_C_TYPE_FLOAT:
		if (get_double(c, j, &dv, f->name)) return -1;
		*(float *)dst = (float)dv;
		return 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		if (get_double(c, j, &dv, f->name)) return -1;
		*(double *)dst = dv;
		return 0;
	case PROTOBUF_C_TYPE_BOOL:
		if (!cJSON_IsBool(j))
			return jfail(c, "field %s: expected true or false%s", f->name, "");
		*(protobuf_c_boolean *)dst = cJSON_IsTrue(j);
		return 0;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *ed = f->descriptor;
		const ProtobufCEnumValue *ev = NULL;
		if (cJSON_IsString(j))
			ev = protobuf_c_enum_descriptor_get_value_by_name(ed, j->valuestring);
		else if (cJSON_IsNumber(j) && j->valuedouble == floor(j->valuedouble) &&
			 fabs(j->valuedouble) < 2147483648.0)
			ev = protobuf_c_enum_descriptor_get_value(ed, (int)j->valuedouble);
		if (!ev)
			return jfail(c, "field %s: not a value of enum %s", f->name, ed->name);
		*(int *)dst = ev->value;
		return 0;
	}
	case PROTOBUF_C_TYPE_STRING: {
		if (!cJSON_IsString(j))
			return jfail(c, "field %s: expected a string%s", f->name, "");
		char *s = strdup(j->valuestring);
		if (!s)
			return jfail(c, "field %s: out of memory%s", f->name, "");
		*(char **)dst = s;
		return 0;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		uint8_t *b;
		size_t n;
		if (!cJSON_IsString(j) || b64_decode(j->valuestring, &b, &n) != 0)
			return jfail(c, "field %s: expected base64 bytes%s", f->name, "");
		*(ProtobufCBinaryData *)dst = (ProtobufCBinaryData){ n, b };
		return 0;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		ProtobufCMessage *m;
		size_t plen = strlen(c->path);
		snprintf(c->path + plen, sizeof(c->path) - plen, "%s%s", plen ? "." : "", f->name);
		int rc = from_obj(c, f->descriptor, j, &m, depth + 1);
		c->path[plen] = 0;
		if (rc)
			return -1;
		*(ProtobufCMessage **)dst = m;
		return 0;
	}
	}
	return jfail(c, "field %s: unsupported type%s", f->name, "");
}

/* Frees what a previous assignment of a singular field owns (a repeated key). */
static void release_singular(const ProtobufCFieldDescriptor *f, void *slot)
{
	if (f->type == PROTOBUF_C_TYPE_STRING) {
		char *s = *(char **)slot;
		if (s && s != (const char *)f->default_value)
			free(s);
		*(char **)slot = (char *)f->default_value;
	} else if (f->type == PROTOBUF_C_TYPE_BYTES) {
		ProtobufCBinaryData *b = slot;
		const ProtobufCBinaryData *def = f->default_value;
		if (b->data && (!def || b->data != def->data))
			free(b->data);
		b->data = NULL;
		b->len = 0;
	} else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
		ProtobufCMessage *m = *(ProtobufCMessage **)slot;
		if (m)
			protobuf_c_message_free_unpacked(m, NULL);
		*(ProtobufCMessage **)slot = NULL;
	}
}

static int set_field(jctx *c, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f, const cJSON *j,
		     int depth)
{
	if (cJSON_IsNull(j))
		return 0; /* null = unset */
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		if (!cJSON_IsArray(j))
			return jfail(c, "field %s: expected an array%s", f->name, "");
		size_t n = (size_t)cJSON_GetArraySize(j), es = elem_size(f->type);
		size_t *count = field_ptr(msg, f->quantifier_offset);
		void **arr = field_ptr(msg, f->offset);
		if (*count) /* the same key twice: the later one wins */
			return jfail(c, "field %s given twice%s", f->name, "");
		if (!n)
			return 0;
		*arr = calloc(n, es);
		if (!*arr)
			return jfail(c, "field %s: out of memory%s", f->name, "");
		const cJSON *el;
		cJSON_ArrayForEach(el, j) {
			if (parse_value(c, f, el, (char *)*arr + *count * es, depth) != 0)
				return -1;
			(*count)++;
		}
		return 0;
	}
	void *slot = field_ptr(msg, f->offset);
	if (is_oneof(f)) {
		uint32_t *cs = field_ptr(msg, f->quantifier_offset);
		if (*cs && *cs != f->id)
			return jfail(c, "field %s: another member of its oneof is already set%s", f->name, "");
		if (*cs == f->id)
			return jfail(c, "field %s given twice%s", f->name, "");
		/* oneof members share storage: clear before parsing into it */
		memset(slot, 0, elem_size(f->type));
		if (parse_value(c, f, j, slot, depth) != 0)
			return -1;
		*cs = f->id;
		return 0;
	}
	release_singular(f, slot);
	if (parse_value(c, f, j, slot, depth) != 0)
		return -1;
	if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
	    f->type != PROTOBUF_C_TYPE_MESSAGE && f->quantifier_offset)
		*(protobuf_c_boolean *)field_ptr(msg, f->quantifier_offset) = 1;
	return 0;
}

static int from_obj(jctx *c, const ProtobufCMessageDescriptor *d, const cJSON *obj, ProtobufCMessage **out,
		    int depth)
{
	*out = NULL;
	if (depth > MAX_DEPTH)
		return jfail(c, "nested too deeply%s%s", "", "");
	if (!cJSON_IsObject(obj))
		return jfail(c, "expected a JSON object for %s%s", d->name, "");
	ProtobufCMessage *m = malloc(d->sizeof_message);
	if (!m)
		return jfail(c, "out of memory%s%s", "", "");
	d->message_init(m);
	const cJSON *kv;
	cJSON_ArrayForEach(kv, obj) {
		const ProtobufCFieldDescriptor *f = find_field(d, kv->string);
		if (!f) {
			protobuf_c_message_free_unpacked(m, NULL);
			return jfail(c, "unknown field '%s' in %s", kv->string, d->name);
		}
		if (set_field(c, m, f, kv, depth) != 0) {
			protobuf_c_message_free_unpacked(m, NULL);
			return -1;
		}
	}
	if (!protobuf_c_message_check(m)) {
		protobuf_c_message_free_unpacked(m, NULL);
		return jfail(c, "%s: a required field is missing%s", d->name, "");
	}
	*out = m;
	return 0;
}

int gk_pb_from_json(const ProtobufCMessageDescriptor *desc, const char *json, ProtobufCMessage **out,
		    gk_err *err)
{
	*out = NULL;
	if (!desc || !json)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "no descriptor or no JSON");
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
	if (!root) {
		size_t off = end && end >= json ? (size_t)(end - json) : 0;
		return gk_err_set(err, GK_INVALID_ARGUMENT, "invalid JSON near byte %zu", off);
	}
	jctx c = { .err = err };
	int rc = from_obj(&c, desc, root, out, 0);
	cJSON_Delete(root);
	return rc ? GK_INVALID_ARGUMENT : 0;
}

/* ---- message -> JSON ------------------------------------------------------------- */

static cJSON *num_or_str_i64(int64_t v)
{
	char b[32];
	snprintf(b, sizeof(b), "%lld", (long long)v);
	return cJSON_CreateString(b);
}

static cJSON *num_or_str_u64(uint64_t v)
{
	char b[32];
	snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
	return cJSON_CreateString(b);
}

static cJSON *dbl(double v)
{
	if (isnan(v))
		return cJSON_CreateString("NaN");
	if (isinf(v))
		return cJSON_CreateString(v > 0 ? "Infinity" : "-Infinity");
	/* cJSON prints %1.15g when that reads back within its epsilon, which loses
	 * bits (4888888888288888888...e57 came back different): the shortest of
	 * %.15g..%.17g that reads back to the same double, as raw number text
	 * (the tree is only printed) */
	char buf[40];
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return cJSON_CreateRaw(buf);
}

static cJSON *to_obj(const ProtobufCMessage *m, int depth);

static cJSON *value(const ProtobufCFieldDescriptor *f, const void *p, int depth)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
		return cJSON_CreateNumber(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
		return cJSON_CreateNumber(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
		return num_or_str_i64(*(const int64_t *)p);
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		return num_or_str_u64(*(const uint64_t *)p);
	case PROTOBUF_C_TYPE_FLOAT:
		return dbl(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return dbl(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return cJSON_CreateBool(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM: {
		int v = *(const int *)p;
		const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, v);
		return ev ? cJSON_CreateString(ev->name) : cJSON_CreateNumber(v);
	}
	case PROTOBUF_C_TYPE_STRING:
		return cJSON_CreateString(*(char *const *)p ? *(char *const *)p : "");
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		char *s = b64_encode(b->data, b->len);
		if (!s)
			return NULL;
		cJSON *j = cJSON_CreateString(s);
		free(s);
		return j;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
		return sub ? to_obj(sub, depth + 1) : cJSON_CreateNull();
	}
	}
	return NULL;
}

static int present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const void *slot = (const char *)m + f->offset;
	if (is_oneof(f))
		return *(const uint32_t *)((const char *)m + f->quantifier_offset) == f->id;
	if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)
		return *(void *const *)slot != NULL;
	if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
		return *(const protobuf_c_boolean *)((const char *)m + f->quantifier_offset);
	if (f->label == PROTOBUF_C_LABEL_NONE) { /* proto3: zero means unset */
		static const uint8_t zero[sizeof(ProtobufCBinaryData)];
		if (f->type == PROTOBUF_C_TYPE_BYTES)
			return ((const ProtobufCBinaryData *)slot)->len != 0;
		return memcmp(slot, zero, elem_size(f->type)) != 0;
	}
	return 1; /* required */
}

static cJSON *to_obj(const ProtobufCMessage *m, int depth)
{
	if (depth > MAX_DEPTH)
		return NULL;
	const ProtobufCMessageDescriptor *d = m->descriptor;
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		cJSON *v;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
			if (!n)
				continue;
			const char *arr = *(char *const *)((const char *)m + f->offset);
			v = cJSON_CreateArray();
			for (size_t k = 0; v && k < n; k++) {
				cJSON *e = value(f, arr + k * elem_size(f->type), depth);
				if (!e) {
					cJSON_Delete(v);
					v = NULL;
					break;
				}
				cJSON_AddItemToArray(v, e);
			}
		} else {
			if (!present(m, f))
				continue;
			v = value(f, (const char *)m + f->offset, depth);
		}
		if (!v) {
			cJSON_Delete(o);
			return NULL;
		}
		cJSON_AddItemToObject(o, f->name, v);
	}
	return o;
}

char *gk_pb_to_json(const ProtobufCMessage *msg)
{
	if (!msg)
		return NULL;
	cJSON *o = to_obj(msg, 0);
	if (!o)
		return NULL;
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}
