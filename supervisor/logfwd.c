/* Children's output: the supervisor owns each service's pipe (kept across
 * restarts, so nothing buffered is lost), always drains it, and forwards whole
 * lines with the service name. The sink is a bounded buffer in front of a
 * non-blocking fd: when the reader of our stdout is slow, lines are dropped and
 * counted — a child never blocks on a full pipe because of it (supervisord #240). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/log.h"
#include "sup.h"

void gk_sup_lines_feed(gk_sup_linebuf *lb, const char *data, size_t n, gk_sup_line_fn fn, void *user)
{
	while (n > 0) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;
		size_t room = sizeof(lb->buf) - lb->len;
		if (take >= room) {
			/* too long: emit what fits as a piece of its own */
			memcpy(lb->buf + lb->len, data, room);
			fn(user, lb->buf, sizeof(lb->buf));
			lb->len = 0;
			data += room;
			n -= room;
			continue;
		}
		memcpy(lb->buf + lb->len, data, take);
		lb->len += take;
		if (!nl)
			return;
		size_t l = lb->len;
		if (l > 0 && lb->buf[l - 1] == '\r')
			l--;
		fn(user, lb->buf, l);
		lb->len = 0;
		data += take + 1;
		n -= take + 1;
	}
}

void gk_sup_lines_flush(gk_sup_linebuf *lb, gk_sup_line_fn fn, void *user)
{
	if (lb->len > 0)
		fn(user, lb->buf, lb->len);
	lb->len = 0;
}

int gk_sup_out_init(gk_sup_out *o, int fd, size_t cap, int json, gk_err *err)
{
	memset(o, 0, sizeof(*o));
	o->fd = fd;
	o->json = json;
	o->cap = cap < 2 * GK_SUP_LINE_MAX ? 2 * GK_SUP_LINE_MAX : cap;
	if (!(o->buf = malloc(o->cap)))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	return 0;
}

void gk_sup_out_fini(gk_sup_out *o)
{
	free(o->buf);
	o->buf = NULL;
}

/* Room for n more bytes at the end (compacting first). */
static bool room(gk_sup_out *o, size_t n)
{
	if (o->start + o->len + n <= o->cap)
		return true;
	if (o->len + n > o->cap)
		return false;
	memmove(o->buf, o->buf + o->start, o->len);
	o->start = 0;
	return true;
}

static void put(gk_sup_out *o, const char *s, size_t n)
{
	memcpy(o->buf + o->start + o->len, s, n);
	o->len += n;
}

static size_t timestamp(char *buf, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	return n + (size_t)snprintf(buf + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000L);
}

/* Render one record into tmp; returns its length (0 if it did not fit). */
static size_t render(const gk_sup_out *o, char *tmp, size_t cap, const char *service, pid_t pid,
		     const char *line, size_t len)
{
	int n;
	if (o->json) {
		char ts[40], esc[GK_SUP_LINE_MAX * 6 + 1];
		timestamp(ts, sizeof(ts));
		gk_json_escape(esc, sizeof(esc), line, len);
		n = snprintf(tmp, cap, "{\"ts\":\"%s\",\"service\":\"%s\",\"pid\":%d,\"line\":\"%s\"}\n", ts,
			     service, (int)pid, esc);
	} else {
		n = snprintf(tmp, cap, "%s | %.*s\n", service, (int)len, line);
	}
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static bool append(gk_sup_out *o, const char *rec, size_t n)
{
	if (o->dropped_unreported) {
		char note[160];
		int m = o->json ? snprintf(note, sizeof(note),
					   "{\"service\":\"gpukmm\",\"level\":\"warn\",\"dropped_lines\":%llu}\n",
					   (unsigned long long)o->dropped_unreported)
				: snprintf(note, sizeof(note), "gpukmm | dropped %llu log lines: output too slow\n",
					   (unsigned long long)o->dropped_unreported);
		if (!room(o, (size_t)m + n))
			return false;
		put(o, note, (size_t)m);
		o->dropped_unreported = 0;
	} else if (!room(o, n)) {
		return false;
	}
	put(o, rec, n);
	return true;
}

void gk_sup_out_line(gk_sup_out *o, const char *service, pid_t pid, const char *line, size_t len)
{
	char tmp[GK_SUP_LINE_MAX * 6 + 256];
	size_t n = render(o, tmp, sizeof(tmp), service, pid, line, len);
	if (n == 0 || !append(o, tmp, n)) {
		o->dropped++;
		o->dropped_unreported++;
		return;
	}
	o->lines++;
	if (o->len > o->cap / 2)
		gk_sup_out_flush(o);   /* try early: a fast sink then never drops */
}

void gk_sup_out_raw(gk_sup_out *o, const char *data, size_t len)
{
	if (!append(o, data, len)) {
		o->dropped++;
		o->dropped_unreported++;
	}
}

bool gk_sup_out_flush(gk_sup_out *o)
{
	while (o->len > 0) {
		ssize_t w = write(o->fd, o->buf + o->start, o->len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return true;
			/* a closed or broken sink: discard, count, never block or spin */
			o->write_errors++;
			o->dropped++;
			o->start = o->len = 0;
			return false;
		}
		o->start += (size_t)w;
		o->len -= (size_t)w;
	}
	o->start = 0;
	return false;
}
