/* gpukmm-prober — what to send to statusd and when (pure: no I/O, no clock).
 *
 * The latest report wins: one pending report at most (bounded memory); a new
 * probe result replaces a pending one that was not acknowledged yet. A report
 * whose fingerprint equals the last one statusd acknowledged is not resent,
 * unless the caller restates it (the prober does on every interval probe):
 * statusd keeps the report in memory only, so one restarted after it
 * acknowledged a report (kill -9, its container restarted) has nothing to hand
 * in until it is told again; statusd ignores a restated report it holds.
 * `generation` increases whenever the fingerprint changes. Failed sends are
 * retried with exponential backoff (min → ×2 → max), reset by a success. */
#ifndef GPUKMM_PROBER_REPORTER_H
#define GPUKMM_PROBER_REPORTER_H

#include <stdbool.h>
#include <stdint.h>

#include "status.pb-c.h"

typedef struct gk_reporter {
	Gpukmm__NodeReport *pending;   /* owned; NULL when nothing to send */
	uint64_t pending_fp;
	uint64_t last_fp;              /* fingerprint of the last probe result seen */
	bool have_last;
	uint64_t acked_fp;             /* fingerprint statusd acknowledged last */
	bool have_acked;
	bool in_flight;
	uint64_t in_flight_fp;
	bool retry_wait;               /* a retry timer is armed */
	uint64_t generation;
	int64_t backoff_ms, min_backoff_ms, max_backoff_ms;
	/* counters (heartbeats) */
	uint64_t probes, sent, failed, unchanged, replaced, restated;
} gk_reporter;

enum gk_rep_action { GK_REP_IDLE = 0, GK_REP_SEND = 1 };

void gk_reporter_init(gk_reporter *r, int64_t min_backoff_ms, int64_t max_backoff_ms);
void gk_reporter_fini(gk_reporter *r);
/* A new probe result; takes ownership of rep (sets rep->generation).
 * `restate`: send it even when statusd acknowledged the same state already.
 * GK_REP_SEND: start a send now (gk_reporter_take_send). */
enum gk_rep_action gk_reporter_offer(gk_reporter *r, Gpukmm__NodeReport *rep, bool restate);
/* The report to send now (still owned by the reporter; valid until the next
 * offer/done call); marks it in flight. NULL when nothing to send. */
const Gpukmm__NodeReport *gk_reporter_take_send(gk_reporter *r);
/* The send finished with gk code `code`. Returns -1: nothing to do,
 * 0: send again now (a newer report is pending), >0: arm a retry timer of
 * that many ms and call gk_reporter_retry_due when it fires. */
int64_t gk_reporter_done(gk_reporter *r, int code);
enum gk_rep_action gk_reporter_retry_due(gk_reporter *r);

#endif
