/* Test/bench helper: W watchers (list + watch with resume, relist on 410) follow
 * /api/v1/nodes while one writer creates N nodes, patches each once and deletes every
 * tenth. Each watcher then compares its state with a final list: no event lost, none
 * duplicated. Prints one JSON line with counts and rates.
 *   kubesim_load URL NODES WATCHERS [WATCH_TIMEOUT_S]
 * Exit status 0 if every watcher is consistent. */
#include <cJSON.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAPCAP (1 << 16)

static const char *BASE;
static int WATCH_TIMEOUT = 5;
static _Atomic uint64_t target_rv; /* 0 until the writer is done */

struct ent {
	char *name;
	uint64_t rv;
	int used;
};

struct watcher {
	pthread_t th;
	struct ent *map;
	uint64_t last_rv;
	long events, resumes, relists, dups, bookmarks, bad;
	int need_relist, stop, consistent;
	char *line;
	size_t len, cap;
	char why[256];
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t hash(const char *s)
{
	size_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct ent *map_find(struct ent *m, const char *name, int insert)
{
	size_t i = hash(name) & (MAPCAP - 1);
	struct ent *tomb = NULL;
	for (;;) {
		if (!m[i].name) {
			if (!insert)
				return NULL;
			struct ent *e = tomb ? tomb : &m[i];
			if (!e->name)
				e->name = strdup(name);
			e->used = 1;
			return e;
		}
		if (strcmp(m[i].name, name) == 0) {
			if (!m[i].used && !insert)
				return NULL;
			m[i].used = 1;
			return &m[i];
		}
		i = (i + 1) & (MAPCAP - 1);
	}
}

static void map_clear(struct ent *m)
{
	for (int i = 0; i < MAPCAP; i++)
		m[i].used = 0;
}

struct mem {
	char *p;
	size_t n;
};

static size_t to_mem(char *d, size_t s, size_t n, void *u)
{
	struct mem *m = u;
	char *np = realloc(m->p, m->n + s * n + 1);
	if (!np)
		return 0;
	m->p = np;
	memcpy(m->p + m->n, d, s * n);
	m->n += s * n;
	m->p[m->n] = 0;
	return s * n;
}

static cJSON *http(CURL *c, const char *method, const char *url, const char *body, const char *ctype, long *code)
{
	struct mem m = { 0 };
	struct curl_slist *h = NULL;
	if (ctype) {
		char hb[128];
		snprintf(hb, sizeof(hb), "Content-Type: %s", ctype);
		h = curl_slist_append(NULL, hb);
	}
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_mem);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	CURLcode rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, code);
	curl_slist_free_all(h);
	cJSON *j = rc == CURLE_OK && m.p ? cJSON_Parse(m.p) : NULL;
	free(m.p);
	return j;
}

static uint64_t rv_of(const cJSON *o)
{
	const cJSON *r = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "resourceVersion");
	return cJSON_IsString(r) ? strtoull(r->valuestring, NULL, 10) : 0;
}

static const char *name_of(const cJSON *o)
{
	const cJSON *r = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "name");
	return cJSON_IsString(r) ? r->valuestring : "";
}

static int relist(struct watcher *w, CURL *c)
{
	char url[512];
	snprintf(url, sizeof(url), "%s/api/v1/nodes", BASE);
	long code = 0;
	cJSON *l = http(c, "GET", url, NULL, NULL, &code);
	if (!l || code != 200) {
		cJSON_Delete(l);
		return -1;
	}
	map_clear(w->map);
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(l, "items")) map_find(w->map, name_of(it), 1)->rv = rv_of(it);
	w->last_rv = rv_of(l);
	cJSON_Delete(l);
	return 0;
}

