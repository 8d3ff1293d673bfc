/* lib/ipc across processes, against the real gpukmm-echo: a server killed
 * mid-call, a restarted server, 1,000 concurrent calls from 8 processes,
 * garbage / truncated frames from a raw nng socket, an oversized one from a
 * raw AF_UNIX connection. */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "../../lib/ipc/internal.h"
#include "echo.pb-c.h"
#include "harness.h"

static char dir[64], url[128];
static pid_t echo_pid;

static pid_t spawn(const char *envdir, const char *prog, char *const argv[])
{
	char log[128];
	snprintf(log, sizeof(log), "%s/children.log", dir);
	return th_spawn(envdir, prog, argv, log);
}

static int call_echo(const char *u, int timeout_ms, Gpukmm__EchoReply **out)
{
	gk_ipc_client *c;
	gk_err e;
	cr_assert_eq(gk_ipc_client_open(&c, u, NULL, &e), 0);
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	r.text = "ping";
	ProtobufCMessage *m = NULL;
	int code = gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &r.base, &m, timeout_ms, &e);
	gk_ipc_client_close(c);
	if (out)
		*out = (Gpukmm__EchoReply *)m;
	else
		gk_ipc_free(m);
	return code;
}

/* Starts gpukmm-echo as echo_pid (set before the wait: a server that does not
 * come up is still the teardown's to kill, not left running). */
static void start_echo(void)
{
	char listen[160];
	snprintf(listen, sizeof(listen), "--listen=%s", url);
	char *argv[] = { "gpukmm-echo", listen, "--log-level=warn", NULL };
	echo_pid = spawn("GPUKMM_BIN", "gpukmm-echo", argv);
	int64_t end = th_ms() + 10000;
	while (call_echo(url, 200, NULL) != 0)
		cr_assert_lt(th_ms(), end, "gpukmm-echo did not come up");
}

static void reap(pid_t pid, int sig)
{
	if (pid <= 0)
		return;
	kill(pid, sig);
	waitpid(pid, NULL, 0);
}

static void setup(void)
{
	th_tmpdir(dir, sizeof(dir));
	snprintf(url, sizeof(url), "ipc://%s/echo.sock", dir);
	start_echo();
}

static void teardown(void)
{
	char cmd[160]; /* the children's complaints, into the test log */
	snprintf(cmd, sizeof(cmd), "grep -v ' INFO ' '%s/children.log' >&2 2>/dev/null", dir);
	if (system(cmd) == 0)
		fprintf(stderr, "(children's stderr above)\n");
	reap(echo_pid, SIGKILL);
	th_rmdir(dir);
}

TestSuite(multiproc, .init = setup, .fini = teardown, .timeout = 60);

struct res { int done, code; };
static void on_done(void *user, int code, ProtobufCMessage *reply, const char *msg)
{
	struct res *r = user;
	r->done = 1;
	r->code = code;
	gk_ipc_free(reply);
}

Test(multiproc, server_killed_mid_call_fails_within_the_deadline)
{
	gk_ipc_client *c;
	gk_err e;
	cr_assert_eq(gk_ipc_client_open(&c, url, NULL, &e), 0);
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	r.has_delay_ms = 1;
	r.delay_ms = 10000;
	struct res res = { 0 };
	int64_t t0 = th_ms();
	cr_assert_eq(gk_ipc_call_async(c, &gpukmm__echo__descriptor, "Slow", &r.base, 1500, on_done, &res, &e), 0);
	/* give the request time to reach the handler (the test passes either way) */
	struct pollfd p = { gk_ipc_client_fd(c), POLLIN, 0 };
	poll(&p, 1, 300);
	cr_assert_eq(res.done, 0);
	reap(echo_pid, SIGKILL);
	echo_pid = 0;
	while (!res.done && th_ms() - t0 < 5000)
		if (poll(&p, 1, 100) > 0)
			gk_ipc_client_dispatch(c);
	int64_t took = th_ms() - t0;
	cr_assert(res.done, "no completion: the call hangs");
	cr_assert(res.code == GK_UNAVAILABLE || res.code == GK_DEADLINE_EXCEEDED, "code %s", gk_code_name(res.code));
	cr_assert_leq(took, 1500 + 1000, "took %lld ms (deadline 1500)", (long long)took);
	/* a restarted server at the same address serves the same client again */
	start_echo();
	Gpukmm__EchoRequest q = GPUKMM__ECHO_REQUEST__INIT;
	ProtobufCMessage *m;
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &q.base, &m, 5000, &e), 0, "%s", e.msg);
	cr_assert_eq(((Gpukmm__EchoReply *)m)->server_pid, echo_pid);
	gk_ipc_free(m);
	gk_ipc_client_close(c);
}

