/* kubesim RBAC (tools/kubesim/rbac.c, authz.c, authzadmit.c, satoken.c) through the
 * request handler: the rules' matching (verbs, groups, resources and subresources,
 * resourceNames with list/watch/create, non-resource URLs), the API server's 403
 * messages, bindings and subjects, escalate/bind, the ownerReference checks, the
 * ServiceAccount tokens and the review APIs. Expected strings are the API server's
 * (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go,
 * pkg/registry/rbac/validation, plugin/pkg/admission/gc). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/kubesim/kubesim.h"
#include "../../tools/kubesim/rbac.h"

static ks_server *S;
static char ADMIN[] = "admin-token";

static void setup(void)
{
	S = calloc(1, sizeof(*S));
	cr_assert(S);
	cr_assert_eq(ks_server_init(S, 50), 0);
	cr_assert_eq(ks_server_seed(S), 0);
	S->rbac = 1;
	S->token = ADMIN;
	gk_err e = { 0 };
	cr_assert_eq(ks_auth_init(S, NULL, NULL, &e), 0, "%s", e.msg);
}

static void teardown(void)
{
	S->token = NULL;
	ks_server_free(S);
	free(S);
}

TestSuite(rbac, .init = setup, .fini = teardown);

/* One request as `tok` (NULL: none); returns the code, *body the parsed answer. */
static int req(const char *tok, const char *method, const char *url, const char *body, cJSON **out)
{
	char path[1024], qs[1024] = "", auth[4200];
	snprintf(path, sizeof(path), "%s", url);
	char *q = strchr(path, '?');
	ks_kv kv[8];
	int n = 0;
	if (q) {
		*q = 0;
		snprintf(qs, sizeof(qs), "%s", q + 1);
		char *save = NULL;
		for (char *p = strtok_r(qs, "&", &save); p && n < 8; p = strtok_r(NULL, "&", &save)) {
			char *eq = strchr(p, '=');
			if (eq)
				*eq = 0;
			kv[n].k = p;
			kv[n].v = eq ? eq + 1 : "";
			n++;
		}
	}
	snprintf(auth, sizeof(auth), "Bearer %s", tok ? tok : "");
	const char *ct = method[0] == 'P' && method[1] == 'A' ? "application/merge-patch+json" : "application/json";
	ks_req r = { .method = method, .path = path, .query = kv, .nquery = n, .content_type = ct,
		     .user_agent = "unit-test/1.0", .auth = tok ? auth : NULL, .body = body,
		     .body_len = body ? strlen(body) : 0 };
	ks_resp o;
	ks_handle(S, &r, &o);
	cr_assert_null(o.watch);
	if (out)
		*out = o.body ? cJSON_Parse(o.body) : NULL;
	int code = o.code;
	ks_resp_free(&o);
	return code;
}

static int as(const char *tok, const char *method, const char *url, const char *body)
{
	return req(tok, method, url, body, NULL);
}

static int admin(const char *method, const char *url, const char *body)
{
	int c = as(ADMIN, method, url, body);
	cr_assert(c < 300, "admin %s %s: %d", method, url, c);
	return c;
}

/* The message of a refused request (static buffer). */
static const char *msg(const char *tok, const char *method, const char *url, const char *body, int want)
{
	static char m[4096];
	cJSON *j = NULL;
	int c = req(tok, method, url, body, &j);
	cr_assert_eq(c, want, "%s %s: %d, want %d", method, url, c, want);
	const cJSON *v = cJSON_GetObjectItem(j, "message");
	snprintf(m, sizeof(m), "%s", cJSON_IsString(v) ? v->valuestring : "");
	cJSON_Delete(j);
	return m;
}

