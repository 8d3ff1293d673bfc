/* gpukmm — single-threaded event loop: epoll + signalfd + one timerfd
 * (see include/gpukmm/loop.h).
 *
 * fds are kept in an array indexed by fd; each registration carries a
 * generation number packed into the epoll data so that an event for an fd that
 * a callback removed (or removed and re-added) in the same iteration is ignored.
 * Timers are a small unsorted array scanned for the earliest deadline: a
 * service has a handful of timers, and a linear scan beats a heap's
 * bookkeeping at that size. The one timerfd is armed to the earliest deadline,
 * except for a deadline already reached (a 0 ms timer, the usual "run this
 * after the current callbacks"): that one runs on the next iteration, after an
 * epoll_wait that does not block, without arming and reading the timerfd
 * (three syscalls and an extra wakeup saved on every hand-off). */
#include "gpukmm/loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 64
#define MAX_SIGNAL 65

struct fd_slot {
	gk_fd_fn fn;
	void *user;
	uint32_t gen;   /* 0 = free */
};

struct timer {
	gk_timer_id id;
	int64_t due_ms;  /* CLOCK_MONOTONIC */
	gk_timer_fn fn;
	void *user;
};

struct sig_slot {
	gk_signal_fn fn;
	void *user;
};

struct gk_loop {
	int epfd;
	int tfd;
	int sfd;                 /* -1 until the first gk_loop_signal */
	sigset_t mask;           /* signals delivered through sfd */
	sigset_t old_mask;       /* thread mask before the first gk_loop_signal */
	int mask_saved;
	struct fd_slot *fds;
	size_t n_fds;
	uint32_t next_gen;
	struct timer *timers;
	size_t n_timers, cap_timers;
	gk_timer_id next_timer;
	int64_t armed_ms;        /* deadline the timerfd is armed to, 0 = disarmed */
	int due_now;             /* a timer is already due: next iteration does not block */
	struct sig_slot sigs[MAX_SIGNAL];
	int stopped;
	int stop_code;
};

#define TAG_TIMER  ((uint64_t)1 << 63)
#define TAG_SIGNAL ((uint64_t)1 << 62)

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int gk_loop_new(gk_loop **out, gk_err *err)
{
	*out = NULL;
	gk_loop *l = calloc(1, sizeof(*l));
	if (!l)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "loop: out of memory");
	l->sfd = -1;
	l->next_gen = 1;
	l->next_timer = 1;
	sigemptyset(&l->mask);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int e = errno;
		free(l);
		return gk_err_set(err, GK_INTERNAL, "loop: epoll_create1: %s", strerror(e));
	}
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->tfd < 0) {
		int e = errno;
		close(l->epfd);
		free(l);
		return gk_err_set(err, GK_INTERNAL, "loop: timerfd_create: %s", strerror(e));
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_TIMER };
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) < 0) {
		int e = errno;
		close(l->tfd);
		close(l->epfd);
		free(l);
		return gk_err_set(err, GK_INTERNAL, "loop: epoll_ctl(timerfd): %s", strerror(e));
	}
	*out = l;
	return 0;
}

void gk_loop_free(gk_loop *l)
{
	if (!l)
		return;
	if (l->sfd >= 0)
		close(l->sfd);
	if (l->mask_saved)
		pthread_sigmask(SIG_SETMASK, &l->old_mask, NULL);
	close(l->tfd);
	close(l->epfd);
	free(l->fds);
	free(l->timers);
	free(l);
}

int gk_loop_add_fd(gk_loop *l, int fd, uint32_t events, gk_fd_fn fn, void *user, gk_err *err)
{
	if (fd < 0 || !fn)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "loop: bad fd %d or no callback", fd);
	if ((size_t)fd >= l->n_fds) {
		size_t n = l->n_fds ? l->n_fds : 16;
		while (n <= (size_t)fd)
			n *= 2;
		struct fd_slot *s = realloc(l->fds, n * sizeof(*s));
		if (!s)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "loop: out of memory");
		memset(s + l->n_fds, 0, (n - l->n_fds) * sizeof(*s));
		l->fds = s;
		l->n_fds = n;
	}
	struct fd_slot *slot = &l->fds[fd];
	int op = slot->gen ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	uint32_t gen = slot->gen ? slot->gen : l->next_gen++;
	if (l->next_gen == 0)
		l->next_gen = 1;
	struct epoll_event ev = { .events = events, .data.u64 = ((uint64_t)gen << 32) | (uint32_t)fd };
	if (epoll_ctl(l->epfd, op, fd, &ev) < 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "loop: epoll_ctl(fd %d): %s", fd, strerror(errno));
	slot->fn = fn;
	slot->user = user;
	slot->gen = gen;
	return 0;
}

void gk_loop_del_fd(gk_loop *l, int fd)
{
	if (fd < 0 || (size_t)fd >= l->n_fds || !l->fds[fd].gen)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL); /* fails harmlessly if fd was closed */
	l->fds[fd] = (struct fd_slot){ 0 };
}

static void arm(gk_loop *l)
{
	int64_t due = 0;
	for (size_t i = 0; i < l->n_timers; i++)
		if (!due || l->timers[i].due_ms < due)
			due = l->timers[i].due_ms;
	l->due_now = due && due <= mono_ms();
	if (l->due_now || due == l->armed_ms)
		return; /* due now: gk_loop_once runs it; the timerfd keeps what it had */
	struct itimerspec its = { 0 };
	if (due) {
		/* absolute time 0 would disarm: a due time is always > 0 after boot */
		its.it_value.tv_sec = due / 1000;
		its.it_value.tv_nsec = (due % 1000) * 1000000;
		if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
			its.it_value.tv_nsec = 1;
	}
	timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	l->armed_ms = due;
}

