/* lib/ipc RPC in one process: round trips, dispatch errors, deadlines,
 * dedupe, async calls, call info. The server dispatches on its own thread. */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "../../services/echo/echo.h"
#include "../../lib/ipc/internal.h"
#include "harness.h"
#include "rpc.pb-c.h"

static gk_echo echo;
static th_server srv;

static void setup(void)
{
	gk_echo_init(&echo);
	th_server_start(&srv, &echo.service.base, &echo, gk_echo_mutating, NULL);
}

static void teardown(void)
{
	th_server_stop(&srv);
}

static gk_ipc_client *client(void)
{
	gk_ipc_client *c;
	gk_err e;
	cr_assert_eq(gk_ipc_client_open(&c, srv.url, NULL, &e), 0, "%s", e.msg);
	return c;
}

TestSuite(rpc, .init = setup, .fini = teardown, .timeout = 30);

Test(rpc, echo_round_trip_with_bytes)
{
	gk_ipc_client *c = client();
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	uint8_t data[300];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)i;
	r.text = "héllo";
	r.has_data = 1;
	r.data = (ProtobufCBinaryData){ sizeof(data), data };
	ProtobufCMessage *out = NULL;
	gk_err e;
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &r.base, &out, 2000, &e), 0, "%s", e.msg);
	Gpukmm__EchoReply *rep = (Gpukmm__EchoReply *)out;
	cr_assert_str_eq(rep->text, "héllo");
	cr_assert_eq(rep->data.len, sizeof(data));
	cr_assert_eq(memcmp(rep->data.data, data, sizeof(data)), 0);
	cr_assert_eq(rep->server_pid, getpid());
	gk_ipc_free(out);
	gk_ipc_stats st;
	gk_ipc_client_stats(c, &st);
	cr_assert_eq(st.calls, 1);
	cr_assert_eq(st.errors, 0);
	gk_ipc_client_close(c);
}

Test(rpc, server_error_code_and_message_reach_the_client)
{
	gk_ipc_client *c = client();
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	r.text = "nope";
	r.has_fail_code = 1;
	r.fail_code = GK_NOT_FOUND;
	ProtobufCMessage *out = (ProtobufCMessage *)1;
	gk_err e;
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Fail", &r.base, &out, 2000, &e), GK_NOT_FOUND);
	cr_assert_null(out);
	cr_assert_str_eq(e.msg, "failed as asked: nope");
	r.fail_code = 999; /* out of range on the client side */
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Fail", &r.base, &out, 2000, &e), GK_UNKNOWN);
	gk_ipc_client_close(c);
}

Test(rpc, wrong_method_or_request_type_is_refused_locally)
{
	gk_ipc_client *c = client();
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	Gpukmm__Empty empty = GPUKMM__EMPTY__INIT;
	ProtobufCMessage *out;
	gk_err e;
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Nope", &r.base, &out, 1000, &e), GK_INVALID_ARGUMENT);
	cr_assert(strstr(e.msg, "Nope"));
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &empty.base, &out, 1000, &e), GK_INVALID_ARGUMENT);
	cr_assert(strstr(e.msg, "gpukmm.EchoRequest"), "%s", e.msg);
	gk_ipc_client_close(c);
}

/* Raw REQ socket to send hand-made frames. */
static nng_msg *raw_call(const void *frame, size_t len)
{
	nng_socket s;
	cr_assert_eq(nng_req0_open(&s), 0);
	cr_assert_eq(nng_dial(s, srv.url, NULL, 0), 0);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 5000);
	nng_msg *m;
	nng_msg_alloc(&m, len);
	memcpy(nng_msg_body(m), frame, len);
	cr_assert_eq(nng_sendmsg(s, m, 0), 0);
	nng_msg *rep = NULL;
	cr_assert_eq(nng_recvmsg(s, &rep, 0), 0);
	nng_close(s);
	return rep;
}

static gk_reply_view raw_reply(nng_msg *rep)
{
	gk_reply_view v;
	cr_assert_eq(gk_frame_reply_parse(nng_msg_body(rep), nng_msg_len(rep), &v), 0);
	return v;
}

static nng_msg *env_call(const char *service, const char *method, uint64_t cid, uint64_t rid,
			 int64_t deadline, const ProtobufCMessage *payload)
{
	uint8_t buf[4096];
	size_t n = gk_frame_env_write(buf, service, method, rid, cid, deadline, payload);
	return raw_call(buf, n);
}

