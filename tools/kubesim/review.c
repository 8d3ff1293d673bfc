/* kubesim — authentication.k8s.io/v1 TokenReview and authorization.k8s.io/v1
 * SubjectAccessReview: what a delegating authenticator and authorizer (a
 * controller's /metrics behind TokenReview + SubjectAccessReview, like
 * controller-runtime's) ask the API server.
 *
 * Identities: --token-auth-file FILE, kube-apiserver's static token file
 * (one `token,user,uid,"group1,group2"` per line; # comments); the server's
 * own --token is user "kubesim-admin" in system:masters. These tokens are
 * known to TokenReview; the API itself still authenticates --token only.
 *
 * Authorization is ks_authorize below, the one place that decides: until
 * kubesim enforces RBAC it answers from a simple rule (system:masters may
 * do anything, nobody else anything); the RBAC authorizer plugs in there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/log.h"
#include "kubesim.h"
#include "route.h"

#define MAX_GROUPS 16

struct ks_tr_identity {
	char *token, *name, *uid;
	char *groups[MAX_GROUPS];
	int ngroups;
};

static void user_free(ks_tr_identity *u)
{
	free(u->token);
	free(u->name);
	free(u->uid);
	for (int i = 0; i < u->ngroups; i++)
		free(u->groups[i]);
}

/* One CSV field (quotes allowed around it) from *p; NULL at the end of the line. */
static char *field(char **p)
{
	char *s = *p;
	if (!s)
		return NULL;
	char *out;
	if (*s == '"') {
		out = ++s;
		char *q = strchr(s, '"');
		if (!q)
			return NULL;
		*q = 0;
		s = q + 1;
	} else {
		out = s;
		s += strcspn(s, ",");
	}
	if (*s == ',')
		*s++ = 0;
	else
		s = NULL;
	*p = s;
	return out;
}

int ks_token_auth_file_load(ks_server *s, const char *path, gk_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return gk_err_set(err, GK_NOT_FOUND, "--token-auth-file %s: cannot open", path);
	char line[4096];
	int ln = 0, rc = 0;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		ln++;
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		char *p = line, *tok = field(&p), *name = field(&p), *uid = field(&p), *groups = field(&p);
		if (!tok || !*tok || !name || !*name) {
			rc = gk_err_set(err, GK_INVALID_ARGUMENT, "--token-auth-file %s:%d: want token,user,uid[,\"groups\"]",
					path, ln);
			break;
		}
		ks_tr_identity *nu = realloc(s->tr_users, (size_t)(s->ntr_users + 1) * sizeof(*nu));
		if (!nu) {
			rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
			break;
		}
		s->tr_users = nu;
		ks_tr_identity *u = &s->tr_users[s->ntr_users++];
		memset(u, 0, sizeof(*u));
		u->token = strdup(tok);
		u->name = strdup(name);
		u->uid = strdup(uid ? uid : "");
		for (char *g = groups ? strtok(groups, ",") : NULL; g && u->ngroups < MAX_GROUPS; g = strtok(NULL, ","))
			u->groups[u->ngroups++] = strdup(g);
		if (!u->token || !u->name || !u->uid)
			rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	fclose(f);
	return rc;
}

void ks_users_free(ks_server *s)
{
	for (int i = 0; i < s->ntr_users; i++)
		user_free(&s->tr_users[i]);
	free(s->tr_users);
	s->tr_users = NULL;
	s->ntr_users = 0;
}

/* ---- authorization --------------------------------------------------------------- */

typedef struct ks_attrs {
	const char *verb;
	const char *path;                    /* nonResourceAttributes, or NULL */
	const char *group, *resource, *ns;  /* resourceAttributes, or NULL */
} ks_attrs;

/* May user (name, groups) do attrs? The simple rule until kubesim enforces
 * RBAC: system:masters may do anything, nobody else anything. The RBAC
 * authorizer (ClusterRoles / bindings in the store) replaces this body. */
static bool ks_authorize(ks_server *s, const char *user, const cJSON *groups, const ks_attrs *a, char *reason,
			 size_t cap)
{
	const cJSON *g;
	cJSON_ArrayForEach(g, groups)
	{
		if (cJSON_IsString(g) && strcmp(g->valuestring, "system:masters") == 0) {
			snprintf(reason, cap, "kubesim: %s is in system:masters", user);
			return true;
		}
	}
	snprintf(reason, cap, "kubesim: %s may not %s %s (only system:masters is authorized)", user,
		 a->verb ? a->verb : "?", a->path ? a->path : a->resource ? a->resource : "?");
	return false;
}

/* ---- the two reviews ------------------------------------------------------------- */

static cJSON *parse_review(const ks_req *r, const char *kind, ks_resp *out, const cJSON **spec)
{
	cJSON *j = r->body ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kind");
	*spec = cJSON_GetObjectItemCaseSensitive(j, "spec");
	if (!cJSON_IsObject(j) || !cJSON_IsString(k) || strcmp(k->valuestring, kind) || !cJSON_IsObject(*spec)) {
		cJSON_Delete(j);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "expected a %s with a spec", kind);
		return NULL;
	}
	return j;
}

static const ks_tr_identity *find_user(const ks_server *s, const char *token)
{
	for (int i = 0; i < s->ntr_users; i++)
		if (strcmp(s->tr_users[i].token, token) == 0)
			return &s->tr_users[i];
	return NULL;
}

