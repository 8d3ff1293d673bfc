/* kubesim — request routing: from a parsed request to a response, no sockets. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "k8spb.h"
#include "gpukmm/log.h"
#include "kubesim.h"
#include "route.h"
#include "selector.h"
#include "gpukmm/yamljson.h"
#include "table.h"
#include "versions.h"
#include "ctrl.h"

static int truthy(const char *v)
{
	return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

static void version(ks_server *s, ks_resp *out)
{
	ks_resp_json(out, 200, ks_version_doc(s));
}

static void text(ks_resp *out, int code, const char *s)
{
	free(out->body);
	out->code = code;
	out->content_type = "text/plain; charset=utf-8";
	out->body = strdup(s);
}

/* ---- list ---------------------------------------------------------------- */
static int b64enc(const char *in, char *out, size_t cap)
{
	static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t n = strlen(in), o = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)(unsigned char)in[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)in[i + 2];
		if (o + 5 >= cap)
			return -1;
		out[o++] = tb[(v >> 18) & 63];
		out[o++] = tb[(v >> 12) & 63];
		if (i + 1 < n)
			out[o++] = tb[(v >> 6) & 63];
		if (i + 2 < n)
			out[o++] = tb[v & 63];
	}
	out[o] = 0;
	return 0;
}

static int b64dec(const char *in, char *out, size_t cap)
{
	uint32_t v = 0;
	int bits = 0;
	size_t o = 0;
	for (const char *p = in; *p; p++) {
		const char *tb = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
		const char *f = strchr(tb, *p);
		if (!f || *p == '=')
			return -1;
		v = (v << 6) | (uint32_t)(f - tb);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o + 1 >= cap)
				return -1;
			out[o++] = (char)((v >> bits) & 0xff);
		}
	}
	out[o] = 0;
	return 0;
}

