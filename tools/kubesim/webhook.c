/* kubesim — admission webhooks: Mutating then Validating WebhookConfigurations, as
 * the API server runs them. Matching (rules, objectSelector, namespaceSelector),
 * AdmissionReview v1 over HTTPS (caBundle verification) or plain http for tests,
 * clientConfig.service mapped to a URL with --service-url, JSONPatch responses,
 * failurePolicy, denial messages like the API server's. Called without srv->mu. */
#include <curl/curl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "gpukmm/log.h"
#include "patch.h"
#include "selector.h"

#define KS_WEBHOOK_MAX_RESPONSE (3u << 20)

struct buf {
	char *p;
	size_t n;
	int overflow;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct buf *b = ud;
	size_t n = size * nmemb;
	if (b->n + n > KS_WEBHOOK_MAX_RESPONSE) {
		b->overflow = 1;
		return 0;
	}
	char *np = realloc(b->p, b->n + n + 1);
	if (!np)
		return 0;
	b->p = np;
	memcpy(b->p + b->n, ptr, n);
	b->n += n;
	b->p[b->n] = 0;
	return n;
}

static int str_in(const cJSON *arr, const char *v)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, arr) {
		if (cJSON_IsString(it) && (strcmp(it->valuestring, "*") == 0 || strcmp(it->valuestring, v) == 0))
			return 1;
	}
	return 0;
}

static int resource_in(const cJSON *arr, const char *res, const char *sub)
{
	char full[300];
	snprintf(full, sizeof(full), "%s/%s", res, sub ? sub : "");
	const cJSON *it;
	cJSON_ArrayForEach(it, arr) {
		if (!cJSON_IsString(it))
			continue;
		const char *r = it->valuestring;
		if (strcmp(r, "*/*") == 0)
			return 1;
		if (!sub && (strcmp(r, "*") == 0 || strcmp(r, res) == 0))
			return 1;
		if (sub && (strcmp(r, full) == 0 || (strncmp(r, "*/", 2) == 0 && strcmp(r + 2, sub) == 0) ||
			    (strncmp(r, res, strlen(res)) == 0 && strcmp(r + strlen(res), "/*") == 0)))
			return 1;
	}
	return 0;
}

static int rules_match(const cJSON *wh, const ks_rtype *t, const char *sub, const char *op)
{
	const cJSON *rule;
	cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(wh, "rules")) {
		const cJSON *scope = cJSON_GetObjectItemCaseSensitive(rule, "scope");
		if (cJSON_IsString(scope) && strcmp(scope->valuestring, "*") != 0 &&
		    strcmp(scope->valuestring, t->namespaced ? "Namespaced" : "Cluster") != 0)
			continue;
		if (str_in(cJSON_GetObjectItemCaseSensitive(rule, "apiGroups"), t->group) &&
		    str_in(cJSON_GetObjectItemCaseSensitive(rule, "apiVersions"), t->version) &&
		    str_in(cJSON_GetObjectItemCaseSensitive(rule, "operations"), op) &&
		    resource_in(cJSON_GetObjectItemCaseSensitive(rule, "resources"), t->resource, sub))
			return 1;
	}
	return 0;
}

/* A metav1.LabelSelector as our selector syntax, then matched. Empty = everything. */
static int label_selector_match(const cJSON *sel, const cJSON *labels)
{
	if (!cJSON_IsObject(sel))
		return 1;
	char s[2048] = "";
	size_t used = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sel, "matchLabels")) {
		if (cJSON_IsString(it) && used < sizeof(s))
			used += (size_t)snprintf(s + used, sizeof(s) - used, "%s%s=%s", used ? "," : "", it->string,
						 it->valuestring);
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sel, "matchExpressions")) {
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(it, "key");
		const cJSON *op = cJSON_GetObjectItemCaseSensitive(it, "operator");
		if (!cJSON_IsString(k) || !cJSON_IsString(op) || used >= sizeof(s))
			return 0;
		const char *o = op->valuestring;
		if (strcmp(o, "Exists") == 0) {
			used += (size_t)snprintf(s + used, sizeof(s) - used, "%s%s", used ? "," : "", k->valuestring);
		} else if (strcmp(o, "DoesNotExist") == 0) {
			used += (size_t)snprintf(s + used, sizeof(s) - used, "%s!%s", used ? "," : "", k->valuestring);
		} else if (strcmp(o, "In") == 0 || strcmp(o, "NotIn") == 0) {
			used += (size_t)snprintf(s + used, sizeof(s) - used, "%s%s %s (", used ? "," : "", k->valuestring,
						 o[0] == 'I' ? "in" : "notin");
			const cJSON *v;
			int first = 1;
			cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(it, "values")) {
				if (cJSON_IsString(v) && used < sizeof(s))
					used += (size_t)snprintf(s + used, sizeof(s) - used, "%s%s", first ? "" : ",",
								 v->valuestring);
				first = 0;
			}
			if (used < sizeof(s))
				used += (size_t)snprintf(s + used, sizeof(s) - used, ")");
		} else {
			return 0;
		}
	}
	ks_selector ls;
	if (ks_label_selector_parse(s, &ls, NULL))
		return 0;
	int m = ks_label_selector_match(&ls, labels);
	ks_selector_free(&ls);
	return m;
}

