/* gpukmm — keyed work queue for one event loop (DESIGN.md §2).
 *
 * The controller-runtime work queue, reduced to what a single-threaded service
 * needs, as a pure data structure: time is always passed in (`now`, ms of any
 * monotonic clock), so tests drive it without sleeping and a service plugs it
 * into gk_loop with a timer armed for gk_wq_next_ms().
 *
 * Semantics:
 *  - add(key): the key becomes ready. Adding a key that is already ready is a
 *    no-op (dedup); ready keys are handed out in the order they became ready.
 *  - get() hands out a ready key and marks it "processing". A key is never
 *    handed out twice at once: add() of a processing key only marks it dirty,
 *    and done() puts it back in the ready order.
 *  - add_after(key, ms): the key becomes ready at now+ms; with several pending
 *    delays the earliest wins (a requeue_after never gets later).
 *  - add_rate_limited(key): per-key exponential failure backoff, base·2^failures
 *    capped (default 5 ms → 1000 s, like controller-runtime's
 *    ItemExponentialFailureRateLimiter); forget(key) resets it after a success.
 *  - Bounded: at most max_keys distinct keys are tracked (ready, waiting,
 *    processing or with a failure count); adding one more fails with
 *    GK_RESOURCE_EXHAUSTED and changes nothing.
 *
 * Lookups are linear in the number of tracked keys: the queue holds
 * ClusterPolicy names (a handful), and max_keys bounds the worst case. */
#ifndef GPUKMM_WORKQUEUE_H
#define GPUKMM_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/err.h"

typedef struct gk_wq gk_wq;

typedef struct gk_wq_opts {
	size_t max_keys;         /* 0 = 1024 */
	size_t max_key_len;      /* 0 = 253 (a DNS subdomain) */
	int64_t base_delay_ms;   /* 0 = 5 */
	int64_t max_delay_ms;    /* 0 = 1000000 (1000 s) */
} gk_wq_opts;

typedef struct gk_wq_stats {
	uint64_t adds;           /* add/add_after/add_rate_limited calls accepted */
	uint64_t deduped;        /* adds that found the key already ready or pending */
	uint64_t retries;        /* add_rate_limited calls */
	uint64_t refused;        /* adds refused (bound or bad key) */
	uint64_t handed_out;     /* get() results */
	size_t tracked;          /* keys currently tracked */
	size_t ready;            /* keys ready now (not processing) */
	size_t processing;
	size_t waiting;          /* keys with a pending delay and not ready */
} gk_wq_stats;

/* opts may be NULL (all defaults). */
int gk_wq_new(gk_wq **out, const gk_wq_opts *opts, gk_err *err);
void gk_wq_free(gk_wq *q);

/* Key: non-empty, at most max_key_len bytes, copied. Errors: INVALID_ARGUMENT
 * (bad key), RESOURCE_EXHAUSTED (bound reached). */
int gk_wq_add(gk_wq *q, const char *key, gk_err *err);
/* delay_ms <= 0 is add(). */
int gk_wq_add_after(gk_wq *q, const char *key, int64_t delay_ms, int64_t now, gk_err *err);
/* Requeue after the key's next backoff delay (which is returned in *delay_ms if
 * non-NULL), and count one more failure. */
int gk_wq_add_rate_limited(gk_wq *q, const char *key, int64_t now, int64_t *delay_ms,
			   gk_err *err);
/* Reset the failure count (the key stays queued if it is). */
void gk_wq_forget(gk_wq *q, const char *key);
/* Failures counted since the last forget (0 for unknown keys). */
unsigned gk_wq_failures(const gk_wq *q, const char *key);
/* The backoff the next add_rate_limited would use, without counting. */
int64_t gk_wq_backoff_ms(const gk_wq *q, const char *key);

/* Hand out the next ready key (moving due delayed keys to ready first); NULL if
 * none is ready at `now`. The string stays valid until gk_wq_done(key). */
const char *gk_wq_get(gk_wq *q, int64_t now);
/* Processing of `key` finished; if it was added meanwhile it becomes ready
 * again. Unknown or not-processing keys are ignored. */
void gk_wq_done(gk_wq *q, const char *key);

/* ms until get() may return a key: 0 = now, -1 = nothing ready or waiting
 * (keys that are only processing do not count). */
int64_t gk_wq_next_ms(const gk_wq *q, int64_t now);

bool gk_wq_is_processing(const gk_wq *q, const char *key);
size_t gk_wq_len(const gk_wq *q);    /* keys ready or waiting (not processing only) */
void gk_wq_stats_get(const gk_wq *q, gk_wq_stats *out);

#endif
