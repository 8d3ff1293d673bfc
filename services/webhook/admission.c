/* gpukmm-webhook: AdmissionReview v1 -> response (see admission.h). */
#include "admission.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpukmm/kobj.h"

static void bad(gk_webhook_result *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(gk_webhook_result *out, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	out->http_status = s ? 400 : 500;
	out->outcome = s ? GK_WEBHOOK_BAD : GK_WEBHOOK_INTERNAL;
	out->body = s;
	out->content_type = "text/plain; charset=utf-8";
}

static void internal(gk_webhook_result *out)
{
	free(out->body);
	out->http_status = 500;
	out->outcome = GK_WEBHOOK_INTERNAL;
	out->body = strdup("internal error: out of memory\n");
	out->content_type = "text/plain; charset=utf-8";
}

int gk_webhook_json_content_type(const char *ct)
{
	if (!ct)
		return 0;
	while (*ct == ' ')
		ct++;
	size_t n = strcspn(ct, "; ");
	return n == 16 && strncasecmp(ct, "application/json", 16) == 0;
}

static char *base64(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	if (!out)
		return NULL;
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
	return out;
}

/* {"apiVersion","kind","response":{"uid":...}} with response returned for filling */
static cJSON *review(const char *uid, cJSON **response)
{
	cJSON *r = cJSON_CreateObject();
	if (!r || !cJSON_AddStringToObject(r, "apiVersion", "admission.k8s.io/v1") ||
	    !cJSON_AddStringToObject(r, "kind", "AdmissionReview") ||
	    !(*response = cJSON_AddObjectToObject(r, "response")) ||
	    !cJSON_AddStringToObject(*response, "uid", uid)) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}

static void finish(gk_webhook_result *out, cJSON *r, enum gk_webhook_outcome outcome)
{
	char *s = r ? cJSON_PrintUnformatted(r) : NULL;
	cJSON_Delete(r);
	if (!s) {
		internal(out);
		return;
	}
	out->http_status = 200;
	out->body = s;
	out->content_type = "application/json";
	out->outcome = outcome;
}

static void mutate(const cJSON *obj, const char *uid, gk_webhook_result *out)
{
	cJSON *resp, *r = review(uid, &resp);
	cJSON *ops = gk_policy_default_patch(obj);
	if (!r || !ops || !cJSON_AddBoolToObject(resp, "allowed", 1))
		goto oom;
	if (cJSON_GetArraySize(ops) > 0) {
		char *json = cJSON_PrintUnformatted(ops);
		char *b64 = json ? base64(json) : NULL;
		cJSON_free(json);
		if (!b64 || !cJSON_AddStringToObject(resp, "patchType", "JSONPatch") ||
		    !cJSON_AddStringToObject(resp, "patch", b64)) {
			free(b64);
			goto oom;
		}
		free(b64);
	}
	cJSON_Delete(ops);
	finish(out, r, GK_WEBHOOK_ALLOWED);
	return;
oom:
	cJSON_Delete(ops);
	cJSON_Delete(r);
	internal(out);
}

static bool being_deleted(const cJSON *obj)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *dt = cJSON_IsObject(md) ? cJSON_GetObjectItemCaseSensitive(md, "deletionTimestamp") : NULL;
	return cJSON_IsString(dt) && dt->valuestring[0];
}

static void validate(const cJSON *obj, const char *op, const char *uid, const gk_policy_opts *o,
		     gk_webhook_result *out)
{
	cJSON *resp, *r = review(uid, &resp);
	if (!r)
		goto oom;
	/* like upstream: once deletion started, the finalizer removal must not be blocked */
	if (strcmp(op, "UPDATE") == 0 && being_deleted(obj)) {
		if (!cJSON_AddBoolToObject(resp, "allowed", 1))
			goto oom;
		finish(out, r, GK_WEBHOOK_ALLOWED);
		return;
	}
	gk_policy_report rep;
	gk_policy_report_init(&rep);
	gk_policy_validate_json(obj, false, o, &rep, NULL);
	if (rep.oom) {
		gk_policy_report_free(&rep);
		goto oom;
	}
	bool ok = rep.n == 0;
	if (!cJSON_AddBoolToObject(resp, "allowed", ok)) {
		gk_policy_report_free(&rep);
		goto oom;
	}
	if (!ok) {
		char *msg = gk_policy_report_join(&rep);
		cJSON *st = cJSON_AddObjectToObject(resp, "status");
		if (!msg || !st || !cJSON_AddNumberToObject(st, "code", 403) ||
		    !cJSON_AddStringToObject(st, "reason", "Forbidden") || !cJSON_AddStringToObject(st, "message", msg)) {
			free(msg);
			gk_policy_report_free(&rep);
			goto oom;
		}
		free(msg);
	}
	if (rep.n_warnings) {
		cJSON *w = cJSON_AddArrayToObject(resp, "warnings");
		for (size_t i = 0; w && i < rep.n_warnings; i++) {
			cJSON *s = cJSON_CreateString(rep.warnings[i]);
			if (!s) {
				w = NULL;
				break;
			}
			cJSON_AddItemToArray(w, s);
		}
		if (!w) {
			gk_policy_report_free(&rep);
			goto oom;
		}
	}
	gk_policy_report_free(&rep);
	finish(out, r, ok ? GK_WEBHOOK_ALLOWED : GK_WEBHOOK_DENIED);
	return;
oom:
	cJSON_Delete(r);
	internal(out);
}

