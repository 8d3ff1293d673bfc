/* Supervisor pure parts: the state × event table, backoff, exit decisions, intensity. */
#include <criterion/criterion.h>
#include <signal.h>

#include "../../supervisor/sup.h"

Test(sup_fsm, every_cell_is_defined_and_names_exist)
{
	for (int s = 0; s < GK_SUP_NSTATES; s++)
		for (int e = 0; e < GK_SUP_NEVENTS; e++) {
			gk_sup_trans t = gk_sup_fsm(s, e);
			cr_assert(t.next == -1 || (t.next >= 0 && t.next < GK_SUP_NSTATES), "%d/%d", s, e);
			cr_assert_str_neq(gk_sup_action_name(t.action), "?");
			/* only a death is decided by the action */
			cr_assert_eq(t.next == -1, t.action == GK_SUP_A_DIED, "%s/%s", gk_sup_state_name(s),
				     gk_sup_event_name(e));
		}
	cr_assert_str_eq(gk_sup_state_name(GK_SUP_BACKOFF), "backoff");
	cr_assert_str_eq(gk_sup_state_name(99), "?");
	cr_assert_eq(gk_sup_fsm(99, 0).action, GK_SUP_A_NOP);
}

Test(sup_fsm, life_of_a_service)
{
	gk_sup_trans t = gk_sup_fsm(GK_SUP_DOWN, GK_SUP_EV_START);
	cr_assert_eq(t.action, GK_SUP_A_SPAWN);
	cr_assert_eq(t.next, GK_SUP_STARTING);
	t = gk_sup_fsm(GK_SUP_STARTING, GK_SUP_EV_READY);
	cr_assert_eq(t.action, GK_SUP_A_UP);
	cr_assert_eq(t.next, GK_SUP_READY);
	cr_assert_eq(gk_sup_fsm(GK_SUP_READY, GK_SUP_EV_EXIT).action, GK_SUP_A_DIED);
	cr_assert_eq(gk_sup_fsm(GK_SUP_STARTING, GK_SUP_EV_EXIT).action, GK_SUP_A_DIED);
	t = gk_sup_fsm(GK_SUP_BACKOFF, GK_SUP_EV_TIMEOUT);
	cr_assert_eq(t.action, GK_SUP_A_SPAWN);
	cr_assert_eq(t.next, GK_SUP_STARTING);
	/* hang: killed, the exit that follows is a death */
	t = gk_sup_fsm(GK_SUP_READY, GK_SUP_EV_HANG);
	cr_assert_eq(t.action, GK_SUP_A_KILL);
	cr_assert_eq(t.next, GK_SUP_READY);
	/* stop: term, then kill on timeout, then down on exit */
	t = gk_sup_fsm(GK_SUP_READY, GK_SUP_EV_STOP);
	cr_assert_eq(t.action, GK_SUP_A_TERM);
	cr_assert_eq(t.next, GK_SUP_STOPPING);
	t = gk_sup_fsm(GK_SUP_STOPPING, GK_SUP_EV_TIMEOUT);
	cr_assert_eq(t.action, GK_SUP_A_KILL);
	t = gk_sup_fsm(GK_SUP_STOPPING, GK_SUP_EV_EXIT);
	cr_assert_eq(t.action, GK_SUP_A_STOPPED);
	cr_assert_eq(t.next, GK_SUP_DOWN);
	/* a stop during backoff cancels the restart */
	t = gk_sup_fsm(GK_SUP_BACKOFF, GK_SUP_EV_STOP);
	cr_assert_eq(t.action, GK_SUP_A_CANCEL);
	cr_assert_eq(t.next, GK_SUP_DOWN);
	/* a stopping service never restarts, a late Ready changes nothing */
	cr_assert_eq(gk_sup_fsm(GK_SUP_STOPPING, GK_SUP_EV_READY).action, GK_SUP_A_NOP);
	cr_assert_eq(gk_sup_fsm(GK_SUP_STOPPING, GK_SUP_EV_START).action, GK_SUP_A_NOP);
	cr_assert_eq(gk_sup_fsm(GK_SUP_FAILED, GK_SUP_EV_STOP).action, GK_SUP_A_NOP);
	cr_assert_eq(gk_sup_fsm(GK_SUP_DOWN, GK_SUP_EV_EXIT).action, GK_SUP_A_NOP);
}

