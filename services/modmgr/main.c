/* gpukmm-modmgr — the KMM Module manager (the KMMReconciler), DESIGN.md §1, §2, §5.
 *
 * One event loop: the watcher bus (typed events) feeds the view; every event
 * only marks ClusterPolicy keys dirty; the work queue runs passes (pass.c:
 * decide.c + writes through lib/kube's async calls on this loop, one pass in
 * flight per key, at most MAX_INFLIGHT at once); after each pass a
 * StatusReport goes to statusd and the plan's Events go to the API. The bus
 * is consumed through lib/wsub: on start and after any bus gap the view is
 * rebuilt from a Watcher.Snapshot (events that arrive while the snapshot is in
 * flight are buffered and replayed when newer than it); passes wait while a
 * resync is out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "events.pb-c.h"
#include "gpukmm/wsub.h"
#include "gpukmm/ipc.h"
#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "gpukmm/loop.h"
#include "gpukmm/reporter.h"
#include "gpukmm/metrics.h"
#include "gpukmm/svc.h"
#include "gpukmm/workqueue.h"
#include "gpukmm/wqsched.h"
#include "rpc.pb-c.h"
#include "status.pb-c.h"

#include "evrec.h"
#include "kops.h"
#include "pass.h"
#include "view.h"

#define PASSES_PER_TICK 32
#define MAX_INFLIGHT 16 /* passes with an API call in flight */
#define KEYSTATE_MAX 256 /* policies whose conflict streak / hold reason is remembered */
#define CONFLICT_PAUSE_MS 1000 /* after GK_KUBE_CONFLICT_ATTEMPTS 409s in a row */

static const char *const TOPICS[] = { "clusterpolicy", "module", "resourceclaim", "pod",
				      "discovery", "leadership" };
#define N_TOPICS (sizeof(TOPICS) / sizeof(TOPICS[0]))

/* A pass waiting for its API call (its key is "processing" in the queue). */
typedef struct inflight {
	struct mm *m;
	gk_mm_run *run;          /* NULL = free slot */
	gk_mm_plan *plan;
	uint64_t t0;             /* the pass's start (gk_metric_now_us) */
	uint64_t term;           /* the leadership term the pass decided under */
	char key[GK_MM_NAME_MAX];
} inflight;

/* Per policy: the 409s in a row (their re-read spacing) and the last hold
 * reason logged (a hold is logged when it starts or changes, not every pass). */
typedef struct keystate {
	char key[GK_MM_NAME_MAX];
	int conflicts;
	char hold[GK_ERR_MSG_MAX];
	uint64_t used;           /* LRU stamp */
} keystate;

typedef struct mm {
	gk_svc svc;
	gk_wsub *bus;
	gk_reporter rep;          /* statusd reports (rep.statusd NULL: none) */
	gk_mmv *view;
	gk_wq *q;
	gk_mm_evrec *evrec;
	gk_mm_kops *kops;
	gk_mm_ops ops;
	const char *sa;
	double qps;
	char host[128];

	gk_wq_sched qs;          /* the queue on the loop: passes start from its timer */
	inflight fly[MAX_INFLIGHT];
	uint64_t n_fly;

	gk_mm_pass_stats pst;
	uint64_t events_written, events_failed, holds;
	keystate ks[KEYSTATE_MAX];
	uint64_t ks_clock;
} mm;

/* The state of key (the least recently used slot is reused). */
static keystate *keystate_of(mm *m, const char *key)
{
	keystate *lru = &m->ks[0];
	for (size_t i = 0; i < KEYSTATE_MAX; i++) {
		if (strcmp(m->ks[i].key, key) == 0) {
			m->ks[i].used = ++m->ks_clock;
			return &m->ks[i];
		}
		if (m->ks[i].used < lru->used)
			lru = &m->ks[i];
	}
	memset(lru, 0, sizeof(*lru));
	snprintf(lru->key, sizeof(lru->key), "%s", key);
	lru->used = ++m->ks_clock;
	return lru;
}

