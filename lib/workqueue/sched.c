/* gpukmm — a gk_wq driven by a gk_loop timer (see include/gpukmm/wqsched.h). */
#include "gpukmm/wqsched.h"

#include "gpukmm/ipc.h"

#define PER_TICK_DEFAULT 32

static bool may(const gk_wq_sched *s)
{
	return !s->o.may || s->o.may(s->o.user);
}

static void on_tick(gk_loop *l, gk_timer_id id, void *user)
{
	gk_wq_sched *s = user;
	s->timer = 0;
	if (!may(s))
		return; /* whoever lifts the "not now" kicks again */
	for (int i = 0; i < s->o.per_tick && may(s); i++) {
		const char *k = gk_wq_get(s->q, gk_mono_ms());
		if (!k)
			break;
		s->o.run(s->o.user, k);
	}
	gk_wq_sched_kick(s);
}

void gk_wq_sched_init(gk_wq_sched *s, gk_loop *l, gk_wq *q, const gk_wq_sched_opts *o)
{
	*s = (gk_wq_sched){ .loop = l, .q = q, .o = *o };
	if (s->o.per_tick <= 0)
		s->o.per_tick = PER_TICK_DEFAULT;
}

void gk_wq_sched_cancel(gk_wq_sched *s)
{
	if (s->timer)
		gk_loop_cancel(s->loop, s->timer);
	s->timer = 0;
}

void gk_wq_sched_kick(gk_wq_sched *s)
{
	if (!may(s))
		return;
	int64_t now = gk_mono_ms();
	int64_t next = gk_wq_next_ms(s->q, now);
	gk_wq_stats qs;
	gk_wq_stats_get(s->q, &qs);
	s->depth = qs.ready + qs.waiting;
	if (next < 0) {
		gk_wq_sched_cancel(s);
		return;
	}
	if (s->timer && s->due <= now + next)
		return; /* armed early enough already */
	gk_wq_sched_cancel(s);
	s->due = now + next;
	s->timer = gk_loop_timer(s->loop, next, on_tick, s);
}
