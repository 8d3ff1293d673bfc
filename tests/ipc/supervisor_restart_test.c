/* The supervisor against misbehaving services: restarts and backoff spacing,
 * intensity escalation, hung and never-ready services, stop timeouts,
 * grandchildren, zombies. Every wait has a deadline; nothing sleeps. */
#include <sys/un.h>

#include "sup_harness.h"

#define SVC(name, mode, extra) \
	"{\"name\":\"" name "\",\"binary\":\"@TBIN@/sup_testsvc\",\"args\":[\"--mode\",\"" mode "\"," \
	"\"--trace\",\"@DIR@/" name ".trace\"" extra "]"

static void fini(void)
{
	sh_cleanup();
}

TestSuite(supervisor, .fini = fini, .timeout = 60);

Test(supervisor, crash_at_once_backs_off_exponentially)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"intensity\":{\"max_restarts\":50,\"window_ms\":60000},\"services\":["
		     SVC("c", "crash", "") ",\"backoff\":{\"initial_ms\":100,\"max_ms\":400,\"jitter\":0}}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_trace(&s, "c.trace", "start", 5, 5000), "5 starts expected");
	/* the delays the supervisor chose: doubling, capped */
	cr_assert(sh_wait_out(&s, "restarting in 100 ms", 100));
	cr_assert(sh_wait_out(&s, "restarting in 200 ms", 100));
	cr_assert(sh_wait_out(&s, "restarting in 400 ms", 100));
	/* and kept: from one instance's exit to the next one's start, never less
	 * (more by the start-up time of the program, large under ASan) */
	int64_t t[8] = { 0 }, x[8] = { 0 };
	int n = sh_trace(&s, "c.trace", "start", NULL, t, 8);
	sh_trace(&s, "c.trace", "exit", NULL, x, 8);
	const int64_t want[] = { 100, 200, 400, 400 };
	for (int i = 0; i < 4 && i + 1 < n; i++) {
		int64_t gap = t[i + 1] - x[i];
		cr_assert_geq(gap, want[i] - 2, "restart %d after %lld ms, backoff is %lld", i + 1, (long long)gap,
			      (long long)want[i]);
		cr_assert_lt(gap, want[i] + 700 * sh_slow(), "restart %d after %lld ms, backoff is %lld", i + 1,
			     (long long)gap, (long long)want[i]);
	}
	Gpukmm__ServiceTable *tb = sh_list(&s);
	cr_assert_not_null(tb);
	Gpukmm__ServiceInfo *i = sh_svc(tb, "c");
	cr_assert_geq(i->restarts, 4);
	cr_assert_eq(i->last_exit_code, 3);
	cr_assert_eq(i->last_signal, 0);
	cr_assert_not(tb->ready);
	gk_ipc_free(&tb->base);
	/* stopped in backoff: clean (0); caught just spawned, it exits 3 on its own: 143 */
	int rc = sh_stop(&s, 5000);
	cr_assert(rc == 0 || rc == 128 + SIGTERM, "stops at once (exit %d)", rc);
}

/* Crash after N ms of being ready, twice side by side: "r" was healthy longer
 * than its reset_after_ms, so every death starts a new series (always the
 * initial delay); "d" never was, so its delays double. */
Test(supervisor, crash_after_ready_backoff_resets_after_the_healthy_time)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"intensity\":{\"max_restarts\":50,\"window_ms\":60000},\"services\":["
		     SVC("r", "crash-after", ",\"--after-ms\",\"300\"")
		     ",\"backoff\":{\"initial_ms\":100,\"max_ms\":1000,\"jitter\":0,\"reset_after_ms\":150}},"
		     SVC("d", "crash-after", ",\"--after-ms\",\"300\"")
		     ",\"backoff\":{\"initial_ms\":100,\"max_ms\":1000,\"jitter\":0,\"reset_after_ms\":60000}}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_trace(&s, "r.trace", "exit", 4, 10000), "r crashed 4 times");
	cr_assert(sh_wait_trace(&s, "d.trace", "exit", 4, 10000), "d crashed 4 times");
	/* each instance was ready before it crashed */
	cr_assert_geq(sh_trace(&s, "r.trace", "ready", NULL, NULL, 100), 4);
	cr_assert(sh_wait_out(&s, "service d: exited with code 4: restarting in 100 ms", 100));
	cr_assert(sh_wait_out(&s, "service d: exited with code 4: restarting in 200 ms", 100));
	cr_assert(sh_wait_out(&s, "service d: exited with code 4 (3 failures in a row, 3 restarts): restarting in 400 ms",
			      100));
	char *out = sh_slurp(s.out);
	int r100 = 0;
	for (char *p = out; (p = strstr(p, "service r: exited with code 4: restarting in 100 ms")); p++)
		r100++;
	cr_assert_geq(r100, 3, "r restarted after the initial delay every time:\n%s", out);
	cr_assert_null(strstr(out, "service r: exited with code 4: restarting in 200 ms"), "r's series was reset");
	free(out);
	Gpukmm__ServiceTable *tb = sh_list(&s);
	cr_assert_not_null(tb);
	cr_assert_eq(sh_svc(tb, "r")->last_exit_code, 4);
	cr_assert_geq(sh_svc(tb, "d")->restarts, 3);
	gk_ipc_free(&tb->base);
	int rc = sh_stop(&s, 5000);
	cr_assert(rc == 0 || rc == 128 + SIGTERM, "stops at once (exit %d)", rc);
}