static void do_list(ks_server *s, const ks_rtype *t, const char *ns, const ks_req *r, ks_resp *out)
{
	ks_selector ls, fs;
	gk_err e = { 0 };
	if (ks_label_selector_parse(ks_req_param(r, "labelSelector"), &ls, &e)) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "%s", e.msg);
		return;
	}
	if (ks_field_selector_parse(ks_req_param(r, "fieldSelector"), &fs, &e)) {
		ks_selector_free(&ls);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "%s", e.msg);
		return;
	}
	const char *lim = ks_req_param(r, "limit");
	long limit = lim ? strtol(lim, NULL, 10) : 0;
	const char *cont = ks_req_param(r, "continue");
	char start_ns[600] = "", start_name[600] = "";
	int have_start = 0;
	if (cont && *cont) {
		char dec[600];
		char *sep;
		if (b64dec(cont, dec, sizeof(dec)) || !(sep = strchr(dec, '\x1f'))) {
			ks_selector_free(&ls);
			ks_selector_free(&fs);
			ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
				       "continue key is not valid: illegal base64 data");
			return;
		}
		*sep = 0;
		snprintf(start_ns, sizeof(start_ns), "%s", dec);
		snprintf(start_name, sizeof(start_name), "%s", sep + 1);
		have_start = 1;
	}
	/* The page is written from each object's stored compact JSON (its blob,
	 * what cJSON_PrintUnformatted of it gives) joined in the list's frame; only
	 * an object stored in another version is converted and printed. A page of
	 * 250 Nodes printed as one cJSON tree spent most of the list's time in the
	 * printer and its growing buffer. Bucket items are sorted by (namespace,
	 * name): a namespace and a continue key start by binary search. */
	char av[256];
	ks_rtype_api_version(t, av, sizeof(av));
	pthread_mutex_lock(&s->mu);
	ks_bucket *b = ks_store_bucket(&s->store, t->group, t->resource, 0);
	int i0 = 0;
	if (b && have_start)
		i0 = ks_store_after(b, start_ns, start_name);
	else if (b && ns && *ns)
		i0 = ks_store_after(b, ns, "");
	long count = 0;
	int more = 0, oom = 0, last = -1;
	size_t cap = 64, n = 0, total = 0;
	struct part { const char *json; size_t len; char *owned; } *parts = malloc(cap * sizeof(*parts));
	oom = !parts;
	for (int i = i0; !oom && b && i < b->n; i++) {
		ks_item *it = &b->items[i];
		if (ns && *ns && strcmp(it->ns, ns) != 0) {
			if (strcmp(it->ns, ns) > 0)
				break; /* past the namespace */
			continue;
		}
		const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(it->obj, "metadata"), "labels");
		if (!ks_label_selector_match(&ls, labels) || !ks_field_selector_match(&fs, it->obj))
			continue;
		if (limit > 0 && count >= limit) {
			more = 1;
			break;
		}
		if (n == cap) {
			struct part *np = realloc(parts, 2 * cap * sizeof(*parts));
			if (!np) {
				oom = 1;
				break;
			}
			parts = np;
			cap *= 2;
		}
		struct part *pt = &parts[n];
		memset(pt, 0, sizeof(*pt));
		const char *iav = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it->obj, "apiVersion"));
		if (iav && strcmp(iav, av) != 0) { /* stored in another version: a converted copy */
			cJSON *c = cJSON_Duplicate(it->obj, 1);
			if (c && ks_conv(c, t->group, t->resource, t->version) == 0)
				pt->owned = cJSON_PrintUnformatted(c);
			cJSON_Delete(c);
			if (!pt->owned)
				continue; /* as before: an object that does not convert is left out */
			pt->json = pt->owned;
		} else if (it->blob && it->blob->json) {
			pt->json = it->blob->json;
			pt->len = it->blob->len;
		} else if (!(pt->json = pt->owned = cJSON_PrintUnformatted(it->obj))) {
			oom = 1;
			break;
		}
		if (!pt->len)
			pt->len = strlen(pt->json);
		total += pt->len + 1;
		n++;
		last = i;
		count++;
	}
	char head[1600], *body = NULL;
	int hl = 0;
	if (!oom) {
		char cont_out[1000] = "";
		if (more && last >= 0) {
			char key[600], enc[900];
			snprintf(key, sizeof(key), "%s\x1f%s", b->items[last].ns, b->items[last].name);
			if (b64enc(key, enc, sizeof(enc)) == 0)
				snprintf(cont_out, sizeof(cont_out), ",\"continue\":\"%s\"", enc);
		}
		hl = snprintf(head, sizeof(head),
			      "{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{\"resourceVersion\":\"%" PRIu64
			      "\"%s},\"items\":[",
			      t->list_kind, av, s->store.rv, cont_out);
		body = hl > 0 && (size_t)hl < sizeof(head) ? malloc((size_t)hl + total + 3) : NULL;
	}
	if (body) {
		char *w = body;
		memcpy(w, head, (size_t)hl);
		w += hl;
		for (size_t k = 0; k < n; k++) {
			if (k)
				*w++ = ',';
			memcpy(w, parts[k].json, parts[k].len);
			w += parts[k].len;
		}
		memcpy(w, "]}", 3);
	}
	pthread_mutex_unlock(&s->mu);
	for (size_t k = 0; parts && k < n; k++)
		free(parts[k].owned);
	free(parts);
	free(out->body);
	out->body = body;
	out->code = body ? 200 : 500;
	out->content_type = "application/json";
	if (!body)
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
	ks_selector_free(&ls);
	ks_selector_free(&fs);
}

static void do_get(ks_server *s, const ks_rtype *t, const char *ns, const char *name, ks_resp *out)
{
	pthread_mutex_lock(&s->mu);
	ks_item *it = ks_store_get(&s->store, t->group, t->resource, t->namespaced ? ns : "", name);
	cJSON *c = it ? cJSON_Duplicate(it->obj, 1) : NULL;
	pthread_mutex_unlock(&s->mu);
	if (c && ks_conv(c, t->group, t->resource, t->version)) {
		cJSON_Delete(c);
		c = NULL;
	}
	if (!it) {
		ks_resp_status(out, 404, "NotFound", t->resource, name, t->group, NULL, "%s%s%s \"%s\" not found",
			       t->resource, t->group[0] ? "." : "", t->group, name);
		return;
	}
	ks_resp_json(out, 200, c);
}

