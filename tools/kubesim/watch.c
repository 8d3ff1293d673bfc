/* kubesim — watch streams. A watch is a cursor (the last resourceVersion it has
 * seen) into the store's bounded event history, so a slow reader costs no memory:
 * once its cursor falls out of the history it gets the in-stream 410 Expired ERROR
 * event, like an API server whose watch cache moved on. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kubesim.h"
#include "selector.h"
#include "table.h"
#include "versions.h"

#define KS_WATCH_DEFAULT_TIMEOUT_S 1800

struct ks_watch {
	const ks_rtype *t;
	char gr[300];
	char ns[256];
	ks_selector ls, fs;
	uint64_t cursor;
	char *pending;
	size_t plen, poff;
	char **initial;
	int ninit, iinit;
	int bookmarks;
	int64_t deadline_ms, next_bookmark_ms, close_at_ms;
	int close_after, events_sent;
	int done, end_after_pending;
	int table;         /* Accept asked for a Table: each event's object is one */
	int table_headers; /* columnDefinitions already sent (first Table only) */
	int conv;          /* objects are stored in another version of the resource */
	char include[16];  /* includeObject */
};

static void watch_free(struct ks_watch *w)
{
	if (!w)
		return;
	for (int i = w->iinit; i < w->ninit; i++)
		free(w->initial[i]);
	free(w->initial);
	free(w->pending);
	ks_selector_free(&w->ls);
	ks_selector_free(&w->fs);
	free(w);
}

static char *event_line(const char *type, const char *json)
{
	size_t n = strlen(type) + strlen(json) + 32;
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "{\"type\":\"%s\",\"object\":%s}\n", type, json);
	return s;
}

/* The line for one object: the object itself, or (Table watch) its one-row Table;
 * like the API server, only the first Table of a stream carries columnDefinitions
 * (later ones have them null, kubectl keeps the header it printed). */
static char *object_line(struct ks_watch *w, const char *type, const char *json)
{
	if (!w->table && !w->conv)
		return event_line(type, json);
	cJSON *obj = cJSON_Parse(json);
	if (obj && w->conv && ks_conv(obj, w->t->group, w->t->resource, w->t->version)) {
		cJSON_Delete(obj);
		obj = NULL;
	}
	if (!w->table) {
		char *b = obj ? cJSON_PrintUnformatted(obj) : NULL;
		cJSON_Delete(obj);
		char *l = b ? event_line(type, b) : NULL;
		free(b);
		return l;
	}
	cJSON *tb = obj ? ks_table(w->t, obj, w->include, time(NULL)) : NULL;
	cJSON_Delete(obj);
	if (tb && w->table_headers)
		cJSON_ReplaceItemInObjectCaseSensitive(tb, "columnDefinitions", cJSON_CreateNull());
	char *b = tb ? cJSON_PrintUnformatted(tb) : NULL;
	cJSON_Delete(tb);
	if (!b)
		return NULL;
	w->table_headers = 1;
	char *l = event_line(type, b);
	free(b);
	return l;
}

static char *status_line(int code, const char *reason, const char *msg)
{
	char *st = ks_status_json(code, reason, msg, NULL, NULL, NULL, NULL);
	if (!st)
		return NULL;
	char *l = event_line("ERROR", st);
	free(st);
	return l;
}

static int matches(const struct ks_watch *w, const cJSON *obj)
{
	if (!obj)
		return 0;
	const cJSON *labels =
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
	return ks_label_selector_match(&w->ls, labels) && ks_field_selector_match(&w->fs, obj);
}

/* Selectors against a stored version: labels are kept beside the JSON; the JSON is
 * parsed only when a field selector needs it. -1: out of memory. */
static int blob_matches(const struct ks_watch *w, const ks_blob *b)
{
	if (!ks_label_selector_match(&w->ls, b->labels))
		return 0;
	if (w->fs.nterms == 0)
		return 1;
	cJSON *obj = cJSON_ParseWithLength(b->json, b->len);
	if (!obj)
		return -1;
	int m = ks_field_selector_match(&w->fs, obj);
	cJSON_Delete(obj);
	return m;
}

