/* gpukmm-upgrader — one pass for one ClusterPolicy (see pass.h). */
#include "pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "gpukmm/policy.h"
#include "kops.h"

#define PERIODIC_MS 30000 /* while nodes are in a step: decide again at least this often */

static bool matches(const gk_upv_node *n, const gk_policy_selector *sel)
{
	for (size_t i = 0; i < sel->n; i++) {
		const char *v = gk_upv_node_label(n, sel->kv[i]->key);
		if (!v || strcmp(v, sel->kv[i]->value ? sel->kv[i]->value : ""))
			return false;
	}
	return true;
}

/* a policy that rolls a versioned Module out */
static bool versioned(const Gpukmm__ClusterPolicy *cp)
{
	return cp && cp->spec && cp->spec->kernel_module && cp->spec->kernel_module->version &&
	       *cp->spec->kernel_module->version && !(cp->metadata && cp->metadata->deletion_timestamp);
}

typedef struct others {
	const gk_upv *v;
	const char *self;
	gk_policy_selector sel[16];
	size_t n;
	bool oom;
} others;

static void add_other(void *user, const char *name)
{
	others *o = user;
	if (!strcmp(name, o->self) || o->n >= sizeof(o->sel) / sizeof(o->sel[0]))
		return;
	const Gpukmm__ClusterPolicy *cp = gk_upv_policy(o->v, name);
	if (!versioned(cp))
		return;
	if (gk_policy_node_selector(cp->spec, NULL, &o->sel[o->n]) != 0)
		o->oom = true;
	else
		o->n++;
}

static int cmp_nodes(const void *a, const void *b)
{
	return strcmp(((const gk_upg_node *)a)->name, ((const gk_upg_node *)b)->name);
}

static bool label_true(const char *v)
{
	return v && !strcmp(v, "true");
}

static Gpukmm__Condition *condition(const gk_upg_plan *p, int64_t generation)
{
	Gpukmm__Condition *c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	gpukmm__condition__init(c);
	c->type = strdup("Upgraded");
	c->status = strdup(p->cond_status);
	c->reason = strdup(p->cond_reason);
	c->message = strdup(p->cond_message);
	c->has_observed_generation = generation != 0;
	c->observed_generation = generation;
	if (!c->type || !c->status || !c->reason || !c->message) {
		protobuf_c_message_free_unpacked(&c->base, NULL);
		return NULL;
	}
	return c;
}

