/* kubesim — the authorization and authentication review APIs (what `kubectl auth
 * can-i [--list]` and `kubectl auth whoami` call) and GET /kubesim/rbac.
 *
 * SelfSubjectAccessReview asks for the requesting user, SubjectAccessReview and
 * LocalSubjectAccessReview for spec.user / spec.groups; the answer is the
 * authorizer's (without --rbac: always allowed). SelfSubjectRulesReview lists the
 * rules that apply in spec.namespace; SelfSubjectReview returns the user. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "k8spb.h"

static const char *sget(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static void copy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

/* The review object as sent, with apiVersion/kind/metadata as the server answers. */
static cJSON *answer(cJSON *body, const char *group, const char *kind)
{
	char av[64];
	snprintf(av, sizeof(av), "%s/v1", group);
	cJSON_DeleteItemFromObjectCaseSensitive(body, "apiVersion");
	cJSON_DeleteItemFromObjectCaseSensitive(body, "kind");
	cJSON_DeleteItemFromObjectCaseSensitive(body, "status");
	cJSON_AddStringToObject(body, "kind", kind);
	cJSON_AddStringToObject(body, "apiVersion", av);
	cJSON *m = cJSON_GetObjectItemCaseSensitive(body, "metadata");
	if (!cJSON_IsObject(m)) {
		cJSON_DeleteItemFromObjectCaseSensitive(body, "metadata");
		m = cJSON_AddObjectToObject(body, "metadata");
	}
	if (m && !cJSON_GetObjectItemCaseSensitive(m, "creationTimestamp"))
		cJSON_AddNullToObject(m, "creationTimestamp");
	return cJSON_AddObjectToObject(body, "status");
}

cJSON *ks_user_info_json(const ks_user *u)
{
	cJSON *ui = cJSON_CreateObject(), *g;
	if (!ui)
		return NULL;
	cJSON_AddStringToObject(ui, "username", u->name);
	if (u->uid[0])
		cJSON_AddStringToObject(ui, "uid", u->uid);
	if ((g = cJSON_AddArrayToObject(ui, "groups")))
		for (int i = 0; i < u->ngroups; i++)
			cJSON_AddItemToArray(g, cJSON_CreateString(u->groups[i]));
	if (u->node[0]) {
		cJSON *x = cJSON_AddObjectToObject(ui, "extra");
		const char *v[] = { u->node };
		if (x)
			cJSON_AddItemToObject(x, "authentication.kubernetes.io/node-name", cJSON_CreateStringArray(v, 1));
	}
	return ui;
}

/* SAR's subject from spec.user/uid/groups; -1 without user and groups. */
static int subject_of(const cJSON *spec, ks_user *u)
{
	memset(u, 0, sizeof(*u));
	copy(u->name, sizeof(u->name), sget(spec, "user"));
	copy(u->uid, sizeof(u->uid), sget(spec, "uid"));
	const cJSON *g;
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(spec, "groups")) {
		if (cJSON_IsString(g) && u->ngroups < KS_USER_MAX_GROUPS)
			copy(u->groups[u->ngroups++], sizeof(u->groups[0]), g->valuestring);
	}
	return u->name[0] || u->ngroups ? 0 : -1;
}

static void access_review(ks_server *s, cJSON *body, const char *kind, const char *ns, const ks_user *self,
			  ks_resp *out)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(body, "spec");
	const cJSON *ra = cJSON_GetObjectItemCaseSensitive(spec, "resourceAttributes");
	const cJSON *na = cJSON_GetObjectItemCaseSensitive(spec, "nonResourceAttributes");
	ks_user who = *self;
	if (strcmp(kind, "SelfSubjectAccessReview") != 0 && subject_of(spec, &who)) {
		ks_resp_status(out, 422, "Invalid", kind, "", "authorization.k8s.io", NULL,
			       "%s.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of "
			       "user or group must be specified",
			       kind);
		return;
	}
	if (!!ra == !!na) {
		ks_resp_status(out, 422, "Invalid", kind, "", "authorization.k8s.io", NULL,
			       "%s.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": "
			       "exactly one of nonResourceAttributes or resourceAttributes must be specified",
			       kind);
		return;
	}
	if (ra && strcmp(kind, "LocalSubjectAccessReview") == 0 && strcmp(sget(ra, "namespace"), ns) != 0) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "spec.resourceAttributes.namespace must match namespace: %s", ns);
		return;
	}
	ks_attrs a;
	memset(&a, 0, sizeof(a));
	a.resource_request = ra != NULL;
	const cJSON *src = ra ? ra : na;
	copy(a.verb, sizeof(a.verb), sget(src, "verb"));
	copy(a.group, sizeof(a.group), sget(src, "group"));
	copy(a.resource, sizeof(a.resource), sget(src, "resource"));
	copy(a.sub, sizeof(a.sub), sget(src, "subresource"));
	copy(a.name, sizeof(a.name), sget(src, "name"));
	copy(a.ns, sizeof(a.ns), sget(src, "namespace"));
	copy(a.path, sizeof(a.path), sget(src, "path"));
	char reason[1100] = "";
	int ok = 1;
	if (s->rbac) {
		pthread_mutex_lock(&s->mu);
		ok = ks_authz_allowed(s, &who, &a, reason, sizeof(reason));
		pthread_mutex_unlock(&s->mu);
	}
	cJSON *st = answer(body, "authorization.k8s.io", kind);
	if (!st || !cJSON_AddBoolToObject(st, "allowed", ok) || (reason[0] && !cJSON_AddStringToObject(st, "reason", reason))) {
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return;
	}
	ks_resp_json(out, 201, cJSON_Duplicate(body, 1));
}

