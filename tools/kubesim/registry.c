/* kubesim — resource types: the built-in kinds and those CRDs define (the
 * release-dependent resource.k8s.io kinds are added by versions.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim.h"

static const struct builtin {
	const char *group, *version, *resource, *singular, *kind, *short_names, *categories;
	int namespaced, has_status;
} builtins[] = {
	{ "", "v1", "namespaces", "namespace", "Namespace", "ns", NULL, 0, 1 },
	{ "", "v1", "nodes", "node", "Node", "no", NULL, 0, 1 },
	{ "", "v1", "pods", "pod", "Pod", "po", "all", 1, 1 },
	{ "", "v1", "configmaps", "configmap", "ConfigMap", "cm", NULL, 1, 0 },
	{ "", "v1", "secrets", "secret", "Secret", NULL, NULL, 1, 0 },
	{ "", "v1", "events", "event", "Event", "ev", NULL, 1, 0 },
	{ "", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", "sa", NULL, 1, 0 },
	{ "", "v1", "services", "service", "Service", "svc", "all", 1, 1 },
	{ "", "v1", "resourcequotas", "resourcequota", "ResourceQuota", "quota", NULL, 1, 1 },
	{ "apps", "v1", "daemonsets", "daemonset", "DaemonSet", "ds", "all", 1, 1 },
	{ "apps", "v1", "deployments", "deployment", "Deployment", "deploy", "all", 1, 1 },
	{ "coordination.k8s.io", "v1", "leases", "lease", "Lease", NULL, NULL, 1, 0 },
	{ "events.k8s.io", "v1", "events", "event", "Event", "ev", NULL, 1, 0 },
	{ "apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
	  "CustomResourceDefinition", "crd,crds", "api-extensions", 0, 1 },
	{ "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "mutatingwebhookconfiguration",
	  "MutatingWebhookConfiguration", NULL, "api-extensions", 0, 0 },
	{ "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "validatingwebhookconfiguration",
	  "ValidatingWebhookConfiguration", NULL, "api-extensions", 0, 0 },
	/* the DRA driver's admission policy (gpukmm-opmgr) */
	{ "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "validatingadmissionpolicy",
	  "ValidatingAdmissionPolicy", NULL, "api-extensions", 0, 1 },
	{ "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", "validatingadmissionpolicybinding",
	  "ValidatingAdmissionPolicyBinding", NULL, "api-extensions", 0, 0 },
	{ "rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", NULL, NULL, 0, 0 },
	{ "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", NULL,
	  NULL, 0, 0 },
	{ "rbac.authorization.k8s.io", "v1", "roles", "role", "Role", NULL, NULL, 1, 0 },
	{ "rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", NULL, NULL, 1, 0 },
	{ "apps", "v1", "replicasets", "replicaset", "ReplicaSet", "rs", "all", 1, 1 },
	{ "apps", "v1", "statefulsets", "statefulset", "StatefulSet", "sts", "all", 1, 1 },
	{ "policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", "pdb", NULL, 1, 1 },
	{ "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "validatingadmissionpolicy",
	  "ValidatingAdmissionPolicy", NULL, "api-extensions", 0, 1 },
	{ "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", "validatingadmissionpolicybinding",
	  "ValidatingAdmissionPolicyBinding", NULL, "api-extensions", 0, 0 },
	{ "scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", "pc", NULL, 0, 0 },
};

static char *sdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

void ks_rtype_free(ks_rtype *t)
{
	if (!t)
		return;
	free(t->group);
	free(t->version);
	free(t->resource);
	free(t->singular);
	free(t->kind);
	free(t->list_kind);
	free(t->short_names);
	free(t->categories);
	free(t->crd_name);
	cJSON_Delete(t->columns);
	cJSON_Delete(t->schema);
	free(t);
}

