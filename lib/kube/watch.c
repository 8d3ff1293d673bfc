/* Reflector: list (paginated) → watch from the list's resourceVersion with
 * bookmarks and a random timeoutSeconds → on 410 (HTTP or in-stream ERROR)
 * relist and synthesise DELETEs for vanished keys → on failures back off
 * 0.8 s ×2 → 30 s with jitter. Only key → resourceVersion is kept here; the
 * typed objects are the caller's business. Runs on the mux (one thread).
 *
 * The safety rule (ARCHITECTURE.md §4): DELETEs are synthesised only from a
 * complete list whose every page was a well-formed list (gk_kube_check_list);
 * a 200 that is `{}`, `null`, a Status or broken JSON is a failed list (error,
 * backoff, cache untouched). A watch document that cannot be read (garbage
 * line, no type/object, unknown type, object without a name) may have been an
 * event: the stream is abandoned and the kind relisted (after a backoff). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "internal.h"
#include "jparse.h"
#include "gpukmm/kmap.h"

enum phase { PH_IDLE, PH_LIST, PH_WATCH };

struct gk_kube_watch {
	gk_kube__task task;         /* first member: task ↔ watch */
	gk_kube_mux *m;
	CURL *easy;
	struct curl_slist *hdrs;
	char *group, *version, *resource, *ns, *label_sel, *field_sel;
	char what[160];             /* for logs: "nodes", "ns/modules.kmm.sigs.x-k8s.io" */
	gk_kube_watch_opts opts;
	gk_kube_watch_cbs cbs;
	void *user;

	enum phase phase;
	bool attached;              /* easy is in the multi */
	bool dead;                  /* stop requested while busy */
	int busy;                   /* callbacks on the stack */
	bool relist_needed;         /* next start is a list, not a watch */
	bool unauth_retried;
	bool token_reserved;        /* a QPS token was taken for the next start */
	bool erred;                 /* a failure since the last list or resume */
	bool malformed;             /* the stream carried a document we could not read */
	long stream_error;          /* in-stream ERROR event's code, 0 = none */
	char rv[64];
	char *cont;                 /* list continue token */
	gk_kmap keys;               /* key → resourceVersion */
	const char **listed;        /* keys seen by the current list (owned strings) */
	size_t n_listed, cap_listed;
	gk_kube_buf body;           /* list page / error body */
	gk_jarena arena;            /* the parsed list page (borrowed by on_event) */
	gk_kube_framer *framer;
	gk_kube_status st;
	long http;
	int64_t started_ms;
	uint64_t events_this_watch;
	uint64_t events_since_relist;
	gk_kube_backoff bo;
	gk_kube_watch_stats stats;
	char errbuf[CURL_ERROR_SIZE];
};

static void watch_free(gk_kube_watch *w);

/* Call a user callback; returns true if the watch was stopped meanwhile. */
#define CALLBACK(w, call)                   \
	do {                                \
		(w)->busy++;                \
		call;                       \
		(w)->busy--;                \
	} while (0)

static void listed_clear(gk_kube_watch *w)
{
	for (size_t i = 0; i < w->n_listed; i++)
		free((char *)w->listed[i]);
	free(w->listed);
	w->listed = NULL;
	w->n_listed = w->cap_listed = 0;
}

static int listed_add(gk_kube_watch *w, const char *key)
{
	if (w->n_listed == w->cap_listed) {
		size_t nc = w->cap_listed ? w->cap_listed * 2 : 256;
		const char **n = realloc(w->listed, nc * sizeof *n);
		if (!n)
			return -1;
		w->listed = n;
		w->cap_listed = nc;
	}
	char *k = strdup(key);
	if (!k)
		return -1;
	w->listed[w->n_listed++] = k;
	return 0;
}

