/* lib/workqueue: dedup, one-at-a-time per key, delays, backoff, bounds.
 * The clock is a plain variable: no sleeps. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "gpukmm/workqueue.h"

static gk_wq *mk(size_t max_keys)
{
	gk_wq *q;
	gk_wq_opts o = { .max_keys = max_keys };
	gk_err e;
	cr_assert_eq(gk_wq_new(&q, &o, &e), GK_OK);
	return q;
}

Test(workqueue, empty_queue_has_nothing)
{
	gk_wq *q = mk(0);
	cr_assert_null(gk_wq_get(q, 0));
	cr_assert_eq(gk_wq_next_ms(q, 0), -1);
	cr_assert_eq(gk_wq_len(q), 0);
	gk_wq_done(q, "nope"); /* ignored */
	gk_wq_forget(q, "nope");
	cr_assert_eq(gk_wq_failures(q, "nope"), 0);
	gk_wq_free(q);
	gk_wq_free(NULL);
}

Test(workqueue, add_dedups_and_keeps_fifo_order)
{
	gk_wq *q = mk(0);
	cr_assert_eq(gk_wq_add(q, "a", NULL), 0);
	cr_assert_eq(gk_wq_add(q, "b", NULL), 0);
	cr_assert_eq(gk_wq_add(q, "a", NULL), 0);
	cr_assert_eq(gk_wq_len(q), 2);
	gk_wq_stats st;
	gk_wq_stats_get(q, &st);
	cr_assert_eq(st.deduped, 1);
	cr_assert_eq(gk_wq_next_ms(q, 100), 0);
	const char *k = gk_wq_get(q, 0);
	cr_assert_str_eq(k, "a");
	gk_wq_done(q, k);
	k = gk_wq_get(q, 0);
	cr_assert_str_eq(k, "b");
	gk_wq_done(q, k);
	cr_assert_null(gk_wq_get(q, 0));
	gk_wq_stats_get(q, &st);
	cr_assert_eq(st.tracked, 0, "idle keys are dropped");
	gk_wq_free(q);
}

Test(workqueue, key_never_handed_out_twice_at_once)
{
	gk_wq *q = mk(0);
	gk_wq_add(q, "a", NULL);
	const char *k = gk_wq_get(q, 0);
	cr_assert_str_eq(k, "a");
	cr_assert(gk_wq_is_processing(q, "a"));
	/* added while processing: not handed out again until done */
	gk_wq_add(q, "a", NULL);
	gk_wq_add(q, "a", NULL);
	cr_assert_null(gk_wq_get(q, 0));
	cr_assert_eq(gk_wq_next_ms(q, 0), -1, "a processing key is not 'ready'");
	gk_wq_done(q, "a");
	cr_assert_eq(gk_wq_next_ms(q, 0), 0);
	k = gk_wq_get(q, 0);
	cr_assert_str_eq(k, "a");
	gk_wq_done(q, "a");
	cr_assert_null(gk_wq_get(q, 0), "two adds while processing give one more pass");
	gk_wq_free(q);
}

Test(workqueue, key_string_stable_while_processing)
{
	gk_wq *q = mk(0);
	char name[16];
	gk_wq_add(q, "first", NULL);
	const char *k = gk_wq_get(q, 0);
	/* grow the table several times: the handed-out string must not move */
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		cr_assert_eq(gk_wq_add(q, name, NULL), 0);
	}
	cr_assert_str_eq(k, "first");
	gk_wq_done(q, k);
	gk_wq_free(q);
}

Test(workqueue, add_after_waits_and_earliest_wins)
{
	gk_wq *q = mk(0);
	int64_t now = 1000;
	cr_assert_eq(gk_wq_add_after(q, "a", 500, now, NULL), 0);
	cr_assert_null(gk_wq_get(q, now));
	cr_assert_eq(gk_wq_next_ms(q, now), 500);
	gk_wq_add_after(q, "a", 900, now, NULL);       /* later: ignored */
	cr_assert_eq(gk_wq_next_ms(q, now), 500);
	gk_wq_add_after(q, "a", 200, now, NULL);       /* earlier: wins */
	cr_assert_eq(gk_wq_next_ms(q, now), 200);
	cr_assert_eq(gk_wq_next_ms(q, now + 150), 50);
	cr_assert_null(gk_wq_get(q, now + 199));
	cr_assert_str_eq(gk_wq_get(q, now + 200), "a");
	gk_wq_done(q, "a");
	cr_assert_eq(gk_wq_next_ms(q, now + 200), -1);
	cr_assert_eq(gk_wq_next_ms(q, now + 10000), -1, "the later delays were absorbed");
	gk_wq_free(q);
}