/* ---- dirty keys → queue ------------------------------------------------------ */

static void on_dirty(void *user, const char *policy)
{
	mm *m = user;
	gk_err e;
	if (gk_wq_add(m->q, policy, &e) != GK_OK)
		GK_WARN("queue: %s", e.msg);
}

/* ---- statusd reports -------------------------------------------------------- */

/* `term`: the leadership term of the view the pass decided from (statusd
 * writes only from reports of its own term) */
static void send_report(mm *m, const gk_mm_plan *p, uint64_t term)
{
	if (!m->rep.statusd || !p->report)
		return;
	Gpukmm__StatusReport r;
	gpukmm__status_report__init(&r);
	r.component = "modmgr";
	r.policy = (char *)p->policy;
	r.has_leader_term = 1;
	r.leader_term = term;
	r.has_generation = p->generation != 0;
	r.generation = p->generation;
	if (p->has_kmm_status)
		r.kmm_status = (char *)p->kmm_status;
	char *errs[GK_MM_MAX_ERRORS];
	for (size_t i = 0; i < p->n_errors; i++)
		errs[i] = (char *)p->errors[i];
	r.errors = errs;
	r.n_errors = p->n_errors;
	Gpukmm__Condition c;
	Gpukmm__Condition *cs[1] = { &c };
	gpukmm__condition__init(&c);
	if (p->cond_status[0]) {
		c.type = "ModuleLoaded";
		c.status = (char *)p->cond_status;
		c.reason = (char *)p->cond_reason;
		c.message = (char *)p->cond_message;
		if (p->generation) {
			c.has_observed_generation = 1;
			c.observed_generation = p->generation;
		}
		r.conditions = cs;
		r.n_conditions = 1;
	}
	r.has_deleted = p->report_deleted;
	r.deleted = p->report_deleted;
	gk_reporter_send(&m->rep, &r);
}

/* ---- Kubernetes Events ----------------------------------------------------- */

static void emit(mm *m, const gk_mm_plan *p, const gk_mm_event *ev)
{
	const Gpukmm__ClusterPolicy *cp = gk_mmv_policy(m->view, p->policy);
	if (!cp || !cp->metadata)
		return; /* no object to attach it to */
	const char *uid = cp->metadata->uid;
	gk_mm_evwrite w;
	gk_mm_evrec_note(m->evrec, p->policy, uid, ev, gk_mono_ms(), &w);
	if (w.op == GK_MM_EV_SKIP)
		return;
	char ts[GK_KUBE_TIME_LEN];
	gk_kube_time(ts, sizeof(ts), gk_now_ms() / 1000);
	gk_err e;
	/* written in the background (kops counts events_written / failures) */
	if (gk_mm_kops_event(m->kops, p->policy, uid, ev, &w, ts, m->host, &e) != GK_OK)
		GK_WARN("event %s on ClusterPolicy %s: %s", ev->reason, p->policy, e.msg);
}

/* ---- passes ----------------------------------------------------------------- */

