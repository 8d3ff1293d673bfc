/* gpukmm — AccessReview: TokenReview + SubjectAccessReview for /metrics
 * (see include/gpukmm/review.h). */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/review.h"
#include "review.pb-c.h"

void gk_review_key_of(const char *token, gk_review_key *k)
{
	unsigned int n = 0;
	EVP_Digest(token, strlen(token), k->d, &n, EVP_sha256(), NULL);
}

/* ---- verdict cache ------------------------------------------------------------ */

void gk_review_cache_init(gk_review_cache *c, int64_t allow_ttl_ms, int64_t deny_ttl_ms)
{
	memset(c, 0, sizeof(*c));
	c->allow_ttl_ms = allow_ttl_ms > 0 ? allow_ttl_ms : 60000;
	c->deny_ttl_ms = deny_ttl_ms > 0 ? deny_ttl_ms : 10000;
}

enum gk_review_verdict gk_review_cache_get(gk_review_cache *c, const gk_review_key *k, int64_t now_ms)
{
	for (size_t i = 0; i < c->n; i++) {
		if (CRYPTO_memcmp(c->e[i].k.d, k->d, sizeof(k->d)) != 0)
			continue;
		if (c->e[i].expires_ms > now_ms)
			return c->e[i].v;
		c->e[i] = c->e[--c->n];
		return GK_REVIEW_UNKNOWN;
	}
	return GK_REVIEW_UNKNOWN;
}

void gk_review_cache_put(gk_review_cache *c, const gk_review_key *k, enum gk_review_verdict v, int64_t now_ms)
{
	size_t slot = c->n;
	for (size_t i = 0; i < c->n; i++)
		if (CRYPTO_memcmp(c->e[i].k.d, k->d, sizeof(k->d)) == 0 || c->e[i].expires_ms <= now_ms) {
			slot = i;
			break;
		}
	if (slot == GK_REVIEW_MAX) { /* full of live entries: the one expiring first goes */
		slot = 0;
		for (size_t i = 1; i < c->n; i++)
			if (c->e[i].expires_ms < c->e[slot].expires_ms)
				slot = i;
	}
	if (slot == c->n)
		c->n++;
	c->e[slot].k = *k;
	c->e[slot].v = v;
	c->e[slot].expires_ms = now_ms + (v == GK_REVIEW_ALLOWED ? c->allow_ttl_ms : c->deny_ttl_ms);
}

/* ---- the service ------------------------------------------------------------------ */

enum step { S_TOKEN, S_ACCESS, S_DONE, S_FAILED };

typedef struct rv {
	gk_review *r;
	gk_review_key k;          /* of token + verb + path */
	enum step step;
	char verb[16], path[256];
	bool authenticated, allowed;
	char user[256], reason[768];
	int code;                 /* S_FAILED */
	int64_t done_ms;
	gk_kube_call *call;
} rv;

struct gk_review {
	Gpukmm__AccessReview_Service svc;   /* first: the library hands us this pointer */
	gk_kube_mux *mux;
	rv *e[GK_REVIEW_MAX];
	size_t n;
};

static void key_of(const char *token, const char *verb, const char *path, gk_review_key *k)
{
	EVP_MD_CTX *x = EVP_MD_CTX_new();
	unsigned int n = 0;
	if (!x || EVP_DigestInit_ex(x, EVP_sha256(), NULL) != 1 || EVP_DigestUpdate(x, token, strlen(token) + 1) != 1 ||
	    EVP_DigestUpdate(x, verb, strlen(verb) + 1) != 1 || EVP_DigestUpdate(x, path, strlen(path)) != 1 ||
	    EVP_DigestFinal_ex(x, k->d, &n) != 1)
		memset(k->d, 0, sizeof(k->d)); /* cannot happen; never matches a live one by chance */
	EVP_MD_CTX_free(x);
}

static void drop(gk_review *r, size_t i)
{
	rv *v = r->e[i];
	if (v->call)
		gk_kube_call_cancel(v->call);
	free(v);
	r->e[i] = r->e[--r->n];
}