gk_timer_id gk_loop_timer(gk_loop *l, int64_t ms, gk_timer_fn fn, void *user)
{
	if (!fn)
		return 0;
	if (l->n_timers == l->cap_timers) {
		size_t n = l->cap_timers ? l->cap_timers * 2 : 8;
		struct timer *t = realloc(l->timers, n * sizeof(*t));
		if (!t)
			return 0;
		l->timers = t;
		l->cap_timers = n;
	}
	if (ms < 0)
		ms = 0;
	gk_timer_id id = l->next_timer++;
	l->timers[l->n_timers++] = (struct timer){ .id = id, .due_ms = mono_ms() + ms, .fn = fn, .user = user };
	arm(l);
	return id;
}

void gk_loop_cancel(gk_loop *l, gk_timer_id id)
{
	for (size_t i = 0; i < l->n_timers; i++) {
		if (l->timers[i].id == id) {
			l->timers[i] = l->timers[--l->n_timers];
			arm(l);
			return;
		}
	}
}

int gk_loop_signal(gk_loop *l, int signo, gk_signal_fn fn, void *user, gk_err *err)
{
	if (signo <= 0 || signo >= MAX_SIGNAL || signo == SIGKILL || signo == SIGSTOP || !fn)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "loop: cannot handle signal %d", signo);
	sigset_t add, old;
	sigemptyset(&add);
	sigaddset(&add, signo);
	if (pthread_sigmask(SIG_BLOCK, &add, &old) != 0)
		return gk_err_set(err, GK_INTERNAL, "loop: pthread_sigmask failed");
	if (!l->mask_saved) {
		l->old_mask = old;
		l->mask_saved = 1;
	}
	sigaddset(&l->mask, signo);
	int fd = signalfd(l->sfd, &l->mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return gk_err_set(err, GK_INTERNAL, "loop: signalfd: %s", strerror(errno));
	if (l->sfd < 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_SIGNAL };
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			return gk_err_set(err, GK_INTERNAL, "loop: epoll_ctl(signalfd): %s", strerror(errno));
		}
		l->sfd = fd;
	}
	l->sigs[signo] = (struct sig_slot){ fn, user };
	return 0;
}

void gk_loop_stop(gk_loop *l, int code)
{
	l->stopped = 1;
	l->stop_code = code;
}

/* Runs the timers that are due, then re-arms for the rest. */
static int run_due(gk_loop *l)
{
	int n = 0;
	int64_t now = mono_ms();
	/* Only timers that existed when we started: a callback adding a 0 ms
	 * timer must not keep this iteration going forever. */
	gk_timer_id limit = l->next_timer;
	for (;;) {
		size_t best = l->n_timers;
		for (size_t i = 0; i < l->n_timers; i++)
			if (l->timers[i].due_ms <= now && l->timers[i].id < limit &&
			    (best == l->n_timers || l->timers[i].due_ms < l->timers[best].due_ms))
				best = i;
		if (best == l->n_timers)
			break;
		struct timer t = l->timers[best];
		l->timers[best] = l->timers[--l->n_timers];
		t.fn(l, t.id, t.user);
		n++;
		if (l->stopped)
			break;
	}
	arm(l);
	return n;
}

static int run_timers(gk_loop *l)
{
	uint64_t expirations;
	while (read(l->tfd, &expirations, sizeof(expirations)) > 0)
		;
	l->armed_ms = 0; /* the timerfd fired; re-arm below whatever is left */
	return run_due(l);
}

static int run_signals(gk_loop *l)
{
	int n = 0;
	struct signalfd_siginfo si;
	while (read(l->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		int signo = (int)si.ssi_signo;
		if (signo > 0 && signo < MAX_SIGNAL && l->sigs[signo].fn) {
			l->sigs[signo].fn(l, signo, l->sigs[signo].user);
			n++;
		}
	}
	return n;
}

int gk_loop_once(gk_loop *l, int timeout_ms)
{
	struct epoll_event evs[MAX_EVENTS];
	int k = epoll_wait(l->epfd, evs, MAX_EVENTS, l->due_now ? 0 : timeout_ms);
	int n = 0;
	if (k < 0)
		k = 0; /* EINTR: an unblocked signal in a test; no fd to run */
	for (int i = 0; i < k && !l->stopped; i++) {
		uint64_t d = evs[i].data.u64;
		if (d == TAG_TIMER) {
			n += run_timers(l);
		} else if (d == TAG_SIGNAL) {
			n += run_signals(l);
		} else {
			int fd = (int)(uint32_t)d;
			uint32_t gen = (uint32_t)(d >> 32);
			if ((size_t)fd >= l->n_fds || l->fds[fd].gen != gen)
				continue; /* removed by an earlier callback of this batch */
			l->fds[fd].fn(l, fd, evs[i].events, l->fds[fd].user);
			n++;
		}
	}
	if (l->due_now && !l->stopped)
		n += run_due(l);
	return n;
}

int gk_loop_run(gk_loop *l)
{
	/* a stop requested before run() (e.g. from a setup callback) still counts */
	while (!l->stopped)
		gk_loop_once(l, -1);
	l->stopped = 0;
	return l->stop_code;
}
