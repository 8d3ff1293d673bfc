/* gpukmm-statusd: NodeReportRequests, the pure part (see nrr.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nrr.h"

static const char *sget(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int dup(char **dst, const char *src)
{
	return src && !(*dst = strdup(src)) ? -1 : 0;
}

void gk_sd_nrr_clear(gk_sd_nrr *r)
{
	free(r->name);
	free(r->uid);
	free(r->rv);
	if (r->token) {
		explicit_bzero(r->token, strlen(r->token));
		free(r->token);
	}
	free(r->report);
	memset(r, 0, sizeof(*r));
}

int gk_sd_nrr_from_json(const cJSON *obj, gk_sd_nrr *out, gk_err *err)
{
	memset(out, 0, sizeof(*out));
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	const char *name = sget(meta, "name"), *uid = sget(meta, "uid");
	if (!name || !*name || !uid || !*uid)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "NodeReportRequest without a name or uid");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(spec, "token");
	const cJSON *rep = cJSON_GetObjectItemCaseSensitive(spec, "report");
	if (dup(&out->name, name) || dup(&out->uid, uid) || dup(&out->rv, sget(meta, "resourceVersion"))) {
		gk_sd_nrr_clear(out);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	if (strlen(name) > 253)
		snprintf(out->bad, sizeof(out->bad), "its name is longer than a node name (253)");
	else if (!cJSON_IsString(tok) || !tok->valuestring[0])
		snprintf(out->bad, sizeof(out->bad), "spec.token is missing");
	else if (strlen(tok->valuestring) > GK_SD_NRR_TOKEN_MAX)
		snprintf(out->bad, sizeof(out->bad), "spec.token is longer than %d bytes", GK_SD_NRR_TOKEN_MAX);
	else if (!cJSON_IsString(rep) || !rep->valuestring[0])
		snprintf(out->bad, sizeof(out->bad), "spec.report is missing");
	else if (strlen(rep->valuestring) > GK_PROBE_JSON_BUDGET)
		snprintf(out->bad, sizeof(out->bad), "spec.report is %zu bytes, over the budget of %d",
			 strlen(rep->valuestring), GK_PROBE_JSON_BUDGET);
	else if (dup(&out->token, tok->valuestring) || dup(&out->report, rep->valuestring)) {
		gk_sd_nrr_clear(out);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	return GK_OK;
}

cJSON *gk_sd_nrr_review(const char *token)
{
	cJSON *o = cJSON_CreateObject(), *s, *a;
	if (o && cJSON_AddStringToObject(o, "apiVersion", "authentication.k8s.io/v1") &&
	    cJSON_AddStringToObject(o, "kind", "TokenReview") && (s = cJSON_AddObjectToObject(o, "spec")) &&
	    cJSON_AddStringToObject(s, "token", token) && (a = cJSON_AddArrayToObject(s, "audiences")) &&
	    cJSON_AddItemToArray(a, cJSON_CreateString(GK_SD_NRR_AUDIENCE)))
		return o;
	cJSON_Delete(o);
	return NULL;
}

static bool has_string(const cJSON *a, const char *s)
{
	const cJSON *e, *arr = cJSON_IsArray(a) ? a : NULL;
	cJSON_ArrayForEach(e, arr) {
		if (cJSON_IsString(e) && strcmp(e->valuestring, s) == 0)
			return true;
	}
	return false;
}

bool gk_sd_nrr_verdict(const cJSON *review, const char *node, const char *want_user, char *why, size_t cap)
{
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(review, "status");
	const cJSON *user = cJSON_GetObjectItemCaseSensitive(st, "user");
	const cJSON *extra = cJSON_GetObjectItemCaseSensitive(user, "extra");
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(extra, GK_SD_NRR_NODE_EXTRA);
	const char *username = sget(user, "username"), *e = sget(st, "error");
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "authenticated"))) {
		snprintf(why, cap, "its token does not authenticate for the audience %s%s%.200s", GK_SD_NRR_AUDIENCE,
			 e ? ": " : "", e ? e : "");
		return false;
	}
	if (!has_string(cJSON_GetObjectItemCaseSensitive(st, "audiences"), GK_SD_NRR_AUDIENCE)) {
		snprintf(why, cap, "its token is not for the audience %s", GK_SD_NRR_AUDIENCE);
		return false;
	}
	if (!username || strcmp(username, want_user) != 0) {
		snprintf(why, cap, "it was written with the token of %.256s, not of the node ServiceAccount %s",
			 username ? username : "an unnamed user", want_user);
		return false;
	}
	if (cJSON_GetArraySize(nodes) != 1 || !cJSON_IsString(cJSON_GetArrayItem(nodes, 0))) {
		snprintf(why, cap,
			 "its token names no node (the pod-bound token's %s: Kubernetes >= 1.30, feature "
			 "ServiceAccountTokenPodNodeInfo)",
			 GK_SD_NRR_NODE_EXTRA);
		return false;
	}
	const char *by = cJSON_GetArrayItem(nodes, 0)->valuestring;
	if (strcmp(by, node) != 0) {
		snprintf(why, cap, "it was written by node %.253s's pod, for another node", by);
		return false;
	}
	return true;
}

bool gk_sd_nrr_report(const char *node, const char *json, Gpukmm__NodeReport **r, gk_probe_json_info *info,
		      char *why, size_t cap)
{
	*r = NULL;
	size_t len = strlen(json);
	if (len > GK_PROBE_JSON_BUDGET) {
		snprintf(why, cap, "its report is %zu bytes, over the budget of %d", len, GK_PROBE_JSON_BUDGET);
		return false;
	}
	gk_err err = { 0 };
	if (gk_probe_report_parse(json, len, r, info, &err) != GK_OK) {
		snprintf(why, cap, "%s", err.msg);
		return false;
	}
	if (!(*r)->node_name || strcmp((*r)->node_name, node) != 0) {
		snprintf(why, cap, "its report names node '%.253s'", (*r)->node_name ? (*r)->node_name : "");
		gk_probe_report_free(*r);
		*r = NULL;
		return false;
	}
	return true;
}
