/* fake-kmm — the admission webhook HTTP(S) server (libmicrohttpd, its own
 * thread). The handler is fk_review_handle: pure, no shared mutable state. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/log.h"

#include "fakekmm.h"

#define MAX_BODY (4u << 20)

struct fk_webhook {
	struct MHD_Daemon *d;
	fk_kube_version kv;
	int has_kv;
	char *cert, *key;
	char base[96];
};

typedef struct req_buf {
	char *data;
	size_t len, cap;
	int too_big;
} req_buf;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *ctype, char *body, int owned)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body,
								 owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", ctype);
	enum MHD_Result ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

/* One line per review: what was asked, what was answered (no secrets in Modules). */
static void log_review(const char *req, size_t len, const char *resp)
{
	cJSON *q = cJSON_ParseWithLength(req, len), *r = cJSON_Parse(resp);
	const cJSON *rq = cJSON_GetObjectItemCaseSensitive(q, "request");
	const cJSON *rs = cJSON_GetObjectItemCaseSensitive(r, "response");
	const char *op = fk_obj_str(rq, "operation"), *ns = fk_obj_str(rq, "namespace"), *name = fk_obj_str(rq, "name");
	const char *msg = fk_obj_str(cJSON_GetObjectItemCaseSensitive(rs, "status"), "message");
	int allowed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rs, "allowed"));
	GK_INFO("admission: %s %s/%s %s%s%s", op ? op : "?", ns ? ns : "", name ? name : "", allowed ? "allowed" : "denied",
		msg ? ": " : "", msg ? msg : "");
	cJSON_Delete(q);
	cJSON_Delete(r);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	fk_webhook *w = cls;
	if (!strcmp(url, "/healthz")) {
		if (strcmp(method, "GET") != 0)
			return reply(c, 405, "text/plain", "method not allowed\n", 0);
		return reply(c, 200, "text/plain", "ok\n", 0);
	}
	if (strcmp(url, FK_WEBHOOK_PATH) != 0)
		return reply(c, 404, "text/plain", "not found\n", 0);
	if (strcmp(method, "POST") != 0)
		return reply(c, 405, "text/plain", "method not allowed\n", 0);
	req_buf *b = *con_cls;
	if (!b) {
		b = calloc(1, sizeof *b);
		if (!b)
			return MHD_NO;
		*con_cls = b;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!b->too_big) {
			if (b->len + *upload_size > MAX_BODY) {
				b->too_big = 1;
			} else {
				if (b->len + *upload_size + 1 > b->cap) {
					size_t nc = b->cap ? b->cap : 4096;
					while (nc < b->len + *upload_size + 1)
						nc *= 2;
					char *nd = realloc(b->data, nc);
					if (!nd)
						return MHD_NO;
					b->data = nd;
					b->cap = nc;
				}
				memcpy(b->data + b->len, upload, *upload_size);
				b->len += *upload_size;
			}
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (b->too_big)
		return reply(c, 413, "text/plain", "request body too large\n", 0);
	int status = 200;
	char *out = fk_review_handle(b->data, b->len, w->has_kv ? &w->kv : NULL, &status);
	if (!out)
		return reply(c, 500, "text/plain", "out of memory\n", 0);
	log_review(b->data, b->len, out);
	return reply(c, (unsigned)status, "application/json", out, 1);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	req_buf *b = *con_cls;
	if (b) {
		free(b->data);
		free(b);
		*con_cls = NULL;
	}
}

static char *slurp(const char *path, gk_err *err)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		gk_err_set(err, GK_NOT_FOUND, "cannot open %s", path);
		return NULL;
	}
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 4096 + 1 > cap) {
			if (cap > (1u << 20)) {
				gk_err_set(err, GK_INVALID_ARGUMENT, "%s: larger than 1 MiB", path);
				goto fail;
			}
			cap = cap ? cap * 2 : 8192;
			char *nb = realloc(buf, cap);
			if (!nb) {
				gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory reading %s", path);
				goto fail;
			}
			buf = nb;
		}
		size_t n = fread(buf + len, 1, 4096, f);
		len += n;
		if (n < 4096)
			break;
	}
	if (ferror(f)) {
		gk_err_set(err, GK_INTERNAL, "read error on %s", path);
		goto fail;
	}
	fclose(f);
	buf[len] = 0;
	return buf;
fail:
	fclose(f);
	free(buf);
	return NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	vsnprintf(buf, sizeof buf, fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	GK_WARN("webhook: %s", buf);
}

int fk_webhook_start(fk_webhook **out, const fk_listen *l, const char *cert_file, const char *key_file,
		     const fk_kube_version *kv, gk_err *err)
{
	*out = NULL;
	fk_webhook *w = calloc(1, sizeof *w);
	if (!w)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	if (kv) {
		w->kv = *kv;
		w->has_kv = 1;
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)l->port) };
	if (inet_pton(AF_INET, l->host, &sa.sin_addr) != 1) {
		free(w);
		return gk_err_set(err, GK_INVALID_ARGUMENT, "bad listen host %s", l->host);
	}
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	if (l->tls) {
		if (!cert_file || !key_file) {
			free(w);
			return gk_err_set(err, GK_INVALID_ARGUMENT, "https webhook needs --tls-cert and --tls-key");
		}
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			free(w);
			return gk_err_set(err, GK_UNIMPLEMENTED, "libmicrohttpd was built without TLS");
		}
		w->cert = slurp(cert_file, err);
		w->key = w->cert ? slurp(key_file, err) : NULL;
		if (!w->key) {
			free(w->cert);
			free(w);
			return err ? err->code : GK_INTERNAL;
		}
		flags |= MHD_USE_TLS;
	}
	if (l->tls)
		w->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, w, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, w,
					MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_NOTIFY_COMPLETED, completed, w,
					MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_CONNECTION_LIMIT, 64u,
					MHD_OPTION_HTTPS_MEM_CERT, w->cert, MHD_OPTION_HTTPS_MEM_KEY, w->key, MHD_OPTION_END);
	else
		w->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, w, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, w,
					MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_NOTIFY_COMPLETED, completed, w,
					MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_END);
	if (!w->d) {
		free(w->cert);
		free(w->key);
		free(w);
		return gk_err_set(err, GK_UNAVAILABLE, "cannot start the webhook server on %s:%d", l->host, l->port);
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(w->d, MHD_DAEMON_INFO_BIND_PORT);
	int port = di ? di->port : l->port;
	snprintf(w->base, sizeof w->base, "%s://%s:%d", l->tls ? "https" : "http", l->host, port);
	*out = w;
	return 0;
}

const char *fk_webhook_base_url(const fk_webhook *w)
{
	return w->base;
}

const char *fk_webhook_cert_pem(const fk_webhook *w)
{
	return w->cert;
}

void fk_webhook_stop(fk_webhook *w)
{
	if (!w)
		return;
	MHD_stop_daemon(w->d);
	free(w->cert);
	free(w->key);
	free(w);
}