static char *sa_token_bound(const char *ns, const char *name, const char *bound)
{
	char url[512], body[512];
	snprintf(url, sizeof(url), "/api/v1/namespaces/%s/serviceaccounts/%s/token", ns, name);
	snprintf(body, sizeof(body), "{\"spec\":{%s}}", bound ? bound : "");
	cJSON *j = NULL;
	int c = req(ADMIN, "POST", url, body, &j);
	cr_assert_eq(c, 201, "token for %s/%s: %d", ns, name, c);
	const cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "status"), "token");
	cr_assert(cJSON_IsString(t));
	char *r = strdup(t->valuestring);
	cJSON_Delete(j);
	return r;
}

/* A ServiceAccount ns/name (created) and its token (caller frees). */
static char *sa(const char *ns, const char *name)
{
	char url[256], body[256];
	snprintf(url, sizeof(url), "/api/v1/namespaces/%s/serviceaccounts", ns);
	snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\"}}", name);
	admin("POST", url, body);
	return sa_token_bound(ns, name, NULL);
}

static void ns_create(const char *n)
{
	char body[128];
	snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\"}}", n);
	admin("POST", "/api/v1/namespaces", body);
}

/* A ClusterRole (ns NULL) or Role with the rules JSON, bound to ServiceAccount
 * sa_ns/sa_name by a ClusterRoleBinding (ns NULL) or a RoleBinding in ns. */
static void grant(const char *ns, const char *name, const char *rules, const char *sa_ns, const char *sa_name)
{
	char url[256], body[2048];
	if (ns)
		snprintf(url, sizeof(url), "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/roles", ns);
	else
		snprintf(url, sizeof(url), "/apis/rbac.authorization.k8s.io/v1/clusterroles");
	snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\"},\"rules\":%s}", name, rules);
	admin("POST", url, body);
	if (ns)
		snprintf(url, sizeof(url), "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings", ns);
	else
		snprintf(url, sizeof(url), "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings");
	snprintf(body, sizeof(body),
		 "{\"metadata\":{\"name\":\"%s\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"%s\","
		 "\"name\":\"%s\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"%s\",\"namespace\":\"%s\"}]}",
		 name, ns ? "Role" : "ClusterRole", name, sa_name, sa_ns);
	admin("POST", url, body);
}

#define DS "/apis/apps/v1/namespaces/%s/daemonsets"
#define DS_BODY                                                                                                    \
	"{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{"    \
	"\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}"

static void mk_ds(const char *ns, const char *name)
{
	char url[256], body[512];
	snprintf(url, sizeof(url), DS, ns);
	snprintf(body, sizeof(body), DS_BODY, name);
	admin("POST", url, body);
}

Test(rbac, forbidden_messages_are_the_api_servers)
{
	char *t = sa("default", "app");
	cr_assert_str_eq(msg(t, "GET", "/api/v1/nodes", NULL, 403),
			 "nodes is forbidden: User \"system:serviceaccount:default:app\" cannot list resource \"nodes\" "
			 "in API group \"\" at the cluster scope");
	cr_assert_str_eq(msg(t, "GET", "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy", NULL, 403),
			 "daemonsets.apps \"kube-proxy\" is forbidden: User \"system:serviceaccount:default:app\" cannot "
			 "get resource \"daemonsets\" in API group \"apps\" in the namespace \"kube-system\"");
	cr_assert_str_eq(msg(t, "PATCH", "/api/v1/nodes/n1/status", "{}", 403),
			 "nodes \"n1\" is forbidden: User \"system:serviceaccount:default:app\" cannot patch resource "
			 "\"nodes/status\" in API group \"\" at the cluster scope");
	cr_assert_str_eq(msg(t, "GET", "/api/v1/pods?watch=true", NULL, 403),
			 "pods is forbidden: User \"system:serviceaccount:default:app\" cannot watch resource \"pods\" in "
			 "API group \"\" at the cluster scope");
	cr_assert_str_eq(msg(t, "DELETE", "/api/v1/namespaces/default/configmaps", NULL, 403),
			 "configmaps is forbidden: User \"system:serviceaccount:default:app\" cannot deletecollection "
			 "resource \"configmaps\" in API group \"\" in the namespace \"default\"");
	cr_assert_str_eq(msg(NULL, "GET", "/api", NULL, 403),
			 "forbidden: User \"system:anonymous\" cannot get path \"/api\"");
	/* the Status details name the resource, as the API server's */
	cJSON *j = NULL;
	cr_assert_eq(req(t, "GET", "/apis/apps/v1/namespaces/x/daemonsets/d", NULL, &j), 403);
	cr_assert_str_eq(cJSON_GetObjectItem(j, "reason")->valuestring, "Forbidden");
	const cJSON *d = cJSON_GetObjectItem(j, "details");
	cr_assert_str_eq(cJSON_GetObjectItem(d, "kind")->valuestring, "daemonsets");
	cr_assert_str_eq(cJSON_GetObjectItem(d, "group")->valuestring, "apps");
	cr_assert_str_eq(cJSON_GetObjectItem(d, "name")->valuestring, "d");
	cJSON_Delete(j);
	free(t);
}

