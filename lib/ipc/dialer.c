/* gpukmm — the dialer guard: re-creates a dialer that nng 1.5.2 gave up on.
 *
 * nng 1.5.2's dialer ends a connection attempt whose SP handshake the peer
 * cut (it accepted the connection, then closed it before reading our header)
 * with NNG_ECLOSED, and takes NNG_ECLOSED for "this dialer was closed": no
 * further attempt, ever, while the socket stays open. A server killed (or
 * restarting) just after the kernel queued our connect does exactly that, so a
 * client of a crashed service could stay disconnected for good: modmgr never
 * got its snapshot from a restarted watcher in a test. It is the dialer-side
 * twin of the listener bug the guard (guard.c) handles, nng#1518;
 * tests/ipc/dialer_test.c reproduces it with a raw socket.
 *
 * The guard counts the socket's pipes (pipe notifications, nng's threads) and,
 * when the owner asks (gk_ipc_dialer_service, the owner's thread: closing a
 * dialer from an nng callback could deadlock on nng's own threads), replaces a
 * dialer whose socket has had no pipe for longer than the limit. A healthy
 * dialer retries every reconnect_max_ms at most, so the limit is a few of
 * those; while the server stays away the limit doubles up to a minute, so
 * a long outage costs a re-creation a minute, not one every few seconds. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/log.h"
#include "nngutil.h"

#define MAX_LIMIT_MS 60000

struct gk_ipc_dialer {
	nng_socket sock;
	nng_dialer d;
	char url[256];
	int64_t base_ms;               /* the first limit of an outage */
	atomic_int pipes;
	atomic_int_fast64_t lost_at;   /* when the pipe count last fell to 0 (or open) */
	atomic_int_fast64_t limit_ms;  /* no pipe that long → re-create; doubles per outage */
	pthread_mutex_t mu;            /* the dialer swap */
	atomic_uint_fast64_t redials;
};

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	gk_ipc_dialer *g = arg;
	if (ev == NNG_PIPE_EV_ADD_POST) {
		atomic_fetch_add(&g->pipes, 1);
		atomic_store(&g->limit_ms, g->base_ms); /* connected: the next outage starts over */
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		if (atomic_fetch_sub(&g->pipes, 1) == 1)
			atomic_store(&g->lost_at, gk_mono_ms());
	}
}

static int dial(gk_ipc_dialer *g, gk_err *err)
{
	int rv = nng_dial(g->sock, g->url, &g->d, NNG_FLAG_NONBLOCK);
	if (rv != 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: dial %s: %s", g->url, nng_strerror(rv));
	return 0;
}

int gk_ipc_dialer_open(gk_ipc_dialer **out, nng_socket s, const char *url, const gk_ipc_cfg *c,
		       gk_err *err)
{
	*out = NULL;
	if (strlen(url) >= sizeof(((gk_ipc_dialer *)0)->url))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: dial: address too long");
	gk_ipc_dialer *g = calloc(1, sizeof(*g));
	if (!g)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	g->sock = s;
	snprintf(g->url, sizeof(g->url), "%s", url);
	g->base_ms = 3 * (int64_t)c->reconnect_max_ms;
	atomic_init(&g->pipes, 0);
	atomic_init(&g->lost_at, gk_mono_ms());
	atomic_init(&g->limit_ms, g->base_ms);
	atomic_init(&g->redials, 0);
	pthread_mutex_init(&g->mu, NULL);
	nng_pipe_notify(s, NNG_PIPE_EV_ADD_POST, pipe_cb, g);
	nng_pipe_notify(s, NNG_PIPE_EV_REM_POST, pipe_cb, g);
	int code = dial(g, err);
	if (code) {
		nng_pipe_notify(s, NNG_PIPE_EV_ADD_POST, NULL, NULL);
		nng_pipe_notify(s, NNG_PIPE_EV_REM_POST, NULL, NULL);
		pthread_mutex_destroy(&g->mu);
		free(g);
		return code;
	}
	*out = g;
	return 0;
}

int gk_ipc_dialer_pipes(const gk_ipc_dialer *g)
{
	return atomic_load(&((gk_ipc_dialer *)g)->pipes);
}

int gk_ipc_dialer_service(gk_ipc_dialer *g)
{
	/* every call passes here: connected is two atomic loads, nothing else */
	if (!g || atomic_load(&g->pipes) > 0)
		return 0;
	int64_t now = gk_mono_ms();
	int64_t waited = now - atomic_load(&g->lost_at), limit = atomic_load(&g->limit_ms);
	if (waited < limit)
		return 0;
	pthread_mutex_lock(&g->mu); /* one swap at a time (sync calls may come from any thread) */
	if (atomic_load(&g->pipes) > 0 || now - atomic_load(&g->lost_at) < limit) {
		pthread_mutex_unlock(&g->mu);
		return 0; /* connected, or re-created by another thread meanwhile */
	}
	nng_dialer_close(g->d);
	gk_err e;
	int failed = dial(g, &e);
	atomic_store(&g->lost_at, now);
	atomic_store(&g->limit_ms, limit * 2 > MAX_LIMIT_MS ? MAX_LIMIT_MS : limit * 2);
	atomic_fetch_add(&g->redials, 1);
	pthread_mutex_unlock(&g->mu);
	if (failed)
		GK_ERROR("%s (the next service retries)", e.msg);
	else if (limit == g->base_ms)
		GK_INFO("ipc: %s: no connection for %lld ms: dialing anew (an nng 1.5.2 dialer can stop "
			"retrying after a peer died mid-handshake)", g->url, (long long)waited);
	else
		GK_DEBUG("ipc: %s: still no connection: dialing anew", g->url);
	return 1;
}

uint64_t gk_ipc_dialer_redials(const gk_ipc_dialer *g)
{
	return g ? atomic_load(&((gk_ipc_dialer *)g)->redials) : 0;
}

void gk_ipc_dialer_free(gk_ipc_dialer *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	free(g);
}
