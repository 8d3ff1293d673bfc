/* gpukmm-certd — the API objects (see objects.h). */
#include "objects.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/https.h"
#include "gpukmm/kube.h"

char *cd_b64(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	if (out)
		EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
	return out;
}

/* The decoded text of a base64 value; NULL when it is not base64 (or empty). */
static char *unb64(const char *s)
{
	size_t n = strlen(s);
	if (!n || n % 4 || n > (4u << 20))
		return NULL;
	unsigned char *out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	int len = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
	if (len < 0) {
		free(out);
		return NULL;
	}
	len -= (s[n - 1] == '=') + (s[n - 2] == '=');
	if (memchr(out, 0, (size_t)len)) { /* a PEM text has no NUL */
		OPENSSL_cleanse(out, (size_t)len);
		free(out);
		return NULL;
	}
	out[len] = 0;
	return (char *)out;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *sub(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static void rv_of(const cJSON *obj, char *rv, size_t cap)
{
	const char *v = str(sub(obj, "metadata"), "resourceVersion");
	snprintf(rv, cap, "%s", v ? v : "");
}

void cd_secret_obj_free(cd_secret_obj *o)
{
	for (size_t i = 0; i < sizeof(o->own) / sizeof(o->own[0]); i++) {
		if (o->own[i])
			OPENSSL_cleanse(o->own[i], strlen(o->own[i]));
		free(o->own[i]);
	}
	memset(o, 0, sizeof(*o));
}

int cd_secret_read(cd_secret_obj *o, const cJSON *obj, gk_err *err)
{
	memset(o, 0, sizeof(*o));
	if (!obj)
		return 0;
	const char *kind = str(obj, "kind");
	if (!cJSON_IsObject(obj) || (kind && strcmp(kind, "Secret") != 0))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "the answer is not a Secret");
	o->s.exists = true;
	rv_of(obj, o->rv, sizeof(o->rv));
	const cJSON *ann = sub(sub(obj, "metadata"), "annotations");
	const char *m = str(ann, CD_MANAGED_BY);
	/* ours: our annotation, and not cert-manager's Secret (which keeps the
	 * annotations of the Secret it took over) */
	o->s.ours = m && strcmp(m, CD_MANAGER) == 0 && !str(ann, CD_CM_CERT);
	const char *t;
	if ((t = str(ann, CD_PUBLISHED)) && gk_kube_time_parse(t) > 0)
		o->s.published = gk_kube_time_parse(t);
	if ((t = str(ann, CD_SWITCHED)) && gk_kube_time_parse(t) > 0)
		o->s.switched = gk_kube_time_parse(t);
	static const char *const keys[] = { "tls.crt", "tls.key", "ca.crt", "next.crt", "next.key" };
	const char **dst[] = { &o->s.tls_crt, &o->s.tls_key, &o->s.ca_crt, &o->s.next_crt, &o->s.next_key };
	const cJSON *data = sub(obj, "data");
	for (size_t i = 0; i < 5; i++) {
		const char *v = str(data, keys[i]);
		if (v && (o->own[i] = unb64(v)))
			*dst[i] = o->own[i];
	}
	return 0;
}

void cd_conf_obj_free(cd_conf_obj *o)
{
	cJSON_Delete(o->webhooks);
	memset(o, 0, sizeof(*o));
}

/* Does the (base64) caBundle hold a CA that issued crt? */
static bool bundle_trusts(const char *cab, const char *crt)
{
	char *pem = crt ? unb64(cab) : NULL, *v[CD_MAX_CAS];
	size_t n = pem ? gk_tls_pem_split(pem, v, CD_MAX_CAS) : 0;
	bool yes = false;
	for (size_t i = 0; i < n; i++) {
		yes = yes || gk_tls_cert_issued_by(crt, v[i]);
		free(v[i]);
	}
	free(pem);
	return yes;
}

int cd_conf_read(cd_conf_obj *o, const char *name, const cJSON *obj, const char *ca_crt, const char *tls_crt,
		 gk_err *err)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->c.name = o->name;
	if (!obj)
		return 0;
	const cJSON *whs = sub(obj, "webhooks");
	if (!cJSON_IsObject(obj) || (whs && !cJSON_IsArray(whs)))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: the answer is not a webhook configuration", name);
	o->c.exists = true;
	rv_of(obj, o->rv, sizeof(o->rv));
	const cJSON *ann = sub(sub(obj, "metadata"), "annotations");
	o->c.injected = str(ann, CD_CM_INJECT) || str(ann, CD_CM_INJECT_SECRET);
	if (!(o->webhooks = cJSON_CreateArray()))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	char *want = ca_crt ? cd_b64(ca_crt) : NULL;
	if (ca_crt && !want)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	o->c.current = want != NULL;
	o->c.trusts = tls_crt != NULL;
	const cJSON *w;
	cJSON_ArrayForEach(w, whs) {
		const char *n = str(w, "name");
		const char *cab = str(sub(w, "clientConfig"), "caBundle");
		if (!cJSON_AddItemToArray(o->webhooks, cJSON_CreateString(n ? n : ""))) {
			free(want);
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		}
		if (!want || !cab || strcmp(cab, want) != 0)
			o->c.current = false;
		if (o->c.trusts && (!cab || !bundle_trusts(cab, tls_crt)))
			o->c.trusts = false;
	}
	free(want);
	return 0;
}