Test(rbac, bootstrap_roles_discovery_for_users_health_for_everyone)
{
	char *t = sa("default", "app");
	cr_assert_eq(as(NULL, "GET", "/healthz", NULL), 200);
	cr_assert_eq(as(NULL, "GET", "/version", NULL), 200);
	cr_assert_eq(as(NULL, "GET", "/api", NULL), 403);
	cr_assert_eq(as(t, "GET", "/api", NULL), 200);
	cr_assert_eq(as(t, "GET", "/apis/apps/v1", NULL), 200);
	cr_assert_eq(as(NULL, "GET", "/api/v1/namespaces", NULL), 403);
	cr_assert_eq(as(ADMIN, "GET", "/api/v1/namespaces", NULL), 200, "system:masters may do anything");
	cr_assert_eq(as("not-a-token", "GET", "/healthz", NULL), 401, "a bad token is refused everywhere");
	free(t);
}

Test(rbac, verbs_groups_resources_and_subresources)
{
	char *t = sa("default", "app");
	ns_create("apps");
	mk_ds("apps", "d1");
	grant("apps", "ds", "[{\"apiGroups\":[\"apps\"],\"resources\":[\"daemonsets\"],\"verbs\":[\"get\",\"patch\"]},"
			    "{\"apiGroups\":[\"apps\"],\"resources\":[\"*/status\"],\"verbs\":[\"update\"]},"
			    "{\"apiGroups\":[\"\"],\"resources\":[\"pods/eviction\"],\"verbs\":[\"create\"]}]",
	      "default", "app");
	cr_assert_eq(as(t, "GET", "/apis/apps/v1/namespaces/apps/daemonsets/d1", NULL), 200);
	cr_assert_eq(as(t, "PATCH", "/apis/apps/v1/namespaces/apps/daemonsets/d1", "{}"), 200);
	cr_assert_eq(as(t, "GET", "/apis/apps/v1/namespaces/apps/daemonsets", NULL), 403, "list is another verb");
	cr_assert_eq(as(t, "GET", "/apis/apps/v1/namespaces/other/daemonsets/d1", NULL), 403, "a Role is one namespace");
	cr_assert_eq(as(t, "PATCH", "/apis/apps/v1/namespaces/apps/daemonsets/d1/status", "{}"), 403,
		     "the resource's rule does not cover its subresource");
	cr_assert_neq(as(t, "PUT", "/apis/apps/v1/namespaces/apps/daemonsets/d1/status", "{}"), 403,
		      "*/status allows update of any resource's status");
	cr_assert_neq(as(t, "PUT", "/apis/apps/v1/namespaces/apps/deployments/x/status", "{}"), 403);
	cr_assert_eq(as(t, "PUT", "/apis/apps/v1/namespaces/apps/deployments/x/scale", "{}"), 403);
	cr_assert_eq(as(t, "PATCH", "/apis/extensions/v1beta1/namespaces/apps/daemonsets/d1", "{}"), 403,
		     "another group");
	/* pods/eviction: create on the subresource (404 here: kubesim may not serve it) */
	cr_assert_neq(as(t, "POST", "/api/v1/namespaces/apps/pods/p/eviction", "{}"), 403);
	cr_assert_eq(as(t, "DELETE", "/api/v1/namespaces/apps/pods/p", NULL), 403);
	free(t);
}

