/* /healthz, /livez, /readyz on --http-listen ADDR:PORT (libmicrohttpd, its own
 * thread): the kubelet's probes, unauthenticated. /metrics is served by the
 * metrics server (metricsd.c, --metrics-listen), which gets its page here.
 *
 * HTTP threads never read the supervisor's state. They ask the loop for a
 * fresh snapshot (eventfd), and the loop renders it and hands it over under a
 * mutex. So /healthz proves the loop itself answers, and a scrape always sees
 * current numbers, with no periodic wakeup while nobody asks. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "gpukmm/log.h"
#include "sup.h"

#define LOOP_ANSWER_MS 2000

struct gk_sup_http {
	struct MHD_Daemon *d;
	gk_sup *sup;               /* loop side only */
	int efd;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t asked, answered;  /* under mu */
	char *metrics;             /* under mu */
	size_t metrics_len;
	bool ready;
	char not_ready[1024];
	uint16_t port;
};

/* Loop side: render and hand over. */
static void on_ask(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_sup_http *h = user;
	gk_sup *s = h->sup;
	uint64_t v;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return;
	size_t len = 0;
	char *m = gk_sup_metrics_render(s, gk_sup_now_ms(), &len);
	char nr[1024] = "";
	size_t o = 0;
	for (size_t i = 0; i < s->n; i++) {
		const gk_sup_svc *v = &s->svcs[i];
		if (v->conf->required && v->state != GK_SUP_READY && o < sizeof(nr) - 300)
			o += (size_t)snprintf(nr + o, sizeof(nr) - o, "%s: %s%s%s\n", v->conf->name,
					      gk_sup_state_name(v->state), v->state == GK_SUP_FAILED && v->last_error[0] ? ": " : "",
					      v->state == GK_SUP_FAILED ? v->last_error : "");
	}
	pthread_mutex_lock(&h->mu);
	if (m) {
		free(h->metrics);
		h->metrics = m;
		h->metrics_len = len;
	}
	h->ready = s->ready;
	memcpy(h->not_ready, nr, sizeof(nr));
	h->answered = h->asked;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

/* HTTP side: ask, wait (bounded) for the loop's answer. Called with mu held. */
static bool ask_loop(gk_sup_http *h)
{
	uint64_t mine = ++h->asked, one = 1;
	if (write(h->efd, &one, sizeof(one)) != sizeof(one))
		return false;
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += LOOP_ANSWER_MS / 1000;
	while (h->answered < mine)
		if (pthread_cond_timedwait(&h->cv, &h->mu, &dl) == ETIMEDOUT)
			return h->answered >= mine;
	return true;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type, const char *body,
			     size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	enum MHD_Result rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	gk_sup_http *h = cls;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply(c, 405, "text/plain", "method not allowed\n", 19);
	const char *plain = "text/plain; charset=utf-8";
	bool healthz = strcmp(url, "/healthz") == 0 || strcmp(url, "/livez") == 0;
	bool readyz = strcmp(url, "/readyz") == 0;
	if (strcmp(url, "/metrics") == 0) {
		static const char moved[] = "not found: /metrics is served on --metrics-listen\n";
		return reply(c, 404, plain, moved, sizeof(moved) - 1);
	}
	if (!healthz && !readyz)
		return reply(c, 404, plain, "not found\n", 10);
	pthread_mutex_lock(&h->mu);
	bool alive = ask_loop(h);
	enum MHD_Result rc;
	if (!alive) {
		rc = reply(c, 503, plain, "event loop not answering\n", 25);
	} else if (healthz) {
		rc = reply(c, 200, plain, "ok\n", 3);
	} else {
		/* the detail: what is not ready (a failed service with its reason), and the
		 * note (a service left out, e.g. the webhook without a certificate) */
		const char *note = h->sup->opts.note;
		char body[1500];
		int n = snprintf(body, sizeof(body), "%s\n%s%s%s", h->ready ? "ready" : "not ready",
				 h->ready ? "" : h->not_ready, note ? note : "", note ? "\n" : "");
		if (n >= (int)sizeof(body))
			n = (int)sizeof(body) - 1;
		rc = reply(c, h->ready ? 200 : 503, plain, body, (size_t)n);
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

/* ADDR:PORT with ADDR an IPv4 address, "*" or empty (all IPv4), "localhost"
 * (127.0.0.1), or a bracketed IPv6 address: [::1]:PORT, [::]:PORT (all, IPv6
 * and, unless the system says otherwise, IPv4-mapped). */
static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len, gk_err *err)
{
	const char *colon = strrchr(s, ':');
	char host[64];
	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "--http-listen: '%s' is not ADDR:PORT", s);
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 0 || port > 65535)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "--http-listen: bad port in '%s'", s);
	memset(ss, 0, sizeof(*ss));
	size_t hl = strlen(host);
	if (host[0] == '[') {
		struct sockaddr_in6 *sa6 = (struct sockaddr_in6 *)ss;
		if (hl < 3 || host[hl - 1] != ']')
			return gk_err_set(err, GK_INVALID_ARGUMENT, "--http-listen: '%s': unbalanced [ ]", s);
		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &sa6->sin6_addr) != 1)
			return gk_err_set(err, GK_INVALID_ARGUMENT, "--http-listen: '%s' is not an IPv6 address",
					  host + 1);
		sa6->sin6_family = AF_INET6;
		sa6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*sa6);
		return 0;
	}
	struct sockaddr_in *sa = (struct sockaddr_in *)ss;
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	*len = sizeof(*sa);
	if (!*host || strcmp(host, "*") == 0)
		sa->sin_addr.s_addr = htonl(INADDR_ANY);
	else if (strcmp(host, "localhost") == 0)
		sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "--http-listen: '%s' is not an IPv4 address (IPv6 goes in brackets: [::1]:PORT)",
				  host);
	return 0;
}

