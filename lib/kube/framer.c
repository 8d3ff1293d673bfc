/* Watch stream framing. The body of a watch is a series of JSON documents with
 * arbitrary chunk boundaries; the apiserver writes one compact document per
 * line. Complete lines (the common case) are parsed where they lie — in the
 * chunk curl handed us, no copy — straight into an arena (jparse.c): one scan
 * for the newline, one parse. A document that is not complete yet, or a line
 * that does not parse, goes through a byte scanner whose string/escape/depth
 * state survives between chunks (no re-parsing: O(n)); it cuts a document at
 * the brace that closes it (newline or not). Only an unfinished document is
 * copied, into the framer's buffer, to wait for the rest.
 *
 * A line that does not start a JSON object, a document broken by a raw newline
 * (a newline inside an open document means the line is damaged), or a document
 * that is not valid JSON, is counted and skipped: a bad line never stalls the
 * stream (kubernetes-client/c stalls forever on one). */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "jparse.h"

struct gk_kube_framer {
	char *buf;         /* the unfinished document (starts at buf[0]) */
	size_t len, cap, max_doc;
	bool open;         /* buf holds an unfinished document */
	bool skipping;     /* dropping the rest of a bad line */
	int depth;         /* scanner state of the open document */
	bool in_str, esc;
	uint64_t bad, docs;
	gk_jarena arena;   /* the trees handed to the callback */
};

gk_kube_framer *gk_kube_framer_new(size_t max_doc)
{
	gk_kube_framer *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->max_doc = max_doc ? max_doc : (16u << 20);
	return f;
}

void gk_kube_framer_free(gk_kube_framer *f)
{
	if (!f)
		return;
	free(f->buf);
	gk_jarena_free(&f->arena);
	free(f);
}

static void clear_state(gk_kube_framer *f)
{
	f->len = 0;
	f->open = f->skipping = f->in_str = f->esc = false;
	f->depth = 0;
}

void gk_kube_framer_reset(gk_kube_framer *f)
{
	clear_state(f);
	/* give back a buffer grown by one huge document */
	if (f->cap > (1u << 20)) {
		free(f->buf);
		f->buf = NULL;
		f->cap = 0;
	}
	gk_jarena_reset(&f->arena);
}

uint64_t gk_kube_framer_bad(const gk_kube_framer *f) { return f->bad; }
uint64_t gk_kube_framer_docs(const gk_kube_framer *f) { return f->docs; }

static void bad_line(gk_kube_framer *f, const char *why)
{
	f->bad++;
	GK_WARN("watch stream: skipped a bad line (%s), %llu so far", why,
		(unsigned long long)f->bad);
}

void gk_kube_framer_finish(gk_kube_framer *f)
{
	if (f->open)
		bad_line(f, "truncated document at end of stream");
	clear_state(f);
}

/* A whole document s[0..n): parse, hand over, drop. 1 = the callback said stop. */
static int emit(gk_kube_framer *f, const char *s, size_t n, gk_kube_doc_fn fn, void *user)
{
	cJSON *doc = gk_jparse(&f->arena, s, n, NULL);
	int stop = 0;
	if (!doc) {
		bad_line(f, "invalid JSON");
	} else {
		f->docs++;
		stop = fn(user, doc) != 0;
	}
	gk_jarena_reset(&f->arena);
	return stop;
}

/* Scanner over s[i..n) for the open document that started at s[0] (depth etc.
 * in f). Returns the index just past its closing brace, or n when it is still
 * open; *broken when a newline inside it damaged it (index past the newline). */
static size_t scan(gk_kube_framer *f, const char *s, size_t i, size_t n, bool *broken)
{
	*broken = false;
	for (; i < n; i++) {
		char c = s[i];
		if (f->in_str) {
			if (f->esc) {
				f->esc = false;
				continue;
			}
			/* the bulk of a document is string bytes */
			while (c != '"' && c != '\\' && c != '\n' && ++i < n)
				c = s[i];
			if (i == n)
				break;
			if (c == '\\') {
				f->esc = true;
			} else if (c == '"') {
				f->in_str = false;
			} else {
				bad_line(f, "newline inside a string");
				*broken = true;
				return i + 1;
			}
			continue;
		}
		switch (c) {
		case '"': f->in_str = true; break;
		case '{': case '[': f->depth++; break;
		case '}': case ']':
			if (--f->depth == 0)
				return i + 1;
			break;
		case '\n':
			bad_line(f, "unterminated document");
			*broken = true;
			return i + 1;
		}
	}
	return n;
}

