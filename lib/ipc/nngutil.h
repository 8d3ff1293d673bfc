/* gpukmm — lib/ipc internals that touch nng (only lib/ipc includes this). */
#ifndef GPUKMM_IPC_NNGUTIL_H
#define GPUKMM_IPC_NNGUTIL_H

#include <nng/nng.h>
#include <nng/protocol/pubsub0/pub.h>
#include <nng/protocol/pubsub0/sub.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/transport/ipc/ipc.h>

#include "internal.h"

typedef struct gk_ipc_cfg {
	size_t recv_max;
	int reconnect_min_ms, reconnect_max_ms;
	int workers;
	size_t unpack_max;
	int socket_mode;
	int probe_ms;            /* listener self-probe interval, <0 = off */
} gk_ipc_cfg;

void gk_ipc_cfg_from(const gk_ipc_opts *o, gk_ipc_cfg *c);
/* NNG_OPT_RECVMAXSZ and reconnect times on a socket. */
int gk_ipc_sock_setup(nng_socket s, const gk_ipc_cfg *c, gk_err *err);
/* Listen (ipc: file mode applied) and write the resolved URL (tcp port 0 ->
 * the bound port) into url_out (cap bytes). */
int gk_ipc_listen(nng_socket s, const char *url, const gk_ipc_cfg *c, char *url_out, size_t cap,
		  nng_listener *lst, gk_err *err);
/* The dialer guard (dialer.c): a non-blocking dial (the connection is made
 * and remade in the background) plus the socket's pipe count; the owner's
 * thread calls gk_ipc_dialer_service now and then (before calls, on
 * completions, on a timer) and it re-creates a dialer that has had no pipe for
 * 3 x reconnect_max_ms (doubling per outage, up to a minute): nng 1.5.2 gives
 * a dialer up for good when a peer cuts the handshake. It owns the socket's
 * ADD_POST/REM_POST pipe notifications. Free it after closing the socket. */
typedef struct gk_ipc_dialer gk_ipc_dialer;
int gk_ipc_dialer_open(gk_ipc_dialer **out, nng_socket s, const char *url, const gk_ipc_cfg *c,
		       gk_err *err);
int gk_ipc_dialer_pipes(const gk_ipc_dialer *g);
/* Returns 1 when it re-created the dialer. NULL is fine. */
int gk_ipc_dialer_service(gk_ipc_dialer *g);
uint64_t gk_ipc_dialer_redials(const gk_ipc_dialer *g);
void gk_ipc_dialer_free(gk_ipc_dialer *g);
int gk_ipc_is_ipc_url(const char *url);

/* The listener guard (guard.c): nng 1.5.2 bug #1518 (fixed upstream in 1.6 by
 * PR #1519): a peer that disconnects while the SP handshake of an accepted ipc
 * connection is under way completes the listener's accept with NNG_ECLOSED,
 * and the core listener takes that as "closed" and never accepts again. Every
 * ipc:// listener is therefore probed: on a timer (nng's, no thread of ours) a
 * raw AF_UNIX connection is made and must be handed to the socket as a pipe
 * within a timeout of the server's SP header coming back (gk_probe_decide,
 * internal.h); a listener that does not is "stuck". The owner's
 * thread then re-creates it (gk_ipc_guard_service), on the same nng socket:
 * contexts and queued requests stay; the pipes of the old listener are closed
 * and REQ peers resend on their new pipe (calls are idempotent or deduped). */
typedef struct gk_ipc_guard gk_ipc_guard;
/* Listens on url (like gk_ipc_listen) and, for ipc:// with probing on, starts
 * the probe. efd (may be -1) is signalled when the listener is found stuck. */
int gk_ipc_guard_open(gk_ipc_guard **out, nng_socket s, const char *url, const gk_ipc_cfg *c,
		      int efd, char *url_out, size_t cap, gk_err *err);
/* Owner's thread: re-creates a stuck listener; returns 1 when it did. */
int gk_ipc_guard_service(gk_ipc_guard *g);
/* Probe now (e.g. after a peer died), not at the next interval. */
void gk_ipc_guard_kick(gk_ipc_guard *g);
uint64_t gk_ipc_guard_relistens(const gk_ipc_guard *g);
/* Stops probing; call before closing the socket. NULL is fine. */
void gk_ipc_guard_close(gk_ipc_guard *g);

/* eventfd helpers: readable while a wakeup is pending. */
int gk_evfd_new(gk_err *err);
void gk_evfd_signal(int fd);
void gk_evfd_drain(int fd);

#endif
