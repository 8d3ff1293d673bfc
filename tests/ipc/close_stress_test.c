/* lib/ipc teardown under stress: close() while calls and connections are in
 * flight, many times in one process. A callback that still runs after close
 * returned (use-after-free, destroyed mutex) shows under ASan; a lost or
 * doubled completion shows in the counts; a hang hits the suite timeout. */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <stdatomic.h>

#include "harness.h"
#include "echo.pb-c.h"

#define ROUNDS 300
#define CALLS 8

TestSuite(close_stress, .timeout = 50);

struct tally { int n, ok, cancelled, other; };

static void on_done(void *user, int code, ProtobufCMessage *reply, const char *msg)
{
	struct tally *t = user;
	t->n++;
	if (code == GK_OK)
		t->ok++;
	else if (code == GK_CANCELLED)
		t->cancelled++;
	else
		t->other++;
	gk_ipc_free(reply);
}

/* Close while calls wait for their replies (the requests reached a peer that
 * reads them and never answers, so close() always finds them in flight) or
 * are still being sent (close at once): every call completes exactly once,
 * as CANCELLED, and nothing runs after close returned (ASan).
 * The peer deliberately never answers: closing a REQ socket while a reply is
 * arriving sometimes hangs nng_close() inside nng 1.5.2 itself (its reaper
 * waits on a pipe's aio task forever, nng#1543); that is not ours to test. */
static void *silent_peer(void *arg)
{
	nng_socket *s = arg;
	for (;;) {
		nng_msg *m;
		if (nng_recvmsg(*s, &m, 0) != 0)
			return NULL;
		nng_msg_free(m);
	}
}

Test(close_stress, client_close_with_async_calls_in_flight)
{
	char dir[64], url[128];
	th_tmpdir(dir, sizeof(dir));
	snprintf(url, sizeof(url), "ipc://%s/silent.sock", dir);
	nng_socket rep;
	cr_assert_eq(nng_rep0_open_raw(&rep), 0);
	cr_assert_eq(nng_listen(rep, url, NULL, 0), 0);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, silent_peer, &rep), 0);
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	r.text = "x";
	for (int round = 0; round < ROUNDS; round++) {
		gk_ipc_client *c;
		gk_err e;
		cr_assert_eq(gk_ipc_client_open(&c, url, NULL, &e), 0, "%s", e.msg);
		struct tally t = { 0 };
		for (int i = 0; i < CALLS; i++)
			cr_assert_eq(gk_ipc_call_async(c, &gpukmm__echo__descriptor, "Echo", &r.base, 5000,
						       on_done, &t, &e), 0, "%s", e.msg);
		/* round % 4: 0 close at once; 1..3 let that many ms pass first */
		int64_t end = th_ms() + round % 4;
		struct pollfd p = { gk_ipc_client_fd(c), POLLIN, 0 };
		while (th_ms() < end)
			if (poll(&p, 1, 1) > 0)
				gk_ipc_client_dispatch(c);
		cr_assert_eq(t.n, 0, "round %d: a call completed before close", round);
		gk_ipc_client_close(c);
		cr_assert_eq(t.n, CALLS, "round %d: %d of %d calls completed", round, t.n, CALLS);
		cr_assert_eq(t.cancelled, CALLS, "round %d: %d calls not CANCELLED", round, CALLS - t.cancelled);
	}
	nng_close(rep);
	pthread_join(th, NULL);
	th_rmdir(dir);
}

/* Closing a server (and its listener guard) while clients keep connecting:
 * pipe callbacks of the closing socket must not run on a freed guard. */
static atomic_int dialing;
static char dial_url[160];
static void *dialer(void *arg)
{
	while (atomic_load(&dialing)) {
		nng_socket s;
		if (nng_req0_open(&s) != 0)
			continue;
		nng_dial(s, dial_url, NULL, NNG_FLAG_NONBLOCK);
		nng_close(s);
	}
	return NULL;
}

Test(close_stress, server_close_while_clients_connect)
{
	char dir[64];
	th_tmpdir(dir, sizeof(dir));
	snprintf(dial_url, sizeof(dial_url), "ipc://%s/s.sock", dir);
	atomic_store(&dialing, 1);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, dialer, NULL), 0);
	gk_ipc_opts o = { .probe_ms = 1 };
	for (int round = 0; round < ROUNDS / 3; round++) {
		gk_ipc_server *s;
		gk_err e;
		cr_assert_eq(gk_ipc_server_open(&s, dial_url, &o, &e), 0, "round %d: %s", round, e.msg);
		struct pollfd p = { gk_ipc_server_fd(s), POLLIN, 0 };
		if (poll(&p, 1, round % 3) > 0)
			gk_ipc_server_dispatch(s);
		gk_ipc_server_close(s);
	}
	atomic_store(&dialing, 0);
	pthread_join(th, NULL);
	th_rmdir(dir);
}