Test(multiproc, blocking_call_to_a_stopped_server_returns)
{
	gk_ipc_client *c;
	gk_err e;
	cr_assert_eq(gk_ipc_client_open(&c, url, NULL, &e), 0);
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	ProtobufCMessage *m;
	cr_assert_eq(gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &r.base, &m, 2000, &e), 0);
	gk_ipc_free(m);
	/* SIGSTOP: the server is connected but never answers */
	kill(echo_pid, SIGSTOP);
	int64_t t0 = th_ms();
	int code = gk_ipc_call(c, &gpukmm__echo__descriptor, "Echo", &r.base, &m, 700, &e);
	int64_t took = th_ms() - t0;
	cr_assert_eq(code, GK_DEADLINE_EXCEEDED, "%s", gk_code_name(code));
	cr_assert_geq(took, 650);
	cr_assert_lt(took, 2000);
	/* a new client cannot even finish the handshake: nobody reachable. It is
	 * closed only after the server runs again: nng 1.5.2's close can wait for
	 * a handshake in progress (nng#1543), which a stopped server never ends.
	 * Even then either close can hang inside nng (seen on the first client,
	 * 1 run in a few dozen under load): each is bounded and left behind (a
	 * close left behind holds its client: not reported as a leak) */
	gk_ipc_client *c2;
	cr_assert_eq(gk_ipc_client_open(&c2, url, NULL, &e), 0);
	code = gk_ipc_call(c2, &gpukmm__echo__descriptor, "Echo", &r.base, &m, 500, &e);
	kill(echo_pid, SIGCONT);
	cr_assert_eq(code, GK_UNAVAILABLE, "%s", gk_code_name(code));
	th_bounded((void (*)(void *))gk_ipc_client_close, c2, "second client close");
	th_bounded((void (*)(void *))gk_ipc_client_close, c, "first client close");
}

Test(multiproc, thousand_concurrent_calls_from_eight_processes)
{
	pid_t kids[8];
	for (int i = 0; i < 8; i++) {
		char tag[16];
		snprintf(tag, sizeof(tag), "p%d", i);
		char *argv[] = { "ipc_load", url, "125", tag, NULL };
		kids[i] = spawn("GPUKMM_TBIN", "ipc_load", argv);
	}
	int ok = 0, last = 0;
	for (int i = 0; i < 8; i++) {
		int st;
		cr_assert_eq(waitpid(kids[i], &st, 0), kids[i]);
		ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			last = st;
	}
	cr_assert_eq(ok, 8, "%d of 8 load processes saw every answer right (wait status %#x)", ok, last);
	Gpukmm__EchoReply *r;
	cr_assert_eq(call_echo(url, 2000, &r), 0);
	cr_assert_eq(r->count, 1000, "Add ran %llu times, not exactly 1000", (unsigned long long)r->count);
	gk_ipc_free(&r->base);
}

/* A raw REQ socket, never closed: nng_close of a REQ socket whose request is
 * still pending can hang inside nng 1.5.2 (nng#1543: its reaper waits
 * forever), and the stuck reaper then hangs every later close in the process,
 * the healthy client's included. What these tests check is the server, not
 * the raw client's close, so the raw socket lives until the test process ends
 * (nng registers no exit handler).
 * The server may re-create its listener at any time (lib/ipc's guard against
 * nng#1518, on a probe that timed out, e.g. on a loaded machine): that closes
 * every pipe, and a REQ socket sends again once it has redialled. So this one
 * redials within 100 ms like any client, and waits for a pipe and for an
 * answer with a deadline: a failure, not a hang. */
static nng_socket raw_open(void)
{
	nng_socket s;
	cr_assert_eq(nng_req0_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_RECONNMINT, 10);
	nng_socket_set_ms(s, NNG_OPT_RECONNMAXT, 100);
	cr_assert_eq(nng_dial(s, url, NULL, 0), 0);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 10000);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000);
	nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, 60000);
	return s;
}

/* A peer that announces a frame bigger than the server's NNG_OPT_RECVMAXSZ
 * (4 MiB), spoken on a plain AF_UNIX connection in nng's ipc wire format (an
 * 8-byte SP header each way, then per message a type byte 1 and a 64-bit
 * big-endian length): the server must hang up on the length alone, without
 * waiting for (or allocating) the 5 MiB. Returns 0 when it did within 10 s.
 * (An nng REQ socket would resend the request on its next pipe, and closing
 * it with that request pending is nng#1543.) */
