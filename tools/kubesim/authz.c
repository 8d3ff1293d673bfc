/* kubesim — authorization: the RBAC authorizer over the stored Roles, ClusterRoles
 * and their bindings, the hooks handler.c calls, and the record of what each user
 * was allowed or refused (GET /kubesim/rbac).
 *
 * Without --rbac every authenticated request is allowed (the old kubesim). With it,
 * a request is allowed when the user is in system:masters or a rule reached through
 * a ClusterRoleBinding (any namespace) or a RoleBinding of the request's namespace
 * allows its attributes (rbac.c); kubesim's own /kubesim/ endpoints are never
 * authorized. The bootstrap ClusterRoles every cluster has are created at start:
 * cluster-admin (bound to system:masters), system:discovery,
 * system:public-info-viewer and system:basic-user. Aggregated ClusterRoles
 * (aggregationRule) are not computed: their rules are what is stored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "gpukmm/log.h"

static const char *sget(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- the rule resolver ------------------------------------------------------ */

int ks_authz_role_rules(ks_server *s, const cJSON *ref, const char *binding_ns, const cJSON **rules, char *err,
		      size_t cap)
{
	const char *kind = sget(ref, "kind"), *name = sget(ref, "name");
	*rules = NULL;
	int role = kind && strcmp(kind, "Role") == 0, crole = kind && strcmp(kind, "ClusterRole") == 0;
	if (!name || (!role && !crole)) {
		snprintf(err, cap, "unsupported role reference kind: \"%s\"", kind ? kind : "");
		return 0;
	}
	ks_item *it = role ? (binding_ns && *binding_ns
				      ? ks_store_get(&s->store, KS_RBAC_GROUP, "roles", binding_ns, name)
				      : NULL)
			   : ks_store_get(&s->store, KS_RBAC_GROUP, "clusterroles", "", name);
	if (!it) {
		snprintf(err, cap, "%s.rbac.authorization.k8s.io \"%s\" not found", role ? "role" : "clusterrole", name);
		return 0;
	}
	*rules = cJSON_GetObjectItemCaseSensitive(it->obj, "rules");
	return 1;
}

static void describe(const cJSON *b, const cJSON *subj, const char *binding_ns, char *buf, size_t cap)
{
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(b, "roleRef");
	const char *kind = sget(subj, "kind"), *name = sget(subj, "name"), *sns = sget(subj, "namespace");
	char who[600];
	if (kind && strcmp(kind, "ServiceAccount") == 0)
		snprintf(who, sizeof(who), "%s \"%s/%s\"", kind, name ? name : "", sns && *sns ? sns : binding_ns);
	else
		snprintf(who, sizeof(who), "%s \"%s\"", kind ? kind : "", name ? name : "");
	const char *bname = ks_meta_str(b, "name");
	if (*binding_ns)
		snprintf(buf, cap, "RoleBinding \"%s/%s\" of %s \"%s\" to %s", bname ? bname : "", binding_ns,
			 sget(ref, "kind") ? sget(ref, "kind") : "", sget(ref, "name") ? sget(ref, "name") : "", who);
	else
		snprintf(buf, cap, "ClusterRoleBinding \"%s\" of %s \"%s\" to %s", bname ? bname : "",
			 sget(ref, "kind") ? sget(ref, "kind") : "", sget(ref, "name") ? sget(ref, "name") : "", who);
}

/* Visits the rules of one bucket's bindings that apply to u; 0 when fn stopped. */
static int visit_bucket(ks_server *s, const ks_user *u, const char *resource, const char *ns, ks_rule_fn fn,
			void *ctx)
{
	ks_bucket *b = ks_store_bucket(&s->store, KS_RBAC_GROUP, resource, 0);
	for (int i = 0; b && i < b->n; i++) {
		ks_item *it = &b->items[i];
		if (strcmp(it->ns, ns) != 0)
			continue;
		const cJSON *subj = NULL, *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(it->obj, "subjects")) {
			if (ks_rbac_subject_applies(x, u, ns)) {
				subj = x;
				break;
			}
		}
		if (!subj)
			continue;
		const cJSON *rules, *r;
		char err[600];
		if (!ks_authz_role_rules(s, cJSON_GetObjectItemCaseSensitive(it->obj, "roleRef"), ns, &rules, err, sizeof(err))) {
			if (!fn(ctx, NULL, NULL, err))
				return 0;
			continue;
		}
		char src[1200];
		describe(it->obj, subj, ns, src, sizeof(src));
		cJSON_ArrayForEach(r, rules) {
			if (!fn(ctx, src, r, NULL))
				return 0;
		}
	}
	return 1;
}

