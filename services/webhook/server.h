/* gpukmm-webhook: the HTTP(S) request handler on a lib/https server (its own
 * polling thread; a certificate change swaps the daemon on the same socket). */
#ifndef GPUKMM_WEBHOOK_SERVER_H
#define GPUKMM_WEBHOOK_SERVER_H

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
} gk_wh_counters;

typedef struct gk_wh_server {
	gk_httpd http;         /* listen / start / swap / reap / stop: gpukmm/https.h */
	size_t max_body;
	gk_policy_opts popts;
	gk_wh_counters c;      /* updated atomically from the server thread */
} gk_wh_server;

/* Points s->http at the admission handler (and declares the admission
 * metrics); then gk_httpd_listen / gk_httpd_start on &s->http. */
void gk_wh_setup(gk_wh_server *s);

#endif