static const cJSON *labels_of(const cJSON *obj)
{
	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
}

static cJSON *gvr(const char *g, const char *v, const char *k, const char *kv)
{
	cJSON *o = cJSON_CreateObject();
	if (o) {
		cJSON_AddStringToObject(o, "group", g);
		cJSON_AddStringToObject(o, "version", v);
		cJSON_AddStringToObject(o, k, kv);
	}
	return o;
}

static char *review_body(const ks_rtype *t, const char *sub, const char *op, const char *ns, const char *name,
			 const cJSON *obj, const cJSON *old, const ks_opts *o, const char *uid)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "apiVersion", "admission.k8s.io/v1");
	cJSON_AddStringToObject(j, "kind", "AdmissionReview");
	cJSON *r = cJSON_AddObjectToObject(j, "request");
	if (r) {
		cJSON_AddStringToObject(r, "uid", uid);
		cJSON_AddItemToObject(r, "kind", gvr(t->group, t->version, "kind", t->kind));
		cJSON_AddItemToObject(r, "resource", gvr(t->group, t->version, "resource", t->resource));
		if (sub)
			cJSON_AddStringToObject(r, "subResource", sub);
		cJSON_AddItemToObject(r, "requestKind", gvr(t->group, t->version, "kind", t->kind));
		cJSON_AddItemToObject(r, "requestResource", gvr(t->group, t->version, "resource", t->resource));
		if (sub)
			cJSON_AddStringToObject(r, "requestSubResource", sub);
		cJSON_AddStringToObject(r, "name", name ? name : "");
		if (t->namespaced)
			cJSON_AddStringToObject(r, "namespace", ns ? ns : "");
		cJSON_AddStringToObject(r, "operation", op);
		cJSON *ui = cJSON_AddObjectToObject(r, "userInfo");
		if (ui && o->user) { /* who asked (authz.c) */
			const ks_user *u = o->user;
			cJSON_AddStringToObject(ui, "username", u->name);
			if (u->uid[0])
				cJSON_AddStringToObject(ui, "uid", u->uid);
			cJSON *g = cJSON_AddArrayToObject(ui, "groups");
			for (int i = 0; g && i < u->ngroups; i++)
				cJSON_AddItemToArray(g, cJSON_CreateString(u->groups[i]));
			const char *node[] = { u->node };
			cJSON *x = u->node[0] ? cJSON_AddObjectToObject(ui, "extra") : NULL;
			if (x)
				cJSON_AddItemToObject(x, "authentication.kubernetes.io/node-name",
						      cJSON_CreateStringArray(node, 1));
		} else if (ui) {
			cJSON_AddStringToObject(ui, "username", "kubesim-admin");
			const char *groups[] = { "system:masters", "system:authenticated" };
			cJSON_AddItemToObject(ui, "groups", cJSON_CreateStringArray(groups, 2));
		}
		cJSON_AddItemToObject(r, "object", strcmp(op, "DELETE") == 0 ? cJSON_CreateNull() : cJSON_Duplicate(obj, 1));
		cJSON_AddItemToObject(r, "oldObject", old ? cJSON_Duplicate(old, 1) : cJSON_CreateNull());
		cJSON_AddBoolToObject(r, "dryRun", o->dry_run);
		cJSON *opts = cJSON_AddObjectToObject(r, "options");
		if (opts) {
			cJSON_AddStringToObject(opts, "apiVersion", "meta.k8s.io/v1");
			cJSON_AddStringToObject(opts, "kind", strcmp(op, "CREATE") == 0   ? "CreateOptions"
							      : strcmp(op, "UPDATE") == 0 ? "UpdateOptions"
											  : "DeleteOptions");
			if (o->manager && strcmp(op, "DELETE") != 0)
				cJSON_AddStringToObject(opts, "fieldManager", o->manager);
		}
	}
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

