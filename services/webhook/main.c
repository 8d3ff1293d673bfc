/* gpukmm-webhook — the ClusterPolicy admission webhook (AdmissionReview v1 over
 * HTTPS): POST /mutate-intel-com-v1alpha1-clusterpolicy defaults
 * kernelModule.moduleName, POST /validate-intel-com-v1alpha1-clusterpolicy
 * applies lib/policy's rules; GET /healthz. Serving certificate files are
 * re-read when they change. */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "gpukmm/svc.h"
#include "server.h"

#define DEFAULT_LISTEN ":9443"

struct app {
	gk_svc svc;
	gk_wh_server srv;
	gk_tls_files certs;                /* the files served, and the last refused (gpukmm/https.h) */
	const char *port_file, *service_account;
	int insecure_http;
	int tls_wait;                      /* --tls-wait: no files yet, not ready until they come */
	bool serving;
	long reload_ms;
	uint64_t cert_not_after;           /* of the certificate served, unix seconds */
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int opt_str(void *user, const char *arg)
{
	*(const char **)user = arg;
	return 0;
}

static int opt_flag(void *user, const char *arg)
{
	*(int *)user = 1;
	return 0;
}

static int opt_long(void *user, const char *arg)
{
	char *end;
	long v = strtol(arg, &end, 10);
	if (!*arg || *end || v <= 0)
		return -1;
	*(long *)user = v;
	return 0;
}

static int opt_size(void *user, const char *arg)
{
	long v;
	if (opt_long(&v, arg) || v > (64L << 20))
		return -1;
	*(size_t *)user = (size_t)v;
	return 0;
}

/* The files on disk are not served: say why once per version and reason
 * (they are read again at every check until they change or become usable, e.g.
 * a key written after its certificate, a certificate not valid yet). */
static void refuse(struct app *a, const char *msg)
{
	if (!gk_tls_files_refuse(&a->certs, msg))
		return;
	GK_WARN("new certificate files not usable yet, the previous certificate is still served: %s", msg);
	__atomic_fetch_add(&a->srv.c.cert_refused, 1, __ATOMIC_RELAXED);
	char note[600];
	snprintf(note, sizeof(note), "certificate files not served (the previous certificate is): %s", msg);
	gk_wh_set_note(&a->srv, note);
}

static void note_expiry(struct app *a, const char *cert)
{
	int64_t t = gk_tls_not_after(cert);
	a->cert_not_after = t > 0 ? (uint64_t)t : 0;
}

static int start_serving(struct app *a, const char *cert, const char *key, gk_err *err);

/* --tls-wait: the files are made by someone else after we start
 * (gpukmm-certd): look for them at every check, serve once they load. */
static void wait_certs(struct app *a)
{
	char *cert = NULL, *key = NULL, msg[512];
	if (gk_tls_files_load(&a->certs, &cert, &key, msg, sizeof(msg)) != 0) {
		if (gk_tls_files_refuse(&a->certs, msg))
			GK_INFO("waiting for the serving certificate: %s", msg);
		return;
	}
	gk_err err;
	note_expiry(a, cert);
	if (start_serving(a, cert, key, &err) != 0)
		GK_WARN("%s", err.msg);
	free(cert);
	gk_tls_free_secret(key);
}

static void check_certs(gk_loop *l, gk_timer_id id, void *user)
{
	struct app *a = user;
	__atomic_fetch_add(&a->srv.c.cert_checks, 1, __ATOMIC_RELAXED);
	if (!a->serving) {
		wait_certs(a);
		gk_loop_timer(l, a->reload_ms, check_certs, a);
		return;
	}
	char *cert = NULL, *key = NULL, msg[512] = "";
	int r = gk_tls_files_check(&a->certs, &cert, &key, msg, sizeof(msg));
	if (r > 0) {
		gk_err err;
		if (gk_tls_cert_current(cert, a->certs.cert_path, time(NULL), msg, sizeof(msg)) != 0) {
			/* msg says why: an expired certificate would fail every handshake */
		} else if (gk_httpd_swap(&a->srv.http, cert, key, now_ms(), &err) == 0) {
			GK_INFO("serving the new certificate from %s", a->certs.cert_path);
			gk_tls_files_served(&a->certs);
			note_expiry(a, cert);
			gk_wh_set_note(&a->srv, NULL);
		} else {
			snprintf(msg, sizeof(msg), "%s", err.msg);
		}
		free(cert);
		gk_tls_free_secret(key);
	}
	if (r != 0 && msg[0])
		refuse(a, msg);
	gk_httpd_reap(&a->srv.http, now_ms());
	gk_loop_timer(l, a->reload_ms, check_certs, a);
}

static int write_port_file(const char *path, int port)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

static int start_serving(struct app *a, const char *cert, const char *key, gk_err *err)
{
	if (gk_httpd_start(&a->srv.http, cert, key, err) != 0)
		return -1;
	a->serving = true;
	if (a->port_file && write_port_file(a->port_file, a->srv.http.port) != 0)
		GK_WARN("cannot write --port-file %s", a->port_file);
	GK_INFO("serving admission reviews on port %d (%s)", a->srv.http.port, a->srv.http.tls ? "https" : "http");
	gk_svc_ready(&a->svc);
	return 0;
}

int main(int argc, char **argv)
{
	static struct app a = { .reload_ms = 2000,
				.srv = { .http = GK_HTTPD_INIT, .max_body = 3u << 20, .note_mu = PTHREAD_MUTEX_INITIALIZER } };
	gk_err err;
	const gk_svc_opt extra[] = {
		{ "tls-cert", 1, "serving certificate (PEM), re-read when it changes", opt_str, &a.certs.cert_path },
		{ "tls-key", 1, "private key of the serving certificate (PEM)", opt_str, &a.certs.key_path },
		{ "insecure-http", 0, "plain HTTP instead of HTTPS: for tests only", opt_flag, &a.insecure_http },
		{ "tls-wait", 0, "the certificate files may not exist yet (gpukmm-certd writes them): wait for them, "
				 "not ready until they serve", opt_flag, &a.tls_wait },
		{ "max-body-bytes", 1, "largest AdmissionReview accepted (default 3145728, the API server's own request limit)",
		  opt_size, &a.srv.max_body },
		{ "max-buffered-bytes", 1,
		  "request bodies held at once, all connections together; a review past it is refused with 429 "
		  "(default 4 x --max-body-bytes)",
		  opt_size, &a.srv.max_buffered },
		{ "cert-check-ms", 1, "how often the certificate files are checked (default 2000)", opt_long, &a.reload_ms },
		{ "port-file", 1, "write the listening port to this file (for --listen with port 0)", opt_str, &a.port_file },
		{ "service-account", 1, "module-loader ServiceAccount (only used in messages; default module-loader)",
		  opt_str, &a.service_account },
		{ 0 },
	};
	int rc = gk_svc_init(&a.svc, "webhook", argc, argv, extra, &err);
	if (rc)
		return rc;
	const char *listen = a.svc.addr.listen;
	if (!listen || strncmp(listen, "ipc://", 6) == 0)
		listen = DEFAULT_LISTEN; /* the runtime-dir default is an RPC socket; we serve HTTPS */
	gk_wh_setup(&a.srv);
	a.srv.http.tls = !a.insecure_http;
	if (!a.srv.max_buffered)
		a.srv.max_buffered = 4 * a.srv.max_body;
	if (a.srv.max_buffered < a.srv.max_body + 1)
		a.srv.max_buffered = a.srv.max_body + 1; /* one review of the largest size always fits */
	a.srv.popts.namespace_ = a.svc.ns;
	a.srv.popts.service_account = a.service_account;
	char *cert = NULL, *key = NULL;
	if (a.srv.http.tls) {
		char msg[512];
		if (!a.certs.cert_path || !a.certs.key_path) {
			GK_ERROR("--tls-cert and --tls-key are required (or --insecure-http, for tests only)");
			gk_svc_fini(&a.svc);
			return 2;
		}
		if (gk_tls_files_load(&a.certs, &cert, &key, msg, sizeof(msg)) != 0) {
			if (!a.tls_wait) {
				GK_ERROR("%s", msg);
				gk_svc_fini(&a.svc);
				return 1;
			}
			gk_tls_files_refuse(&a.certs, msg);
			GK_INFO("waiting for the serving certificate: %s", msg);
		} else {
			note_expiry(&a, cert);
			/* served all the same: nothing better is at hand, and a good one is
			 * picked up when it comes */
			if (gk_tls_cert_current(cert, a.certs.cert_path, time(NULL), msg, sizeof(msg)) != 0)
				GK_WARN("%s: the API server will refuse it", msg);
		}
	} else {
		GK_WARN("*** --insecure-http: serving AdmissionReviews WITHOUT TLS. The API server requires HTTPS; "
			"use this only in tests. ***");
	}
	/* (admissions by webhook and result, with their latency: server.c) */
	gk_metric_counter_var("gpukmm_webhook_refused_total",
			      "Reviews refused unparsed: too many JSON values, nested too deep, or no room to buffer.",
			      &a.srv.c.refused);
	gk_metric_gauge_var("gpukmm_webhook_buffered_bytes", "Request body bytes held.", &a.srv.c.buffered);
	if (a.srv.http.tls) {
		gk_metric_counter_var("gpukmm_webhook_cert_reloads_total", "Serving certificate reloads.",
				      &a.srv.http.reloads);
		gk_metric_counter_var("gpukmm_webhook_cert_checks_total", "Times the certificate files were checked.",
				      &a.srv.c.cert_checks);
		gk_metric_counter_var("gpukmm_webhook_cert_refused_total",
				      "Certificate files refused (expired, mismatched, unreadable, refused by the TLS "
				      "library), each version and reason once.",
				      &a.srv.c.cert_refused);
		gk_metric_gauge_var("gpukmm_webhook_cert_stale",
				    "1 while the certificate files are refused and the previous certificate serves.",
				    &a.srv.c.cert_stale);
		gk_metric_gauge_var("gpukmm_webhook_cert_expiry_timestamp_seconds",
				    "notAfter of the serving certificate, unix seconds.", &a.cert_not_after);
	}
	/* the port is bound at once; served when a certificate is at hand */
	if (gk_httpd_listen(&a.srv.http, listen, "--listen", &err) != 0 ||
	    ((cert || !a.srv.http.tls) && start_serving(&a, cert, key, &err) != 0)) {
		GK_ERROR("%s", err.msg);
		free(cert);
		gk_tls_free_secret(key);
		gk_httpd_stop(&a.srv.http);
		gk_svc_fini(&a.svc);
		return 1;
	}
	free(cert);
	gk_tls_free_secret(key);
	if (a.srv.http.tls)
		gk_loop_timer(a.svc.loop, a.reload_ms, check_certs, &a);
	rc = gk_loop_run(a.svc.loop);
	GK_INFO("stopping: %llu requests, %llu allowed, %llu denied, %llu errors",
		(unsigned long long)a.srv.c.requests, (unsigned long long)a.srv.c.allowed,
		(unsigned long long)a.srv.c.denied, (unsigned long long)a.srv.c.errors);
	gk_httpd_stop(&a.srv.http);
	gk_svc_fini(&a.svc);
	gk_ipc_fini();
	return rc;
}
