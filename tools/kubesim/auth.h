/* kubesim — authentication and authorization internals (auth.c, satoken.c, authz.c,
 * authzapi.c). */
#ifndef KUBESIM_AUTH_H
#define KUBESIM_AUTH_H

#include <stdint.h>

#include "kubesim.h"
#include "rbac.h"

/* What the RBAC authorizer saw, per (user, verb, resource, namespace): the tests'
 * proof that a service made only the calls its rules allow. Bounded. */
#define KS_REC_MAX 1024
typedef struct ks_rec {
	char user[256], verb[32], group[128], resource[200], ns[256];
	int allowed;
	uint64_t n;
} ks_rec;

#define KS_DENIALS_KEPT 32

typedef struct ks_static_user {
	char *token;
	ks_user u;
} ks_static_user;

struct ks_auth {
	unsigned char key[32]; /* HMAC-SHA256 key of the ServiceAccount tokens */
	ks_static_user *users; /* --token-auth-file */
	int nusers;
	ks_rec rec[KS_REC_MAX];
	int nrec;
	uint64_t allowed, denied, dropped;
	char denials[KS_DENIALS_KEPT][1100]; /* the last 403 messages, a ring */
	int ndenials;
};

/* auth.c: a ServiceAccount token or a --token-auth-file token: 0 and *u, else -1. */
int ks_token_user(ks_server *s, const char *tok, ks_user *u);
int ks_users_load(ks_server *s, const char *path, gk_err *err);

/* satoken.c: ServiceAccount tokens, JWTs signed with HS256 by the server's key.
 * verify: 0 and *u when tok is one whose ServiceAccount (and bound pod or node)
 * still exists and that has not expired, else -1. Takes mu. */
int ks_satoken_verify(ks_server *s, const char *tok, ks_user *u);
/* The same for the audiences `want` (an array of strings; NULL: the API server's):
 * the token's aud claim must share one; the shared ones are added to `matched`
 * (an array, may be NULL). */
int ks_satoken_verify_for(ks_server *s, const char *tok, const cJSON *want, ks_user *u, cJSON *matched);
int ks_satoken_key_init(ks_server *s, const char *state_dir, gk_err *err);
/* POST .../serviceaccounts/NAME/token (TokenRequest). */
void ks_token_request(ks_server *s, const ks_req *r, const char *ns, const char *name, ks_resp *out);

/* authz.c (mu held): the rules that apply to u in ns ("" = cluster-wide only), as
 * the API server's rule resolver visits them. fn returns 0 to stop. source is
 * "ClusterRoleBinding \"b\" of ClusterRole \"r\" to ServiceAccount \"n/ns\"", or
 * NULL with err set for a binding whose role is missing. */
typedef int (*ks_rule_fn)(void *ctx, const char *source, const cJSON *rule, const char *err);
void ks_authz_visit(ks_server *s, const ks_user *u, const char *ns, ks_rule_fn fn, void *ctx);
/* mu held: the rules of a roleRef seen from a binding in binding_ns ("" for a
 * ClusterRoleBinding): 1 (*rules may be NULL: none), or 0 with err set (missing). */
int ks_authz_role_rules(ks_server *s, const cJSON *ref, const char *binding_ns, const cJSON **rules, char *err,
			size_t cap);
/* The decision (mu held): 1 allowed, 0 denied. reason: "RBAC: allowed by ..." or
 * the resolution errors of a denial (may be ""). */
int ks_authz_allowed(ks_server *s, const ks_user *u, const ks_attrs *a, char *reason, size_t cap);
/* RulesFor (mu held): a new JSON array of the rules; resolution errors joined into errs. */
cJSON *ks_authz_rules_for(ks_server *s, const ks_user *u, const char *ns, char *errs, size_t cap);

/* The body of a review or token request, JSON or protobuf (k8spb.c); NULL with
 * *out set (400) when it is neither. An empty body is an empty object. */
cJSON *ks_auth_body(const ks_req *r, ks_resp *out);

/* A 403 decided outside the authorizer (admission): kept with the others. Takes mu. */
void ks_authz_note_denial(ks_server *s, const char *denial);

/* authzapi.c: a user as the review APIs' userInfo / user (username, uid, groups,
 * extra); a new object, NULL on OOM. */
cJSON *ks_user_info_json(const ks_user *u);
/* authzapi.c: the review APIs ks_auth_serve answers. */
void ks_authz_review(ks_server *s, const ks_req *r, const char *kind, const char *ns, const ks_user *u,
		     ks_resp *out);
cJSON *ks_authz_record_json(ks_server *s);

#endif