Test(supervisor, intensity_exceeded_stops_everything_and_exits_1)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"intensity\":{\"max_restarts\":3,\"window_ms\":10000},\"services\":["
		     SVC("ok1", "ready", "") "},"
		     SVC("bad", "crash", "") ",\"backoff\":{\"initial_ms\":0,\"max_ms\":0}},"
		     SVC("ok2", "ready", "") "}]}",
		 false, NULL, NULL);
	int rc = sh_wait_exit(&s, 10000);
	cr_assert_eq(rc, 1, "escalation exits 1 (got %d)", rc);
	cr_assert_eq(sh_trace(&s, "bad.trace", "start", NULL, NULL, 100), 4, "3 restarts allowed, the 4th death escalates");
	/* the healthy ones were stopped, in reverse order */
	int64_t t1[2] = { 0 }, t2[2] = { 0 };
	cr_assert_eq(sh_trace(&s, "ok1.trace", "stop", NULL, t1, 2), 1);
	cr_assert_eq(sh_trace(&s, "ok2.trace", "stop", NULL, t2, 2), 1);
	cr_assert_leq(t2[0], t1[0], "ok2 (started last) stops first");
	cr_assert(sh_wait_out(&s, "exceed the limit of 3", 100));
	cr_assert_eq(sh_zombies_of(getpid()), 0);
}

Test(supervisor, hung_service_is_killed_and_restarted)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"services\":[" SVC("h", "hang", ",\"--after-ms\",\"200\"")
		     ",\"heartbeat\":{\"interval_ms\":50,\"timeout_ms\":400},\"backoff\":{\"initial_ms\":10,\"max_ms\":10},"
		     "\"stop\":{\"timeout_ms\":300}}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_trace(&s, "h.trace", "hang", 1, 5000));
	int64_t hang[1] = { 0 }, start[4] = { 0 };
	sh_trace(&s, "h.trace", "hang", NULL, hang, 1);
	cr_assert(sh_wait_trace(&s, "h.trace", "start", 2, 5000), "restarted after the hang");
	sh_trace(&s, "h.trace", "start", NULL, start, 4);
	int64_t took = start[1] - hang[0];
	cr_assert_geq(took, 300, "killed only once the heartbeat timeout passed (%lld ms)", (long long)took);
	cr_assert(sh_wait_state(&s, "h", "ready", 1, 5000));
	Gpukmm__ServiceTable *tb = sh_list(&s);
	Gpukmm__ServiceInfo *i = sh_svc(tb, "h");
	cr_assert_eq(i->last_signal, SIGKILL);
	gk_ipc_free(&tb->base);
	cr_assert(sh_wait_out(&s, "no heartbeat for", 100));
	int rc = sh_stop(&s, 5000);   /* the new instance hangs as well after 200 ms: then 143 */
	cr_assert(rc == 0 || rc == 128 + SIGTERM, "exit %d", rc);
}

Test(supervisor, never_ready_is_restarted_after_the_ready_timeout)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"services\":[" SVC("n", "never-ready", "")
		     ",\"ready\":{\"timeout_ms\":1500},\"backoff\":{\"initial_ms\":10,\"max_ms\":10}}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_trace(&s, "n.trace", "start", 2, 5000), "started again");
	/* When it was killed, timed by the supervisor from its own spawn: the service's
	 * trace times its start-up too, which a loaded machine stretches unevenly. */
	cr_assert(sh_wait_out(&s, "service n: not ready ", 1000));
	char *out = sh_slurp(s.out);
	long long ms = -1;
	const char *at = strstr(out, "service n: not ready ");
	cr_assert(at && sscanf(at, "service n: not ready %lld ms after start", &ms) == 1, "%s", out);
	free(out);
	cr_assert_geq(ms, 1500, "killed %lld ms after its spawn, before the ready timeout", ms);
	cr_assert_eq(sh_stop(&s, 5000), 0);
}

