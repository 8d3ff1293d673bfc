/* lib/workqueue/sched.c: a gk_wq driven by a gk_loop timer — the timer follows
 * the earliest deadline, nothing is armed when the queue is empty, each ready
 * key reaches run() once, per_tick bounds a tick and may() holds keys back.
 * Waits are gk_loop_once with deadlines, never sleeps. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "gpukmm/ipc.h"
#include "gpukmm/wqsched.h"

#define MAXRUN 64

typedef struct fx {
	gk_loop *l;
	gk_wq *q;
	gk_wq_sched s;
	bool allow;            /* may() answer */
	int cap;               /* > 0: at most cap keys held (not done) at once */
	bool hold;             /* run() keeps keys (done later, like modmgr's async passes) */
	int held;
	char got[MAXRUN][32];
	int n_got;
} fx;

static bool fx_may(void *user)
{
	fx *f = user;
	return f->allow && (f->cap <= 0 || f->held < f->cap);
}

static void fx_run(void *user, const char *key)
{
	fx *f = user;
	cr_assert_lt(f->n_got, MAXRUN);
	snprintf(f->got[f->n_got++], sizeof(f->got[0]), "%s", key);
	if (f->hold)
		f->held++;
	else
		gk_wq_done(f->q, key);
}

static void fx_init(fx *f, int per_tick)
{
	memset(f, 0, sizeof(*f));
	gk_err e;
	cr_assert_eq(gk_loop_new(&f->l, &e), GK_OK);
	cr_assert_eq(gk_wq_new(&f->q, NULL, &e), GK_OK);
	f->allow = true;
	const gk_wq_sched_opts o = { .per_tick = per_tick, .may = fx_may, .run = fx_run, .user = f };
	gk_wq_sched_init(&f->s, f->l, f->q, &o);
}

static void fx_fini(fx *f)
{
	gk_wq_sched_cancel(&f->s);
	gk_loop_free(f->l);
	gk_wq_free(f->q);
}

/* Run the loop until run() has seen `n` keys in all, or fail after deadline_ms. */
static void run_until(fx *f, int n, int64_t deadline_ms)
{
	int64_t end = gk_mono_ms() + deadline_ms;
	while (f->n_got < n) {
		int64_t left = end - gk_mono_ms();
		cr_assert_gt(left, 0, "only %d of %d keys handed out before the deadline", f->n_got, n);
		gk_loop_once(f->l, (int)left);
	}
}

/* The queue is empty: a kick leaves no timer and the loop has nothing to run. */
static void expect_idle(fx *f)
{
	gk_wq_sched_kick(&f->s);
	cr_assert_eq(f->s.timer, 0);
	cr_assert_eq(f->s.depth, 0);
	cr_assert_eq(gk_loop_once(f->l, 0), 0);
}

Test(wqsched, nothing_armed_when_empty)
{
	fx f;
	fx_init(&f, 0);
	expect_idle(&f);
	fx_fini(&f);
}

Test(wqsched, timer_follows_the_earliest_deadline)
{
	fx f;
	fx_init(&f, 0);
	int64_t t0 = gk_mono_ms();
	gk_wq_add_after(f.q, "late", 60000, t0, NULL);
	gk_wq_sched_kick(&f.s);
	gk_timer_id first = f.s.timer;
	cr_assert_neq(first, 0);
	cr_assert_geq(f.s.due, t0 + 60000);
	cr_assert_eq(f.s.depth, 1);

	/* a later deadline leaves the armed timer alone */
	gk_wq_add_after(f.q, "later", 120000, gk_mono_ms(), NULL);
	gk_wq_sched_kick(&f.s);
	cr_assert_eq(f.s.timer, first);
	cr_assert_eq(f.s.depth, 2);

	/* a key added after with an earlier deadline re-arms */
	int64_t t1 = gk_mono_ms();
	gk_wq_add_after(f.q, "soon", 30, t1, NULL);
	gk_wq_sched_kick(&f.s);
	cr_assert_neq(f.s.timer, first);
	cr_assert_geq(f.s.due, t1 + 30);
	cr_assert_lt(f.s.due, t0 + 60000);

	/* it fires (once "soon" is due), hands out only the due key, re-arms for "late" */
	run_until(&f, 1, 5000);
	cr_assert_geq(gk_mono_ms(), t1 + 30);
	cr_assert_str_eq(f.got[0], "soon");
	cr_assert_neq(f.s.timer, 0);
	cr_assert_geq(f.s.due, t0 + 60000);
	cr_assert_eq(f.s.depth, 2);

	/* the queue emptied behind the timer's back: a kick cancels it */
	gk_wq_free(f.q);
	gk_err e;
	cr_assert_eq(gk_wq_new(&f.q, NULL, &e), GK_OK);
	f.s.q = f.q;
	expect_idle(&f);
	fx_fini(&f);
}

