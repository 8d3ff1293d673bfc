/* gpukmm — the skeleton of a controller service (lib/svc/ctl.c): what gater,
 * modmgr, opmgr, upgrader and certd shared line for line in their main.c.
 *
 *   - the command line (gk_svc, with the service's own options), a check of
 *     them (exit 2), and --events / --watcher required;
 *   - the view on the watcher bus (lib/wsub): the service's reset/apply, then
 *     after each rebuild its log line, Ready to the supervisor on the first
 *     one and the passes kicked;
 *   - the work queue on the loop (gk_wq + gk_wq_sched): the views mark keys
 *     dirty through gk_ctl_dirty, passes run while the view is synced and the
 *     service is not stopping (and the service's own may() allows), a pass's
 *     end requeues its key (gk_ctl_requeue: the failure backoff, or the
 *     requeue the pass asked for);
 *   - the StatusReport client to statusd (gk_reporter, when --statusd is set);
 *   - the metrics every controller exports: gpukmm_<name>_snapshots_total,
 *     _bus_gaps_total, _events_received_total, _reports_{ok,failed}_total,
 *     _queue_depth, _queue_refused_total;
 *   - the run ("stopping" logged) and the teardown in order.
 *
 * A service's main() on it:
 *
 *     rc = gk_ctl_init(&s->c, &cfg, argc, argv, extra, &err);
 *     if (rc) return rc;                          // 2: usage; 1: logged
 *     ... its view (dirty: gk_ctl_dirty, &s->c), its writer ...
 *     if (gk_ctl_start(&s->c, &err)) goto fail;  // statusd, the bus, metrics
 *     ... its own metrics, "started" ...
 *     rc = gk_ctl_run(&s->c);
 *   out:
 *     gk_ctl_stop(&s->c);                         // the bus and statusd closed
 *     ... frees its view and writer ...
 *     gk_ctl_fini(&s->c);                         // queue, gk_svc, gk_ipc_fini
 *
 * A service without a queue (certd: cfg.pass NULL) gets the flags, the bus,
 * the run and the teardown; no queue, no reports, no metrics, and it says
 * Ready itself. */
#ifndef GPUKMM_CTL_H
#define GPUKMM_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.pb-c.h"
#include "gpukmm/err.h"
#include "gpukmm/reporter.h"
#include "gpukmm/svc.h"
#include "gpukmm/workqueue.h"
#include "gpukmm/wqsched.h"
#include "gpukmm/wsub.h"
#include "rpc.pb-c.h"

typedef struct gk_ctl_cfg {
	const char *name;                   /* gpukmm-<name>; metrics gpukmm_<name>_* */
	const char *const *topics;          /* bus topics (string constants) */
	size_t n_topics;
	void *user;                         /* every callback's first argument */
	/* After the flags: NULL, or what is wrong with them (logged, exit 2).
	 * Runs before the --events/--watcher check. May be NULL. */
	const char *(*check)(void *user);
	/* The view (gk_wsub_view's reset and apply; required). */
	int (*reset)(void *user, const Gpukmm__SnapshotReply *s, gk_err *err);
	int (*apply)(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err);
	/* After each rebuild, before Ready and the kick: log the view. May be NULL. */
	void (*rebuilt)(void *user);
	/* A key from the queue. NULL: no queue (nor reports, metrics, Ready). */
	void (*pass)(void *user, const char *key);
	/* The pass ends later (it calls gk_wq_done and kicks itself); else the
	 * key is done when pass returns. */
	bool pass_async;
	/* "Not now" besides an unsynced view or a stop (e.g. no free slot). May be NULL. */
	bool (*may)(void *user);
	int per_tick;                       /* keys per queue tick; 0 = 32 */
} gk_ctl_cfg;

typedef struct gk_ctl {
	gk_svc svc;
	gk_wsub *bus;
	gk_wq *q;                           /* NULL without cfg.pass */
	gk_wq_sched qs;
	gk_reporter rep;                    /* rep.statusd NULL: no reports */
	uint64_t queue_refused;
	gk_ctl_cfg cfg;
} gk_ctl;

/* Flags (gk_svc_init with extra), cfg.check, --events/--watcher, the queue.
 * 0; 2 after a usage error was printed or logged; 1 after a logged failure
 * (everything freed: the caller returns the code). */
int gk_ctl_init(gk_ctl *c, const gk_ctl_cfg *cfg, int argc, char **argv, const gk_svc_opt *extra, gk_err *err);
/* The statusd client (with a queue and --statusd), the bus, the common metrics. */
int gk_ctl_start(gk_ctl *c, gk_err *err);
/* Runs the loop until the stop; logs "stopping". Returns the loop's code. */
int gk_ctl_run(gk_ctl *c);
/* Stopping set, the bus closed (an outstanding snapshot cancelled: call it
 * before the view is freed), the statusd client closed. */
void gk_ctl_stop(gk_ctl *c);
/* The queue, gk_svc, then gk_ipc_fini (last). */
void gk_ctl_fini(gk_ctl *c);

/* A view's dirty callback (user: the gk_ctl): the key queued, the queue kicked;
 * a key the bounded queue refuses is logged and counted. */
void gk_ctl_dirty(void *ctl, const char *key);
/* The same, the key due after ms (an earlier deadline is kept). */
void gk_ctl_dirty_after(gk_ctl *c, const char *key, int64_t ms);
/* A pass of key ended: failed, again after the key's failure backoff (returned,
 * ms); else its backoff forgotten and, with after_ms > 0, again after that. */
int64_t gk_ctl_requeue(gk_ctl *c, const char *key, bool failed, int64_t after_ms);

/* --kube-qps, the same in every service that writes through lib/kube. */
int gk_ctl_opt_qps(void *qps, const char *arg);
#define GK_CTL_OPT_KUBE_QPS(qps_ptr)                                                                      \
	{ "kube-qps", 1, "client-side API request limit per second (default 50, burst 100; < 0 = none)", \
	  gk_ctl_opt_qps, (qps_ptr) }

#endif
