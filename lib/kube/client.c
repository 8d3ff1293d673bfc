/* Blocking client: one long-lived curl easy handle (connection reuse), token
 * re-read every refresh period and after a 401 (retried once), QPS limit,
 * bounded responses, typed Status errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpukmm/log.h"
#include "internal.h"

#define TOKEN_MAX 65536

int64_t gk_kube__mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *dup_or_null(const char *s, bool *fail)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

static void blob_dup(gk_kube_blob *dst, const gk_kube_blob *src, bool *fail)
{
	dst->data = NULL;
	dst->len = 0;
	if (!src->data)
		return;
	dst->data = malloc(src->len);
	if (!dst->data) {
		*fail = true;
		return;
	}
	memcpy(dst->data, src->data, src->len);
	dst->len = src->len;
}

static int config_dup(gk_kube_config *d, const gk_kube_config *s)
{
	bool fail = false;
	memset(d, 0, sizeof *d);
	d->server = dup_or_null(s->server, &fail);
	d->ca_file = dup_or_null(s->ca_file, &fail);
	d->cert_file = dup_or_null(s->cert_file, &fail);
	d->key_file = dup_or_null(s->key_file, &fail);
	d->token = dup_or_null(s->token, &fail);
	d->token_file = dup_or_null(s->token_file, &fail);
	d->tls_server_name = dup_or_null(s->tls_server_name, &fail);
	blob_dup(&d->ca, &s->ca, &fail);
	blob_dup(&d->cert, &s->cert, &fail);
	blob_dup(&d->key, &s->key, &fail);
	d->insecure = s->insecure;
	if (gk_kube_exec_dup(&d->exec, s->exec))
		fail = true;
	if (fail)
		gk_kube_config_free(d);
	return fail ? -1 : 0;
}

/* For tls-server-name: the URL with the host replaced by the name, the
 * connect-to rule name:port -> host:port, and the Host header. */
static int server_name_route(gk_kube_client *c, gk_err *err)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL, *base = NULL;
	int rc = 0;
	if (!u)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	if (curl_url_set(u, CURLUPART_URL, c->cfg.server, 0) ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) ||
	    curl_url_set(u, CURLUPART_HOST, c->cfg.tls_server_name, 0) ||
	    curl_url_set(u, CURLUPART_PORT, port, 0) || curl_url_get(u, CURLUPART_URL, &base, 0)) {
		rc = gk_err_set(err, GK_INVALID_ARGUMENT,
				"kube client: server %.200s with tls-server-name %.100s: not a usable URL",
				c->cfg.server, c->cfg.tls_server_name);
		goto out;
	}
	/* curl gives "https://name:port/" : keep no trailing slash, paths start with one */
	size_t bl = strlen(base);
	while (bl > 8 && base[bl - 1] == '/')
		base[--bl] = 0;
	char *rule = NULL;
	if (!(c->url_base = strdup(base)) ||
	    asprintf(&rule, "%s:%s:%s:%s", c->cfg.tls_server_name, port, host, port) < 0 ||
	    !(c->connect_to = curl_slist_append(NULL, rule)) ||
	    asprintf(&c->host_hdr, "Host: %s:%s", host, port) < 0) {
		c->host_hdr = NULL;
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	free(rule);
out:
	curl_free(host);
	curl_free(port);
	curl_free(base);
	curl_url_cleanup(u);
	return rc;
}

