/* gpukmm — serving HTTPS: certificate files (loaded, checked, watched for
 * change), a self-signed certificate when none is given, and a libmicrohttpd
 * server on a listening socket of our own, so a new certificate is served by
 * a new daemon on the same socket without a gap (the old one drains).
 * Used by the webhook and by the supervisor's /metrics. */
#ifndef GPUKMM_HTTPS_H
#define GPUKMM_HTTPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <microhttpd.h>

#include "gpukmm/err.h"

/* ---- certificate files ------------------------------------------------------ */

/* Which file a path is now (a Secret volume update swaps a symlink). */
typedef struct gk_tls_fileid {
	bool ok;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
} gk_tls_fileid;

void gk_tls_fileid_get(const char *path, gk_tls_fileid *id);
bool gk_tls_fileid_eq(const gk_tls_fileid *a, const gk_tls_fileid *b);

/* Reads both PEM files (each at most 1 MiB) and checks that the key belongs to
 * the first certificate. 0 ok (*cert, *key malloc'd; free the key with
 * gk_tls_free_secret), else -1 with a message (never containing key material). */
int gk_tls_load_pair(const char *cert_path, const char *key_path, char **cert, char **key, char *msg, size_t cap);
void gk_tls_free_secret(char *s);
/* notAfter of the first certificate of a PEM text, unix seconds; -1 if none. */
int64_t gk_tls_not_after(const char *cert_pem);

/* A certificate/key pair on disk, noticed when either file changes. */
typedef struct gk_tls_files {
	const char *cert_path, *key_path;
	gk_tls_fileid cert_id, key_id;
} gk_tls_files;

/* First load (ids remembered): 0, or -1 with msg. */
int gk_tls_files_load(gk_tls_files *f, char **cert, char **key, char *msg, size_t cap);
/* 1: a file changed and the new pair loaded (*cert, *key set; ids updated);
 * 0: unchanged; -1: changed but not usable yet (msg; e.g. the cert written
 * before the key): checked again next time. */
int gk_tls_files_check(gk_tls_files *f, char **cert, char **key, char *msg, size_t cap);

/* A self-signed serving certificate (ECDSA P-256, `days` valid from an hour
 * ago), subject CN=cn, subjectAltName the DNS names / IP addresses in sans
 * ("IP:127.0.0.1" or a DNS name). PEM texts malloc'd (free the key with
 * gk_tls_free_secret). What controller-runtime does when no certificate is
 * given: clients must then skip verification (Prometheus's
 * insecure_skip_verify) or pin it. */
int gk_tls_self_signed(const char *cn, const char *const *sans, size_t n_sans, int days, char **cert, char **key,
		       gk_err *err);

/* ---- the server ---------------------------------------------------------------- */

typedef struct gk_httpd_opts {
	MHD_AccessHandlerCallback handler;
	void *cls;
	MHD_RequestCompletedCallback completed;  /* may be NULL; gets cls too */
	unsigned conn_limit;                     /* 0 = 64 */
	unsigned timeout_s;                      /* idle connection timeout, 0 = 30 */
	bool suspend_resume;                     /* MHD_ALLOW_SUSPEND_RESUME */
	int drain_ms;                            /* an old daemon's grace after a swap, 0 = 10000 */
} gk_httpd_opts;

typedef struct gk_httpd {
	int listen_fd;                           /* -1 until gk_httpd_listen */
	int port;                                /* bound port (after port 0) */
	bool tls;                                /* set before gk_httpd_start */
	gk_httpd_opts o;
	struct MHD_Daemon *d;
	struct MHD_Daemon *old;                  /* draining after a swap */
	int64_t old_deadline_ms;
	uint64_t reloads;                        /* swaps done */
} gk_httpd;

/* "ADDR:PORT", "[v6]:PORT" or ":PORT" (all addresses); port 0 = ephemeral
 * (h->port). `flag` names the option in errors ("--listen"). */
int gk_httpd_listen(gk_httpd *h, const char *addr, const char *flag, gk_err *err);
/* cert/key (PEM) when h->tls, else NULL. */
int gk_httpd_start(gk_httpd *h, const char *cert, const char *key, gk_err *err);
/* A new daemon with a new certificate on the same socket. */
int gk_httpd_swap(gk_httpd *h, const char *cert, const char *key, int64_t now_ms, gk_err *err);
/* Stops a draining daemon once idle or past its deadline. */
void gk_httpd_reap(gk_httpd *h, int64_t now_ms);
void gk_httpd_stop(gk_httpd *h);

#endif
