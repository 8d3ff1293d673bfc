/* gpukmm-webhook: the HTTP(S) server (libmicrohttpd, its own polling thread).
 * The listening socket is ours; a certificate change starts a new daemon on the
 * same socket (new connections get the new certificate), and only once it runs
 * does the old daemon stop accepting; it is stopped once its connections are
 * done. A certificate the TLS library refuses leaves the old daemon as it was. */
#ifndef GPUKMM_WEBHOOK_SERVER_H
#define GPUKMM_WEBHOOK_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/policy.h"

struct MHD_Daemon;

typedef struct gk_wh_counters {
	uint64_t requests;     /* admission requests (mutate + validate) */
	uint64_t allowed;
	uint64_t denied;
	uint64_t errors;       /* 400, 404/405, 413, 415, 500 answers */
	uint64_t reloads;      /* certificate reloads served */
	uint64_t cert_checks;  /* times the certificate files were looked at */
	uint64_t cert_refused; /* certificate files refused (each version and reason counted once) */
	uint64_t cert_stale;   /* gauge: 1 while the files on disk are refused and the old pair serves */
	uint64_t refused;      /* reviews refused unparsed: too many values, too deep, no room to buffer */
	uint64_t buffered;     /* gauge: bytes held for request bodies being received */
} gk_wh_counters;

typedef struct gk_wh_server {
	int listen_fd;
	int port;
	bool tls;
	size_t max_body;
	size_t max_buffered;   /* every body being received at once, together */
	size_t max_values;     /* JSON values in one review (0: GK_WH_SCAN_MAX_VALUES) */
	gk_policy_opts popts;
	gk_wh_counters c;      /* updated atomically from the server thread */
	struct MHD_Daemon *d;
	int d_fd;                    /* d's duplicate of listen_fd */
	struct MHD_Daemon *old;      /* draining after a reload */
	int old_fd;
	int64_t old_deadline_ms;
	pthread_mutex_t note_mu;     /* note: written by the main loop, read by /readyz */
	char note[512];              /* why the certificate on disk is not served ("" = it is) */
} gk_wh_server;

/* "ADDR:PORT", "[v6]:PORT" or ":PORT"; port 0 = ephemeral (see s->port). */
int gk_wh_listen(gk_wh_server *s, const char *addr, gk_err *err);
/* cert/key NULL when !s->tls. */
int gk_wh_start(gk_wh_server *s, const char *cert, const char *key, gk_err *err);
/* New daemon with a new certificate on the same socket; on failure the
 * current daemon serves on, untouched. */
int gk_wh_swap(gk_wh_server *s, const char *cert, const char *key, int64_t now_ms, gk_err *err);
/* What /readyz adds to its "ok" (NULL or "" = nothing): why the certificate
 * files are not the ones served. Sets the cert_stale gauge accordingly. */
void gk_wh_set_note(gk_wh_server *s, const char *note);
/* Stops a draining daemon once idle or past its deadline. */
void gk_wh_reap(gk_wh_server *s, int64_t now_ms);
void gk_wh_stop(gk_wh_server *s);

#endif