static cJSON *rule_info(const cJSON *r, int resource)
{
	cJSON *o = cJSON_CreateObject();
	static const char *const rk[] = { "verbs", "apiGroups", "resources", "resourceNames" };
	static const char *const nk[] = { "verbs", "nonResourceURLs" };
	const char *const *k = resource ? rk : nk;
	size_t n = resource ? 4 : 2;
	for (size_t i = 0; o && i < n; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, k[i]);
		if (cJSON_GetArraySize(v))
			cJSON_AddItemToObject(o, k[i], cJSON_Duplicate(v, 1));
	}
	return o;
}

static void rules_review(ks_server *s, cJSON *body, const ks_user *u, ks_resp *out)
{
	const char *ns = sget(cJSON_GetObjectItemCaseSensitive(body, "spec"), "namespace");
	char errs[1024] = "";
	cJSON *rules;
	if (s->rbac) {
		pthread_mutex_lock(&s->mu);
		rules = ks_authz_rules_for(s, u, ns, errs, sizeof(errs));
		pthread_mutex_unlock(&s->mu);
	} else {
		rules = cJSON_Parse("[{\"apiGroups\":[\"*\"],\"resources\":[\"*\"],\"verbs\":[\"*\"]},"
				    "{\"nonResourceURLs\":[\"*\"],\"verbs\":[\"*\"]}]");
	}
	cJSON *st = rules ? answer(body, "authorization.k8s.io", "SelfSubjectRulesReview") : NULL;
	cJSON *rr = st ? cJSON_AddArrayToObject(st, "resourceRules") : NULL;
	cJSON *nr = st ? cJSON_AddArrayToObject(st, "nonResourceRules") : NULL;
	if (!rr || !nr) {
		cJSON_Delete(rules);
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return;
	}
	const cJSON *r;
	cJSON_ArrayForEach(r, rules) {
		if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "resources")))
			cJSON_AddItemToArray(rr, rule_info(r, 1));
		if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "nonResourceURLs")))
			cJSON_AddItemToArray(nr, rule_info(r, 0));
	}
	cJSON_Delete(rules);
	cJSON_AddBoolToObject(st, "incomplete", errs[0] != 0);
	if (errs[0])
		cJSON_AddStringToObject(st, "evaluationError", errs);
	ks_resp_json(out, 201, cJSON_Duplicate(body, 1));
}

cJSON *ks_auth_body(const ks_req *r, ks_resp *out)
{
	cJSON *body = NULL;
	gk_err e = { 0 };
	if (!r->body_len)
		body = cJSON_CreateObject();
	else if (r->content_type && strncmp(r->content_type, "application/vnd.kubernetes.protobuf", 35) == 0)
		body = ks_k8spb_decode((const unsigned char *)r->body, r->body_len, &e);
	else
		body = cJSON_ParseWithLength(r->body, r->body_len);
	if (!cJSON_IsObject(body)) {
		cJSON_Delete(body);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "the body of the request was in an unknown format - accepted media types include: "
			       "application/json, application/yaml%s%s",
			       e.msg[0] ? ": " : "", e.msg);
		return NULL;
	}
	return body;
}

void ks_authz_review(ks_server *s, const ks_req *r, const char *kind, const char *ns, const ks_user *u,
		     ks_resp *out)
{
	cJSON *body = ks_auth_body(r, out);
	if (!body)
		return;
	if (strcmp(kind, "SelfSubjectReview") == 0) {
		cJSON *st = answer(body, "authentication.k8s.io", kind);
		if (st)
			cJSON_AddItemToObject(st, "userInfo", ks_user_info_json(u));
		ks_resp_json(out, 201, cJSON_Duplicate(body, 1));
	} else if (strcmp(kind, "SelfSubjectRulesReview") == 0) {
		rules_review(s, body, u, out);
	} else {
		access_review(s, body, kind, ns, u, out);
	}
	cJSON_Delete(body);
}

cJSON *ks_authz_record_json(ks_server *s)
{
	cJSON *j = cJSON_CreateObject(), *reqs, *den;
	if (!j)
		return NULL;
	pthread_mutex_lock(&s->mu);
	struct ks_auth *x = s->auth;
	cJSON_AddBoolToObject(j, "rbac", s->rbac);
	cJSON_AddNumberToObject(j, "allowed", x ? (double)x->allowed : 0);
	cJSON_AddNumberToObject(j, "denied", x ? (double)x->denied : 0);
	cJSON_AddNumberToObject(j, "dropped", x ? (double)x->dropped : 0);
	if (x && (den = cJSON_AddArrayToObject(j, "denials"))) {
		int n = x->ndenials < KS_DENIALS_KEPT ? x->ndenials : KS_DENIALS_KEPT;
		for (int i = x->ndenials - n; i < x->ndenials; i++)
			cJSON_AddItemToArray(den, cJSON_CreateString(x->denials[i % KS_DENIALS_KEPT]));
	}
	if (x && (reqs = cJSON_AddArrayToObject(j, "requests"))) {
		for (int i = 0; i < x->nrec; i++) {
			const ks_rec *e = &x->rec[i];
			cJSON *o = cJSON_CreateObject();
			if (!o || !cJSON_AddItemToArray(reqs, o)) {
				cJSON_Delete(o);
				break;
			}
			cJSON_AddStringToObject(o, "user", e->user);
			cJSON_AddStringToObject(o, "verb", e->verb);
			cJSON_AddStringToObject(o, "group", e->group);
			cJSON_AddStringToObject(o, "resource", e->resource);
			cJSON_AddStringToObject(o, "namespace", e->ns);
			cJSON_AddBoolToObject(o, "allowed", e->allowed);
			cJSON_AddNumberToObject(o, "count", (double)e->n);
		}
	}
	pthread_mutex_unlock(&s->mu);
	return j;
}
