/* kubesim — TokenReview (POST /apis/authentication.k8s.io/v1/tokenreviews): who a
 * bearer token names, for the audiences asked (spec.audiences; none: the API
 * server's). As the API server: a ServiceAccount token is authenticated when it
 * is valid (satoken.c: signature, expiry, its ServiceAccount and bound pod or
 * node alive) and its audiences meet the ones asked, and the answer carries the
 * user (username, uid, groups, extra authentication.kubernetes.io/node-name of a
 * pod-bound token) and the audiences met; the other tokens (the admin's,
 * --token-auth-file) are audience-agnostic and count only for the API server's
 * own audience. A token that does not authenticate is status.error, 201 all the
 * same: the review succeeded, the token did not. The caller needs create on
 * tokenreviews (the authorizer checked it before). */
#include <stdio.h>
#include <string.h>

#include "auth.h"

#define ISSUER "https://kubernetes.default.svc.cluster.local"

static int wants_api_audience(const cJSON *want)
{
	const cJSON *w;
	if (!cJSON_GetArraySize(want))
		return 1;
	cJSON_ArrayForEach(w, want) if (cJSON_IsString(w) && strcmp(w->valuestring, ISSUER) == 0) return 1;
	return 0;
}

void ks_token_review(ks_server *s, const ks_req *r, ks_resp *out)
{
	cJSON *body = ks_auth_body(r, out);
	if (!body)
		return;
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(body, "spec");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(spec, "token");
	const cJSON *want = cJSON_GetObjectItemCaseSensitive(spec, "audiences");
	if (!cJSON_IsString(tok) || !tok->valuestring[0]) {
		ks_resp_status(out, 422, "Invalid", "TokenReview", "", "authentication.k8s.io", NULL,
			       "TokenReview.authentication.k8s.io \"\" is invalid: spec.token: Required value: token "
			       "must not be empty");
		cJSON_Delete(body);
		return;
	}
	if (want && !cJSON_IsArray(want)) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "TokenReview in version \"v1\" cannot be handled as a TokenReview: spec.audiences: "
			       "expected an array");
		cJSON_Delete(body);
		return;
	}
	static const char *const api[] = { ISSUER };
	cJSON *matched = cJSON_CreateArray(), *user = NULL;
	ks_user u;
	int ok = ks_satoken_verify_for(s, tok->valuestring, cJSON_GetArraySize(want) ? want : NULL, &u, matched) == 0;
	if (!ok && wants_api_audience(want) && ks_token_user(s, tok->valuestring, &u) == 0) {
		ok = 1; /* audience-agnostic: the API server's audience */
		cJSON_Delete(matched);
		matched = cJSON_CreateStringArray(api, 1);
	}
	cJSON *resp = cJSON_CreateObject(), *m, *st;
	if (!resp || !matched || !cJSON_AddStringToObject(resp, "kind", "TokenReview") ||
	    !cJSON_AddStringToObject(resp, "apiVersion", "authentication.k8s.io/v1") ||
	    !(m = cJSON_AddObjectToObject(resp, "metadata")) || !cJSON_AddNullToObject(m, "creationTimestamp") ||
	    !cJSON_AddItemToObject(resp, "spec", cJSON_Duplicate(spec ? spec : body, 1)) ||
	    !(st = cJSON_AddObjectToObject(resp, "status")))
		goto oom;
	if (ok) {
		if (!cJSON_AddBoolToObject(st, "authenticated", 1) || !(user = ks_user_info_json(&u)))
			goto oom;
		cJSON_AddItemToObject(st, "user", user);
		cJSON_AddItemToObject(st, "audiences", matched);
		matched = NULL;
	} else {
		char msg[600];
		char *w = cJSON_GetArraySize(want) ? cJSON_PrintUnformatted(want) : NULL;
		snprintf(msg, sizeof(msg), "[invalid bearer token, token lookup failed or its audiences do not include %s]",
			 w ? w : "[\"" ISSUER "\"]");
		cJSON_free(w);
		if (!cJSON_AddObjectToObject(st, "user") || !cJSON_AddStringToObject(st, "error", msg))
			goto oom;
	}
	cJSON_Delete(matched);
	ks_resp_json(out, 201, resp);
	cJSON_Delete(body);
	return;
oom:
	cJSON_Delete(matched);
	cJSON_Delete(resp);
	cJSON_Delete(body);
	ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
}