static char *bookmark_line(const struct ks_watch *w, uint64_t rv)
{
	char av[256], buf[512];
	snprintf(buf, sizeof(buf),
		 "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{"
		 "\"resourceVersion\":\"%" PRIu64 "\",\"creationTimestamp\":null}}}\n",
		 w->t->kind, ks_rtype_api_version(w->t, av, sizeof(av)), rv);
	if (w->table) /* a Table holding only the resourceVersion */
		snprintf(buf, sizeof(buf),
			 "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\","
			 "\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"},\"columnDefinitions\":null,\"rows\":[]}}\n",
			 rv);
	return strdup(buf);
}

struct ks_watch *ks_watch_open(ks_server *s, const ks_rtype *t, const char *ns, const ks_req *r, ks_resp *out)
{
	struct ks_watch *w = calloc(1, sizeof(*w));
	gk_err e = { 0 };
	if (!w) {
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return NULL;
	}
	w->t = t;
	snprintf(w->gr, sizeof(w->gr), "%s/%s", t->group, t->resource);
	snprintf(w->ns, sizeof(w->ns), "%s", t->namespaced && ns ? ns : "");
	if (ks_label_selector_parse(ks_req_param(r, "labelSelector"), &w->ls, &e) ||
	    ks_field_selector_parse(ks_req_param(r, "fieldSelector"), &w->fs, &e)) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "%s", e.msg);
		watch_free(w);
		return NULL;
	}
	w->table = ks_wants_table(r->accept);
	w->conv = !t->storage;
	snprintf(w->include, sizeof(w->include), "%s", ks_req_param(r, "includeObject") ? ks_req_param(r, "includeObject") : "");
	const char *rvs = ks_req_param(r, "resourceVersion");
	const char *to = ks_req_param(r, "timeoutSeconds");
	long tos = to ? strtol(to, NULL, 10) : 0;
	if (tos <= 0)
		tos = KS_WATCH_DEFAULT_TIMEOUT_S;
	int64_t now = ks_mono_ms();
	w->deadline_ms = now + tos * 1000;
	const char *bm = ks_req_param(r, "allowWatchBookmarks");
	w->bookmarks = bm && (strcmp(bm, "true") == 0 || strcmp(bm, "1") == 0);
	pthread_mutex_lock(&s->mu);
	w->next_bookmark_ms = now + s->bookmark_ms;
	if (s->faults.watch_close_after_events > 0)
		w->close_after = s->faults.watch_close_after_events;
	if (s->faults.watch_close_after_ms > 0)
		w->close_at_ms = now + s->faults.watch_close_after_ms;
	int force410 = s->faults.force_410_next_watch;
	if (force410) {
		s->faults.force_410_next_watch--;
		s->stats.faults_injected++;
		ks_stats_count(s->stats.fault, &s->stats.nfault, "watch-410", t->resource);
	}
	if (!rvs || !*rvs || strcmp(rvs, "0") == 0) {
		/* "Get State and Start at Most Recent": synthetic ADDED for what exists */
		ks_bucket *b = ks_store_bucket(&s->store, t->group, t->resource, 0);
		if (b && b->n) {
			w->initial = calloc((size_t)b->n, sizeof(char *));
			if (!w->initial)
				goto oom;
			for (int i = 0; i < b->n; i++) {
				if (w->ns[0] && strcmp(b->items[i].ns, w->ns) != 0)
					continue;
				if (!matches(w, b->items[i].obj))
					continue;
				char *l = object_line(w, "ADDED", b->items[i].blob->json);
				if (!l)
					goto oom;
				w->initial[w->ninit++] = l;
			}
		}
		w->cursor = s->store.rv;
	} else {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(rvs, &end, 10);
		if (*end || errno) {
			pthread_mutex_unlock(&s->mu);
			ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
				       "invalid resource version: \"%s\"", rvs);
			watch_free(w);
			return NULL;
		}
		w->cursor = v;
	}
	if (force410 || (rvs && *rvs && strcmp(rvs, "0") != 0 && ks_store_history_from(&s->store, w->cursor) < 0)) {
		char msg[128];
		snprintf(msg, sizeof(msg), "too old resource version: %" PRIu64 " (%" PRIu64 ")", w->cursor,
			 s->store.compacted + 1);
		w->pending = status_line(410, "Expired", msg);
		if (!w->pending)
			goto oom;
		w->plen = strlen(w->pending);
		w->end_after_pending = 1;
	}
	s->stats.watchers++;
	s->stats.watches_opened++;
	pthread_mutex_unlock(&s->mu);
	out->code = 200;
	out->content_type = w->table ? "application/json;as=Table;v=v1;g=meta.k8s.io" : "application/json";
	out->watch = w;
	return w;