Test(rbac, resource_names_restrict_get_and_named_list_watch_never_create)
{
	char *t = sa("default", "app");
	grant("default", "lease",
	      "[{\"apiGroups\":[\"coordination.k8s.io\"],\"resources\":[\"leases\"],"
	      "\"resourceNames\":[\"mine\"],\"verbs\":[\"get\",\"update\",\"list\",\"watch\",\"create\",\"delete\"]}]",
	      "default", "app");
	admin("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", "{\"metadata\":{\"name\":\"mine\"}}");
	admin("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", "{\"metadata\":{\"name\":\"other\"}}");
	const char *L = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
	char u[256];
	snprintf(u, sizeof(u), "%s/mine", L);
	cr_assert_eq(as(t, "GET", u, NULL), 200);
	snprintf(u, sizeof(u), "%s/other", L);
	cr_assert_eq(as(t, "GET", u, NULL), 403);
	cr_assert_eq(as(t, "GET", L, NULL), 403, "a list without a name is not restricted to names: refused");
	snprintf(u, sizeof(u), "%s?fieldSelector=metadata.name=mine", L);
	cr_assert_eq(as(t, "GET", u, NULL), 200, "a list pinned to the name is allowed");
	snprintf(u, sizeof(u), "%s?fieldSelector=metadata.name=other", L);
	cr_assert_eq(as(t, "GET", u, NULL), 403);
	cr_assert_eq(as(t, "POST", L, "{\"metadata\":{\"name\":\"mine2\"}}"), 403,
		     "create carries no name: resourceNames cannot allow it");
	cr_assert_eq(as(t, "DELETE", L, NULL), 403, "deletecollection carries no name either");
	snprintf(u, sizeof(u), "%s/mine", L);
	cr_assert_eq(as(t, "DELETE", u, NULL), 200);
	free(t);
}

Test(rbac, non_resource_urls_exact_and_prefix)
{
	char *t = sa("default", "app");
	grant(NULL, "metrics", "[{\"nonResourceURLs\":[\"/metrics\",\"/debug/*\"],\"verbs\":[\"get\"]}]", "default",
	      "app");
	ks_attrs a = { 0 };
	snprintf(a.verb, sizeof(a.verb), "get");
	cJSON *rule = cJSON_Parse("{\"nonResourceURLs\":[\"/metrics\",\"/debug/*\"],\"verbs\":[\"get\"]}");
	snprintf(a.path, sizeof(a.path), "/metrics");
	cr_assert(ks_rbac_rule_allows(rule, &a));
	snprintf(a.path, sizeof(a.path), "/debug/pprof/heap");
	cr_assert(ks_rbac_rule_allows(rule, &a));
	snprintf(a.path, sizeof(a.path), "/metricsx");
	cr_assert_not(ks_rbac_rule_allows(rule, &a));
	snprintf(a.verb, sizeof(a.verb), "post");
	snprintf(a.path, sizeof(a.path), "/metrics");
	cr_assert_not(ks_rbac_rule_allows(rule, &a));
	cJSON_Delete(rule);
	free(t);
}