/* Replaces a 200 JSON body (object or list) with its meta.k8s.io/v1 Table. */
static void as_table(const ks_rtype *t, const ks_req *r, ks_resp *out)
{
	cJSON *src = cJSON_Parse(out->body);
	cJSON *tb = src ? ks_table(t, src, ks_req_param(r, "includeObject"), time(NULL)) : NULL;
	cJSON_Delete(src);
	char *b = tb ? cJSON_PrintUnformatted(tb) : NULL;
	cJSON_Delete(tb);
	if (!b) {
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return;
	}
	free(out->body);
	out->body = b;
	out->content_type = "application/json;as=Table;v=v1;g=meta.k8s.io";
}

/* ---- body decoding ------------------------------------------------------- */
static cJSON *decode_body(const ks_req *r, int allow_yaml, ks_resp *out)
{
	if (!r->body || r->body_len == 0) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "the request body is empty");
		return NULL;
	}
	cJSON *j = cJSON_ParseWithLength(r->body, r->body_len);
	if (!j && allow_yaml) {
		gk_err e = { 0 };
		gk_yamljson_docs d = { 0 };
		if (gk_yamljson_parse(r->body, r->body_len, &d, &e)) {
			ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "error decoding YAML: %s", e.msg);
			return NULL;
		}
		if (d.n != 1 || !cJSON_IsObject(d.doc[0])) {
			gk_yamljson_free(&d);
			ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
				       "error decoding YAML: expected exactly one YAML document holding an object");
			return NULL;
		}
		j = d.doc[0];
		d.doc[0] = NULL;
		gk_yamljson_free(&d);
	}
	if (!j)
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "couldn't get version/kind; json parse error: invalid JSON in the request body");
	return j;
}

static void parse_opts(const ks_req *r, ks_opts *o)
{
	memset(o, 0, sizeof(*o));
	const char *dr = ks_req_param(r, "dryRun");
	o->dry_run = dr && strcmp(dr, "All") == 0;
	const char *fv = ks_req_param(r, "fieldValidation");
	o->validation = KS_VALIDATE_WARN;
	if (fv && strcmp(fv, "Strict") == 0)
		o->validation = KS_VALIDATE_STRICT;
	else if (fv && strcmp(fv, "Ignore") == 0)
		o->validation = KS_VALIDATE_IGNORE;
	o->manager = ks_req_param(r, "fieldManager");
	o->force = truthy(ks_req_param(r, "force"));
	o->propagation = ks_req_param(r, "propagationPolicy");
	const char *gp = ks_req_param(r, "gracePeriodSeconds");
	o->grace = gp && *gp ? strtol(gp, NULL, 10) : -1;
	o->user_agent = r->user_agent;
}

/* Default field manager: the user agent's program name, like the API server. */
static void default_manager(const ks_req *r, ks_opts *o, char *buf, size_t cap)
{
	if (o->manager && *o->manager)
		return;
	const char *ua = r->user_agent ? r->user_agent : "unknown";
	size_t n = strcspn(ua, "/ ");
	if (n == 0 || n >= cap) {
		snprintf(buf, cap, "unknown");
	} else {
		memcpy(buf, ua, n);
		buf[n] = 0;
	}
	o->manager = buf;
}

static const char *verb_of(const ks_req *r, const ks_route *rt)
{
	const char *m = r->method;
	if (strcmp(m, "GET") == 0)
		return rt->name[0] ? "get" : ((truthy(ks_req_param(r, "watch")) || rt->watch_prefix) ? "watch" : "list");
	if (strcmp(m, "POST") == 0)
		return "create";
	if (strcmp(m, "PUT") == 0)
		return "update";
	if (strcmp(m, "PATCH") == 0)
		return "patch";
	if (strcmp(m, "DELETE") == 0)
		return rt->name[0] ? "delete" : "deletecollection";
	return "other";
}

