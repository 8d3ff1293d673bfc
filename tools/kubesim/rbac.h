/* kubesim — RBAC as the API server decides it (pure: cJSON rules in, decisions out).
 *
 * The request's attributes are what the API server's RequestInfo resolver makes of
 * it: a resource request (verb get/list/watch/create/update/patch/delete/
 * deletecollection, group, resource, subresource, namespace, name) or a
 * non-resource one (lower-case HTTP method and path). A list or watch whose field
 * selector pins metadata.name carries that name, so a rule with resourceNames can
 * allow it; create and deletecollection never carry one.
 *
 * A rule allows attributes when its verbs, apiGroups, resources (with "*",
 * "resource/sub" and "star-slash-sub") and resourceNames all match, or for a
 * non-resource request its nonResourceURLs (exact, or a prefix ending in '*').
 * Covers() is the escalation check: every atomic (group, resource, verb, name) of
 * the rules to grant must be held by one of the owner's rules. Messages are the
 * API server's. */
#ifndef KUBESIM_RBAC_H
#define KUBESIM_RBAC_H

#include <cJSON.h>
#include <stddef.h>

#include "kubesim.h"
#include "route.h"

#define KS_RBAC_GROUP "rbac.authorization.k8s.io"

typedef struct ks_attrs {
	int resource_request;
	char verb[32];
	char group[128], resource[128], sub[64], ns[256], name[256];
	char path[1024]; /* non-resource requests */
} ks_attrs;

/* From a routed request (RequestInfo). */
void ks_rbac_attrs(const ks_req *r, const ks_route *rt, ks_attrs *a);

int ks_rbac_rule_allows(const cJSON *rule, const ks_attrs *a);

/* Does binding subject `subj` name user u? binding_ns: a RoleBinding's namespace
 * (a ServiceAccount subject without a namespace means that one), "" for a
 * ClusterRoleBinding. */
int ks_rbac_subject_applies(const cJSON *subj, const ks_user *u, const char *binding_ns);
int ks_user_in_group(const ks_user *u, const char *group);

/* 1 when owner covers every rule of servant; else 0 and, when missing is not NULL,
 * *missing = the uncovered atomic rules compacted (a JSON array, caller frees;
 * NULL on OOM). */
int ks_rbac_covers(const cJSON *owner, const cJSON *servant, cJSON **missing);
/* {APIGroups:["apps"], Resources:["daemonsets"], Verbs:["patch"]} (Go's CompactString) */
void ks_rbac_compact_string(const cJSON *rule, char *buf, size_t cap);

/* The 403 body text after "<resource> \"<name>\" is forbidden: " (forbiddenMessage). */
void ks_rbac_denial(const ks_user *u, const ks_attrs *a, char *buf, size_t cap);
/* The whole 403 Status for the request (NewForbidden + the reason, when any). */
void ks_rbac_forbid(ks_resp *out, const ks_user *u, const ks_attrs *a, const char *reason);
/* Go's %q of a []string: ["a" "b"] */
void ks_rbac_quote_list(const char *const *v, int n, char *buf, size_t cap);

#endif