/* buf can hold n bytes (its content kept). */
static int reserve(gk_kube_framer *f, size_t n)
{
	if (n <= f->cap)
		return 0;
	size_t nc = f->cap ? f->cap : 16384;
	while (nc < n)
		nc *= 2;
	char *nb = realloc(f->buf, nc);
	if (!nb) {
		clear_state(f);
		return GK_RESOURCE_EXHAUSTED;
	}
	f->buf = nb;
	f->cap = nc;
	return 0;
}

/* Keep s[0..n) — the start of an open document — in buf for the next feed. */
static int keep_open(gk_kube_framer *f, const char *s, size_t n)
{
	if (n > f->max_doc) {
		bad_line(f, "document larger than the limit");
		clear_state(f);
		return GK_RESOURCE_EXHAUSTED;
	}
	if (reserve(f, n))
		return GK_RESOURCE_EXHAUSTED;
	memcpy(f->buf, s, n);
	f->len = n;
	f->open = true;
	return 0;
}

int gk_kube_framer_feed(gk_kube_framer *f, const char *data, size_t len, gk_kube_doc_fn fn,
			void *user)
{
	if (len == 0)
		return 0;
	size_t i = 0;
	bool broken;
	if (f->open) {
		/* the rest of the open document: scan it, appending as we go */
		size_t end = scan(f, data, 0, len, &broken);
		bool still_open = end == len && !broken && f->depth > 0;
		if (still_open && f->len + end > f->max_doc) {
			bad_line(f, "document larger than the limit");
			clear_state(f);
			return GK_RESOURCE_EXHAUSTED;
		}
		if (reserve(f, f->len + end))
			return GK_RESOURCE_EXHAUSTED;
		memcpy(f->buf + f->len, data, end);
		f->len += end;
		if (still_open)
			return 0;
		size_t n = f->len;
		clear_state(f);
		if (!broken && emit(f, f->buf, n, fn, user))
			return GK_CANCELLED;
		i = end;
	}
	while (i < len) {
		if (f->skipping) {
			const char *nl = memchr(data + i, '\n', len - i);
			if (!nl)
				return 0;
			f->skipping = false;
			i = (size_t)(nl - data) + 1;
			continue;
		}
		char c = data[i];
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
			i++;
			continue;
		}
		if (c != '{') {
			bad_line(f, "not a JSON object");
			f->skipping = true;
			i++;
			continue;
		}
		/* fast path: a whole line is here and holds a valid document */
		const char *nl = memchr(data + i, '\n', len - i);
		if (nl) {
			size_t used;
			cJSON *doc = gk_jparse(&f->arena, data + i, (size_t)(nl - data) - i, &used);
			if (doc) {
				f->docs++;
				int stop = fn(user, doc);
				gk_jarena_reset(&f->arena);
				if (stop) {
					clear_state(f);
					return GK_CANCELLED;
				}
				i += used;
				continue;
			}
			gk_jarena_reset(&f->arena);
		}
		/* the scanner: an unfinished document, or a line that did not parse
		 * (it decides where the bad part ends, as it always did) */
		f->depth = 1;
		f->in_str = f->esc = false;
		size_t end = scan(f, data, i + 1, len, &broken);
		if (broken) {
			f->depth = 0;
			f->in_str = f->esc = false;
			i = end;
			continue;
		}
		if (f->depth > 0)
			return keep_open(f, data + i, len - i);
		f->depth = 0;
		if (emit(f, data + i, end - i, fn, user)) {
			clear_state(f);
			return GK_CANCELLED;
		}
		i = end;
	}
	return 0;
}