/* gpukmm_watch_{relists,restarts}_total{resource} (gpukmm/metrics.h) */
static void count(bool relist, const gk_kube_watch *w)
{
	static gk_metric *relists, *restarts;
	if (!relists) {
		relists = gk_metric_counter("gpukmm_watch_relists_total",
					    "Completed lists of a watched resource: the initial one, and one after "
					    "each 410 Gone or failed watch (a relist costs a full read).",
					    "resource");
		restarts = gk_metric_counter("gpukmm_watch_restarts_total",
					     "Watches of a resource restarted after a failure, with backoff (not "
					     "the normal end at timeoutSeconds).",
					     "resource");
	}
	gk_metric_add(relist ? relists : restarts, 1, GK_LV(w->resource));
}

static void report_error(gk_kube_watch *w, int code, const char *msg)
{
	w->stats.errors++;
	w->erred = true;
	GK_WARN("watch %s: %s", w->what, msg);
	if (w->cbs.on_error)
		CALLBACK(w, w->cbs.on_error(w->user, code, msg));
}

static void schedule(gk_kube_watch *w, int64_t delay_ms)
{
	w->phase = PH_IDLE;
	w->task.due_ms = gk_kube__mono_ms() + (delay_ms < 0 ? 0 : delay_ms);
}

static void backoff(gk_kube_watch *w, int retry_after_s)
{
	int64_t d = gk_kube_backoff_next(&w->bo, gk_kube__mono_ms());
	if (retry_after_s > 0 && (int64_t)retry_after_s * 1000 > d)
		d = (int64_t)retry_after_s * 1000;
	w->stats.restarts++;
	count(false, w);
	GK_DEBUG("watch %s: retry in %lld ms", w->what, (long long)d);
	schedule(w, d);
}

/* ---- applying objects ---- */

static void apply(gk_kube_watch *w, enum gk_kube_event type, const cJSON *obj, bool from_list)
{
	char *key = gk_kube_obj_key(obj);
	if (!key) {
		w->stats.bad_docs++;
		return;
	}
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
	const char *rvs = cJSON_IsString(rv) ? rv->valuestring : "";
	if (type == GK_KUBE_DELETED) {
		gk_kmap_del(&w->keys, key);
	} else {
		gk_kmap_ent *e = gk_kmap_get(&w->keys, key);
		if (from_list && e && !strcmp(e->val, rvs) && *rvs) {
			free(key); /* unchanged since we last saw it: nothing to tell */
			return;
		}
		type = e ? GK_KUBE_MODIFIED : GK_KUBE_ADDED;
		if (!gk_kmap_put(&w->keys, key, rvs, NULL)) {
			free(key);
			report_error(w, GK_RESOURCE_EXHAUSTED, "out of memory");
			return;
		}
	}
	w->stats.events++;
	w->events_this_watch++;
	w->events_since_relist++;
	if (w->cbs.on_event)
		CALLBACK(w, w->cbs.on_event(w->user, type, key, obj));
	free(key);
}

static void synth_delete(void *user, const char *key)
{
	gk_kube_watch *w = user;
	if (w->dead)
		return;
	char *k = strdup(key); /* key points into the map entry we remove */
	if (!k)
		return;
	gk_kmap_del(&w->keys, k);
	w->stats.events++;
	if (w->cbs.on_event)
		CALLBACK(w, w->cbs.on_event(w->user, GK_KUBE_DELETED, k, NULL));
	free(k);
}

/* ---- starting transfers ---- */

static int build_path(gk_kube_watch *w, char *p, size_t cap, bool watch)
{
	gk_kube_ref r = {w->group, w->version, w->resource, w->ns, NULL, NULL};
	if (gk_kube_path(p, cap, &r) < 0)
		return -1;
	char num[32];
	bool ok = true;
	if (w->label_sel)
		ok = ok && gk_kube_query_add(p, cap, "labelSelector", w->label_sel) >= 0;
	if (w->field_sel)
		ok = ok && gk_kube_query_add(p, cap, "fieldSelector", w->field_sel) >= 0;
	if (watch) {
		int64_t t = gk_kube_rand_range(&w->bo, w->opts.min_timeout_s, w->opts.max_timeout_s);
		snprintf(num, sizeof num, "%lld", (long long)t);
		ok = ok && gk_kube_query_add(p, cap, "watch", "1") >= 0 &&
		     gk_kube_query_add(p, cap, "resourceVersion", w->rv) >= 0 &&
		     gk_kube_query_add(p, cap, "allowWatchBookmarks", "true") >= 0 &&
		     gk_kube_query_add(p, cap, "timeoutSeconds", num) >= 0;
	} else {
		snprintf(num, sizeof num, "%d", w->opts.page_limit);
		ok = ok && gk_kube_query_add(p, cap, "limit", num) >= 0;
		if (w->cont)
			ok = ok && gk_kube_query_add(p, cap, "continue", w->cont) >= 0;
	}
	return ok ? 0 : -1;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *user);