static void token_review(ks_server *s, const ks_req *r, ks_resp *out)
{
	const cJSON *spec;
	cJSON *j = parse_review(r, "TokenReview", out, &spec);
	if (!j)
		return;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(spec, "token");
	const char *tok = cJSON_IsString(t) ? t->valuestring : "";
	cJSON *st = cJSON_CreateObject();
	pthread_mutex_lock(&s->mu);
	const ks_tr_identity *u = *tok ? find_user(s, tok) : NULL;
	bool admin = !u && *tok && s->token && strcmp(tok, s->token) == 0;
	if (u || admin) {
		cJSON_AddBoolToObject(st, "authenticated", true);
		cJSON *ju = cJSON_AddObjectToObject(st, "user");
		cJSON_AddStringToObject(ju, "username", u ? u->name : "kubesim-admin");
		cJSON_AddStringToObject(ju, "uid", u ? u->uid : "0");
		cJSON *g = cJSON_AddArrayToObject(ju, "groups");
		for (int i = 0; u && i < u->ngroups; i++)
			cJSON_AddItemToArray(g, cJSON_CreateString(u->groups[i]));
		if (admin)
			cJSON_AddItemToArray(g, cJSON_CreateString("system:masters"));
		cJSON_AddItemToArray(g, cJSON_CreateString("system:authenticated"));
	} else {
		cJSON_AddBoolToObject(st, "authenticated", false);
		cJSON_AddStringToObject(st, "error", "invalid bearer token");
	}
	pthread_mutex_unlock(&s->mu);
	/* the answer echoes the spec (token included, as the API server does) */
	cJSON_DeleteItemFromObjectCaseSensitive(j, "status");
	cJSON_AddItemToObject(j, "status", st);
	cJSON_ReplaceItemInObjectCaseSensitive(j, "apiVersion", cJSON_CreateString("authentication.k8s.io/v1"));
	ks_resp_json(out, 201, j);
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void access_review(ks_server *s, const ks_req *r, ks_resp *out)
{
	const cJSON *spec;
	cJSON *j = parse_review(r, "SubjectAccessReview", out, &spec);
	if (!j)
		return;
	const char *user = jstr(spec, "user");
	const cJSON *groups = cJSON_GetObjectItemCaseSensitive(spec, "groups");
	const cJSON *nra = cJSON_GetObjectItemCaseSensitive(spec, "nonResourceAttributes");
	const cJSON *ra = cJSON_GetObjectItemCaseSensitive(spec, "resourceAttributes");
	if ((!user || !*user) && !cJSON_IsArray(groups)) {
		cJSON_Delete(j);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "SubjectAccessReview: at least one of user or group must be specified");
		return;
	}
	if (!cJSON_IsObject(nra) == !cJSON_IsObject(ra)) {
		cJSON_Delete(j);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "SubjectAccessReview: exactly one of nonResourceAttributes and resourceAttributes");
		return;
	}
	const cJSON *at = nra ? nra : ra;
	ks_attrs a = { .verb = jstr(at, "verb"), .path = nra ? jstr(nra, "path") : NULL,
		       .group = ra ? jstr(ra, "group") : NULL, .resource = ra ? jstr(ra, "resource") : NULL,
		       .ns = ra ? jstr(ra, "namespace") : NULL };
	char reason[512];
	pthread_mutex_lock(&s->mu);
	bool allowed = ks_authorize(s, user ? user : "", groups, &a, reason, sizeof(reason));
	pthread_mutex_unlock(&s->mu);
	cJSON *st = cJSON_CreateObject();
	cJSON_AddBoolToObject(st, "allowed", allowed);
	cJSON_AddStringToObject(st, "reason", reason);
	cJSON_DeleteItemFromObjectCaseSensitive(j, "status");
	cJSON_AddItemToObject(j, "status", st);
	cJSON_ReplaceItemInObjectCaseSensitive(j, "apiVersion", cJSON_CreateString("authorization.k8s.io/v1"));
	ks_resp_json(out, 201, j);
}

bool ks_review_route(ks_server *s, const ks_req *r, const ks_route *rt, ks_resp *out)
{
	bool tr = strcmp(rt->group, "authentication.k8s.io") == 0 && strcmp(rt->resource, "tokenreviews") == 0;
	bool sar = strcmp(rt->group, "authorization.k8s.io") == 0 && strcmp(rt->resource, "subjectaccessreviews") == 0;
	if (rt->kind != KS_ROUTE_RESOURCE || (!tr && !sar))
		return false;
	if (strcmp(rt->version, "v1") || rt->ns[0] || rt->name[0] || strcmp(r->method, "POST")) {
		ks_resp_status(out, 405, "MethodNotAllowed", NULL, NULL, NULL, NULL,
			       "only POST /apis/%s/v1/%s is served", rt->group, rt->resource);
		return true;
	}
	/* --faults apply to reviews too (verb create): an API server that fails them */
	int retry_after = 0, latency = 0;
	pthread_mutex_lock(&s->mu);
	int fcode = ks_faults_decide(&s->faults, "create", rt->resource, &retry_after, &latency);
	if (fcode)
		s->stats.faults_injected++;
	pthread_mutex_unlock(&s->mu);
	if (fcode) {
		ks_resp_status(out, fcode, fcode == 429 ? "TooManyRequests" : "InternalError", NULL, NULL, NULL, NULL,
			       "kubesim: injected fault (%d) for create %s", fcode, rt->resource);
		out->retry_after = fcode == 429 ? (retry_after > 0 ? retry_after : 1) : 0;
		return true;
	}
	if (tr)
		token_review(s, r, out);
	else
		access_review(s, r, out);
	return true;
}
