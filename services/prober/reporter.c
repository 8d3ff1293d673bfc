/* gpukmm-prober — send decisions (see reporter.h). */
#include <stdlib.h>

#include "gpukmm/probe.h"
#include "reporter.h"

void gk_reporter_init(gk_reporter *r, int64_t min_backoff_ms, int64_t max_backoff_ms)
{
	*r = (gk_reporter){
		.min_backoff_ms = min_backoff_ms > 0 ? min_backoff_ms : 100,
		.max_backoff_ms = max_backoff_ms > 0 ? max_backoff_ms : 30000,
	};
	if (r->max_backoff_ms < r->min_backoff_ms)
		r->max_backoff_ms = r->min_backoff_ms;
}

void gk_reporter_fini(gk_reporter *r)
{
	gk_probe_report_free(r->pending);
	r->pending = NULL;
}

static enum gk_rep_action can_send(const gk_reporter *r)
{
	return r->pending && !r->in_flight && !r->retry_wait ? GK_REP_SEND : GK_REP_IDLE;
}

enum gk_rep_action gk_reporter_offer(gk_reporter *r, Gpukmm__NodeReport *rep, bool restate)
{
	r->probes++;
	uint64_t fp = gk_probe_fingerprint(rep);
	if (!r->have_last || fp != r->last_fp) {
		r->generation++;
		r->last_fp = fp;
		r->have_last = true;
	}
	rep->has_generation = 1;
	rep->generation = r->generation;
	if (r->have_acked && fp == r->acked_fp && !r->in_flight) {
		/* statusd already has this state: anything older pending goes; the
		 * report itself too, unless it is to be restated (statusd may have
		 * restarted since and lost it: it keeps a report only in memory) */
		r->unchanged++;
		gk_probe_report_free(r->pending);
		r->pending = NULL;
		if (!restate) {
			gk_probe_report_free(rep);
			return GK_REP_IDLE;
		}
		r->restated++;
		r->pending = rep;
		r->pending_fp = fp;
		return can_send(r);
	}
	if (r->pending) {
		if (!(r->in_flight && r->pending_fp == r->in_flight_fp))
			r->replaced++; /* superseded before it was sent */
		gk_probe_report_free(r->pending);
	}
	r->pending = rep;
	r->pending_fp = fp;
	return can_send(r);
}

const Gpukmm__NodeReport *gk_reporter_take_send(gk_reporter *r)
{
	if (!r->pending || r->in_flight)
		return NULL;
	r->in_flight = true;
	r->in_flight_fp = r->pending_fp;
	return r->pending;
}

int64_t gk_reporter_done(gk_reporter *r, int code)
{
	if (!r->in_flight)
		return -1;
	r->in_flight = false;
	if (code == 0) {
		r->sent++;
		r->backoff_ms = 0;
		r->acked_fp = r->in_flight_fp;
		r->have_acked = true;
		if (r->pending && r->pending_fp == r->acked_fp) {
			gk_probe_report_free(r->pending);
			r->pending = NULL;
		}
		return r->pending ? 0 : -1;
	}
	r->failed++;
	r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : r->min_backoff_ms;
	if (r->backoff_ms > r->max_backoff_ms)
		r->backoff_ms = r->max_backoff_ms;
	if (!r->pending)
		return -1;
	r->retry_wait = true;
	return r->backoff_ms;
}

enum gk_rep_action gk_reporter_retry_due(gk_reporter *r)
{
	r->retry_wait = false;
	return can_send(r);
}