static int oversized_frame_dropped(void)
{
	int fd = th_ipc_connect(url);
	const uint8_t hello[8] = { 0, 'S', 'P', 0, 0, 0x30 /* req0 */, 0, 0 };
	cr_assert_eq(send(fd, hello, sizeof(hello), MSG_NOSIGNAL), (ssize_t)sizeof(hello));
	uint8_t theirs[8];
	size_t got = 0;
	struct pollfd pf = { fd, POLLIN, 0 };
	int64_t end = th_ms() + 10000;
#define LEFT_MS() (int)(end > th_ms() ? end - th_ms() : 0)
	while (got < sizeof(theirs) && poll(&pf, 1, LEFT_MS()) > 0) {
		ssize_t r = recv(fd, theirs + got, sizeof(theirs) - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	cr_assert_eq(got, sizeof(theirs), "the server's SP header: %zu bytes", got);
	cr_assert(theirs[1] == 'S' && theirs[2] == 'P' && theirs[5] == 0x31 /* rep0 */);
	uint8_t head[9] = { 1 };
	uint64_t big = 5u << 20;
	for (int i = 0; i < 8; i++)
		head[1 + i] = (uint8_t)(big >> (56 - 8 * i));
	cr_assert_eq(send(fd, head, sizeof(head), MSG_NOSIGNAL), (ssize_t)sizeof(head));
	int rc = -1;
	while (poll(&pf, 1, LEFT_MS()) > 0) {
		uint8_t c;
		ssize_t r = recv(fd, &c, 1, 0);
		if (r == 0 || (r < 0 && errno == ECONNRESET)) {
			rc = 0; /* hung up */
			break;
		}
		cr_assert_geq(r, 0, "recv: %s", strerror(errno));
		cr_assert_fail("the server answered an oversized frame");
	}
#undef LEFT_MS
	close(fd);
	return rc;
}

/* sends len bytes of frame; returns the reply code, or -1 when no reply came */
static int raw(nng_socket s, const void *frame, size_t len)
{
	nng_msg *m;
	cr_assert_eq(nng_msg_alloc(&m, len), 0);
	if (len)
		memcpy(nng_msg_body(m), frame, len);
	int rv = nng_sendmsg(s, m, 0);
	cr_assert_eq(rv, 0, "send: %s (no pipe to the server)", nng_strerror(rv));
	nng_msg *rep;
	if (nng_recvmsg(s, &rep, 0) != 0)
		return -1;
	gk_reply_view v;
	int code = gk_frame_reply_parse(nng_msg_body(rep), nng_msg_len(rep), &v) == 0 ? v.code : -2;
	nng_msg_free(rep);
	return code;
}

Test(multiproc, garbage_truncated_and_oversized_frames)
{
	nng_socket s = raw_open();
	uint8_t junk[1000];
	uint32_t x = 12345;
	for (int round = 0; round < 50; round++) {
		for (size_t i = 0; i < sizeof(junk); i++) {
			x = x * 1103515245u + 12345u;
			junk[i] = (uint8_t)(x >> 16);
		}
		int code = raw(s, junk, (size_t)(x % sizeof(junk)));
		cr_assert(code == GK_INVALID_ARGUMENT || code == GK_UNIMPLEMENTED, "round %d: %d", round, code);
	}
	cr_assert_eq(raw(s, "", 0), GK_UNIMPLEMENTED, "an empty envelope names no service");
	/* a valid request cut short at every length */
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	r.text = "truncate me";
	uint8_t buf[256];
	size_t n = gk_frame_env_write(buf, "gpukmm.Echo", "Echo", 1, 2, 0, &r.base);
	size_t refused = 0;
	for (size_t len = 1; len < n; len++) {
		int code = raw(s, buf, len);
		/* a cut on a field boundary is a valid (shorter) message */
		cr_assert(code == GK_OK || code == GK_INVALID_ARGUMENT || code == GK_UNIMPLEMENTED,
			  "len %zu: %d", len, code);
		refused += code != GK_OK;
	}
	cr_assert_gt(refused, n / 2);
	cr_assert_eq(raw(s, buf, n), GK_OK);
	/* bigger than the server's NNG_OPT_RECVMAXSZ (4 MiB): the connection is
	 * dropped, nothing is answered, the server lives on */
	cr_assert_eq(oversized_frame_dropped(), 0, "no hang-up within 10 s on a 5 MiB frame");
	cr_assert_eq(call_echo(url, 3000, NULL), 0, "the server must keep serving");
	cr_assert_eq(kill(echo_pid, 0), 0, "the server must be alive");
}

Test(multiproc, sigterm_stops_the_service_cleanly)
{
	cr_assert_eq(kill(echo_pid, SIGTERM), 0);
	int st;
	cr_assert_eq(waitpid(echo_pid, &st, 0), echo_pid);
	echo_pid = 0;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
}