static cJSON *op(cJSON *ops, const char *what, const char *path, const char *value)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !cJSON_AddItemToArray(ops, o)) {
		cJSON_Delete(o);
		return NULL;
	}
	return cJSON_AddStringToObject(o, "op", what) && cJSON_AddStringToObject(o, "path", path) &&
			       cJSON_AddStringToObject(o, "value", value)
		       ? o
		       : NULL;
}

char *cd_conf_patch(const cd_conf_obj *o, const char *ca_crt)
{
	char *b = cd_b64(ca_crt), *out = NULL;
	cJSON *ops = cJSON_CreateArray();
	if (!b || !ops || !op(ops, "test", "/metadata/resourceVersion", o->rv))
		goto done;
	int i = 0;
	const cJSON *n;
	cJSON_ArrayForEach(n, o->webhooks) {
		char path[96];
		snprintf(path, sizeof(path), "/webhooks/%d/name", i);
		if (!op(ops, "test", path, n->valuestring))
			goto done;
		snprintf(path, sizeof(path), "/webhooks/%d/clientConfig/caBundle", i++);
		if (!op(ops, "add", path, b))
			goto done;
	}
	out = cJSON_PrintUnformatted(ops);
done:
	free(b);
	cJSON_Delete(ops);
	return out;
}

void cd_material_free(cd_material *m)
{
	free(m->ca);
	free(m->crt);
	gk_tls_free_secret(m->key);
	memset(m, 0, sizeof(*m));
}

int cd_make(const cd_cfg *c, int64_t now, cd_material *m, gk_err *err)
{
	memset(m, 0, sizeof(*m));
	char *ca_key = NULL, cn[160];
	/* valid from a little before now (clocks differ), the CA a little longer than its pair */
	snprintf(cn, sizeof(cn), "gpukmm-webhook-ca@%lld", (long long)now);
	const gk_tls_issue ca = { .cn = cn, .ca = true, .not_before = now - 300,
				  .not_after = now + c->validity_s + 60 };
	int rc = gk_tls_issue_cert(&ca, &m->ca, &ca_key, err);
	if (rc)
		return rc;
	const gk_tls_issue leaf = { .cn = c->cn, .sans = c->dns, .n_sans = c->n_dns, .not_before = now - 300,
				    .not_after = now + c->validity_s, .issuer_cert = m->ca, .issuer_key = ca_key };
	rc = gk_tls_issue_cert(&leaf, &m->crt, &m->key, err);
	gk_tls_free_secret(ca_key);
	if (rc)
		cd_material_free(m);
	return rc;
}

/* data[k] = base64(v) in the patch; v NULL = remove the key */
static bool put(cJSON *data, const char *k, const char *v)
{
	if (!v)
		return cJSON_AddNullToObject(data, k) != NULL;
	char *b = cd_b64(v);
	bool ok = b && cJSON_AddStringToObject(data, k, b);
	if (b)
		OPENSSL_cleanse(b, strlen(b));
	free(b);
	return ok;
}

char *cd_secret_patch(const cd_secret_obj *o, const cd_plan *p, const cd_material *m, int64_t now)
{
	char ts[GK_KUBE_TIME_LEN];
	gk_kube_time(ts, sizeof(ts), now);
	cJSON *root = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(root, "metadata");
	cJSON *ann = md ? cJSON_AddObjectToObject(md, "annotations") : NULL;
	cJSON *data = cJSON_AddObjectToObject(root, "data");
	bool ok = ann && data && cJSON_AddStringToObject(md, "resourceVersion", o->rv);
	switch (p->act) {
	case CD_ISSUE:
		ok = ok && put(data, "tls.crt", m->crt) && put(data, "tls.key", m->key) && put(data, "ca.crt", m->ca) &&
		     put(data, "next.crt", NULL) && put(data, "next.key", NULL) &&
		     cJSON_AddNullToObject(ann, CD_PUBLISHED) && cJSON_AddNullToObject(ann, CD_SWITCHED);
		break;
	case CD_STAGE: {
		size_t n = strlen(p->bundle ? p->bundle : "") + strlen(m->ca) + 1;
		char *bundle = malloc(n);
		if (bundle)
			snprintf(bundle, n, "%s%s", p->bundle ? p->bundle : "", m->ca);
		ok = ok && bundle && put(data, "next.crt", m->crt) && put(data, "next.key", m->key) &&
		     put(data, "ca.crt", bundle) && cJSON_AddNullToObject(ann, CD_PUBLISHED) &&
		     cJSON_AddNullToObject(ann, CD_SWITCHED);
		free(bundle);
		break;
	}
	case CD_MARK:
		ok = ok && cJSON_AddStringToObject(ann, CD_PUBLISHED, ts);
		break;
	case CD_SWITCH:
		ok = ok && put(data, "tls.crt", o->s.next_crt) && put(data, "tls.key", o->s.next_key) &&
		     put(data, "next.crt", NULL) && put(data, "next.key", NULL) &&
		     cJSON_AddNullToObject(ann, CD_PUBLISHED) && cJSON_AddStringToObject(ann, CD_SWITCHED, ts);
		break;
	case CD_PRUNE:
		ok = ok && p->bundle && put(data, "ca.crt", p->bundle) && cJSON_AddNullToObject(ann, CD_SWITCHED);
		break;
	default:
		ok = false;
	}
	char *out = ok ? cJSON_PrintUnformatted(root) : NULL;
	/* the patch text may hold a key: the tree's copy is wiped */
	cJSON *d;
	cJSON_ArrayForEach(d, data) if (cJSON_IsString(d)) OPENSSL_cleanse(d->valuestring, strlen(d->valuestring));
	cJSON_Delete(root);
	return out;
}