void gk_webhook_review(enum gk_webhook_kind kind, const char *body, size_t len, const gk_policy_opts *o,
		       gk_webhook_result *out)
{
	memset(out, 0, sizeof(*out));
	cJSON *j = cJSON_ParseWithLength(body, len);
	if (!j) {
		bad(out, "malformed AdmissionReview: body is not JSON\n");
		return;
	}
	const cJSON *api = cJSON_GetObjectItemCaseSensitive(j, "apiVersion");
	const cJSON *kind_ = cJSON_GetObjectItemCaseSensitive(j, "kind");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(j, "request");
	const cJSON *uid = cJSON_IsObject(req) ? cJSON_GetObjectItemCaseSensitive(req, "uid") : NULL;
	const cJSON *op = cJSON_IsObject(req) ? cJSON_GetObjectItemCaseSensitive(req, "operation") : NULL;
	const cJSON *obj = cJSON_IsObject(req) ? cJSON_GetObjectItemCaseSensitive(req, "object") : NULL;
	if (!cJSON_IsObject(j))
		bad(out, "malformed AdmissionReview: body is not a JSON object\n");
	else if (!cJSON_IsString(api) || strcmp(api->valuestring, "admission.k8s.io/v1") != 0)
		bad(out, "malformed AdmissionReview: apiVersion must be admission.k8s.io/v1\n");
	else if (!cJSON_IsString(kind_) || strcmp(kind_->valuestring, "AdmissionReview") != 0)
		bad(out, "malformed AdmissionReview: kind must be AdmissionReview\n");
	else if (!cJSON_IsObject(req))
		bad(out, "malformed AdmissionReview: request missing\n");
	else if (!cJSON_IsString(uid) || !uid->valuestring[0])
		bad(out, "malformed AdmissionReview: request.uid missing\n");
	else if (!cJSON_IsString(op))
		bad(out, "malformed AdmissionReview: request.operation missing\n");
	else if (strcmp(op->valuestring, "DELETE") == 0 || strcmp(op->valuestring, "CONNECT") == 0) {
		/* not registered for these; allow rather than block deletions */
		cJSON *resp, *r = review(uid->valuestring, &resp);
		if (!r || !cJSON_AddBoolToObject(resp, "allowed", 1)) {
			cJSON_Delete(r);
			internal(out);
		} else {
			finish(out, r, GK_WEBHOOK_ALLOWED);
		}
	} else if (!cJSON_IsObject(obj))
		bad(out, "malformed AdmissionReview: request.object must be an object\n");
	else if (kind == GK_WEBHOOK_MUTATE)
		mutate(obj, uid->valuestring, out);
	else
		validate(obj, op->valuestring, uid->valuestring, o, out);
	cJSON_Delete(j);
}

void gk_webhook_result_free(gk_webhook_result *r)
{
	if (!r)
		return;
	free(r->body);
	r->body = NULL;
}

void gk_webhook_refuse(const char *uid, int code, const char *reason, const char *message, gk_webhook_result *out)
{
	memset(out, 0, sizeof(*out));
	cJSON *resp, *r = review(uid, &resp), *st = NULL;
	if (!r || !cJSON_AddBoolToObject(resp, "allowed", 0) || !(st = cJSON_AddObjectToObject(resp, "status")) ||
	    !cJSON_AddNumberToObject(st, "code", code) ||
	    !cJSON_AddStringToObject(st, "reason", reason) || !cJSON_AddStringToObject(st, "message", message)) {
		cJSON_Delete(r);
		internal(out);
		return;
	}
	finish(out, r, GK_WEBHOOK_DENIED);
}
