/* kubesim — ServiceAccount tokens (see auth.h).
 *
 * A token is what the API server's TokenRequest hands out: a JWT whose claims name
 * the ServiceAccount (sub system:serviceaccount:NS:NAME, kubernetes.io.namespace /
 * serviceaccount.name+uid), optionally the pod or node it is bound to, and its
 * expiry. kubesim signs with HS256 and a per-server key (32 random bytes, kept in
 * the state directory when there is one, so tokens survive a restart). A token is
 * valid while it has not expired, its ServiceAccount exists with the same uid and,
 * when bound, its pod (same uid) or node exists: deleting the ServiceAccount
 * revokes it, as in a real cluster. The user it names has the groups
 * system:serviceaccounts, system:serviceaccounts:NS and system:authenticated, and
 * the node name of a bound token as its authentication.kubernetes.io/node-name.
 * A token authenticates API requests only when its audiences include the API
 * server's (the issuer URL, what a TokenRequest without audiences gets); a token
 * for another audience is for TokenReview with that audience (tokenreview.c). */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "gpukmm/log.h"

#define ISSUER "https://kubernetes.default.svc.cluster.local"
#define MIN_EXPIRY 600     /* the API server refuses shorter TokenRequests */
#define DEFAULT_EXPIRY 3600
#define MAX_TOKEN 4096

/* ---- base64url (no padding) ---------------------------------------------------- */

static char *b64url(const unsigned char *in, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	if (!out)
		return NULL;
	int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = 0;
	for (int i = 0; i < len; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	return out;
}

/* Decodes n chars of base64url into a new NUL-terminated buffer; *len its length. */
static unsigned char *unb64url(const char *in, size_t n, size_t *len)
{
	if (n % 4 == 1 || n > MAX_TOKEN)
		return NULL;
	size_t pad = (4 - n % 4) % 4;
	char *t = malloc(n + pad + 1);
	unsigned char *out = malloc(3 * ((n + pad) / 4) + 1);
	if (!t || !out) {
		free(t);
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		char c = in[i];
		if (c == '+' || c == '/' || c == '=') {
			free(t);
			free(out);
			return NULL;
		}
		t[i] = c == '-' ? '+' : c == '_' ? '/' : c;
	}
	memset(t + n, '=', pad);
	t[n + pad] = 0;
	int r = EVP_DecodeBlock(out, (const unsigned char *)t, (int)(n + pad));
	free(t);
	if (r < 0) {
		free(out);
		return NULL;
	}
	*len = (size_t)r - pad;
	out[*len] = 0;
	return out;
}

static int sign(const ks_server *s, const char *data, size_t n, unsigned char mac[32])
{
	unsigned int len = 0;
	return HMAC(EVP_sha256(), s->auth->key, sizeof(s->auth->key), (const unsigned char *)data, n, mac, &len) &&
			       len == 32
		       ? 0
		       : -1;
}

/* ---- the key ------------------------------------------------------------------- */

static int read_key(const char *path, unsigned char key[32])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, key, 32);
	close(fd);
	return n == 32 ? 0 : -1;
}

int ks_satoken_key_init(ks_server *s, const char *state_dir, gk_err *err)
{
	char path[4096];
	if (state_dir) {
		snprintf(path, sizeof(path), "%s/serviceaccount-signing.key", state_dir);
		if (read_key(path, s->auth->key) == 0)
			return 0;
	}
	if (getrandom(s->auth->key, sizeof(s->auth->key), 0) != (ssize_t)sizeof(s->auth->key))
		return gk_err_set(err, GK_INTERNAL, "getrandom: %s", strerror(errno));
	if (!state_dir)
		return 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, s->auth->key, sizeof(s->auth->key)) != (ssize_t)sizeof(s->auth->key)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return gk_err_set(err, GK_UNAVAILABLE, "%s: %s", path, strerror(e));
	}
	close(fd);
	return 0;
}

/* ---- mint ---------------------------------------------------------------------- */

typedef struct binding {
	char kind[16], name[256], uid[64]; /* Pod or Node; kind "" = none */
	char node[256], node_uid[64];
} binding;

