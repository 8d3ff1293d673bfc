/* gpukmm-statusd controller mode: report table and the status writer.
 *
 * Writes are JSON merge patches of the status subresource carrying
 * metadata.resourceVersion as a precondition: the API server answers 409 when
 * the object changed since we read it, and we re-read and recompute (so a
 * concurrent status writer is never overwritten blindly). Nothing is written
 * when the merged status equals the current one, so a restart (reports
 * arriving again with the same content) writes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "merge.h"
#include "metrics.h"
#include "nodes.h"

#define RETRY_MS 1000    /* after an API error, and after GK_KUBE_CONFLICT_ATTEMPTS 409s in a row */
#define MAX_INFLIGHT 16  /* policies with an API call in flight */

/* API calls run on a lib/kube mux attached to the service loop: a policy's
 * read → merge → patch chain advances from the completion callbacks, so the
 * loop keeps serving RPCs and heartbeats however slow the API server is.
 * One chain per policy at a time (entry.call); a report that arrives while
 * it runs marks the policy dirty again and it is evaluated once more after. */

#define N_REP 4

typedef struct entry {
	char name[GK_SD_NAME_MAX];
	Gpukmm__StatusReport *rep[N_REP]; /* 0 modmgr, 1 gater, 2 opmgr, 3 upgrader */
	bool dirty;
	gk_kube_call *call;    /* in flight (its ctx is freed on drop) */
	int conflicts;         /* 409s in a row */
	int64_t not_before;    /* mono ms: no new attempt before */
	/* its node summary as of view generation sum_gen (valid when sum_ok):
	 * every write of the policy's status summarizes all the nodes, and a
	 * start writes each policy several times (once per component's first
	 * report) over the same view: 15,000 nodes cost ~25 ms a time */
	gk_sd_nodes *sum;
	uint64_t sum_gen;
	bool sum_ok;
} entry;

static bool no_reports(const entry *e)
{
	for (int k = 0; k < N_REP; k++)
		if (e->rep[k])
			return false;
	return true;
}

struct gk_sd_ctrl {
	gk_loop *loop;
	gk_kube_client *kc;
	gk_kube_mux *mux;
	gk_sd_ctrl_opts o;
	entry *e;
	size_t n;
	size_t inflight;
	bool starved;          /* a run left dirty policies for want of a slot */
	gk_timer_id timer, grace_timer;
	int64_t timer_at;
	int64_t start_ms;
	bool grace_over;
	gk_sd_stats st;
	const gk_sd_view *view;
	uint64_t term;         /* the view's leadership term the grace period was started for */
};

/* the context of one call: the policy is looked up by name at completion
 * (entries move in the table) */
enum step { STEP_GET, STEP_PATCH };
typedef struct call_ctx {
	gk_sd_ctrl *c;
	enum step step;
	char name[GK_SD_NAME_MAX];
} call_ctx;

static void arm(gk_sd_ctrl *c, int ms);
static void on_grace(gk_loop *l, gk_timer_id id, void *user);

static uint64_t term_of(const Gpukmm__StatusReport *r)
{
	return r->has_leader_term ? r->leader_term : 0;
}

/* A component's report if it may be used: made under the view's leadership
 * term (any, without a view). One of an earlier term is kept until replaced
 * but counts as not reported yet: a statusd that regains the leadership does
 * not write from what it heard during an earlier term (hours old, maybe),
 * only from what the components report in this one (they all report again
 * when the leadership changes). */
static const Gpukmm__StatusReport *rep(const gk_sd_ctrl *c, const entry *e, int k)
{
	const Gpukmm__StatusReport *r = e->rep[k];
	return r && (!c->view || term_of(r) == gk_sd_view_term(c->view)) ? r : NULL;
}

/* A new leadership term: like a start, a component's share of the status
 * stays as it is until the component reports in this term (or the grace
 * period ends). */
static void follow_term(gk_sd_ctrl *c)
{
	if (!c->view || gk_sd_view_term(c->view) == c->term)
		return;
	c->term = gk_sd_view_term(c->view);
	if (!gk_sd_view_leader(c->view))
		return;
	GK_INFO("leadership term %llu: status written from the reports made in it; until a component reports, its "
		"part of the status is kept (at most %d ms)", (unsigned long long)c->term, c->o.grace_ms);
	c->grace_over = false;
	if (c->grace_timer)
		gk_loop_cancel(c->loop, c->grace_timer);
	c->grace_timer = gk_loop_timer(c->loop, c->o.grace_ms, on_grace, c);
}