Test(rbac, subjects_users_groups_and_service_accounts_of_the_binding_namespace)
{
	ns_create("team");
	char *t = sa("team", "bot");
	admin("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles",
	      "{\"metadata\":{\"name\":\"cm\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],"
	      "\"verbs\":[\"list\"]}]}");
	cr_assert_eq(as(t, "GET", "/api/v1/namespaces/team/configmaps", NULL), 403);
	/* a ServiceAccount subject without a namespace means the binding's */
	admin("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings",
	      "{\"metadata\":{\"name\":\"cm\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\","
	      "\"name\":\"cm\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"bot\"}]}");
	cr_assert_eq(as(t, "GET", "/api/v1/namespaces/team/configmaps", NULL), 200);
	/* groups: every ServiceAccount of a namespace */
	admin("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
	      "{\"metadata\":{\"name\":\"nodes\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":"
	      "\"ClusterRole\",\"name\":\"nodes\"},\"subjects\":[{\"kind\":\"Group\",\"name\":\"system:serviceaccounts:team\"}]}");
	cr_assert_str_eq(msg(t, "GET", "/api/v1/nodes", NULL, 403),
			 "nodes is forbidden: User \"system:serviceaccount:team:bot\" cannot list resource \"nodes\" in "
			 "API group \"\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"nodes\" not "
			 "found",
			 "a binding to a missing role is the denial's reason");
	admin("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
	      "{\"metadata\":{\"name\":\"nodes\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"nodes\"],"
	      "\"verbs\":[\"list\"]}]}");
	cr_assert_eq(as(t, "GET", "/api/v1/nodes", NULL), 200);
	free(t);
}

Test(rbac, escalate_creating_a_role_with_rights_one_lacks)
{
	char *t = sa("default", "app");
	grant("default", "roles",
	      "[{\"apiGroups\":[\"rbac.authorization.k8s.io\"],\"resources\":[\"roles\"],\"verbs\":[\"create\",\"update\","
	      "\"patch\"]},{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"list\"]}]",
	      "default", "app");
	const char *R = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
	cr_assert_eq(as(t, "POST", R,
			"{\"metadata\":{\"name\":\"sub\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],"
			"\"verbs\":[\"get\"]}]}"),
		     201, "granting what one holds is fine");
	cr_assert_str_eq(
		msg(t, "POST", R,
		    "{\"metadata\":{\"name\":\"more\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\","
		    "\"secrets\"],\"verbs\":[\"get\",\"delete\"]}]}",
		    403),
		"roles.rbac.authorization.k8s.io \"more\" is forbidden: user \"system:serviceaccount:default:app\" "
		"(groups=[\"system:serviceaccounts\" \"system:serviceaccounts:default\" \"system:authenticated\"]) is "
		"attempting to grant RBAC permissions not currently held:\n"
		"{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}\n"
		"{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}");
	/* a patch that leaves the rules alone is no escalation */
	cr_assert_eq(as(t, "PATCH", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/sub",
			"{\"metadata\":{\"labels\":{\"x\":\"y\"}}}"),
		     200);
	cr_assert_eq(as(t, "PATCH", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/sub",
			"{\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],\"verbs\":[\"get\"]}]}"),
		     403, "a patch that adds rights one lacks is");
	/* escalate on roles lifts the check */
	grant("default", "esc",
	      "[{\"apiGroups\":[\"rbac.authorization.k8s.io\"],\"resources\":[\"roles\"],\"verbs\":[\"escalate\"]}]",
	      "default", "app");
	cr_assert_eq(as(t, "PATCH", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/sub",
			"{\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],\"verbs\":[\"get\"]}]}"),
		     200);
	free(t);
}