static char *mint(ks_server *s, const char *ns, const char *name, const char *sa_uid, const binding *b,
		  const cJSON *auds, long long iat, long long exp)
{
	cJSON *c = cJSON_CreateObject(), *k8s = NULL, *sa = NULL;
	char jti[40];
	ks_new_uid(s, jti, sizeof(jti));
	if (c && (cJSON_AddItemToObject(c, "aud", cJSON_Duplicate(auds, 1)), 1) &&
	    cJSON_AddNumberToObject(c, "exp", (double)exp) && cJSON_AddNumberToObject(c, "iat", (double)iat) &&
	    cJSON_AddStringToObject(c, "iss", ISSUER) && cJSON_AddStringToObject(c, "jti", jti) &&
	    (k8s = cJSON_AddObjectToObject(c, "kubernetes.io")) && cJSON_AddStringToObject(k8s, "namespace", ns) &&
	    (sa = cJSON_AddObjectToObject(k8s, "serviceaccount")) && cJSON_AddStringToObject(sa, "name", name) &&
	    cJSON_AddStringToObject(sa, "uid", sa_uid) && cJSON_AddNumberToObject(c, "nbf", (double)iat)) {
		char sub[600];
		snprintf(sub, sizeof(sub), "system:serviceaccount:%s:%s", ns, name);
		cJSON_AddStringToObject(c, "sub", sub);
		if (b->kind[0] && strcmp(b->kind, "Pod") == 0) {
			cJSON *p = cJSON_AddObjectToObject(k8s, "pod");
			if (p) {
				cJSON_AddStringToObject(p, "name", b->name);
				cJSON_AddStringToObject(p, "uid", b->uid);
			}
		}
		if (b->node[0]) {
			cJSON *n = cJSON_AddObjectToObject(k8s, "node");
			if (n) {
				cJSON_AddStringToObject(n, "name", b->node);
				cJSON_AddStringToObject(n, "uid", b->node_uid);
			}
		}
	}
	char *payload = c ? cJSON_PrintUnformatted(c) : NULL;
	cJSON_Delete(c);
	static const char hdr[] = "{\"alg\":\"HS256\",\"kid\":\"kubesim\"}";
	char *h = b64url((const unsigned char *)hdr, strlen(hdr));
	char *p = payload ? b64url((const unsigned char *)payload, strlen(payload)) : NULL;
	free(payload);
	char *tok = NULL;
	if (h && p) {
		size_t n = strlen(h) + strlen(p) + 1;
		char *signing = malloc(n + 1);
		unsigned char mac[32];
		if (signing) {
			snprintf(signing, n + 1, "%s.%s", h, p);
			char *sig = sign(s, signing, n, mac) == 0 ? b64url(mac, sizeof(mac)) : NULL;
			if (sig && (tok = malloc(n + strlen(sig) + 2)))
				snprintf(tok, n + strlen(sig) + 2, "%s.%s", signing, sig);
			free(sig);
			free(signing);
		}
	}
	free(h);
	free(p);
	return tok;
}

static const char *uid_of(const cJSON *o)
{
	const char *u = ks_meta_str(o, "uid");
	return u ? u : "";
}

static void rfc3339(long long t, char *buf, size_t cap)
{
	time_t tt = (time_t)t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* mu held: fills b from the spec's boundObjectRef; 0, or a 4xx with *out set. */
static int bind_to(ks_server *s, const char *ns, const cJSON *ref, binding *b, ks_resp *out)
{
	memset(b, 0, sizeof(*b));
	if (!cJSON_IsObject(ref))
		return 0;
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(ref, "kind"), *n = cJSON_GetObjectItemCaseSensitive(ref, "name");
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(ref, "uid");
	if (!cJSON_IsString(k) || !cJSON_IsString(n) ||
	    (strcmp(k->valuestring, "Pod") && strcmp(k->valuestring, "Node") && strcmp(k->valuestring, "Secret"))) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "cannot bind token to object of kind %s: only Pod, Node and Secret are supported",
			       cJSON_IsString(k) ? k->valuestring : "\"\"");
		return 400;
	}
	if (strcmp(k->valuestring, "Secret") == 0)
		return 0;
	int pod = strcmp(k->valuestring, "Pod") == 0;
	ks_item *it = ks_store_get(&s->store, "", pod ? "pods" : "nodes", pod ? ns : "", n->valuestring);
	if (!it || (cJSON_IsString(u) && u->valuestring[0] && strcmp(u->valuestring, uid_of(it->obj)))) {
		ks_resp_status(out, 404, "NotFound", pod ? "pods" : "nodes", n->valuestring, "", NULL,
			       "%s \"%s\" not found", pod ? "pods" : "nodes", n->valuestring);
		return 404;
	}
	snprintf(b->kind, sizeof(b->kind), "%s", k->valuestring);
	snprintf(b->name, sizeof(b->name), "%s", n->valuestring);
	snprintf(b->uid, sizeof(b->uid), "%s", uid_of(it->obj));
	const char *node = pod ? NULL : n->valuestring;
	if (pod) {
		char buf[256];
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(it->obj, "spec");
		const cJSON *nn = cJSON_GetObjectItemCaseSensitive(spec, "nodeName");
		snprintf(buf, sizeof(buf), "%s", cJSON_IsString(nn) ? nn->valuestring : "");
		node = buf[0] ? buf : NULL;
		if (node) {
			snprintf(b->node, sizeof(b->node), "%s", node);
			ks_item *ni = ks_store_get(&s->store, "", "nodes", "", node);
			snprintf(b->node_uid, sizeof(b->node_uid), "%s", ni ? uid_of(ni->obj) : "");
		}
		return 0;
	}
	snprintf(b->node, sizeof(b->node), "%s", node);
	snprintf(b->node_uid, sizeof(b->node_uid), "%s", b->uid);
	return 0;
}

