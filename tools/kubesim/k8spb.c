/* kubesim — Kubernetes protobuf envelope decoding (see k8spb.h). */
#include "k8spb.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct rd {
	const unsigned char *p, *end;
};

static int varint(struct rd *r, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end)
			return -1;
		unsigned char b = *r->p++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

/* Next field: number, wire type; for length-delimited also the bytes. */
static int field(struct rd *r, int *num, int *wt, struct rd *sub, uint64_t *val)
{
	uint64_t key;
	if (varint(r, &key))
		return -1;
	*num = (int)(key >> 3);
	*wt = (int)(key & 7);
	switch (*wt) {
	case 0:
		return varint(r, val);
	case 2: {
		uint64_t n;
		if (varint(r, &n) || n > (uint64_t)(r->end - r->p))
			return -1;
		sub->p = r->p;
		sub->end = r->p + n;
		r->p += n;
		return 0;
	}
	case 1:
		if (r->end - r->p < 8)
			return -1;
		r->p += 8;
		return 0;
	case 5:
		if (r->end - r->p < 4)
			return -1;
		r->p += 4;
		return 0;
	default:
		return -1;
	}
}

static char *str(const struct rd *s)
{
	size_t n = (size_t)(s->end - s->p);
	char *c = malloc(n + 1);
	if (c) {
		memcpy(c, s->p, n);
		c[n] = 0;
	}
	return c;
}

static char *b64(const struct rd *s)
{
	size_t n = (size_t)(s->end - s->p);
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	if (out)
		EVP_EncodeBlock((unsigned char *)out, s->p, (int)n);
	return out;
}

/* map<string,string> (or bytes -> base64) entry into obj */
static int map_entry(cJSON *obj, struct rd *e, int bytes)
{
	char *k = NULL, *v = NULL;
	while (e->p < e->end) {
		int num, wt;
		struct rd sub;
		uint64_t val;
		if (field(e, &num, &wt, &sub, &val))
			goto bad;
		if (wt != 2)
			continue;
		if (num == 1) {
			free(k);
			k = str(&sub);
		} else if (num == 2) {
			free(v);
			v = bytes ? b64(&sub) : str(&sub);
		}
	}
	if (!k)
		goto bad;
	cJSON_DeleteItemFromObjectCaseSensitive(obj, k);
	cJSON_AddStringToObject(obj, k, v ? v : "");
	free(k);
	free(v);
	return 0;
bad:
	free(k);
	free(v);
	return -1;
}

static cJSON *sub_obj(cJSON *o, const char *k)
{
	cJSON *c = cJSON_GetObjectItemCaseSensitive(o, k);
	return c ? c : cJSON_AddObjectToObject(o, k);
}

static int meta(cJSON *m, struct rd *r)
{
	while (r->p < r->end) {
		int num, wt;
		struct rd sub;
		uint64_t val;
		if (field(r, &num, &wt, &sub, &val))
			return -1;
		if (wt != 2)
			continue;
		const char *names[] = { NULL, "name", "generateName", "namespace" };
		if (num >= 1 && num <= 3) {
			char *s = str(&sub);
			if (s && *s)
				cJSON_AddStringToObject(m, names[num], s);
			free(s);
		} else if (num == 11 || num == 12) {
			if (map_entry(sub_obj(m, num == 11 ? "labels" : "annotations"), &sub, 0))
				return -1;
		}
	}
	return 0;
}

/* ---- the review and token APIs: decoded by a field table ------------------- */

typedef struct pbf {
	int num;
	const char *name;
	char type; /* 's' string, 'S' repeated string, 'i' int64, 'm' message, 'M' repeated message */
	const struct pbf *sub;
} pbf;

static const pbf RES_ATTRS[] = { { 1, "namespace", 's', NULL }, { 2, "verb", 's', NULL }, { 3, "group", 's', NULL },
				 { 4, "version", 's', NULL },	{ 5, "resource", 's', NULL }, { 6, "subresource", 's', NULL },
				 { 7, "name", 's', NULL },	{ 0, NULL, 0, NULL } };
static const pbf NONRES_ATTRS[] = { { 1, "path", 's', NULL }, { 2, "verb", 's', NULL }, { 0, NULL, 0, NULL } };
static const pbf SAR_SPEC[] = { { 1, "resourceAttributes", 'm', RES_ATTRS },
				{ 2, "nonResourceAttributes", 'm', NONRES_ATTRS },
				{ 3, "user", 's', NULL },
				{ 4, "groups", 'S', NULL },
				{ 6, "uid", 's', NULL },
				{ 0, NULL, 0, NULL } };
static const pbf SSRR_SPEC[] = { { 1, "namespace", 's', NULL }, { 0, NULL, 0, NULL } };
static const pbf BOUND_REF[] = { { 1, "kind", 's', NULL }, { 2, "apiVersion", 's', NULL }, { 3, "name", 's', NULL },
				 { 4, "uid", 's', NULL },  { 0, NULL, 0, NULL } };