Test(rbac, bind_a_role_one_does_not_hold)
{
	char *t = sa("default", "app");
	grant("default", "binder",
	      "[{\"apiGroups\":[\"rbac.authorization.k8s.io\"],\"resources\":[\"rolebindings\"],\"verbs\":[\"create\"]},"
	      "{\"apiGroups\":[\"apps\"],\"resources\":[\"daemonsets\"],\"verbs\":[\"get\",\"patch\"]}]",
	      "default", "app");
	admin("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
	      "{\"metadata\":{\"name\":\"gate\"},\"rules\":[{\"apiGroups\":[\"apps\"],\"resources\":[\"daemonsets\"],"
	      "\"verbs\":[\"get\",\"patch\"]}]}");
	const char *B = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
	cr_assert_eq(as(t, "POST", B,
			"{\"metadata\":{\"name\":\"b1\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":"
			"\"ClusterRole\",\"name\":\"gate\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"bob\"}]}"),
		     201, "binding a role whose rights one holds here is fine");
	const char *m = msg(t, "POST", B,
			    "{\"metadata\":{\"name\":\"b2\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\","
			    "\"kind\":\"ClusterRole\",\"name\":\"cluster-admin\"},\"subjects\":[{\"kind\":\"User\",\"name\":"
			    "\"bob\"}]}",
			    403);
	cr_assert(strstr(m, "rolebindings.rbac.authorization.k8s.io \"b2\" is forbidden: user "
			    "\"system:serviceaccount:default:app\"") == m, "%s", m);
	cr_assert(strstr(m, "is attempting to grant RBAC permissions not currently held:\n"), "%s", m);
	cr_assert(strstr(m, "{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"), "%s", m);
	cr_assert_str_eq(msg(t, "POST", B,
			     "{\"metadata\":{\"name\":\"b3\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\","
			     "\"kind\":\"Role\",\"name\":\"nope\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"bob\"}]}",
			     403),
			 "rolebindings.rbac.authorization.k8s.io \"b3\" is forbidden: role.rbac.authorization.k8s.io "
			 "\"nope\" not found");
	/* bind on that one ClusterRole by name lifts the check */
	grant("default", "bind",
	      "[{\"apiGroups\":[\"rbac.authorization.k8s.io\"],\"resources\":[\"clusterroles\"],\"verbs\":[\"bind\"],"
	      "\"resourceNames\":[\"cluster-admin\"]}]",
	      "default", "app");
	cr_assert_eq(as(t, "POST", B,
			"{\"metadata\":{\"name\":\"b2\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":"
			"\"ClusterRole\",\"name\":\"cluster-admin\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"bob\"}]}"),
		     201);
	free(t);
}

Test(rbac, owner_references_need_delete_and_block_owner_deletion_needs_finalizers)
{
	char *t = sa("default", "app");
	admin("POST", "/api/v1/namespaces/default/configmaps", "{\"metadata\":{\"name\":\"owner\"}}");
	cJSON *o = NULL;
	cr_assert_eq(req(ADMIN, "GET", "/api/v1/namespaces/default/configmaps/owner", NULL, &o), 200);
	char uid[64];
	snprintf(uid, sizeof(uid), "%s", cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "uid")->valuestring);
	cJSON_Delete(o);
	grant("default", "cm", "[{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"verbs\":[\"create\"]}]",
	      "default", "app");
	char body[1024];
	snprintf(body, sizeof(body),
		 "{\"metadata\":{\"name\":\"%%s\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
		 "\"name\":\"owner\",\"uid\":\"%s\"%%s}]}}",
		 uid);
	char b1[1200], b2[1200], b3[1200];
	snprintf(b1, sizeof(b1), body, "c1", "");
	snprintf(b2, sizeof(b2), body, "c2", ",\"blockOwnerDeletion\":true");
	snprintf(b3, sizeof(b3), body, "c3", ",\"blockOwnerDeletion\":true");
	const char *C = "/api/v1/namespaces/default/configmaps";
	cr_assert_str_eq(msg(t, "POST", C, b1, 403),
			 "configmaps \"c1\" is forbidden: cannot set an ownerRef on a resource you can't delete: , <nil>");
	grant("default", "cmdel", "[{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"verbs\":[\"delete\"]}]",
	      "default", "app");
	cr_assert_eq(as(t, "POST", C, b1), 201);
	cr_assert_str_eq(msg(t, "POST", C, b2, 403),
			 "configmaps \"c2\" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a "
			 "resource you can't set finalizers on: , <nil>");
	grant("default", "fin",
	      "[{\"apiGroups\":[\"\"],\"resources\":[\"configmaps/finalizers\"],\"verbs\":[\"update\"],"
	      "\"resourceNames\":[\"owner\"]}]",
	      "default", "app");
	cr_assert_eq(as(t, "POST", C, b3), 201);
	free(t);
}