int gk_kube_client_new(gk_kube_client **out, const gk_kube_config *cfg, const gk_kube_opts *opts,
		       gk_err *err)
{
	*out = NULL;
	if (!cfg || !cfg->server)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kube client: no server configured");
	gk_kube_client *c = calloc(1, sizeof *c);
	if (!c)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	if (opts)
		c->opts = *opts;
	if (c->opts.qps == 0)
		c->opts.qps = 5;
	if (c->opts.burst <= 0)
		c->opts.burst = 10;
	if (c->opts.timeout_ms <= 0)
		c->opts.timeout_ms = 30000;
	if (c->opts.connect_timeout_ms <= 0)
		c->opts.connect_timeout_ms = 10000;
	if (c->opts.max_response == 0)
		c->opts.max_response = 64u << 20;
	if (c->opts.token_refresh_ms <= 0)
		c->opts.token_refresh_ms = 60000;
	c->user_agent = strdup(c->opts.user_agent ? c->opts.user_agent : "gpukmm");
	c->opts.user_agent = NULL;
	if (!c->user_agent || config_dup(&c->cfg, cfg) || !(c->easy = curl_easy_init())) {
		gk_kube_client_free(c);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	gk_kube_bucket_init(&c->bucket, c->opts.qps, c->opts.burst, gk_kube__mono_ms());
	gk_kube__throttled(c, 0); /* the series reads 0 from the start, not absent */
	if (c->cfg.tls_server_name && !strncmp(c->cfg.server, "https://", 8)) {
		int rc = server_name_route(c, err);
		if (rc) {
			gk_kube_client_free(c);
			return rc;
		}
	}
	if (c->cfg.exec) {
		if (!(c->ex = calloc(1, sizeof *c->ex))) {
			gk_kube_client_free(c);
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		}
		pthread_mutex_init(&c->ex->mu, NULL);
		/* the first credential now, before the caller's loop runs */
		if (!gk_kube__token(c, true) && !c->cfg.cert.data)
			GK_WARN("kube: no credential from the exec plugin yet; will retry");
	}
	if (c->cfg.token_file && !gk_kube__token(c, true))
		GK_WARN("kube: token file %s unreadable now; will retry", c->cfg.token_file);
	*out = c;
	return 0;
}

void gk_kube_client_free(gk_kube_client *c)
{
	if (!c)
		return;
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->ex) {
		if (c->ex->running)
			pthread_join(c->ex->th, NULL); /* bounded by the plugin's timeout */
		gk_kube_cred_free(&c->ex->next);
		pthread_mutex_destroy(&c->ex->mu);
		free(c->ex);
	}
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	gk_kube__disc_free(c);
	curl_slist_free_all(c->connect_to);
	free(c->url_base);
	free(c->host_hdr);
	gk_kube_config_free(&c->cfg);
	free(c->user_agent);
	free(c);
}

void gk_kube_client_stats_get(const gk_kube_client *c, gk_kube_client_stats *out)
{
	*out = c->stats;
}

/* ---- exec plugin credentials ---------------------------------------------------- */

#define EXEC_RETRY_MS 5000    /* a failed plugin is not re-run sooner */
#define EXEC_MARGIN_MS 60000  /* refresh this long before expiry (at most 1/5 of the lifetime) */
#define EXEC_FORCE_MS 1000    /* 401s re-run the plugin at most this often (a server that
			       * refuses every credential must not make a run per request) */

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void blob_swap(gk_kube_blob *dst, gk_kube_blob *src)
{
	if (dst->data) {
		explicit_bzero(dst->data, dst->len);
		free(dst->data);
	}
	*dst = *src;
	src->data = NULL;
	src->len = 0;
}

/* A run finished (on the thread or here): take its credential or say why not. */
static void exec_take(gk_kube_client *c, int rc, gk_err *e, gk_kube_cred *cr)
{
	gk_kube__execst *x = c->ex;
	if (rc) {
		x->fail_ms = gk_kube__mono_ms();
		GK_ERROR("kube: %s (keeping the previous credential; next try in %d s at the earliest)",
			 e->msg, EXEC_RETRY_MS / 1000);
		gk_kube_cred_free(cr);
		return;
	}
	x->fail_ms = 0;
	bool changed = !c->token != !cr->token || (c->token && cr->token && strcmp(c->token, cr->token)) ||
		       cr->cert.data;
	if (changed && (c->token || c->cfg.cert.data))
		c->stats.token_reloads++;
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	c->token = cr->token;
	cr->token = NULL;
	if (cr->cert.data) {
		blob_swap(&c->cfg.cert, &cr->cert);
		blob_swap(&c->cfg.key, &cr->key);
	}
	x->expiry_ms = cr->expiry_ms;
	x->got_ms = wall_ms();
	gk_kube_cred_free(cr);
}