static const pbf TOKEN_SPEC[] = { { 1, "audiences", 'S', NULL },
				  { 3, "boundObjectRef", 'm', BOUND_REF },
				  { 4, "expirationSeconds", 'i', NULL },
				  { 0, NULL, 0, NULL } };

static const pbf SUBJECT[] = { { 1, "kind", 's', NULL }, { 2, "apiGroup", 's', NULL }, { 3, "name", 's', NULL },
			       { 4, "namespace", 's', NULL }, { 0, NULL, 0, NULL } };
static const pbf ROLE_REF[] = { { 1, "apiGroup", 's', NULL }, { 2, "kind", 's', NULL }, { 3, "name", 's', NULL },
				{ 0, NULL, 0, NULL } };
static const pbf RULE[] = { { 1, "verbs", 'S', NULL },	       { 2, "apiGroups", 'S', NULL },
			    { 3, "resources", 'S', NULL },     { 4, "resourceNames", 'S', NULL },
			    { 5, "nonResourceURLs", 'S', NULL }, { 0, NULL, 0, NULL } };

/* Top-level fields after metadata (field 1) of each kind. */
static const pbf REVIEW[] = { { 2, "spec", 'm', SAR_SPEC }, { 0, NULL, 0, NULL } };
static const pbf RULES_REVIEW[] = { { 2, "spec", 'm', SSRR_SPEC }, { 0, NULL, 0, NULL } };
static const pbf TOKEN[] = { { 2, "spec", 'm', TOKEN_SPEC }, { 0, NULL, 0, NULL } };
static const pbf NOTHING[] = { { 0, NULL, 0, NULL } };
static const pbf BINDING[] = { { 2, "subjects", 'M', SUBJECT }, { 3, "roleRef", 'm', ROLE_REF }, { 0, NULL, 0, NULL } };
static const pbf ROLE[] = { { 2, "rules", 'M', RULE }, { 0, NULL, 0, NULL } };

static const struct {
	const char *api_version, *kind;
	const pbf *fields;
} TABLED[] = {
	{ "authorization.k8s.io/v1", "SelfSubjectAccessReview", REVIEW },
	{ "authorization.k8s.io/v1", "SubjectAccessReview", REVIEW },
	{ "authorization.k8s.io/v1", "LocalSubjectAccessReview", REVIEW },
	{ "authorization.k8s.io/v1", "SelfSubjectRulesReview", RULES_REVIEW },
	{ "authentication.k8s.io/v1", "SelfSubjectReview", NOTHING },
	{ "authentication.k8s.io/v1", "TokenRequest", TOKEN },
	{ "rbac.authorization.k8s.io/v1", "RoleBinding", BINDING },
	{ "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", BINDING },
	{ "rbac.authorization.k8s.io/v1", "Role", ROLE },
	{ "rbac.authorization.k8s.io/v1", "ClusterRole", ROLE },
};

static int tabled(cJSON *o, struct rd *r, const pbf *t)
{
	while (r->p < r->end) {
		int num, wt;
		struct rd sub;
		uint64_t val;
		if (field(r, &num, &wt, &sub, &val))
			return -1;
		const pbf *f = t;
		while (f->num && f->num != num)
			f++;
		if (!f->num)
			continue;
		if (f->type == 'i' && wt == 0) {
			cJSON_DeleteItemFromObjectCaseSensitive(o, f->name);
			cJSON_AddNumberToObject(o, f->name, (double)(int64_t)val);
		} else if (wt == 2 && (f->type == 's' || f->type == 'S')) {
			char *v = str(&sub);
			if (!v)
				return -1;
			cJSON *arr = f->type == 'S' ? cJSON_GetObjectItemCaseSensitive(o, f->name) : NULL;
			if (f->type == 'S' && !arr)
				arr = cJSON_AddArrayToObject(o, f->name);
			if (f->type == 'S')
				cJSON_AddItemToArray(arr, cJSON_CreateString(v));
			else {
				cJSON_DeleteItemFromObjectCaseSensitive(o, f->name);
				cJSON_AddStringToObject(o, f->name, v);
			}
			free(v);
		} else if (wt == 2 && f->type == 'm') {
			cJSON *c = sub_obj(o, f->name);
			if (!c || tabled(c, &sub, f->sub))
				return -1;
		} else if (wt == 2 && f->type == 'M') {
			cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, f->name);
			if (!arr)
				arr = cJSON_AddArrayToObject(o, f->name);
			cJSON *c = cJSON_CreateObject();
			if (!arr || !c || !cJSON_AddItemToArray(arr, c)) {
				cJSON_Delete(c);
				return -1;
			}
			if (tabled(c, &sub, f->sub))
				return -1;
		}
	}
	return 0;
}

