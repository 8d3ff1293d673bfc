/* gpukmm — the skeleton of a controller service (see include/gpukmm/ctl.h). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "gpukmm/ctl.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"

/* ---- the queue ----------------------------------------------------------------- */

/* Passes wait for a consistent view (a rebuild kicks the queue again), stop
 * with the service, and wait for what the service's own may() waits for. */
static bool may_pass(void *user)
{
	gk_ctl *c = user;
	return gk_wsub_synced(c->bus) && !c->svc.stopping && (!c->cfg.may || c->cfg.may(c->cfg.user));
}

static void on_key(void *user, const char *key)
{
	gk_ctl *c = user;
	c->cfg.pass(c->cfg.user, key);
	if (!c->cfg.pass_async)
		gk_wq_done(c->q, key);
}

void gk_ctl_dirty(void *ctl, const char *key)
{
	gk_ctl *c = ctl;
	gk_err e;
	if (gk_wq_add(c->q, key, &e) != GK_OK) {
		c->queue_refused++;
		GK_WARN("queue: %s", e.msg);
	}
	gk_wq_sched_kick(&c->qs); /* also marks outside of any bus event (a write that ended) */
}

void gk_ctl_dirty_after(gk_ctl *c, const char *key, int64_t ms)
{
	gk_err e;
	if (gk_wq_add_after(c->q, key, ms, gk_mono_ms(), &e) != GK_OK) {
		c->queue_refused++;
		GK_WARN("queue: %s", e.msg);
	}
	gk_wq_sched_kick(&c->qs);
}

int64_t gk_ctl_requeue(gk_ctl *c, const char *key, bool failed, int64_t after_ms)
{
	int64_t now = gk_mono_ms(), d = 0;
	if (failed) {
		gk_wq_add_rate_limited(c->q, key, now, &d, NULL);
		return d;
	}
	gk_wq_forget(c->q, key);
	if (after_ms > 0)
		gk_wq_add_after(c->q, key, after_ms, now, NULL);
	return 0;
}

/* ---- the view (lib/wsub) ------------------------------------------------------- */

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	gk_ctl *c = user;
	return c->cfg.reset(c->cfg.user, s, err);
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	gk_ctl *c = user;
	return c->cfg.apply(c->cfg.user, topic, ev, err);
}

static void view_resynced(void *user, bool first)
{
	gk_ctl *c = user;
	if (c->cfg.rebuilt)
		c->cfg.rebuilt(c->cfg.user);
	if (!c->q)
		return;
	if (first)
		gk_svc_ready(&c->svc);
	gk_wq_sched_kick(&c->qs);
}

/* ---- life cycle ------------------------------------------------------------------ */

int gk_ctl_init(gk_ctl *c, const gk_ctl_cfg *cfg, int argc, char **argv, const gk_svc_opt *extra, gk_err *err)
{
	c->cfg = *cfg;
	c->bus = NULL;
	c->q = NULL;
	c->rep = (gk_reporter){ 0 };
	c->queue_refused = 0;
	int rc = gk_svc_init(&c->svc, cfg->name, argc, argv, extra, err);
	if (rc)
		return rc;
	const char *bad = cfg->check ? cfg->check(cfg->user) : NULL;
	if (!bad && (!c->svc.addr.events || !c->svc.addr.watcher))
		bad = "--events and --watcher (or --runtime-dir) are required";
	if (bad) {
		GK_ERROR("%s", bad);
		gk_svc_fini(&c->svc);
		return 2;
	}
	if (!cfg->pass)
		return 0;
	if (gk_wq_new(&c->q, NULL, err)) {
		GK_ERROR("%s", err->msg);
		gk_ctl_fini(c);
		return 1;
	}
	const gk_wq_sched_opts so = { .per_tick = cfg->per_tick, .may = may_pass, .run = on_key, .user = c };
	gk_wq_sched_init(&c->qs, c->svc.loop, c->q, &so);
	c->rep = (gk_reporter){ .q = c->q, .qs = &c->qs, .stopping = &c->svc.stopping };
	return 0;
}

static void on_client_fd(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_client_dispatch(user);
}

static void metric(bool counter, const char *svc, const char *name, const char *help, const uint64_t *p)
{
	char full[128];
	snprintf(full, sizeof(full), "gpukmm_%s_%s", svc, name);
	if (counter)
		gk_metric_counter_var(full, help, p);
	else
		gk_metric_gauge_var(full, help, p);
}

int gk_ctl_start(gk_ctl *c, gk_err *err)
{
	if (c->q && c->svc.addr.statusd) {
		int rc = gk_ipc_client_open(&c->rep.statusd, c->svc.addr.statusd, NULL, err);
		if (rc)
			return rc;
		rc = gk_loop_add_fd(c->svc.loop, gk_ipc_client_fd(c->rep.statusd), EPOLLIN, on_client_fd, c->rep.statusd,
				    err);
		if (rc) {
			gk_ipc_client_close(c->rep.statusd);
			c->rep.statusd = NULL;
			return rc;
		}
	}
	const gk_wsub_opts wo = { .topics = c->cfg.topics, .n_topics = c->cfg.n_topics };
	const gk_wsub_view wv = { .user = c, .reset = view_reset, .apply = view_apply, .resynced = view_resynced };
	int rc = gk_wsub_open(&c->bus, c->svc.loop, c->svc.addr.events, c->svc.addr.watcher, &wo, &wv, err);
	if (rc || !c->q)
		return rc;
	const char *n = c->cfg.name;
	const gk_wsub_stats *bs = gk_wsub_stats_get(c->bus);
	metric(true, n, "snapshots_total", "View rebuilds from watcher snapshots.", &bs->snapshots);
	metric(true, n, "bus_gaps_total", "Bus sequence gaps.", &bs->gaps);
	metric(true, n, "events_received_total", "Bus events received.", &bs->events);
	metric(true, n, "reports_ok_total", "Status reports accepted.", &c->rep.ok);
	metric(true, n, "reports_failed_total", "Status reports failed.", &c->rep.failed);
	metric(false, n, "queue_depth", "Keys ready or waiting.", &c->qs.depth);
	metric(true, n, "queue_refused_total", "Keys refused by the bounded queue.", &c->queue_refused);
	return GK_OK;
}

int gk_ctl_run(gk_ctl *c)
{
	int rc = gk_loop_run(c->svc.loop);
	GK_INFO("stopping");
	return rc;
}

void gk_ctl_stop(gk_ctl *c)
{
	c->svc.stopping = 1;
	gk_wsub_close(c->bus);
	c->bus = NULL;
	if (c->rep.statusd) {
		gk_loop_del_fd(c->svc.loop, gk_ipc_client_fd(c->rep.statusd));
		gk_ipc_client_close(c->rep.statusd);
		c->rep.statusd = NULL;
	}
}

void gk_ctl_fini(gk_ctl *c)
{
	gk_wq_free(c->q);
	c->q = NULL;
	gk_svc_fini(&c->svc);
	gk_ipc_fini();
}

/* ---- flags ----------------------------------------------------------------------- */

int gk_ctl_opt_qps(void *qps, const char *arg)
{
	char *end;
	double v = strtod(arg, &end);
	if (!*arg || *end || v > 100000)
		return -1;
	*(double *)qps = v;
	return 0;
}