static size_t on_header(char *ptr, size_t size, size_t nmemb, void *user);

static void start(gk_kube_watch *w, bool watch)
{
	char p[4096];
	gk_err err = {0};
	/* client-side QPS limit shared with the blocking client */
	int64_t wait = w->token_reserved ? 0 : gk_kube_bucket_take(&w->m->c->bucket, gk_kube__mono_ms());
	w->token_reserved = false;
	if (wait > 0) {
		gk_kube__throttled(w->m->c, wait);
		w->token_reserved = true; /* do not take another one when the timer fires */
		schedule(w, wait);
		return;
	}
	if (build_path(w, p, sizeof p, watch)) {
		report_error(w, GK_INVALID_ARGUMENT, "request path too long");
		backoff(w, -1);
		return;
	}
	curl_easy_reset(w->easy);
	curl_slist_free_all(w->hdrs);
	w->hdrs = NULL;
	if (gk_kube__setup(w->m->c, w->easy, "GET", p, NULL, &w->hdrs, &err)) {
		report_error(w, err.code, err.msg);
		backoff(w, -1);
		return;
	}
	w->body.len = 0;
	w->body.overflow = false;
	w->body.max = w->m->c->opts.max_response;
	memset(&w->st, 0, sizeof w->st);
	w->st.retry_after_s = -1;
	w->http = 0;
	w->stream_error = 0;
	w->malformed = false;
	w->errbuf[0] = 0;
	w->events_this_watch = 0;
	gk_kube_framer_reset(w->framer);
	curl_easy_setopt(w->easy, CURLOPT_PRIVATE, (char *)&w->task);
	curl_easy_setopt(w->easy, CURLOPT_ERRORBUFFER, w->errbuf);
	curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(w->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(w->easy, CURLOPT_HEADERDATA, w);
	if (watch) {
		/* the server ends the watch at timeoutSeconds; a dead peer is caught
		 * by keepalive and the low-speed limit; this is only a backstop */
		curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS,
				 (long)(w->opts.max_timeout_s + 60) * 1000L);
		curl_easy_setopt(w->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(w->easy, CURLOPT_LOW_SPEED_TIME, (long)w->opts.low_speed_s);
		/* big reads: a replay after a reconnect can be a burst of many MB */
		curl_easy_setopt(w->easy, CURLOPT_BUFFERSIZE, 256L * 1024);
	} else {
		curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, (long)w->m->c->opts.timeout_ms);
	}
	w->phase = watch ? PH_WATCH : PH_LIST;
	w->started_ms = gk_kube__mono_ms();
	w->stats.http_requests++;
	w->m->c->stats.requests++;
	if (gk_kube__mux_start(w->m, w->easy)) {
		report_error(w, GK_INTERNAL, "cannot add transfer to the multi handle");
		backoff(w, -1);
		return;
	}
	w->attached = true;
}

static void start_list(gk_kube_watch *w)
{
	if (!w->cont)
		listed_clear(w);
	start(w, false);
}

static void fire(gk_kube__task *t)
{
	gk_kube_watch *w = (gk_kube_watch *)t;
	if (w->relist_needed)
		start_list(w);
	else
		start(w, true);
}

/* ---- watch stream documents ---- */

/* A document we cannot read may have been an event we now miss: give up the
 * stream, relist (after a backoff: a server that keeps sending garbage must
 * not make us spin). */
static int malformed(gk_kube_watch *w, const char *what, bool counted)
{
	char msg[200];
	if (!counted)
		w->stats.bad_docs++; /* (the framer counts the lines it could not parse) */
	w->malformed = true;
	w->relist_needed = true;
	snprintf(msg, sizeof msg, "watch stream carried %s; relisting", what);
	report_error(w, GK_INTERNAL, msg);
	return 1;
}