static void deletecollection(ks_server *s, const ks_rtype *t, const char *ns, const ks_req *r, const ks_opts *o,
			     ks_resp *out)
{
	ks_selector ls, fs;
	gk_err e = { 0 };
	if (ks_label_selector_parse(ks_req_param(r, "labelSelector"), &ls, &e) ||
	    ks_field_selector_parse(ks_req_param(r, "fieldSelector"), &fs, &e)) {
		ks_selector_free(&ls);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "%s", e.msg);
		return;
	}
	pthread_mutex_lock(&s->mu);
	ks_bucket *b = ks_store_bucket(&s->store, t->group, t->resource, 0);
	int n = 0, cap = b ? b->n : 0;
	char **names = cap ? calloc((size_t)cap, sizeof(char *)) : NULL;
	for (int i = 0; b && names && i < b->n; i++) {
		ks_item *it = &b->items[i];
		if (t->namespaced && ns && *ns && strcmp(it->ns, ns) != 0)
			continue;
		const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(it->obj, "metadata"), "labels");
		if (!ks_label_selector_match(&ls, labels) || !ks_field_selector_match(&fs, it->obj))
			continue;
		names[n] = strdup(it->name);
		if (names[n])
			n++;
	}
	pthread_mutex_unlock(&s->mu);
	ks_selector_free(&ls);
	ks_selector_free(&fs);
	for (int i = 0; i < n; i++) {
		ks_resp one = { 0 };
		ks_api_delete(s, t, ns, names[i], NULL, o, &one);
		ks_resp_free(&one);
		free(names[i]);
	}
	free(names);
	ks_resp_status(out, 200, "", NULL, NULL, NULL, NULL, "deleted %d objects", n);
}

static void count(ks_server *s, const char *verb, const char *resource)
{
	pthread_mutex_lock(&s->mu);
	s->stats.requests++;
	if (ks_verb_is_write(verb))
		s->stats.writes++;
	ks_stats_count(s->stats.req, &s->stats.nreq, verb, resource);
	pthread_mutex_unlock(&s->mu);
}

static void kubesim_endpoints(ks_server *s, const ks_req *r, ks_resp *out)
{
	if (strcmp(r->path, "/kubesim/stats") == 0 && strcmp(r->method, "GET") == 0) {
		pthread_mutex_lock(&s->mu);
		cJSON *j = ks_stats_to_json(&s->stats);
		ks_ctrl_stats(s, j);
		pthread_mutex_unlock(&s->mu);
		ks_resp_json(out, 200, j);
		return;
	}
	if (strcmp(r->path, "/kubesim/faults") == 0 && strcmp(r->method, "GET") == 0) {
		pthread_mutex_lock(&s->mu);
		cJSON *j = ks_faults_to_json(&s->faults);
		pthread_mutex_unlock(&s->mu);
		ks_resp_json(out, 200, j);
		return;
	}
	if (strcmp(r->path, "/kubesim/faults") == 0 && (strcmp(r->method, "PUT") == 0 || strcmp(r->method, "POST") == 0)) {
		cJSON *j = decode_body(r, 0, out);
		if (!j)
			return;
		ks_faults f;
		gk_err e = { 0 };
		if (ks_faults_parse(&f, j, &e)) {
			cJSON_Delete(j);
			ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "faults: %s", e.msg);
			return;
		}
		cJSON_Delete(j);
		pthread_mutex_lock(&s->mu);
		s->faults = f;
		cJSON *echo = ks_faults_to_json(&s->faults);
		pthread_mutex_unlock(&s->mu);
		GK_INFO("faults replaced through the API");
		ks_resp_json(out, 200, echo);
		return;
	}
	if (strcmp(r->path, "/kubesim/compact") == 0 && strcmp(r->method, "POST") == 0) {
		pthread_mutex_lock(&s->mu);
		ks_store_compact(&s->store);
		uint64_t rv = s->store.rv;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->mu);
		ks_resp_status(out, 200, "", NULL, NULL, NULL, NULL, "history compacted at resourceVersion %" PRIu64, rv);
		return;
	}
	ks_resp_status(out, 404, "NotFound", NULL, NULL, NULL, NULL, "the server could not find the requested resource");
}

static int wants_aggregated(const ks_req *r)
{
	return r->accept && strstr(r->accept, "as=APIGroupDiscoveryList") != NULL;
}