static void count_pending(gk_sd_ctrl *c)
{
	uint64_t n = 0;
	for (size_t i = 0; i < c->n; i++)
		n += c->e[i].dirty || c->e[i].call;
	c->st.pending = n;
}

static Gpukmm__StatusReport *dup_report(const Gpukmm__StatusReport *r)
{
	size_t len = protobuf_c_message_get_packed_size(&r->base);
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return NULL;
	protobuf_c_message_pack(&r->base, buf);
	Gpukmm__StatusReport *d = gpukmm__status_report__unpack(NULL, len, buf);
	free(buf);
	return d;
}

static entry *find(gk_sd_ctrl *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->e[i].name, name) == 0)
			return &c->e[i];
	return NULL;
}

static void drop(gk_sd_ctrl *c, entry *e)
{
	if (e->call) {
		gk_kube_call_cancel(e->call); /* frees its ctx */
		c->inflight--;
	}
	for (int k = 0; k < N_REP; k++)
		if (e->rep[k])
			gpukmm__status_report__free_unpacked(e->rep[k], NULL);
	gk_sd_metrics_forget(e->name);
	free(e->sum);
	*e = c->e[--c->n];
}

static bool leading(const gk_sd_ctrl *c)
{
	return !c->view || gk_sd_view_leader(c->view);
}

/* The status.nodes summary for a policy from the view: *nodes NULL without a
 * view (or policy). Computed again only when the view changed since the
 * entry's last one (gk_sd_view_gen). 0, or 1 on failure (retry later). */
static int summarize(gk_sd_ctrl *c, entry *e, const gk_sd_nodes **nodes)
{
	*nodes = NULL;
	if (!c->view)
		return 0;
	const Gpukmm__ClusterPolicy *cp = gk_sd_view_policy(c->view, e->name);
	if (!cp)
		return 0;
	uint64_t gen = gk_sd_view_gen(c->view);
	if (e->sum_ok && e->sum_gen == gen) {
		c->st.summaries_reused++;
		*nodes = e->sum;
		return 0;
	}
	if (!e->sum && !(e->sum = malloc(sizeof(*e->sum))))
		return 1;
	size_t n;
	const gk_sd_node *const *v = gk_sd_view_nodes(c->view, &n);
	gk_err err;
	c->st.summaries++;
	e->sum_ok = gk_sd_nodes_summarize(cp, v, n, e->sum, &err) == GK_OK;
	e->sum_gen = gen;
	if (!e->sum_ok)
		return 1;
	*nodes = e->sum;
	return 0;
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err);

/* Start a call for e (GET of the policy, or the status PATCH with `body`).
 * 0 started, else the error (nothing in flight). */
static int start(gk_sd_ctrl *c, entry *e, enum step step, const char *body)
{
	gk_kube_ref ref = { .group = "intel.com", .version = "v1alpha1", .resource = "clusterpolicies",
			    .name = e->name, .subresource = step == STEP_PATCH ? "status" : NULL };
	call_ctx *x = calloc(1, sizeof(*x));
	if (!x)
		return GK_RESOURCE_EXHAUSTED;
	x->c = c;
	x->step = step;
	snprintf(x->name, sizeof(x->name), "%s", e->name);
	gk_err err = { 0 };
	gk_kube_call *call = NULL;
	int rc = step == STEP_GET
			 ? gk_kube_call_get(c->mux, &ref, NULL, on_call, x, &call, &err)
			 : gk_kube_call_patch(c->mux, &ref, GK_PATCH_MERGE, body, NULL, false, NULL, on_call, x,
					      &call, &err);
	if (rc != GK_OK) {
		GK_WARN("ClusterPolicy %s: %s", e->name, err.msg);
		free(x);
		return rc;
	}
	gk_kube_call_free_on_drop(call, x);
	e->call = call;
	c->inflight++;
	return GK_OK;
}