static int on_doc(void *user, const cJSON *doc)
{
	gk_kube_watch *w = user;
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(doc, "type");
	const cJSON *obj = cJSON_GetObjectItemCaseSensitive(doc, "object");
	int stop = 0;
	if (!cJSON_IsString(type) || !cJSON_IsObject(obj)) {
		stop = malformed(w, "an event without type/object", false);
	} else if (!strcmp(type->valuestring, "BOOKMARK")) {
		const cJSON *rv = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");
		if (cJSON_IsString(rv) && rv->valuestring[0])
			snprintf(w->rv, sizeof w->rv, "%s", rv->valuestring);
		w->stats.bookmarks++;
	} else if (!strcmp(type->valuestring, "ERROR")) {
		gk_kube_status st = {.retry_after_s = -1};
		long code = gk_kube_status_from_json(&st, obj);
		w->st = st;
		w->stream_error = code ? code : 500;
		stop = 1; /* the stream is over: decide in done() */
	} else {
		enum gk_kube_event ev = !strcmp(type->valuestring, "ADDED")      ? GK_KUBE_ADDED
					: !strcmp(type->valuestring, "MODIFIED") ? GK_KUBE_MODIFIED
					: !strcmp(type->valuestring, "DELETED")  ? GK_KUBE_DELETED
										 : 0;
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "name");
		if (!ev) {
			stop = malformed(w, "an event of an unknown type", false);
		} else if (!cJSON_IsString(name) || !name->valuestring[0]) {
			stop = malformed(w, "an object without metadata.name", false);
		} else {
			const cJSON *rv = cJSON_GetObjectItemCaseSensitive(
				cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");
			if (cJSON_IsString(rv))
				snprintf(w->rv, sizeof w->rv, "%s", rv->valuestring);
			apply(w, ev, obj, false);
		}
	}
	return stop || w->dead;
}

/* The end of a response's headers: a watch answered 200 after a failure is
 * the stream resumed from our resourceVersion (what was missed is replayed). */
static size_t on_header(char *ptr, size_t size, size_t nmemb, void *user)
{
	gk_kube_watch *w = user;
	size_t n = gk_kube__header_cb(ptr, size, nmemb, &w->st);
	if (n > 2 || (n == 2 && memcmp(ptr, "\r\n", 2)) || w->phase != PH_WATCH)
		return n;
	long http = 0;
	curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &http);
	if (http == 200 && w->erred && !w->relist_needed && w->stats.synced) {
		w->erred = false;
		if (w->cbs.on_resumed)
			CALLBACK(w, w->cbs.on_resumed(w->user));
	}
	return w->dead ? 0 : n;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *user)
{
	gk_kube_watch *w = user;
	size_t n = size * nmemb;
	if (w->dead)
		return 0;
	if (!w->http)
		curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->http);
	if (w->phase != PH_WATCH || w->http != 200)
		return gk_kube__write_buf(ptr, size, nmemb, &w->body);
	uint64_t bad = gk_kube_framer_bad(w->framer);
	int rc = gk_kube_framer_feed(w->framer, ptr, n, on_doc, w);
	if (rc == GK_RESOURCE_EXHAUSTED) {
		report_error(w, rc, "watch event larger than the limit; relisting");
		w->relist_needed = true;
		return 0;
	}
	if (rc == GK_CANCELLED || w->dead)
		return 0; /* in-stream ERROR, malformed or stopped: abort, done() decides */
	if (gk_kube_framer_bad(w->framer) != bad) {
		malformed(w, "a line that is not a JSON object", true);
		return 0;
	}
	return n;
}

/* ---- transfer finished ---- */

/* A page of a big list is hundreds of KB and its parsed tree megabytes: the
 * body buffer and the arena's blocks are kept from one page to the next, not
 * for the life of the watch (the stream needs no body buffer). A list that is
 * over (complete, failed, or to start again from its first page) lets them go. */