void ks_authz_visit(ks_server *s, const ks_user *u, const char *ns, ks_rule_fn fn, void *ctx)
{
	if (visit_bucket(s, u, "clusterrolebindings", "", fn, ctx) && ns && *ns)
		visit_bucket(s, u, "rolebindings", ns, fn, ctx);
}

/* Resolution errors, joined as utilerrors.NewAggregate prints them. */
typedef struct errs {
	char buf[1024];
	int n;
} errs;

static void errs_add(errs *e, const char *msg)
{
	size_t l = strlen(e->buf);
	snprintf(e->buf + l, sizeof(e->buf) - l, "%s%s", e->n ? ", " : "", msg);
	e->n++;
}

static void errs_text(const errs *e, char *out, size_t cap, const char *prefix)
{
	if (!e->n)
		snprintf(out, cap, "%s", "");
	else
		snprintf(out, cap, "%s%s%s%s", prefix, e->n > 1 ? "[" : "", e->buf, e->n > 1 ? "]" : "");
}

typedef struct allow_ctx {
	const ks_attrs *a;
	int allowed;
	char src[1200];
	errs e;
} allow_ctx;

static int allow_visit(void *ctx, const char *source, const cJSON *rule, const char *err)
{
	allow_ctx *c = ctx;
	if (rule && ks_rbac_rule_allows(rule, c->a)) {
		c->allowed = 1;
		snprintf(c->src, sizeof(c->src), "%s", source);
		return 0;
	}
	if (err)
		errs_add(&c->e, err);
	return 1;
}

int ks_authz_allowed(ks_server *s, const ks_user *u, const ks_attrs *a, char *reason, size_t cap)
{
	if (ks_user_in_group(u, "system:masters")) {
		snprintf(reason, cap, "%s", "");
		return 1;
	}
	allow_ctx c = { .a = a };
	ks_authz_visit(s, u, a->ns, allow_visit, &c);
	if (c.allowed)
		snprintf(reason, cap, "RBAC: allowed by %s", c.src);
	else
		errs_text(&c.e, reason, cap, "RBAC: ");
	return c.allowed;
}

typedef struct acc_ctx {
	cJSON *rules;
	int oom;
	errs e;
} acc_ctx;

static int acc_visit(void *ctx, const char *source, const cJSON *rule, const char *err)
{
	acc_ctx *c = ctx;
	(void)source;
	if (rule) {
		cJSON *d = cJSON_Duplicate(rule, 1);
		if (!d || !cJSON_AddItemToArray(c->rules, d)) {
			cJSON_Delete(d);
			c->oom = 1;
			return 0;
		}
	}
	if (err)
		errs_add(&c->e, err);
	return 1;
}

cJSON *ks_authz_rules_for(ks_server *s, const ks_user *u, const char *ns, char *errs_out, size_t cap)
{
	acc_ctx c = { .rules = cJSON_CreateArray() };
	if (!c.rules)
		return NULL;
	ks_authz_visit(s, u, ns, acc_visit, &c);
	if (c.oom) {
		cJSON_Delete(c.rules);
		return NULL;
	}
	errs_text(&c.e, errs_out, cap, "");
	return c.rules;
}

/* ---- the record ------------------------------------------------------------------ */

/* mu held */
static void keep_denial(ks_server *s, const char *denial)
{
	struct ks_auth *x = s->auth;
	x->denied++;
	snprintf(x->denials[x->ndenials++ % KS_DENIALS_KEPT], sizeof(x->denials[0]), "%s", denial);
}

void ks_authz_note_denial(ks_server *s, const char *denial)
{
	pthread_mutex_lock(&s->mu);
	if (s->auth)
		keep_denial(s, denial);
	pthread_mutex_unlock(&s->mu);
	GK_INFO("RBAC: forbidden: %s", denial);
}

static void record(ks_server *s, const ks_user *u, const ks_attrs *a, int allowed, const char *denial)
{
	struct ks_auth *x = s->auth;
	if (!x)
		return;
	if (allowed)
		x->allowed++;
	else
		keep_denial(s, denial);
	char res[200];
	if (a->resource_request)
		snprintf(res, sizeof(res), "%s%s%s", a->resource, a->sub[0] ? "/" : "", a->sub);
	else
		snprintf(res, sizeof(res), "%.199s", a->path);
	for (int i = 0; i < x->nrec; i++) {
		ks_rec *e = &x->rec[i];
		if (e->allowed == allowed && strcmp(e->user, u->name) == 0 && strcmp(e->verb, a->verb) == 0 &&
		    strcmp(e->group, a->group) == 0 && strcmp(e->resource, res) == 0 && strcmp(e->ns, a->ns) == 0) {
			e->n++;
			return;
		}
	}
	if (x->nrec >= KS_REC_MAX) {
		x->dropped++;
		return;
	}
	ks_rec *e = &x->rec[x->nrec++];
	snprintf(e->user, sizeof(e->user), "%s", u->name);
	snprintf(e->verb, sizeof(e->verb), "%s", a->verb);
	snprintf(e->group, sizeof(e->group), "%s", a->group);
	snprintf(e->resource, sizeof(e->resource), "%s", res);
	snprintf(e->ns, sizeof(e->ns), "%s", a->ns);
	e->allowed = allowed;
	e->n = 1;
}