/* A pass ended: events, report, requeue; the key is released. */
static void pass_done(mm *m, const char *key, gk_mm_plan *p, uint64_t t0, uint64_t term)
{
	gk_metric_reconcile(t0, p->failed ? "error" : p->requeue_after_ms > 0 ? "requeue" : "success");
	if (p->idle) {
		GK_DEBUG("ClusterPolicy %s: not the leader, nothing written", key);
	} else {
		for (size_t i = 0; i < p->n_events; i++)
			emit(m, p, &p->events[i]);
		if (p->has_success_event)
			emit(m, p, &p->success_event);
		for (size_t i = 0; i < p->n_errors; i++)
			GK_DEBUG("ClusterPolicy %s: %s", key, p->errors[i]);
		send_report(m, p, term);
	}
	int64_t now = gk_mono_ms();
	keystate *ks = keystate_of(m, key);
	if (p->held) {
		m->holds++;
		if (strcmp(ks->hold, p->hold) != 0)
			GK_WARN("ClusterPolicy %s: fail closed, nothing written: %s", key, p->hold);
		snprintf(ks->hold, sizeof(ks->hold), "%s", p->hold);
	} else if (ks->hold[0]) {
		GK_INFO("ClusterPolicy %s: state confirmed again, reconciling", key);
		ks->hold[0] = 0;
	}
	if (p->conflict && !p->failed) {
		/* a 409: the object was re-read; run again soon, on the conflict
		 * spacing of this key's streak (not the failure backoff) */
		int d = gk_kube_conflict_delay(&ks->conflicts, CONFLICT_PAUSE_MS);
		GK_INFO("ClusterPolicy %s: conflict (409, %d in a row): re-read, retrying in %d ms", key,
			ks->conflicts ? ks->conflicts : GK_KUBE_CONFLICT_ATTEMPTS + 1, d);
		if (ks->conflicts == 0 && !p->idle) {
			gk_mm_event ev = { .warning = true, .reason = "Conflict" };
			snprintf(ev.message, sizeof(ev.message),
				 "ClusterPolicy %s or its KMM Module %s changed %d times in a row while being written "
				 "(409 Conflict); re-read, retrying", key, p->module, GK_KUBE_CONFLICT_ATTEMPTS + 1);
			emit(m, p, &ev);
		}
		gk_wq_forget(m->q, key);
		gk_wq_add_after(m->q, key, d, now, NULL);
	} else if (p->failed) {
		int64_t d = 0;
		ks->conflicts = 0;
		gk_wq_add_rate_limited(m->q, key, now, &d, NULL);
		GK_INFO("ClusterPolicy %s: pass failed, retrying in %lld ms", key, (long long)d);
	} else {
		ks->conflicts = 0;
		gk_wq_forget(m->q, key);
		if (p->requeue_after_ms > 0)
			gk_wq_add_after(m->q, key, p->requeue_after_ms, now, NULL);
	}
	gk_wq_done(m->q, key);
	free(p);
}

static void on_pass_end(void *user, gk_mm_plan *plan)
{
	inflight *f = user;
	mm *m = f->m;
	f->run = NULL;
	m->n_fly--;
	pass_done(m, f->key, plan, f->t0, f->term);
	gk_wq_sched_kick(&m->qs);
}

/* Start a pass for the key just handed out by the queue. */
static void run_pass(mm *m, const char *key)
{
	inflight *f = NULL;
	for (size_t i = 0; i < MAX_INFLIGHT && !f; i++)
		if (!m->fly[i].run)
			f = &m->fly[i];
	gk_mm_plan *p = f ? calloc(1, sizeof(*p)) : NULL;
	if (!p) {
		gk_wq_add_rate_limited(m->q, key, gk_mono_ms(), NULL, NULL);
		gk_wq_done(m->q, key);
		return;
	}
	f->m = m;
	f->t0 = gk_metric_now_us();
	snprintf(f->key, sizeof(f->key), "%s", key);
	gk_mmv_state vs;
	gk_mmv_state_get(m->view, &vs);
	f->term = vs.term;
	gk_mm_run *run = NULL;
	gk_mm_pass_start(m->view, key, &m->ops, p, &m->pst, on_pass_end, f, &run);
	if (!run) {
		pass_done(m, key, p, f->t0, vs.term);
		return;
	}
	f->run = run;
	f->plan = p;
	m->n_fly++;
}

/* Passes wait for a consistent view (resynced() kicks the queue again) and for
 * a free in-flight slot (on_pass_end kicks it). */
static bool may_pass(void *user)
{
	mm *m = user;
	return gk_wsub_synced(m->bus) && m->n_fly < MAX_INFLIGHT;
}

