/* sd_notify(3) by hand: a datagram to $NOTIFY_SOCKET, no libsystemd.
 * Sent only from the long-lived supervisor (systemd#2737: messages from
 * short-lived processes get misattributed). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sup.h"

int gk_sup_notify_open(const char *path, gk_err *err)
{
	if (!path || !*path)
		return -1;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path)) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "NOTIFY_SOCKET: '%s' is not a socket path", path);
		return -1;
	}
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';   /* abstract namespace */
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		gk_err_set(err, GK_INTERNAL, "NOTIFY_SOCKET: socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0) {
		gk_err_set(err, GK_UNAVAILABLE, "NOTIFY_SOCKET %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int gk_sup_notify_send(int fd, const char *msg)
{
	if (fd < 0)
		return 0;
	ssize_t n;
	do
		n = send(fd, msg, strlen(msg), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -1 : 0;
}

int64_t gk_sup_watchdog_ms(const char *usec, const char *wpid, pid_t self)
{
	if (!usec || !*usec)
		return 0;
	if (wpid && *wpid) {
		char *end;
		long p = strtol(wpid, &end, 10);
		if (*end || p != (long)self)
			return 0;   /* meant for another process */
	}
	char *end;
	errno = 0;
	unsigned long long us = strtoull(usec, &end, 10);
	if (*end || errno || us == 0)
		return 0;
	int64_t half = (int64_t)(us / 2000);
	return half > 0 ? half : 1;
}