/* ---- the hooks ----------------------------------------------------------------- */

static int health(const char *p)
{
	return strcmp(p, "/healthz") == 0 || strcmp(p, "/livez") == 0 || strcmp(p, "/readyz") == 0;
}

int ks_auth_request(ks_server *s, const ks_req *r, const struct ks_route *rt, ks_user *u, ks_resp *out)
{
	if (ks_authenticate(s, r->auth, u)) {
		if (!s->rbac && health(r->path)) { /* as kubesim always did */
			memset(u, 0, sizeof(*u));
			snprintf(u->name, sizeof(u->name), "system:anonymous");
			return 0;
		}
		ks_resp_status(out, 401, "Unauthorized", NULL, NULL, NULL, NULL, "Unauthorized");
		return 401;
	}
	if (!s->rbac || strncmp(r->path, "/kubesim/", 9) == 0)
		return 0;
	ks_attrs a;
	ks_rbac_attrs(r, rt, &a);
	char reason[1100], denial[1100] = "";
	pthread_mutex_lock(&s->mu);
	int ok = ks_authz_allowed(s, u, &a, reason, sizeof(reason));
	if (!ok)
		ks_rbac_denial(u, &a, denial, sizeof(denial));
	if (!ks_user_in_group(u, "system:masters"))
		record(s, u, &a, ok, denial);
	pthread_mutex_unlock(&s->mu);
	if (ok)
		return 0;
	GK_INFO("RBAC: forbidden: %s%s%s", denial, reason[0] ? ": " : "", reason);
	ks_rbac_forbid(out, u, &a, reason);
	return 403;
}

int ks_auth_serve(ks_server *s, const ks_req *r, const struct ks_route *rt, const ks_user *u, ks_resp *out)
{
	if (strcmp(r->path, "/kubesim/rbac") == 0 && strcmp(r->method, "GET") == 0) {
		ks_resp_json(out, 200, ks_authz_record_json(s));
		return 1;
	}
	if (rt->kind != KS_ROUTE_RESOURCE || strcmp(r->method, "POST") != 0)
		return 0;
	if (!rt->group[0] && strcmp(rt->resource, "serviceaccounts") == 0 && rt->ns[0] && rt->name[0] &&
	    strcmp(rt->sub, "token") == 0) {
		ks_token_request(s, r, rt->ns, rt->name, out);
		return 1;
	}
	static const struct {
		const char *group, *resource, *kind;
	} reviews[] = {
		{ "authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview" },
		{ "authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview" },
		{ "authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview" },
		{ "authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview" },
		{ "authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview" },
	};
	for (size_t i = 0; i < sizeof(reviews) / sizeof(reviews[0]); i++)
		if (strcmp(rt->group, reviews[i].group) == 0 && strcmp(rt->resource, reviews[i].resource) == 0 &&
		    !rt->name[0]) {
			ks_authz_review(s, r, reviews[i].kind, rt->ns, u, out);
			return 1;
		}
	return 0;
}

/* ---- start and stop -------------------------------------------------------------- */

