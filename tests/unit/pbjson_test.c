/* JSON <-> protobuf through descriptors: every message type of proto/ filled
 * with every field (oneof members in turn, enums, bytes, repeated, 64-bit
 * extremes) survives message -> JSON -> message byte for byte; error paths
 * name what is wrong; the registry knows every message and service. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/ipc/registry.h"
#include "echo.pb-c.h"
#include "events.pb-c.h"
#include "gpukmm/ipc.h"

static size_t esize(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static ProtobufCMessage *fill(const ProtobufCMessageDescriptor *d, int depth, int variant);

static void fill_value(const ProtobufCFieldDescriptor *f, void *p, int depth, int variant, int k)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
		*(int32_t *)p = k ? INT32_MIN : -123456 - variant; break;
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
		*(uint32_t *)p = UINT32_MAX - (uint32_t)variant - (uint32_t)k; break;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
		*(int64_t *)p = k ? INT64_MIN : INT64_MAX - variant; break;
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		*(uint64_t *)p = UINT64_MAX - (uint64_t)variant - (uint64_t)k; break;
	case PROTOBUF_C_TYPE_FLOAT: *(float *)p = 1.5f; break;
	case PROTOBUF_C_TYPE_DOUBLE: *(double *)p = 0.1 + k; break;
	case PROTOBUF_C_TYPE_BOOL: *(protobuf_c_boolean *)p = (variant + k) % 2 == 0; break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *ed = f->descriptor;
		*(int *)p = ed->values[(unsigned)(variant + k) % ed->n_values].value;
		break;
	}
	case PROTOBUF_C_TYPE_STRING: {
		char b[128];
		snprintf(b, sizeof(b), "%s-%d-%d \"q\" \\ ü\n\t\x01", f->name, variant, k);
		*(char **)p = strdup(b);
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		size_t n = (size_t)(variant + k) % 5;
		uint8_t *b = malloc(n + 1);
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)(0xff - i * 37);
		*(ProtobufCBinaryData *)p = (ProtobufCBinaryData){ n, b };
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		*(ProtobufCMessage **)p = fill(f->descriptor, depth + 1, variant + k);
		break;
	}
}

static ProtobufCMessage *fill(const ProtobufCMessageDescriptor *d, int depth, int variant)
{
	if (depth > 3)
		return NULL;
	ProtobufCMessage *m = malloc(d->sizeof_message);
	d->message_init(m);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char *base = (char *)m;
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			/* members of one oneof share quantifier_offset: pick one per variant */
			unsigned n = 0, me = 0;
			for (unsigned j = 0; j < d->n_fields; j++)
				if ((d->fields[j].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
				    d->fields[j].quantifier_offset == f->quantifier_offset) {
					if (j == i)
						me = n;
					n++;
				}
			if (me != (unsigned)variant % n)
				continue;
			fill_value(f, base + f->offset, depth, variant, 0);
			if (f->type == PROTOBUF_C_TYPE_MESSAGE && !*(void **)(base + f->offset))
				continue;
			*(uint32_t *)(base + f->quantifier_offset) = f->id;
			continue;
		}
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			if (f->type == PROTOBUF_C_TYPE_MESSAGE && depth >= 3)
				continue;
			size_t n = 2;
			void *arr = calloc(n, esize(f->type));
			for (size_t k = 0; k < n; k++)
				fill_value(f, (char *)arr + k * esize(f->type), depth, variant, (int)k);
			*(void **)(base + f->offset) = arr;
			*(size_t *)(base + f->quantifier_offset) = n;
			continue;
		}
		fill_value(f, base + f->offset, depth, variant, 0);
		if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
		    f->type != PROTOBUF_C_TYPE_MESSAGE)
			*(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
	}
	return m;
}

static uint8_t *packed(const ProtobufCMessage *m, size_t *n)
{
	*n = protobuf_c_message_get_packed_size(m);
	uint8_t *b = malloc(*n + 1);
	protobuf_c_message_pack(m, b);
	return b;
}