/* The chain of e ended: done (pass counted) or retry after `retry_ms`. */
static void finish(gk_sd_ctrl *c, entry *e, bool done, int retry_ms)
{
	if (done) {
		c->st.passes++;
		e->conflicts = 0;
	} else {
		e->dirty = true;
		e->not_before = gk_mono_ms() + retry_ms;
	}
	if (e->dirty)
		arm(c, done ? c->o.debounce_ms : retry_ms);
	count_pending(c);
}

/* The policy as read: merge, and patch when different (leader checked now,
 * not when the chain started). Returns true when the chain goes on. */
static bool after_get(gk_sd_ctrl *c, entry *e, cJSON *obj)
{
	if (!leading(c)) {
		c->st.not_leader++;
		gk_sd_metrics_forget(e->name);
		finish(c, e, true, 0);
		return false;
	}
	const gk_sd_nodes *nodes;
	if (summarize(c, e, &nodes)) {
		finish(c, e, false, RETRY_MS);
		return false;
	}
	const Gpukmm__StatusReport *mm = rep(c, e, 0), *gt = rep(c, e, 1), *op = rep(c, e, 2), *up = rep(c, e, 3);
	if (!mm && !gt && !op && !up && (!c->grace_over || !nodes)) {
		finish(c, e, true, 0);
		return false;
	}
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
	const cJSON *cur = cJSON_GetObjectItemCaseSensitive(obj, "status");
	char now[GK_KUBE_TIME_LEN];
	gk_kube_time(now, sizeof(now), gk_now_ms() / 1000);
	gk_sd_inputs in = { .modmgr = mm, .gater = gt, .opmgr = op, .upgrader = up, .missing_is_empty = c->grace_over,
			    .now = now, .nodes = nodes };
	bool oom = false;
	cJSON *want = gk_sd_merge(cur, &in, &oom);
	if (want || cur)
		gk_sd_metrics_policy(e->name, want ? want : cur, nodes);
	cJSON *patch = want ? gk_sd_status_patch(cur, want, &oom) : NULL;
	cJSON_Delete(want);
	if (oom) {
		cJSON_Delete(patch);
		finish(c, e, false, RETRY_MS);
		return false;
	}
	if (!patch) {
		GK_DEBUG("ClusterPolicy %s: status unchanged", e->name);
		c->st.unchanged++;
		finish(c, e, true, 0);
		return false;
	}
	cJSON *pm = cJSON_AddObjectToObject(patch, "metadata");
	char *body = NULL;
	if (pm && cJSON_IsString(rv) && cJSON_AddStringToObject(pm, "resourceVersion", rv->valuestring))
		body = cJSON_PrintUnformatted(patch);
	cJSON_Delete(patch);
	int rc = body ? start(c, e, STEP_PATCH, body) : GK_RESOURCE_EXHAUSTED;
	free(body);
	if (rc != GK_OK) {
		c->st.write_errors++;
		finish(c, e, false, RETRY_MS);
		return false;
	}
	return true;
}

static void on_call(void *user, int rc, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	call_ctx *x = user;
	gk_sd_ctrl *c = x->c;
	enum step step = x->step;
	entry *e = find(c, x->name);
	free(x);
	c->inflight--;
	if (c->starved) {
		c->starved = false;
		arm(c, 1);
	}
	if (!e) { /* cannot happen: drop cancels the call */
		cJSON_Delete(out);
		return;
	}
	e->call = NULL;
	const char *msg = st && st->message[0] ? st->message : err ? err->msg : gk_code_name(rc);
	if (step == STEP_GET) {
		if (rc == GK_NOT_FOUND) {
			GK_DEBUG("ClusterPolicy %s is gone: nothing to write", e->name);
			finish(c, e, true, 0);
		} else if (rc != GK_OK) {
			GK_WARN("read ClusterPolicy %s: %s", e->name, msg);
			c->st.write_errors++;
			finish(c, e, false, RETRY_MS);
		} else {
			after_get(c, e, out);
		}
		cJSON_Delete(out);
		return;
	}
	cJSON_Delete(out);
	if (rc == GK_OK) {
		c->st.writes++;
		GK_INFO("ClusterPolicy %s: status written", e->name);
		finish(c, e, true, 0);
	} else if (rc == GK_ABORTED || rc == GK_ALREADY_EXISTS) {
		/* re-read and recompute, backing off; leadership is checked again
		 * when the read completes */
		c->st.write_conflicts++;
		GK_DEBUG("ClusterPolicy %s: conflict, re-reading", e->name);
		finish(c, e, false, gk_kube_conflict_delay(&e->conflicts, RETRY_MS));
	} else if (rc == GK_NOT_FOUND) {
		finish(c, e, true, 0);
	} else {
		c->st.write_errors++;
		GK_WARN("write status of ClusterPolicy %s: %s", e->name, msg);
		finish(c, e, false, RETRY_MS);
	}
}