Test(rpc, unknown_service_or_method_is_unimplemented)
{
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	nng_msg *m = env_call("gpukmm.Nope", "Echo", 1, 1, 0, &r.base);
	gk_reply_view v = raw_reply(m);
	cr_assert_eq(v.code, GK_UNIMPLEMENTED);
	cr_assert_eq(v.request_id, 1);
	cr_assert(v.message.n && memmem(v.message.p, v.message.n, "gpukmm.Nope", 11));
	nng_msg_free(m);
	m = env_call("gpukmm.Echo", "Missing", 1, 2, 0, &r.base);
	v = raw_reply(m);
	cr_assert_eq(v.code, GK_UNIMPLEMENTED);
	cr_assert(memmem(v.message.p, v.message.n, "Missing", 7));
	nng_msg_free(m);
}

Test(rpc, undecodable_envelope_and_payload_are_invalid_argument)
{
	const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	nng_msg *m = raw_call(junk, sizeof(junk));
	cr_assert_eq(raw_reply(m).code, GK_INVALID_ARGUMENT);
	nng_msg_free(m);
	/* a well-formed envelope whose payload is not an EchoRequest (field 1 as varint) */
	uint8_t buf[256];
	size_t n = gk_frame_env_write(buf, "gpukmm.Echo", "Echo", 5, 7, 0, NULL);
	buf[n++] = 6 << 3 | 2;
	buf[n++] = 2;
	buf[n++] = 1 << 3 | 0; /* text as a varint: wrong wire type */
	buf[n++] = 1;
	m = raw_call(buf, n);
	gk_reply_view v = raw_reply(m);
	cr_assert_eq(v.code, GK_INVALID_ARGUMENT);
	cr_assert(memmem(v.message.p, v.message.n, "EchoRequest", 11));
	nng_msg_free(m);
	/* a name with a NUL byte */
	const uint8_t nul[] = { 0x0a, 3, 'a', 0, 'b', 0x12, 1, 'x' };
	m = raw_call(nul, sizeof(nul));
	cr_assert_eq(raw_reply(m).code, GK_INVALID_ARGUMENT);
	nng_msg_free(m);
	/* the server is still fine */
	gk_ipc_client *c = client();
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	ProtobufCMessage *out;
	gk_err e;
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &r.base, &out, 2000, &e), 0, "%s", e.msg);
	gk_ipc_free(out);
	gk_ipc_client_close(c);
}

Test(rpc, expired_deadline_is_refused_on_arrival)
{
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	nng_msg *m = env_call("gpukmm.Echo", "Add", 9, 9, gk_now_ms() - 10, &r.base);
	cr_assert_eq(raw_reply(m).code, GK_DEADLINE_EXCEEDED);
	nng_msg_free(m);
	cr_assert_eq(echo.counter, 0, "the handler must not run");
}

Test(rpc, client_deadline_is_enforced)
{
	gk_ipc_client *c = client();
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	r.has_delay_ms = 1;
	r.delay_ms = 1500;
	ProtobufCMessage *out;
	gk_err e;
	int64_t t0 = th_ms();
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Slow", &r.base, &out, 200, &e), GK_DEADLINE_EXCEEDED, "%s", e.msg);
	int64_t took = th_ms() - t0;
	cr_assert_geq(took, 190);
	cr_assert_lt(took, 1200, "took %lld ms", (long long)took);
	gk_ipc_stats st;
	gk_ipc_client_stats(c, &st);
	cr_assert_eq(st.deadline_exceeded, 1);
	gk_ipc_client_close(c);
}

Test(rpc, no_server_is_unavailable_within_the_deadline)
{
	char dir[64], url[128];
	th_tmpdir(dir, sizeof(dir));
	snprintf(url, sizeof(url), "ipc://%s/none.sock", dir);
	gk_ipc_client *c;
	gk_err e;
	cr_assert_eq(gk_ipc_client_open(&c, url, NULL, &e), 0, "%s", e.msg);
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	ProtobufCMessage *out;
	int64_t t0 = th_ms();
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &r.base, &out, 300, &e), GK_UNAVAILABLE, "%s", e.msg);
	cr_assert_lt(th_ms() - t0, 2000);
	gk_ipc_client_close(c);
	th_rmdir(dir);
}

