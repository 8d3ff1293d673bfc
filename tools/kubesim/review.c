/* kubesim — authentication.k8s.io/v1 TokenReview: what a delegating
 * authenticator (a controller's /metrics behind TokenReview +
 * SubjectAccessReview, like controller-runtime's) asks the API server, and
 * what the controller asks of a NodeReportRequest's token. Without
 * spec.audiences (or with the API server's among them) the token is
 * authenticated as a request bearing it would be (ks_authenticate: the
 * admin's --token, --token-auth-file users, ServiceAccount tokens for the API
 * server's audience); with other audiences only a ServiceAccount token minted
 * for one of them authenticates (satoken.c; the other authenticators are
 * audience-agnostic, as the API server's). The answer carries the user with
 * its extra (authentication.kubernetes.io/node-name of a pod- or node-bound
 * token) and the audiences met. The SubjectAccessReview that follows a
 * /metrics review is the RBAC authorizer's (authzapi.c). --faults apply (verb
 * create, resource tokenreviews). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "auth.h"
#include "kubesim.h"
#include "route.h"

#define ISSUER "https://kubernetes.default.svc.cluster.local" /* the API server's audience (satoken.c) */

static void token_review(ks_server *s, const ks_req *r, ks_resp *out)
{
	cJSON *j = ks_auth_body(r, out);
	if (!j)
		return;
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kind");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(j, "spec");
	if (!cJSON_IsString(k) || strcmp(k->valuestring, "TokenReview") || !cJSON_IsObject(spec)) {
		cJSON_Delete(j);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "expected a TokenReview with a spec");
		return;
	}
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(spec, "token");
	const cJSON *want = cJSON_GetObjectItemCaseSensitive(spec, "audiences"), *w;
	if (!cJSON_IsArray(want))
		want = NULL;
	const char *tok = cJSON_IsString(t) ? t->valuestring : "";
	bool api = !cJSON_GetArraySize(want); /* the API server's audience asked for */
	cJSON_ArrayForEach(w, want) {
		api |= cJSON_IsString(w) && !strcmp(w->valuestring, ISSUER);
	}
	cJSON *matched = cJSON_CreateArray();
	ks_user u;
	int rc = -1;
	if (*tok && cJSON_GetArraySize(want))
		rc = ks_satoken_verify_for(s, tok, want, &u, matched);
	if (rc != 0 && api && *tok) {
		size_t al = strlen(tok) + 8;
		char *bearer = malloc(al);
		if (bearer) {
			snprintf(bearer, al, "Bearer %s", tok);
			rc = ks_authenticate(s, bearer, &u);
			OPENSSL_cleanse(bearer, al);
		}
		free(bearer);
		cJSON_Delete(matched);
		matched = cJSON_CreateArray();
		cJSON_AddItemToArray(matched, cJSON_CreateString(ISSUER));
	}
	cJSON *st = cJSON_CreateObject();
	if (rc == 0 && strcmp(u.name, "system:anonymous") != 0) {
		bool authed = false;
		for (int i = 0; i < u.ngroups; i++)
			authed |= strcmp(u.groups[i], "system:authenticated") == 0;
		if (!authed && u.ngroups < KS_USER_MAX_GROUPS)
			snprintf(u.groups[u.ngroups++], sizeof(u.groups[0]), "system:authenticated");
		cJSON_AddBoolToObject(st, "authenticated", true);
		cJSON_AddItemToObject(st, "user", ks_user_info_json(&u));
		cJSON_AddItemToObject(st, "audiences", matched);
		matched = NULL;
	} else {
		cJSON_AddBoolToObject(st, "authenticated", false);
		cJSON_AddStringToObject(st, "error", api ? "invalid bearer token"
							 : "invalid bearer token, or not for the audiences asked");
	}
	cJSON_Delete(matched);
	/* the answer echoes the spec (the token included, as the API server does) */
	cJSON_DeleteItemFromObjectCaseSensitive(j, "status");
	cJSON_AddItemToObject(j, "status", st);
	cJSON_DeleteItemFromObjectCaseSensitive(j, "apiVersion");
	cJSON_AddStringToObject(j, "apiVersion", "authentication.k8s.io/v1");
	ks_resp_json(out, 201, j);
}

bool ks_review_route(ks_server *s, const ks_req *r, const ks_route *rt, ks_resp *out)
{
	if (rt->kind != KS_ROUTE_RESOURCE || strcmp(rt->group, "authentication.k8s.io") ||
	    strcmp(rt->resource, "tokenreviews"))
		return false;
	if (strcmp(rt->version, "v1") || rt->ns[0] || rt->name[0] || strcmp(r->method, "POST")) {
		ks_resp_status(out, 405, "MethodNotAllowed", NULL, NULL, NULL, NULL,
			       "only POST /apis/authentication.k8s.io/v1/tokenreviews is served");
		return true;
	}
	/* --faults apply to reviews too: an API server that fails them */
	if (ks_faults_respond(s, r, "create", rt->resource, "tokenreviews", NULL, rt->group, out))
		return true;
	token_review(s, r, out);
	return true;
}