int ks_registry_add(ks_registry *r, ks_rtype *t)
{
	if (r->n == r->cap) {
		int nc = r->cap ? r->cap * 2 : 32;
		ks_rtype **nv = realloc(r->v, sizeof(*nv) * (size_t)nc);
		if (!nv) {
			ks_rtype_free(t);
			return GK_RESOURCE_EXHAUSTED;
		}
		r->v = nv;
		r->cap = nc;
	}
	r->v[r->n++] = t;
	return 0;
}

int ks_registry_init_builtin(ks_registry *r)
{
	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
		const struct builtin *b = &builtins[i];
		ks_rtype *t = calloc(1, sizeof(*t));
		if (!t)
			return GK_RESOURCE_EXHAUSTED;
		char lk[128];
		snprintf(lk, sizeof(lk), "%sList", b->kind);
		t->group = sdup(b->group);
		t->version = sdup(b->version);
		t->resource = sdup(b->resource);
		t->singular = sdup(b->singular);
		t->kind = sdup(b->kind);
		t->list_kind = sdup(lk);
		t->short_names = sdup(b->short_names);
		t->categories = sdup(b->categories);
		t->namespaced = b->namespaced;
		t->has_status = b->has_status;
		t->storage = 1;
		if (!t->group || !t->version || !t->resource || !t->singular || !t->kind || !t->list_kind ||
		    (b->short_names && !t->short_names) || (b->categories && !t->categories)) {
			ks_rtype_free(t);
			return GK_RESOURCE_EXHAUSTED;
		}
		if (ks_registry_add(r, t))
			return GK_RESOURCE_EXHAUSTED;
	}
	return 0;
}

void ks_registry_free(ks_registry *r)
{
	for (int i = 0; i < r->n; i++)
		ks_rtype_free(r->v[i]);
	for (int i = 0; i < r->ndead; i++)
		ks_rtype_free(r->dead[i]);
	free(r->v);
	free(r->dead);
	memset(r, 0, sizeof(*r));
}

const ks_rtype *ks_registry_find(const ks_registry *r, const char *group, const char *version, const char *resource)
{
	for (int i = 0; i < r->n; i++) {
		const ks_rtype *t = r->v[i];
		if (strcmp(t->group, group) == 0 && strcmp(t->version, version) == 0 &&
		    strcmp(t->resource, resource) == 0)
			return t;
	}
	return NULL;
}

const ks_rtype *ks_registry_find_kind(const ks_registry *r, const char *group, const char *version, const char *kind)
{
	for (int i = 0; i < r->n; i++) {
		const ks_rtype *t = r->v[i];
		if (strcmp(t->group, group) == 0 && (!version || strcmp(t->version, version) == 0) &&
		    strcmp(t->kind, kind) == 0)
			return t;
	}
	return NULL;
}

const ks_rtype *ks_registry_find_gr(const ks_registry *r, const char *group, const char *resource)
{
	const ks_rtype *any = NULL;
	for (int i = 0; i < r->n; i++) {
		const ks_rtype *t = r->v[i];
		if (strcmp(t->group, group) == 0 && strcmp(t->resource, resource) == 0) {
			if (t->storage)
				return t;
			if (!any)
				any = t;
		}
	}
	return any;
}

void ks_registry_remove_crd(ks_registry *r, const char *crd_name)
{
	int j = 0;
	for (int i = 0; i < r->n; i++) {
		if (r->v[i]->crd_name && strcmp(r->v[i]->crd_name, crd_name) == 0) {
			/* retired, not freed: a request may still hold the pointer */
			ks_rtype **nd = realloc(r->dead, sizeof(*nd) * (size_t)(r->ndead + 1));
			if (nd) {
				r->dead = nd;
				r->dead[r->ndead++] = r->v[i];
			} else {
				r->v[j++] = r->v[i]; /* keep it registered rather than risk a dangling pointer */
			}
		} else
			r->v[j++] = r->v[i];
	}
	r->n = j;
}

const char *ks_rtype_api_version(const ks_rtype *t, char *buf, size_t cap)
{
	if (t->group[0])
		snprintf(buf, cap, "%s/%s", t->group, t->version);
	else
		snprintf(buf, cap, "%s", t->version);
	return buf;
}
