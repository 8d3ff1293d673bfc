/* lib/policy: kernelModule.upgradePolicy — its defaults (the CRD's, applied
 * again here so a policy read before the CRD carried them means the same),
 * maxUnavailable against a node count, and the admission rules with their
 * messages. Pure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kube.h"
#include "gpukmm/policy.h"
#include "internal.h"

void gk_policy_upgrade_resolve(const Gpukmm__KernelModuleSpec *km, gk_policy_upgrade *out)
{
	memset(out, 0, sizeof(*out));
	out->max_parallel = GK_POLICY_UPGRADE_MAX_PARALLEL;
	out->max_unavailable = GK_POLICY_UPGRADE_MAX_UNAVAILABLE_PCT;
	out->max_unavailable_percent = true;
	out->drain_enable = true;
	out->drain_timeout_s = GK_POLICY_UPGRADE_DRAIN_TIMEOUT_S;
	const Gpukmm__UpgradePolicy *u = km ? km->upgrade_policy : NULL;
	if (!u)
		return;
	out->auto_upgrade = u->has_auto_upgrade && u->auto_upgrade;
	if (u->has_max_parallel && u->max_parallel >= 1)
		out->max_parallel = u->max_parallel;
	if (u->max_unavailable) {
		int v;
		bool pct;
		if (gk_policy_int_or_percent(u->max_unavailable, &v, &pct) == 0) {
			out->max_unavailable = v;
			out->max_unavailable_percent = pct;
		}
	}
	const Gpukmm__UpgradeDrain *d = u->drain;
	if (!d)
		return;
	if (d->has_enable)
		out->drain_enable = d->enable;
	if (d->has_timeout_seconds && d->timeout_seconds >= 1)
		out->drain_timeout_s = d->timeout_seconds;
	if (d->has_grace_period_seconds && d->grace_period_seconds >= 0) {
		out->has_grace_period = true;
		out->grace_period_s = d->grace_period_seconds;
	}
	if (d->pod_selector && *d->pod_selector)
		out->pod_selector = d->pod_selector;
	out->delete_empty_dir_data = d->has_delete_empty_dir_data && d->delete_empty_dir_data;
	out->force = d->has_force && d->force;
}

int gk_policy_int_or_percent(const Gpukmm__IntOrString *v, int *out, bool *percent)
{
	if (!v)
		return -1;
	if (v->has_int_val) {
		if (v->int_val < 1)
			return -1;
		*out = v->int_val;
		*percent = false;
		return 0;
	}
	const char *s = v->str_val;
	if (!s || !*s)
		return -1;
	size_t n = strlen(s);
	if (n < 2 || n > 4 || s[n - 1] != '%')
		return -1;
	int x = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		x = x * 10 + (s[i] - '0');
	}
	if (x < 1 || x > 100)
		return -1;
	*out = x;
	*percent = true;
	return 0;
}

int gk_policy_upgrade_max_unavailable(const gk_policy_upgrade *u, int nodes)
{
	if (!u->max_unavailable_percent)
		return u->max_unavailable;
	if (nodes <= 0)
		return 0;
	/* rounded up, as NVIDIA's upgrade controller and a Deployment's maxSurge
	 * do: 25% of 3 nodes is 1, not 0 (a rollout that never starts) */
	long v = ((long)nodes * u->max_unavailable + 99) / 100;
	return v < 1 ? 1 : (int)v;
}

#define F "spec.kernelModule.upgradePolicy"

void gk_policy_validate_upgrade(const Gpukmm__KernelModuleSpec *km, gk_policy_report *r)
{
	const Gpukmm__UpgradePolicy *u = km ? km->upgrade_policy : NULL;
	if (!u)
		return;
	if (u->has_auto_upgrade && u->auto_upgrade && (!km->version || !*km->version))
		gk_policy_reportf(r, F ".autoUpgrade",
				  "kernelModule.upgradePolicy.autoUpgrade needs kernelModule.version: without a version "
				  "KMM reloads the module on every node at once, so there is nothing to roll out node by "
				  "node");
	if (u->has_max_parallel && u->max_parallel < 1)
		gk_policy_reportf(r, F ".maxParallel",
				  "kernelModule.upgradePolicy.maxParallel must be at least 1 (nodes upgraded at the same "
				  "time), got %d", u->max_parallel);
	if (u->max_unavailable) {
		int v;
		bool pct;
		if (gk_policy_int_or_percent(u->max_unavailable, &v, &pct) != 0) {
			char got[64];
			if (u->max_unavailable->has_int_val)
				snprintf(got, sizeof(got), "%d", u->max_unavailable->int_val);
			else {
				char *q = gk_policy_quote(u->max_unavailable->str_val);
				if (!q) {
					r->oom = true;
					return;
				}
				snprintf(got, sizeof(got), "%.60s", q);
				free(q);
			}
			gk_policy_reportf(r, F ".maxUnavailable",
					  "kernelModule.upgradePolicy.maxUnavailable must be a number of nodes of at least 1 "
					  "or a percentage of the nodes from \"1%%\" to \"100%%\" (e.g. \"25%%\"), got %s", got);
		}
	}
	const Gpukmm__UpgradeDrain *d = u->drain;
	if (!d)
		return;
	if (d->has_timeout_seconds && d->timeout_seconds < 1)
		gk_policy_reportf(r, F ".drain.timeoutSeconds",
				  "kernelModule.upgradePolicy.drain.timeoutSeconds must be at least 1 (after it a node "
				  "whose pods did not leave fails), got %d", d->timeout_seconds);
	if (d->has_grace_period_seconds && d->grace_period_seconds < 0)
		gk_policy_reportf(r, F ".drain.gracePeriodSeconds",
				  "kernelModule.upgradePolicy.drain.gracePeriodSeconds must be 0 or more (leave it out "
				  "to use each pod's own terminationGracePeriodSeconds), got %lld",
				  (long long)d->grace_period_seconds);
	if (d->pod_selector && *d->pod_selector) {
		char msg[512];
		if (gk_policy_check_label_selector(d->pod_selector, msg, sizeof(msg))) {
			char *q = gk_policy_quote(d->pod_selector);
			if (!q) {
				r->oom = true;
				return;
			}
			gk_policy_reportf(r, F ".drain.podSelector",
					  "kernelModule.upgradePolicy.drain.podSelector %s is not a label selector: %s", q,
					  msg);
			free(q);
		}
	}
}

int gk_policy_check_label_selector(const char *sel, char *msg, size_t cap)
{
	gk_selector s;
	gk_err e = { 0 };
	if (gk_label_selector_parse(sel, &s, &e) != GK_OK) {
		snprintf(msg, cap, "%s", e.msg);
		return 1;
	}
	int bad = 0;
	char m[256];
	for (int i = 0; i < s.nterms && !bad; i++) {
		const gk_sel_term *t = &s.terms[i];
		if (gk_policy_check_qualified_name(t->key, m, sizeof(m))) {
			snprintf(msg, cap, "key \"%s\": %s", t->key, m);
			bad = 1;
		}
		for (int j = 0; j < t->nvalues && !bad; j++)
			if (gk_policy_check_label_value(t->values[j], m, sizeof(m))) {
				snprintf(msg, cap, "value \"%s\" of key \"%s\": %s", t->values[j], t->key, m);
				bad = 1;
			}
	}
	gk_selector_free(&s);
	return bad;
}
