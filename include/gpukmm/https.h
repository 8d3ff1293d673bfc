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
#include <time.h>

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
/* The validity period of the first certificate of cert_pem at `now`: 0 valid,
 * else -1 with a message ("... expired at ..." / "... not valid before ..."). */
int gk_tls_cert_current(const char *cert_pem, const char *cert_path, time_t now, char *msg, size_t cap);

/* A certificate/key pair on disk, noticed when either file changes. The pair
 * served is the last one gk_tls_files_served() confirmed; files that differ
 * from it are read again at every check until they serve (or change again). */
typedef struct gk_tls_files {
	const char *cert_path, *key_path;
	gk_tls_fileid cert_id, key_id;     /* the files served */
	gk_tls_fileid cand_cert, cand_key; /* the files of the last check */
	bool refused;                      /* cand_* were refused for bad_msg */
	gk_tls_fileid bad_cert, bad_key;
	char bad_msg[512];
} gk_tls_files;

/* First load (served from now on): 0, or -1 with msg. */
int gk_tls_files_load(gk_tls_files *f, char **cert, char **key, char *msg, size_t cap);
/* 1: the files differ from the served ones and the pair loaded (*cert, *key
 * set: serve it, then gk_tls_files_served); 0: unchanged; -1: they differ but
 * are not usable yet (msg; e.g. the cert written before the key). */
int gk_tls_files_check(gk_tls_files *f, char **cert, char **key, char *msg, size_t cap);
/* The pair of the last check serves now. */
void gk_tls_files_served(gk_tls_files *f);
/* The pair of the last check is refused for msg: true the first time for
 * these files and this reason (say it then), false when it was said already. */
bool gk_tls_files_refuse(gk_tls_files *f, const char *msg);

/* A self-signed serving certificate (ECDSA P-256, `days` valid from an hour
 * ago), subject CN=cn, subjectAltName the DNS names / IP addresses in sans
 * ("IP:127.0.0.1" or a DNS name). PEM texts malloc'd (free the key with
 * gk_tls_free_secret). What controller-runtime does when no certificate is
 * given: clients must then skip verification (Prometheus's
 * insecure_skip_verify) or pin it. */
int gk_tls_self_signed(const char *cn, const char *const *sans, size_t n_sans, int days, char **cert, char **key,
		       gk_err *err);

/* A certificate and its new key (ECDSA P-256, SHA-256, a random positive
 * 128-bit serial, subject/authority key identifiers). ca: a CA (CA:TRUE,
 * pathlen 0, keyCertSign + cRLSign; sans ignored); else a serving certificate
 * (CA:FALSE, digitalSignature, serverAuth, the subjectAltNames as in
 * gk_tls_self_signed). Signed by issuer_cert/issuer_key (PEM, both or
 * neither; neither = self-signed). PEM texts malloc'd (the key: free with
 * gk_tls_free_secret). */
typedef struct gk_tls_issue {
	const char *cn;
	const char *const *sans;
	size_t n_sans;
	bool ca;
	int64_t not_before, not_after;      /* unix seconds */
	const char *issuer_cert, *issuer_key;
} gk_tls_issue;
int gk_tls_issue_cert(const gk_tls_issue *o, char **cert, char **key, gk_err *err);

/* What the first certificate of a PEM text says: 0, or -1 when there is none. */
typedef struct gk_tls_info {
	int64_t not_before, not_after;      /* unix seconds */
	bool ca;
	char cn[128];
	char sha256[65];                    /* fingerprint, lower-case hex */
} gk_tls_info;
int gk_tls_cert_info(const char *pem, gk_tls_info *info);
/* The certificate is valid for that DNS name (subjectAltName; no wildcards). */
bool gk_tls_cert_has_dns(const char *pem, const char *dns);
/* leaf's issuer is ca's subject and ca's key signed it. */
bool gk_tls_cert_issued_by(const char *leaf_pem, const char *ca_pem);
/* The key belongs to the (first) certificate: 0; -1 no certificate, -2 no
 * key, -3 they do not match (msg says which, never key material). */
int gk_tls_pair_check(const char *cert_pem, const char *key_pem, char *msg, size_t cap);
/* The certificates of a PEM bundle, each a malloc'd PEM text in out[] (at
 * most max); returns how many. */
size_t gk_tls_pem_split(const char *bundle, char **out, size_t max);

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
	int d_fd;                                /* d's duplicate of listen_fd */
	struct MHD_Daemon *old;                  /* draining after a swap */
	int old_fd;
	int64_t old_deadline_ms;
	uint64_t reloads;                        /* swaps done */
} gk_httpd;

/* Initial value: no socket yet. */
#define GK_HTTPD_INIT { .listen_fd = -1, .d_fd = -1, .old_fd = -1 }

/* "ADDR:PORT", "[v6]:PORT" or ":PORT" (all addresses); port 0 = ephemeral
 * (h->port). `flag` names the option in errors ("--listen"). */
int gk_httpd_listen(gk_httpd *h, const char *addr, const char *flag, gk_err *err);
/* cert/key (PEM) when h->tls, else NULL. */
int gk_httpd_start(gk_httpd *h, const char *cert, const char *key, gk_err *err);
/* A new daemon with a new certificate on the same socket; on failure (e.g.
 * the TLS library refuses the pair: INVALID_ARGUMENT) the current daemon
 * serves on, untouched. */
int gk_httpd_swap(gk_httpd *h, const char *cert, const char *key, int64_t now_ms, gk_err *err);
/* Stops a draining daemon once idle or past its deadline. */
void gk_httpd_reap(gk_httpd *h, int64_t now_ms);
void gk_httpd_stop(gk_httpd *h);

#endif