void ks_token_request(ks_server *s, const ks_req *r, const char *ns, const char *name, ks_resp *out)
{
	cJSON *body = ks_auth_body(r, out);
	if (!body)
		return;
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(body, "spec");
	const cJSON *es = cJSON_GetObjectItemCaseSensitive(spec, "expirationSeconds");
	long long exp_s = cJSON_IsNumber(es) ? (long long)es->valuedouble : DEFAULT_EXPIRY;
	if (exp_s < MIN_EXPIRY) {
		ks_resp_status(out, 422, "Invalid", "TokenRequest", name, "authentication.k8s.io", NULL,
			       "TokenRequest.authentication.k8s.io \"%s\" is invalid: spec.expirationSeconds: Invalid value: "
			       "%lld: may not specify a duration less than 10 minutes",
			       name, exp_s);
		cJSON_Delete(body);
		return;
	}
	cJSON *auds = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(spec, "audiences"), 1);
	if (!cJSON_GetArraySize(auds)) {
		cJSON_Delete(auds);
		const char *d[] = { ISSUER };
		auds = cJSON_CreateStringArray(d, 1);
	}
	pthread_mutex_lock(&s->mu);
	ks_item *it = ks_store_get(&s->store, "", "serviceaccounts", ns, name);
	char sa_uid[64];
	snprintf(sa_uid, sizeof(sa_uid), "%s", it ? uid_of(it->obj) : "");
	binding b;
	int rc = it ? bind_to(s, ns, cJSON_GetObjectItemCaseSensitive(spec, "boundObjectRef"), &b, out) : 404;
	pthread_mutex_unlock(&s->mu);
	if (!it)
		ks_resp_status(out, 404, "NotFound", "serviceaccounts", name, "", NULL, "serviceaccounts \"%s\" not found",
			       name);
	if (rc) {
		cJSON_Delete(auds);
		cJSON_Delete(body);
		return;
	}
	long long now = (long long)time(NULL), exp = now + exp_s;
	char *tok = auds ? mint(s, ns, name, sa_uid, &b, auds, now, exp) : NULL;
	cJSON *resp = cJSON_CreateObject(), *m, *sp, *st;
	char ts[40];
	rfc3339(exp, ts, sizeof(ts));
	if (tok && resp && cJSON_AddStringToObject(resp, "kind", "TokenRequest") &&
	    cJSON_AddStringToObject(resp, "apiVersion", "authentication.k8s.io/v1") &&
	    (m = cJSON_AddObjectToObject(resp, "metadata")) && cJSON_AddStringToObject(m, "name", name) &&
	    cJSON_AddStringToObject(m, "namespace", ns) && (sp = cJSON_AddObjectToObject(resp, "spec")) &&
	    cJSON_AddItemToObject(sp, "audiences", auds) && cJSON_AddNumberToObject(sp, "expirationSeconds", (double)exp_s) &&
	    (st = cJSON_AddObjectToObject(resp, "status")) && cJSON_AddStringToObject(st, "token", tok) &&
	    cJSON_AddStringToObject(st, "expirationTimestamp", ts)) {
		auds = NULL;
		const cJSON *ref = cJSON_GetObjectItemCaseSensitive(spec, "boundObjectRef");
		if (ref)
			cJSON_AddItemToObject(sp, "boundObjectRef", cJSON_Duplicate(ref, 1));
		ks_resp_json(out, 201, resp);
		resp = NULL;
	} else {
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
	}
	cJSON_Delete(resp);
	cJSON_Delete(auds);
	cJSON_Delete(body);
	free(tok);
}

