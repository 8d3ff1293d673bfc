/* gpukmm — RPC wire framing: Envelope / Reply (rpc.proto) encoded and decoded
 * by hand, so the payload is packed in place and read in place (no copies).
 * Byte-compatible with protobuf-c's own pack/unpack of those messages. */
#include <string.h>

#include "internal.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static size_t varint_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Returns bytes consumed, 0 on truncation / overlong. */
static size_t varint_get(const uint8_t *p, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	for (size_t i = 0; i < len && i < 10; i++) {
		v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*out = v;
			return i + 1;
		}
	}
	return 0;
}

static size_t str_field_size(const char *s)
{
	size_t n = strlen(s);
	return 1 + varint_size(n) + n;
}

static size_t str_field_put(uint8_t *p, int field, const char *s, size_t n)
{
	size_t k = 0;
	p[k++] = (uint8_t)(field << 3 | WT_LEN);
	k += varint_put(p + k, n);
	memcpy(p + k, s, n);
	return k + n;
}

static size_t msg_field_size(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	return 1 + varint_size(n) + n;
}

static size_t msg_field_put(uint8_t *p, int field, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	size_t k = 0;
	p[k++] = (uint8_t)(field << 3 | WT_LEN);
	k += varint_put(p + k, n);
	return k + protobuf_c_message_pack(m, p + k);
}

static size_t u64_field_size(uint64_t v)
{
	return v ? 1 + varint_size(v) : 0;
}

static size_t u64_field_put(uint8_t *p, int field, uint64_t v)
{
	if (!v)
		return 0;
	p[0] = (uint8_t)(field << 3 | WT_VARINT);
	return 1 + varint_put(p + 1, v);
}

size_t gk_frame_env_size(const char *service, const char *method, uint64_t request_id,
			 uint64_t client_id, int64_t deadline_ms, const ProtobufCMessage *payload)
{
	return str_field_size(service) + str_field_size(method) + u64_field_size(request_id) +
	       u64_field_size(client_id) + u64_field_size((uint64_t)deadline_ms) +
	       (payload ? msg_field_size(payload) : 0);
}

size_t gk_frame_env_write(uint8_t *buf, const char *service, const char *method,
			  uint64_t request_id, uint64_t client_id, int64_t deadline_ms,
			  const ProtobufCMessage *payload)
{
	size_t k = 0;
	k += str_field_put(buf + k, 1, service, strlen(service));
	k += str_field_put(buf + k, 2, method, strlen(method));
	k += u64_field_put(buf + k, 3, request_id);
	k += u64_field_put(buf + k, 4, client_id);
	k += u64_field_put(buf + k, 5, (uint64_t)deadline_ms);
	if (payload)
		k += msg_field_put(buf + k, 6, payload);
	return k;
}

size_t gk_frame_reply_size(int code, const char *message, uint64_t request_id,
			   const ProtobufCMessage *payload)
{
	return u64_field_size((uint64_t)(int64_t)code) +
	       (message && *message ? str_field_size(message) : 0) +
	       (payload ? msg_field_size(payload) : 0) + u64_field_size(request_id);
}

size_t gk_frame_reply_write(uint8_t *buf, int code, const char *message, uint64_t request_id,
			    const ProtobufCMessage *payload)
{
	size_t k = 0;
	k += u64_field_put(buf + k, 1, (uint64_t)(int64_t)code);
	if (message && *message)
		k += str_field_put(buf + k, 2, message, strlen(message));
	if (payload)
		k += msg_field_put(buf + k, 3, payload);
	k += u64_field_put(buf + k, 4, request_id);
	return k;
}

/* Walks the fields of one message. For each field calls back with its number,
 * wire type and value (varint in *v, length-delimited in *b). */
typedef int (*field_fn)(void *ctx, uint32_t field, int wt, uint64_t v, gk_bytes b);

static int walk(const uint8_t *p, size_t len, field_fn fn, void *ctx)
{
	size_t i = 0;
	while (i < len) {
		uint64_t key, v = 0;
		size_t k = varint_get(p + i, len - i, &key);
		if (!k)
			return -1;
		i += k;
		uint64_t field = key >> 3;
		int wt = (int)(key & 7);
		if (field == 0 || field > 0x1fffffff)
			return -1;
		gk_bytes b = { NULL, 0 };
		switch (wt) {
		case WT_VARINT:
			k = varint_get(p + i, len - i, &v);
			if (!k)
				return -1;
			i += k;
			break;
		case WT_I64:
			if (len - i < 8)
				return -1;
			i += 8;
			break;
		case WT_I32:
			if (len - i < 4)
				return -1;
			i += 4;
			break;
		case WT_LEN:
			k = varint_get(p + i, len - i, &v);
			if (!k)
				return -1;
			i += k;
			if (v > len - i)
				return -1;
			b.p = p + i;
			b.n = (size_t)v;
			i += (size_t)v;
			break;
		default: /* groups (3, 4) and reserved wire types */
			return -1;
		}
		if (fn(ctx, (uint32_t)field, wt, v, b) < 0)
			return -1;
	}
	return 0;
}