static void expire(gk_review *r, int64_t now)
{
	for (size_t i = 0; i < r->n;)
		if ((r->e[i]->step == S_DONE || r->e[i]->step == S_FAILED) && now - r->e[i]->done_ms > GK_REVIEW_KEEP_MS)
			drop(r, i);
		else
			i++;
}

static void fail(rv *v, int code, const char *what, const gk_err *err)
{
	v->call = NULL;
	v->step = S_FAILED;
	v->code = code ? code : GK_UNAVAILABLE;
	v->done_ms = gk_mono_ms();
	snprintf(v->reason, sizeof(v->reason), "%s: %s", what, err && err->msg[0] ? err->msg : gk_code_name(code));
	GK_WARN("access review: %s", v->reason);
}

static void done(rv *v)
{
	v->call = NULL;
	v->step = S_DONE;
	v->done_ms = gk_mono_ms();
}

static void on_access(void *user, int code, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	rv *v = user;
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(out, "status");
	const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(s, "allowed");
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(s, "reason");
	if (code != GK_OK || !cJSON_IsBool(allowed)) {
		fail(v, code, "SubjectAccessReview", err);
	} else {
		v->allowed = cJSON_IsTrue(allowed);
		snprintf(v->reason, sizeof(v->reason), "%s", cJSON_IsString(reason) ? reason->valuestring : "");
		done(v);
		GK_DEBUG("access review: %s may%s %s %s", v->user, v->allowed ? "" : " not", v->verb, v->path);
	}
	cJSON_Delete(out);
}

static void on_token(void *user, int code, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	rv *v = user;
	v->call = NULL;
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(out, "status");
	const cJSON *auth = cJSON_GetObjectItemCaseSensitive(s, "authenticated");
	if (code != GK_OK || !cJSON_IsObject(s)) {
		fail(v, code, "TokenReview", err);
		cJSON_Delete(out);
		return;
	}
	if (!cJSON_IsTrue(auth)) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "error");
		snprintf(v->reason, sizeof(v->reason), "%s", cJSON_IsString(e) ? e->valuestring : "not authenticated");
		done(v);
		cJSON_Delete(out);
		return;
	}
	v->authenticated = true;
	/* the SubjectAccessReview of the user TokenReview found */
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(s, "user");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(u, "username");
	snprintf(v->user, sizeof(v->user), "%s", cJSON_IsString(name) ? name->valuestring : "");
	cJSON *sar = cJSON_CreateObject(), *spec = cJSON_AddObjectToObject(sar, "spec");
	cJSON_AddStringToObject(sar, "apiVersion", "authorization.k8s.io/v1");
	cJSON_AddStringToObject(sar, "kind", "SubjectAccessReview");
	cJSON_AddStringToObject(spec, "user", v->user);
	static const char *const copy[] = { "uid", "groups", "extra" };
	for (size_t i = 0; i < 3; i++) {
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(u, copy[i]);
		if (f)
			cJSON_AddItemToObject(spec, copy[i], cJSON_Duplicate(f, true));
	}
	cJSON *nra = cJSON_AddObjectToObject(spec, "nonResourceAttributes");
	cJSON_AddStringToObject(nra, "path", v->path);
	cJSON_AddStringToObject(nra, "verb", v->verb);
	cJSON_Delete(out);
	gk_kube_ref ref = { .group = "authorization.k8s.io", .version = "v1", .resource = "subjectaccessreviews" };
	gk_err e = { 0 };
	v->step = S_ACCESS;
	int rc = nra ? gk_kube_call_create(v->r->mux, &ref, sar, NULL, on_access, v, &v->call, &e)
		     : gk_err_set(&e, GK_RESOURCE_EXHAUSTED, "out of memory");
	cJSON_Delete(sar);
	if (rc != GK_OK)
		fail(v, rc, "SubjectAccessReview", &e);
}