Test(rbac, service_account_tokens_die_with_their_account_or_pod)
{
	char *t = sa("default", "app");
	cr_assert_eq(as(t, "GET", "/api", NULL), 200);
	char bad[4200];
	snprintf(bad, sizeof(bad), "%s", t);
	bad[strlen(bad) - 2] = bad[strlen(bad) - 2] == 'A' ? 'B' : 'A';
	cr_assert_eq(as(bad, "GET", "/api", NULL), 401, "a changed signature");
	admin("DELETE", "/api/v1/namespaces/default/serviceaccounts/app", NULL);
	cr_assert_eq(as(t, "GET", "/api", NULL), 401, "deleting the ServiceAccount revokes its tokens");
	admin("POST", "/api/v1/namespaces/default/serviceaccounts", "{\"metadata\":{\"name\":\"app\"}}");
	cr_assert_eq(as(t, "GET", "/api", NULL), 401, "a new account of the same name has another uid");
	free(t);
	/* bound to a pod: the node name is the user's, the token dies with the pod */
	admin("POST", "/api/v1/nodes", "{\"metadata\":{\"name\":\"n1\"}}");
	admin("POST", "/api/v1/namespaces/default/pods",
	      "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}");
	t = sa_token_bound("default", "app", "\"boundObjectRef\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"name\":\"p\"}");
	cJSON *j = NULL;
	cr_assert_eq(req(t, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "{}", &j), 201);
	const cJSON *ui = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "status"), "userInfo");
	cr_assert_str_eq(cJSON_GetObjectItem(ui, "username")->valuestring, "system:serviceaccount:default:app");
	const cJSON *node = cJSON_GetObjectItem(cJSON_GetObjectItem(ui, "extra"), "authentication.kubernetes.io/node-name");
	cr_assert_str_eq(cJSON_GetArrayItem(node, 0)->valuestring, "n1");
	cJSON_Delete(j);
	/* (a bound pod is deleted gracefully; the token dies once it is gone: at once here) */
	admin("DELETE", "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=0", NULL);
	cr_assert_eq(as(t, "GET", "/api", NULL), 401, "the bound pod is gone");
	free(t);
	cr_assert_str_eq(msg(ADMIN, "POST", "/api/v1/namespaces/default/serviceaccounts/app/token",
			     "{\"spec\":{\"expirationSeconds\":60}}", 422),
			 "TokenRequest.authentication.k8s.io \"app\" is invalid: spec.expirationSeconds: Invalid value: "
			 "60: may not specify a duration less than 10 minutes");
	cr_assert_eq(as(ADMIN, "POST", "/api/v1/namespaces/default/serviceaccounts/none/token", "{}"), 404);
}

Test(rbac, access_reviews_answer_as_the_authorizer)
{
	char *t = sa("default", "app");
	grant("default", "ds", "[{\"apiGroups\":[\"apps\"],\"resources\":[\"daemonsets\"],\"verbs\":[\"patch\"]}]",
	      "default", "app");
	cJSON *j = NULL;
	cr_assert_eq(req(t, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
			 "{\"spec\":{\"resourceAttributes\":{\"namespace\":\"default\",\"verb\":\"patch\",\"group\":\"apps\","
			 "\"resource\":\"daemonsets\"}}}",
			 &j),
		     201);
	const cJSON *st = cJSON_GetObjectItem(j, "status");
	cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(st, "allowed")));
	cr_assert_str_eq(cJSON_GetObjectItem(st, "reason")->valuestring,
			 "RBAC: allowed by RoleBinding \"ds/default\" of Role \"ds\" to ServiceAccount \"app/default\"");
	cJSON_Delete(j);
	cr_assert_eq(req(ADMIN, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
			 "{\"spec\":{\"user\":\"system:serviceaccount:default:app\",\"resourceAttributes\":{\"namespace\":"
			 "\"kube-system\",\"verb\":\"patch\",\"group\":\"apps\",\"resource\":\"daemonsets\"}}}",
			 &j),
		     201);
	cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "status"), "allowed")));
	cJSON_Delete(j);
	cr_assert_eq(as(NULL, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", "{}"), 403,
		     "anonymous may not ask about others");
	free(t);
}