Test(pbjson, every_message_type_round_trips)
{
	int types = 0;
	for (size_t i = 0; gk_pb_all_messages[i]; i++) {
		const ProtobufCMessageDescriptor *d = gk_pb_all_messages[i];
		types++;
		for (int variant = 0; variant < 4; variant++) {
			ProtobufCMessage *m = fill(d, 0, variant);
			char *js = gk_pb_to_json(m);
			cr_assert_not_null(js, "%s", d->name);
			ProtobufCMessage *back;
			gk_err e;
			cr_assert_eq(gk_pb_from_json(d, js, &back, &e), 0, "%s: %s\n%s", d->name, e.msg, js);
			size_t n1, n2;
			uint8_t *b1 = packed(m, &n1), *b2 = packed(back, &n2);
			cr_assert_eq(n1, n2, "%s variant %d: %s", d->name, variant, js);
			cr_assert_eq(memcmp(b1, b2, n1), 0, "%s variant %d", d->name, variant);
			/* and through the wire: unpack -> same JSON text */
			ProtobufCMessage *wire = protobuf_c_message_unpack(d, NULL, n1, b1);
			char *js2 = gk_pb_to_json(wire);
			cr_assert_str_eq(js, js2);
			free(js2);
			protobuf_c_message_free_unpacked(wire, NULL);
			free(b1);
			free(b2);
			free(js);
			gk_ipc_free(back);
			protobuf_c_message_free_unpacked(m, NULL);
		}
	}
	cr_assert_geq(types, 50, "registry has %d message types", types);
}

Test(pbjson, input_forms)
{
	ProtobufCMessage *m;
	gk_err e;
	/* camelCase names, enum by number, 64-bit as number and as string, base64 url-safe without padding */
	cr_assert_eq(gk_pb_from_json(&gpukmm__event__descriptor,
				     "{\"type\":2,\"daemonSet\":{\"metadata\":{\"name\":\"ds\",\"generation\":42}}}", &m, &e), 0, "%s", e.msg);
	Gpukmm__Event *ev = (Gpukmm__Event *)m;
	cr_assert_eq(ev->type, GPUKMM__EVENT_TYPE__MODIFIED);
	cr_assert_eq(ev->object_case, GPUKMM__EVENT__OBJECT_DAEMON_SET);
	cr_assert_str_eq(ev->daemon_set->metadata->name, "ds");
	cr_assert_eq(ev->daemon_set->metadata->generation, 42);
	gk_ipc_free(m);
	cr_assert_eq(gk_pb_from_json(&gpukmm__echo_reply__descriptor,
				     "{\"count\":\"18446744073709551615\",\"data\":\"_-8\",\"serverPid\":-1}", &m, &e), 0, "%s", e.msg);
	Gpukmm__EchoReply *r = (Gpukmm__EchoReply *)m;
	cr_assert_eq(r->count, UINT64_MAX);
	cr_assert_eq(r->data.len, 2);
	cr_assert_eq(r->data.data[0], 0xff);
	cr_assert_eq(r->data.data[1], 0xef);
	cr_assert_eq(r->server_pid, -1);
	gk_ipc_free(m);
	/* null = unset; a later duplicate key wins for singular fields */
	cr_assert_eq(gk_pb_from_json(&gpukmm__echo_request__descriptor,
				     "{\"text\":null,\"delay_ms\":1,\"delay_ms\":2,\"text\":\"a\",\"text\":\"b\"}", &m, &e), 0, "%s", e.msg);
	cr_assert_eq(((Gpukmm__EchoRequest *)m)->delay_ms, 2);
	cr_assert_str_eq(((Gpukmm__EchoRequest *)m)->text, "b");
	gk_ipc_free(m);
	/* unset optional fields are omitted on output */
	Gpukmm__EchoRequest empty = GPUKMM__ECHO_REQUEST__INIT;
	char *s = gk_pb_to_json(&empty.base);
	cr_assert_str_eq(s, "{}");
	free(s);
	cr_assert_null(gk_pb_to_json(NULL));
}

