/* gpukmm — socket options every lib/ipc socket gets (DESIGN §3 "limits on
 * every socket"), listen/dial, eventfd wakeups. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "nngutil.h"

void gk_ipc_cfg_from(const gk_ipc_opts *o, gk_ipc_cfg *c)
{
	gk_ipc_opts z = { 0 };
	if (!o)
		o = &z;
	c->recv_max = o->recv_max ? o->recv_max : GK_IPC_DEFAULT_RECV_MAX;
	c->reconnect_min_ms = o->reconnect_min_ms > 0 ? o->reconnect_min_ms : 10;
	c->reconnect_max_ms = o->reconnect_max_ms > 0 ? o->reconnect_max_ms : 1000;
	if (c->reconnect_max_ms < c->reconnect_min_ms)
		c->reconnect_max_ms = c->reconnect_min_ms;
	c->workers = o->workers > 0 ? o->workers : 8;
	if (c->workers > 1024)
		c->workers = 1024;
	c->unpack_max = o->unpack_max ? o->unpack_max : GK_IPC_DEFAULT_UNPACK_MAX;
	c->socket_mode = o->socket_mode ? o->socket_mode : 0600;
	c->probe_ms = o->probe_ms ? o->probe_ms : 1000;
}

int gk_ipc_sock_setup(nng_socket s, const gk_ipc_cfg *c, gk_err *err)
{
	int rv;
	if ((rv = nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, c->recv_max)) != 0 ||
	    (rv = nng_socket_set_ms(s, NNG_OPT_RECONNMINT, c->reconnect_min_ms)) != 0 ||
	    (rv = nng_socket_set_ms(s, NNG_OPT_RECONNMAXT, c->reconnect_max_ms)) != 0)
		return gk_err_set(err, GK_INTERNAL, "ipc: socket options: %s", nng_strerror(rv));
	return 0;
}

int gk_ipc_is_ipc_url(const char *url)
{
	return strncmp(url, "ipc://", 6) == 0;
}

int gk_ipc_listen(nng_socket s, const char *url, const gk_ipc_cfg *c, char *url_out, size_t cap,
		  nng_listener *lst, gk_err *err)
{
	nng_listener l;
	int rv = nng_listener_create(&l, s, url);
	if (rv != 0)
		return gk_err_set(err, rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP ? GK_INVALID_ARGUMENT
										 : GK_INTERNAL,
				  "ipc: listen %s: %s", url, nng_strerror(rv));
	if (gk_ipc_is_ipc_url(url) &&
	    (rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, c->socket_mode)) != 0) {
		nng_listener_close(l);
		return gk_err_set(err, GK_INTERNAL, "ipc: listen %s: permissions: %s", url, nng_strerror(rv));
	}
	if ((rv = nng_listener_start(l, 0)) != 0) {
		nng_listener_close(l);
		return gk_err_set(err, rv == NNG_EADDRINUSE ? GK_ALREADY_EXISTS : GK_UNAVAILABLE,
				  "ipc: listen %s: %s", url, nng_strerror(rv));
	}
	if (lst)
		*lst = l;
	snprintf(url_out, cap, "%s", url);
	int port = 0;
	size_t n = strlen(url);
	if (strncmp(url, "tcp://", 6) == 0 && n >= 2 && strcmp(url + n - 2, ":0") == 0 &&
	    nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port) == 0)
		snprintf(url_out, cap, "%.*s:%d", (int)(n - 2), url, port);
	return 0;
}

int gk_evfd_new(gk_err *err)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0)
		gk_err_set(err, GK_INTERNAL, "ipc: eventfd: %s", strerror(errno));
	return fd;
}

void gk_evfd_signal(int fd)
{
	uint64_t one = 1;
	ssize_t r = write(fd, &one, sizeof(one));
	(void)r; /* EAGAIN only when the counter is saturated: still readable */
}

void gk_evfd_drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));
	(void)r;
}

void gk_ipc_fini(void)
{
#if defined(__SANITIZE_ADDRESS__)
	/* LeakSanitizer's exit check must not meet nng's threads (gpukmm/svc.h) */
	nng_fini();
#endif
	/* Otherwise exit() ends nng's threads with the process: nng 1.5.2's nng_fini
	 * races its own threads now and then (one of them locks a mutex fini has
	 * destroyed: "panic: pthread_mutex_lock: Invalid argument", SIGABRT, an
	 * exit 134 for a clean stop, about once in 200 stops with Control calls in
	 * flight, tests/ipc/svc_test.c). */
}