static void *exec_thread(void *arg)
{
	gk_kube_client *c = arg;
	gk_kube__execst *x = c->ex;
	gk_kube_cred cr;
	gk_err e = {0};
	int rc = gk_kube_exec_run(&c->cfg, &cr, &e); /* reads cfg fields no one changes meanwhile */
	pthread_mutex_lock(&x->mu);
	x->rc = rc;
	x->err = e;
	x->next = cr;
	x->done = true;
	pthread_mutex_unlock(&x->mu);
	return NULL;
}

static void exec_join(gk_kube_client *c)
{
	gk_kube__execst *x = c->ex;
	pthread_join(x->th, NULL);
	x->running = false;
	x->done = false;
	exec_take(c, x->rc, &x->err, &x->next);
}

static const char *exec_token(gk_kube_client *c, bool force)
{
	gk_kube__execst *x = c->ex;
	if (x->running) {
		pthread_mutex_lock(&x->mu);
		bool done = x->done;
		pthread_mutex_unlock(&x->mu);
		if (done || force)
			exec_join(c); /* a refresh under way is the fresh credential a 401 asks for */
		if (force)
			return c->token;
	}
	int64_t now = wall_ms(), mono = gk_kube__mono_ms();
	bool have = c->token || c->cfg.cert.data;
	bool expired = x->expiry_ms && now >= x->expiry_ms;
	bool may = !x->fail_ms || mono - x->fail_ms >= EXEC_RETRY_MS;
	if (force && have && !expired && x->forced_ms && mono - x->forced_ms < EXEC_FORCE_MS)
		force = false;
	if (force && have)
		x->forced_ms = mono; /* a 401, not the first fetch */
	if (force || !have || expired) {
		if (x->running) {
			exec_join(c);
		} else if (may) {
			gk_kube_cred cr;
			gk_err e = {0};
			x->runs++;
			exec_take(c, gk_kube_exec_run(&c->cfg, &cr, &e), &e, &cr);
		}
		return c->token;
	}
	if (x->expiry_ms && !x->running && may) {
		int64_t life = x->expiry_ms - x->got_ms, margin = life / 5;
		if (margin > EXEC_MARGIN_MS)
			margin = EXEC_MARGIN_MS;
		if (now >= x->expiry_ms - margin) {
			x->done = false;
			x->runs++;
			x->running = pthread_create(&x->th, NULL, exec_thread, c) == 0;
		}
	}
	return c->token;
}

bool gk_kube__refreshable(const gk_kube_client *c)
{
	return c->cfg.token_file || c->ex;
}

const char *gk_kube__token(gk_kube_client *c, bool force)
{
	if (c->ex)
		return exec_token(c, force);
	if (!c->cfg.token_file)
		return c->cfg.token;
	int64_t now = gk_kube__mono_ms();
	if (!force && c->token && now - c->token_read_ms < c->opts.token_refresh_ms)
		return c->token;
	FILE *f = fopen(c->cfg.token_file, "re");
	if (!f) {
		GK_WARN("kube: cannot read token file %s: %s (keeping the previous token)",
			c->cfg.token_file, strerror(errno));
		c->token_read_ms = now; /* do not hammer the file system */
		return c->token ? c->token : c->cfg.token;
	}
	char *buf = malloc(TOKEN_MAX + 1);
	if (!buf) {
		fclose(f);
		return c->token;
	}
	size_t n = fread(buf, 1, TOKEN_MAX, f);
	fclose(f);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
		     buf[n - 1] == '\t'))
		n--;
	buf[n] = 0;
	c->token_read_ms = now;
	if (n == 0 || strpbrk(buf, "\r\n")) {
		GK_WARN("kube: token file %s is empty or malformed (keeping the previous token)",
			c->cfg.token_file);
		explicit_bzero(buf, TOKEN_MAX + 1);
		free(buf);
		return c->token;
	}
	if (c->token) {
		if (strcmp(c->token, buf))
			c->stats.token_reloads++;
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	c->token = buf;
	return c->token;
}

