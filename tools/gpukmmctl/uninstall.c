/* gpukmmctl uninstall — the decisions (see uninstall.h). */
#include "uninstall.h"

#include <stdio.h>
#include <string.h>

const gkctl_kind gkctl_uninstall_kinds[] = {
	{ "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", false },
	{ "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", false },
	{ "apiextensions.k8s.io", "v1", "customresourcedefinitions", false },
	{ "apps", "v1", "deployments", true },
	{ "apps", "v1", "daemonsets", true },
	{ "policy", "v1", "poddisruptionbudgets", true },
	{ "", "v1", "services", true },
	{ "monitoring.coreos.com", "v1", "servicemonitors", true },
	{ "monitoring.coreos.com", "v1", "podmonitors", true },
	{ "monitoring.coreos.com", "v1", "prometheusrules", true },
	{ "cert-manager.io", "v1", "certificates", true },
	{ "cert-manager.io", "v1", "issuers", true },
	{ "", "v1", "secrets", true },
	{ "", "v1", "configmaps", true },
	{ "", "v1", "resourcequotas", true },
	{ "rbac.authorization.k8s.io", "v1", "rolebindings", true },
	{ "rbac.authorization.k8s.io", "v1", "roles", true },
	{ "rbac.authorization.k8s.io", "v1", "clusterrolebindings", false },
	{ "rbac.authorization.k8s.io", "v1", "clusterroles", false },
	{ "security.openshift.io", "v1", "securitycontextconstraints", false },
	{ "", "v1", "serviceaccounts", true },
	{ "", "v1", "namespaces", false },
};
const size_t gkctl_n_uninstall_kinds = sizeof(gkctl_uninstall_kinds) / sizeof(gkctl_uninstall_kinds[0]);

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

void gkctl_policy_holds(const cJSON *cp, char *out, size_t cap)
{
	const cJSON *st = get(cp, "status"), *c, *e;
	size_t n = 0;
	out[0] = 0;
	cJSON_ArrayForEach(c, get(st, "conditions")) {
		const char *type = str(c, "type");
		if (type && strcmp(type, "ModuleLoaded") == 0 && str(c, "reason"))
			n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s: %s", str(c, "reason"),
					      str(c, "message") ? str(c, "message") : "");
	}
	int i = 0;
	cJSON_ArrayForEach(e, get(st, "errors")) {
		if (!cJSON_IsString(e) || i++ >= 3)
			continue;
		n += (size_t)snprintf(out + (n < cap ? n : cap), n < cap ? cap - n : 0, "%s%s", n ? "; " : "",
				      e->valuestring);
	}
	if (!out[0])
		snprintf(out, cap, "waiting for the controller (no status written yet)");
}

enum gkctl_liveness gkctl_lease_observe(gkctl_lease_watch *w, const cJSON *lease, int64_t now_ms, int64_t grace_ms)
{
	const char *rv = lease ? str(get(lease, "metadata"), "resourceVersion") : NULL;
	const cJSON *spec = lease ? get(lease, "spec") : NULL;
	const cJSON *dur = get(spec, "leaseDurationSeconds");
	const char *holder = str(spec, "holderIdentity");
	snprintf(w->holder, sizeof(w->holder), "%s", holder ? holder : "");
	if (cJSON_IsNumber(dur) && dur->valuedouble > 0)
		w->duration_ms = (int64_t)(dur->valuedouble * 1000);
	else if (!w->duration_ms)
		w->duration_ms = 15000;
	if (!w->seen) {
		w->seen = true;
		w->first_ms = w->changed_ms = now_ms;
		snprintf(w->rv, sizeof(w->rv), "%s", rv ? rv : "");
		return GKCTL_UNKNOWN;
	}
	if (rv && strcmp(rv, w->rv) != 0) {
		snprintf(w->rv, sizeof(w->rv), "%s", rv);
		w->changed_ms = now_ms;
		/* renewed by someone holding it (a release empties the holder) */
		if (holder && *holder)
			return GKCTL_RUNNING;
	}
	if (now_ms - w->changed_ms > w->duration_ms + grace_ms)
		return GKCTL_STOPPED;
	return w->changed_ms > w->first_ms && holder && *holder ? GKCTL_RUNNING : GKCTL_UNKNOWN;
}
