/* gpukmm — libmicrohttpd on a listening socket of our own (see
 * include/gpukmm/https.h): a certificate change starts a new daemon on the
 * same socket (new connections get the new certificate), and only once it
 * runs does the old daemon stop accepting; it is stopped once its connections
 * are done. A certificate the TLS library refuses leaves the old daemon as it
 * was. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpukmm/https.h"
#include "gpukmm/log.h"

int gk_httpd_listen(gk_httpd *h, const char *addr, const char *flag, gk_err *err)
{
	char host[256] = "", port[16] = "";
	const char *colon = strrchr(addr, ':');
	if (!colon || strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof(port) ||
	    (size_t)(colon - addr) >= sizeof(host))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s %s: want ADDR:PORT", flag, addr);
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	snprintf(port, sizeof(port), "%s", colon + 1);
	if (host[0] == '[') {
		size_t n = strlen(host);
		if (n < 2 || host[n - 1] != ']')
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s %s: bad IPv6 address", flag, addr);
		memmove(host, host + 1, n - 2);
		host[n - 2] = 0;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res = NULL;
	int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (gai)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s %s: %s", flag, addr, gai_strerror(gai));
	int fd = -1, e = 0;
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			e = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
			e = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0)
		return gk_err_set(err, GK_UNAVAILABLE, "%s %s: %s", flag, addr, strerror(e));
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	h->listen_fd = fd;
	return 0;
}

/* A daemon on its own duplicate of the listening socket: libmicrohttpd closes
 * the socket it was given when it fails to start (e.g. a certificate GnuTLS
 * refuses), and that must not be ours. *fd_out is the duplicate (the daemon's
 * until it is quiesced; then ours to close after MHD_stop_daemon). */
static struct MHD_Daemon *start(gk_httpd *h, const char *cert, const char *key, int *fd_out)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC;
	if (h->o.suspend_resume)
		flags |= MHD_ALLOW_SUSPEND_RESUME;
	unsigned limit = h->o.conn_limit ? h->o.conn_limit : 64, timeout = h->o.timeout_s ? h->o.timeout_s : 30;
	int fd = fcntl(h->listen_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	struct MHD_Daemon *d;
	if (h->tls)
		d = MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL, h->o.handler, h->o.cls, MHD_OPTION_LISTEN_SOCKET,
				     fd, MHD_OPTION_NOTIFY_COMPLETED, h->o.completed, h->o.cls,
				     MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT, timeout,
				     MHD_OPTION_HTTPS_MEM_CERT, cert, MHD_OPTION_HTTPS_MEM_KEY, key,
				     MHD_OPTION_HTTPS_PRIORITIES, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2",
				     MHD_OPTION_END);
	else
		d = MHD_start_daemon(flags, 0, NULL, NULL, h->o.handler, h->o.cls, MHD_OPTION_LISTEN_SOCKET, fd,
				     MHD_OPTION_NOTIFY_COMPLETED, h->o.completed, h->o.cls, MHD_OPTION_CONNECTION_LIMIT,
				     limit, MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_END);
	*fd_out = d ? fd : -1; /* on failure libmicrohttpd closed it */
	return d;
}

/* Stop a daemon: quiesced first (it then leaves its socket to us), so that
 * stopping never closes a socket another daemon may still use. */
static void stop(struct MHD_Daemon **d, int *fd)
{
	if (!*d)
		return;
	MHD_quiesce_daemon(*d); /* MHD_INVALID_SOCKET when it already was */
	MHD_stop_daemon(*d);
	*d = NULL;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int gk_httpd_start(gk_httpd *h, const char *cert, const char *key, gk_err *err)
{
	if (!(h->d = start(h, cert, key, &h->d_fd)))
		return gk_err_set(err, GK_INTERNAL, "cannot start the HTTP%s server", h->tls ? "S" : "");
	return 0;
}

int gk_httpd_swap(gk_httpd *h, const char *cert, const char *key, int64_t now_ms, gk_err *err)
{
	/* the new daemon first: while both run, either may accept a connection;
	 * if the TLS library refuses the pair, nothing changed */
	int nfd;
	struct MHD_Daemon *nd = start(h, cert, key, &nfd);
	if (!nd)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "the TLS library refused the certificate or key (an unsupported key type or curve?)");
	if (MHD_quiesce_daemon(h->d) == MHD_INVALID_SOCKET) {
		/* cannot happen (ITC is on, h->d was never quiesced): keep the old one */
		stop(&nd, &nfd);
		return gk_err_set(err, GK_INTERNAL, "cannot hand over the listening socket");
	}
	stop(&h->old, &h->old_fd); /* a second reload while one drains: finish the oldest now */
	h->old = h->d;
	h->old_fd = h->d_fd;
	h->d = nd;
	h->d_fd = nfd;
	h->old_deadline_ms = now_ms + (h->o.drain_ms > 0 ? h->o.drain_ms : 10000);
	h->reloads++;
	return 0;
}

void gk_httpd_reap(gk_httpd *h, int64_t now_ms)
{
	if (!h->old)
		return;
	const union MHD_DaemonInfo *i = MHD_get_daemon_info(h->old, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
	if ((i && i->num_connections == 0) || now_ms >= h->old_deadline_ms)
		stop(&h->old, &h->old_fd);
}

void gk_httpd_stop(gk_httpd *h)
{
	stop(&h->d, &h->d_fd);
	stop(&h->old, &h->old_fd);
	if (h->listen_fd >= 0) {
		close(h->listen_fd);
		h->listen_fd = -1;
	}
}
