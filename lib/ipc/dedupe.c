/* gpukmm — dedupe cache for replies of mutating RPCs: a ring of the most recent
 * (client_id, request_id) -> reply frame, bounded by count and bytes. Lookups
 * scan from the newest: mutating calls are rare and a resend comes soon after
 * the original, so the hit is near the head. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct entry {
	uint64_t client_id, request_id;
	gk_bytes frame;   /* owned copy */
};

struct gk_dedupe {
	struct entry *ring;
	size_t cap, head, count; /* head = next slot to write */
	size_t bytes, max_bytes;
};

gk_dedupe *gk_dedupe_new(size_t max_entries, size_t max_bytes)
{
	gk_dedupe *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->cap = max_entries ? max_entries : 1;
	d->max_bytes = max_bytes;
	d->ring = calloc(d->cap, sizeof(*d->ring));
	if (!d->ring) {
		free(d);
		return NULL;
	}
	return d;
}

void gk_dedupe_free(gk_dedupe *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->cap; i++)
		free((void *)d->ring[i].frame.p);
	free(d->ring);
	free(d);
}

static size_t oldest(const gk_dedupe *d)
{
	return (d->head + d->cap - d->count) % d->cap;
}

static void evict_oldest(gk_dedupe *d)
{
	struct entry *e = &d->ring[oldest(d)];
	d->bytes -= e->frame.n;
	free((void *)e->frame.p);
	memset(e, 0, sizeof(*e));
	d->count--;
}

const gk_bytes *gk_dedupe_get(gk_dedupe *d, uint64_t client_id, uint64_t request_id)
{
	for (size_t k = 1; k <= d->count; k++) {
		struct entry *e = &d->ring[(d->head + d->cap - k) % d->cap];
		if (e->client_id == client_id && e->request_id == request_id)
			return &e->frame;
	}
	return NULL;
}

void gk_dedupe_put(gk_dedupe *d, uint64_t client_id, uint64_t request_id, const void *frame,
		   size_t len)
{
	if (len > d->max_bytes)
		return;
	void *copy = malloc(len ? len : 1);
	if (!copy)
		return;
	memcpy(copy, frame, len);
	while (d->count && (d->count == d->cap || d->bytes + len > d->max_bytes))
		evict_oldest(d);
	struct entry *e = &d->ring[d->head];
	*e = (struct entry){ client_id, request_id, { copy, len } };
	d->head = (d->head + 1) % d->cap;
	d->count++;
	d->bytes += len;
}

size_t gk_dedupe_count(const gk_dedupe *d)
{
	return d->count;
}
