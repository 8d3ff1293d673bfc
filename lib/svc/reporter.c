/* lib/svc: StatusReport sending with a level-triggered retry (see reporter.h). */
#include <stdio.h>
#include <stdlib.h>

#include "gpukmm/log.h"

#include "gpukmm/reporter.h"

typedef struct report_ctx {
	gk_reporter *rp;
	char policy[256];
} report_ctx;

static void on_done(void *user, int code, ProtobufCMessage *reply, const char *errmsg)
{
	report_ctx *c = user;
	gk_reporter *rp = c->rp;
	if (reply)
		gk_ipc_free(reply);
	if (code == GK_OK) {
		rp->ok++;
	} else if (code != GK_CANCELLED) {
		rp->failed++;
		GK_DEBUG("status report for %s failed (%s): retrying", c->policy, errmsg ? errmsg : "");
		if (!(rp->stopping && *rp->stopping) &&
		    gk_wq_add_after(rp->q, c->policy, GK_REPORTER_RETRY_MS, gk_mono_ms(), NULL) == GK_OK)
			gk_wq_sched_kick(rp->qs);
	}
	free(c);
}

void gk_reporter_send(gk_reporter *rp, const Gpukmm__StatusReport *r)
{
	if (!rp->statusd || !r->policy)
		return;
	report_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->rp = rp;
	snprintf(c->policy, sizeof(c->policy), "%s", r->policy);
	gk_err e;
	if (gk_ipc_call_async(rp->statusd, &gpukmm__status__descriptor, "Report", &r->base, GK_REPORTER_TIMEOUT_MS,
			      on_done, c, &e) != GK_OK) {
		GK_WARN("status report for %s: %s", r->policy, e.msg);
		free(c);
	}
}