static int env_field(void *ctx, uint32_t field, int wt, uint64_t v, gk_bytes b)
{
	gk_env_view *e = ctx;
	switch (field) {
	case 1: if (wt != WT_LEN) return -1; e->service = b; break;
	case 2: if (wt != WT_LEN) return -1; e->method = b; break;
	case 3: if (wt != WT_VARINT) return -1; e->request_id = v; break;
	case 4: if (wt != WT_VARINT) return -1; e->client_id = v; break;
	case 5: if (wt != WT_VARINT) return -1; e->deadline_ms = (int64_t)v; break;
	case 6: if (wt != WT_LEN) return -1; e->payload = b; break;
	default: break; /* unknown field: skipped */
	}
	return 0;
}

static const uint8_t empty_bytes[1];

int gk_frame_env_parse(const uint8_t *buf, size_t len, gk_env_view *out)
{
	memset(out, 0, sizeof(*out));
	out->payload.p = empty_bytes;
	if (!buf && len)
		return -1;
	return walk(buf, len, env_field, out);
}

static int reply_field(void *ctx, uint32_t field, int wt, uint64_t v, gk_bytes b)
{
	gk_reply_view *r = ctx;
	switch (field) {
	case 1: if (wt != WT_VARINT) return -1; r->code = (int)(int32_t)v; break;
	case 2: if (wt != WT_LEN) return -1; r->message = b; break;
	case 3: if (wt != WT_LEN) return -1; r->payload = b; break;
	case 4: if (wt != WT_VARINT) return -1; r->request_id = v; break;
	default: break;
	}
	return 0;
}

int gk_frame_reply_parse(const uint8_t *buf, size_t len, gk_reply_view *out)
{
	memset(out, 0, sizeof(*out));
	out->payload.p = empty_bytes;
	if (!buf && len)
		return -1;
	return walk(buf, len, reply_field, out);
}

int gk_frame_name(gk_bytes b, char out[GK_IPC_NAME_MAX])
{
	if (b.n >= GK_IPC_NAME_MAX || (b.n && memchr(b.p, 0, b.n)))
		return -1;
	if (b.n)
		memcpy(out, b.p, b.n);
	out[b.n] = 0;
	return 0;
}

/* ---- bus framing ------------------------------------------------------------ */

size_t gk_bus_header_size(const char *topic)
{
	return strlen(topic) + 1 + 1 + 4 + 8;
}

size_t gk_bus_header_write(uint8_t *buf, const char *topic, int kind, uint32_t epoch, uint64_t seq)
{
	size_t n = strlen(topic);
	memcpy(buf, topic, n);
	buf[n++] = 0;
	buf[n++] = (uint8_t)kind;
	for (int i = 3; i >= 0; i--)
		buf[n++] = (uint8_t)(epoch >> (8 * i));
	for (int i = 7; i >= 0; i--)
		buf[n++] = (uint8_t)(seq >> (8 * i));
	return n;
}

int gk_bus_parse(const uint8_t *buf, size_t len, gk_bus_view *out)
{
	memset(out, 0, sizeof(*out));
	if (!buf)
		return -1;
	const uint8_t *nul = memchr(buf, 0, len < GK_BUS_TOPIC_MAX ? len : GK_BUS_TOPIC_MAX);
	if (!nul)
		return -1;
	size_t tn = (size_t)(nul - buf);
	size_t rest = len - tn - 1;
	if (rest < 13)
		return -1;
	memcpy(out->topic, buf, tn);
	out->topic[tn] = 0;
	const uint8_t *p = nul + 1;
	out->kind = p[0];
	if (out->kind != GK_BUS_EVENT && out->kind != GK_BUS_TICK)
		return -1;
	uint32_t e = 0;
	for (int i = 1; i <= 4; i++)
		e = e << 8 | p[i];
	uint64_t s = 0;
	for (int i = 5; i <= 12; i++)
		s = s << 8 | p[i];
	if (s == 0)
		return -1;
	out->epoch = e;
	out->seq = s;
	out->payload.p = p + 13;
	out->payload.n = rest - 13;
	if (out->kind == GK_BUS_TICK && out->payload.n)
		return -1;
	return 0;
}

enum gk_seq_action gk_seq_decide(gk_seq_state *st, int kind, uint32_t epoch, uint64_t seq,
				 uint64_t *expected)
{
	bool tick = kind == GK_BUS_TICK;
	*expected = st->last + 1;
	if (!st->known) {
		st->known = st->epoch_known = true;
		st->epoch = epoch;
		st->last = seq;
		return tick ? GK_SEQ_TICK_OK : GK_SEQ_DELIVER;
	}
	if (!st->epoch_known) { /* numbers set from a snapshot of this publisher */
		st->epoch_known = true;
		st->epoch = epoch;
	} else if (epoch != st->epoch) {
		/* the publisher restarted: whatever we had is stale */
		st->epoch = epoch;
		st->last = seq;
		*expected = 1;
		return tick ? GK_SEQ_TICK_GAP : GK_SEQ_GAP_DELIVER;
	}
	if (tick) {
		if (seq <= st->last)
			return GK_SEQ_TICK_OK;
		st->last = seq;
		return GK_SEQ_TICK_GAP;
	}
	if (seq <= st->last)
		return GK_SEQ_STALE;
	enum gk_seq_action a = seq == st->last + 1 ? GK_SEQ_DELIVER : GK_SEQ_GAP_DELIVER;
	st->last = seq;
	return a;
}