size_t gk_kube__write_buf(char *ptr, size_t size, size_t nmemb, void *user)
{
	gk_kube_buf *b = user;
	size_t n = size * nmemb;
	if (b->len + n > b->max) {
		b->overflow = true;
		return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
	}
	if (b->len + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 4096;
		while (nc < b->len + n + 1)
			nc *= 2;
		char *d = realloc(b->data, nc);
		if (!d) {
			b->overflow = true;
			return 0;
		}
		b->data = d;
		b->cap = nc;
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = 0;
	return n;
}

size_t gk_kube__header_cb(char *ptr, size_t size, size_t nmemb, void *user)
{
	gk_kube_status *st = user;
	size_t n = size * nmemb;
	if (st && n > 12 && !strncasecmp(ptr, "Retry-After:", 12)) {
		char v[64];
		size_t l = n - 12 < sizeof v - 1 ? n - 12 : sizeof v - 1;
		memcpy(v, ptr + 12, l);
		v[l] = 0;
		st->retry_after_s = gk_kube_parse_retry_after(v, (int64_t)time(NULL));
	}
	return n;
}

int gk_kube__setup(gk_kube_client *c, CURL *e, const char *method, const char *path,
		   const char *content_type, struct curl_slist **hdrs, gk_err *err)
{
	/* the credential first: an exec plugin's may be a client certificate */
	const char *tok = gk_kube__token(c, false);
	const char *base = c->url_base ? c->url_base : c->cfg.server;
	size_t ul = strlen(base) + strlen(path) + 1;
	char *url = malloc(ul);
	if (!url)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	snprintf(url, ul, "%s%s", base, path);
	curl_easy_setopt(e, CURLOPT_URL, url);
	free(url); /* curl copies strings */
	/* tls-server-name: the URL names it (so curl sends it as SNI and verifies
	 * the certificate against it) and CONNECT_TO sends the connection to the
	 * real host; the Host header stays the server's, as client-go sends it */
	curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 15L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->opts.connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, c->cfg.insecure ? 0L : 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, c->cfg.insecure ? 0L : 2L);
	if (c->cfg.ca.data) {
		struct curl_blob b = {c->cfg.ca.data, c->cfg.ca.len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
	} else if (c->cfg.ca_file) {
		curl_easy_setopt(e, CURLOPT_CAINFO, c->cfg.ca_file);
	}
	if (c->cfg.cert.data) {
		struct curl_blob b = {c->cfg.cert.data, c->cfg.cert.len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b);
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
	} else if (c->cfg.cert_file) {
		curl_easy_setopt(e, CURLOPT_SSLCERT, c->cfg.cert_file);
	}
	if (c->cfg.key.data) {
		struct curl_blob b = {c->cfg.key.data, c->cfg.key.len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	} else if (c->cfg.key_file) {
		curl_easy_setopt(e, CURLOPT_SSLKEY, c->cfg.key_file);
	}
	if (!strcmp(method, "GET"))
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	else
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);

	struct curl_slist *h = NULL, *t;
	char line[128];
	if (!(t = curl_slist_append(h, "Accept: application/json")))
		goto oom;
	h = t;
	if (c->host_hdr) {
		if (!(t = curl_slist_append(h, c->host_hdr)))
			goto oom;
		h = t;
	}
	if (content_type) {
		snprintf(line, sizeof line, "Content-Type: %s", content_type);
		if (!(t = curl_slist_append(h, line)))
			goto oom;
		h = t;
	}
	if (tok && *tok) {
		size_t al = strlen(tok) + 32;
		char *a = malloc(al);
		if (!a)
			goto oom;
		snprintf(a, al, "Authorization: Bearer %s", tok);
		t = curl_slist_append(h, a);
		explicit_bzero(a, al);
		free(a);
		if (!t)
			goto oom;
		h = t;
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	*hdrs = h;
	return 0;
oom:
	curl_slist_free_all(h);
	return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
}

int gk_kube__result(gk_kube_client *c, CURLcode cc, long http, const char *errbuf,
		    const gk_kube_buf *body, gk_kube_status *st, const char *method,
		    const char *path, gk_err *err)
{
	if (cc != CURLE_OK) {
		st->http = 0;
		c->stats.errors++;
		if (body && body->overflow)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED,
					  "%s %s: response larger than %zu bytes", method, path,
					  c->opts.max_response);
		int code = (cc == CURLE_OPERATION_TIMEDOUT) ? GK_DEADLINE_EXCEEDED : GK_UNAVAILABLE;
		return gk_err_set(err, code, "%s %s: %s", method, path,
				  errbuf && *errbuf ? errbuf : curl_easy_strerror(cc));
	}
	st->http = http;
	if (http >= 200 && http < 300)
		return 0;
	c->stats.errors++;
	if (body)
		gk_kube_status_decode(st, body->data, body->len);
	int code = gk_kube_code_of(http, st->reason);
	return gk_err_set(err, code, "%s %s: HTTP %ld%s%s%s%s", method, path, http,
			  st->reason[0] ? " " : "", st->reason, st->message[0] ? ": " : "",
			  st->message);
}

static void throttle(gk_kube_client *c)
{
	int64_t wait = gk_kube_bucket_take(&c->bucket, gk_kube__mono_ms());
	if (wait <= 0)
		return;
	/* a blocking client blocks: the caller asked for a synchronous request */
	gk_kube__throttled(c, wait);
	struct timespec ts = {wait / 1000, (wait % 1000) * 1000000};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int gk_kube_request(gk_kube_client *c, const char *method, const char *path,
		    const char *content_type, const char *body, size_t body_len, cJSON **out,
		    gk_kube_status *st, gk_err *err)
{
	gk_kube_status st_local;
	if (!st)
		st = &st_local;
	if (out)
		*out = NULL;
	for (int attempt = 0;; attempt++) {
		memset(st, 0, sizeof *st);
		st->retry_after_s = -1;
		throttle(c);
		CURL *e = c->easy;
		curl_easy_reset(e);
		struct curl_slist *hdrs = NULL;
		if (gk_kube__setup(c, e, method, path, content_type, &hdrs, err))
			return err ? err->code : GK_RESOURCE_EXHAUSTED;
		gk_kube_buf rb = {.max = c->opts.max_response};
		char errbuf[CURL_ERROR_SIZE] = "";
		curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, gk_kube__write_buf);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &rb);
		curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, gk_kube__header_cb);
		curl_easy_setopt(e, CURLOPT_HEADERDATA, st);
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->opts.timeout_ms);
		if (body) {
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
		}
		c->stats.requests++;
		CURLcode cc = curl_easy_perform(e);
		long http = 0;
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &http);
		gk_kube__observe(c, e);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
		curl_slist_free_all(hdrs);
		int rc = gk_kube__result(c, cc, http, errbuf, &rb, st, method, path, err);
		if (rc == GK_UNAUTHENTICATED && attempt == 0 && gk_kube__refreshable(c)) {
			/* rotated token: re-read at once and retry once */
			c->stats.unauthorized++;
			free(rb.data);
			gk_kube__token(c, true);
			continue;
		}
		if (rc == GK_UNAUTHENTICATED)
			c->stats.unauthorized++;
		if (rc == 0 && out && rb.len) {
			*out = cJSON_ParseWithLength(rb.data, rb.len);
			if (!*out)
				rc = gk_err_set(err, GK_INTERNAL, "%s %s: response is not JSON", method,
						path);
		}
		free(rb.data);
		return rc;
	}
}