static void discovery(ks_server *s, const ks_req *r, const ks_route *rt, ks_resp *out)
{
	int agg = wants_aggregated(r);
	int v2 = r->accept && strstr(r->accept, "g=apidiscovery.k8s.io;v=v2;") != NULL;
	cJSON *j = NULL;
	if (strcmp(r->path, "/api") == 0 || strcmp(r->path, "/api/") == 0)
		j = ks_discovery_api(s, agg);
	else if (strcmp(r->path, "/apis") == 0 || strcmp(r->path, "/apis/") == 0)
		j = ks_discovery_apis(s, agg);
	else if (rt->kind == KS_ROUTE_GV)
		j = ks_discovery_gv(s, rt->group, rt->version);
	else if (rt->kind == KS_ROUTE_GROUP) {
		cJSON *all = ks_discovery_apis(s, 0);
		cJSON *g;
		cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(all, "groups")) {
			const cJSON *n = cJSON_GetObjectItemCaseSensitive(g, "name");
			if (cJSON_IsString(n) && strcmp(n->valuestring, rt->group) == 0) {
				j = cJSON_Duplicate(g, 1);
				if (j) {
					cJSON_AddStringToObject(j, "kind", "APIGroup");
					cJSON_AddStringToObject(j, "apiVersion", "v1");
				}
			}
		}
		cJSON_Delete(all);
	}
	if (!j) {
		ks_resp_status(out, 404, "NotFound", NULL, NULL, NULL, NULL,
			       "the server could not find the requested resource");
		return;
	}
	if (agg && rt->kind == KS_ROUTE_NONE && !v2) {
		/* kubectl <= 1.29 only knows v2beta1: same shape, other apiVersion */
		cJSON_ReplaceItemInObjectCaseSensitive(j, "apiVersion", cJSON_CreateString("apidiscovery.k8s.io/v2beta1"));
	}
	ks_resp_json(out, 200, j);
	if (agg && rt->kind == KS_ROUTE_NONE)
		out->content_type = v2 ? "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
				       : "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
}

/* /openapi/v2 in protobuf only (what kubectl asks for); a client that accepts
 * neither protobuf nor anything gets 406. */
static void openapi_v2(ks_server *s, const ks_req *r, ks_resp *out)
{
	const char *acc = r->accept ? r->accept : "*/*";
	if (!strstr(acc, "protobuf") && !strstr(acc, "*/*")) {
		ks_resp_status(out, 406, "NotAcceptable", NULL, NULL, NULL, NULL,
			       "only application/com.github.proto-openapi.spec.v2@v1.0+protobuf is served");
		return;
	}
	size_t n = 0;
	unsigned char *b = ks_openapi_v2_pb(s, &n);
	if (!b) {
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return;
	}
	out->code = 200;
	out->body = (char *)b;
	out->body_len = n;
	out->content_type = "application/octet-stream"; /* what kube-openapi sends for it */
}

