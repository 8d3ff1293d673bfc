/* gpukmm-modmgr — the KMM Module manager (the KMMReconciler), DESIGN.md §1, §2, §5.
 *
 * One event loop, on the controller skeleton (lib/svc/ctl.c): the watcher bus
 * (typed events) feeds the view; every event only marks ClusterPolicy keys
 * dirty; the work queue runs passes (pass.c:
 * decide.c + writes through lib/kube's async calls on this loop, one pass in
 * flight per key, at most MAX_INFLIGHT at once); after each pass a
 * StatusReport goes to statusd and the plan's Events go to the API. The bus
 * is consumed through lib/wsub: on start and after any bus gap the view is
 * rebuilt from a Watcher.Snapshot (events that arrive while the snapshot is in
 * flight are buffered and replayed when newer than it); passes wait while a
 * resync is out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.pb-c.h"
#include "gpukmm/ctl.h"
#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
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
	gk_ctl c;                /* flags, the bus, the queue, statusd (lib/svc/ctl.c) */
	gk_mmv *view;
	gk_mm_evrec *evrec;
	gk_mm_kops *kops;
	gk_mm_ops ops;
	const char *sa;
	double qps;
	char host[128];

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

/* ---- statusd reports -------------------------------------------------------- */

/* `term`: the leadership term of the view the pass decided from (statusd
 * writes only from reports of its own term) */
static void send_report(mm *m, const gk_mm_plan *p, uint64_t term)
{
	if (!m->c.rep.statusd || !p->report)
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
	gk_reporter_send(&m->c.rep, &r);
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
		gk_wq_forget(m->c.q, key);
		gk_wq_add_after(m->c.q, key, d, now, NULL);
	} else if (p->failed) {
		ks->conflicts = 0;
		int64_t d = gk_ctl_requeue(&m->c, key, true, 0);
		GK_INFO("ClusterPolicy %s: pass failed, retrying in %lld ms", key, (long long)d);
	} else {
		ks->conflicts = 0;
		gk_ctl_requeue(&m->c, key, false, p->requeue_after_ms);
	}
	gk_wq_done(m->c.q, key);
	free(p);
}

static void on_pass_end(void *user, gk_mm_plan *plan)
{
	inflight *f = user;
	mm *m = f->m;
	f->run = NULL;
	m->n_fly--;
	pass_done(m, f->key, plan, f->t0, f->term);
	gk_wq_sched_kick(&m->c.qs);
}

/* Start a pass for the key just handed out by the queue (the key is done when
 * its pass ends: pass_done). */
static void run_pass(void *user, const char *key)
{
	mm *m = user;
	inflight *f = NULL;
	for (size_t i = 0; i < MAX_INFLIGHT && !f; i++)
		if (!m->fly[i].run)
			f = &m->fly[i];
	gk_mm_plan *p = f ? calloc(1, sizeof(*p)) : NULL;
	if (!p) {
		gk_wq_add_rate_limited(m->c.q, key, gk_mono_ms(), NULL, NULL);
		gk_wq_done(m->c.q, key);
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

/* Passes wait (besides a consistent view) for a free in-flight slot
 * (on_pass_end kicks the queue). */
static bool may_pass(void *user)
{
	mm *m = user;
	return m->n_fly < MAX_INFLIGHT;
}

/* ---- the watcher view (lib/wsub) ------------------------------------------------- */

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	return gk_mmv_load_snapshot(((mm *)user)->view, s, err);
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	return gk_mmv_apply(((mm *)user)->view, topic, ev, err); /* marks: gk_ctl_dirty kicks the queue */
}

static void view_rebuilt(void *user)
{
	mm *m = user;
	gk_mmv_state vs;
	gk_mmv_state_get(m->view, &vs);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu modules, kmm=%d dra=%d leader=%d",
		vs.policies, vs.modules, vs.kmm, vs.dra, vs.leader);
}

/* ---- main ----------------------------------------------------------------------- */

static int opt_sa(void *user, const char *arg)
{
	((mm *)user)->sa = arg;
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
		GK_CTL_OPT_KUBE_QPS(&m->qps),
		{ 0 },
	};
	const gk_ctl_cfg cfg = { .name = "modmgr", .topics = TOPICS, .n_topics = N_TOPICS, .user = m,
				 .reset = view_reset, .apply = view_apply, .rebuilt = view_rebuilt, .pass = run_pass,
				 .pass_async = true, .may = may_pass, .per_tick = PASSES_PER_TICK };
	int rc = gk_ctl_init(&m->c, &cfg, argc, argv, extra, &err);
	if (rc)
		return rc;
	if (!m->sa || !*m->sa)
		m->sa = "module-loader";
	if (gethostname(m->host, sizeof(m->host) - 1) != 0)
		snprintf(m->host, sizeof(m->host), "gpukmm-modmgr");
	if (gk_mm_evrec_new(&m->evrec, 0, 0, &err))
		goto fail;
	gk_mmv_opts vo = { .ns = m->c.svc.ns };
	if (gk_mmv_new(&m->view, &vo, gk_ctl_dirty, &m->c, &err))
		goto fail;
	if (gk_mm_kops_new(&m->kops, m->c.svc.kubeconfig, m->c.svc.ns, m->sa, m->qps, m->c.svc.loop,
			   &m->events_written, &m->events_failed, &err))
		goto fail;
	gk_mm_kops_ops(m->kops, &m->ops);
	if (gk_ctl_start(&m->c, &err))
		goto fail;

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
	gk_metric_counter_var("gpukmm_modmgr_k8s_events_written_total", "Kubernetes Events created or bumped.",
			      &m->events_written);
	gk_metric_counter_var("gpukmm_modmgr_k8s_events_failed_total", "Kubernetes Event writes that failed.",
			      &m->events_failed);
	gk_metric_gauge_var("gpukmm_modmgr_passes_inflight", "Passes waiting for an API call.", &m->n_fly);

	GK_INFO("started: namespace %s, service account %s", m->c.svc.ns, m->sa);
	rc = gk_ctl_run(&m->c);
	goto out;
fail:
	GK_ERROR("%s", err.msg);
	rc = 1;
out:
	gk_ctl_stop(&m->c); /* an outstanding snapshot is cancelled; before the view is freed */
	for (size_t i = 0; i < MAX_INFLIGHT; i++) {
		if (m->fly[i].run) {
			gk_mm_run_cancel(m->fly[i].run); /* its API call is abandoned */
			free(m->fly[i].plan);
		}
	}
	gk_mm_kops_free(m->kops);
	gk_mmv_free(m->view);
	gk_mm_evrec_free(m->evrec);
	gk_ctl_fini(&m->c);
	return rc;
}