static void list_release(gk_kube_watch *w)
{
	gk_jarena_reset(&w->arena);
	if (w->body.cap > 64 * 1024) {
		free(w->body.data);
		w->body.data = NULL;
		w->body.cap = w->body.len = 0;
	}
}

static void list_done(gk_kube_watch *w)
{
	const cJSON *j = w->body.data ? gk_jparse(&w->arena, w->body.data, w->body.len, NULL) : NULL;
	gk_err cerr = {0};
	if (gk_kube_check_list(j, w->group, w->version, &cerr)) {
		/* not an empty cluster: a failed list. Nothing is deleted, the
		 * cache is kept, the whole list starts over after a backoff */
		char msg[GK_ERR_MSG_MAX + 64];
		list_release(w);
		w->stats.bad_lists++;
		snprintf(msg, sizeof msg, "list failed: %s%s", j ? "" : "the body does not parse as JSON; ",
			 j ? cerr.msg : "");
		report_error(w, GK_INTERNAL, msg);
		w->relist_needed = true;
		free(w->cont);
		w->cont = NULL;
		backoff(w, -1);
		return;
	}
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items"), *it;
	cJSON_ArrayForEach(it, items) {
		char *key = gk_kube_obj_key(it);
		if (key && listed_add(w, key)) {
			free(key);
			list_release(w);
			report_error(w, GK_RESOURCE_EXHAUSTED, "out of memory");
			backoff(w, -1);
			return;
		}
		free(key);
		apply(w, GK_KUBE_ADDED, it, true);
		if (w->dead) {
			gk_jarena_reset(&w->arena);
			return;
		}
	}
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(j, "metadata");
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
	const cJSON *cont = cJSON_GetObjectItemCaseSensitive(md, "continue");
	if (cJSON_IsString(rv))
		snprintf(w->rv, sizeof w->rv, "%s", rv->valuestring);
	free(w->cont);
	w->cont = NULL;
	if (cJSON_IsString(cont) && cont->valuestring[0]) {
		w->cont = strdup(cont->valuestring);
		/* the next page needs as much again: keep the arena's blocks and
		 * the body buffer until the list is over */
		gk_jarena_rewind(&w->arena);
		if (!w->cont) {
			list_release(w);
			report_error(w, GK_RESOURCE_EXHAUSTED, "out of memory");
			backoff(w, -1);
			return;
		}
		start_list(w); /* next page */
		return;
	}
	list_release(w);
	/* complete: whatever the cache knew that the list lacks is gone */
	const char **old = gk_kmap_keys(&w->keys);
	if (!old) {
		report_error(w, GK_RESOURCE_EXHAUSTED, "out of memory");
		backoff(w, -1);
		return;
	}
	size_t n_old = w->keys.n;
	/* old keys point into the map; synth_delete copies before deleting, and the
	 * diff works on its own sorted copy of the pointers, but deleting frees the
	 * strings later entries of `old` may still be compared with: copy them. */
	char **copy = calloc(n_old ? n_old : 1, sizeof *copy);
	bool oom = !copy;
	for (size_t i = 0; !oom && i < n_old; i++)
		oom = !(copy[i] = strdup(old[i]));
	free(old);
	if (!oom && gk_kube_relist_gone((const char *const *)copy, n_old, w->listed, w->n_listed,
					synth_delete, w) < 0)
		oom = true;
	for (size_t i = 0; copy && i < n_old; i++)
		free(copy[i]);
	free(copy);
	listed_clear(w);
	if (oom) {
		report_error(w, GK_RESOURCE_EXHAUSTED, "out of memory");
		backoff(w, -1);
		return;
	}
	if (w->dead)
		return;
	w->relist_needed = false;
	w->erred = false;
	w->stats.relists++;
	count(true, w);
	w->events_since_relist = 0;
	w->stats.synced = true;
	if (w->cbs.on_synced)
		CALLBACK(w, w->cbs.on_synced(w->user));
	if (w->dead)
		return;
	start(w, true);
}