static unsigned char *b64dec(const char *in, int *outlen)
{
	size_t n = strlen(in);
	unsigned char *out = malloc(n / 4 * 3 + 4);
	if (!out)
		return NULL;
	int len = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
	if (len < 0) {
		free(out);
		return NULL;
	}
	/* EVP_DecodeBlock counts '=' padding as zero bytes */
	while (n > 0 && in[n - 1] == '=') {
		n--;
		len--;
	}
	*outlen = len;
	return out;
}

/* Resolves clientConfig to a URL (into url); for a --service-addr service, also
 * the connect-to rule that sends NAME.NS.svc:PORT to its address (into to,
 * "" otherwise). */
static int webhook_url(ks_server *s, const cJSON *cc, char *url, size_t cap, char *to, size_t tocap, char *why,
		       size_t whycap)
{
	to[0] = 0;
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(cc, "url");
	if (cJSON_IsString(u)) {
		snprintf(url, cap, "%s", u->valuestring);
		return 0;
	}
	const cJSON *svc = cJSON_GetObjectItemCaseSensitive(cc, "service");
	const cJSON *ns = cJSON_GetObjectItemCaseSensitive(svc, "namespace");
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(svc, "name");
	const cJSON *path = cJSON_GetObjectItemCaseSensitive(svc, "path");
	if (!cJSON_IsString(ns) || !cJSON_IsString(nm)) {
		snprintf(why, whycap, "clientConfig has neither url nor service");
		return -1;
	}
	char key[600];
	snprintf(key, sizeof(key), "%s/%s", ns->valuestring, nm->valuestring);
	for (int i = 0; i < s->nsvc_urls; i++) {
		if (strcmp(s->svc_urls[i].ns_name, key) == 0 && s->svc_urls[i].addr) {
			const cJSON *port = cJSON_GetObjectItemCaseSensitive(svc, "port");
			int pt = cJSON_IsNumber(port) ? port->valueint : 443;
			const char *p = cJSON_IsString(path) ? path->valuestring : "";
			snprintf(url, cap, "https://%s.%s.svc:%d%s%s", nm->valuestring, ns->valuestring, pt,
				 p[0] == '/' || !p[0] ? "" : "/", p);
			snprintf(to, tocap, "%s.%s.svc:%d:%s", nm->valuestring, ns->valuestring, pt, s->svc_urls[i].url);
			return 0;
		}
		if (strcmp(s->svc_urls[i].ns_name, key) == 0) {
			const char *base = s->svc_urls[i].url;
			size_t bl = strlen(base);
			const char *p = cJSON_IsString(path) ? path->valuestring : "";
			snprintf(url, cap, "%.*s%s%s", (int)(bl && base[bl - 1] == '/' && p[0] == '/' ? bl - 1 : bl), base,
				 (p[0] && p[0] != '/' && (!bl || base[bl - 1] != '/')) ? "/" : "", p);
			return 0;
		}
	}
	snprintf(why, whycap, "service \"%.200s\" not found (no --service-url %.200s=URL)", key, key);
	return -1;
}

