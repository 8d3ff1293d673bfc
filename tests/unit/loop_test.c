/* lib/loop: fds, timers, signals, stop. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/loop.h"

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static gk_loop *mk(void)
{
	gk_loop *l = NULL;
	gk_err e;
	cr_assert_eq(gk_loop_new(&l, &e), 0);
	return l;
}

struct fdctx { int hits; int del; int efd; };

static void on_fd(gk_loop *l, int fd, uint32_t ev, void *u)
{
	struct fdctx *c = u;
	uint64_t v;
	cr_assert(ev & EPOLLIN);
	cr_assert_eq(read(fd, &v, sizeof(v)), 8);
	c->hits++;
	if (c->del)
		gk_loop_del_fd(l, fd);
}

Test(loop, fd_readable_runs_callback)
{
	gk_loop *l = mk();
	struct fdctx c = { 0 };
	int efd = eventfd(0, EFD_NONBLOCK);
	gk_err e;
	cr_assert_eq(gk_loop_add_fd(l, efd, EPOLLIN, on_fd, &c, &e), 0);
	cr_assert_eq(gk_loop_once(l, 0), 0, "nothing ready yet");
	uint64_t one = 1;
	cr_assert_eq(write(efd, &one, 8), 8);
	cr_assert_eq(gk_loop_once(l, 1000), 1);
	cr_assert_eq(c.hits, 1);
	gk_loop_del_fd(l, efd);
	cr_assert_eq(write(efd, &one, 8), 8);
	cr_assert_eq(gk_loop_once(l, 0), 0, "deleted fd must not fire");
	gk_loop_del_fd(l, efd); /* twice is harmless */
	close(efd);
	gk_loop_free(l);
}

Test(loop, bad_arguments_are_errors)
{
	gk_loop *l = mk();
	gk_err e;
	cr_assert_eq(gk_loop_add_fd(l, -1, EPOLLIN, on_fd, NULL, &e), GK_INVALID_ARGUMENT);
	cr_assert_eq(gk_loop_add_fd(l, 12345, EPOLLIN, on_fd, NULL, &e), GK_INVALID_ARGUMENT, "closed fd");
	cr_assert(strstr(e.msg, "12345"));
	cr_assert_eq(gk_loop_signal(l, SIGKILL, NULL, NULL, &e), GK_INVALID_ARGUMENT);
	cr_assert_eq(gk_loop_timer(l, 1, NULL, NULL), 0);
	gk_loop_free(l);
}

/* Two fds ready in the same batch; the first callback removes the second. */
struct pair { int a, b; int hits_a, hits_b; };
static void on_a(gk_loop *l, int fd, uint32_t ev, void *u)
{
	struct pair *p = u;
	p->hits_a++;
	gk_loop_del_fd(l, p->b);
	uint64_t v; (void)!read(fd, &v, 8);
}
static void on_b(gk_loop *l, int fd, uint32_t ev, void *u)
{
	struct pair *p = u;
	p->hits_b++;
	gk_loop_del_fd(l, p->a);
	uint64_t v; (void)!read(fd, &v, 8);
}

Test(loop, fd_removed_by_earlier_callback_does_not_fire)
{
	gk_loop *l = mk();
	struct pair p = { eventfd(0, EFD_NONBLOCK), eventfd(0, EFD_NONBLOCK), 0, 0 };
	gk_err e;
	cr_assert_eq(gk_loop_add_fd(l, p.a, EPOLLIN, on_a, &p, &e), 0);
	cr_assert_eq(gk_loop_add_fd(l, p.b, EPOLLIN, on_b, &p, &e), 0);
	uint64_t one = 1;
	cr_assert_eq(write(p.a, &one, 8), 8);
	cr_assert_eq(write(p.b, &one, 8), 8);
	cr_assert_eq(gk_loop_once(l, 1000), 1);
	cr_assert_eq(p.hits_a + p.hits_b, 1);
	close(p.a);
	close(p.b);
	gk_loop_free(l);
}

struct tctx { int order[8]; int n; gk_loop *l; gk_timer_id cancel; };
static void on_timer(gk_loop *l, gk_timer_id id, void *u)
{
	struct tctx *c = u;
	c->order[c->n++] = (int)id;
	if (c->cancel)
		gk_loop_cancel(l, c->cancel);
}
static void on_stop_timer(gk_loop *l, gk_timer_id id, void *u)
{
	gk_loop_stop(l, 7);
}

Test(loop, timers_fire_in_deadline_order_and_cancel_works)
{
	gk_loop *l = mk();
	struct tctx c = { 0 };
	gk_timer_id t30 = gk_loop_timer(l, 30, on_timer, &c);
	gk_timer_id t10 = gk_loop_timer(l, 10, on_timer, &c);
	gk_timer_id t20 = gk_loop_timer(l, 20, on_timer, &c);
	gk_timer_id gone = gk_loop_timer(l, 15, on_timer, &c);
	cr_assert(t30 && t10 && t20 && gone);
	gk_loop_cancel(l, gone);
	gk_loop_cancel(l, 9999); /* unknown id: no-op */
	gk_loop_timer(l, 60, on_stop_timer, NULL);
	int64_t t0 = now_ms();
	cr_assert_eq(gk_loop_run(l), 7);
	int64_t took = now_ms() - t0;
	cr_assert_geq(took, 55, "took %lld ms", (long long)took);
	cr_assert_lt(took, 5000);
	cr_assert_eq(c.n, 3);
	cr_assert_eq(c.order[0], (int)t10);
	cr_assert_eq(c.order[1], (int)t20);
	cr_assert_eq(c.order[2], (int)t30);
	gk_loop_free(l);
}

