/* gpukmm — sending a service's StatusReport to statusd (Status.Report), the
 * same way in every reporting service: asynchronous on the service's IPC
 * client, and level-triggered on failure — the policy is put back on the work
 * queue after a delay, so the next pass recomputes the report and sends it
 * again (nothing is resent as it was: the newest state always wins). */
#ifndef GPUKMM_REPORTER_H
#define GPUKMM_REPORTER_H

#include <stdint.h>

#include "gpukmm/ipc.h"
#include "gpukmm/workqueue.h"
#include "gpukmm/wqsched.h"
#include "status.pb-c.h"

#define GK_REPORTER_TIMEOUT_MS 5000
#define GK_REPORTER_RETRY_MS 2000

typedef struct gk_reporter {
	gk_ipc_client *statusd;   /* NULL: reports are not sent */
	gk_wq *q;                 /* where a policy goes back after a failed report */
	gk_wq_sched *qs;
	const int *stopping;      /* no retry once set (the service's gk_svc.stopping) */
	uint64_t ok, failed;
} gk_reporter;

/* Send r (copied) for r->policy. */
void gk_reporter_send(gk_reporter *rp, const Gpukmm__StatusReport *r);

#endif