Test(rpc, mutating_call_is_deduped_on_request_id)
{
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	nng_msg *m = env_call("gpukmm.Echo", "Add", 42, 7, 0, &r.base);
	gk_reply_view v = raw_reply(m);
	cr_assert_eq(v.code, GK_OK);
	Gpukmm__EchoReply *rep = gpukmm__echo_reply__unpack(NULL, v.payload.n, v.payload.p);
	cr_assert_eq(rep->count, 1);
	gpukmm__echo_reply__free_unpacked(rep, NULL);
	nng_msg_free(m);
	/* the same (client, request) again: answered from the cache */
	m = env_call("gpukmm.Echo", "Add", 42, 7, 0, &r.base);
	v = raw_reply(m);
	rep = gpukmm__echo_reply__unpack(NULL, v.payload.n, v.payload.p);
	cr_assert_eq(rep->count, 1);
	gpukmm__echo_reply__free_unpacked(rep, NULL);
	nng_msg_free(m);
	cr_assert_eq(echo.counter, 1);
	/* another client with the same request id is another call */
	m = env_call("gpukmm.Echo", "Add", 43, 7, 0, &r.base);
	nng_msg_free(m);
	cr_assert_eq(echo.counter, 2);
	/* non-mutating methods are never cached */
	m = env_call("gpukmm.Echo", "Echo", 42, 7, 0, &r.base);
	v = raw_reply(m);
	rep = gpukmm__echo_reply__unpack(NULL, v.payload.n, v.payload.p);
	cr_assert_eq(rep->count, 2);
	gpukmm__echo_reply__free_unpacked(rep, NULL);
	nng_msg_free(m);
}

struct done_ctx { int n; int codes[64]; uint64_t counts[64]; };
static void on_done(void *user, int code, ProtobufCMessage *reply, const char *msg)
{
	struct done_ctx *d = user;
	d->codes[d->n] = code;
	d->counts[d->n] = reply ? ((Gpukmm__EchoReply *)reply)->count : 0;
	d->n++;
	gk_ipc_free(reply);
}

Test(rpc, async_calls_complete_through_the_fd)
{
	gk_ipc_client *c = client();
	struct done_ctx d = { 0 };
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	gk_err e;
	for (int i = 0; i < 20; i++)
		cr_assert_eq(gk_ipc_call_async(c, &gpukmm__echo__descriptor, "Add", &r.base, 5000, on_done, &d, &e), 0);
	Gpukmm__EchoRequest f = GPUKMM__ECHO_REQUEST__INIT;
	f.has_fail_code = 1;
	f.fail_code = GK_ABORTED;
	cr_assert_eq(gk_ipc_call_async(c, &gpukmm__echo__descriptor, "Fail", &f.base, 5000, on_done, &d, &e), 0);
	int64_t end = th_ms() + 10000;
	struct pollfd p = { gk_ipc_client_fd(c), POLLIN, 0 };
	while (d.n < 21 && th_ms() < end)
		if (poll(&p, 1, 100) > 0)
			gk_ipc_client_dispatch(c);
	cr_assert_eq(d.n, 21);
	int aborted = 0;
	uint64_t max = 0;
	for (int i = 0; i < 21; i++) {
		if (d.codes[i] == GK_ABORTED)
			aborted++;
		else
			cr_assert_eq(d.codes[i], 0);
		if (d.counts[i] > max)
			max = d.counts[i];
	}
	cr_assert_eq(aborted, 1);
	cr_assert_eq(max, 20);
	cr_assert_eq(echo.counter, 20);
	gk_ipc_client_close(c);
}

Test(rpc, close_cancels_outstanding_async_calls)
{
	gk_ipc_client *c = client();
	struct done_ctx d = { 0 };
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	r.has_delay_ms = 1;
	r.delay_ms = 300;
	gk_err e;
	cr_assert_eq(gk_ipc_call_async(c, &gpukmm__echo__descriptor, "Slow", &r.base, 5000, on_done, &d, &e), 0);
	gk_ipc_client_close(c);
	cr_assert_eq(d.n, 1);
	cr_assert_eq(d.codes[0], GK_CANCELLED);
}