/* One call. Returns 0 with *resp (the AdmissionReview response object) or -1 with why. */
static int call(ks_server *s, const cJSON *wh, const char *body, cJSON **resp, char *why, size_t whycap)
{
	const cJSON *cc = cJSON_GetObjectItemCaseSensitive(wh, "clientConfig");
	char url[2048], to[1024];
	if (webhook_url(s, cc, url, sizeof(url), to, sizeof(to), why, whycap))
		return -1;
	CURL *c = curl_easy_init();
	if (!c) {
		snprintf(why, whycap, "out of memory");
		return -1;
	}
	struct buf b = { 0 };
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	h = curl_slist_append(h, "Accept: application/json");
	const cJSON *tos = cJSON_GetObjectItemCaseSensitive(wh, "timeoutSeconds");
	long timeout = cJSON_IsNumber(tos) && tos->valuedouble >= 1 && tos->valuedouble <= 30 ? (long)tos->valuedouble : 10;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	struct curl_slist *ct = to[0] ? curl_slist_append(NULL, to) : NULL;
	if (ct)
		curl_easy_setopt(c, CURLOPT_CONNECT_TO, ct);
	unsigned char *ca = NULL;
	const cJSON *cab = cJSON_GetObjectItemCaseSensitive(cc, "caBundle");
	if (cJSON_IsString(cab) && cab->valuestring[0]) {
		int calen = 0;
		ca = b64dec(cab->valuestring, &calen);
		if (!ca) {
			snprintf(why, whycap, "caBundle is not valid base64");
			curl_slist_free_all(h);
			curl_slist_free_all(ct);
			curl_easy_cleanup(c);
			return -1;
		}
		struct curl_blob blob = { ca, (size_t)calen, CURL_BLOB_COPY };
		curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
	}
	CURLcode rc = curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_slist_free_all(ct);
	curl_easy_cleanup(c);
	free(ca);
	if (rc != CURLE_OK) {
		snprintf(why, whycap, "failed to call webhook: Post \"%.600s\": %.200s", url,
			 b.overflow ? "response too large" : curl_easy_strerror(rc));
		free(b.p);
		return -1;
	}
	if (status != 200) {
		snprintf(why, whycap, "failed to call webhook: the server responded with status %ld", status);
		free(b.p);
		return -1;
	}
	cJSON *j = b.p ? cJSON_Parse(b.p) : NULL;
	free(b.p);
	cJSON *r = cJSON_DetachItemFromObjectCaseSensitive(j, "response");
	cJSON_Delete(j);
	if (!cJSON_IsObject(r)) {
		cJSON_Delete(r);
		snprintf(why, whycap, "received invalid webhook response: no response object");
		return -1;
	}
	*resp = r;
	return 0;
}

/* Collects copies of the webhooks of one configuration kind that apply. */
static cJSON *matching(ks_server *s, const char *resource, const ks_rtype *t, const char *sub, const char *op,
		       const char *ns, const cJSON *obj, const cJSON *old)
{
	cJSON *out = cJSON_CreateArray();
	if (!out)
		return NULL;
	pthread_mutex_lock(&s->mu);
	ks_bucket *b = ks_store_bucket(&s->store, "admissionregistration.k8s.io", resource, 0);
	const cJSON *nslabels = NULL;
	if (t->namespaced && ns && *ns) {
		ks_item *ni = ks_store_get(&s->store, "", "namespaces", "", ns);
		nslabels = ni ? labels_of(ni->obj) : NULL;
	}
	for (int i = 0; b && i < b->n; i++) {
		const cJSON *wh;
		cJSON_ArrayForEach(wh, cJSON_GetObjectItemCaseSensitive(b->items[i].obj, "webhooks")) {
			if (!rules_match(wh, t, sub, op))
				continue;
			const cJSON *os = cJSON_GetObjectItemCaseSensitive(wh, "objectSelector");
			if (!label_selector_match(os, labels_of(obj)) && !(old && label_selector_match(os, labels_of(old))))
				continue;
			if (t->namespaced &&
			    !label_selector_match(cJSON_GetObjectItemCaseSensitive(wh, "namespaceSelector"), nslabels))
				continue;
			cJSON *c = cJSON_Duplicate(wh, 1);
			if (c)
				cJSON_AddItemToArray(out, c);
		}
	}
	pthread_mutex_unlock(&s->mu);
	return out;
}