Test(rbac, the_record_names_every_user_decision)
{
	char *t = sa("default", "app");
	as(t, "GET", "/api/v1/nodes", NULL);
	as(t, "GET", "/api/v1/nodes", NULL);
	as(t, "GET", "/api", NULL);
	cJSON *j = NULL;
	cr_assert_eq(req(NULL, "GET", "/kubesim/rbac", NULL, &j), 200, "kubesim's own endpoints are not authorized");
	int seen = 0;
	const cJSON *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "requests")) {
		if (strcmp(cJSON_GetObjectItem(r, "user")->valuestring, "system:serviceaccount:default:app") == 0 &&
		    strcmp(cJSON_GetObjectItem(r, "resource")->valuestring, "nodes") == 0) {
			cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(r, "allowed")));
			cr_assert_eq(cJSON_GetObjectItem(r, "count")->valueint, 2);
			seen = 1;
		}
	}
	cr_assert(seen);
	cr_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "denials"), 0)->valuestring,
			 "User \"system:serviceaccount:default:app\" cannot list resource \"nodes\" in API group \"\" at "
			 "the cluster scope");
	cJSON_Delete(j);
	free(t);
}

Test(rbac, without_rbac_every_caller_may_do_anything)
{
	char *t = sa("default", "app");
	S->rbac = 0;
	cr_assert_eq(as(t, "GET", "/api/v1/nodes", NULL), 200);
	cr_assert_eq(as(NULL, "GET", "/api/v1/nodes", NULL), 401, "an admin token configured: none is 401");
	S->token = NULL;
	cr_assert_eq(as(NULL, "GET", "/api/v1/nodes", NULL), 200, "nothing configured: the old kubesim");
	cr_assert_eq(as("anything", "GET", "/api/v1/nodes", NULL), 200);
	free(t);
}

Test(rbac, covers_breaks_rules_down_and_honours_stars)
{
	cJSON *owner = cJSON_Parse("[{\"apiGroups\":[\"*\"],\"resources\":[\"pods\",\"*/status\"],\"verbs\":[\"get\"]},"
				   "{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],\"resourceNames\":[\"a\"],"
				   "\"verbs\":[\"*\"]},{\"nonResourceURLs\":[\"/logs/*\"],\"verbs\":[\"get\"]}]");
	cJSON *ok = cJSON_Parse("[{\"apiGroups\":[\"\",\"apps\"],\"resources\":[\"pods\",\"deployments/status\"],"
				"\"verbs\":[\"get\"]},{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],"
				"\"resourceNames\":[\"a\"],\"verbs\":[\"delete\"]},{\"nonResourceURLs\":[\"/logs/x\"],"
				"\"verbs\":[\"get\"]}]");
	cr_assert(ks_rbac_covers(owner, ok, NULL));
	cJSON *no = cJSON_Parse("[{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],\"verbs\":[\"get\"]}]");
	cJSON *missing = NULL;
	cr_assert_not(ks_rbac_covers(owner, no, &missing), "names do not cover all names");
	char buf[256];
	ks_rbac_compact_string(cJSON_GetArrayItem(missing, 0), buf, sizeof(buf));
	cr_assert_str_eq(buf, "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}");
	cJSON_Delete(missing);
	cJSON_Delete(owner);
	cJSON_Delete(ok);
	cJSON_Delete(no);
}
