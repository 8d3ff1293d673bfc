/* lib/ipc pure pieces: envelope/reply framing (byte-compatible with
 * protobuf-c), garbage input, capped unpack, dedupe cache, bus framing, the
 * subscriber's sequence decisions and the listener guard's verdict. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/ipc/internal.h"
#include "echo.pb-c.h"
#include "rpc.pb-c.h"

Test(frame, envelope_matches_protobuf_c_both_ways)
{
	Gpukmm__EchoRequest req = GPUKMM__ECHO_REQUEST__INIT;
	req.text = "hello";
	req.has_delay_ms = 1;
	req.delay_ms = 300;
	uint8_t buf[512];
	size_t n = gk_frame_env_size("gpukmm.Echo", "Slow", 77, 0xfffffffffffffff0ull, -5, &req.base);
	cr_assert_lt(n, sizeof(buf));
	cr_assert_eq(gk_frame_env_write(buf, "gpukmm.Echo", "Slow", 77, 0xfffffffffffffff0ull, -5, &req.base), n);
	Gpukmm__Envelope *e = gpukmm__envelope__unpack(NULL, n, buf);
	cr_assert_not_null(e);
	cr_assert_str_eq(e->service, "gpukmm.Echo");
	cr_assert_str_eq(e->method, "Slow");
	cr_assert_eq(e->request_id, 77);
	cr_assert_eq(e->client_id, 0xfffffffffffffff0ull);
	cr_assert_eq(e->deadline_ms, -5);
	Gpukmm__EchoRequest *inner = gpukmm__echo_request__unpack(NULL, e->payload.len, e->payload.data);
	cr_assert_str_eq(inner->text, "hello");
	cr_assert_eq(inner->delay_ms, 300);
	gpukmm__echo_request__free_unpacked(inner, NULL);
	/* and protobuf-c's encoding parses with ours */
	uint8_t buf2[512];
	size_t n2 = gpukmm__envelope__pack(e, buf2);
	gk_env_view v;
	cr_assert_eq(gk_frame_env_parse(buf2, n2, &v), 0);
	cr_assert_eq(v.service.n, 11);
	cr_assert_eq(memcmp(v.service.p, "gpukmm.Echo", 11), 0);
	cr_assert_eq(v.request_id, 77);
	cr_assert_eq(v.client_id, 0xfffffffffffffff0ull);
	cr_assert_eq(v.deadline_ms, -5);
	cr_assert_eq(v.payload.n, e->payload.len);
	gpukmm__envelope__free_unpacked(e, NULL);
}

Test(frame, reply_matches_protobuf_c)
{
	Gpukmm__EchoReply r = GPUKMM__ECHO_REPLY__INIT;
	r.has_count = 1;
	r.count = 9;
	uint8_t buf[256];
	size_t n = gk_frame_reply_write(buf, GK_OK, NULL, 5, &r.base);
	cr_assert_eq(n, gk_frame_reply_size(GK_OK, NULL, 5, &r.base));
	Gpukmm__Reply *p = gpukmm__reply__unpack(NULL, n, buf);
	cr_assert_not_null(p);
	cr_assert_eq(p->code, GPUKMM__CODE__OK);
	cr_assert_eq(p->request_id, 5);
	cr_assert(p->has_payload);
	gpukmm__reply__free_unpacked(p, NULL);
	n = gk_frame_reply_write(buf, GK_NOT_FOUND, "no such node", 6, NULL);
	p = gpukmm__reply__unpack(NULL, n, buf);
	cr_assert_eq(p->code, GPUKMM__CODE__NOT_FOUND);
	cr_assert_str_eq(p->message, "no such node");
	cr_assert(!p->has_payload);
	gpukmm__reply__free_unpacked(p, NULL);
	gk_reply_view v;
	cr_assert_eq(gk_frame_reply_parse(buf, n, &v), 0);
	cr_assert_eq(v.code, GK_NOT_FOUND);
	cr_assert_eq(v.message.n, 12);
	cr_assert_eq(v.payload.n, 0);
	cr_assert_not_null(v.payload.p, "empty payload is a valid pointer");
}