void ks_handle(ks_server *s, const ks_req *r, ks_resp *out)
{
	memset(out, 0, sizeof(*out));
	ks_route rt;
	if (ks_route_parse(r->path, &rt)) {
		count(s, "other", "");
		ks_resp_status(out, 404, "NotFound", NULL, NULL, NULL, NULL,
			       "the server could not find the requested resource");
		return;
	}
	ks_user who; /* authentication, and authorization with --rbac (authz.c) */
	if (ks_auth_request(s, r, &rt, &who, out)) {
		count(s, out->code == 401 ? "unauthorized" : "forbidden", "");
		return;
	}
	if (ks_auth_serve(s, r, &rt, &who, out))
		return;
	if (rt.kind == KS_ROUTE_NONE) {
		count(s, "other", "");
		if (strcmp(r->path, "/version") == 0 || strcmp(r->path, "/version/") == 0)
			version(s, out);
		else if (strcmp(r->path, "/healthz") == 0 || strcmp(r->path, "/readyz") == 0 ||
			 strcmp(r->path, "/livez") == 0)
			text(out, 200, "ok");
		else if (strcmp(r->path, "/openapi/v2") == 0 || strcmp(r->path, "/swagger-2.0.0.pb-v1") == 0)
			openapi_v2(s, r, out);
		else if (strcmp(r->path, "/openapi/v3") == 0 || strcmp(r->path, "/openapi/v3/") == 0)
			ks_resp_json(out, 200, ks_openapi_root(s));
		else if (strncmp(r->path, "/openapi/v3/", 12) == 0) {
			ks_route gv;
			cJSON *doc = NULL;
			if (ks_route_parse(r->path + 11, &gv) == 0 && gv.kind == KS_ROUTE_GV)
				doc = ks_openapi_gv(s, gv.group, gv.version);
			if (doc)
				ks_resp_json(out, 200, doc);
			else
				ks_resp_status(out, 404, "NotFound", NULL, NULL, NULL, NULL, "404 page not found");
		} else if (strncmp(r->path, "/kubesim/", 9) == 0)
			kubesim_endpoints(s, r, out);
		else if (strcmp(r->path, "/api") == 0 || strcmp(r->path, "/apis") == 0 ||
			 strcmp(r->path, "/api/") == 0 || strcmp(r->path, "/apis/") == 0) {
			if (!ks_faults_respond(s, r, "discovery", "", NULL, NULL, NULL, out))
				discovery(s, r, &rt, out);
		}
		else
			ks_resp_status(out, 404, "NotFound", NULL, NULL, NULL, NULL, "404 page not found");
		return;
	}
	if (ks_review_route(s, r, &rt, out)) {
		count(s, "create", rt.resource);
		return;
	}
	if (rt.kind == KS_ROUTE_GV || rt.kind == KS_ROUTE_GROUP) {
		count(s, "discovery", "");
		if (!ks_faults_respond(s, r, "discovery", "", NULL, NULL, NULL, out))
			discovery(s, r, &rt, out);
		return;
	}
	/* a resource */
	pthread_mutex_lock(&s->mu);
	const ks_rtype *t0 = ks_registry_find(&s->reg, rt.group, rt.version, rt.resource);
	/* t0 stays valid after unlocking: types of removed CRDs are retired, never freed,
	 * until the server shuts down (registry.c) */
	pthread_mutex_unlock(&s->mu);
	const char *verb = verb_of(r, &rt);
	count(s, verb, rt.resource);
	if (ks_verb_is_write(verb)) {
		char agent[48], res[80];
		const char *ua = r->user_agent ? r->user_agent : "unknown";
		size_t n = strcspn(ua, "/ ");
		snprintf(agent, sizeof(agent), "%.*s", (int)(n ? n : 7), n ? ua : "unknown");
		snprintf(res, sizeof(res), "%.40s%s%.30s", rt.resource, rt.sub[0] ? "/" : "", rt.sub);
		pthread_mutex_lock(&s->mu);
		ks_stats_count_agent(&s->stats, agent, verb, res);
		pthread_mutex_unlock(&s->mu);
	}
	if (!t0) {
		ks_resp_status(out, 404, "NotFound", NULL, NULL, NULL, NULL,
			       "the server could not find the requested resource");
		return;
	}
	const ks_rtype *t = t0;
	if (ks_faults_respond(s, r, verb, rt.resource, t->resource, rt.name[0] ? rt.name : NULL, t->group, out))
		return;
	if (t->namespaced && !rt.ns[0] && (strcmp(verb, "create") == 0 || rt.name[0])) {
		ks_resp_status(out, 404, "NotFound", NULL, NULL, NULL, NULL,
			       "the server could not find the requested resource");
		return;
	}
	if (!t->namespaced && rt.ns[0]) {
		ks_resp_status(out, 404, "NotFound", NULL, NULL, NULL, NULL,
			       "the server could not find the requested resource");
		return;
	}
	if (strcmp(rt.sub, "eviction") == 0 && !t->group[0] && strcmp(t->resource, "pods") == 0 && rt.ns[0] &&
	    rt.name[0]) {
		if (strcmp(verb, "create") != 0) {
			ks_resp_status(out, 405, "MethodNotAllowed", NULL, NULL, NULL, NULL,
				       "the server does not allow this method on the requested resource");
			return;
		}
		ks_opts eo;
		parse_opts(r, &eo);
		cJSON *b = decode_body(r, 1, out);
		if (b)
			ks_evict(s, t, rt.ns, rt.name, b, &eo, out);
		cJSON_Delete(b);
		return;
	}
	if (rt.sub[0] && !(strcmp(rt.sub, "status") == 0 && t->has_status)) {
		ks_resp_status(out, 404, "NotFound", NULL, NULL, NULL, NULL,
			       "the server could not find the requested resource");
		return;
	}
	int protobuf = r->content_type && strncmp(r->content_type, "application/vnd.kubernetes.protobuf", 35) == 0;
	if (protobuf && strcmp(verb, "create") != 0) {
		ks_resp_status(out, 415, "UnsupportedMediaType", NULL, NULL, NULL, NULL,
			       "the body of the request was in an unknown format - accepted media types include: "
			       "application/json, application/yaml");
		return;
	}
	const char *sub = rt.sub[0] ? rt.sub : NULL;
	const char *ns = rt.ns;
	ks_opts o;
	parse_opts(r, &o);
	o.user = &who;
	char mgr[128];
	default_manager(r, &o, mgr, sizeof(mgr));
	if (strcmp(verb, "get") == 0 || strcmp(verb, "list") == 0) {
		if (verb[0] == 'g')
			do_get(s, t, ns, rt.name, out);
		else
			do_list(s, t, ns, r, out);
		if (out->code == 200 && ks_wants_table(r->accept))
			as_table(t, r, out);
	} else if (strcmp(verb, "watch") == 0) {
		ks_watch_open(s, t, ns, r, out);
	} else if (strcmp(verb, "create") == 0) {
		if (rt.name[0]) {
			ks_resp_status(out, 405, "MethodNotAllowed", NULL, NULL, NULL, NULL,
				       "the server does not allow this method on the requested resource");
			return;
		}
		cJSON *b;
		if (protobuf) {
			/* kubectl create namespace/configmap/secret/serviceaccount send protobuf */
			gk_err e = { 0 };
			b = ks_k8spb_decode((const unsigned char *)r->body, r->body_len, &e);
			if (!b) {
				ks_resp_status(out, 415, "UnsupportedMediaType", NULL, NULL, NULL, NULL, "%s", e.msg);
				return;
			}
		} else {
			b = decode_body(r, 1, out);
		}
		if (b)
			ks_api_create(s, t, ns, b, &o, out);
	} else if (strcmp(verb, "update") == 0) {
		if (!rt.name[0]) {
			ks_resp_status(out, 405, "MethodNotAllowed", NULL, NULL, NULL, NULL,
				       "the server does not allow this method on the requested resource");
			return;
		}
		cJSON *b = decode_body(r, 1, out);
		if (b)
			ks_api_update(s, t, ns, rt.name, sub, b, &o, out);
	} else if (strcmp(verb, "patch") == 0) {
		if (!rt.name[0]) {
			ks_resp_status(out, 405, "MethodNotAllowed", NULL, NULL, NULL, NULL,
				       "the server does not allow this method on the requested resource");
			return;
		}
		const char *ct = r->content_type ? r->content_type : "";
		const char *type = NULL;
		if (strncmp(ct, "application/merge-patch+json", 28) == 0)
			type = "merge";
		else if (strncmp(ct, "application/json-patch+json", 27) == 0)
			type = "json";
		else if (strncmp(ct, "application/strategic-merge-patch+json", 38) == 0)
			type = t->is_crd ? NULL : "strategic";
		else if (strncmp(ct, "application/apply-patch+yaml", 28) == 0)
			type = "apply";
		if (!type) {
			ks_resp_status(out, 415, "UnsupportedMediaType", NULL, NULL, NULL, NULL,
				       "the body of the request was in an unknown format - accepted media types include: "
				       "application/json-patch+json, application/merge-patch+json, "
				       "application/apply-patch+yaml%s",
				       t->is_crd ? "" : ", application/strategic-merge-patch+json");
			return;
		}
		const char *fm = ks_req_param(r, "fieldManager");
		if (strcmp(type, "apply") == 0 && (!fm || !*fm)) {
			ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
				       "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required "
				       "for apply patch");
			return;
		}
		cJSON *b = decode_body(r, strcmp(type, "apply") == 0, out);
		if (b)
			ks_api_patch(s, t, ns, rt.name, sub, type, b, &o, out);
	} else if (strcmp(verb, "delete") == 0) {
		cJSON *b = r->body_len ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
		if (r->body_len && !b) {
			ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "invalid DeleteOptions body");
			return;
		}
		ks_api_delete(s, t, ns, rt.name, b, &o, out);
		cJSON_Delete(b);
	} else if (strcmp(verb, "deletecollection") == 0) {
		deletecollection(s, t, ns, r, &o, out);
	} else {
		ks_resp_status(out, 405, "MethodNotAllowed", NULL, NULL, NULL, NULL,
			       "the server does not allow this method on the requested resource");
	}
}
