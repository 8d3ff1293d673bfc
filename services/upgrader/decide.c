/* gpukmm-upgrader — the pure rollout decision (decide.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decide.h"
#include "gpukmm/kube.h"
#include "status.pb-c.h"

static const struct {
	const char *name;
	gk_upg_state s;
} STATES[] = {
	{ GK_POLICY_UPGRADE_DRAINING, GK_UPG_S_DRAINING },   { GK_POLICY_UPGRADE_UNLOADING, GK_UPG_S_UNLOADING },
	{ GK_POLICY_UPGRADE_LOADING, GK_UPG_S_LOADING },     { GK_POLICY_UPGRADE_DONE, GK_UPG_S_DONE },
	{ GK_POLICY_UPGRADE_FAILED, GK_UPG_S_FAILED },
};

gk_upg_state gk_upg_state_parse(const char *v)
{
	if (!v)
		return GK_UPG_S_NONE;
	for (size_t i = 0; i < sizeof(STATES) / sizeof(STATES[0]); i++)
		if (!strcmp(v, STATES[i].name))
			return STATES[i].s;
	return GK_UPG_S_UNKNOWN;
}

const char *gk_upg_state_name(gk_upg_state s)
{
	for (size_t i = 0; i < sizeof(STATES) / sizeof(STATES[0]); i++)
		if (STATES[i].s == s)
			return STATES[i].name;
	return s == GK_UPG_S_NONE ? "" : "unknown";
}

const char *gk_upg_action_name(int a)
{
	static const char *const n[] = { "none", "label", "start", "drain", "unload", "move", "finish", "fail",
					 "release" };
	return a >= 0 && a < (int)(sizeof(n) / sizeof(n[0])) ? n[a] : "?";
}

int64_t gk_upg_parse_time(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	if (!s)
		return 0;
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (!end || *end)
		return 0;
	time_t t = timegm(&tm);
	return t > 0 ? (int64_t)t : 0;
}

/* ---- the decision ------------------------------------------------------------------ */

typedef struct ctx {
	const gk_upg_input *in;
	gk_upg_plan *p;
	int in_progress, unavailable, max_unavailable;
	uint32_t waiting_candidates;  /* candidates left unpicked */
} ctx;

