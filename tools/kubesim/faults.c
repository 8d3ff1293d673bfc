/* kubesim — fault injection rules and request statistics.
 *
 * Faults JSON (for --faults and PUT /kubesim/faults):
 *   {"seed": 1,
 *    "rules": [{"verb": "list"|"*", "resource": "nodes"|"*", "path": "/apis/kmm.sigs.x-k8s.io/v1beta1",
 *               "rate": 0.5, "code": 500|503|429|409|404|403|200, "body": "{}",
 *               "times": 0, "retryAfter": 2, "latencyMs": 0}],
 *    "latencyMs": 0,
 *    "watch": {"closeAfterEvents": 0, "closeAfterSeconds": 0, "force410": 0},
 *    "refuseConnectionsSeconds": 0}
 * A rule matches a request when its verb, resource and path all match: "*" (or
 * absent) matches anything; verbs are get, list, watch, create, update, patch,
 * delete, deletecollection, and "discovery" for /api, /apis and the
 * group/version documents (resource ""); path is a prefix of the request path
 * (query excluded), e.g. "/apis/kmm.sigs.x-k8s.io/v1beta1" matches that
 * group-version's discovery document and every request on its resources.
 * The fault answers `code` with a Status naming the resource, or with `body`
 * verbatim (application/json) when given: a lying answer, "code": 200 with
 * "{}", "null", a Status object or truncated JSON (a 2xx code needs a body).
 * `times` spends the rule after that many faults (0 = never). The random
 * stream is a splitmix64 sequence from the seed, so a given seed and request
 * sequence always injects the same faults. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <pthread.h>
#include <stdlib.h>

#include "kubesim.h"

static uint64_t next_rand(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int num(const cJSON *o, const char *k, double lo, double hi, double *out, gk_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s must be a number in [%g, %g]", k, lo, hi);
	*out = v->valuedouble;
	return 0;
}

static int str(const cJSON *o, const char *k, char *buf, size_t cap, gk_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!v) {
		snprintf(buf, cap, "*");
		return 0;
	}
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s must be a short string", k);
	snprintf(buf, cap, "%s", v->valuestring);
	return 0;
}

int ks_faults_parse(ks_faults *f, const cJSON *j, gk_err *err)
{
	memset(f, 0, sizeof(*f));
	if (!cJSON_IsObject(j))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "faults must be a JSON object");
	static const char *known[] = { "seed", "rules", "latencyMs", "watch", "refuseConnectionsSeconds" };
	const cJSON *it;
	cJSON_ArrayForEach(it, j) {
		int ok = 0;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok |= strcmp(it->string, known[i]) == 0;
		if (!ok)
			return gk_err_set(err, GK_INVALID_ARGUMENT, "unknown field \"%s\"", it->string);
	}
	double d = 0;
	if (num(j, "seed", 0, 9007199254740992.0, &d, err))
		return err ? err->code : GK_INVALID_ARGUMENT;
	f->seed = f->rng = (uint64_t)d;
	d = 0;
	if (num(j, "latencyMs", 0, 60000, &d, err))
		return err ? err->code : GK_INVALID_ARGUMENT;
	f->latency_ms = (int)d;
	d = 0;
	if (num(j, "refuseConnectionsSeconds", 0, 3600, &d, err))
		return err ? err->code : GK_INVALID_ARGUMENT;
	if (d > 0)
		f->refuse_until_ms = ks_mono_ms() + (int64_t)(d * 1000);
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "watch");
	if (w && !cJSON_IsObject(w))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "watch must be an object");
	d = 0;
	if (num(w, "closeAfterEvents", 0, 1e9, &d, err))
		return err ? err->code : GK_INVALID_ARGUMENT;
	f->watch_close_after_events = (int)d;
	d = 0;
	if (num(w, "closeAfterSeconds", 0, 86400, &d, err))
		return err ? err->code : GK_INVALID_ARGUMENT;
	f->watch_close_after_ms = (int)(d * 1000);
	d = 0;
	if (num(w, "force410", 0, 1e6, &d, err))
		return err ? err->code : GK_INVALID_ARGUMENT;
	f->force_410_next_watch = (int)d;
	const cJSON *rules = cJSON_GetObjectItemCaseSensitive(j, "rules");
	if (rules && !cJSON_IsArray(rules))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "rules must be an array");
	const cJSON *r;
	cJSON_ArrayForEach(r, rules) {
		if (f->nrules >= KS_MAX_FAULT_RULES)
			return gk_err_set(err, GK_INVALID_ARGUMENT, "at most %d rules", KS_MAX_FAULT_RULES);
		if (!cJSON_IsObject(r))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "rules[%d] must be an object", f->nrules);
		ks_fault_rule *fr = &f->rules[f->nrules];
		memset(fr, 0, sizeof(*fr));
		static const char *rknown[] = { "verb", "resource", "path", "rate", "code", "body", "times",
						"retryAfter", "latencyMs" };
		const cJSON *rf;
		cJSON_ArrayForEach(rf, r) {
			int ok = 0;
			for (size_t i = 0; i < sizeof(rknown) / sizeof(rknown[0]); i++)
				ok |= strcmp(rf->string, rknown[i]) == 0;
			if (!ok)
				return gk_err_set(err, GK_INVALID_ARGUMENT, "rules[%d]: unknown field \"%s\"", f->nrules,
						  rf->string);
		}
		if (str(r, "verb", fr->verb, sizeof(fr->verb), err) ||
		    str(r, "resource", fr->resource, sizeof(fr->resource), err) ||
		    str(r, "path", fr->path, sizeof(fr->path), err))
			return err ? err->code : GK_INVALID_ARGUMENT;
		if (strcmp(fr->path, "*") == 0)
			fr->path[0] = 0;
		else if (fr->path[0] != '/')
			return gk_err_set(err, GK_INVALID_ARGUMENT, "rules[%d]: path must start with /", f->nrules);
		double rate = 1, code = 0, ra = 0, lat = 0, times = 0;
		if (num(r, "rate", 0, 1, &rate, err) || num(r, "code", 0, 599, &code, err) ||
		    num(r, "retryAfter", 0, 3600, &ra, err) || num(r, "latencyMs", 0, 60000, &lat, err) ||
		    num(r, "times", 0, 1e9, &times, err))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "rules[%d]: %s", f->nrules, err ? err->msg : "invalid");
		const cJSON *body = cJSON_GetObjectItemCaseSensitive(r, "body");
		fr->body_len = -1;
		if (body) {
			if (!cJSON_IsString(body))
				return gk_err_set(err, GK_INVALID_ARGUMENT, "rules[%d]: body must be a string", f->nrules);
			size_t bl = strlen(body->valuestring);
			if (bl > (size_t)(KS_FAULT_BODY_POOL - f->body_used))
				return gk_err_set(err, GK_INVALID_ARGUMENT, "rules' bodies exceed %d bytes together",
						  KS_FAULT_BODY_POOL);
			memcpy(f->body_pool + f->body_used, body->valuestring, bl);
			fr->body_off = f->body_used;
			fr->body_len = (int)bl;
			f->body_used += (int)bl;
			if (code == 0)
				return gk_err_set(err, GK_INVALID_ARGUMENT, "rules[%d]: a body needs a code", f->nrules);
		}
		if (code != 0 && (code < 200 || (code < 400 && body == NULL) || (code >= 300 && code < 400)))
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "rules[%d]: code must be 4xx or 5xx, or 2xx with a body", f->nrules);
		fr->rate = rate;
		fr->code = (int)code;
		fr->retry_after = (int)ra;
		fr->latency_ms = (int)lat;
		fr->times = (int)times;
		f->nrules++;
	}
	return 0;
}

cJSON *ks_faults_to_json(const ks_faults *f)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddNumberToObject(j, "seed", (double)f->seed);
	cJSON_AddNumberToObject(j, "latencyMs", f->latency_ms);
	int64_t left = f->refuse_until_ms - ks_mono_ms();
	cJSON_AddNumberToObject(j, "refuseConnectionsSeconds", left > 0 ? (double)left / 1000.0 : 0);
	cJSON *w = cJSON_AddObjectToObject(j, "watch");
	if (w) {
		cJSON_AddNumberToObject(w, "closeAfterEvents", f->watch_close_after_events);
		cJSON_AddNumberToObject(w, "closeAfterSeconds", f->watch_close_after_ms / 1000.0);
		cJSON_AddNumberToObject(w, "force410", f->force_410_next_watch);
	}
	cJSON *rules = cJSON_AddArrayToObject(j, "rules");
	for (int i = 0; rules && i < f->nrules; i++) {
		cJSON *r = cJSON_CreateObject();
		if (!r)
			break;
		cJSON_AddStringToObject(r, "verb", f->rules[i].verb);
		cJSON_AddStringToObject(r, "resource", f->rules[i].resource);
		if (f->rules[i].path[0])
			cJSON_AddStringToObject(r, "path", f->rules[i].path);
		if (f->rules[i].body_len >= 0) {
			char *b = strndup(f->body_pool + f->rules[i].body_off, (size_t)f->rules[i].body_len);
			if (b)
				cJSON_AddStringToObject(r, "body", b);
			free(b);
		}
		if (f->rules[i].times) {
			cJSON_AddNumberToObject(r, "times", f->rules[i].times);
			cJSON_AddNumberToObject(r, "used", f->rules[i].used);
		}
		cJSON_AddNumberToObject(r, "rate", f->rules[i].rate);
		cJSON_AddNumberToObject(r, "code", f->rules[i].code);
		cJSON_AddNumberToObject(r, "retryAfter", f->rules[i].retry_after);
		cJSON_AddNumberToObject(r, "latencyMs", f->rules[i].latency_ms);
		cJSON_AddItemToArray(rules, r);
	}
	return j;
}

static int match(const char *pat, const char *v)
{
	return strcmp(pat, "*") == 0 || strcmp(pat, v) == 0;
}

static int path_match(const char *prefix, const char *path)
{
	return !prefix[0] || (path && strncmp(path, prefix, strlen(prefix)) == 0);
}

void ks_faults_decide(ks_faults *f, const char *verb, const char *resource, const char *path, ks_fault_hit *hit)
{
	memset(hit, 0, sizeof(*hit));
	hit->latency_ms = f->latency_ms;
	for (int i = 0; i < f->nrules; i++) {
		ks_fault_rule *r = &f->rules[i];
		if (!match(r->verb, verb) || !match(r->resource, resource) || !path_match(r->path, path))
			continue;
		if (r->times && r->used >= r->times)
			continue;
		double x = (double)(next_rand(&f->rng) >> 11) / 9007199254740992.0;
		if (x >= r->rate)
			continue;
		hit->latency_ms += r->latency_ms;
		if (r->code) {
			r->used++;
			hit->code = r->code;
			hit->retry_after = r->retry_after;
			if (r->body_len >= 0) {
				hit->body = f->body_pool + r->body_off;
				hit->body_len = r->body_len;
			}
			return;
		}
	}
}

int ks_faults_respond(struct ks_server *s, const ks_req *rq, const char *verb, const char *resource,
		      const char *kind, const char *name, const char *group, ks_resp *out)
{
	ks_fault_hit hit;
	char *body = NULL;
	pthread_mutex_lock(&s->mu);
	ks_faults_decide(&s->faults, verb, resource, rq->path, &hit);
	if (hit.code) {
		s->stats.faults_injected++;
		ks_stats_count(s->stats.fault, &s->stats.nfault, verb, resource);
		/* the pool changes when the faults are replaced: copy under the lock */
		if (hit.body && !(body = strndup(hit.body, (size_t)hit.body_len)))
			hit.body = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	if (hit.latency_ms > 0) {
		struct timespec ts = { hit.latency_ms / 1000, (long)(hit.latency_ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (!hit.code)
		return 0;
	if (body) {
		free(out->body);
		out->code = hit.code;
		out->content_type = "application/json";
		out->body = body;
		out->body_len = (size_t)hit.body_len;
	} else {
		const char *reason = hit.code == 429   ? "TooManyRequests"
				     : hit.code == 409 ? "Conflict"
				     : hit.code == 503 ? "ServiceUnavailable"
				     : hit.code == 404 ? "NotFound"
				     : hit.code == 403 ? "Forbidden"
				     : hit.code < 500  ? "BadRequest"
							: "InternalError";
		ks_resp_status(out, hit.code, reason, kind, name, group, NULL, "kubesim: injected fault (%d) for %s %s",
			       hit.code, verb, *resource ? resource : rq->path);
	}
	out->retry_after = hit.code == 429 ? (hit.retry_after > 0 ? hit.retry_after : 1) : 0;
	return 1;
}

int ks_verb_is_write(const char *verb)
{
	return strcmp(verb, "create") == 0 || strcmp(verb, "update") == 0 || strcmp(verb, "patch") == 0 ||
	       strcmp(verb, "delete") == 0 || strcmp(verb, "deletecollection") == 0;
}

void ks_stats_count(ks_stat_ent *t, int *n, const char *verb, const char *resource)
{
	for (int i = 0; i < *n; i++)
		if (strcmp(t[i].verb, verb) == 0 && strcmp(t[i].resource, resource) == 0) {
			t[i].n++;
			return;
		}
	if (*n >= KS_STATS_MAX)
		return;
	snprintf(t[*n].verb, sizeof(t[*n].verb), "%s", verb);
	snprintf(t[*n].resource, sizeof(t[*n].resource), "%s", resource);
	t[*n].n = 1;
	(*n)++;
}

void ks_stats_count_agent(ks_stats *s, const char *agent, const char *verb, const char *resource)
{
	for (int i = 0; i < s->nwagent; i++) {
		ks_agent_ent *e = &s->wagent[i];
		if (!strcmp(e->agent, agent) && !strcmp(e->verb, verb) && !strcmp(e->resource, resource)) {
			e->n++;
			return;
		}
	}
	if (s->nwagent >= KS_STATS_MAX)
		return;
	ks_agent_ent *e = &s->wagent[s->nwagent++];
	snprintf(e->agent, sizeof(e->agent), "%s", agent);
	snprintf(e->verb, sizeof(e->verb), "%s", verb);
	snprintf(e->resource, sizeof(e->resource), "%s", resource);
	e->n = 1;
}

static cJSON *table(const ks_stat_ent *t, int n)
{
	/* {"list":{"nodes":3}, ...} */
	cJSON *j = cJSON_CreateObject();
	for (int i = 0; j && i < n; i++) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(j, t[i].verb);
		if (!v)
			v = cJSON_AddObjectToObject(j, t[i].verb);
		if (v)
			cJSON_AddNumberToObject(v, t[i].resource[0] ? t[i].resource : "-", (double)t[i].n);
	}
	return j;
}

cJSON *ks_stats_to_json(const ks_stats *s)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddNumberToObject(j, "requests", (double)s->requests);
	cJSON_AddNumberToObject(j, "writes", (double)s->writes);
	cJSON_AddNumberToObject(j, "gcRuns", (double)s->gc_runs);
	cJSON_AddItemToObject(j, "byVerb", table(s->req, s->nreq));
	cJSON *wr = cJSON_CreateObject();
	for (int i = 0; wr && i < s->nreq; i++) {
		if (!ks_verb_is_write(s->req[i].verb))
			continue;
		cJSON *v = cJSON_GetObjectItemCaseSensitive(wr, s->req[i].resource);
		double prev = cJSON_IsNumber(v) ? v->valuedouble : 0;
		cJSON_DeleteItemFromObjectCaseSensitive(wr, s->req[i].resource);
		cJSON_AddNumberToObject(wr, s->req[i].resource, prev + (double)s->req[i].n);
	}
	cJSON_AddItemToObject(j, "writesByResource", wr);
	/* {"gpukmm-upgrader": {"patch nodes": 12, "create pods/eviction": 4}, ...} */
	cJSON *wa = cJSON_CreateObject();
	for (int i = 0; wa && i < s->nwagent; i++) {
		const ks_agent_ent *e = &s->wagent[i];
		cJSON *a = cJSON_GetObjectItemCaseSensitive(wa, e->agent);
		if (!a)
			a = cJSON_AddObjectToObject(wa, e->agent);
		char k[112];
		snprintf(k, sizeof(k), "%s %s", e->verb, e->resource);
		if (a)
			cJSON_AddNumberToObject(a, k, (double)e->n);
	}
	cJSON_AddItemToObject(j, "writesByAgent", wa);
	cJSON_AddNumberToObject(j, "faultsInjected", (double)s->faults_injected);
	cJSON_AddItemToObject(j, "faults", table(s->fault, s->nfault));
	cJSON_AddNumberToObject(j, "connectionsRefused", (double)s->refused);
	cJSON_AddNumberToObject(j, "watchEvents", (double)s->watch_events);
	cJSON_AddNumberToObject(j, "watchers", (double)s->watchers);
	cJSON_AddNumberToObject(j, "watchesOpened", (double)s->watches_opened);
	return j;
}
