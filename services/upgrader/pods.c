/* gpukmm-upgrader — which pods a drain evicts (see pods.h). */
#include "pods.h"

#include <stdio.h>
#include <string.h>

static const Gpukmm__OwnerReference *controller(const Gpukmm__ObjectMeta *m)
{
	for (size_t i = 0; m && i < m->n_owner_references; i++)
		if (m->owner_references[i]->has_controller && m->owner_references[i]->controller)
			return m->owner_references[i];
	return NULL;
}

static bool uses_gpu(const Gpukmm__Pod *p, gk_upg_claim_fn gpu_claim, void *user)
{
	if (p->n_gpu_resources)
		return true;
	const char *ns = p->metadata ? p->metadata->namespace_ : NULL;
	for (size_t i = 0; gpu_claim && i < p->n_resource_claims; i++)
		if (gpu_claim(user, ns, p->resource_claims[i]))
			return true;
	return false;
}

int gk_upg_pod_verdict(const Gpukmm__Pod *p, const gk_policy_upgrade *pol, gk_upg_claim_fn gpu_claim, void *user,
		       char *why, size_t cap)
{
	why[0] = 0;
	const Gpukmm__ObjectMeta *m = p->metadata;
	const char *ns = m && m->namespace_ ? m->namespace_ : "";
	const char *name = m && m->name ? m->name : "";
	if (p->phase && (!strcmp(p->phase, "Succeeded") || !strcmp(p->phase, "Failed")))
		return GK_UPG_POD_SKIP;
	if (p->has_mirror && p->mirror)
		return GK_UPG_POD_SKIP;
	const Gpukmm__OwnerReference *c = controller(m);
	if (c && c->kind && !strcmp(c->kind, "DaemonSet"))
		return GK_UPG_POD_SKIP;
	if (!pol->pod_selector && !uses_gpu(p, gpu_claim, user))
		return GK_UPG_POD_SKIP;
	if (m && m->deletion_timestamp)
		return GK_UPG_POD_WAIT;
	if (!c && !pol->force) {
		snprintf(why, cap,
			 "pod %s/%s is not managed by a controller: evicting it deletes it for good "
			 "(kernelModule.upgradePolicy.drain.force: true allows it)",
			 ns, name);
		return GK_UPG_POD_REFUSE;
	}
	if (p->has_empty_dir && p->empty_dir && !pol->delete_empty_dir_data) {
		snprintf(why, cap,
			 "pod %s/%s has emptyDir volumes whose data an eviction deletes "
			 "(kernelModule.upgradePolicy.drain.deleteEmptyDirData: true allows it)",
			 ns, name);
		return GK_UPG_POD_REFUSE;
	}
	return GK_UPG_POD_EVICT;
}
