/* kreq — one HTTP/1.1 request to kubesim, for the tests' kraw (tests/lib/kubesim.sh):
 *
 *   kreq [-X METHOD] [-H 'Name: value']... [--data-binary BODY] [--cacert FILE] [--max-time S] URL
 *
 * what kraw asked of curl (`curl -sS -X M -o - -w '%{stderr}%{http_code}' ...`) for less
 * of its CPU: curl loads 33 shared libraries at every start (17 ms of CPU a request over
 * http, 23 ms over https here), and the tests' polls make thousands of requests; this
 * program loads libssl and libcrypto, and only an https:// URL initialises them (5 and
 * 11 ms).
 *   - the body goes to stdout, as received (chunked transfer decoded);
 *   - stderr ends with the three-digit status code, "000" when no response was read,
 *     after a "kreq: ..." line saying why;
 *   - exit 0 when a response was read (any status, as curl without -f), else 7 (no
 *     connection), 35 (TLS), 56 (send/receive), 28 (no complete response within
 *     --max-time seconds, default 60: a server that hangs fails the request, not the
 *     test run), 2 (usage);
 *   - $KREQ_BEARER, when set, is sent as "Authorization: Bearer ..." (not in argv);
 *   - TLS verifies the server's certificate against --cacert (else the system's CAs)
 *     and its name or IP address against the URL's host.
 * URLs are http(s)://HOST:PORT/PATH with HOST a name or an IPv4 address. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_HEADERS 16

static int fail(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kreq: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n000", stderr);
	return rc;
}

/* --max-time: the whole request, from the first connect to the last byte (SIGALRM). */
static char timeout_msg[96];
static void on_alarm(int sig)
{
	(void)sig;
	ssize_t w = write(STDERR_FILENO, timeout_msg, strlen(timeout_msg));
	(void)w;
	_exit(28);
}

typedef struct buf {
	char *p;
	size_t n, cap;
} buf;

static bool buf_add(buf *b, const void *d, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return false;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
	b->p[b->n] = 0;
	return true;
}

typedef struct conn {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
} conn;

