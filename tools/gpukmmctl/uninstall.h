/* gpukmmctl uninstall — the decisions, apart from the API calls (cmd_uninstall.c):
 * what holds a ClusterPolicy being deleted, whether the controller runs (its
 * leader Lease renewed while we watch), and the order in which the rest goes. */
#ifndef GPUKMMCTL_UNINSTALL_H
#define GPUKMMCTL_UNINSTALL_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One line: why this ClusterPolicy (being deleted) is still there, from what
 * the controller wrote into its status (the Module condition, the first
 * errors); "waiting for the controller" when it wrote nothing yet. */
void gkctl_policy_holds(const cJSON *cp, char *out, size_t cap);

/* The controller's leader Lease, watched: it runs when the Lease is renewed
 * while we watch (its resourceVersion changes: no trust in clocks), and does
 * not when it is not within its duration (leaseDurationSeconds) plus grace_ms. */
typedef struct gkctl_lease_watch {
	bool seen;               /* a first read */
	char rv[64];             /* the resourceVersion of the last read */
	int64_t first_ms, changed_ms;
	int64_t duration_ms;
	char holder[256];
} gkctl_lease_watch;

enum gkctl_liveness { GKCTL_UNKNOWN, GKCTL_RUNNING, GKCTL_STOPPED };
/* lease: the object read, NULL when there is none (404). now_ms: monotonic. */
enum gkctl_liveness gkctl_lease_observe(gkctl_lease_watch *w, const cJSON *lease, int64_t now_ms, int64_t grace_ms);

/* What is deleted after the policies, in this order: nothing calls the webhook
 * being removed, the CRD goes while no custom resource is left, the workloads
 * before their ServiceAccounts and RBAC, the namespace last. Kinds a cluster does
 * not serve (the Prometheus Operator's, cert-manager's, OpenShift's) are skipped. */
typedef struct gkctl_kind {
	const char *group, *version, *resource;
	bool namespaced;
} gkctl_kind;
extern const gkctl_kind gkctl_uninstall_kinds[];
extern const size_t gkctl_n_uninstall_kinds;

#endif