static void done(gk_kube__task *t, CURLcode cc)
{
	gk_kube_watch *w = (gk_kube_watch *)t;
	w->attached = false;
	if (w->dead) {
		watch_free(w);
		return;
	}
	w->busy++;
	long http = 0;
	curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &http);
	bool in_stream_error = w->phase == PH_WATCH && w->stream_error && http == 200;
	if (in_stream_error)
		http = w->stream_error; /* the ERROR event's Status code */
	else if (http && http != 200)
		gk_kube_status_decode(&w->st, w->body.data, w->body.len);
	int64_t lived = gk_kube__mono_ms() - w->started_ms;
	char msg[512];

	if (w->phase == PH_WATCH)
		gk_kube_framer_finish(w->framer);

	if (http == 401 && !w->unauth_retried) {
		/* a rotated token: re-read and retry at once, once */
		w->m->c->stats.unauthorized++;
		gk_kube__token(w->m->c, true);
		w->unauth_retried = true;
		schedule(w, 0);
		goto out;
	}
	if (http == 410) {
		w->stats.expired++;
		w->relist_needed = true;
		snprintf(msg, sizeof msg, "resource version expired (%s); relisting",
			 w->st.message[0] ? w->st.message : "410 Gone");
		GK_INFO("watch %s: %s", w->what, msg);
		/* not an error, but a gap: the cache lags until the relist is done */
		w->erred = true;
		if (w->cbs.on_error)
			CALLBACK(w, w->cbs.on_error(w->user, GK_OUT_OF_RANGE, msg));
		if (w->dead)
			goto out;
		free(w->cont); /* an expired continue token: start the list over */
		w->cont = NULL;
		list_release(w);
		w->rv[0] = 0;
		if (w->events_since_relist == 0 && w->stats.expired > 1)
			backoff(w, w->st.retry_after_s); /* 410 right after a relist: do not spin */
		else
			schedule(w, 0);
		goto out;
	}
	if (cc != CURLE_OK && !(in_stream_error) && !(w->phase == PH_WATCH && w->relist_needed)) {
		bool overflow = w->body.overflow;
		snprintf(msg, sizeof msg, "%s failed after %lld ms: %s",
			 w->phase == PH_LIST ? "list" : "watch", (long long)lived,
			 overflow ? "response too large" : (w->errbuf[0] ? w->errbuf : curl_easy_strerror(cc)));
		report_error(w, overflow ? GK_RESOURCE_EXHAUSTED : GK_UNAVAILABLE, msg);
		if (w->phase == PH_LIST) {
			w->relist_needed = true;
			free(w->cont);
			w->cont = NULL;
			list_release(w);
		}
		backoff(w, -1);
		goto out;
	}
	if (w->phase == PH_WATCH && w->relist_needed) {
		/* oversized event: relist now; a document we could not read: relist
		 * after a backoff (the next stream may carry the same garbage) */
		if (w->malformed)
			backoff(w, -1);
		else
			schedule(w, 0);
		goto out;
	}
	if (http < 200 || http >= 300) {
		int code = gk_kube_code_of(http, w->st.reason);
		snprintf(msg, sizeof msg, "%s: HTTP %ld %s%s%s", w->phase == PH_LIST ? "list" : "watch",
			 http, w->st.reason, w->st.message[0] ? ": " : "", w->st.message);
		report_error(w, code, msg);
		if (w->phase == PH_LIST) {
			w->relist_needed = true;
			free(w->cont);
			w->cont = NULL;
			list_release(w);
		}
		backoff(w, w->st.retry_after_s);
		goto out;
	}
	w->unauth_retried = false;
	if (w->phase == PH_LIST) {
		list_done(w);
		goto out;
	}
	/* a watch that ended normally (timeoutSeconds or the server closed it) */
	if (lived < 1000 && w->events_this_watch == 0) {
		report_error(w, GK_UNAVAILABLE, "very short watch: closed in under 1 s without events");
		backoff(w, -1);
		goto out;
	}
	schedule(w, 0);
out:
	w->busy--;
	if (w->dead && !w->attached)
		watch_free(w);
}

/* ---- public ---- */

