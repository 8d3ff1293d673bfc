/* gpukmm — a gk_wq bound to a gk_loop (DESIGN.md §2).
 *
 * The queue itself (workqueue.h) is pure; this is the one place that drives it
 * from a service's event loop: one loop timer kept armed for the queue's next
 * deadline (gk_wq_next_ms), and on that timer the ready keys handed to `run`,
 * at most per_tick of them, then the timer re-armed.
 *
 *  - gk_wq_sched_kick() after anything that may have changed the queue (adds,
 *    done, a "not now" condition lifted): the timer is armed for the earliest
 *    deadline, re-armed if the deadline moved earlier, left alone if it did not,
 *    cancelled when nothing is ready or waiting.
 *  - may(user) is the service's "not now" (a view not synced, no free in-flight
 *    slot, stopping): while it is false no timer is armed and no key is handed
 *    out, and whoever lifts it calls kick. Checked before each key of a tick.
 *  - run(user, key) gets each ready key once; the key string stays valid until
 *    gk_wq_done(q, key), which the caller calls when the key's processing ends
 *    (inside run, or later from another callback, followed by a kick).
 *
 * Time is CLOCK_MONOTONIC ms (gk_mono_ms), the loop's timer clock. */
#ifndef GPUKMM_WQSCHED_H
#define GPUKMM_WQSCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "gpukmm/loop.h"
#include "gpukmm/workqueue.h"

typedef struct gk_wq_sched_opts {
	int per_tick;                               /* keys handed out per timer tick; 0 = 32 */
	bool (*may)(void *user);                    /* NULL = always */
	void (*run)(void *user, const char *key);   /* required */
	void *user;
} gk_wq_sched_opts;

typedef struct gk_wq_sched {
	gk_loop *loop;
	gk_wq *q;
	gk_wq_sched_opts o;
	gk_timer_id timer;   /* 0 = none armed */
	int64_t due;         /* monotonic ms the armed timer fires at */
	uint64_t depth;      /* keys ready or waiting at the last kick that may() allowed (a gauge) */
} gk_wq_sched;

/* Binds q to l; arms nothing until the first kick. Nothing to free: the timer
 * belongs to the loop (gk_wq_sched_cancel drops it early). */
void gk_wq_sched_init(gk_wq_sched *s, gk_loop *l, gk_wq *q, const gk_wq_sched_opts *o);
void gk_wq_sched_kick(gk_wq_sched *s);
void gk_wq_sched_cancel(gk_wq_sched *s);

#endif
