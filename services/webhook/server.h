/* gpukmm-webhook: the HTTP(S) request handler on a lib/https server (its own
 * polling thread; a certificate change starts a new daemon on the same socket,
 * and only once it runs does the old one stop accepting; a certificate the TLS
 * library refuses leaves the old daemon as it was: gpukmm/https.h). */
#ifndef GPUKMM_WEBHOOK_SERVER_H
#define GPUKMM_WEBHOOK_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/https.h"
#include "gpukmm/policy.h"

typedef struct gk_wh_counters {
	uint64_t requests;     /* admission requests (mutate + validate) */
	uint64_t allowed;
	uint64_t denied;
	uint64_t errors;       /* 400, 404/405, 413, 415, 500 answers */
	uint64_t cert_checks;  /* times the certificate files were looked at */
	uint64_t cert_refused; /* certificate files refused (each version and reason counted once) */
	uint64_t cert_stale;   /* gauge: 1 while the files on disk are refused and the old pair serves */
	uint64_t refused;      /* reviews refused unparsed: too many values, too deep, no room to buffer */
	uint64_t buffered;     /* gauge: bytes held for request bodies being received */
} gk_wh_counters;

typedef struct gk_wh_server {
	gk_httpd http;         /* listen / start / swap / reap / stop: gpukmm/https.h */
	size_t max_body;
	size_t max_buffered;   /* every body being received at once, together */
	size_t max_values;     /* JSON values in one review (0: GK_WH_SCAN_MAX_VALUES) */
	gk_policy_opts popts;
	gk_wh_counters c;      /* updated atomically from the server thread */
	pthread_mutex_t note_mu;     /* note: written by the main loop, read by /readyz */
	char note[512];              /* why the certificate on disk is not served ("" = it is) */
} gk_wh_server;

/* Points s->http at the admission handler (and declares the admission
 * metrics); then gk_httpd_listen / gk_httpd_start on &s->http. */
void gk_wh_setup(gk_wh_server *s);
/* What /readyz adds to its "ok" (NULL or "" = nothing): why the certificate
 * files are not the ones served. Sets the cert_stale gauge accordingly. */
void gk_wh_set_note(gk_wh_server *s, const char *note);

#endif
