/* kubesim — /openapi/v2 as the protobuf document (gnostic openapi.v2.Document)
 * that kubectl <= 1.28 downloads before `apply`/`create` with the default
 * --validate=strict. Those versions ask it whether the server supports the
 * fieldValidation query parameter for a kind (a PATCH operation tagged with the
 * kind's x-kubernetes-group-version-kind that lists a fieldValidation parameter;
 * custom resources count as supported when Namespace is) and then leave
 * validation to the server (kubesim validates CRD schemas under
 * fieldValidation=Strict). Without the document they stop with "the server could
 * not find the requested resource". Definitions are left empty: no client-side
 * schema validation is wanted when the server does it.
 *
 * Field numbers are those of OpenAPIv2.proto (google/gnostic): Document{swagger=1,
 * info=2, paths=8}, Info{title=1, version=2}, Paths{path=2}, NamedPathItem{name=1,
 * value=2}, PathItem{patch=8}, Operation{operation_id=5, parameters=8,
 * vendor_extension=13}, ParametersItem{parameter=1}, Parameter{non_body_parameter=2},
 * NonBodyParameter{query_parameter_sub_schema=3}, QueryParameterSubSchema{in=2,
 * description=3, name=4, type=6}, NamedAny{name=1, value=2}, Any{yaml=2}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim.h"

typedef struct pb {
	unsigned char *b;
	size_t n, cap;
	int oom;
} pb;

static void put(pb *p, const void *d, size_t n)
{
	if (p->oom)
		return;
	if (p->n + n > p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 256;
		while (nc < p->n + n)
			nc *= 2;
		unsigned char *nb = realloc(p->b, nc);
		if (!nb) {
			p->oom = 1;
			return;
		}
		p->b = nb;
		p->cap = nc;
	}
	memcpy(p->b + p->n, d, n);
	p->n += n;
}

static void varint(pb *p, uint64_t v)
{
	unsigned char t[10];
	size_t n = 0;
	do {
		t[n] = v & 0x7f;
		v >>= 7;
		if (v)
			t[n] |= 0x80;
		n++;
	} while (v);
	put(p, t, n);
}

/* length-delimited field (wire type 2) */
static void bytes(pb *p, int field, const void *d, size_t n)
{
	varint(p, ((uint64_t)field << 3) | 2);
	varint(p, n);
	put(p, d, n);
}

static void str(pb *p, int field, const char *s)
{
	bytes(p, field, s, strlen(s));
}

/* Appends sub as a length-delimited field and frees it. */
static void msg(pb *p, int field, pb *sub)
{
	if (sub->oom)
		p->oom = 1;
	else
		bytes(p, field, sub->b, sub->n);
	free(sub->b);
	memset(sub, 0, sizeof(*sub));
}

static void query_param(pb *op, const char *name, const char *type, const char *desc)
{
	pb q = { 0 }, nbp = { 0 }, par = { 0 }, item = { 0 };
	str(&q, 2, "query");
	str(&q, 3, desc);
	str(&q, 4, name);
	str(&q, 6, type);
	msg(&nbp, 3, &q);
	msg(&par, 2, &nbp);
	msg(&item, 1, &par);
	msg(op, 8, &item);
}

static void path_item(pb *paths, const ks_rtype *t)
{
	char path[512], yaml[512], opid[256];
	if (t->group[0])
		snprintf(path, sizeof(path), "/apis/%s/%s/%s%s/{name}", t->group, t->version,
			 t->namespaced ? "namespaces/{namespace}/" : "", t->resource);
	else
		snprintf(path, sizeof(path), "/api/%s/%s%s/{name}", t->version, t->namespaced ? "namespaces/{namespace}/" : "",
			 t->resource);
	snprintf(yaml, sizeof(yaml), "group: \"%s\"\nkind: %s\nversion: %s\n", t->group, t->kind, t->version);
	snprintf(opid, sizeof(opid), "patch%s%s", t->namespaced ? "Namespaced" : "", t->kind);
	pb op = { 0 }, any = { 0 }, ext = { 0 }, item = { 0 }, named = { 0 };
	str(&op, 5, opid);
	query_param(&op, "dryRun", "string", "When present, indicates that modifications should not be persisted.");
	query_param(&op, "fieldManager", "string", "fieldManager is a name associated with the actor or entity that is making these changes.");
	query_param(&op, "fieldValidation", "string",
		    "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields.");
	query_param(&op, "force", "boolean", "Force is going to \"force\" Apply requests.");
	str(&any, 2, yaml);
	str(&ext, 1, "x-kubernetes-group-version-kind");
	msg(&ext, 2, &any);
	msg(&op, 13, &ext);
	msg(&item, 8, &op);
	str(&named, 1, path);
	msg(&named, 2, &item);
	msg(paths, 2, &named);
}

unsigned char *ks_openapi_v2_pb(ks_server *s, size_t *len)
{
	pb doc = { 0 }, info = { 0 }, paths = { 0 };
	str(&doc, 1, "2.0");
	str(&info, 1, "Kubernetes");
	str(&info, 2, "v1.32.0");
	msg(&doc, 2, &info);
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->reg.n; i++) {
		const ks_rtype *t = s->reg.v[i];
		if (!t->is_crd) /* custom resources: kubectl goes by Namespace + the CRD list */
			path_item(&paths, t);
	}
	pthread_mutex_unlock(&s->mu);
	msg(&doc, 8, &paths);
	put(&doc, "", 1); /* a NUL after the document, not counted */
	if (doc.oom) {
		free(doc.b);
		return NULL;
	}
	*len = doc.n - 1;
	return doc.b;
}