static void on_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sd_ctrl *c = user;
	c->timer = 0;
	if (c->view && !gk_sd_view_synced(c->view))
		return; /* the first snapshot marks everything dirty again */
	bool leader = leading(c);
	int64_t now = gk_mono_ms(), next = -1;
	for (size_t i = 0; i < c->n; i++) {
		entry *e = &c->e[i];
		if (!e->dirty || e->call)
			continue; /* a dirty one in flight is run again when its chain ends */
		if (!leader) {
			/* gaining leadership marks everything dirty again */
			gk_sd_metrics_forget(e->name);
			e->dirty = false;
			c->st.not_leader++;
			c->st.passes++;
			continue;
		}
		if (e->not_before > now) {
			if (next < 0 || e->not_before < next)
				next = e->not_before;
			continue;
		}
		if (c->inflight >= MAX_INFLIGHT) {
			c->starved = true; /* the next completion runs us again */
			break;
		}
		e->dirty = false;
		/* nothing reported since our start (or in this leadership term):
		 * before the grace period ends the current status is the best there
		 * is (a restart, a failover write nothing) */
		if (!rep(c, e, 0) && !rep(c, e, 1) && !rep(c, e, 2) && !rep(c, e, 3) &&
		    (!c->grace_over || !c->view || !gk_sd_view_policy(c->view, e->name))) {
			c->st.passes++;
			continue;
		}
		if (start(c, e, STEP_GET, NULL) != GK_OK) {
			c->st.write_errors++;
			e->dirty = true;
			e->not_before = now + RETRY_MS;
			if (next < 0 || e->not_before < next)
				next = e->not_before;
		}
	}
	/* policies gone from the view and from the reports */
	for (size_t i = 0; c->view && i < c->n;) {
		entry *e = &c->e[i];
		if (!e->dirty && !e->call && no_reports(e) && !gk_sd_view_policy(c->view, e->name))
			drop(c, e);
		else
			i++;
	}
	if (next >= 0)
		arm(c, (int)(next - now > 0 ? next - now : 1));
	count_pending(c);
}

