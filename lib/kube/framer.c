/* Watch stream framing. The body of a watch is a series of JSON documents with
 * arbitrary chunk boundaries. We scan each byte once (string/escape/depth state
 * survives between chunks, so no re-parsing: O(n)), cut a document at the brace
 * that closes it (newline or not), parse it once with cJSON.
 *
 * A line that does not start a JSON object, a document broken by a raw newline
 * (the apiserver writes one compact document per line, so a newline inside an
 * open document means the line is damaged), or a document cJSON rejects, is
 * counted and skipped: a bad line never stalls the stream (kubernetes-client/c
 * stalls forever on one). */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kube.h"
#include "gpukmm/log.h"

struct gk_kube_framer {
	char *buf;
	size_t len, cap, max_doc;
	size_t scan;       /* next byte to look at */
	long doc_start;    /* -1 = between documents */
	int depth;
	bool in_str, esc, skipping;
	uint64_t bad, docs;
};

gk_kube_framer *gk_kube_framer_new(size_t max_doc)
{
	gk_kube_framer *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->max_doc = max_doc ? max_doc : (16u << 20);
	f->doc_start = -1;
	return f;
}

void gk_kube_framer_free(gk_kube_framer *f)
{
	if (!f)
		return;
	free(f->buf);
	free(f);
}

static void clear_state(gk_kube_framer *f)
{
	f->len = f->scan = 0;
	f->doc_start = -1;
	f->depth = 0;
	f->in_str = f->esc = f->skipping = false;
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
	if (f->doc_start >= 0)
		bad_line(f, "truncated document at end of stream");
	clear_state(f);
}

int gk_kube_framer_feed(gk_kube_framer *f, const char *data, size_t len, gk_kube_doc_fn fn,
			void *user)
{
	if (len == 0)
		return 0;
	if (f->len + len > f->cap) {
		size_t nc = f->cap ? f->cap : 16384;
		while (nc < f->len + len)
			nc *= 2;
		char *nb = realloc(f->buf, nc);
		if (!nb) {
			clear_state(f);
			return GK_RESOURCE_EXHAUSTED;
		}
		f->buf = nb;
		f->cap = nc;
	}
	memcpy(f->buf + f->len, data, len);
	f->len += len;

	size_t i = f->scan;
	for (; i < f->len; i++) {
		char c = f->buf[i];
		if (f->skipping) {
			if (c == '\n')
				f->skipping = false;
			continue;
		}
		if (f->doc_start < 0) {
			if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
				continue;
			if (c == '{') {
				f->doc_start = (long)i;
				f->depth = 1;
				f->in_str = f->esc = false;
				continue;
			}
			bad_line(f, "not a JSON object");
			f->skipping = true;
			continue;
		}
		if (f->in_str) {
			if (f->esc)
				f->esc = false;
			else if (c == '\\')
				f->esc = true;
			else if (c == '"')
				f->in_str = false;
			else if (c == '\n') {
				bad_line(f, "newline inside a string");
				f->doc_start = -1;
			}
			continue;
		}
		switch (c) {
		case '"': f->in_str = true; break;
		case '{': case '[': f->depth++; break;
		case '}': case ']':
			if (--f->depth == 0) {
				size_t start = (size_t)f->doc_start;
				f->doc_start = -1;
				cJSON *doc = cJSON_ParseWithLength(f->buf + start, i - start + 1);
				if (!doc) {
					bad_line(f, "invalid JSON");
				} else {
					f->docs++;
					if (fn(user, doc)) {
						clear_state(f);
						return GK_CANCELLED;
					}
				}
			}
			break;
		case '\n':
			bad_line(f, "unterminated document");
			f->doc_start = -1;
			break;
		}
	}
	/* keep only the open document */
	if (f->doc_start < 0) {
		f->len = f->scan = 0;
	} else {
		size_t start = (size_t)f->doc_start, keep = f->len - start;
		if (keep > f->max_doc) {
			bad_line(f, "document larger than the limit");
			clear_state(f);
			return GK_RESOURCE_EXHAUSTED;
		}
		if (start)
			memmove(f->buf, f->buf + start, keep);
		f->len = keep;
		f->scan = keep;
		f->doc_start = 0;
	}
	return 0;
}
