/* lib/operands: OpenShift SecurityContextConstraints per operand (operands.md §10). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* What the three SCCs share; volumes and capabilities differ per operand. */
static const char SCC[] =
	"allowPrivilegedContainer: false\n"
	"allowHostDirVolumePlugin: true\n"
	"allowHostIPC: false\n"
	"allowHostNetwork: false\n"
	"allowHostPID: false\n"
	"allowHostPorts: false\n"
	"allowPrivilegeEscalation: false\n"
	"readOnlyRootFilesystem: false\n"
	"requiredDropCapabilities: [ALL]\n"
	"fsGroup: {type: RunAsAny}\n"
	"runAsUser: {type: RunAsAny}\n"
	"seLinuxContext: {type: RunAsAny}\n"
	"supplementalGroups: {type: RunAsAny}\n"
	"seccompProfiles: ['*']\n"
	"users: []\n"
	"groups: []\n";

static const char *const SCC_FIELDS[] = { "allowPrivilegedContainer", "allowHostDirVolumePlugin", "allowHostIPC",
					   "allowHostNetwork", "allowHostPID", "allowHostPorts",
					   "allowPrivilegeEscalation", "readOnlyRootFilesystem",
					   "requiredDropCapabilities", "fsGroup", "runAsUser", "seLinuxContext",
					   "supplementalGroups", "seccompProfiles", "users", "groups", "volumes",
					   "allowedCapabilities" };

void gk_opr_openshift(gk_opr *r, int component, const char *part, bool with_sa, const char *sa)
{
	char scc[300], role[300], binding[300];
	snprintf(scc, sizeof(scc), "%s-%s-scc", r->cpn, part);
	snprintf(role, sizeof(role), "%s-%s-scc-role", r->cpn, part);
	snprintf(binding, sizeof(binding), "%s-%s-scc-binding", r->cpn, part);
	if (with_sa)
		gk_opr_add(r, component, "v1", "ServiceAccount", "serviceaccounts", r->ns, sa, NULL);
	gk_op_obj *o = gk_opr_add(r, component, "security.openshift.io/v1", "SecurityContextConstraints",
				  "securitycontextconstraints", NULL, scc, SCC);
	if (o) {
		const char *vols = component == GK_OP_DP ? "[hostPath, emptyDir]"
				   : component == GK_OP_XPU ? "[hostPath, configMap]"
							    : "[hostPath, projected]";
		gk_opr_set(r, o->obj, "/volumes", gk_opr_template(r, vols));
		if (component == GK_OP_XPU)
			gk_opr_set(r, o->obj, "/allowedCapabilities", gk_opr_template(r, "[SYS_ADMIN]"));
		/* upstream replaces the whole SCC: every field is ours */
		char path[64];
		for (size_t i = 0; i < sizeof(SCC_FIELDS) / sizeof(SCC_FIELDS[0]); i++) {
			snprintf(path, sizeof(path), "/%s", SCC_FIELDS[i]);
			gk_opr_rule(r, o, cJSON_GetObjectItemCaseSensitive(o->obj, SCC_FIELDS[i]) ? GK_OP_SUBSET : GK_OP_ABSENT,
				    path);
		}
		gk_opr_rule(r, o, GK_OP_ABSENT, "/defaultAddCapabilities");
	}
	o = gk_opr_add(r, component, "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", NULL, role,
		       "rules: [{apiGroups: [security.openshift.io], resources: [securitycontextconstraints],"
		       " resourceNames: [''], verbs: [use]}]");
	if (o) {
		gk_opr_set_str(r, o->obj, "/rules/0/resourceNames/0", scc);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/rules");
	}
	o = gk_opr_add(r, component, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", NULL,
		       binding,
		       "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ''}\n"
		       "subjects: [{kind: ServiceAccount, name: '', namespace: ''}]\n");
	if (o) {
		gk_opr_set_str(r, o->obj, "/roleRef/name", role);
		gk_opr_set_str(r, o->obj, "/subjects/0/name", sa);
		gk_opr_set_str(r, o->obj, "/subjects/0/namespace", r->ns);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/subjects");
	}
}