static const char *const BOOTSTRAP[] = {
	"{\"kind\":\"ClusterRole\",\"metadata\":{\"name\":\"cluster-admin\"},\"rules\":["
	"{\"apiGroups\":[\"*\"],\"resources\":[\"*\"],\"verbs\":[\"*\"]},"
	"{\"nonResourceURLs\":[\"*\"],\"verbs\":[\"*\"]}]}",
	"{\"kind\":\"ClusterRole\",\"metadata\":{\"name\":\"system:discovery\"},\"rules\":["
	"{\"nonResourceURLs\":[\"/api\",\"/api/*\",\"/apis\",\"/apis/*\",\"/healthz\",\"/livez\",\"/openapi\","
	"\"/openapi/*\",\"/readyz\",\"/version\",\"/version/\"],\"verbs\":[\"get\"]}]}",
	"{\"kind\":\"ClusterRole\",\"metadata\":{\"name\":\"system:public-info-viewer\"},\"rules\":["
	"{\"nonResourceURLs\":[\"/healthz\",\"/livez\",\"/readyz\",\"/version\",\"/version/\"],\"verbs\":[\"get\"]}]}",
	"{\"kind\":\"ClusterRole\",\"metadata\":{\"name\":\"system:basic-user\"},\"rules\":["
	"{\"apiGroups\":[\"authorization.k8s.io\"],\"resources\":[\"selfsubjectaccessreviews\","
	"\"selfsubjectrulesreviews\"],\"verbs\":[\"create\"]},"
	"{\"apiGroups\":[\"authentication.k8s.io\"],\"resources\":[\"selfsubjectreviews\"],\"verbs\":[\"create\"]}]}",
	"{\"kind\":\"ClusterRoleBinding\",\"metadata\":{\"name\":\"cluster-admin\"},\"roleRef\":{\"apiGroup\":"
	"\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"cluster-admin\"},\"subjects\":["
	"{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Group\",\"name\":\"system:masters\"}]}",
	"{\"kind\":\"ClusterRoleBinding\",\"metadata\":{\"name\":\"system:discovery\"},\"roleRef\":{\"apiGroup\":"
	"\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"system:discovery\"},\"subjects\":["
	"{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Group\",\"name\":\"system:authenticated\"}]}",
	"{\"kind\":\"ClusterRoleBinding\",\"metadata\":{\"name\":\"system:public-info-viewer\"},\"roleRef\":{"
	"\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"system:public-info-viewer\"},"
	"\"subjects\":[{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Group\",\"name\":\"system:authenticated\"},"
	"{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Group\",\"name\":\"system:unauthenticated\"}]}",
	"{\"kind\":\"ClusterRoleBinding\",\"metadata\":{\"name\":\"system:basic-user\"},\"roleRef\":{\"apiGroup\":"
	"\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"system:basic-user\"},\"subjects\":["
	"{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Group\",\"name\":\"system:authenticated\"}]}",
};

/* mu held (or before the server runs). */
static int bootstrap(ks_server *s)
{
	for (size_t i = 0; i < sizeof(BOOTSTRAP) / sizeof(BOOTSTRAP[0]); i++) {
		cJSON *o = cJSON_Parse(BOOTSTRAP[i]);
		if (!o)
			return GK_RESOURCE_EXHAUSTED;
		const char *kind = sget(o, "kind");
		const char *res = strcmp(kind, "ClusterRole") == 0 ? "clusterroles" : "clusterrolebindings";
		cJSON *m = ks_meta(o);
		char name[128], uid[40], ts[40];
		snprintf(name, sizeof(name), "%s", ks_meta_str(o, "name"));
		if (ks_store_get(&s->store, KS_RBAC_GROUP, res, "", name)) {
			cJSON_Delete(o);
			continue;
		}
		ks_new_uid(s, uid, sizeof(uid));
		ks_now_rfc3339(ts, sizeof(ts));
		cJSON *labels = m ? cJSON_AddObjectToObject(m, "labels") : NULL;
		cJSON *ann = m ? cJSON_AddObjectToObject(m, "annotations") : NULL;
		if (!labels || !ann || !cJSON_AddStringToObject(o, "apiVersion", "rbac.authorization.k8s.io/v1") ||
		    !cJSON_AddStringToObject(m, "uid", uid) || !cJSON_AddStringToObject(m, "creationTimestamp", ts) ||
		    !cJSON_AddStringToObject(labels, "kubernetes.io/bootstrapping", "rbac-defaults") ||
		    !cJSON_AddStringToObject(ann, "rbac.authorization.kubernetes.io/autoupdate", "true") ||
		    ks_store_put(&s->store, KS_RBAC_GROUP, res, "", name, o)) {
			cJSON_Delete(o);
			return GK_RESOURCE_EXHAUSTED;
		}
	}
	return 0;
}

int ks_auth_init(ks_server *s, const char *token_auth_file, const char *state_dir, gk_err *err)
{
	if (!s->auth && !(s->auth = calloc(1, sizeof(*s->auth))))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	int rc = ks_satoken_key_init(s, state_dir, err);
	if (!rc && token_auth_file)
		rc = ks_users_load(s, token_auth_file, err);
	if (!rc && s->rbac) {
		pthread_mutex_lock(&s->mu);
		rc = bootstrap(s);
		pthread_mutex_unlock(&s->mu);
		if (rc)
			gk_err_set(err, rc, "out of memory");
	}
	return rc;
}

void ks_auth_free(ks_server *s)
{
	if (!s->auth)
		return;
	for (int i = 0; i < s->auth->nusers; i++)
		free(s->auth->users[i].token);
	free(s->auth->users);
	free(s->auth);
	s->auth = NULL;
}
