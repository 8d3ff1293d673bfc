/* gpukmmctl — protobuf message → JSON through protoc-c descriptors (cJSON).
 *
 * A stopgap for `probe --json` until lib/ipc's gk_pb_to_json lands on main;
 * same conventions (proto field names, unset optional fields omitted, enums by
 * name, 64-bit integers as strings). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pbjson.h"

static cJSON *msg_to_json(const ProtobufCMessage *m);

static cJSON *value_to_json(const ProtobufCFieldDescriptor *f, const void *p)
{
	char num[32];
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return cJSON_CreateNumber(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return cJSON_CreateNumber(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		snprintf(num, sizeof num, "%lld", (long long)*(const int64_t *)p);
		return cJSON_CreateString(num);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		snprintf(num, sizeof num, "%llu", (unsigned long long)*(const uint64_t *)p);
		return cJSON_CreateString(num);
	case PROTOBUF_C_TYPE_FLOAT:
		return cJSON_CreateNumber(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return cJSON_CreateNumber(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return cJSON_CreateBool(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
		return ev ? cJSON_CreateString(ev->name) : cJSON_CreateNumber(*(const int *)p);
	}
	case PROTOBUF_C_TYPE_STRING:
		return cJSON_CreateString(*(char *const *)p ? *(char *const *)p : "");
	case PROTOBUF_C_TYPE_BYTES:
		return cJSON_CreateString("<bytes>");
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(ProtobufCMessage *const *)p ? msg_to_json(*(ProtobufCMessage *const *)p) : cJSON_CreateNull();
	}
	return cJSON_CreateNull();
}

static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_ENUM:
		return sizeof(int);
	case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static cJSON *msg_to_json(const ProtobufCMessage *m)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *base = (const char *)m + f->offset;
		cJSON *v = NULL;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
			if (!n)
				continue;
			const char *arr = *(char *const *)base;
			v = cJSON_CreateArray();
			for (size_t k = 0; v && k < n; k++)
				cJSON_AddItemToArray(v, value_to_json(f, arr + k * elem_size(f)));
		} else {
			if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) {
				if (!*(void *const *)base)
					continue;
			} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
				   !*(const protobuf_c_boolean *)((const char *)m + f->quantifier_offset)) {
				continue;
			}
			v = value_to_json(f, base);
		}
		if (!v || !cJSON_AddItemToObject(o, f->name, v)) {
			cJSON_Delete(v);
			cJSON_Delete(o);
			return NULL;
		}
	}
	return o;
}

char *gkctl_pb_to_json(const ProtobufCMessage *m, int pretty)
{
	cJSON *j = msg_to_json(m);
	if (!j)
		return NULL;
	char *s = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}