/* ---- verify -------------------------------------------------------------------- */

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* mu held: does the object still exist with this uid? */
static int exists(ks_server *s, const char *resource, const char *ns, const cJSON *claim)
{
	const char *n = str(claim, "name"), *u = str(claim, "uid");
	ks_item *it = n ? ks_store_get(&s->store, "", resource, ns, n) : NULL;
	return it && (!u || !*u || strcmp(u, uid_of(it->obj)) == 0);
}

/* Does the token's aud claim (a string or an array) meet `want` (an array of strings;
 * NULL: the API server's audience)? The common audiences go into `matched`. */
static int audience_ok(const cJSON *aud, const cJSON *want, cJSON *matched)
{
	static const char *const api[] = { ISSUER };
	cJSON *dflt = want ? NULL : cJSON_CreateStringArray(api, 1);
	const cJSON *w, *a, *ws = want ? want : dflt, *as = cJSON_IsArray(aud) ? aud : NULL;
	int ok = 0;
	cJSON_ArrayForEach(w, ws) {
		if (!cJSON_IsString(w))
			continue;
		int hit = cJSON_IsString(aud) && strcmp(aud->valuestring, w->valuestring) == 0;
		cJSON_ArrayForEach(a, as)
			hit |= cJSON_IsString(a) && strcmp(a->valuestring, w->valuestring) == 0;
		if (hit && matched)
			cJSON_AddItemToArray(matched, cJSON_CreateString(w->valuestring));
		ok |= hit;
	}
	cJSON_Delete(dflt);
	return ok;
}

int ks_satoken_verify(ks_server *s, const char *tok, ks_user *u)
{
	return ks_satoken_verify_for(s, tok, NULL, u, NULL);
}

int ks_satoken_verify_for(ks_server *s, const char *tok, const cJSON *want, ks_user *u, cJSON *matched)
{
	if (!s->auth)
		return -1;
	const char *d1 = strchr(tok, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	if (!d2 || strchr(d2 + 1, '.') || strlen(tok) > MAX_TOKEN)
		return -1;
	unsigned char mac[32];
	size_t n = 0;
	unsigned char *sig = unb64url(d2 + 1, strlen(d2 + 1), &n);
	int ok = sig && n == 32 && sign(s, tok, (size_t)(d2 - tok), mac) == 0 && CRYPTO_memcmp(sig, mac, 32) == 0;
	free(sig);
	if (!ok)
		return -1;
	unsigned char *pl = unb64url(d1 + 1, (size_t)(d2 - d1 - 1), &n);
	cJSON *c = pl ? cJSON_ParseWithLength((const char *)pl, n) : NULL;
	free(pl);
	const cJSON *k8s = cJSON_GetObjectItemCaseSensitive(c, "kubernetes.io");
	const cJSON *sa = cJSON_GetObjectItemCaseSensitive(k8s, "serviceaccount");
	const cJSON *pod = cJSON_GetObjectItemCaseSensitive(k8s, "pod"), *node = cJSON_GetObjectItemCaseSensitive(k8s, "node");
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(c, "exp");
	const char *ns = str(k8s, "namespace"), *name = str(sa, "name");
	int rc = -1;
	if (ns && name && cJSON_IsNumber(exp) && exp->valuedouble > (double)time(NULL) &&
	    audience_ok(cJSON_GetObjectItemCaseSensitive(c, "aud"), want, matched)) {
		pthread_mutex_lock(&s->mu);
		int alive = exists(s, "serviceaccounts", ns, sa) && (!pod || exists(s, "pods", ns, pod)) &&
			    (pod || !node || exists(s, "nodes", "", node));
		pthread_mutex_unlock(&s->mu);
		if (alive) {
			memset(u, 0, sizeof(*u));
			snprintf(u->name, sizeof(u->name), "system:serviceaccount:%s:%s", ns, name);
			snprintf(u->uid, sizeof(u->uid), "%s", str(sa, "uid") ? str(sa, "uid") : "");
			snprintf(u->groups[0], sizeof(u->groups[0]), "system:serviceaccounts");
			snprintf(u->groups[1], sizeof(u->groups[1]), "system:serviceaccounts:%s", ns);
			snprintf(u->groups[2], sizeof(u->groups[2]), "system:authenticated");
			u->ngroups = 3;
			if (str(node, "name"))
				snprintf(u->node, sizeof(u->node), "%s", str(node, "name"));
			rc = 0;
		}
	}
	cJSON_Delete(c);
	return rc;
}