int gk_upp_pass(const gk_upv *v, const char *policy, const gk_upp_ops *ops, int64_t now_s, gk_upp_result *res,
		gk_upp_stats *st, gk_err *err)
{
	memset(res, 0, sizeof(*res));
	st->passes++;
	if (!gk_upv_leader(v)) {
		res->idle = true;
		return GK_OK;
	}
	const char *ns = gk_upv_ns(v);
	const Gpukmm__ClusterPolicy *cp = gk_upv_policy(v, policy);
	res->deleted = cp == NULL;
	res->generation = cp && cp->metadata && cp->metadata->has_generation ? cp->metadata->generation : 0;
	bool active = versioned(cp);
	const Gpukmm__KernelModuleSpec *km = cp && cp->spec ? cp->spec->kernel_module : NULL;

	gk_upg_input in;
	memset(&in, 0, sizeof(in));
	gk_policy_upgrade_resolve(km, &in.pol);
	in.now_s = now_s;
	in.module = km && km->module_name && *km->module_name ? km->module_name : GK_POLICY_DEFAULT_MODULE;
	in.policy_version = km ? km->version : NULL;
	in.release = !active;

	char vkey[GK_POLICY_KEY_MAX], rkey[GK_POLICY_KEY_MAX], vrkey[GK_POLICY_KEY_MAX + 16], mname[GK_POLICY_KEY_MAX];
	if (gk_policy_version_label(vkey, sizeof(vkey), ns, policy) || gk_policy_ready_label(rkey, sizeof(rkey), ns, policy) ||
	    gk_policy_module_name(mname, sizeof(mname), policy))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ClusterPolicy name too long");
	snprintf(vrkey, sizeof(vrkey), "%.*s.version.ready", (int)(strlen(rkey) - strlen(".ready")), rkey);
	if (active && gk_upv_kmm(v)) {
		const Gpukmm__Module *m = gk_upv_module(v, mname);
		const char *mv = m && m->spec && m->spec->module_loader && m->spec->module_loader->container
					 ? m->spec->module_loader->container->version
					 : NULL;
		if (mv && !strcmp(mv, km->version) && !(m->metadata && m->metadata->deletion_timestamp))
			in.target = mv;
	}

	/* the nodes: the Module's selection, or (released) those left in a step no other policy rolls */
	gk_policy_selector sel = { 0 };
	others oth = { .v = v, .self = policy };
	if (active && gk_policy_node_selector(cp->spec, NULL, &sel) != 0)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	if (!active)
		gk_upv_each_policy(v, add_other, &oth);
	size_t total = gk_upv_n_nodes(v);
	gk_upg_node *nodes = total ? calloc(total, sizeof(*nodes)) : NULL;
	if (oth.oom || (total && !nodes)) {
		gk_policy_selector_free(&sel);
		for (size_t i = 0; i < oth.n; i++)
			gk_policy_selector_free(&oth.sel[i]);
		free(nodes);
		res->failed = true;
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	size_t n = 0;
	for (size_t i = 0; i < total; i++) {
		const gk_upv_node *node = gk_upv_node_at(v, i);
		if (!node)
			continue;
		const gk_upg_report *rep = gk_upv_node_report(node);
		const char *state = gk_upv_node_label(node, GK_POLICY_UPGRADE_STATE_LABEL);
		if (active) {
			if (!matches(node, &sel))
				continue;
		} else {
			gk_upg_state s = gk_upg_state_parse(state);
			if (s != GK_UPG_S_DRAINING && s != GK_UPG_S_UNLOADING && s != GK_UPG_S_LOADING &&
			    s != GK_UPG_S_FAILED)
				continue;
			bool theirs = false;
			for (size_t j = 0; j < oth.n && !theirs; j++)
				theirs = matches(node, &oth.sel[j]);
			if (theirs)
				continue;
		}
		gk_upg_node *x = &nodes[n++];
		x->name = gk_upv_node_name(node);
		x->ready = gk_upv_node_ready(node);
		x->unschedulable = gk_upv_node_unschedulable(node);
		x->version = gk_upv_node_label(node, vkey);
		x->state = gk_upg_state_parse(state);
		x->state_raw = state;
		x->skip = label_true(gk_upv_node_label(node, GK_POLICY_UPGRADE_SKIP_LABEL));
		x->cordoned_by_us = label_true(gk_upv_node_annotation(node, GK_POLICY_UPGRADE_CORDONED_ANN));
		x->started_s = gk_upg_parse_time(gk_upv_node_annotation(node, GK_POLICY_UPGRADE_STARTED_ANN));
		x->from_srcversion = gk_upv_node_annotation(node, GK_POLICY_UPGRADE_FROM_ANN);
		x->fail_reason = gk_upv_node_annotation(node, GK_POLICY_UPGRADE_REASON_ANN);
		x->kmm_ready = gk_upv_node_label(node, rkey) != NULL;
		x->kmm_version_ready = gk_upv_node_label(node, vrkey);
		if (rep) {
			x->report = *rep;
			if (strcmp(rep->module, in.module))
				x->report.present = false; /* a report about another module */
		}
		x->drain = ops->drain_status(ops->user, x->name, &x->drain_msg);
		x->write_pending = ops->busy(ops->user, x->name);
		if (x->write_pending)
			res->pending = true;
	}
	gk_policy_selector_free(&sel);
	for (size_t i = 0; i < oth.n; i++)
		gk_policy_selector_free(&oth.sel[i]);
	if (n)
		qsort(nodes, n, sizeof(*nodes), cmp_nodes);
	in.nodes = nodes;
	in.n = n;
	/* picks only on states read fresh since we lead, on a view that holds every node and
	 * claim, and none while a write is in flight */
	in.confirmed = !res->pending && ops->confirmed(ops->user) && gk_upv_complete(v);

	gk_upg_plan plan;
	int rc = gk_upg_decide(&in, &plan, err);
	if (rc) {
		free(nodes);
		res->failed = true;
		return rc;
	}
	/* the drainer runs exactly on the nodes the API shows draining */
	for (size_t i = 0; i < n; i++)
		if (nodes[i].state != GK_UPG_S_DRAINING)
			ops->drain_stop(ops->user, nodes[i].name);
	const char *rv_of = NULL;
	for (size_t s = 0; s < plan.n_steps; s++) {
		const gk_upg_step *step = &plan.steps[s];
		const gk_upg_node *x = &nodes[step->node];
		if (step->action == GK_UPG_A_DRAIN) {
			ops->drain(ops->user, x->name, &in.pol);
			continue;
		}
		const gk_upv_node *node = gk_upv_node_get(v, x->name);
		rv_of = node ? gk_upv_node_rv(node) : NULL;
		cJSON *body = gk_upg_patch(&in, step, vkey, rv_of);
		char *s_body = body ? cJSON_PrintUnformatted(body) : NULL;
		cJSON_Delete(body);
		if (!s_body) {
			res->failed = true;
			continue;
		}
		static const char *const reasons[] = { "", "UpgradeLabelled", "UpgradeStarted", "", "UpgradeDrained",
						       "UpgradeVersionMoved", "Upgraded", "UpgradeFailed", "UpgradeAbandoned" };
		const char *last = NULL;
		bool warning = step->action == GK_UPG_A_FAIL || step->action == GK_UPG_A_RELEASE;
		int w = ops->patch(ops->user, x->name, s_body, warning, reasons[step->action], step->message, &last);
		free(s_body);
		if (w == GK_UPK_STARTED) {
			res->writes++;
			res->pending = true;
			st->steps[step->action]++;
			if (step->action == GK_UPG_A_FINISH && x->started_s && st->n_finished < 64)
				st->finished_seconds[st->n_finished++] = now_s - x->started_s;
		} else if (w == GK_UPK_BUSY) {
			res->pending = true;
		} else if (w == GK_UPK_FAILED) {
			res->failed = true;
		}
		if (last)
			GK_DEBUG("node %s: last write failed: %s", x->name, last);
	}
	/* a drain timeout comes without an event: be back for it */
	int64_t due = 0;
	for (size_t i = 0; i < n; i++) {
		if (nodes[i].state == GK_UPG_S_DRAINING && nodes[i].started_s) {
			int64_t left = (nodes[i].started_s + in.pol.drain_timeout_s + 1 - now_s) * 1000;
			if (left < 1000)
				left = 1000;
			if (!due || left < due)
				due = left;
		}
		if ((nodes[i].state == GK_UPG_S_DRAINING || nodes[i].state == GK_UPG_S_UNLOADING ||
		     nodes[i].state == GK_UPG_S_LOADING) && (!due || due > PERIODIC_MS))
			due = PERIODIC_MS;
	}
	res->requeue_ms = due;
	if (active) {
		res->upgrade = gk_upg_status(&in, &plan);
		res->upgraded = condition(&plan, res->generation);
		if (!res->upgrade || !res->upgraded) {
			res->failed = true;
			rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		}
	}
	gk_upg_plan_free(&plan);
	free(nodes);
	if (res->failed)
		st->failures++;
	return rc;
}

void gk_upp_result_free(gk_upp_result *res)
{
	gk_upg_status_free(res->upgrade);
	if (res->upgraded)
		protobuf_c_message_free_unpacked(&res->upgraded->base, NULL);
	res->upgrade = NULL;
	res->upgraded = NULL;
}
