/* gpukmm — keyed work queue (see include/gpukmm/workqueue.h). */
#include "gpukmm/workqueue.h"

#include <stdlib.h>
#include <string.h>

typedef struct wq_ent {
	char *key;               /* owned; stable while the entry lives */
	bool ready;              /* waiting to be handed out */
	bool processing;         /* handed out, done() not called yet */
	bool dirty;              /* added while processing: ready again after done() */
	bool has_due;            /* a delayed add is pending */
	int64_t due;             /* when (valid if has_due) */
	uint64_t ready_seq;      /* order of becoming ready (FIFO) */
	unsigned failures;
} wq_ent;

struct gk_wq {
	gk_wq_opts o;
	wq_ent *ents;
	size_t n, cap;
	uint64_t seq;
	gk_wq_stats st;
};

int gk_wq_new(gk_wq **out, const gk_wq_opts *opts, gk_err *err)
{
	*out = NULL;
	gk_wq *q = calloc(1, sizeof(*q));
	if (!q)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "workqueue: out of memory");
	if (opts)
		q->o = *opts;
	if (!q->o.max_keys)
		q->o.max_keys = 1024;
	if (!q->o.max_key_len)
		q->o.max_key_len = 253;
	if (q->o.base_delay_ms <= 0)
		q->o.base_delay_ms = 5;
	if (q->o.max_delay_ms <= 0)
		q->o.max_delay_ms = 1000 * 1000;
	if (q->o.max_delay_ms < q->o.base_delay_ms)
		q->o.max_delay_ms = q->o.base_delay_ms;
	*out = q;
	return GK_OK;
}

void gk_wq_free(gk_wq *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->n; i++)
		free(q->ents[i].key);
	free(q->ents);
	free(q);
}

static wq_ent *find(const gk_wq *q, const char *key)
{
	if (!key)
		return NULL;
	for (size_t i = 0; i < q->n; i++)
		if (strcmp(q->ents[i].key, key) == 0)
			return &q->ents[i];
	return NULL;
}

/* Drop an entry that carries no state any more. */
static void maybe_drop(gk_wq *q, wq_ent *e)
{
	if (e->ready || e->processing || e->dirty || e->has_due || e->failures)
		return;
	free(e->key);
	size_t i = (size_t)(e - q->ents);
	q->ents[i] = q->ents[q->n - 1];
	q->n--;
}

static int check_key(const gk_wq *q, const char *key, gk_err *err)
{
	if (!key || !*key)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "workqueue: empty key");
	if (strnlen(key, q->o.max_key_len + 1) > q->o.max_key_len)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "workqueue: key longer than %zu bytes",
				  q->o.max_key_len);
	return GK_OK;
}

static int lookup_or_insert(gk_wq *q, const char *key, wq_ent **out, gk_err *err)
{
	int rc = check_key(q, key, err);
	if (rc) {
		q->st.refused++;
		return rc;
	}
	wq_ent *e = find(q, key);
	if (e) {
		*out = e;
		return GK_OK;
	}
	if (q->n >= q->o.max_keys) {
		q->st.refused++;
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED,
				  "workqueue: full (%zu keys tracked), refusing key \"%s\"", q->n, key);
	}
	if (q->n == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 8;
		if (ncap > q->o.max_keys)
			ncap = q->o.max_keys;
		wq_ent *ne = realloc(q->ents, ncap * sizeof(*ne));
		if (!ne) {
			q->st.refused++;
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "workqueue: out of memory");
		}
		q->ents = ne;
		q->cap = ncap;
	}
	char *k = strdup(key);
	if (!k) {
		q->st.refused++;
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "workqueue: out of memory");
	}
	e = &q->ents[q->n++];
	memset(e, 0, sizeof(*e));
	e->key = k;
	*out = e;
	return GK_OK;
}

/* The key should be handed out (again): ready now, or dirty if processing. */
static bool mark_ready(gk_wq *q, wq_ent *e)
{
	if (e->processing) {
		bool was = e->dirty;
		e->dirty = true;
		return !was;
	}
	if (e->ready)
		return false;
	e->ready = true;
	e->ready_seq = ++q->seq;
	return true;
}

int gk_wq_add(gk_wq *q, const char *key, gk_err *err)
{
	wq_ent *e;
	int rc = lookup_or_insert(q, key, &e, err);
	if (rc)
		return rc;
	q->st.adds++;
	if (!mark_ready(q, e))
		q->st.deduped++;
	return GK_OK;
}