Test(wqsched, each_ready_key_once_in_order_and_per_tick)
{
	fx f;
	fx_init(&f, 2);
	const char *keys[] = { "a", "b", "c", "d", "e" };
	for (size_t i = 0; i < 5; i++)
		gk_wq_add(f.q, keys[i], NULL);
	gk_wq_add(f.q, "b", NULL); /* deduped */
	gk_wq_sched_kick(&f.s);
	cr_assert_eq(f.s.depth, 5);
	/* one tick: at most per_tick keys, then re-armed for the rest */
	int64_t end = gk_mono_ms() + 5000;
	while (f.n_got == 0 && gk_mono_ms() < end)
		gk_loop_once(f.l, 1000);
	cr_assert_eq(f.n_got, 2, "per_tick bounds one tick");
	cr_assert_neq(f.s.timer, 0, "re-armed for the keys left");
	run_until(&f, 5, 5000);
	for (int i = 0; i < 5; i++)
		cr_assert_str_eq(f.got[i], keys[i]);
	/* nothing more: the timer is gone and no key comes twice */
	gk_loop_once(f.l, 0);
	cr_assert_eq(f.n_got, 5);
	cr_assert_eq(f.s.timer, 0);
	cr_assert_eq(f.s.depth, 0);
	fx_fini(&f);
}

Test(wqsched, not_now_holds_keys_back)
{
	fx f;
	fx_init(&f, 0);
	f.allow = false; /* e.g. the view is resyncing */
	gk_wq_add(f.q, "a", NULL);
	gk_wq_sched_kick(&f.s);
	cr_assert_eq(f.s.timer, 0, "no timer while not allowed");
	cr_assert_eq(gk_loop_once(f.l, 20), 0);
	cr_assert_eq(f.n_got, 0);

	/* a timer armed before the condition turned: the tick hands nothing out
	 * and does not re-arm (whoever lifts the condition kicks) */
	f.allow = true;
	gk_wq_sched_kick(&f.s);
	cr_assert_neq(f.s.timer, 0);
	f.allow = false;
	cr_assert_eq(gk_loop_once(f.l, 1000), 1);
	cr_assert_eq(f.n_got, 0);
	cr_assert_eq(f.s.timer, 0);

	f.allow = true;
	gk_wq_sched_kick(&f.s);
	run_until(&f, 1, 5000);
	cr_assert_str_eq(f.got[0], "a");
	fx_fini(&f);
}

Test(wqsched, in_flight_cap_holds_keys_until_a_slot_frees)
{
	fx f;
	fx_init(&f, 0);
	f.hold = true; /* keys stay processing, like modmgr's passes waiting for the API */
	f.cap = 2;
	gk_wq_add(f.q, "a", NULL);
	gk_wq_add(f.q, "b", NULL);
	gk_wq_add(f.q, "c", NULL);
	gk_wq_sched_kick(&f.s);
	run_until(&f, 2, 5000);
	gk_loop_once(f.l, 20);
	cr_assert_eq(f.n_got, 2, "the cap stops the tick");
	cr_assert_eq(f.s.timer, 0, "nothing armed while no slot is free");
	/* "a" may be added again while processing: it comes back after done, once */
	gk_wq_add(f.q, "a", NULL);
	gk_wq_sched_kick(&f.s);
	cr_assert_eq(f.s.timer, 0);

	/* a pass ends: done + kick, the next key goes out */
	f.held--;
	gk_wq_done(f.q, "a");
	gk_wq_sched_kick(&f.s);
	run_until(&f, 3, 5000);
	cr_assert_str_eq(f.got[2], "c");
	f.held--;
	gk_wq_done(f.q, "b");
	gk_wq_sched_kick(&f.s);
	run_until(&f, 4, 5000);
	cr_assert_str_eq(f.got[3], "a");
	gk_loop_once(f.l, 20);
	cr_assert_eq(f.n_got, 4);
	fx_fini(&f);
}