static int start(rv *v, const char *token, gk_err *err)
{
	cJSON *tr = cJSON_CreateObject(), *spec = cJSON_AddObjectToObject(tr, "spec");
	cJSON_AddStringToObject(tr, "apiVersion", "authentication.k8s.io/v1");
	cJSON_AddStringToObject(tr, "kind", "TokenReview");
	cJSON *t = cJSON_AddStringToObject(spec, "token", token);
	gk_kube_ref ref = { .group = "authentication.k8s.io", .version = "v1", .resource = "tokenreviews" };
	int rc = t ? gk_kube_call_create(v->r->mux, &ref, tr, NULL, on_token, v, &v->call, err)
		   : gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	if (t)
		OPENSSL_cleanse(t->valuestring, strlen(t->valuestring));
	cJSON_Delete(tr);
	return rc;
}

static void answer(rv *v, Gpukmm__AccessReviewReply_Closure closure, void *cd)
{
	Gpukmm__AccessReviewReply a = GPUKMM__ACCESS_REVIEW_REPLY__INIT;
	a.has_state = true;
	a.state = v->step == S_DONE ? GPUKMM__REVIEW_STATE__REVIEW_DONE : GPUKMM__REVIEW_STATE__REVIEW_PENDING;
	if (v->step == S_DONE) {
		a.has_authenticated = a.has_allowed = true;
		a.authenticated = v->authenticated;
		a.allowed = v->authenticated && v->allowed;
		a.user = v->user;
		a.reason = v->reason;
	}
	closure(&a, cd);
}

static void h_review(Gpukmm__AccessReview_Service *service, const Gpukmm__AccessReviewRequest *in,
		     Gpukmm__AccessReviewReply_Closure closure, void *cd)
{
	gk_review *r = (gk_review *)service;
	const char *verb = in->verb && *in->verb ? in->verb : "get", *path = in->path ? in->path : "";
	if (!in->token || !*in->token || strlen(in->token) > GK_REVIEW_TOKEN_MAX || path[0] != '/' ||
	    strlen(path) >= sizeof(((rv *)0)->path) || strlen(verb) >= sizeof(((rv *)0)->verb)) {
		gk_ipc_fail(cd, GK_INVALID_ARGUMENT, "a token, a verb and an absolute path are needed");
		return;
	}
	expire(r, gk_mono_ms());
	gk_review_key k;
	key_of(in->token, verb, path, &k);
	for (size_t i = 0; i < r->n; i++) {
		rv *v = r->e[i];
		if (CRYPTO_memcmp(v->k.d, k.d, sizeof(k.d)) != 0)
			continue;
		if (v->step == S_FAILED) {
			int code = v->code;
			char msg[sizeof(v->reason)];
			snprintf(msg, sizeof(msg), "%s", v->reason);
			drop(r, i); /* answered once: the next call tries again */
			gk_ipc_fail(cd, code, "%s", msg);
			return;
		}
		answer(v, closure, cd);
		return;
	}
	if (r->n == GK_REVIEW_MAX) {
		gk_ipc_fail(cd, GK_RESOURCE_EXHAUSTED, "too many reviews in flight");
		return;
	}
	rv *v = calloc(1, sizeof(*v));
	if (!v) {
		gk_ipc_fail(cd, GK_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	v->r = r;
	v->k = k;
	v->step = S_TOKEN;
	snprintf(v->verb, sizeof(v->verb), "%s", verb);
	snprintf(v->path, sizeof(v->path), "%s", path);
	gk_err err = { 0 };
	if (start(v, in->token, &err) != GK_OK) {
		free(v);
		gk_ipc_fail(cd, GK_UNAVAILABLE, "TokenReview: %s", err.msg);
		return;
	}
	r->e[r->n++] = v;
	answer(v, closure, cd);
}

int gk_review_new(gk_review **out, gk_kube_mux *mux, gk_err *err)
{
	gk_review *r = calloc(1, sizeof(*r));
	if (!r)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	Gpukmm__AccessReview_Service init = GPUKMM__ACCESS_REVIEW__INIT(h_);
	r->svc = init;
	r->mux = mux;
	*out = r;
	return 0;
}

ProtobufCService *gk_review_service(gk_review *r)
{
	return &r->svc.base;
}

void gk_review_free(gk_review *r)
{
	if (!r)
		return;
	while (r->n)
		drop(r, 0);
	free(r);
}