/* A handler that forgets to answer, one that answers twice, and call info. */
typedef struct { Gpukmm__Echo_Service svc; gk_ipc_call_info seen; void *user_seen; } odd;
static void odd_echo(Gpukmm__Echo_Service *s, const Gpukmm__EchoRequest *in, Gpukmm__EchoReply_Closure cl, void *cd)
{
	odd *o = (odd *)s;
	const gk_ipc_call_info *i = gk_ipc_call_info_of(cd);
	o->seen = *i;
	o->seen.service = NULL;
	o->seen.method = NULL;
	o->user_seen = gk_ipc_call_user(cd);
	Gpukmm__EchoReply r = GPUKMM__ECHO_REPLY__INIT;
	cl(&r, cd);
	cl(&r, cd); /* ignored */
}
static void odd_slow(Gpukmm__Echo_Service *s, const Gpukmm__EchoRequest *in, Gpukmm__EchoReply_Closure cl, void *cd) {}
static void odd_fail(Gpukmm__Echo_Service *s, const Gpukmm__EchoRequest *in, Gpukmm__EchoReply_Closure cl, void *cd)
{
	cl(NULL, cd);
}
static void odd_add(Gpukmm__Echo_Service *s, const Gpukmm__EchoRequest *in, Gpukmm__EchoReply_Closure cl, void *cd)
{
	gk_ipc_fail(cd, GK_OK, "failing with OK");
}

Test(handlers, misbehaving_handlers_and_call_info)
{
	static odd o = { .svc = GPUKMM__ECHO__INIT(odd_) };
	th_server t;
	int tag = 5;
	th_server_start(&t, &o.svc.base, &tag, NULL, NULL);
	gk_ipc_client *c;
	gk_err e;
	cr_assert_eq(gk_ipc_client_open(&c, t.url, NULL, &e), 0);
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	ProtobufCMessage *out;
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &r.base, &out, 2000, &e), 0, "%s", e.msg);
	gk_ipc_free(out);
	cr_assert_eq(o.seen.peer_pid, getpid());
	cr_assert_eq(o.seen.peer_uid, getuid());
	cr_assert_eq(o.seen.client_id, gk_ipc_client_id(c));
	cr_assert_neq(o.seen.request_id, 0);
	cr_assert_gt(o.seen.deadline_ms, gk_now_ms());
	cr_assert_eq(o.user_seen, &tag);
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Slow", &r.base, &out, 2000, &e), GK_INTERNAL);
	cr_assert(strstr(e.msg, "without an answer"), "%s", e.msg);
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Fail", &r.base, &out, 2000, &e), GK_INTERNAL);
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Add", &r.base, &out, 2000, &e), GK_UNKNOWN);
	gk_ipc_client_close(c);
	th_server_stop(&t);
}

Test(server, open_errors_and_double_registration)
{
	gk_ipc_server *s;
	gk_err e;
	cr_assert_neq(gk_ipc_server_open(&s, "bogus://x", NULL, &e), 0);
	cr_assert_null(s);
	cr_assert_eq(gk_ipc_server_open(&s, NULL, NULL, &e), GK_INVALID_ARGUMENT);
	cr_assert_eq(gk_ipc_server_open(&s, "tcp://127.0.0.1:0", NULL, &e), 0, "%s", e.msg);
	cr_assert(strncmp(gk_ipc_server_url(s), "tcp://127.0.0.1:", 16) == 0);
	cr_assert_str_neq(gk_ipc_server_url(s), "tcp://127.0.0.1:0");
	gk_echo ec;
	gk_echo_init(&ec);
	cr_assert_eq(gk_ipc_server_add(s, &ec.service.base, &ec, NULL, &e), 0);
	cr_assert_eq(gk_ipc_server_add(s, &ec.service.base, &ec, NULL, &e), GK_ALREADY_EXISTS);
	const char *bad[] = { "NoSuch", NULL };
	gk_ipc_server_close(s);
	cr_assert_eq(gk_ipc_server_open(&s, "tcp://127.0.0.1:0", NULL, &e), 0);
	cr_assert_eq(gk_ipc_server_add(s, &ec.service.base, &ec, bad, &e), GK_NOT_FOUND);
	gk_ipc_server_close(s);
}

Test(server, ipc_socket_file_is_0600)
{
	th_server t;
	th_server_start(&t, NULL, NULL, NULL, NULL);
	char path[128];
	snprintf(path, sizeof(path), "%s/s.sock", t.dir);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
	th_server_stop(&t);
}