Test(loop, callback_cancels_a_later_timer)
{
	gk_loop *l = mk();
	struct tctx c = { 0 };
	gk_loop_timer(l, 5, on_timer, &c);
	c.cancel = gk_loop_timer(l, 20, on_timer, &c);
	gk_loop_timer(l, 50, on_stop_timer, NULL);
	cr_assert_eq(gk_loop_run(l), 7);
	cr_assert_eq(c.n, 1);
	gk_loop_free(l);
}

/* A timer that re-adds itself with 0 ms must not starve fds. */
struct rearm { int n; };
static void on_rearm(gk_loop *l, gk_timer_id id, void *u)
{
	struct rearm *r = u;
	if (++r->n < 1000)
		gk_loop_timer(l, 0, on_rearm, r);
}
Test(loop, zero_ms_timer_rearming_yields_each_iteration)
{
	gk_loop *l = mk();
	struct rearm r = { 0 };
	gk_loop_timer(l, 0, on_rearm, &r);
	int64_t deadline = now_ms() + 5000;
	int iters = 0;
	while (r.n < 1000 && now_ms() < deadline) {
		int k = gk_loop_once(l, 100);
		cr_assert_leq(k, 1, "one timer per iteration, got %d", k);
		iters++;
	}
	cr_assert_eq(r.n, 1000);
	gk_loop_free(l);
}

/* A timer already due runs on the next iteration without the timerfd: the fd
 * callbacks of that iteration run first, a cancel from one of them holds, a
 * later timer still fires through the timerfd, and once nothing is due the
 * loop blocks again (no spin). */
struct duectx { int timer_hits; gk_timer_id victim; struct fdctx fd; };
static void on_due(gk_loop *l, gk_timer_id id, void *u)
{
	((struct duectx *)u)->timer_hits++;
}
static void on_fd_cancels(gk_loop *l, int fd, uint32_t ev, void *u)
{
	struct duectx *c = u;
	uint64_t v;
	cr_assert_eq(read(fd, &v, sizeof(v)), 8);
	c->fd.hits++;
	gk_loop_cancel(l, c->victim);
}
Test(loop, due_timer_runs_after_the_fds_of_the_next_iteration)
{
	gk_loop *l = mk();
	struct duectx c = { 0 };
	gk_err e;
	int efd = eventfd(0, EFD_NONBLOCK);
	cr_assert_eq(gk_loop_add_fd(l, efd, EPOLLIN, on_fd_cancels, &c, &e), 0);
	uint64_t one = 1;
	cr_assert_eq(write(efd, &one, 8), 8);
	gk_loop_timer(l, 0, on_due, &c);
	c.victim = gk_loop_timer(l, 0, on_due, &c);
	/* asked to block forever, yet returns: the fd, then the one timer left */
	cr_assert_eq(gk_loop_once(l, -1), 2);
	cr_assert_eq(c.fd.hits, 1);
	cr_assert_eq(c.timer_hits, 1, "the cancelled due timer must not run");

	gk_loop_timer(l, 40, on_due, &c);
	gk_loop_timer(l, 0, on_due, &c);
	cr_assert_eq(gk_loop_once(l, -1), 1);
	cr_assert_eq(c.timer_hits, 2);
	int64_t t0 = now_ms();
	cr_assert_eq(gk_loop_once(l, 5000), 1, "the 40 ms timer fires through the timerfd");
	cr_assert_geq(now_ms() - t0, 30, "it must not have run early");
	cr_assert_eq(c.timer_hits, 3);
	t0 = now_ms();
	cr_assert_eq(gk_loop_once(l, 60), 0);
	cr_assert_geq(now_ms() - t0, 50, "nothing due: the iteration blocks");
	gk_loop_del_fd(l, efd);
	close(efd);
	gk_loop_free(l);
}

static void on_sig(gk_loop *l, int signo, void *u)
{
	*(int *)u = signo;
	gk_loop_stop(l, 42);
}

Test(loop, signals_arrive_through_signalfd)
{
	gk_loop *l = mk();
	int got = 0;
	gk_err e;
	cr_assert_eq(gk_loop_signal(l, SIGTERM, on_sig, &got, &e), 0);
	cr_assert_eq(gk_loop_signal(l, SIGUSR1, on_sig, &got, &e), 0);
	cr_assert_eq(raise(SIGUSR1), 0); /* to this thread: the test runner has others */
	cr_assert_eq(gk_loop_run(l), 42);
	cr_assert_eq(got, SIGUSR1);
	cr_assert_eq(raise(SIGTERM), 0);
	cr_assert_eq(gk_loop_run(l), 42, "the loop runs again after a stop");
	cr_assert_eq(got, SIGTERM);
	gk_loop_free(l);
}

Test(loop, stop_before_run_returns_at_once)
{
	gk_loop *l = mk();
	gk_loop_stop(l, 3);
	cr_assert_eq(gk_loop_run(l), 3);
	gk_loop_free(l);
}

Test(loop, readd_modifies_events)
{
	gk_loop *l = mk();
	struct fdctx c = { 0 };
	int efd = eventfd(0, EFD_NONBLOCK);
	gk_err e;
	cr_assert_eq(gk_loop_add_fd(l, efd, EPOLLIN, on_fd, &c, &e), 0);
	cr_assert_eq(gk_loop_add_fd(l, efd, EPOLLIN, on_fd, &c, &e), 0, "re-add is a modify");
	uint64_t one = 1;
	cr_assert_eq(write(efd, &one, 8), 8);
	cr_assert_eq(gk_loop_once(l, 1000), 1);
	cr_assert_eq(c.hits, 1);
	close(efd);
	gk_loop_free(l);
}