static void on_line(struct watcher *w, const char *line)
{
	cJSON *ev = cJSON_Parse(line);
	const cJSON *t = cJSON_GetObjectItem(ev, "type");
	const cJSON *o = cJSON_GetObjectItem(ev, "object");
	if (!cJSON_IsString(t) || !o) {
		w->bad++;
		cJSON_Delete(ev);
		return;
	}
	uint64_t rv = rv_of(o);
	const char *ty = t->valuestring;
	if (strcmp(ty, "ERROR") == 0) {
		w->need_relist = 1;
	} else if (strcmp(ty, "BOOKMARK") == 0) {
		w->bookmarks++;
		if (rv > w->last_rv)
			w->last_rv = rv;
	} else {
		w->events++;
		if (rv <= w->last_rv)
			w->dups++;
		if (strcmp(ty, "DELETED") == 0) {
			struct ent *e = map_find(w->map, name_of(o), 0);
			if (e)
				e->used = 0;
		} else {
			map_find(w->map, name_of(o), 1)->rv = rv;
		}
		w->last_rv = rv;
	}
	uint64_t tgt = atomic_load(&target_rv);
	if (tgt && w->last_rv >= tgt)
		w->stop = 1;
	cJSON_Delete(ev);
}

static size_t on_stream(char *d, size_t s, size_t n, void *u)
{
	struct watcher *w = u;
	size_t len = s * n;
	for (size_t i = 0; i < len; i++) {
		if (w->len + 1 >= w->cap) {
			size_t nc = w->cap ? w->cap * 2 : 65536;
			char *np = realloc(w->line, nc);
			if (!np)
				return 0;
			w->line = np;
			w->cap = nc;
		}
		if (d[i] == '\n') {
			w->line[w->len] = 0;
			if (w->len)
				on_line(w, w->line);
			w->len = 0;
		} else {
			w->line[w->len++] = d[i];
		}
	}
	return w->stop || w->need_relist ? 0 : len;
}