char *gk_sup_http_metrics(gk_sup_http *h, size_t *len)
{
	char *out = NULL;
	pthread_mutex_lock(&h->mu);
	if (ask_loop(h) && h->metrics && (out = malloc(h->metrics_len + 1))) {
		memcpy(out, h->metrics, h->metrics_len);
		out[h->metrics_len] = 0;
		*len = h->metrics_len;
	}
	pthread_mutex_unlock(&h->mu);
	return out;
}

int gk_sup_http_init(gk_sup *s, gk_err *err)
{
	if (s->http)
		return 0;
	gk_sup_http *h = calloc(1, sizeof(*h));
	if (!h)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	h->sup = s;
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->http = h;
	if (h->efd < 0)
		return gk_err_set(err, GK_INTERNAL, "eventfd: %s", strerror(errno));
	return gk_loop_add_fd(s->loop, h->efd, EPOLLIN, on_ask, h, err);
}

int gk_sup_http_start(gk_sup *s, const char *listen, gk_err *err)
{
	struct sockaddr_storage sa;
	socklen_t sa_len = 0;
	int rc = parse_listen(listen, &sa, &sa_len, err);
	if (rc || (rc = gk_sup_http_init(s, err)))
		return rc;
	gk_sup_http *h = s->http;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
	if (sa.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, h,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, 32U,
				MHD_OPTION_CONNECTION_TIMEOUT, 10U, MHD_OPTION_END);
	if (!h->d)
		return gk_err_set(err, GK_UNAVAILABLE, "--http-listen %s: cannot listen (address in use?)", listen);
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	char addr[INET6_ADDRSTRLEN];
	if (sa.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&sa;
		h->port = di ? di->port : ntohs(a6->sin6_port);
		inet_ntop(AF_INET6, &a6->sin6_addr, addr, sizeof(addr));
		GK_INFO("http: listening on [%s]:%u (/healthz /readyz)", addr, (unsigned)h->port);
	} else {
		const struct sockaddr_in *a4 = (const struct sockaddr_in *)&sa;
		h->port = di ? di->port : ntohs(a4->sin_port);
		inet_ntop(AF_INET, &a4->sin_addr, addr, sizeof(addr));
		GK_INFO("http: listening on %s:%u (/healthz /readyz)", addr, (unsigned)h->port);
	}
	return 0;
}

void gk_sup_http_stop(gk_sup *s)
{
	gk_sup_http *h = s->http;
	if (!h)
		return;
	if (h->d)
		MHD_stop_daemon(h->d);
	if (h->efd >= 0) {
		if (s->loop)
			gk_loop_del_fd(s->loop, h->efd);
		close(h->efd);
	}
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	free(h->metrics);
	free(h);
	s->http = NULL;
}