/* The kinds of TABLED: metadata and their fields; NULL when kind is not one of them. */
static cJSON *decode_tabled(const char *apiv, const char *kind, struct rd raw, int *bad)
{
	*bad = 0;
	for (size_t i = 0; i < sizeof(TABLED) / sizeof(TABLED[0]); i++) {
		if (strcmp(apiv, TABLED[i].api_version) || strcmp(kind, TABLED[i].kind))
			continue;
		cJSON *o = cJSON_CreateObject();
		cJSON *m = o ? cJSON_AddObjectToObject(o, "metadata") : NULL;
		if (!m || !cJSON_AddStringToObject(o, "apiVersion", apiv) || !cJSON_AddStringToObject(o, "kind", kind)) {
			cJSON_Delete(o);
			*bad = 1;
			return NULL;
		}
		struct rd rest = raw;
		while (raw.p < raw.end) {
			int num, wt;
			struct rd sub;
			uint64_t val;
			if (field(&raw, &num, &wt, &sub, &val) || (wt == 2 && num == 1 && meta(m, &sub))) {
				cJSON_Delete(o);
				*bad = 1;
				return NULL;
			}
		}
		if (tabled(o, &rest, TABLED[i].fields)) { /* the other fields (metadata: not in the table) */
			cJSON_Delete(o);
			*bad = 1;
			return NULL;
		}
		return o;
	}
	return NULL;
}

cJSON *ks_k8spb_decode(const unsigned char *buf, size_t len, gk_err *err)
{
	if (len < 4 || memcmp(buf, "k8s\0", 4) != 0) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "protobuf body without the k8s envelope");
		return NULL;
	}
	struct rd r = { buf + 4, buf + len }, raw = { NULL, NULL };
	char *apiv = NULL, *kind = NULL;
	while (r.p < r.end) {
		int num, wt;
		struct rd sub;
		uint64_t val;
		if (field(&r, &num, &wt, &sub, &val))
			goto bad;
		if (num == 1 && wt == 2) {
			while (sub.p < sub.end) {
				int n2, w2;
				struct rd s2;
				if (field(&sub, &n2, &w2, &s2, &val))
					goto bad;
				if (w2 == 2 && n2 == 1) {
					free(apiv);
					apiv = str(&s2);
				} else if (w2 == 2 && n2 == 2) {
					free(kind);
					kind = str(&s2);
				}
			}
		} else if (num == 2 && wt == 2) {
			raw = sub;
		}
	}
	if (!kind || !apiv || !raw.p)
		goto bad;
	int bad_tabled;
	cJSON *t = decode_tabled(apiv, kind, raw, &bad_tabled);
	if (t || bad_tabled) {
		free(apiv);
		free(kind);
		if (!t)
			gk_err_set(err, GK_INVALID_ARGUMENT, "malformed protobuf body");
		return t;
	}
	int k = strcmp(kind, "Namespace") == 0 ? 1 : strcmp(kind, "ConfigMap") == 0 ? 2
					     : strcmp(kind, "Secret") == 0	   ? 3
					     : strcmp(kind, "ServiceAccount") == 0 ? 4
										   : 0;
	if (!k || strcmp(apiv, "v1") != 0) {
		gk_err_set(err, GK_UNIMPLEMENTED, "protobuf bodies of %s %s are not supported; send JSON", apiv, kind);
		free(apiv);
		free(kind);
		return NULL;
	}
	cJSON *o = cJSON_CreateObject();
	if (!o)
		goto bad;
	cJSON_AddStringToObject(o, "apiVersion", apiv);
	cJSON_AddStringToObject(o, "kind", kind);
	cJSON *m = cJSON_AddObjectToObject(o, "metadata");
	while (raw.p < raw.end) {
		int num, wt;
		struct rd sub;
		uint64_t val;
		if (field(&raw, &num, &wt, &sub, &val))
			goto bad_o;
		if (num == 1 && wt == 2) {
			if (meta(m, &sub))
				goto bad_o;
		} else if (k == 2 && wt == 2 && (num == 2 || num == 3)) {
			if (map_entry(sub_obj(o, num == 2 ? "data" : "binaryData"), &sub, num == 3))
				goto bad_o;
		} else if (k == 3 && wt == 2 && (num == 2 || num == 4)) {
			if (map_entry(sub_obj(o, num == 2 ? "data" : "stringData"), &sub, num == 2))
				goto bad_o;
		} else if (k == 3 && wt == 2 && num == 3) {
			char *s = str(&sub);
			if (s)
				cJSON_AddStringToObject(o, "type", s);
			free(s);
		} else if ((k == 2 && num == 4) || (k == 3 && num == 5)) {
			if (wt == 0)
				cJSON_AddBoolToObject(o, "immutable", val != 0);
		}
	}
	free(apiv);
	free(kind);
	return o;
bad_o:
	cJSON_Delete(o);
bad:
	free(apiv);
	free(kind);
	gk_err_set(err, GK_INVALID_ARGUMENT, "malformed protobuf body");
	return NULL;
}
