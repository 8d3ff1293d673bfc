/* gpukmm-upgrader — which pods of a node a drain evicts (pure). The drainer
 * lists the node's pods (with drain.podSelector as the list's label selector
 * when set) and asks, for each:
 *   SKIP    terminated, a static pod's mirror, a DaemonSet's pod (it would
 *           come straight back: the operands leave through their own node
 *           affinity instead), or — without a podSelector — a pod that uses
 *           no Intel GPU (no gpu.intel.com/... request, no ResourceClaim
 *           allocated to the GPU driver)
 *   WAIT    being deleted already: not evicted again, waited for
 *   REFUSE  kubectl drain's refusals: a pod no controller manages (it would
 *           be gone for good) without drain.force; a pod with emptyDir
 *           volumes (their data is lost) without drain.deleteEmptyDirData
 *   EVICT   through the Eviction API (PodDisruptionBudgets decide) */
#ifndef GPUKMM_UPGRADER_PODS_H
#define GPUKMM_UPGRADER_PODS_H

#include <stdbool.h>
#include <stddef.h>

#include "gpukmm/policy.h"
#include "kube.pb-c.h"

enum gk_upg_pod { GK_UPG_POD_SKIP = 0, GK_UPG_POD_WAIT, GK_UPG_POD_REFUSE, GK_UPG_POD_EVICT };

/* gpu_claim(user, ns, name): is that ResourceClaim allocated to the Intel GPU driver? */
typedef bool (*gk_upg_claim_fn)(void *user, const char *ns, const char *name);

/* why: the refusal's sentence (REFUSE), "" otherwise. */
int gk_upg_pod_verdict(const Gpukmm__Pod *p, const gk_policy_upgrade *pol, gk_upg_claim_fn gpu_claim, void *user,
		       char *why, size_t cap);

#endif