static void on_key(void *user, const char *key)
{
	run_pass(user, key); /* the key is done when its pass ends (pass_done) */
}

/* ---- the watcher view (lib/wsub) ------------------------------------------------- */

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	return gk_mmv_load_snapshot(((mm *)user)->view, s, err);
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	mm *m = user;
	int rc = gk_mmv_apply(m->view, topic, ev, err); /* marks keys dirty (on_dirty) */
	gk_wq_sched_kick(&m->qs);
	return rc;
}

static void view_resynced(void *user, bool first)
{
	mm *m = user;
	gk_mmv_state vs;
	gk_mmv_state_get(m->view, &vs);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu modules, kmm=%d dra=%d leader=%d",
		vs.policies, vs.modules, vs.kmm, vs.dra, vs.leader);
	if (first)
		gk_svc_ready(&m->svc);
	gk_wq_sched_kick(&m->qs);
}

static void on_client_fd(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_client_dispatch(user);
}

/* ---- main ----------------------------------------------------------------------- */

static int opt_sa(void *user, const char *arg)
{
	((mm *)user)->sa = arg;
	return 0;
}

static int opt_qps(void *user, const char *arg)
{
	char *end;
	double v = strtod(arg, &end);
	if (!*arg || *end || v > 100000)
		return -1;
	((mm *)user)->qps = v;
	return 0;
}

