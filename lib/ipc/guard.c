/* gpukmm — the listener guard: finds an ipc:// listener that stopped
 * accepting (nng 1.5.2 bug #1518, see nngutil.h) and re-creates it.
 *
 * What breaks in 1.5.2 is the core listener, not the transport: the ipc
 * endpoint keeps accepting connections and even completes their handshakes,
 * but the pipes are never handed to the socket. So the probe checks exactly
 * that hand-over: it connects a raw AF_UNIX socket, sends the SP header of the
 * socket's peer protocol (a complete, ordinary handshake), reads the server's
 * SP header back and waits for the socket's NNG_PIPE_EV_ADD_PRE event (any
 * pipe added since the probe began proves the listener alive). The verdict is
 * gk_probe_decide's: no pipe within the timeout after the server answered, or
 * no answer at all within several timeouts, or no listener at the path, means
 * stuck: the flag is set and the owner's eventfd signalled. A re-creation
 * closes every pipe of the old listener, so a slow machine must not pass for a
 * stuck listener: the clock starts at the answer. The re-creation runs on the
 * owner's thread (closing a listener from an nng callback could deadlock on
 * nng's own threads). The probe runs on an nng sleep aio: no thread of ours,
 * only non-blocking syscalls there. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "gpukmm/log.h"
#include "nngutil.h"

#define SP_HEADER 8 /* 0 'S' 'P' 0, protocol (16 bits BE), 0 0 */
#define PENDING_POLL_MS 10
#define PROBE_TIMEOUT_MS 1000

struct gk_ipc_guard {
	nng_socket sock;
	nng_listener lst;
	gk_ipc_cfg cfg;
	char url[256];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int efd;
	uint16_t peer_proto;
	int timeout_ms;
	nng_aio *timer;            /* NULL when not probing (tcp://, probe off) */
	pthread_mutex_t mu;        /* everything below */
	bool closing, kicked;
	int fd;                    /* probe connection, -1 when none */
	uint64_t adds0;            /* pipe adds when the probe began */
	int64_t started, next_ms;
	int64_t answered;          /* when the server's SP header came back, -1 */
	size_t heard;              /* bytes of it so far */
	unsigned gen, probe_gen;   /* gen++ on every re-creation */
	atomic_int stuck;
	atomic_uint_fast64_t relistens;
	atomic_uint_fast64_t adds;  /* NNG_PIPE_EV_ADD_PRE events */
};

static void guard_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	gk_ipc_guard *g = arg;
	atomic_fetch_add(&g->adds, 1);
}

static void probe_end(gk_ipc_guard *g)
{
	if (g->fd >= 0)
		close(g->fd);
	g->fd = -1;
	g->next_ms = gk_mono_ms() + g->cfg.probe_ms;
}

static void verdict_stuck(gk_ipc_guard *g, const char *why)
{
	if (g->probe_gen != g->gen)
		return; /* probed a listener that has been replaced meanwhile */
	if (atomic_exchange(&g->stuck, 1) == 0) {
		GK_WARN("ipc: %s: listener not accepting (%s): re-creating it (nng#1518)", g->url, why);
		if (g->efd >= 0)
			gk_evfd_signal(g->efd);
	}
}

static void probe_start(gk_ipc_guard *g)
{
	g->kicked = false;
	g->probe_gen = g->gen;
	g->adds0 = atomic_load(&g->adds);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		g->next_ms = gk_mono_ms() + g->cfg.probe_ms; /* out of fds: no verdict */
		return;
	}
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, g->path, sizeof(a.sun_path));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
		uint8_t h[SP_HEADER] = { 0, 'S', 'P', 0, (uint8_t)(g->peer_proto >> 8),
					 (uint8_t)g->peer_proto, 0, 0 };
		ssize_t w = write(fd, h, sizeof(h)); /* fits an empty socket buffer */
		(void)w;
		g->fd = fd;
		g->started = gk_mono_ms();
		g->answered = -1;
		g->heard = 0;
		return;
	}
	int e = errno;
	close(fd);
	g->next_ms = gk_mono_ms() + g->cfg.probe_ms;
	/* ENOENT: the socket file is gone; ECONNREFUSED: nobody listens on it;
	 * EAGAIN: the backlog is full, i.e. nobody accepts. */
	if (e == ENOENT || e == ECONNREFUSED || e == EAGAIN)
		verdict_stuck(g, strerror(e));
}

enum gk_probe_verdict gk_probe_decide(bool piped, int64_t started, int64_t answered, int64_t now,
				      int timeout_ms)
{
	if (piped)
		return GK_PROBE_ALIVE;
	if (answered >= 0)
		return now - answered >= timeout_ms ? GK_PROBE_NOT_HANDED_OVER : GK_PROBE_WAIT;
	return now - started >= (int64_t)GK_PROBE_HANDSHAKE_WAITS * timeout_ms ? GK_PROBE_NO_HANDSHAKE
									       : GK_PROBE_WAIT;
}