static entry *ensure(gk_sd_ctrl *c, const char *name)
{
	entry *e = find(c, name);
	if (e || strlen(name) >= GK_SD_NAME_MAX || c->n >= GK_SD_MAX_POLICIES)
		return e;
	e = &c->e[c->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	return e;
}

void gk_sd_ctrl_dirty(void *user, const char *policy)
{
	gk_sd_ctrl *c = user;
	follow_term(c);
	if (policy) {
		entry *e = ensure(c, policy);
		if (e)
			e->dirty = true;
	} else {
		for (size_t i = 0; c->view && i < gk_sd_view_n_policies(c->view); i++) {
			const Gpukmm__ClusterPolicy *cp = gk_sd_view_policy_at(c->view, i);
			if (cp->metadata && cp->metadata->name)
				ensure(c, cp->metadata->name);
		}
		for (size_t i = 0; i < c->n; i++)
			c->e[i].dirty = true;
	}
	if (c->n)
		arm(c, c->o.debounce_ms);
	count_pending(c);
}

void gk_sd_ctrl_set_view(gk_sd_ctrl *c, const gk_sd_view *v)
{
	c->view = v;
}

static void arm(gk_sd_ctrl *c, int ms)
{
	int64_t at = gk_mono_ms() + ms;
	if (c->timer) {
		if (c->timer_at <= at)
			return; /* coalesced into the pending run */
		gk_loop_cancel(c->loop, c->timer);
	}
	c->timer = gk_loop_timer(c->loop, ms, on_timer, c);
	c->timer_at = at;
}

static void on_grace(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sd_ctrl *c = user;
	c->grace_timer = 0;
	c->grace_over = true;
	for (size_t i = 0; i < c->n; i++)
		c->e[i].dirty = true;
	if (c->n)
		arm(c, c->o.debounce_ms);
	count_pending(c);
}

int gk_sd_ctrl_new(gk_sd_ctrl **out, gk_loop *loop, gk_kube_client *kc, const gk_sd_ctrl_opts *o, gk_err *err)
{
	gk_sd_ctrl *c = calloc(1, sizeof(*c));
	if (c)
		c->e = calloc(GK_SD_MAX_POLICIES, sizeof(entry));
	if (!c || !c->e) {
		if (c)
			free(c);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	c->loop = loop;
	c->kc = kc;
	c->o.debounce_ms = o && o->debounce_ms > 0 ? o->debounce_ms : 100;
	c->o.grace_ms = o && o->grace_ms > 0 ? o->grace_ms : 15000;
	int rc = gk_kube_mux_new(&c->mux, kc, err);
	if (rc == GK_OK && (rc = gk_kube_mux_attach(c->mux, loop, err)) != GK_OK)
		gk_kube_mux_free(c->mux);
	if (rc != GK_OK) {
		free(c->e);
		free(c);
		return rc;
	}
	c->grace_timer = gk_loop_timer(loop, c->o.grace_ms, on_grace, c);
	*out = c;
	return GK_OK;
}

void gk_sd_ctrl_free(gk_sd_ctrl *c)
{
	if (!c)
		return;
	if (c->timer)
		gk_loop_cancel(c->loop, c->timer);
	if (c->grace_timer)
		gk_loop_cancel(c->loop, c->grace_timer);
	while (c->n)
		drop(c, &c->e[0]); /* cancels the calls in flight */
	gk_kube_mux_free(c->mux);
	free(c->e);
	free(c);
}

int gk_sd_ctrl_report(gk_sd_ctrl *c, const Gpukmm__StatusReport *r, gk_err *err)
{
	int k;
	if (!r->component || !r->policy || !*r->policy || strlen(r->policy) >= GK_SD_NAME_MAX) {
		c->st.rejected++;
		return gk_err_set(err, GK_INVALID_ARGUMENT, "report needs component and policy (a name under %d bytes)",
				  GK_SD_NAME_MAX);
	}
	if (strcmp(r->component, "modmgr") == 0)
		k = 0;
	else if (strcmp(r->component, "gater") == 0)
		k = 1;
	else if (strcmp(r->component, "opmgr") == 0)
		k = 2;
	else if (strcmp(r->component, "upgrader") == 0)
		k = 3;
	else {
		c->st.rejected++;
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "unknown component \"%.32s\" (modmgr, gater, opmgr or upgrader)",
				  r->component);
	}
	c->st.reports++;
	entry *e = find(c, r->policy);
	if (c->view && term_of(r) != gk_sd_view_term(c->view)) {
		/* kept (a component may see a new term before we do) but not used
		 * until our view is in that term; never in place of one of ours */
		c->st.other_term++;
		if (e && !(r->has_deleted && r->deleted) && e->rep[k] && rep(c, e, k))
			return GK_OK;
	}
	if (r->has_deleted && r->deleted) {
		if (e) {
			if (e->rep[k])
				gpukmm__status_report__free_unpacked(e->rep[k], NULL);
			e->rep[k] = NULL;
			if (no_reports(e) && !e->call)
				drop(c, e);
		}
		return GK_OK;
	}
	if (!e) {
		if (c->n >= GK_SD_MAX_POLICIES)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: more than %d policies", GK_SD_MAX_POLICIES);
		e = &c->e[c->n++];
		memset(e, 0, sizeof(*e));
		snprintf(e->name, sizeof(e->name), "%s", r->policy);
	}
	Gpukmm__StatusReport *d = dup_report(r);
	if (!d) {
		if (no_reports(e) && !e->call)
			drop(c, e);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	if (e->rep[k])
		gpukmm__status_report__free_unpacked(e->rep[k], NULL);
	e->rep[k] = d;
	e->dirty = true;
	arm(c, c->o.debounce_ms);
	count_pending(c);
	return GK_OK;
}

const gk_sd_stats *gk_sd_ctrl_stats(const gk_sd_ctrl *c)
{
	return &c->st;
}