Test(workqueue, add_after_zero_is_add_and_add_overrides_delay)
{
	gk_wq *q = mk(0);
	gk_wq_add_after(q, "a", 0, 0, NULL);
	cr_assert_eq(gk_wq_next_ms(q, 0), 0);
	cr_assert_str_eq(gk_wq_get(q, 0), "a");
	gk_wq_done(q, "a");
	gk_wq_add_after(q, "b", 1000, 0, NULL);
	gk_wq_add(q, "b", NULL);
	cr_assert_str_eq(gk_wq_get(q, 0), "b");
	gk_wq_done(q, "b");
	/* the pending delay is still honoured (a requeue is never lost) */
	cr_assert_eq(gk_wq_next_ms(q, 0), 1000);
	cr_assert_str_eq(gk_wq_get(q, 1000), "b");
	gk_wq_done(q, "b");
	gk_wq_free(q);
}

Test(workqueue, delay_expiring_while_processing_requeues_after_done)
{
	gk_wq *q = mk(0);
	gk_wq_add(q, "a", NULL);
	cr_assert_str_eq(gk_wq_get(q, 0), "a");
	gk_wq_add_after(q, "a", 10, 0, NULL);
	cr_assert_null(gk_wq_get(q, 50));
	gk_wq_done(q, "a");
	cr_assert_str_eq(gk_wq_get(q, 50), "a");
	gk_wq_done(q, "a");
	cr_assert_null(gk_wq_get(q, 1000));
	gk_wq_free(q);
}

Test(workqueue, due_keys_come_out_in_due_order)
{
	gk_wq *q = mk(0);
	gk_wq_add_after(q, "late", 30, 0, NULL);
	gk_wq_add_after(q, "early", 10, 0, NULL);
	gk_wq_add_after(q, "mid", 20, 0, NULL);
	const char *order[] = { "early", "mid", "late" };
	for (int i = 0; i < 3; i++) {
		const char *k = gk_wq_get(q, 100);
		cr_assert_str_eq(k, order[i]);
		gk_wq_done(q, k);
	}
	gk_wq_free(q);
}

Test(workqueue, exponential_backoff_5ms_to_1000s_and_forget)
{
	gk_wq *q = mk(0);
	int64_t expect = 5, d = -1, now = 0;
	for (int i = 0; i < 30; i++) {
		cr_assert_eq(gk_wq_backoff_ms(q, "a"), expect);
		cr_assert_eq(gk_wq_add_rate_limited(q, "a", now, &d, NULL), 0);
		cr_assert_eq(d, expect, "failure %d: %lld != %lld", i, (long long)d, (long long)expect);
		cr_assert_eq(gk_wq_next_ms(q, now), d);
		cr_assert_null(gk_wq_get(q, now + d - 1));
		const char *k = gk_wq_get(q, now + d);
		cr_assert_str_eq(k, "a");
		gk_wq_done(q, k);
		now += d;
		expect = expect * 2 > 1000000 ? 1000000 : expect * 2;
	}
	cr_assert_eq(d, 1000000, "capped at 1000 s");
	cr_assert_eq(gk_wq_failures(q, "a"), 30);
	gk_wq_forget(q, "a");
	cr_assert_eq(gk_wq_failures(q, "a"), 0);
	gk_wq_add_rate_limited(q, "a", now, &d, NULL);
	cr_assert_eq(d, 5, "forget resets the backoff");
	/* backoff is per key */
	gk_wq_add_rate_limited(q, "b", now, &d, NULL);
	cr_assert_eq(d, 5);
	gk_wq_free(q);
}

Test(workqueue, failures_keep_a_key_tracked_until_forget)
{
	gk_wq *q = mk(2);
	gk_wq_add_rate_limited(q, "a", 0, NULL, NULL);
	cr_assert_str_eq(gk_wq_get(q, 5), "a");
	gk_wq_done(q, "a");
	gk_wq_stats st;
	gk_wq_stats_get(q, &st);
	cr_assert_eq(st.tracked, 1);
	gk_wq_forget(q, "a");
	gk_wq_stats_get(q, &st);
	cr_assert_eq(st.tracked, 0);
	gk_wq_free(q);
}

