/* fake-kmm — the AdmissionReview v1 envelope around gk_policy_kmm_admit_json, shaped
 * like controller-runtime's validating webhook: denied → allowed=false with
 * status {code 403, reason Forbidden, message}; undecodable → allowed=false
 * with status {code 400, message}; always HTTP 200 with an AdmissionReview. */
#include <stdlib.h>
#include <string.h>

#include "fakekmm.h"

static char *respond(const char *uid, int allowed, int code, const char *reason, const char *message)
{
	cJSON *root = cJSON_CreateObject();
	char *out = NULL;
	if (!root)
		return NULL;
	cJSON *resp, *st;
	if (!cJSON_AddStringToObject(root, "apiVersion", "admission.k8s.io/v1") ||
	    !cJSON_AddStringToObject(root, "kind", "AdmissionReview") ||
	    !(resp = cJSON_AddObjectToObject(root, "response")) ||
	    !cJSON_AddStringToObject(resp, "uid", uid ? uid : "") ||
	    !cJSON_AddBoolToObject(resp, "allowed", allowed) || !(st = cJSON_AddObjectToObject(resp, "status")) ||
	    !cJSON_AddNumberToObject(st, "code", code) ||
	    (reason && !cJSON_AddStringToObject(st, "reason", reason)) ||
	    (message && *message && !cJSON_AddStringToObject(st, "message", message)))
		goto out;
	out = cJSON_PrintUnformatted(root);
out:
	cJSON_Delete(root);
	return out;
}

/* Fill metadata.namespace / metadata.name from the request when the object
 * lacks them (the API server sets them before admission; be lenient). */
static void fill_meta(cJSON *obj, const cJSON *req)
{
	if (!cJSON_IsObject(obj))
		return;
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	if (!meta) {
		meta = cJSON_AddObjectToObject(obj, "metadata");
		if (!meta)
			return;
	}
	if (!cJSON_IsObject(meta))
		return;
	static const char *const keys[] = { "namespace", "name" };
	for (int i = 0; i < 2; i++) {
		const cJSON *have = cJSON_GetObjectItemCaseSensitive(meta, keys[i]);
		const cJSON *rv = cJSON_GetObjectItemCaseSensitive(req, keys[i]);
		if ((!have || (cJSON_IsString(have) && !*have->valuestring)) && cJSON_IsString(rv) && *rv->valuestring) {
			cJSON_DeleteItemFromObjectCaseSensitive(meta, keys[i]);
			cJSON_AddStringToObject(meta, keys[i], rv->valuestring);
		}
	}
}

char *fk_review_handle(const char *body, size_t len, const fk_kube_version *kv, int *http_status)
{
	char msg[4096];
	*http_status = 200;
	if (!body || len == 0)
		return respond("", 0, 400, NULL, "request body is empty");
	cJSON *root = cJSON_ParseWithLength(body, len);
	if (!root)
		return respond("", 0, 400, NULL, "couldn't decode AdmissionReview: invalid JSON");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
	if (!cJSON_IsObject(root) || !cJSON_IsObject(req) || !cJSON_IsString(kind) ||
	    strcmp(kind->valuestring, "AdmissionReview") != 0) {
		cJSON_Delete(root);
		return respond("", 0, 400, NULL, "couldn't decode AdmissionReview: no AdmissionReview request");
	}
	const cJSON *uidv = cJSON_GetObjectItemCaseSensitive(req, "uid");
	const char *uid = cJSON_IsString(uidv) ? uidv->valuestring : "";
	const cJSON *opv = cJSON_GetObjectItemCaseSensitive(req, "operation");
	const char *op = cJSON_IsString(opv) ? opv->valuestring : "";
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(req, "object");
	cJSON *old = cJSON_GetObjectItemCaseSensitive(req, "oldObject");
	char *out;
	if (!strcmp(op, "DELETE")) {
		/* KMM's ValidateDelete returns NotImplemented (it is not registered for DELETE). */
		out = respond(uid, 0, 403, "Forbidden", "not implemented");
	} else if (strcmp(op, "CREATE") != 0 && strcmp(op, "UPDATE") != 0) {
		out = respond(uid, 1, 200, NULL, NULL);
	} else if (!cJSON_IsObject(obj)) {
		out = respond(uid, 0, 400, NULL, "there is no content to decode");
	} else {
		fill_meta(obj, req);
		int r = gk_policy_kmm_admit_json(obj, !strcmp(op, "UPDATE") && cJSON_IsObject(old) ? old : NULL, kv, msg,
					sizeof msg);
		if (r == GK_POLICY_KMM_ALLOW)
			out = respond(uid, 1, 200, NULL, NULL);
		else if (r == GK_POLICY_KMM_DENY)
			out = respond(uid, 0, 403, "Forbidden", msg);
		else
			out = respond(uid, 0, 400, NULL, msg);
	}
	cJSON_Delete(root);
	return out;
}
