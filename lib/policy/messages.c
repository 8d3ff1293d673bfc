/* lib/policy: the exact status/error strings and log lines of upstream §2.5,
 * §2.6, §5.2 in one place (the Module manager uses these). */
#include <stdio.h>
#include <string.h>

#include "gpukmm/policy.h"

static void counts(const Gpukmm__Module *m, int *avail, int *desired)
{
	const Gpukmm__ModuleLoaderStatus *s = m ? m->module_loader_status : NULL;
	*avail = s && s->has_available_number ? s->available_number : 0;
	*desired = s && s->has_desired_number ? s->desired_number : 0;
}

int gk_policy_kmm_status(char *buf, size_t cap, const Gpukmm__Module *m)
{
	int a, d;
	counts(m, &a, &d);
	return snprintf(buf, cap, "%d/%d", a, d);
}

bool gk_policy_module_not_fully_available(const Gpukmm__Module *m)
{
	int a, d;
	counts(m, &a, &d);
	return d > 0 && a < d;
}

int gk_policy_msg_not_fully_available(char *buf, size_t cap, const char *m, int avail, int desired)
{
	return snprintf(buf, cap, "module loader not fully available (%d/%d) for modules.kmm.sigs.x-k8s.io/%s", avail,
			desired, m);
}

int gk_policy_msg_blocking_deletion(char *buf, size_t cap, const char *m)
{
	return snprintf(buf, cap, "allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/%s deletion", m);
}

int gk_policy_msg_pending_deletion(char *buf, size_t cap, const char *m)
{
	return snprintf(buf, cap, "modules.kmm.sigs.x-k8s.io/%s is pending deletion", m);
}

int gk_policy_msg_blocking_recreation(char *buf, size_t cap, const char *m)
{
	return snprintf(buf, cap,
			"allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/%s recreation for version change",
			m);
}

int gk_policy_msg_get_failed(char *buf, size_t cap, const char *m, const char *e)
{
	return snprintf(buf, cap, "failed to get KMM Module %s: %s", m, e);
}

int gk_policy_msg_delete_failed(char *buf, size_t cap, const char *m, const char *e)
{
	return snprintf(buf, cap, "failed to delete KMM Module %s: %s", m, e);
}

int gk_policy_msg_delete_for_version_failed(char *buf, size_t cap, const char *m, const char *e)
{
	return snprintf(buf, cap, "failed to delete KMM Module %s for version change: %s", m, e);
}

int gk_policy_msg_reconcile_failed(char *buf, size_t cap, const char *m, const char *cp, const char *e)
{
	return snprintf(buf, cap, "failed to reconcile KMM Module %s for ClusterPolicy %s: %s", m, cp, e);
}

int gk_policy_msg_owner_conflict(char *buf, size_t cap, const char *ns, const char *m, const char *owner_kind,
				 const char *owner_name)
{
	return snprintf(buf, cap,
			"failed to set controller reference: Object %s/%s is already owned by another %s controller %s", ns,
			m, owner_kind ? owner_kind : "", owner_name ? owner_name : "");
}

int gk_policy_log_ordered_upgrade(char *buf, size_t cap, const char *ns, const char *m, const char *version)
{
	return snprintf(buf, cap,
			"KMM Module %s uses ordered upgrade (version=\"%s\"); nodes must be labeled "
			"kmm.node.kubernetes.io/version-module.%s.%s=%s before the module loads",
			m, version, ns, m, version);
}

int gk_policy_log_version_toggled(char *buf, size_t cap, const char *m, const char *old_v, const char *new_v)
{
	return snprintf(buf, cap, "KMM Module %s version toggled (\"%s\" -> \"%s\"); recreating", m, old_v ? old_v : "",
			new_v ? new_v : "");
}

int gk_policy_log_apply_result(char *buf, size_t cap, const char *m, const char *result)
{
	return snprintf(buf, cap, "KMM Module %s %s", m, result);
}