static int run(ks_server *s, int mutating, const ks_rtype *t, const char *sub, const char *op, const char *ns,
	       const char *name, cJSON **obj, const cJSON *old, const ks_opts *o, ks_resp *out)
{
	cJSON *hooks = matching(s, mutating ? "mutatingwebhookconfigurations" : "validatingwebhookconfigurations", t,
				sub, op, ns, *obj, old);
	if (!hooks) {
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return -1;
	}
	const cJSON *wh;
	int rc = 0;
	cJSON_ArrayForEach(wh, hooks) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(wh, "name");
		const char *hname = cJSON_IsString(nm) ? nm->valuestring : "";
		const cJSON *fp = cJSON_GetObjectItemCaseSensitive(wh, "failurePolicy");
		int ignore = cJSON_IsString(fp) && strcmp(fp->valuestring, "Ignore") == 0;
		char uid[40], why[1024] = "";
		ks_new_uid(s, uid, sizeof(uid));
		char *body = review_body(t, sub, op, ns, name, *obj, old, o, uid);
		cJSON *resp = NULL;
		if (!body || call(s, wh, body, &resp, why, sizeof(why))) {
			free(body);
			if (ignore) {
				GK_WARN("webhook %s failed (ignored by failurePolicy): %s", hname, why);
				continue;
			}
			ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL,
				       "Internal error occurred: failed calling webhook \"%s\": %s", hname, why);
			rc = -1;
			break;
		}
		free(body);
		const cJSON *ruid = cJSON_GetObjectItemCaseSensitive(resp, "uid");
		if (!cJSON_IsString(ruid) || strcmp(ruid->valuestring, uid) != 0) {
			cJSON_Delete(resp);
			if (ignore)
				continue;
			ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL,
				       "Internal error occurred: failed calling webhook \"%s\": expected response.uid=\"%s\"",
				       hname, uid);
			rc = -1;
			break;
		}
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed"))) {
			const cJSON *st = cJSON_GetObjectItemCaseSensitive(resp, "status");
			const cJSON *msg = cJSON_GetObjectItemCaseSensitive(st, "message");
			const cJSON *reason = cJSON_GetObjectItemCaseSensitive(st, "reason");
			const cJSON *code = cJSON_GetObjectItemCaseSensitive(st, "code");
			int c = cJSON_IsNumber(code) && code->valueint >= 400 && code->valueint < 600 ? code->valueint : 400;
			const char *rsn = cJSON_IsString(reason) && reason->valuestring[0] ? reason->valuestring
					  : c == 403					     ? "Forbidden"
											     : "BadRequest";
			if (cJSON_IsString(msg) && msg->valuestring[0])
				ks_resp_status(out, c, rsn, NULL, NULL, NULL, NULL,
					       "admission webhook \"%s\" denied the request: %s", hname, msg->valuestring);
			else if (cJSON_IsString(reason) && reason->valuestring[0])
				ks_resp_status(out, c, rsn, NULL, NULL, NULL, NULL,
					       "admission webhook \"%s\" denied the request: %s", hname, reason->valuestring);
			else
				ks_resp_status(out, c, rsn, NULL, NULL, NULL, NULL,
					       "admission webhook \"%s\" denied the request without explanation", hname);
			cJSON_Delete(resp);
			rc = -1;
			break;
		}
		const cJSON *warns = cJSON_GetObjectItemCaseSensitive(resp, "warnings");
		const cJSON *w;
		cJSON_ArrayForEach(w, warns) {
			size_t used = strlen(out->warning);
			if (cJSON_IsString(w) && used + strlen(w->valuestring) + 2 < sizeof(out->warning))
				snprintf(out->warning + used, sizeof(out->warning) - used, "%s%s", used ? "\n" : "",
					 w->valuestring);
		}
		const cJSON *patch = cJSON_GetObjectItemCaseSensitive(resp, "patch");
		if (mutating && cJSON_IsString(patch) && strcmp(op, "DELETE") != 0) {
			int plen = 0;
			unsigned char *raw = b64dec(patch->valuestring, &plen);
			cJSON *ops = raw ? cJSON_ParseWithLength((const char *)raw, (size_t)plen) : NULL;
			free(raw);
			gk_err e = { 0 };
			cJSON *np = ops ? ks_json_patch(cJSON_Duplicate(*obj, 1), ops, &e) : NULL;
			cJSON_Delete(ops);
			if (!np) {
				cJSON_Delete(resp);
				ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL,
					       "Internal error occurred: failed calling webhook \"%s\": invalid patch: %s",
					       hname, e.msg[0] ? e.msg : "not a base64 JSON patch");
				rc = -1;
				break;
			}
			cJSON_Delete(*obj);
			*obj = np;
		}
		cJSON_Delete(resp);
	}
	cJSON_Delete(hooks);
	return rc;
}

int ks_admit(ks_server *s, const ks_rtype *t, const char *sub, const char *op, const char *ns, const char *name,
	     cJSON **obj, const cJSON *old, const ks_opts *o, ks_resp *out)
{
	/* like the API server, webhook configurations themselves are never sent to webhooks */
	int hooks = strcmp(t->group, "admissionregistration.k8s.io") != 0;
	if (hooks && run(s, 1, t, sub, op, ns, name, obj, old, o, out))
		return -1;
	/* after mutation, before validation: RBAC's escalation and ownerReference checks */
	if (ks_authz_admit(s, t, sub, op, ns, name, *obj, old, o, out))
		return -1;
	return hooks ? run(s, 0, t, sub, op, ns, name, obj, old, o, out) : 0;
}