static int conn_write(conn *c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = c->ssl ? SSL_write(c->ssl, p, (int)n) : send(c->fd, p, n, MSG_NOSIGNAL);
		if (w <= 0) {
			if (!c->ssl && w < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* reads to the end of the stream: 0, or -1 on an error (a TLS peer that closes
 * without close_notify counts as the end, as curl takes it) */
static int conn_read_all(conn *c, buf *out)
{
	char tmp[65536];
	for (;;) {
		ssize_t r;
		if (c->ssl) {
			r = SSL_read(c->ssl, tmp, sizeof tmp);
			if (r <= 0) {
				int e = SSL_get_error(c->ssl, (int)r);
				if (e == SSL_ERROR_ZERO_RETURN)
					return 0;
				if (e == SSL_ERROR_SSL &&
				    ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
					return 0;
				if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
					return 0;
				return -1;
			}
		} else {
			r = recv(c->fd, tmp, sizeof tmp, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return -1;
			if (r == 0)
				return 0;
		}
		if (!buf_add(out, tmp, (size_t)r))
			return -1;
	}
}

/* the body of a chunked message in place: its decoded length, or -1 when malformed */
static long dechunk(char *p, size_t n)
{
	size_t in = 0, outn = 0;
	for (;;) {
		char *end;
		errno = 0;
		unsigned long len = strtoul(p + in, &end, 16);
		if (end == p + in || errno)
			return -1;
		char *eol = memmem(end, n - (size_t)(end - p), "\r\n", 2);
		if (!eol)
			return -1;
		in = (size_t)(eol - p) + 2;
		if (len == 0)
			return (long)outn;
		if (len > n - in || n - in - len < 2)
			return -1;
		memmove(p + outn, p + in, len);
		outn += len;
		in += len + 2;
	}
}

/* the request: method, path, headers, body */
static bool build_request(buf *req, const char *method, const char *path, const char *host, const char *port,
			  const char **headers, int nh, const char *data)
{
	const char *bearer = getenv("KREQ_BEARER");
	char clen[64];
	bool ok = buf_add(req, method, strlen(method)) && buf_add(req, " ", 1) && buf_add(req, path, strlen(path)) &&
		  buf_add(req, " HTTP/1.1\r\nHost: ", 17) && buf_add(req, host, strlen(host)) && buf_add(req, ":", 1) &&
		  buf_add(req, port, strlen(port));
	static const char fixed[] = "\r\nUser-Agent: kreq\r\nAccept: */*\r\nConnection: close\r\n";
	ok = ok && buf_add(req, fixed, sizeof fixed - 1);
	if (ok && bearer && *bearer)
		ok = buf_add(req, "Authorization: Bearer ", 22) && buf_add(req, bearer, strlen(bearer)) &&
		     buf_add(req, "\r\n", 2);
	for (int i = 0; ok && i < nh; i++)
		ok = buf_add(req, headers[i], strlen(headers[i])) && buf_add(req, "\r\n", 2);
	if (ok && data) {
		int n = snprintf(clen, sizeof clen, "Content-Length: %zu\r\n", strlen(data));
		ok = buf_add(req, clen, (size_t)n);
	}
	return ok && buf_add(req, "\r\n", 2) && (!data || buf_add(req, data, strlen(data)));
}

/* TLS on c->fd, verifying the peer against CACERT (NULL: the system's) and HOST */
static int tls_start(conn *c, const char *host, const char *port, const char *cacert)
{
	struct in_addr ip;
	bool is_ip = inet_pton(AF_INET, host, &ip) == 1;
	/* openssl.cnf is not read (2 of the 13 ms of CPU a request took): OpenSSL's
	 * defaults and the TLS 1.2 floor below are what talking to kubesim needs */
	OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
	c->ctx = SSL_CTX_new(TLS_client_method());
	if (!c->ctx || !SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION))
		return fail(35, "TLS: no context");
	SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	if (!(cacert ? SSL_CTX_load_verify_locations(c->ctx, cacert, NULL) : SSL_CTX_set_default_verify_paths(c->ctx)))
		return fail(35, "TLS: cannot load the CA %s", cacert ? cacert : "(the system's)");
	c->ssl = SSL_new(c->ctx);
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd))
		return fail(35, "TLS: no session");
	X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
	if (is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(vp, host)
		  : !SSL_set_tlsext_host_name(c->ssl, host) || !SSL_set1_host(c->ssl, host))
		return fail(35, "TLS: cannot verify against %s", host);
	if (SSL_connect(c->ssl) != 1) {
		long v = SSL_get_verify_result(c->ssl);
		const char *why = v != X509_V_OK ? X509_verify_cert_error_string(v)
						 : ERR_reason_error_string(ERR_peek_last_error());
		return fail(35, "TLS handshake with %s:%s: %s", host, port, why ? why : "failed");
	}
	return 0;
}

/* the response in RESP: its status code and its body, written to stdout */
static int answer(buf *resp, const char *host, const char *port)
{
	char *hend = resp->p ? strstr(resp->p, "\r\n\r\n") : NULL;
	int code = 0;
	if (!hend || sscanf(resp->p, "HTTP/1.%*d %3d", &code) != 1 || code < 100)
		return fail(56, "no HTTP response from %s:%s", host, port);
	*hend = 0;
	char *body = hend + 4;
	size_t blen = resp->n - (size_t)(body - resp->p);
	bool chunked = false;
	long clen = -1;
	for (char *h = strstr(resp->p, "\r\n"); h; h = strstr(h, "\r\n")) {
		h += 2;
		if (!strncasecmp(h, "Transfer-Encoding:", 18) && strcasestr(h + 18, "chunked"))
			chunked = true;
		else if (!strncasecmp(h, "Content-Length:", 15))
			clen = strtol(h + 15, NULL, 10);
	}
	if (chunked) {
		long d = dechunk(body, blen);
		if (d < 0)
			return fail(56, "a malformed or cut chunked body from %s:%s", host, port);
		blen = (size_t)d;
	} else if (clen >= 0) {
		if ((size_t)clen > blen)
			return fail(56, "the body from %s:%s was cut (%zu of %ld bytes)", host, port, blen, clen);
		blen = (size_t)clen;
	}
	if (fwrite(body, 1, blen, stdout) != blen || fflush(stdout))
		return fail(23, "writing the body: %s", strerror(errno));
	fprintf(stderr, "%03d", code);
	return 0;
}

int main(int argc, char **argv)
{
	const char *method = "GET", *data = NULL, *cacert = NULL, *url = NULL;
	const char *headers[MAX_HEADERS];
	int nh = 0;
	long max_time = 60;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		if (!strcmp(a, "-X") && more)
			method = argv[++i];
		else if (!strcmp(a, "-H") && more && nh < MAX_HEADERS)
			headers[nh++] = argv[++i];
		else if (!strcmp(a, "--data-binary") && more)
			data = argv[++i];
		else if (!strcmp(a, "--cacert") && more)
			cacert = argv[++i];
		else if (!strcmp(a, "--max-time") && more) {
			char *end;
			max_time = strtol(argv[++i], &end, 10);
			if (*end || max_time < 1 || max_time > 86400)
				return fail(2, "--max-time %s: not a whole number of seconds from 1 to 86400", argv[i]);
		}
		else if (a[0] != '-' && !url)
			url = a;
		else
			return fail(2, "usage: kreq [-X METHOD] [-H 'Name: value']... [--data-binary BODY] "
				       "[--cacert FILE] [--max-time S] URL (at most %d -H)", MAX_HEADERS);
	}
	if (!url)
		return fail(2, "no URL");

	bool tls;
	const char *rest;
	if (!strncmp(url, "http://", 7))
		tls = false, rest = url + 7;
	else if (!strncmp(url, "https://", 8))
		tls = true, rest = url + 8;
	else
		return fail(2, "%s: not an http:// or https:// URL", url);
	const char *slash = strchr(rest, '/');
	const char *path = slash ? slash : "/";
	size_t hostport_len = slash ? (size_t)(slash - rest) : strlen(rest);
	char host[256], port[16];
	const char *colon = memchr(rest, ':', hostport_len);
	size_t hl = colon ? (size_t)(colon - rest) : hostport_len;
	size_t pl = colon ? hostport_len - hl - 1 : 0;
	if (hl == 0 || hl >= sizeof host || pl >= sizeof port)
		return fail(2, "%s: no host, or a host or port too long", url);
	memcpy(host, rest, hl);
	host[hl] = 0;
	if (colon) {
		memcpy(port, colon + 1, pl);
		port[pl] = 0;
	} else {
		strcpy(port, tls ? "443" : "80");
	}

	snprintf(timeout_msg, sizeof timeout_msg, "kreq: no complete response within %ld s\n000", max_time);
	signal(SIGALRM, on_alarm);
	alarm((unsigned)max_time);
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	int gai = getaddrinfo(host, port, &hints, &ai);
	if (gai)
		return fail(7, "%s:%s: %s", host, port, gai_strerror(gai));
	conn c = {.fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)};
	buf req = {0}, resp = {0};
	int rc = 0;
	if (c.fd < 0 || connect(c.fd, ai->ai_addr, ai->ai_addrlen) < 0)
		rc = fail(7, "connect %s:%s: %s", host, port, strerror(errno));
	freeaddrinfo(ai);
	if (!rc && tls)
		rc = tls_start(&c, host, port, cacert);
	if (!rc && !build_request(&req, method, path, host, port, headers, nh, data))
		rc = fail(2, "no memory for the request");
	if (!rc && conn_write(&c, req.p, req.n) < 0)
		rc = fail(56, "sending to %s:%s failed", host, port);
	if (!rc && conn_read_all(&c, &resp) < 0)
		rc = fail(56, "receiving from %s:%s failed", host, port);
	if (!rc)
		rc = answer(&resp, host, port);
	SSL_free(c.ssl);
	SSL_CTX_free(c.ctx);
	if (c.fd >= 0)
		close(c.fd);
	free(req.p);
	free(resp.p);
	return rc;
}