int main(int argc, char **argv)
{
	static mm M;
	mm *m = &M;
	gk_err err;
	m->sa = getenv("MODULE_LOADER_SERVICE_ACCOUNT_NAME");
	const gk_svc_opt extra[] = {
		{ "service-account", 1,
		  "module-loader ServiceAccount for the Module ($MODULE_LOADER_SERVICE_ACCOUNT_NAME, default module-loader)",
		  opt_sa, m },
		{ "kube-qps", 1, "client-side API request limit per second (default 50, burst 100; < 0 = none)",
		  opt_qps, m },
		{ 0 },
	};
	int rc = gk_svc_init(&m->svc, "modmgr", argc, argv, extra, &err);
	if (rc)
		return rc;
	if (!m->sa || !*m->sa)
		m->sa = "module-loader";
	if (gethostname(m->host, sizeof(m->host) - 1) != 0)
		snprintf(m->host, sizeof(m->host), "gpukmm-modmgr");
	if (!m->svc.addr.events || !m->svc.addr.watcher) {
		GK_ERROR("--events and --watcher (or --runtime-dir) are required");
		gk_svc_fini(&m->svc);
		return 2;
	}
	rc = 1;
	if (gk_wq_new(&m->q, NULL, &err) || gk_mm_evrec_new(&m->evrec, 0, 0, &err))
		goto fail;
	const gk_wq_sched_opts so = { .per_tick = PASSES_PER_TICK, .may = may_pass, .run = on_key, .user = m };
	gk_wq_sched_init(&m->qs, m->svc.loop, m->q, &so);
	gk_mmv_opts vo = { .ns = m->svc.ns };
	if (gk_mmv_new(&m->view, &vo, on_dirty, m, &err))
		goto fail;
	if (gk_mm_kops_new(&m->kops, m->svc.kubeconfig, m->svc.ns, m->sa, m->qps, m->svc.loop,
			   &m->events_written, &m->events_failed, &err))
		goto fail;
	gk_mm_kops_ops(m->kops, &m->ops);

	m->rep = (gk_reporter){ .q = m->q, .qs = &m->qs, .stopping = &m->svc.stopping };
	if (m->svc.addr.statusd && gk_ipc_client_open(&m->rep.statusd, m->svc.addr.statusd, NULL, &err))
		goto fail;
	if (m->rep.statusd && gk_loop_add_fd(m->svc.loop, gk_ipc_client_fd(m->rep.statusd), EPOLLIN, on_client_fd,
					     m->rep.statusd, &err))
		goto fail;
	const gk_wsub_opts wo = { .topics = TOPICS, .n_topics = N_TOPICS };
	const gk_wsub_view wv = { .user = m, .reset = view_reset, .apply = view_apply, .resynced = view_resynced };
	if (gk_wsub_open(&m->bus, m->svc.loop, m->svc.addr.events, m->svc.addr.watcher, &wo, &wv, &err))
		goto fail;
	const gk_wsub_stats *bs = gk_wsub_stats_get(m->bus);

	gk_metric_counter_var("gpukmm_modmgr_passes_total", "Reconcile passes.", &m->pst.passes);
	gk_metric_counter_var("gpukmm_modmgr_module_creates_total", "Module creates.", &m->pst.creates);
	gk_metric_counter_var("gpukmm_modmgr_module_patches_total", "Module patches.", &m->pst.patches);
	gk_metric_counter_var("gpukmm_modmgr_module_deletes_total", "Module deletes.", &m->pst.deletes);
	gk_metric_counter_var("gpukmm_modmgr_finalizer_writes_total", "ClusterPolicy finalizer writes.",
			      &m->pst.finalizer_writes);
	gk_metric_counter_var("gpukmm_modmgr_conflicts_total", "409 conflicts (re-read and retried).",
			      &m->pst.conflicts);
	gk_metric_counter_var("gpukmm_modmgr_holds_total", "Passes that wrote nothing: a state could not be "
			      "confirmed (the safety rule).", &m->holds);
	gk_metric_counter_var("gpukmm_modmgr_failed_passes_total", "Passes that failed (retried with backoff).",
			      &m->pst.failures);
	gk_metric_counter_var("gpukmm_modmgr_snapshots_total", "View rebuilds from watcher snapshots.", &bs->snapshots);
	gk_metric_counter_var("gpukmm_modmgr_bus_gaps_total", "Bus sequence gaps.", &bs->gaps);
	gk_metric_counter_var("gpukmm_modmgr_events_received_total", "Bus events received.", &bs->events);
	gk_metric_counter_var("gpukmm_modmgr_reports_ok_total", "Status reports accepted.", &m->rep.ok);
	gk_metric_counter_var("gpukmm_modmgr_reports_failed_total", "Status reports failed.", &m->rep.failed);
	gk_metric_counter_var("gpukmm_modmgr_k8s_events_written_total", "Kubernetes Events created or bumped.",
			      &m->events_written);
	gk_metric_counter_var("gpukmm_modmgr_k8s_events_failed_total", "Kubernetes Event writes that failed.",
			      &m->events_failed);
	gk_metric_gauge_var("gpukmm_modmgr_queue_depth", "Keys ready or waiting.", &m->qs.depth);
	gk_metric_gauge_var("gpukmm_modmgr_passes_inflight", "Passes waiting for an API call.", &m->n_fly);

	GK_INFO("started: namespace %s, service account %s", m->svc.ns, m->sa);
	rc = gk_loop_run(m->svc.loop);
	GK_INFO("stopping");
	goto out;
fail:
	GK_ERROR("%s", err.msg);
	rc = 1;
out:
	m->svc.stopping = 1;
	gk_wsub_close(m->bus); /* an outstanding snapshot is cancelled; before the view is freed */
	if (m->rep.statusd) {
		gk_loop_del_fd(m->svc.loop, gk_ipc_client_fd(m->rep.statusd));
		gk_ipc_client_close(m->rep.statusd);
	}
	for (size_t i = 0; i < MAX_INFLIGHT; i++) {
		if (m->fly[i].run) {
			gk_mm_run_cancel(m->fly[i].run); /* its API call is abandoned */
			free(m->fly[i].plan);
		}
	}
	gk_mm_kops_free(m->kops);
	gk_mmv_free(m->view);
	gk_mm_evrec_free(m->evrec);
	gk_wq_free(m->q);
	gk_svc_fini(&m->svc);
	gk_ipc_fini();
	return rc;
}