static void probe_check(gk_ipc_guard *g)
{
	int64_t now = gk_mono_ms();
	if (g->answered < 0) {
		uint8_t h[SP_HEADER];
		ssize_t r = recv(g->fd, h, SP_HEADER - g->heard, MSG_DONTWAIT);
		if (r > 0 && (g->heard += (size_t)r) == SP_HEADER)
			g->answered = now;
		/* (a hang-up or an error leaves it unanswered: the handshake clock) */
	}
	switch (gk_probe_decide(atomic_load(&g->adds) != g->adds0, g->started, g->answered, now,
				g->timeout_ms)) {
	case GK_PROBE_WAIT:
		return;
	case GK_PROBE_ALIVE:
		probe_end(g); /* the socket got a pipe: the listener works */
		return;
	case GK_PROBE_NOT_HANDED_OVER:
		probe_end(g);
		verdict_stuck(g, "connections are not handed to the socket");
		return;
	case GK_PROBE_NO_HANDSHAKE:
		probe_end(g);
		verdict_stuck(g, "no SP handshake from the listener");
		return;
	}
}

static void guard_cb(void *arg)
{
	gk_ipc_guard *g = arg;
	pthread_mutex_lock(&g->mu);
	if (g->closing) {
		pthread_mutex_unlock(&g->mu);
		return;
	}
	int64_t now = gk_mono_ms();
	if (g->fd >= 0)
		probe_check(g);
	else if (!atomic_load(&g->stuck) && (g->kicked || now >= g->next_ms))
		probe_start(g);
	int64_t wait = g->fd >= 0 ? PENDING_POLL_MS : g->next_ms - gk_mono_ms();
	if (wait < PENDING_POLL_MS)
		wait = PENDING_POLL_MS;
	nng_sleep_aio((nng_duration)wait, g->timer);
	pthread_mutex_unlock(&g->mu);
}

int gk_ipc_guard_open(gk_ipc_guard **out, nng_socket s, const char *url, const gk_ipc_cfg *c,
		      int efd, char *url_out, size_t cap, gk_err *err)
{
	*out = NULL;
	gk_ipc_guard *g = calloc(1, sizeof(*g));
	if (!g)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	g->sock = s;
	g->cfg = *c;
	g->efd = efd;
	g->fd = -1;
	snprintf(g->url, sizeof(g->url), "%s", url);
	pthread_mutex_init(&g->mu, NULL);
	atomic_init(&g->stuck, 0);
	atomic_init(&g->relistens, 0);
	atomic_init(&g->adds, 0);
	if (gk_ipc_is_ipc_url(url) && c->probe_ms > 0)
		nng_pipe_notify(s, NNG_PIPE_EV_ADD_PRE, guard_pipe_cb, g);
	int code = gk_ipc_listen(s, url, c, url_out, cap, &g->lst, err);
	if (code) {
		pthread_mutex_destroy(&g->mu);
		free(g);
		return code;
	}
	int peer = 0;
	const char *p = url + 6;
	if (gk_ipc_is_ipc_url(url) && c->probe_ms > 0 && strlen(p) < sizeof(g->path) &&
	    nng_socket_get_int(s, NNG_OPT_PEER, &peer) == 0) {
		memcpy(g->path, p, strlen(p) + 1);
		g->peer_proto = (uint16_t)peer;
		/* a healthy nng hands a pipe over within milliseconds of its
		 * answer; a false "stuck" costs every client a reconnect */
		g->timeout_ms = PROBE_TIMEOUT_MS;
		g->next_ms = gk_mono_ms() + c->probe_ms;
		if (nng_aio_alloc(&g->timer, guard_cb, g) != 0) {
			g->timer = NULL; /* no probing, still a working listener */
			GK_WARN("ipc: %s: no listener probe (out of memory)", url);
		} else {
			nng_sleep_aio(c->probe_ms, g->timer);
		}
	}
	*out = g;
	return 0;
}

int gk_ipc_guard_service(gk_ipc_guard *g)
{
	if (!g || !atomic_load(&g->stuck))
		return 0;
	pthread_mutex_lock(&g->mu);
	g->gen++;
	probe_end(g);
	pthread_mutex_unlock(&g->mu);
	nng_listener_close(g->lst); /* resets its backlog; unlinks the path */
	char url[256];
	gk_err e;
	if (gk_ipc_listen(g->sock, g->url, &g->cfg, url, sizeof(url), &g->lst, &e) != 0) {
		GK_ERROR("ipc: re-creating the listener: %s (next probe retries)", e.msg);
		pthread_mutex_lock(&g->mu);
		g->next_ms = gk_mono_ms() + 100;
		atomic_store(&g->stuck, 0);
		pthread_mutex_unlock(&g->mu);
		return 0;
	}
	atomic_fetch_add(&g->relistens, 1);
	atomic_store(&g->stuck, 0);
	GK_INFO("ipc: %s: listener re-created", g->url);
	return 1;
}

void gk_ipc_guard_kick(gk_ipc_guard *g)
{
	if (!g || !g->timer)
		return;
	pthread_mutex_lock(&g->mu);
	g->kicked = true;
	pthread_mutex_unlock(&g->mu);
	nng_aio_cancel(g->timer); /* the callback runs now (NNG_ECANCELED) and probes */
}

uint64_t gk_ipc_guard_relistens(const gk_ipc_guard *g)
{
	return g ? atomic_load(&((gk_ipc_guard *)g)->relistens) : 0;
}

void gk_ipc_guard_close(gk_ipc_guard *g)
{
	if (!g)
		return;
	if (g->timer) {
		pthread_mutex_lock(&g->mu);
		g->closing = true;
		pthread_mutex_unlock(&g->mu);
		nng_aio_stop(g->timer);
		nng_aio_free(g->timer);
	}
	if (g->fd >= 0)
		close(g->fd);
	pthread_mutex_destroy(&g->mu);
	free(g);
}
