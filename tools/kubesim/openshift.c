/* kubesim --openshift: the API groups an operator looks for to know it runs on
 * OpenShift — security.openshift.io/v1 SecurityContextConstraints (cluster-scoped,
 * short name scc) and route.openshift.io/v1 Routes — and the default SCCs a cluster
 * has (restricted-v2, privileged). SCCs are stored, not enforced on pods. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim.h"

static ks_rtype *type(const char *group, const char *resource, const char *singular, const char *kind,
		      const char *short_names, int namespaced, int has_status)
{
	ks_rtype *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	char lk[128];
	snprintf(lk, sizeof(lk), "%sList", kind);
	t->group = strdup(group);
	t->version = strdup("v1");
	t->resource = strdup(resource);
	t->singular = strdup(singular);
	t->kind = strdup(kind);
	t->list_kind = strdup(lk);
	t->short_names = short_names ? strdup(short_names) : NULL;
	t->namespaced = namespaced;
	t->has_status = has_status;
	t->storage = 1;
	if (!t->group || !t->version || !t->resource || !t->singular || !t->kind || !t->list_kind ||
	    (short_names && !t->short_names)) {
		ks_rtype_free(t);
		return NULL;
	}
	return t;
}

int ks_openshift_setup(ks_server *s)
{
	ks_rtype *scc = type("security.openshift.io", "securitycontextconstraints", "securitycontextconstraints",
			     "SecurityContextConstraints", "scc", 0, 0);
	if (!scc || ks_registry_add(&s->reg, scc))
		return GK_RESOURCE_EXHAUSTED;
	ks_rtype *route = type("route.openshift.io", "routes", "route", "Route", NULL, 1, 1);
	if (!route || ks_registry_add(&s->reg, route))
		return GK_RESOURCE_EXHAUSTED;
	s->openshift = 1;
	return 0;
}

/* The two default SCCs of an OpenShift 4 cluster, as the cluster ships them. */
static const char *default_sccs[] = {
	"{\"apiVersion\":\"security.openshift.io/v1\",\"kind\":\"SecurityContextConstraints\",\"metadata\":{\"name\":"
	"\"restricted-v2\",\"annotations\":{\"kubernetes.io/description\":\"restricted-v2 denies access to all host "
	"features and requires pods to be run with a UID, and SELinux context that are allocated to the namespace.\"}},"
	"\"allowHostDirVolumePlugin\":false,\"allowHostIPC\":false,\"allowHostNetwork\":false,\"allowHostPID\":false,"
	"\"allowHostPorts\":false,\"allowPrivilegeEscalation\":false,\"allowPrivilegedContainer\":false,"
	"\"allowedCapabilities\":[\"NET_BIND_SERVICE\"],\"defaultAddCapabilities\":null,\"fsGroup\":{\"type\":"
	"\"MustRunAs\"},\"groups\":[],\"priority\":null,\"readOnlyRootFilesystem\":false,\"requiredDropCapabilities\":"
	"[\"ALL\"],\"runAsUser\":{\"type\":\"MustRunAsRange\"},\"seLinuxContext\":{\"type\":\"MustRunAs\"},"
	"\"seccompProfiles\":[\"runtime/default\"],\"supplementalGroups\":{\"type\":\"RunAsAny\"},\"users\":[],"
	"\"volumes\":[\"configMap\",\"csi\",\"downwardAPI\",\"emptyDir\",\"ephemeral\",\"persistentVolumeClaim\","
	"\"projected\",\"secret\"]}",
	"{\"apiVersion\":\"security.openshift.io/v1\",\"kind\":\"SecurityContextConstraints\",\"metadata\":{\"name\":"
	"\"privileged\",\"annotations\":{\"kubernetes.io/description\":\"privileged allows access to all privileged and "
	"host features and the ability to run as any user, any group, any fsGroup, and with any SELinux context.\"}},"
	"\"allowHostDirVolumePlugin\":true,\"allowHostIPC\":true,\"allowHostNetwork\":true,\"allowHostPID\":true,"
	"\"allowHostPorts\":true,\"allowPrivilegeEscalation\":true,\"allowPrivilegedContainer\":true,"
	"\"allowedCapabilities\":[\"*\"],\"allowedUnsafeSysctls\":[\"*\"],\"defaultAddCapabilities\":null,\"fsGroup\":"
	"{\"type\":\"RunAsAny\"},\"groups\":[\"system:cluster-admins\",\"system:nodes\",\"system:masters\"],\"priority\":"
	"null,\"readOnlyRootFilesystem\":false,\"requiredDropCapabilities\":null,\"runAsUser\":{\"type\":\"RunAsAny\"},"
	"\"seLinuxContext\":{\"type\":\"RunAsAny\"},\"seccompProfiles\":[\"*\"],\"supplementalGroups\":{\"type\":"
	"\"RunAsAny\"},\"users\":[\"system:admin\",\"system:serviceaccount:openshift-infra:build-controller\"],"
	"\"volumes\":[\"*\"]}",
};

int ks_openshift_seed(ks_server *s)
{
	if (!s->openshift)
		return 0;
	for (size_t i = 0; i < sizeof(default_sccs) / sizeof(default_sccs[0]); i++) {
		cJSON *o = cJSON_Parse(default_sccs[i]);
		const char *name = o ? ks_meta_str(o, "name") : NULL;
		if (!name) {
			cJSON_Delete(o);
			return GK_RESOURCE_EXHAUSTED;
		}
		if (ks_store_get(&s->store, "security.openshift.io", "securitycontextconstraints", "", name)) {
			cJSON_Delete(o);
			continue;
		}
		char uid[40], ts[40];
		ks_new_uid(s, uid, sizeof(uid));
		ks_now_rfc3339(ts, sizeof(ts));
		cJSON *m = ks_meta(o);
		cJSON_AddStringToObject(m, "uid", uid);
		cJSON_AddStringToObject(m, "creationTimestamp", ts);
		cJSON_AddNumberToObject(m, "generation", 1);
		char nm[64];
		snprintf(nm, sizeof(nm), "%s", name);
		if (ks_store_put(&s->store, "security.openshift.io", "securitycontextconstraints", "", nm, o))
			return GK_RESOURCE_EXHAUSTED;
	}
	return 0;
}