oom:
	pthread_mutex_unlock(&s->mu);
	watch_free(w);
	ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
	return NULL;
}

/* Next line for the stream (mu held); NULL when there is none yet. */
static char *next_event(ks_server *s, struct ks_watch *w, int *is_event)
{
	int idx = ks_store_history_from(&s->store, w->cursor);
	if (idx < 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "too old resource version: %" PRIu64 " (%" PRIu64 ")", w->cursor,
			 s->store.compacted + 1);
		w->end_after_pending = 1;
		return status_line(410, "Expired", msg);
	}
	for (; idx < s->store.count; idx++) {
		const ks_event *e = ks_store_event(&s->store, idx);
		w->cursor = e->rv;
		if (strcmp(e->gr, w->gr) != 0 || (w->ns[0] && strcmp(e->cur->ns, w->ns) != 0))
			continue;
		int mn = blob_matches(w, e->cur);
		int mo = e->type == KS_EV_MODIFIED && e->old ? blob_matches(w, e->old) : mn;
		if (mn < 0 || mo < 0) {
			w->end_after_pending = 1; /* out of memory: end the stream, the client relists */
			return NULL;
		}
		const char *type = NULL;
		if (e->type == KS_EV_MODIFIED) {
			type = mn && mo ? "MODIFIED" : mn ? "ADDED" : mo ? "DELETED" : NULL;
		} else if (mn) {
			type = ks_ev_name(e->type);
		}
		if (!type)
			continue;
		*is_event = 1;
		char *l = object_line(w, type, e->cur->json);
		if (!l)
			w->end_after_pending = 1; /* out of memory: end the stream, the client relists */
		return l;
	}
	w->cursor = s->store.rv;
	return NULL;
}

size_t ks_watch_read(ks_server *s, struct ks_watch *w, char *buf, size_t max)
{
	for (;;) {
		if (w->pending && w->poff < w->plen) {
			size_t n = w->plen - w->poff;
			if (n > max)
				n = max;
			memcpy(buf, w->pending + w->poff, n);
			w->poff += n;
			return n;
		}
		free(w->pending);
		w->pending = NULL;
		w->plen = w->poff = 0;
		if (w->done || w->end_after_pending)
			return 0;
		if (w->iinit < w->ninit) {
			if (w->close_after && w->events_sent >= w->close_after) {
				w->done = 1; /* the synthetic ADDED events count as events too */
				return 0;
			}
			w->events_sent++;
			w->pending = w->initial[w->iinit];
			w->initial[w->iinit++] = NULL;
			w->plen = strlen(w->pending);
			pthread_mutex_lock(&s->mu);
			s->stats.watch_events++;
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		pthread_mutex_lock(&s->mu);
		for (;;) {
			int64_t now = ks_mono_ms();
			if (s->shutting_down || now >= w->deadline_ms || (w->close_at_ms && now >= w->close_at_ms) ||
			    (w->close_after && w->events_sent >= w->close_after)) {
				w->done = 1;
				break;
			}
			int is_event = 0;
			char *l = next_event(s, w, &is_event);
			if (l) {
				w->pending = l;
				w->plen = strlen(l);
				if (is_event) {
					w->events_sent++;
					s->stats.watch_events++;
				}
				break;
			}
			if (w->end_after_pending) {
				w->done = 1; /* out of memory building the 410 line */
				break;
			}
			if (w->bookmarks && now >= w->next_bookmark_ms) {
				w->next_bookmark_ms = now + s->bookmark_ms;
				if ((w->pending = bookmark_line(w, w->cursor)) != NULL) {
					w->plen = strlen(w->pending);
					break;
				}
			}
			int64_t wake = w->deadline_ms;
			if (w->bookmarks && w->next_bookmark_ms < wake)
				wake = w->next_bookmark_ms;
			if (w->close_at_ms && w->close_at_ms < wake)
				wake = w->close_at_ms;
			if (wake > now + 1000)
				wake = now + 1000;
			ks_cond_wait_ms(&s->cond, &s->mu, wake - now);
		}
		pthread_mutex_unlock(&s->mu);
	}
}

void ks_watch_close(ks_server *s, struct ks_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&s->mu);
	if (s->stats.watchers)
		s->stats.watchers--;
	pthread_mutex_unlock(&s->mu);
	watch_free(w);
}
