/* lib/ipc teardown under stress: close() while calls and connections are in
 * flight, many times in one process. A callback that still runs after close
 * returned (use-after-free, destroyed mutex) shows under ASan; a lost or
 * doubled completion shows in the counts; a hang hits the suite timeout. */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <stdatomic.h>

#include "../../services/echo/echo.h"
#include "harness.h"
#include "rpc.pb-c.h"

#define ROUNDS 300
#define CALLS 8

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

/* Close at every point of a call's life: before the send went out, while the
 * reply travels, while completions wait in the queue, halfway dispatched. */
Test(close_stress, client_close_with_async_calls_in_flight, .init = setup, .fini = teardown)
{
	Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
	r.text = "x";
	int ok = 0, cancelled = 0;
	for (int round = 0; round < ROUNDS; round++) {
		gk_ipc_client *c;
		gk_err e;
		cr_assert_eq(gk_ipc_client_open(&c, srv.url, NULL, &e), 0, "%s", e.msg);
		struct tally t = { 0 };
		for (int i = 0; i < CALLS; i++)
			cr_assert_eq(gk_ipc_call_async(c, &gpukmm__echo__descriptor, "Echo", &r.base, 5000,
						       on_done, &t, &e), 0, "%s", e.msg);
		/* round % 4: 0 close at once; 1..3 wait for up to that many ms of
		 * replies first, dispatching some of them */
		int64_t end = th_ms() + round % 4;
		struct pollfd p = { gk_ipc_client_fd(c), POLLIN, 0 };
		while (round % 4 && th_ms() < end && t.n < CALLS)
			if (poll(&p, 1, 1) > 0 && round % 2)
				gk_ipc_client_dispatch(c);
		gk_ipc_client_close(c);
		cr_assert_eq(t.n, CALLS, "round %d: %d of %d calls completed", round, t.n, CALLS);
		cr_assert_eq(t.other, 0, "round %d: %d calls failed otherwise", round, t.other);
		ok += t.ok;
		cancelled += t.cancelled;
	}
	cr_log_info("%d rounds: %d calls answered, %d cancelled by close", ROUNDS, ok, cancelled);
	cr_assert_gt(cancelled, 0, "no close ever hit a call in flight: the test tests nothing");
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