static void *watch_main(void *arg)
{
	struct watcher *w = arg;
	CURL *c = curl_easy_init();
	if (!c || relist(w, c)) {
		snprintf(w->why, sizeof(w->why), "initial list failed");
		return NULL;
	}
	double deadline = now_s() + 600;
	while (!w->stop && now_s() < deadline) {
		char url[512];
		snprintf(url, sizeof(url), "%s/api/v1/nodes?watch=1&resourceVersion=%" PRIu64
			 "&allowWatchBookmarks=true&timeoutSeconds=%d", BASE, w->last_rv, WATCH_TIMEOUT);
		curl_easy_reset(c);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		w->len = 0;
		CURLcode crc = curl_easy_perform(c);
		if (crc == CURLE_COULDNT_CONNECT) {
			snprintf(w->why, sizeof(w->why), "server gone");
			break;
		}
		uint64_t done_at = atomic_load(&target_rv);
		if (w->stop || (done_at && w->last_rv >= done_at))
			break;
		if (w->need_relist) {
			w->need_relist = 0;
			w->relists++;
			if (relist(w, c)) {
				snprintf(w->why, sizeof(w->why), "relist failed");
				break;
			}
			uint64_t tgt = atomic_load(&target_rv);
			if (tgt && w->last_rv >= tgt)
				break;
		} else {
			w->resumes++;
		}
	}
	/* compare with the final state */
	char url[512];
	snprintf(url, sizeof(url), "%s/api/v1/nodes", BASE);
	long code = 0;
	cJSON *l = http(c, "GET", url, NULL, NULL, &code);
	int n = 0, mine = 0;
	w->consistent = l != NULL;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(l, "items")) {
		n++;
		struct ent *e = map_find(w->map, name_of(it), 0);
		if (!e || e->rv != rv_of(it)) {
			w->consistent = 0;
			snprintf(w->why, sizeof(w->why), "%s: watched rv %" PRIu64 ", listed %" PRIu64, name_of(it),
				 e ? e->rv : 0, rv_of(it));
		}
	}
	for (int i = 0; i < MAPCAP; i++)
		mine += w->map[i].used;
	if (mine != n) {
		w->consistent = 0;
		snprintf(w->why, sizeof(w->why), "watched %d objects, listed %d", mine, n);
	}
	if (w->dups)
		w->consistent = 0;
	cJSON_Delete(l);
	curl_easy_cleanup(c);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: kubesim_load URL NODES WATCHERS [WATCH_TIMEOUT_S]\n");
		return 2;
	}
	BASE = argv[1];
	int nodes = atoi(argv[2]), nw = atoi(argv[3]);
	if (argc > 4)
		WATCH_TIMEOUT = atoi(argv[4]);
	if (nodes < 1 || nw < 1 || nw > 64 || WATCH_TIMEOUT < 1)
		return 2;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct watcher *ws = calloc((size_t)nw, sizeof(*ws));
	for (int i = 0; i < nw; i++) {
		ws[i].map = calloc(MAPCAP, sizeof(struct ent));
		pthread_create(&ws[i].th, NULL, watch_main, &ws[i]);
	}
	CURL *c = curl_easy_init();
	double t0 = now_s();
	long writes = 0, errors = 0;
	char url[512], body[512];
	for (int i = 0; i < nodes; i++) {
		snprintf(url, sizeof(url), "%s/api/v1/nodes", BASE);
		snprintf(body, sizeof(body),
			 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"load-%05d\",\"labels\":{\"i\":\"%d\"}},"
			 "\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.8.0-%d\"}}}",
			 i, i, i % 7);
		long code = 0;
		cJSON_Delete(http(c, "POST", url, body, "application/json", &code));
		writes++;
		errors += code != 201;
	}
	for (int i = 0; i < nodes; i++) {
		snprintf(url, sizeof(url), "%s/api/v1/nodes/load-%05d", BASE, i);
		long code = 0;
		cJSON_Delete(http(c, "PATCH", url, "{\"metadata\":{\"labels\":{\"ready\":\"yes\"}}}",
				  "application/merge-patch+json", &code));
		writes++;
		errors += code != 200;
	}
	for (int i = 0; i < nodes; i += 10) {
		snprintf(url, sizeof(url), "%s/api/v1/nodes/load-%05d", BASE, i);
		long code = 0;
		cJSON_Delete(http(c, "DELETE", url, NULL, NULL, &code));
		writes++;
		errors += code != 200;
	}
	double tw = now_s();
	snprintf(url, sizeof(url), "%s/api/v1/nodes?limit=1", BASE);
	long code = 0;
	cJSON *l = http(c, "GET", url, NULL, NULL, &code);
	atomic_store(&target_rv, rv_of(l));
	cJSON_Delete(l);
	curl_easy_cleanup(c);
	long events = 0, resumes = 0, relists = 0, dups = 0, bookmarks = 0;
	int ok = 1;
	for (int i = 0; i < nw; i++) {
		pthread_join(ws[i].th, NULL);
		events += ws[i].events;
		resumes += ws[i].resumes;
		relists += ws[i].relists;
		dups += ws[i].dups;
		bookmarks += ws[i].bookmarks;
		if (!ws[i].consistent) {
			ok = 0;
			fprintf(stderr, "watcher %d inconsistent: %s (dups %ld)\n", i, ws[i].why, ws[i].dups);
		}
		for (int k = 0; k < MAPCAP; k++)
			free(ws[i].map[k].name);
		free(ws[i].map);
		free(ws[i].line);
	}
	double t1 = now_s();
	printf("{\"nodes\":%d,\"watchers\":%d,\"writes\":%ld,\"writeErrors\":%ld,\"writeSeconds\":%.3f,"
	       "\"writesPerSecond\":%.0f,\"totalSeconds\":%.3f,\"eventsReceived\":%ld,\"eventsPerSecond\":%.0f,"
	       "\"resumes\":%ld,\"relists\":%ld,\"bookmarks\":%ld,\"duplicates\":%ld,\"consistent\":%s}\n",
	       nodes, nw, writes, errors, tw - t0, writes / (tw - t0), t1 - t0, events, events / (t1 - t0), resumes,
	       relists, bookmarks, dups, ok ? "true" : "false");
	free(ws);
	curl_global_cleanup();
	return ok && !errors ? 0 : 1;
}