Test(workqueue, bounded_refuses_new_keys_with_an_error)
{
	gk_wq *q = mk(3);
	gk_err e;
	cr_assert_eq(gk_wq_add(q, "a", &e), 0);
	cr_assert_eq(gk_wq_add(q, "b", &e), 0);
	cr_assert_eq(gk_wq_add_after(q, "c", 10, 0, &e), 0);
	cr_assert_eq(gk_wq_add(q, "d", &e), GK_RESOURCE_EXHAUSTED);
	cr_assert(strstr(e.msg, "full") && strstr(e.msg, "\"d\""), "%s", e.msg);
	cr_assert_eq(gk_wq_add_after(q, "d", 5, 0, &e), GK_RESOURCE_EXHAUSTED);
	cr_assert_eq(gk_wq_add_rate_limited(q, "d", 0, NULL, &e), GK_RESOURCE_EXHAUSTED);
	/* existing keys still accepted */
	cr_assert_eq(gk_wq_add(q, "a", &e), 0);
	cr_assert_eq(gk_wq_add(q, "c", &e), 0);
	gk_wq_stats st;
	gk_wq_stats_get(q, &st);
	cr_assert_eq(st.refused, 3);
	cr_assert_eq(st.tracked, 3);
	/* draining frees room */
	for (int i = 0; i < 3; i++) {
		const char *k = gk_wq_get(q, 0);
		cr_assert_not_null(k);
		gk_wq_done(q, k);
	}
	cr_assert_eq(gk_wq_add(q, "d", &e), 0);
	gk_wq_free(q);
}

Test(workqueue, bad_keys_rejected)
{
	gk_wq_opts o = { .max_key_len = 8 };
	gk_wq *q;
	gk_err e;
	cr_assert_eq(gk_wq_new(&q, &o, &e), 0);
	cr_assert_eq(gk_wq_add(q, "", &e), GK_INVALID_ARGUMENT);
	cr_assert_eq(gk_wq_add(q, NULL, &e), GK_INVALID_ARGUMENT);
	cr_assert_eq(gk_wq_add(q, "123456789", &e), GK_INVALID_ARGUMENT);
	cr_assert(strstr(e.msg, "longer than 8"), "%s", e.msg);
	cr_assert_eq(gk_wq_add(q, "12345678", &e), 0);
	gk_wq_free(q);
}

Test(workqueue, stats_count_states)
{
	gk_wq *q = mk(0);
	gk_wq_add(q, "a", NULL);
	gk_wq_add(q, "b", NULL);
	gk_wq_add_after(q, "c", 100, 0, NULL);
	cr_assert_str_eq(gk_wq_get(q, 0), "a");
	gk_wq_stats st;
	gk_wq_stats_get(q, &st);
	cr_assert_eq(st.processing, 1);
	cr_assert_eq(st.ready, 1);
	cr_assert_eq(st.waiting, 1);
	cr_assert_eq(st.handed_out, 1);
	cr_assert_eq(gk_wq_len(q), 2);
	gk_wq_done(q, "a");
	gk_wq_free(q);
}

/* A randomized model check: the queue against a tiny reference model. */
Test(workqueue, random_ops_never_double_handout)
{
	gk_wq *q = mk(16);
	const char *keys[] = { "k0", "k1", "k2", "k3", "k4" };
	bool proc[5] = { 0 };
	bool pending[5] = { 0 };  /* added (ready or dirty) since handed out */
	uint64_t rng = 88172645463325252ull;
	int64_t now = 0;
	for (int step = 0; step < 20000; step++) {
		rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
		int k = (int)(rng % 5), op = (int)((rng >> 8) % 4);
		now += (int64_t)((rng >> 16) % 3);
		if (op == 0) {
			gk_wq_add(q, keys[k], NULL);
			pending[k] = true;
		} else if (op == 1) {
			const char *g = gk_wq_get(q, now);
			if (g) {
				int i = g[1] - '0';
				cr_assert(!proc[i], "key %s handed out twice", g);
				cr_assert(pending[i]);
				proc[i] = true;
				pending[i] = false;
			} else {
				for (int i = 0; i < 5; i++)
					cr_assert(!pending[i] || proc[i], "ready key %d not handed out", i);
			}
		} else if (op == 2 && proc[k]) {
			gk_wq_done(q, keys[k]);
			proc[k] = false;
		}
	}
	gk_wq_free(q);
}