static bool on(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static void problem(ctx *c, size_t node, const char *state, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void problem(ctx *c, size_t node, const char *state, const char *reason, const char *fmt, ...)
{
	c->p->problem_nodes++;
	if (c->p->n_problems >= GK_UPG_MAX_PROBLEMS)
		return;
	gk_upg_problem *pr = &c->p->problems[c->p->n_problems++];
	pr->node = node;
	pr->state = state;
	pr->reason = reason;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(pr->message, sizeof(pr->message), fmt, ap);
	va_end(ap);
}

static gk_upg_step *step(ctx *c, size_t node, int action)
{
	gk_upg_step *s = &c->p->steps[c->p->n_steps++];
	memset(s, 0, sizeof(*s));
	s->node = node;
	s->action = action;
	return s;
}

static void msgf(gk_upg_step *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msgf(gk_upg_step *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->message, sizeof(s->message), fmt, ap);
	va_end(ap);
}

static const char *mod_name(const gk_upg_input *in)
{
	return in->module && *in->module ? in->module : "the module";
}

/* Is the node unavailable for GPU work before any decision of this pass? */
static bool unavailable(const gk_upg_node *n)
{
	switch (n->state) {
	case GK_UPG_S_DRAINING:
	case GK_UPG_S_UNLOADING:
	case GK_UPG_S_LOADING:
	case GK_UPG_S_FAILED:
	case GK_UPG_S_UNKNOWN:
		return true;
	default:
		return !n->ready || (n->version && !n->kmm_ready);
	}
}

static bool in_progress(gk_upg_state s)
{
	return s == GK_UPG_S_DRAINING || s == GK_UPG_S_UNLOADING || s == GK_UPG_S_LOADING;
}

static void count_state(gk_upg_plan *p, gk_upg_state s)
{
	switch (s) {
	case GK_UPG_S_DRAINING: p->draining++; break;
	case GK_UPG_S_UNLOADING: p->unloading++; break;
	case GK_UPG_S_LOADING: p->loading++; break;
	case GK_UPG_S_FAILED:
	case GK_UPG_S_UNKNOWN: p->failed++; break;
	default: break;
	}
}

static void release(ctx *c, size_t i, const char *why)
{
	const gk_upg_node *n = &c->in->nodes[i];
	gk_upg_step *s = step(c, i, GK_UPG_A_RELEASE);
	s->uncordon = n->cordoned_by_us && n->unschedulable;
	snprintf(s->reason, sizeof(s->reason), "UpgradeAbandoned");
	msgf(s, "driver upgrade of this node abandoned (%s)%s", why, s->uncordon ? "; uncordoned" : "");
}

/* The node's report confirms the target version is the loaded one. Returns
 * NULL when it does, else the reason (and message). */
static const char *unconfirmed(const gk_upg_input *in, const gk_upg_node *n, char *msg, size_t cap)
{
	const char *t = in->target;
	const gk_upg_report *r = &n->report;
	if (!n->kmm_ready) {
		snprintf(msg, cap, "waiting for KMM to load version %s (its ready label is not on the node yet)", t);
		return "WaitingForKMM";
	}
	if (!on(n->kmm_version_ready, t)) {
		snprintf(msg, cap, "waiting for KMM to load version %s (its version.ready label says %s)", t,
			 n->kmm_version_ready ? n->kmm_version_ready : "nothing");
		return "WaitingForKMM";
	}
	if (!r->present) {
		snprintf(msg, cap, "KMM loaded version %s, waiting for the node's own report to confirm it", t);
		return "WaitingForReport";
	}
	if (!r->loaded) {
		snprintf(msg, cap, "KMM says version %s is loaded, but the node reports %s not loaded", t, mod_name(in));
		return "ModuleNotLoaded";
	}
	if (!r->oot) {
		snprintf(msg, cap, "KMM says version %s is loaded, but the node reports the in-tree module loaded", t);
		return "InTreeModuleLoaded";
	}
	if (on(r->version, t))
		return NULL;
	if (n->from_srcversion && *n->from_srcversion && *r->srcversion && strcmp(r->srcversion, n->from_srcversion))
		return NULL; /* a new build, whose own version string is not the policy's */
	snprintf(msg, cap,
		 "the node reports version %s (srcversion %s) loaded, %s; waiting for version %s",
		 *r->version ? r->version : "(none)", *r->srcversion ? r->srcversion : "(none)",
		 n->from_srcversion && *n->from_srcversion ? "the same module as before the upgrade"
							   : "not the target version",
		 t);
	return "VersionNotConfirmed";
}

static void node_in_progress(ctx *c, size_t i)
{
	const gk_upg_input *in = c->in;
	const gk_upg_node *n = &in->nodes[i];
	const char *t = in->target;
	gk_upg_step *s;
	char m[GK_UPG_MSG_MAX];
	if (n->skip && n->state != GK_UPG_S_LOADING && t) {
		release(c, i, "gpukmm.io/upgrade-skip is set; its driver was not touched");
		return;
	}
	switch (n->state) {
	case GK_UPG_S_DRAINING:
		if (!in->pol.drain_enable || n->drain == GK_UPG_DRAIN_DONE) {
			s = step(c, i, GK_UPG_A_UNLOAD);
			msgf(s, in->pol.drain_enable ? "drained; the GPU operands leave the node, then %s is unloaded"
						     : "drain disabled; the GPU operands leave the node, then %s is unloaded",
			     mod_name(in));
			return;
		}
		if (n->drain == GK_UPG_DRAIN_FAILED) {
			s = step(c, i, GK_UPG_A_FAIL);
			s->uncordon = n->cordoned_by_us && n->unschedulable;
			snprintf(s->reason, sizeof(s->reason), "DrainFailed");
			msgf(s, "drain failed: %s", n->drain_msg ? n->drain_msg : "(no detail)");
			return;
		}
		if (n->started_s == 0) {
			/* our start stamp is gone (edited): stamp it again, the timeout counts from now */
			s = step(c, i, GK_UPG_A_START);
			msgf(s, "drain start time missing: the drain timeout counts from now");
			return;
		}
		if (in->now_s - n->started_s > in->pol.drain_timeout_s) {
			s = step(c, i, GK_UPG_A_FAIL);
			s->uncordon = n->cordoned_by_us && n->unschedulable;
			snprintf(s->reason, sizeof(s->reason), "DrainTimeout");
			msgf(s, "drain timed out after %ds: %s", in->pol.drain_timeout_s,
			     n->drain_msg ? n->drain_msg : "pods did not leave");
			return;
		}
		step(c, i, GK_UPG_A_DRAIN);
		if (n->drain_msg)
			problem(c, i, GK_POLICY_UPGRADE_DRAINING, "Draining", "%s", n->drain_msg);
		return;
	case GK_UPG_S_UNLOADING:
		if (!t) {
			problem(c, i, GK_POLICY_UPGRADE_UNLOADING, "WaitingForModule", "waiting for the Module's version");
			return;
		}
		if (n->report.present && n->report.can_unload == GPUKMM__TRI_STATE__TRI_YES) {
			s = step(c, i, GK_UPG_A_MOVE);
			msgf(s, "%s can be unloaded: moved to version %s (KMM unloads %s and loads %s)", mod_name(in), t,
			     n->version ? n->version : "the old version", t);
			return;
		}
		if (!n->report.present)
			snprintf(m, sizeof(m), "waiting for the node's report to say %s can be unloaded (no readable "
				 "report: is the node profile running there?)", mod_name(in));
		else if (n->report.can_unload == GPUKMM__TRI_STATE__TRI_NO)
			snprintf(m, sizeof(m), "%s cannot be unloaded yet: %s", mod_name(in),
				 *n->report.blocker ? n->report.blocker : "the node report says it is in use");
		else
			snprintf(m, sizeof(m), "the node report cannot tell whether %s can be unloaded%s%s", mod_name(in),
				 *n->report.blocker ? ": " : "", n->report.blocker);
		problem(c, i, GK_POLICY_UPGRADE_UNLOADING, "UnloadBlocked", "%s", m);
		return;
	case GK_UPG_S_LOADING:
		if (!t) {
			problem(c, i, GK_POLICY_UPGRADE_LOADING, "WaitingForModule", "waiting for the Module's version");
			return;
		}
		if (!on(n->version, t)) {
			/* the target moved on while this node was loading: it is drained, move it again */
			s = step(c, i, GK_UPG_A_MOVE);
			msgf(s, "the target version changed to %s while the node was loading %s: moved to %s", t,
			     n->version ? n->version : "(none)", t);
			return;
		}
		{
			const char *why = unconfirmed(in, n, m, sizeof(m));
			if (why) {
				problem(c, i, GK_POLICY_UPGRADE_LOADING, why, "%s", m);
				return;
			}
		}
		s = step(c, i, GK_UPG_A_FINISH);
		s->uncordon = n->cordoned_by_us && n->unschedulable;
		msgf(s, "upgraded to version %s: the node reports it loaded (version %s, srcversion %s)%s", t,
		     *n->report.version ? n->report.version : "(none)",
		     *n->report.srcversion ? n->report.srcversion : "(none)",
		     s->uncordon ? "; uncordoned" : n->unschedulable ? "; left cordoned (not cordoned by gpukmm)" : "");
		return;
	default:
		return;
	}
}

typedef struct cand {
	size_t i;
	bool unavailable;
	bool cordoned;
} cand;

static int cand_cmp(const void *a, const void *b)
{
	const cand *x = a, *y = b;
	if (x->unavailable != y->unavailable)
		return x->unavailable ? -1 : 1;
	if (x->cordoned != y->cordoned)
		return x->cordoned ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static size_t append(char *buf, size_t cap, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t cap, size_t len, const char *fmt, ...)
{
	if (len >= cap)
		return len;
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(buf + len, cap - len, fmt, ap);
	va_end(ap);
	if (k < 0)
		return len;
	return len + (size_t)k >= cap ? cap - 1 : len + (size_t)k;
}

/* "gpu-2 (DrainTimeout: ...), gpu-3 (...)" of the problems in states (NULL = any) */
static size_t list_problems(const ctx *c, char *buf, size_t cap, size_t len, const char *only_state, int max)
{
	int k = 0;
	for (size_t j = 0; j < c->p->n_problems && k < max; j++) {
		const gk_upg_problem *pr = &c->p->problems[j];
		if (only_state && strcmp(pr->state, only_state))
			continue;
		len = append(buf, cap, len, "%s%s (%s: %s)", k ? ", " : "", c->in->nodes[pr->node].name, pr->reason,
			     pr->message);
		k++;
	}
	return len;
}

static void condition(ctx *c)
{
	gk_upg_plan *p = c->p;
	const gk_upg_input *in = c->in;
	char *b = p->cond_message;
	size_t cap = sizeof(p->cond_message), len = 0;
	uint32_t active = p->draining + p->unloading + p->loading;
	p->cond_status = "False";
	if (!in->target) {
		p->cond_reason = "WaitingForModule";
		append(b, cap, 0, "waiting for the KMM Module to carry kernelModule.version %s",
		       in->policy_version ? in->policy_version : "");
		return;
	}
	const char *t = in->target;
	if (p->halted) {
		p->cond_reason = "UpgradeHalted";
		len = append(b, cap, len, "upgrade to %s halted: %u failed node(s) use up maxUnavailable %d: ", t,
			     p->failed, p->max_unavailable);
		len = list_problems(c, b, cap, len, GK_POLICY_UPGRADE_FAILED, 3);
		append(b, cap, len, "; retry a node by removing its " GK_POLICY_UPGRADE_STATE_LABEL " label");
		return;
	}
	if (active) {
		p->cond_reason = "Upgrading";
		len = append(b, cap, len, "%u/%u nodes on %s; in progress: ", p->up_to_date, p->nodes, t);
		int k = 0;
		for (size_t i = 0; i < in->n && k < 3; i++) {
			const gk_upg_node *n = &in->nodes[i];
			gk_upg_state s = n->state;
			for (size_t j = 0; j < p->n_steps; j++)
				if (p->steps[j].node == i && p->steps[j].action == GK_UPG_A_START)
					s = in->pol.drain_enable ? GK_UPG_S_DRAINING : GK_UPG_S_UNLOADING;
			if (!in_progress(s))
				continue;
			const char *why = NULL;
			for (size_t j = 0; j < p->n_problems && !why; j++)
				if (p->problems[j].node == i)
					why = p->problems[j].message;
			len = append(b, cap, len, "%s%s (%s%s%s)", k++ ? ", " : "", n->name, gk_upg_state_name(s),
				     why ? ": " : "", why ? why : "");
		}
		if (p->pending)
			append(b, cap, len, "; %u pending", p->pending);
		return;
	}
	if (p->blocked) {
		p->cond_reason = "UpgradeBlocked";
		len = append(b, cap, len,
			     "upgrade to %s waits: %u unavailable node(s) use up maxUnavailable %d: ", t, p->unavailable,
			     p->max_unavailable);
		list_problems(c, b, cap, len, "unavailable", 3);
		return;
	}
	if (p->pending) {
		if (!in->pol.auto_upgrade) {
			p->cond_reason = "ManualUpgrade";
			append(b, cap, 0,
			       "%u node(s) not on %s: label each kmm.node.kubernetes.io/version-module.<namespace>.<module>=%s "
			       "after draining it, or set kernelModule.upgradePolicy.autoUpgrade: true",
			       p->pending, t, t);
		} else {
			p->cond_reason = "Upgrading";
			append(b, cap, 0, "%u/%u nodes on %s; %u pending", p->up_to_date, p->nodes, t, p->pending);
		}
		return;
	}
	if (p->failed) {
		p->cond_reason = "UpgradeFailed";
		len = append(b, cap, len, "%u node(s) failed to upgrade to %s: ", p->failed, t);
		len = list_problems(c, b, cap, len, GK_POLICY_UPGRADE_FAILED, 3);
		append(b, cap, len, "; retry a node by removing its " GK_POLICY_UPGRADE_STATE_LABEL " label");
		return;
	}
	p->cond_status = "True";
	p->cond_reason = "UpgradeComplete";
	len = append(b, cap, 0, "%u/%u nodes on %s", p->up_to_date, p->nodes, t);
	if (p->skipped)
		append(b, cap, len, " (%u skipped by " GK_POLICY_UPGRADE_SKIP_LABEL ")", p->skipped);
}

int gk_upg_decide(const gk_upg_input *in, gk_upg_plan *p, gk_err *err)
{
	memset(p, 0, sizeof(*p));
	if (in->n && !(p->steps = calloc(in->n, sizeof(*p->steps))))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	cand *cands = in->n ? calloc(in->n, sizeof(*cands)) : NULL;
	if (in->n && !cands) {
		gk_upg_plan_free(p);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	size_t n_cands = 0;
	ctx c = { .in = in, .p = p };
	p->nodes = (uint32_t)in->n;
	c.max_unavailable = p->max_unavailable = gk_policy_upgrade_max_unavailable(&in->pol, (int)in->n);
	const char *t = in->target;

	for (size_t i = 0; i < in->n; i++) {
		const gk_upg_node *n = &in->nodes[i];
		bool was_unavailable = unavailable(n);
		c.unavailable += was_unavailable;
		if (in_progress(n->state))
			c.in_progress++;
		count_state(p, n->state);
		if (n->write_pending)
			continue; /* decided when the write ends */
		if (in->release) {
			if (in_progress(n->state) || n->state == GK_UPG_S_FAILED)
				release(&c, i, "the policy no longer asks for a versioned driver upgrade");
			continue;
		}
		if (in_progress(n->state)) {
			node_in_progress(&c, i);
			continue;
		}
		if (n->state == GK_UPG_S_FAILED || n->state == GK_UPG_S_UNKNOWN) {
			if (n->state == GK_UPG_S_FAILED)
				problem(&c, i, GK_POLICY_UPGRADE_FAILED, "UpgradeFailed", "%s",
					n->fail_reason && *n->fail_reason ? n->fail_reason : "failed (no reason recorded)");
			else
				problem(&c, i, GK_POLICY_UPGRADE_FAILED, "UnknownState",
					GK_POLICY_UPGRADE_STATE_LABEL " is \"%.64s\", a value gpukmm does not write: "
					"the node is left alone (remove the label to let gpukmm upgrade it)",
					n->state_raw ? n->state_raw : "");
			continue;
		}
		/* none or done */
		bool on_target = t && on(n->version, t);
		if (on_target) {
			p->up_to_date++;
		} else if (n->skip) {
			p->skipped++;
		} else if (!t) {
			p->pending++;
		} else if (!n->version) {
			p->pending++;
			if (in->pol.auto_upgrade) {
				gk_upg_step *s = step(&c, i, GK_UPG_A_LABEL);
				msgf(s, "labelled for version %s (no driver version was loaded: nothing to drain)", t);
			}
		} else if (in->pol.auto_upgrade && n->ready) {
			cands[n_cands++] = (cand){ i, was_unavailable, n->unschedulable };
		} else {
			p->pending++;
		}
		if (was_unavailable)
			problem(&c, i, "unavailable", !n->ready ? "NodeNotReady" : "DriverNotReady", "%s",
				!n->ready ? "the Node is not Ready"
					  : "labelled for a driver version but KMM's ready label is not on the node");
	}

	/* picks: none once failures use up maxUnavailable (the halt); a node that
	 * is unavailable already costs nothing of the budget */
	bool halt = (int)p->failed >= c.max_unavailable;
	if (t && !in->release && n_cands && !halt) {
		qsort(cands, n_cands, sizeof(*cands), cand_cmp);
		size_t k = 0;
		for (; k < n_cands; k++) {
			const cand *cd = &cands[k];
			if (c.in_progress >= in->pol.max_parallel)
				break;
			int cost = cd->unavailable ? 0 : 1;
			if (cost && c.unavailable + cost > c.max_unavailable)
				continue;
			if (!in->confirmed) {
				p->need_confirm = true;
				break;
			}
			const gk_upg_node *n = &in->nodes[cd->i];
			gk_upg_step *s = step(&c, cd->i, GK_UPG_A_START);
			s->cordon = !n->unschedulable;
			msgf(s, "driver upgrade %s → %s started: %s, %s", n->version, t,
			     s->cordon ? "cordoned" : "already cordoned (the cordon stays after the upgrade)",
			     in->pol.drain_enable ? "draining" : "drain disabled");
			c.in_progress++;
			c.unavailable += cost;
			if (in->pol.drain_enable)
				p->draining++;
			else
				p->unloading++;
			cands[k].i = (size_t)-1; /* picked */
		}
	}
	for (size_t j = 0; j < n_cands; j++)
		if (cands[j].i != (size_t)-1) {
			p->pending++;
			c.waiting_candidates++;
		}
	free(cands);

	p->unavailable = (uint32_t)c.unavailable;
	if (c.waiting_candidates && !p->need_confirm) {
		if (halt)
			p->halted = true;
		else if (c.in_progress == 0 && c.unavailable >= c.max_unavailable)
			p->blocked = true;
	}
	condition(&c);
	return 0;
}

void gk_upg_plan_free(gk_upg_plan *p)
{
	free(p->steps);
	p->steps = NULL;
	p->n_steps = 0;
}

/* ---- the Node patch ---------------------------------------------------------------- */

static bool put_str(cJSON *o, const char *k, const char *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, k);
	return v ? cJSON_AddStringToObject(o, k, v) != NULL : cJSON_AddNullToObject(o, k) != NULL;
}

cJSON *gk_upg_patch(const gk_upg_input *in, const gk_upg_step *s, const char *version_key, const char *rv)
{
	const gk_upg_node *n = &in->nodes[s->node];
	if (s->action == GK_UPG_A_NONE || s->action == GK_UPG_A_DRAIN)
		return NULL;
	cJSON *root = cJSON_CreateObject();
	cJSON *md = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
	if (md && rv && !cJSON_AddStringToObject(md, "resourceVersion", rv))
		md = NULL;
	cJSON *lb = md ? cJSON_AddObjectToObject(md, "labels") : NULL;
	cJSON *an = lb ? cJSON_AddObjectToObject(md, "annotations") : NULL;
	bool ok = an != NULL;
	char ts[GK_KUBE_TIME_LEN];
	switch (s->action) {
	case GK_UPG_A_LABEL:
		ok = ok && put_str(lb, version_key, in->target);
		break;
	case GK_UPG_A_START:
		gk_kube_time(ts, sizeof(ts), in->now_s);
		ok = ok &&
		     put_str(lb, GK_POLICY_UPGRADE_STATE_LABEL,
			     n->state == GK_UPG_S_DRAINING || in->pol.drain_enable ? GK_POLICY_UPGRADE_DRAINING
										 : GK_POLICY_UPGRADE_UNLOADING) &&
		     put_str(an, GK_POLICY_UPGRADE_STARTED_ANN, ts) && put_str(an, GK_POLICY_UPGRADE_REASON_ANN, NULL) &&
		     put_str(an, GK_POLICY_UPGRADE_FROM_ANN, NULL);
		if (ok && s->cordon) {
			cJSON *spec = cJSON_AddObjectToObject(root, "spec");
			ok = spec && cJSON_AddTrueToObject(spec, "unschedulable") &&
			     put_str(an, GK_POLICY_UPGRADE_CORDONED_ANN, "true");
		}
		break;
	case GK_UPG_A_UNLOAD:
		ok = ok && put_str(lb, GK_POLICY_UPGRADE_STATE_LABEL, GK_POLICY_UPGRADE_UNLOADING);
		break;
	case GK_UPG_A_MOVE:
		ok = ok && put_str(lb, version_key, in->target) &&
		     put_str(lb, GK_POLICY_UPGRADE_STATE_LABEL, GK_POLICY_UPGRADE_LOADING);
		/* what "a new module" means for a module whose version string is not the policy's;
		 * kept across a second move (the target changed while loading) */
		if (ok && n->state == GK_UPG_S_UNLOADING)
			ok = put_str(an, GK_POLICY_UPGRADE_FROM_ANN,
				     n->report.loaded && *n->report.srcversion ? n->report.srcversion : NULL);
		break;
	case GK_UPG_A_FINISH:
	case GK_UPG_A_FAIL:
	case GK_UPG_A_RELEASE:
		ok = ok &&
		     put_str(lb, GK_POLICY_UPGRADE_STATE_LABEL,
			     s->action == GK_UPG_A_FINISH ? GK_POLICY_UPGRADE_DONE
			     : s->action == GK_UPG_A_FAIL ? GK_POLICY_UPGRADE_FAILED
							  : NULL) &&
		     put_str(an, GK_POLICY_UPGRADE_CORDONED_ANN, NULL) && put_str(an, GK_POLICY_UPGRADE_STARTED_ANN, NULL) &&
		     put_str(an, GK_POLICY_UPGRADE_FROM_ANN, NULL) &&
		     put_str(an, GK_POLICY_UPGRADE_REASON_ANN, s->action == GK_UPG_A_FAIL ? s->message : NULL);
		if (ok && s->uncordon) {
			cJSON *spec = cJSON_AddObjectToObject(root, "spec");
			ok = spec && cJSON_AddNullToObject(spec, "unschedulable");
		}
		break;
	default:
		ok = false;
	}
	if (!ok) {
		cJSON_Delete(root);
		return NULL;
	}
	if (!cJSON_GetArraySize(lb))
		cJSON_DeleteItemFromObjectCaseSensitive(md, "labels");
	if (!cJSON_GetArraySize(an))
		cJSON_DeleteItemFromObjectCaseSensitive(md, "annotations");
	return root;
}

/* ---- status.upgrade ---------------------------------------------------------------- */

void gk_upg_status_free(Gpukmm__UpgradeStatus *s)
{
	if (s)
		protobuf_c_message_free_unpacked(&s->base, NULL);
}

#define U32(f, v) do { st->has_##f = 1; st->f = (v); } while (0)

Gpukmm__UpgradeStatus *gk_upg_status(const gk_upg_input *in, const gk_upg_plan *p)
{
	Gpukmm__UpgradeStatus *st = malloc(sizeof(*st));
	if (!st)
		return NULL;
	gpukmm__upgrade_status__init(st);
	bool oom = false;
	if (in->target && !(st->target_version = strdup(in->target)))
		oom = true;
	st->has_auto_upgrade = 1;
	st->auto_upgrade = in->pol.auto_upgrade;
	U32(nodes, p->nodes);
	U32(up_to_date, p->up_to_date);
	U32(pending, p->pending);
	U32(draining, p->draining);
	U32(unloading, p->unloading);
	U32(loading, p->loading);
	U32(failed, p->failed);
	U32(skipped, p->skipped);
	U32(max_parallel, (uint32_t)in->pol.max_parallel);
	U32(max_unavailable, (uint32_t)p->max_unavailable);
	U32(unavailable, p->unavailable);
	st->has_halted = 1;
	st->halted = p->halted;
	if (p->n_problems && !(st->problems = calloc(p->n_problems, sizeof(*st->problems))))
		oom = true;
	for (size_t i = 0; !oom && i < p->n_problems; i++) {
		Gpukmm__UpgradeNode *u = malloc(sizeof(*u));
		if (!u) {
			oom = true;
			break;
		}
		gpukmm__upgrade_node__init(u);
		st->problems[st->n_problems++] = u;
		const gk_upg_problem *pr = &p->problems[i];
		if (!(u->node = strdup(in->nodes[pr->node].name)) || !(u->state = strdup(pr->state)) ||
		    !(u->reason = strdup(pr->reason)) || !(u->message = strdup(pr->message)))
			oom = true;
	}
	if (oom) {
		gk_upg_status_free(st);
		return NULL;
	}
	return st;
}