static int send_rq(gk_kube_client *c, gk_kube__rq *q, int rc, cJSON **out, gk_kube_status *st,
		   gk_err *err)
{
	if (out)
		*out = NULL;
	if (rc == 0)
		rc = gk_kube_request(c, q->method, q->path, q->ct, q->body, q->body_len, out, st, err);
	gk_kube__rq_free(q);
	return rc;
}

int gk_kube_get(gk_kube_client *c, const gk_kube_ref *r, cJSON **out, gk_kube_status *st,
		gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_get(&q, r, err);
	return send_rq(c, &q, rc, out, st, err);
}

int gk_kube_create(gk_kube_client *c, const gk_kube_ref *r, const cJSON *obj, cJSON **out,
		   gk_kube_status *st, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_create(&q, r, obj, err);
	return send_rq(c, &q, rc, out, st, err);
}

int gk_kube_update(gk_kube_client *c, const gk_kube_ref *r, const cJSON *obj, cJSON **out,
		   gk_kube_status *st, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_update(&q, r, obj, err);
	return send_rq(c, &q, rc, out, st, err);
}

int gk_kube_patch(gk_kube_client *c, const gk_kube_ref *r, enum gk_kube_patch_type type,
		  const char *body, const char *field_manager, bool force, cJSON **out,
		  gk_kube_status *st, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_patch(&q, r, type, body, field_manager, force, err);
	return send_rq(c, &q, rc, out, st, err);
}