static char *dup0(const char *s, bool *fail)
{
	if (!s || !*s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

int gk_kube_watch_start(gk_kube_watch **out, gk_kube_mux *m, const gk_kube_ref *r,
			const gk_kube_watch_opts *opts, const gk_kube_watch_cbs *cbs, void *user,
			gk_err *err)
{
	*out = NULL;
	char probe[1024];
	if (!r || r->name || gk_kube_path(probe, sizeof probe, r) < 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "watch: invalid collection reference");
	gk_kube_watch *w = calloc(1, sizeof *w);
	if (!w)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	bool fail = false;
	w->m = m;
	w->group = dup0(r->group, &fail);
	w->version = dup0(r->version, &fail);
	w->resource = dup0(r->resource, &fail);
	w->ns = dup0(r->ns, &fail);
	if (opts)
		w->opts = *opts;
	w->label_sel = dup0(w->opts.label_selector, &fail);
	w->field_sel = dup0(w->opts.field_selector, &fail);
	w->opts.label_selector = w->opts.field_selector = NULL;
	bool replay = w->opts.start_resource_version && *w->opts.start_resource_version;
	if (replay)
		snprintf(w->rv, sizeof w->rv, "%s", w->opts.start_resource_version);
	w->opts.start_resource_version = NULL;
	if (w->opts.min_timeout_s <= 0)
		w->opts.min_timeout_s = 300;
	if (w->opts.max_timeout_s < w->opts.min_timeout_s)
		w->opts.max_timeout_s = w->opts.min_timeout_s > 600 ? w->opts.min_timeout_s : 600;
	if (w->opts.low_speed_s <= 0)
		w->opts.low_speed_s = 90;
	if (w->opts.page_limit <= 0)
		w->opts.page_limit = 500;
	if (cbs)
		w->cbs = *cbs;
	w->user = user;
	snprintf(w->what, sizeof w->what, "%s%s%s%s%s", w->ns ? w->ns : "", w->ns ? "/" : "",
		 w->resource, w->group ? "." : "", w->group ? w->group : "");
	uint64_t seed = w->opts.seed ? w->opts.seed
				     : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^
					       (uint64_t)(uintptr_t)w;
	gk_kube_backoff_init(&w->bo, seed);
	gk_kmap_init(&w->keys);
	w->framer = gk_kube_framer_new(0);
	w->easy = curl_easy_init();
	if (fail || !w->framer || !w->easy) {
		watch_free(w);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	w->task.fire = fire;
	w->task.done = done;
	w->task.due_ms = -1;
	gk_kube__mux_add_task(m, &w->task);
	if (replay) {
		w->relist_needed = false;
		start(w, true);
	} else {
		w->relist_needed = true;
		start_list(w);
	}
	*out = w;
	gk_kube__mux_changed(m);
	return 0;
}

static void watch_free(gk_kube_watch *w)
{
	if (w->attached && w->easy)
		gk_kube__mux_stop(w->m, w->easy);
	gk_kube__mux_del_task(w->m, &w->task);
	if (w->easy)
		curl_easy_cleanup(w->easy);
	curl_slist_free_all(w->hdrs);
	gk_kube_framer_free(w->framer);
	gk_jarena_free(&w->arena);
	gk_kmap_clear(&w->keys);
	listed_clear(w);
	free(w->body.data);
	free(w->cont);
	free(w->group);
	free(w->version);
	free(w->resource);
	free(w->ns);
	free(w->label_sel);
	free(w->field_sel);
	free(w);
}

void gk_kube_watch_stop(gk_kube_watch *w)
{
	if (!w)
		return;
	w->dead = true;
	w->cbs.on_event = NULL;
	w->cbs.on_synced = NULL;
	w->cbs.on_error = NULL;
	if (w->busy)
		return; /* freed when the callback stack unwinds */
	watch_free(w);
}

void gk_kube_watch_stats_get(const gk_kube_watch *w, gk_kube_watch_stats *out)
{
	*out = w->stats;
	out->cached = w->keys.n;
	out->current = w->stats.synced && !w->relist_needed && !w->erred;
	out->bad_docs = w->stats.bad_docs + gk_kube_framer_bad(w->framer);
	snprintf(out->rv, sizeof out->rv, "%s", w->rv);
}
