/* kubesim — write verbs (create, update, patch, apply, delete) with the API server's
 * object-metadata rules, called by handler.c. */
#ifndef KUBESIM_API_H
#define KUBESIM_API_H

#include "kubesim.h"

enum ks_validation { KS_VALIDATE_IGNORE, KS_VALIDATE_WARN, KS_VALIDATE_STRICT };

typedef struct ks_opts {
	int dry_run;
	int validation;         /* enum ks_validation */
	const char *manager;    /* fieldManager */
	int force;              /* SSA force */
	const char *propagation; /* Background/Foreground/Orphan */
	long grace;              /* gracePeriodSeconds, -1 unset */
	const char *user_agent;
	const ks_user *user; /* who asks (authz.c), NULL for kubesim's own writes */
} ks_opts;

void ks_api_create(ks_server *s, const ks_rtype *t, const char *ns, cJSON *body, const ks_opts *o, ks_resp *out);
void ks_api_update(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const char *sub, cJSON *body,
		   const ks_opts *o, ks_resp *out);
/* patch_type: "merge", "json", "strategic", "apply". */
void ks_api_patch(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const char *sub,
		  const char *patch_type, cJSON *patch, const ks_opts *o, ks_resp *out);
void ks_api_delete(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const cJSON *delopts,
		   const ks_opts *o, ks_resp *out);

/* Shared with gc.c (mu held): delete one stored object honouring finalizers and the
 * propagation policy. Returns 1 if removed now, 0 if marked for deletion. */
int ks_api_delete_locked(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const char *propagation);
/* The same with DeleteOptions.gracePeriodSeconds (-1 unset): a pod bound to a node is
 * deleted gracefully (deletionTimestamp = now + period, deletionGracePeriodSeconds;
 * the kubelet removes it), a pending graceful deletion can only be shortened. */
int ks_api_delete_grace_locked(ks_server *s, const ks_rtype *t, const char *ns, const char *name,
			       const char *propagation, long grace);

/* POST pods/NAME/eviction (eviction.c): body is the Eviction. */
void ks_evict(ks_server *s, const ks_rtype *pods, const char *ns, const char *name, const cJSON *body,
	      const ks_opts *o, ks_resp *out);

/* Admission (webhook.c). Called without mu held. op "CREATE"/"UPDATE"/"DELETE".
 * May replace *obj (mutation). Returns 0, or fills out with the denial/error. */
int ks_admit(ks_server *s, const ks_rtype *t, const char *sub, const char *op, const char *ns, const char *name,
	     cJSON **obj, const cJSON *old, const ks_opts *o, ks_resp *out);

/* RBAC at admission (authzadmit.c, with --rbac; called by ks_admit): creating or
 * changing a Role/ClusterRole needs the rules it grants or `escalate`, a binding
 * needs its role's rules or `bind`; setting ownerReferences needs delete on the
 * object and blockOwnerDeletion update on the owner's finalizers (the
 * OwnerReferencesPermissionEnforcement plugin, on as in OpenShift). 0, or the 403
 * in out. */
int ks_authz_admit(ks_server *s, const ks_rtype *t, const char *sub, const char *op, const char *ns, const char *name,
		   const cJSON *obj, const cJSON *old, const ks_opts *o, ks_resp *out);

/* schema.c hook for CRs: prune/default/validate. Returns 0, or fills out (400/422). */
int ks_api_schema(const ks_rtype *t, cJSON *obj, const ks_opts *o, ks_resp *out);

#endif