static void bad(const ProtobufCMessageDescriptor *d, const char *json, const char *want)
{
	ProtobufCMessage *m = (ProtobufCMessage *)1;
	gk_err e;
	cr_assert_eq(gk_pb_from_json(d, json, &m, &e), GK_INVALID_ARGUMENT, "%s was accepted", json);
	cr_assert_null(m);
	cr_assert(strstr(e.msg, want), "for %s: got '%s', want '%s'", json, e.msg, want);
}

Test(pbjson, errors_name_the_problem)
{
	const ProtobufCMessageDescriptor *rq = &gpukmm__echo_request__descriptor;
	bad(rq, "{\"nope\":1}", "unknown field 'nope'");
	bad(rq, "{\"text\":1}", "text");
	bad(rq, "{\"delay_ms\":-1}", "delay_ms");
	bad(rq, "{\"delay_ms\":4294967296}", "delay_ms");
	bad(rq, "{\"delay_ms\":1.5}", "delay_ms");
	bad(rq, "{\"fail_code\":\"12x\"}", "fail_code");
	bad(rq, "{\"data\":\"***\"}", "base64");
	bad(rq, "{\"data\":\"A\"}", "base64");
	bad(rq, "[]", "JSON object");
	bad(rq, "{", "invalid JSON");
	bad(rq, "{} trailing", "invalid JSON");
	bad(rq, "", "invalid JSON");
	const ProtobufCMessageDescriptor *rp = &gpukmm__echo_reply__descriptor;
	bad(rp, "{\"count\":9007199254740993}", "as strings");
	bad(rp, "{\"count\":\"-1\"}", "count");
	bad(rp, "{\"count\":\"18446744073709551616\"}", "count");
	const ProtobufCMessageDescriptor *ev = &gpukmm__event__descriptor;
	bad(ev, "{\"type\":\"BOGUS\"}", "gpukmm.EventType");
	bad(ev, "{\"type\":99}", "gpukmm.EventType");
	bad(ev, "{\"node\":{},\"pod\":{}}", "oneof");
	bad(ev, "{\"node\":{\"metadata\":{\"labels\":[{\"key\":1}]}}}", "node.metadata.labels");
	bad(ev, "{\"node\":[]}", "JSON object");
	char deep[4096] = "";
	for (int i = 0; i < 200; i++)
		strcat(deep, "{\"node\":");
	bad(ev, deep, "JSON");
	ProtobufCMessage *m;
	gk_err e;
	cr_assert_eq(gk_pb_from_json(NULL, "{}", &m, &e), GK_INVALID_ARGUMENT);
	cr_assert_eq(gk_pb_from_json(rq, NULL, &m, &e), GK_INVALID_ARGUMENT);
}

/* The registry must know every top-level message and service in proto/: a
 * message the generator (tools/gen-pb-registry.sh, run by make) missed fails here. */
Test(pbjson, registry_covers_every_proto_definition)
{
	const char *src = getenv("GPUKMM_SRC");
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "cat '%s'/proto/*.proto | sed -n 's/^\\(message\\|service\\|enum\\) \\([A-Za-z0-9_]*\\).*/\\1 \\2/p'",
		 src ? src : ".");
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	char kind[32], name[128];
	int n = 0;
	while (fscanf(p, "%31s %127s", kind, name) == 2) {
		char full[160];
		snprintf(full, sizeof(full), "gpukmm.%s", name);
		n++;
		if (!strcmp(kind, "message"))
			cr_assert_not_null(gk_pb_find_message(full), "%s missing from the generated registry", full);
		else if (!strcmp(kind, "service"))
			cr_assert_not_null(gk_pb_find_service(full), "%s missing from the generated registry", full);
	}
	pclose(p);
	cr_assert_geq(n, 50, "parsed only %d definitions", n);
	cr_assert_null(gk_pb_find_message("gpukmm.Nope"));
	cr_assert_null(gk_pb_find_message(NULL));
	cr_assert_null(gk_pb_find_service("gpukmm.EchoRequest"));
}