Test(frame, unknown_fields_are_skipped)
{
	/* field 15 varint, field 16 fixed64, field 17 fixed32, field 18 bytes, then service */
	uint8_t buf[64];
	size_t k = 0;
	buf[k++] = 15 << 3 | 0; buf[k++] = 0x96; buf[k++] = 0x01;            /* varint 150 */
	buf[k++] = (16 << 3 | 1) | 0x80; buf[k++] = 0x01;                     /* key 16/fixed64 */
	for (int i = 0; i < 8; i++) buf[k++] = (uint8_t)i;
	buf[k++] = (17 << 3 | 5) | 0x80; buf[k++] = 0x01;                     /* key 17/fixed32 */
	for (int i = 0; i < 4; i++) buf[k++] = (uint8_t)i;
	buf[k++] = (18 << 3 | 2) | 0x80; buf[k++] = 0x01; buf[k++] = 2; buf[k++] = 'x'; buf[k++] = 'y';
	buf[k++] = 1 << 3 | 2; buf[k++] = 1; buf[k++] = 'S';
	gk_env_view v;
	cr_assert_eq(gk_frame_env_parse(buf, k, &v), 0);
	cr_assert_eq(v.service.n, 1);
	cr_assert_eq(v.service.p[0], 'S');
}

Test(frame, garbage_and_truncations_are_rejected_without_reading_past_the_end)
{
	uint8_t buf[256];
	Gpukmm__EchoRequest req = GPUKMM__ECHO_REQUEST__INIT;
	req.text = "abc";
	size_t n = gk_frame_env_write(buf, "gpukmm.Echo", "Echo", 1, 2, 3, &req.base);
	gk_env_view v;
	int ok = 0;
	/* every strict prefix either parses (ends on a field boundary) or is rejected */
	for (size_t len = 0; len < n; len++) {
		uint8_t *copy = malloc(len ? len : 1); /* exact size: ASan catches over-reads */
		memcpy(copy, buf, len);
		if (gk_frame_env_parse(copy, len, &v) == 0)
			ok++;
		free(copy);
	}
	cr_assert_lt(ok, (int)n);
	const uint8_t cases[][12] = {
		{ 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, /* overlong varint */
		{ 0x0a, 0x7f, 'a' },               /* length past the end */
		{ 0x0b },                          /* group start: unsupported */
		{ 0x00, 0x01 },                    /* field number 0 */
		{ 0x08, 0x01 },                    /* service as varint: wrong wire type */
		{ 0x32, 0xff, 0xff, 0xff, 0xff, 0x0f }, /* huge payload length */
		{ 0x0e },                          /* wire type 6 */
	};
	const size_t lens[] = { 12, 3, 1, 2, 2, 6, 1 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		cr_assert_eq(gk_frame_env_parse(cases[i], lens[i], &v), -1, "case %zu", i);
	gk_reply_view r;
	cr_assert_eq(gk_frame_reply_parse(cases[4], 2, &r), 0, "field 1 varint is the reply code");
	cr_assert_eq(gk_frame_reply_parse(cases[1], 3, &r), -1);
	cr_assert_eq(gk_frame_env_parse(NULL, 0, &v), 0, "an empty envelope parses (and is refused later)");
	cr_assert_eq(gk_frame_env_parse(NULL, 3, &v), -1);
}

Test(frame, names_are_bounded_and_nul_free)
{
	char out[GK_IPC_NAME_MAX];
	gk_bytes ok = { (const uint8_t *)"gpukmm.Echo", 11 };
	cr_assert_eq(gk_frame_name(ok, out), 0);
	cr_assert_str_eq(out, "gpukmm.Echo");
	gk_bytes nul = { (const uint8_t *)"a\0b", 3 };
	cr_assert_eq(gk_frame_name(nul, out), -1);
	uint8_t big[GK_IPC_NAME_MAX];
	memset(big, 'a', sizeof(big));
	gk_bytes lng = { big, sizeof(big) };
	cr_assert_eq(gk_frame_name(lng, out), -1);
	gk_bytes empty = { NULL, 0 };
	cr_assert_eq(gk_frame_name(empty, out), 0);
	cr_assert_str_eq(out, "");
}

Test(unpack, capped_allocator_refuses_big_messages)
{
	Gpukmm__EchoRequest req = GPUKMM__ECHO_REQUEST__INIT;
	static uint8_t data[100000];
	req.has_data = 1;
	req.data = (ProtobufCBinaryData){ sizeof(data), data };
	size_t n = gpukmm__echo_request__get_packed_size(&req);
	uint8_t *buf = malloc(n);
	gpukmm__echo_request__pack(&req, buf);
	ProtobufCMessage *m = gk_unpack_capped(&gpukmm__echo_request__descriptor, buf, n, 1 << 20);
	cr_assert_not_null(m);
	gk_ipc_free(m);
	cr_assert_null(gk_unpack_capped(&gpukmm__echo_request__descriptor, buf, n, 50000));
	cr_assert_null(gk_unpack_capped(&gpukmm__echo_request__descriptor, buf, n - 1, 1 << 20), "truncated");
	m = gk_unpack_capped(&gpukmm__echo_request__descriptor, NULL, 0, 0);
	cr_assert_not_null(m, "an empty message is valid");
	gk_ipc_free(m);
	gk_ipc_free(NULL);
	free(buf);
}

Test(dedupe, bounded_by_count_and_bytes_newest_wins)
{
	gk_dedupe *d = gk_dedupe_new(3, 100);
	gk_dedupe_put(d, 1, 1, "aaaa", 4);
	gk_dedupe_put(d, 1, 2, "bbbb", 4);
	gk_dedupe_put(d, 2, 1, "cccc", 4);
	cr_assert_eq(gk_dedupe_count(d), 3);
	const gk_bytes *b = gk_dedupe_get(d, 2, 1);
	cr_assert_not_null(b);
	cr_assert_eq(memcmp(b->p, "cccc", 4), 0);
	gk_dedupe_put(d, 3, 1, "dddd", 4); /* evicts (1,1) */
	cr_assert_null(gk_dedupe_get(d, 1, 1));
	cr_assert_not_null(gk_dedupe_get(d, 1, 2));
	cr_assert_eq(gk_dedupe_count(d), 3);
	static char big[90];
	gk_dedupe_put(d, 4, 1, big, sizeof(big)); /* byte budget: evicts until it fits */
	cr_assert_not_null(gk_dedupe_get(d, 4, 1));
	cr_assert_eq(gk_dedupe_count(d), 3, "count cap evicted one; 4 + 4 + 90 fits 100");
	gk_dedupe_put(d, 4, 2, big, sizeof(big)); /* 90 + 90 > 100: only the newest stays */
	cr_assert_eq(gk_dedupe_count(d), 1);
	cr_assert_null(gk_dedupe_get(d, 4, 1));
	cr_assert_not_null(gk_dedupe_get(d, 4, 2));
	gk_dedupe_put(d, 5, 1, big, 101); /* larger than the budget: not cached */
	cr_assert_null(gk_dedupe_get(d, 5, 1));
	gk_dedupe_free(d);
}

Test(bus, frame_round_trip_and_rejects)
{
	uint8_t buf[128];
	size_t n = gk_bus_header_write(buf, "node", GK_BUS_EVENT, 0xdeadbeef, 42);
	cr_assert_eq(n, gk_bus_header_size("node"));
	memcpy(buf + n, "xyz", 3);
	gk_bus_view v;
	cr_assert_eq(gk_bus_parse(buf, n + 3, &v), 0);
	cr_assert_str_eq(v.topic, "node");
	cr_assert_eq(v.kind, GK_BUS_EVENT);
	cr_assert_eq(v.epoch, 0xdeadbeef);
	cr_assert_eq(v.seq, 42);
	cr_assert_eq(v.payload.n, 3);
	n = gk_bus_header_write(buf, "", GK_BUS_TICK, 1, 7);
	cr_assert_eq(gk_bus_parse(buf, n, &v), 0);
	cr_assert_eq(gk_bus_parse(buf, n - 1, &v), -1, "truncated");
	buf[n] = 'x';
	cr_assert_eq(gk_bus_parse(buf, n + 1, &v), -1, "a tick has no payload");
	n = gk_bus_header_write(buf, "t", 'Q', 1, 7);
	cr_assert_eq(gk_bus_parse(buf, n, &v), -1, "unknown kind");
	n = gk_bus_header_write(buf, "t", GK_BUS_EVENT, 1, 0);
	cr_assert_eq(gk_bus_parse(buf, n, &v), -1, "seq 0");
	uint8_t notopic[100];
	memset(notopic, 'a', sizeof(notopic));
	cr_assert_eq(gk_bus_parse(notopic, sizeof(notopic), &v), -1, "no NUL within the topic limit");
	cr_assert_eq(gk_bus_parse(NULL, 0, &v), -1);
}

Test(bus, sequence_decisions)
{
	gk_seq_state st = { 0 };
	uint64_t exp;
	cr_assert_eq(gk_seq_decide(&st, GK_BUS_EVENT, 7, 5, &exp), GK_SEQ_DELIVER, "first seen");
	cr_assert_eq(gk_seq_decide(&st, GK_BUS_EVENT, 7, 6, &exp), GK_SEQ_DELIVER);
	cr_assert_eq(gk_seq_decide(&st, GK_BUS_EVENT, 7, 6, &exp), GK_SEQ_STALE, "duplicate");
	cr_assert_eq(gk_seq_decide(&st, GK_BUS_EVENT, 7, 9, &exp), GK_SEQ_GAP_DELIVER);
	cr_assert_eq(exp, 7);
	cr_assert_eq(gk_seq_decide(&st, GK_BUS_TICK, 7, 9, &exp), GK_SEQ_TICK_OK);
	cr_assert_eq(gk_seq_decide(&st, GK_BUS_TICK, 7, 12, &exp), GK_SEQ_TICK_GAP, "lost tail");
	cr_assert_eq(exp, 10);
	cr_assert_eq(st.last, 12);
	/* publisher restarted: new epoch, numbers from 1 */
	cr_assert_eq(gk_seq_decide(&st, GK_BUS_EVENT, 8, 1, &exp), GK_SEQ_GAP_DELIVER);
	cr_assert_eq(exp, 1);
	cr_assert_eq(gk_seq_decide(&st, GK_BUS_EVENT, 8, 2, &exp), GK_SEQ_DELIVER);
	/* after a snapshot (set_seq) the epoch is learnt from the next message */
	gk_seq_state s2 = { .last = 100, .known = true, .epoch_known = false };
	cr_assert_eq(gk_seq_decide(&s2, GK_BUS_EVENT, 3, 99, &exp), GK_SEQ_STALE, "covered by the snapshot");
	cr_assert_eq(gk_seq_decide(&s2, GK_BUS_EVENT, 3, 101, &exp), GK_SEQ_DELIVER);
	gk_seq_state s3 = { 0 };
	cr_assert_eq(gk_seq_decide(&s3, GK_BUS_TICK, 1, 4, &exp), GK_SEQ_TICK_OK, "a first tick only records");
	/* a snapshot with its publisher's epoch: a restarted publisher's low
	 * numbers are a gap, not "covered by the snapshot" */
	gk_seq_state s4 = { .last = 100, .known = true, .epoch_known = true, .epoch = 3 };
	cr_assert_eq(gk_seq_decide(&s4, GK_BUS_TICK, 4, 2, &exp), GK_SEQ_TICK_GAP, "tick of a new epoch");
	cr_assert_eq(exp, 1);
	gk_seq_state s5 = { .last = 100, .known = true, .epoch_known = true, .epoch = 3 };
	cr_assert_eq(gk_seq_decide(&s5, GK_BUS_EVENT, 4, 1, &exp), GK_SEQ_GAP_DELIVER, "event of a new epoch");
	cr_assert_eq(gk_seq_decide(&s5, GK_BUS_EVENT, 3, 101, &exp), GK_SEQ_GAP_DELIVER, "and back");
}

/* The listener guard convicts on nng#1518's signature only: the server answered
 * the probe's handshake and then handed no pipe to the socket. A machine too
 * loaded to answer within a timeout is waited for (a re-creation would close
 * every client's pipe), up to GK_PROBE_HANDSHAKE_WAITS timeouts. */
Test(guard, a_probe_convicts_from_the_answer_not_from_the_connect)
{
	const int t = 1000;
	const int64_t s = 50000;
	cr_assert_eq(gk_probe_decide(true, s, -1, s + 60000, t), GK_PROBE_ALIVE, "a pipe came");
	cr_assert_eq(gk_probe_decide(true, s, s + 10, s + 60000, t), GK_PROBE_ALIVE);
	/* answered at once: a second later without a pipe is the bug */
	cr_assert_eq(gk_probe_decide(false, s, s + 5, s + 5 + t - 1, t), GK_PROBE_WAIT);
	cr_assert_eq(gk_probe_decide(false, s, s + 5, s + 5 + t, t), GK_PROBE_NOT_HANDED_OVER);
	/* a loaded machine answers after 3 s: not convicted 1 s after the connect
	 * (the old rule), nor half a second after the answer */
	cr_assert_eq(gk_probe_decide(false, s, -1, s + t, t), GK_PROBE_WAIT);
	cr_assert_eq(gk_probe_decide(false, s, -1, s + 3 * t - 1, t), GK_PROBE_WAIT);
	cr_assert_eq(gk_probe_decide(false, s, s + 3 * t, s + 3 * t + t / 2, t), GK_PROBE_WAIT);
	cr_assert_eq(gk_probe_decide(false, s, s + 3 * t, s + 4 * t, t), GK_PROBE_NOT_HANDED_OVER);
	/* no answer at all: convicted after GK_PROBE_HANDSHAKE_WAITS timeouts */
	int64_t w = (int64_t)GK_PROBE_HANDSHAKE_WAITS * t;
	cr_assert_gt(GK_PROBE_HANDSHAKE_WAITS, 1);
	cr_assert_eq(gk_probe_decide(false, s, -1, s + w - 1, t), GK_PROBE_WAIT);
	cr_assert_eq(gk_probe_decide(false, s, -1, s + w, t), GK_PROBE_NO_HANDSHAKE);
}