Test(sup_backoff, doubles_caps_and_jitters)
{
	gk_sup_backoff b = { .initial_ms = 100, .max_ms = 1000, .jitter = 0, .reset_after_ms = 5000 };
	cr_assert_eq(gk_sup_backoff_delay(&b, 0, 0), 0);
	cr_assert_eq(gk_sup_backoff_delay(&b, 1, 0), 100);
	cr_assert_eq(gk_sup_backoff_delay(&b, 2, 0), 200);
	cr_assert_eq(gk_sup_backoff_delay(&b, 4, 0), 800);
	cr_assert_eq(gk_sup_backoff_delay(&b, 5, 0), 1000);
	cr_assert_eq(gk_sup_backoff_delay(&b, 4000000000u, 0), 1000);
	b.jitter = 0.5;
	cr_assert_eq(gk_sup_backoff_delay(&b, 1, 0.5), 125);
	cr_assert_eq(gk_sup_backoff_delay(&b, 1, 0.0), 100);
	cr_assert_leq(gk_sup_backoff_delay(&b, 4, 0.99), 1000); /* jitter never beyond the cap */
	cr_assert_eq(gk_sup_backoff_delay(&b, 1, 7.0), 149);    /* u clamped below 1 */
	b.initial_ms = 0;
	cr_assert_eq(gk_sup_backoff_delay(&b, 9, 0.9), 0);
}

Test(sup_backoff, healthy_time_resets_the_series)
{
	cr_assert_eq(gk_sup_failures_after(0, -1, 1000), 1);
	cr_assert_eq(gk_sup_failures_after(3, -1, 1000), 4);    /* never ready */
	cr_assert_eq(gk_sup_failures_after(3, 999, 1000), 4);
	cr_assert_eq(gk_sup_failures_after(3, 1000, 1000), 1);
	cr_assert_eq(gk_sup_failures_after(64, 0, 1000), 64);   /* bounded */
}

Test(sup_policy, restart_types)
{
	cr_assert_eq(gk_sup_exit_decide(GK_SUP_PERMANENT, true), GK_SUP_RESTART);
	cr_assert_eq(gk_sup_exit_decide(GK_SUP_PERMANENT, false), GK_SUP_RESTART);
	cr_assert_eq(gk_sup_exit_decide(GK_SUP_TRANSIENT, true), GK_SUP_DONE);
	cr_assert_eq(gk_sup_exit_decide(GK_SUP_TRANSIENT, false), GK_SUP_RESTART);
	cr_assert_eq(gk_sup_exit_decide(GK_SUP_TEMPORARY, true), GK_SUP_DONE);
	cr_assert_eq(gk_sup_exit_decide(GK_SUP_TEMPORARY, false), GK_SUP_GIVE_UP);
}

/* SIGCONT before the stop signal, nothing after it: a SIGCONT that reaches a
 * service already exiting discards LeakSanitizer's SIGSTOP (PTRACE_ATTACH) and
 * its exit-time check then hangs until the stop timeout's SIGKILL */
Test(sup_policy, stop_signals_sigcont_first_and_nothing_after_the_stop_signal)
{
	int sig[2];
	cr_assert_eq(gk_sup_stop_signals(SIGTERM, sig), 2);
	cr_assert_eq(sig[0], SIGCONT);
	cr_assert_eq(sig[1], SIGTERM);
	cr_assert_eq(gk_sup_stop_signals(SIGINT, sig), 2);
	cr_assert_eq(sig[1], SIGINT, "the configured stop signal, last");
}

Test(sup_intensity, window_slides)
{
	gk_sup_intensity w;
	gk_sup_intensity_init(&w, 3, 1000);
	cr_assert_not(gk_sup_intensity_add(&w, 0));
	cr_assert_not(gk_sup_intensity_add(&w, 100));
	cr_assert_not(gk_sup_intensity_add(&w, 200));
	cr_assert(gk_sup_intensity_add(&w, 300));        /* 4 within 1 s */
	cr_assert_eq(gk_sup_intensity_count(&w, 300), 4);
	cr_assert_eq(gk_sup_intensity_count(&w, 1150), 2); /* 0 and 100 left the window */
	gk_sup_intensity_init(&w, 3, 1000);
	for (int i = 0; i < 1000; i++)                   /* sustained 1 per 400 ms never trips */
		cr_assert_not(gk_sup_intensity_add(&w, i * 400LL));
	gk_sup_intensity_init(&w, 0, 1000);
	cr_assert(gk_sup_intensity_add(&w, 5));          /* max 0: the first restart escalates */
	gk_sup_intensity_init(&w, 2, 0);
	for (int i = 0; i < 10; i++)                     /* window 0: disabled */
		cr_assert_not(gk_sup_intensity_add(&w, 1));
}

Test(sup_rand, uniform_enough)
{
	uint64_t s = 42;
	double sum = 0;
	for (int i = 0; i < 10000; i++) {
		double u = gk_sup_rand01(&s);
		cr_assert(u >= 0 && u < 1);
		sum += u;
	}
	cr_assert(sum / 10000 > 0.45 && sum / 10000 < 0.55);
}
