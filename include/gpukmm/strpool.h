/* gpukmm — a pool of shared, reference-counted strings (interning). A view
 * that keeps the same strings for thousands of objects (label keys and values,
 * kernel versions of Nodes) holds one copy of each: equal strings from one
 * pool are the same pointer, so they also compare by pointer. Not thread-safe
 * (a service's loop thread). Built on gk_kmap. */
#ifndef GPUKMM_STRPOOL_H
#define GPUKMM_STRPOOL_H

#include <stddef.h>

#include "gpukmm/kmap.h"

typedef struct gk_strpool {
	gk_kmap m;
} gk_strpool;

/* The pooled copy of the first `max` bytes at most of s (the whole string for
 * SIZE_MAX), one reference more; "" (static, not counted) for NULL or an empty
 * string; NULL on OOM. */
const char *gk_strpool_get(gk_strpool *p, const char *s, size_t max);
/* Drops one reference of a string gk_strpool_get returned (NULL, "" ignored);
 * the last one frees it. */
void gk_strpool_put(gk_strpool *p, const char *s);
/* Distinct strings held. */
size_t gk_strpool_size(const gk_strpool *p);

#endif
