/* kubesim — libmicrohttpd glue. */
#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/log.h"

struct ks_http {
	struct MHD_Daemon *d;
	ks_server *s;
	int port;
};

#define KS_MAX_QUERY 64

struct conn {
	char *body;
	size_t len, cap;
	int too_large;
	ks_kv q[KS_MAX_QUERY];
	int nq;
};

struct stream {
	ks_server *s;
	struct ks_watch *w;
};

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct conn *c = cls;
	(void)kind;
	if (c->nq >= KS_MAX_QUERY)
		return MHD_NO;
	c->q[c->nq].k = (char *)key;
	c->q[c->nq].v = (char *)(value ? value : "");
	c->nq++;
	return MHD_YES;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	(void)pos;
	size_t n = ks_watch_read(st->s, st->w, buf, max);
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
	struct stream *st = cls;
	ks_watch_close(st->s, st->w);
	free(st);
}

static enum MHD_Result send_resp(struct MHD_Connection *conn, ks_server *s, ks_resp *r)
{
	struct MHD_Response *resp;
	if (r->watch) {
		struct stream *st = malloc(sizeof(*st));
		if (!st) {
			ks_watch_close(s, r->watch);
			return MHD_NO;
		}
		st->s = s;
		st->w = r->watch;
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
		if (!resp) {
			stream_free(st);
			return MHD_NO;
		}
	} else {
		const char *b = r->body ? r->body : "";
		resp = MHD_create_response_from_buffer(r->body_len ? r->body_len : strlen(b), (void *)b,
						       MHD_RESPMEM_MUST_COPY);
		if (!resp)
			return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", r->content_type ? r->content_type : "application/json");
	MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
	if (!s->no_apf) {
		/* as an API server with API Priority and Fairness (on by default since
		 * 1.20): the flow schema and priority level that classified the request */
		MHD_add_response_header(resp, "X-Kubernetes-Pf-Flowschema-Uid", "6c2f8a1e-5b3d-4e0a-9f1c-0d7e2b4a6c81");
		MHD_add_response_header(resp, "X-Kubernetes-Pf-Prioritylevel-Uid", "1f9d4c7b-2a6e-4b8d-8c3f-5e0a9b7d2c64");
	}
	if (r->retry_after > 0) {
		char ra[16];
		snprintf(ra, sizeof(ra), "%d", r->retry_after);
		MHD_add_response_header(resp, "Retry-After", ra);
	}
	for (const char *w = r->warning; *w;) {
		/* Warning: 299 - "text" (quotes and backslashes escaped), one header each */
		size_t n = strcspn(w, "\n");
		char h[2400];
		size_t j = 0;
		j += (size_t)snprintf(h, sizeof(h), "299 - \"");
		for (size_t i = 0; i < n && j + 4 < sizeof(h); i++) {
			if (w[i] == '"' || w[i] == '\\')
				h[j++] = '\\';
			h[j++] = w[i];
		}
		h[j++] = '"';
		h[j] = 0;
		MHD_add_response_header(resp, "Warning", h);
		w += n;
		if (*w == '\n')
			w++;
	}
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)r->code, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct ks_http *h = cls;
	(void)version;
	struct conn *c = *con_cls;
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return MHD_NO;
		*con_cls = c;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!c->too_large) {
			if (c->len + *upload_size > KS_MAX_BODY) {
				c->too_large = 1;
			} else {
				if (c->len + *upload_size + 1 > c->cap) {
					size_t nc = c->cap ? c->cap : 4096;
					while (nc < c->len + *upload_size + 1)
						nc *= 2;
					char *nb = realloc(c->body, nc);
					if (!nb)
						return MHD_NO;
					c->body = nb;
					c->cap = nc;
				}
				memcpy(c->body + c->len, upload, *upload_size);
				c->len += *upload_size;
				c->body[c->len] = 0;
			}
		}
		*upload_size = 0;
		return MHD_YES;
	}
	ks_resp r = { 0 };
	if (c->too_large) {
		ks_resp_status(&r, 413, "RequestEntityTooLarge", NULL, NULL, NULL, NULL,
			       "the request body is larger than %u bytes", KS_MAX_BODY);
	} else {
		MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_arg, c);
		ks_req q = {
			.method = method,
			.path = url,
			.query = c->q,
			.nquery = c->nq,
			.accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept"),
			.content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"),
			.user_agent = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "User-Agent"),
			.auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"),
			.body = c->body,
			.body_len = c->len,
		};
		ks_handle(h->s, &q, &r);
		if (!r.body && !r.watch)
			ks_resp_status(&r, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		GK_DEBUG("%s %s -> %d", method, url, r.code);
	}
	enum MHD_Result ret = send_resp(conn, h->s, &r);
	ks_resp_free(&r);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	struct conn *c = *con_cls;
	if (c) {
		free(c->body);
		free(c);
		*con_cls = NULL;
	}
}

static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t len)
{
	struct ks_http *h = cls;
	(void)addr;
	(void)len;
	pthread_mutex_lock(&h->s->mu);
	int refuse = h->s->faults.refuse_until_ms > ks_mono_ms();
	if (refuse) {
		h->s->stats.refused++;
		h->s->stats.faults_injected++;
		ks_stats_count(h->s->stats.fault, &h->s->stats.nfault, "connect", "*");
	}
	pthread_mutex_unlock(&h->s->mu);
	return refuse ? MHD_NO : MHD_YES;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char buf[512];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	size_t n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = 0;
	GK_DEBUG("microhttpd: %s", buf);
}

struct ks_http *ks_http_start(ks_server *s, const char *host, int port, const char *cert, const char *key,
			      gk_err *err)
{
	struct ks_http *h = calloc(1, sizeof(*h));
	if (!h) {
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		return NULL;
	}
	h->s = s;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		free(h);
		gk_err_set(err, GK_INVALID_ARGUMENT, "listen address %s: not an IPv4 address", host);
		return NULL;
	}
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	if (cert)
		flags |= MHD_USE_TLS;
	if (cert)
		h->d = MHD_start_daemon(flags, 0, accept_policy, h, on_request, h, MHD_OPTION_SOCK_ADDR, &sa,
					MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_LIMIT,
					(unsigned)1000, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
					MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_HTTPS_MEM_CERT, cert,
					MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END);
	else
		h->d = MHD_start_daemon(flags, 0, accept_policy, h, on_request, h, MHD_OPTION_SOCK_ADDR, &sa,
					MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_LIMIT,
					(unsigned)1000, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
					MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_END);
	if (!h->d) {
		free(h);
		gk_err_set(err, GK_UNAVAILABLE, "cannot listen on %s:%d (port in use, or bad TLS certificate/key)",
			   host, port);
		return NULL;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info ? info->port : port;
	return h;
}

int ks_http_port(const struct ks_http *h)
{
	return h->port;
}

void ks_http_stop(struct ks_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
}
