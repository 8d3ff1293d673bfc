/* gk_exit_bound (lib/svc/svc.c): a teardown that hangs (nng#1543 in nng_close /
 * nng_fini) ends with the status the caller gave, within the bound; an exit
 * before the bound keeps its own status. Each case runs in a child process. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/svc.h"

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The child's exit status (-1: it did not end within 20 s, then killed), and how long it took. */
static int child_status(pid_t pid, long long *took_ms)
{
	long long t0 = now_ms();
	int st = 0;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (now_ms() - t0 > 20000) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		struct timespec ts = { 0, 5 * 1000000 };
		nanosleep(&ts, NULL);
	}
	*took_ms = now_ms() - t0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs body() in a child with the bound set to BOUND_MS: its exit status, and how long it took. */
static int in_child(const char *bound_ms, void (*body)(void), long long *took_ms)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setenv("GPUKMM_STOP_BOUND_MS", bound_ms, 1);
		body();
		_exit(99); /* (not reached) */
	}
	return child_status(pid, took_ms);
}

static void hung_teardown(void)
{
	gk_exit_bound("test", "closing the connection", 7);
	for (;;)
		pause(); /* a close that never returns */
}

static void exit_3(void)
{
	gk_exit_bound("test", "closing the connection", 7);
	gk_exit_bound("test", "again", 9); /* once per process: changes nothing */
	exit(3);
}

Test(exit_bound, a_hung_teardown_ends_with_the_given_status_after_the_bound)
{
	long long took = 0;
	int rc = in_child("300", hung_teardown, &took);
	cr_assert_eq(rc, 7, "exit %d", rc);
	cr_assert_geq(took, 250, "ended after %lld ms, before the bound", took);
}

Test(exit_bound, an_exit_before_the_bound_keeps_its_own_status)
{
	long long took = 0;
	int rc = in_child("10000", exit_3, &took);
	cr_assert_eq(rc, 3, "exit %d", rc);
	cr_assert_lt(took, 5000, "the exit waited %lld ms for the watchdog", took);
}