Test(supervisor, ignored_sigterm_gets_sigkill_after_the_stop_timeout)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"services\":[" SVC("stubborn", "ignore-term", "") ",\"stop\":{\"timeout_ms\":300}}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_state(&s, "stubborn", "ready", -1, 5000));
	int pid[1] = { 0 };
	cr_assert_eq(sh_trace(&s, "stubborn.trace", "start", pid, NULL, 1), 1);
	int64_t t0 = sh_now();
	int rc = sh_stop(&s, 5000);
	int64_t took = sh_now() - t0;
	cr_assert_eq(rc, 128 + SIGTERM, "unclean stop by SIGTERM exits 143 (got %d)", rc);
	cr_assert_geq(took, 290, "waited the stop timeout (%lld ms)", (long long)took);
	cr_assert(sh_wait_trace(&s, "stubborn.trace", "term-ignored", 1, 100), "SIGTERM was delivered");
	cr_assert_not(sh_pid_alive(pid[0]), "the service is gone");
	cr_assert(sh_wait_out(&s, "SIGKILL", 100));
}

Test(supervisor, clean_stop_in_reverse_order_exits_0_without_zombies)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"services\":[" SVC("a", "ready", "") "}," SVC("b", "ready", "")
		     ",\"backoff\":{\"initial_ms\":20,\"max_ms\":20}}," SVC("c", "ready", "") "}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_state(&s, "a", "ready", -1, 5000));
	cr_assert(sh_wait_state(&s, "b", "ready", -1, 5000));
	cr_assert(sh_wait_state(&s, "c", "ready", -1, 5000));
	for (int k = 1; k <= 3; k++) {   /* crash b a few times */
		int pb[4] = { 0 };
		cr_assert_eq(sh_trace(&s, "b.trace", "start", pb, NULL, 4), k);
		cr_assert_eq(kill(pb[k - 1], SIGKILL), 0);   /* no core dump to wait for */
		cr_assert(sh_wait_state(&s, "b", "ready", k, 10000), "b restarted %d times", k);
	}
	cr_assert_eq(sh_zombies_of(s.pid), 0, "dead services are reaped");
	cr_assert_eq(sh_stop(&s, 5000), 0);
	int64_t ta[1] = { 0 }, tb[1] = { 0 }, tc[1] = { 0 };
	cr_assert_eq(sh_trace(&s, "a.trace", "stop", NULL, ta, 1), 1);
	cr_assert_eq(sh_trace(&s, "b.trace", "stop", NULL, tb, 1), 1);
	cr_assert_eq(sh_trace(&s, "c.trace", "stop", NULL, tc, 1), 1);
	cr_assert(tc[0] <= tb[0] && tb[0] <= ta[0], "reverse order: c %lld, b %lld, a %lld", (long long)tc[0],
		  (long long)tb[0], (long long)ta[0]);
	cr_assert(sh_wait_out(&s, "all services stopped; exiting with 0", 100));
}

/* nng 1.5.2 can hang in nng_close/nng_fini at exit (nng#1543). lib/svc bounds
 * the stop: GPUKMM_STOP_BOUND_MS after SIGTERM the service logs one line and
 * exits 0, well before the supervisor's stop timeout would SIGKILL it (an
 * unclean stop, exit 143). Without the bound this service never exits. */
Test(supervisor, hung_teardown_ends_within_the_stop_bound)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"services\":[" SVC("h", "hang-teardown", "") ",\"env\":{\"GPUKMM_STOP_BOUND_MS\":\"800\"},"
		     "\"stop\":{\"timeout_ms\":20000}}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_state(&s, "h", "ready", -1, 5000));
	int64_t t0 = sh_now();
	int rc = sh_stop(&s, 15000);
	int64_t took = sh_now() - t0;
	cr_assert(sh_wait_trace(&s, "h.trace", "teardown-hangs", 1, 100), "the teardown did hang");
	cr_assert_eq(rc, 0, "the service exited 0 on its own, no SIGKILL (exit %d after %lld ms)", rc,
		     (long long)took);
	cr_assert_geq(took, 790, "it hung until the bound (%lld ms)", (long long)took);
	cr_assert(sh_wait_out(&s, "stop did not finish within 800 ms (teardown hung", 100));
	cr_assert(sh_wait_out(&s, "service h: stopped (exited with code 0)", 100));
}

