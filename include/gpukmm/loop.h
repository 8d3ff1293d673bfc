/* gpukmm — a small single-threaded event loop: fds, timers, signals.
 *
 * epoll + signalfd + one timerfd for all timers. No sleeps, no busy loops:
 * the loop blocks until an fd is ready, a timer is due or a signal arrives.
 * Used by the supervisor and by every service's main(). */
#ifndef GPUKMM_LOOP_H
#define GPUKMM_LOOP_H

#include <signal.h>
#include <stdint.h>

#include "gpukmm/err.h"

typedef struct gk_loop gk_loop;
typedef uint64_t gk_timer_id;   /* 0 = none */

typedef void (*gk_fd_fn)(gk_loop *l, int fd, uint32_t events, void *user); /* EPOLLIN… */
typedef void (*gk_timer_fn)(gk_loop *l, gk_timer_id id, void *user);
typedef void (*gk_signal_fn)(gk_loop *l, int signo, void *user);

int gk_loop_new(gk_loop **out, gk_err *err);
void gk_loop_free(gk_loop *l);

/* events: EPOLLIN / EPOLLOUT (level-triggered). Re-adding an fd modifies it. */
int gk_loop_add_fd(gk_loop *l, int fd, uint32_t events, gk_fd_fn fn, void *user, gk_err *err);
void gk_loop_del_fd(gk_loop *l, int fd);

/* One-shot timer after `ms` (monotonic). Returns its id (never 0). */
gk_timer_id gk_loop_timer(gk_loop *l, int64_t ms, gk_timer_fn fn, void *user);
void gk_loop_cancel(gk_loop *l, gk_timer_id id);

/* Blocks these signals for the calling thread and delivers them through
 * signalfd. Threads inherit the mask: call this before any thread is created
 * (before opening nng sockets), or another thread may take the signal. */
int gk_loop_signal(gk_loop *l, int signo, gk_signal_fn fn, void *user, gk_err *err);

/* Run until gk_loop_stop(); returns the code given to stop. */
int gk_loop_run(gk_loop *l);
void gk_loop_stop(gk_loop *l, int code);
/* One iteration with a maximum wait (tests); returns number of callbacks run. */
int gk_loop_once(gk_loop *l, int timeout_ms);

#endif
