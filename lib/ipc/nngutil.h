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
} gk_ipc_cfg;

void gk_ipc_cfg_from(const gk_ipc_opts *o, gk_ipc_cfg *c);
/* NNG_OPT_RECVMAXSZ and reconnect times on a socket. */
int gk_ipc_sock_setup(nng_socket s, const gk_ipc_cfg *c, gk_err *err);
/* Listen (ipc: file mode applied) and write the resolved URL (tcp port 0 ->
 * the bound port) into url_out (cap bytes). */
int gk_ipc_listen(nng_socket s, const char *url, const gk_ipc_cfg *c, char *url_out, size_t cap,
		  gk_err *err);
/* Non-blocking dial: the connection is made (and remade) in the background. */
int gk_ipc_dial(nng_socket s, const char *url, gk_err *err);
int gk_ipc_is_ipc_url(const char *url);

/* eventfd helpers: readable while a wakeup is pending. */
int gk_evfd_new(gk_err *err);
void gk_evfd_signal(int fd);
void gk_evfd_drain(int fd);

#endif