int gk_kube_delete(gk_kube_client *c, const gk_kube_ref *r, const gk_kube_delete_opts *d,
		   cJSON **out, gk_kube_status *st, gk_err *err)
{
	gk_kube__rq q;
	int rc = gk_kube__rq_delete(&q, r, d, err);
	return send_rq(c, &q, rc, out, st, err);
}


int gk_kube_list(gk_kube_client *c, const gk_kube_ref *r, const gk_kube_list_opts *lo,
		 gk_kube_item_fn fn, void *user, char *rv, size_t rv_cap, gk_kube_status *st,
		 gk_err *err)
{
	char *cont = NULL;
	for (int page = 0;; page++) {
		gk_kube__rq q;
		int rc = gk_kube__rq_list(&q, r, lo, cont, err);
		free(cont);
		cont = NULL;
		if (rc)
			return rc;
		const char *base = q.path;
		cJSON *j = NULL;
		rc = gk_kube_request(c, "GET", q.path, NULL, NULL, 0, &j, st, err);
		if (rc)
			return rc;
		const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items"), *it;
		const cJSON *md = cJSON_GetObjectItemCaseSensitive(j, "metadata");
		gk_err cerr = {0};
		if (gk_kube_check_list(j, r->group, r->version, &cerr)) {
			cJSON_Delete(j);
			return gk_err_set(err, GK_INTERNAL, "list %s: %s", base, cerr.msg);
		}
		cJSON_ArrayForEach(it, items) {
			if (fn)
				fn(user, it);
		}
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
		if (rv && rv_cap && cJSON_IsString(v))
			snprintf(rv, rv_cap, "%s", v->valuestring);
		v = cJSON_GetObjectItemCaseSensitive(md, "continue");
		if (cJSON_IsString(v) && v->valuestring[0]) {
			cont = strdup(v->valuestring);
			if (!cont) {
				cJSON_Delete(j);
				return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
			}
		}
		cJSON_Delete(j);
		if (!cont)
			return 0;
		if (page > 100000) {
			free(cont);
			return gk_err_set(err, GK_INTERNAL, "list %s: too many pages", base);
		}
	}
}