Test(supervisor, orphaned_grandchild_is_reaped)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"services\":[" SVC("g", "grandchild", ",\"--after-ms\",\"300\"") ",\"restart\":\"temporary\"},"
		     SVC("keep", "ready", "") "}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_trace(&s, "g.trace", "orphan-start", 1, 5000));
	int gpid[1] = { 0 };
	cr_assert_eq(sh_trace(&s, "g.trace", "orphan-start", gpid, NULL, 1), 1);
	cr_assert(sh_wait_state(&s, "g", "failed", -1, 5000), "temporary service that failed: not restarted");
	cr_assert(sh_wait_trace(&s, "g.trace", "orphan-exit", 1, 5000));
	/* exited, and reaped by the supervisor (its subreaper): no zombie left */
	bool gone = false;
	for (int64_t end = sh_now() + 3000; !gone && sh_now() < end; poll(NULL, 0, 10)) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d", gpid[0]);
		gone = access(p, F_OK) != 0;
	}
	cr_assert(gone, "grandchild %d still in /proc (zombie?)", gpid[0]);
	cr_assert_eq(sh_zombies_of(s.pid), 0);
	Gpukmm__ServiceTable *tb = sh_list(&s);
	cr_assert_eq(sh_svc(tb, "g")->restarts, 0);
	cr_assert_eq(sh_svc(tb, "g")->last_exit_code, 5);
	gk_ipc_free(&tb->base);
	cr_assert_eq(sh_stop(&s, 5000), 0);
}

Test(supervisor, transient_clean_exit_is_not_restarted)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"services\":[" SVC("t", "exit-clean", ",\"--after-ms\",\"50\"")
		     ",\"restart\":\"transient\",\"ready\":{\"required\":false}}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_state(&s, "t", "down", -1, 5000));
	cr_assert_eq(sh_trace(&s, "t.trace", "start", NULL, NULL, 10), 1);
	cr_assert_eq(sh_stop(&s, 5000), 0);
}

Test(supervisor, sigkilled_service_is_restarted_others_untouched)
{
	static sh_sup s;   /* outlives the test body: the teardown reads it */
	sh_start(&s, "{\"services\":[" SVC("a", "ready", "") ",\"backoff\":{\"initial_ms\":10,\"max_ms\":10}},"
		     SVC("b", "ready", "") "}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_state(&s, "a", "ready", -1, 5000));
	cr_assert(sh_wait_state(&s, "b", "ready", -1, 5000));
	int pa[1] = { 0 }, pb[2] = { 0 };
	sh_trace(&s, "a.trace", "start", pa, NULL, 1);
	sh_trace(&s, "b.trace", "start", pb, NULL, 1);
	cr_assert_eq(kill(pa[0], SIGKILL), 0);
	cr_assert(sh_wait_state(&s, "a", "ready", 1, 5000));
	Gpukmm__ServiceTable *tb = sh_list(&s);
	cr_assert_eq(sh_svc(tb, "a")->last_signal, SIGKILL);
	cr_assert_eq(sh_svc(tb, "b")->restarts, 0);
	cr_assert_eq(sh_svc(tb, "b")->pid, pb[0]);
	gk_ipc_free(&tb->base);
	cr_assert_eq(sh_stop(&s, 5000), 0);
}

/* nng#1518: a peer that hangs up in the middle of the handshake used to stop
 * the Control listener for good (the supervisor re-opened it after every death
 * as a work-around). lib/ipc now finds and re-creates a stuck listener; after
 * raw hang-ups on control.sock a restarted service must still get its Ready
 * through, and so must the running ones' heartbeats. */
Test(supervisor, control_survives_peers_hanging_up_mid_handshake)
{
	static sh_sup s;
	sh_start(&s, "{\"services\":[" SVC("a", "ready", "") ",\"backoff\":{\"initial_ms\":20,\"max_ms\":20}}]}",
		 false, NULL, NULL);
	cr_assert(sh_wait_state(&s, "a", "ready", -1, 10000));
	char sock[400];
	snprintf(sock, sizeof(sock), "%s/control.sock", s.rundir);
	for (int k = 1; k <= 2; k++) {
		for (int i = 0; i < 3; i++) {
			int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			struct sockaddr_un a = { .sun_family = AF_UNIX };
			cr_assert_lt(strlen(sock), sizeof(a.sun_path));
			memcpy(a.sun_path, sock, strlen(sock) + 1);
			cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "connect %s", sock);
			close(fd);
		}
		int pa[4] = { 0 };
		cr_assert_eq(sh_trace(&s, "a.trace", "start", pa, NULL, 4), k);
		cr_assert_eq(kill(pa[k - 1], SIGKILL), 0);
		cr_assert(sh_wait_state(&s, "a", "ready", k, 15000), "a ready again after restart %d", k);
	}
	sh_stop(&s, 10000);   /* a clean stop is another test's subject */
}