int gk_wq_add_after(gk_wq *q, const char *key, int64_t delay_ms, int64_t now, gk_err *err)
{
	if (delay_ms <= 0)
		return gk_wq_add(q, key, err);
	wq_ent *e;
	int rc = lookup_or_insert(q, key, &e, err);
	if (rc)
		return rc;
	q->st.adds++;
	int64_t due = now + delay_ms;
	if (e->ready || e->dirty || (e->has_due && e->due <= due)) {
		/* already due sooner: the earliest wins */
		q->st.deduped++;
		return GK_OK;
	}
	e->has_due = true;
	e->due = due;
	return GK_OK;
}

static int64_t backoff_of(const gk_wq *q, unsigned failures)
{
	int64_t d = q->o.base_delay_ms;
	for (unsigned i = 0; i < failures; i++) {
		if (d >= q->o.max_delay_ms / 2)
			return q->o.max_delay_ms;
		d *= 2;
	}
	return d > q->o.max_delay_ms ? q->o.max_delay_ms : d;
}

int64_t gk_wq_backoff_ms(const gk_wq *q, const char *key)
{
	const wq_ent *e = find(q, key);
	return backoff_of(q, e ? e->failures : 0);
}

int gk_wq_add_rate_limited(gk_wq *q, const char *key, int64_t now, int64_t *delay_ms, gk_err *err)
{
	wq_ent *e;
	int rc = lookup_or_insert(q, key, &e, err);
	if (rc)
		return rc;
	int64_t d = backoff_of(q, e->failures);
	if (e->failures < 64)
		e->failures++;
	q->st.retries++;
	if (delay_ms)
		*delay_ms = d;
	return gk_wq_add_after(q, key, d, now, err);
}

void gk_wq_forget(gk_wq *q, const char *key)
{
	wq_ent *e = find(q, key);
	if (!e)
		return;
	e->failures = 0;
	maybe_drop(q, e);
}

unsigned gk_wq_failures(const gk_wq *q, const char *key)
{
	const wq_ent *e = find(q, key);
	return e ? e->failures : 0;
}

/* Move every due delayed key to ready (or dirty), in due order. */
static void promote_due(gk_wq *q, int64_t now)
{
	for (;;) {
		wq_ent *best = NULL;
		for (size_t i = 0; i < q->n; i++) {
			wq_ent *e = &q->ents[i];
			if (e->has_due && e->due <= now && (!best || e->due < best->due))
				best = e;
		}
		if (!best)
			return;
		best->has_due = false;
		mark_ready(q, best);
	}
}

const char *gk_wq_get(gk_wq *q, int64_t now)
{
	promote_due(q, now);
	wq_ent *best = NULL;
	for (size_t i = 0; i < q->n; i++) {
		wq_ent *e = &q->ents[i];
		if (e->ready && !e->processing && (!best || e->ready_seq < best->ready_seq))
			best = e;
	}
	if (!best)
		return NULL;
	best->ready = false;
	best->processing = true;
	best->dirty = false;
	q->st.handed_out++;
	return best->key;
}

void gk_wq_done(gk_wq *q, const char *key)
{
	wq_ent *e = find(q, key);
	if (!e || !e->processing)
		return;
	e->processing = false;
	if (e->dirty) {
		e->dirty = false;
		e->ready = true;
		e->ready_seq = ++q->seq;
	}
	maybe_drop(q, e);
}

int64_t gk_wq_next_ms(const gk_wq *q, int64_t now)
{
	int64_t best = -1;
	for (size_t i = 0; i < q->n; i++) {
		const wq_ent *e = &q->ents[i];
		if (e->processing)
			continue;
		if (e->ready)
			return 0;
		if (e->has_due) {
			int64_t d = e->due - now;
			if (d < 0)
				d = 0;
			if (best < 0 || d < best)
				best = d;
		}
	}
	return best;
}

bool gk_wq_is_processing(const gk_wq *q, const char *key)
{
	const wq_ent *e = find(q, key);
	return e && e->processing;
}

size_t gk_wq_len(const gk_wq *q)
{
	size_t n = 0;
	for (size_t i = 0; i < q->n; i++)
		if (!q->ents[i].processing && (q->ents[i].ready || q->ents[i].has_due))
			n++;
	return n;
}

void gk_wq_stats_get(const gk_wq *q, gk_wq_stats *out)
{
	*out = q->st;
	out->tracked = q->n;
	out->ready = out->processing = out->waiting = 0;
	for (size_t i = 0; i < q->n; i++) {
		const wq_ent *e = &q->ents[i];
		if (e->processing)
			out->processing++;
		else if (e->ready)
			out->ready++;
		else if (e->has_due)
			out->waiting++;
	}
}
