/* lib/wsub: the watcher bus consumer against a fake watcher (an in-process
 * Watcher.Snapshot server on its own thread, which can hold a snapshot until
 * the test lets it go) and a real bus publisher: events that arrive during
 * the snapshot are buffered and applied after it in order (older ones
 * dropped) with no spurious resync after, a sequence gap and a publisher
 * restart (epoch change) resync, failed / not-synced / overflowed snapshots
 * are retried. */
#include <semaphore.h>
#include <stdatomic.h>

#include "events.pb-c.h"
#include "gpukmm/loop.h"
#include "gpukmm/wsub.h"
#include "harness.h"

/* ---- the fake watcher --------------------------------------------------------- */

enum mode { REPLY, FAIL, NOT_SYNCED, HOLD };

static struct {
	enum mode script[8];      /* per request; past the end: REPLY */
	atomic_int requests, held;
	sem_t go;
	/* the reply (written by the test before the request, or before sem_post for HOLD) */
	char id[32];
	uint64_t seq_a;
	uint32_t epoch;
} FW;

static void fw_snapshot(Gpukmm__Watcher_Service *svc, const Gpukmm__SnapshotRequest *in,
			Gpukmm__SnapshotReply_Closure closure, void *cd)
{
	int n = atomic_fetch_add(&FW.requests, 1);
	enum mode m = n < 8 ? FW.script[n] : REPLY;
	if (m == FAIL) {
		gk_ipc_fail(cd, GK_UNAVAILABLE, "not now");
		return;
	}
	if (m == HOLD) {
		atomic_store(&FW.held, 1);
		sem_wait(&FW.go);
		atomic_store(&FW.held, 0);
	}
	Gpukmm__TopicSeq ta = GPUKMM__TOPIC_SEQ__INIT, tb = GPUKMM__TOPIC_SEQ__INIT;
	ta.topic = "a";
	ta.has_seq = 1;
	ta.seq = FW.seq_a;
	tb.topic = "b";
	tb.has_seq = 1;
	tb.seq = 0;
	Gpukmm__TopicSeq *seqs[] = { &ta, &tb };
	Gpukmm__Leadership l = GPUKMM__LEADERSHIP__INIT;
	l.identity = FW.id;
	Gpukmm__SnapshotReply r = GPUKMM__SNAPSHOT_REPLY__INIT;
	r.seqs = seqs;
	r.n_seqs = 2;
	r.leadership = &l;
	r.has_synced = 1;
	r.synced = m != NOT_SYNCED;
	r.has_epoch = 1;
	r.epoch = FW.epoch;
	closure(&r, cd);
}

static void fw_get(Gpukmm__Watcher_Service *svc, const Gpukmm__GetRequest *in, Gpukmm__Event_Closure closure,
		   void *cd)
{
	gk_ipc_fail(cd, GK_NOT_FOUND, "no");
}

static Gpukmm__Watcher_Service WATCHER = GPUKMM__WATCHER__INIT(fw_);

/* ---- the view: a log of the callbacks ------------------------------------------- */

static char LOG[64][48];
static int n_log;

static void logf_(const char *fmt, const char *a, const char *b)
{
	cr_assert_lt(n_log, 64);
	snprintf(LOG[n_log++], sizeof(LOG[0]), fmt, a, b);
}

static int v_reset(void *u, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	logf_("reset %s%s", s->leadership && s->leadership->identity ? s->leadership->identity : "?", "");
	return GK_OK;
}

static int v_apply(void *u, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	logf_("apply %s %s", topic, ev->leadership && ev->leadership->identity ? ev->leadership->identity : "?");
	return GK_OK;
}

static void v_resynced(void *u, bool first)
{
	logf_("resynced%s%s", first ? " first" : "", "");
}

static const gk_wsub_view VIEW = { .reset = v_reset, .apply = v_apply, .resynced = v_resynced };
static const char *const TOPICS[] = { "a", "b" };

/* ---- fixture --------------------------------------------------------------------------- */

static th_server SRV;
static char DIR_[64], EV_URL[128];
static gk_loop *L;
static gk_ipc_pub *PUB;
static gk_wsub *W;

static void setup(void)
{
	memset(&FW, 0, sizeof(FW));
	sem_init(&FW.go, 0, 0);
	n_log = 0;
	th_tmpdir(DIR_, sizeof(DIR_));
	snprintf(EV_URL, sizeof(EV_URL), "ipc://%s/ev.sock", DIR_);
	gk_err e;
	cr_assert_eq(gk_ipc_pub_open(&PUB, EV_URL, NULL, &e), 0, "%s", e.msg);
	FW.epoch = gk_ipc_pub_epoch(PUB);
	th_server_start(&SRV, &WATCHER.base, NULL, NULL, NULL);
	cr_assert_eq(gk_loop_new(&L, &e), 0);
}

static void teardown(void)
{
	gk_wsub_close(W);
	W = NULL;
	if (atomic_load(&FW.held))
		sem_post(&FW.go);
	th_server_stop(&SRV);
	gk_ipc_pub_close(PUB);
	gk_loop_free(L);
	th_rmdir(DIR_);
	sem_destroy(&FW.go);
}

TestSuite(wsub, .init = setup, .fini = teardown, .timeout = 60);

static void open_w_retry(size_t buffer_max, int retry_ms)
{
	gk_wsub_opts o = { .topics = TOPICS, .n_topics = 2, .buffer_max = buffer_max, .retry_ms = retry_ms,
			   .snapshot_timeout_ms = 5000 };
	gk_err e;
	cr_assert_eq(gk_wsub_open(&W, L, EV_URL, SRV.url, &o, &VIEW, &e), 0, "%s", e.msg);
}

static void open_w(size_t buffer_max) { open_w_retry(buffer_max, 20); }

/* Run the loop until cond holds (10 s deadline). */
#define SPIN(cond)                                                                        \
	do {                                                                              \
		int64_t until_ = th_ms() + 10000;                                         \
		while (!(cond)) {                                                         \
			cr_assert_lt(th_ms(), until_, "timed out waiting for " #cond);    \
			gk_loop_once(L, 20);                                              \
		}                                                                         \
	} while (0)

static uint64_t pub(const char *topic, const char *id)
{
	Gpukmm__Leadership l = GPUKMM__LEADERSHIP__INIT;
	l.identity = (char *)id;
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.object_case = GPUKMM__EVENT__OBJECT_LEADERSHIP;
	ev.leadership = &l;
	uint64_t seq = gk_ipc_pub_send(PUB, topic, &ev.base);
	cr_assert_gt(seq, 0);
	return seq;
}

static bool logged(const char *s)
{
	for (int i = 0; i < n_log; i++)
		if (strcmp(LOG[i], s) == 0)
			return true;
	return false;
}

static void expect_log(const char *const *want, int n)
{
	for (int i = 0; i < n_log; i++)
		fprintf(stderr, "log[%d] %s\n", i, LOG[i]);
	cr_assert_eq(n_log, n, "%d callbacks, want %d", n_log, n);
	for (int i = 0; i < n; i++)
		cr_assert_str_eq(LOG[i], want[i], "callback %d", i);
}

/* Let the loop run a little (for things that must NOT happen). */
static void settle(int ms)
{
	int64_t until = th_ms() + ms;
	while (th_ms() < until)
		gk_loop_once(L, 10);
}

Test(wsub, events_during_the_snapshot_are_buffered_then_applied_in_order)
{
	FW.script[0] = HOLD;
	open_w(0);
	SPIN(atomic_load(&FW.held) && gk_ipc_pub_peers(PUB) > 0);
	settle(100); /* the subscription is up on the subscriber's side too */
	cr_assert_not(gk_wsub_synced(W));
	/* the watcher takes its snapshot after e1: e1 is in it, e2 and e3 are not */
	pub("a", "e1");
	pub("a", "e2");
	pub("b", "f1");
	pub("a", "e3");
	SPIN(gk_wsub_stats_get(W)->events == 4);
	cr_assert_eq(n_log, 0, "nothing applied while the snapshot is out");
	snprintf(FW.id, sizeof(FW.id), "s1");
	FW.seq_a = 1;
	sem_post(&FW.go);
	SPIN(gk_wsub_synced(W));
	const char *want[] = { "reset s1", "apply a e2", "apply b f1", "apply a e3", "resynced first" };
	expect_log(want, 5);
	/* live events after it: applied, and no resync for nothing (the
	 * subscription stands after e3, not after the snapshot's e1) */
	pub("a", "e4");
	gk_ipc_pub_tick(PUB);
	SPIN(logged("apply a e4"));
	settle(200);
	cr_assert_eq(gk_wsub_stats_get(W)->gaps, 0);
	cr_assert_eq(atomic_load(&FW.requests), 1);
	cr_assert_eq(gk_wsub_stats_get(W)->snapshots, 1);
	cr_assert_eq(n_log, 6);
}

Test(wsub, a_gap_resyncs_by_snapshot)
{
	/* e1, e2 are lost: nobody is subscribed yet */
	pub("a", "e1");
	pub("a", "e2");
	snprintf(FW.id, sizeof(FW.id), "s1");
	FW.seq_a = 1; /* the watcher's snapshot is from before e2 */
	open_w(0);
	SPIN(gk_wsub_synced(W) && gk_ipc_pub_peers(PUB) > 0);
	settle(100);
	/* the tick says a is at 2: a gap; the new snapshot has it */
	snprintf(FW.id, sizeof(FW.id), "s2");
	FW.seq_a = 2;
	gk_ipc_pub_tick(PUB);
	SPIN(gk_wsub_stats_get(W)->snapshots == 2 && gk_wsub_synced(W));
	cr_assert_eq(gk_wsub_stats_get(W)->gaps, 1);
	pub("a", "e3");
	SPIN(logged("apply a e3"));
	const char *want[] = { "reset s1", "resynced first", "reset s2", "resynced", "apply a e3" };
	expect_log(want, 5);
	cr_assert_eq(gk_wsub_stats_get(W)->gaps, 1);
}

Test(wsub, a_publisher_restart_resyncs)
{
	snprintf(FW.id, sizeof(FW.id), "s1");
	open_w(0);
	SPIN(gk_wsub_synced(W) && gk_ipc_pub_peers(PUB) > 0);
	settle(100);
	pub("a", "e1");
	SPIN(logged("apply a e1"));
	/* the watcher restarts: same address, new epoch, numbers from 1 again */
	gk_ipc_pub_close(PUB);
	gk_err e;
	cr_assert_eq(gk_ipc_pub_open(&PUB, EV_URL, NULL, &e), 0, "%s", e.msg);
	snprintf(FW.id, sizeof(FW.id), "s2");
	FW.epoch = gk_ipc_pub_epoch(PUB);
	FW.seq_a = 0;
	SPIN(gk_ipc_pub_peers(PUB) > 0);
	settle(100);
	gk_ipc_pub_tick(PUB);
	pub("a", "n1");
	SPIN(gk_wsub_stats_get(W)->snapshots == 2 && gk_wsub_synced(W) && logged("apply a n1"));
	cr_assert_geq(gk_wsub_stats_get(W)->gaps, 1);
	cr_assert(logged("reset s2"));
	/* n1 came after the new snapshot (seq 0): applied once, after the reset */
	int reset = -1, applied = -1, count = 0;
	for (int i = 0; i < n_log; i++) {
		if (strcmp(LOG[i], "reset s2") == 0)
			reset = i;
		if (strcmp(LOG[i], "apply a n1") == 0) {
			applied = i;
			count++;
		}
	}
	cr_assert_lt(reset, applied);
	cr_assert_eq(count, 1);
}

Test(wsub, failed_and_unsynced_snapshots_are_retried)
{
	FW.script[0] = FAIL;
	FW.script[1] = NOT_SYNCED;
	snprintf(FW.id, sizeof(FW.id), "s3");
	open_w(0);
	SPIN(gk_wsub_synced(W));
	cr_assert_eq(atomic_load(&FW.requests), 3);
	cr_assert_eq(gk_wsub_stats_get(W)->snapshot_failures, 2);
	cr_assert_eq(gk_wsub_stats_get(W)->snapshots, 1);
	const char *want[] = { "reset s3", "resynced first" };
	expect_log(want, 2);
}

Test(wsub, an_event_after_an_unsynced_reply_asks_again_at_once)
{
	/* The watcher said "not synced"; the retry is a minute away. Its next
	 * state event (its sync) brings the snapshot at once, within SPIN's 10 s. */
	FW.script[0] = NOT_SYNCED;
	snprintf(FW.id, sizeof(FW.id), "s4");
	open_w_retry(0, 60000);
	SPIN(gk_wsub_stats_get(W)->snapshot_failures == 1 && gk_ipc_pub_peers(PUB) > 0);
	/* until one arrives (the subscriber's side of the subscription may still
	 * be coming up); the snapshot is from after each */
	for (uint64_t i = 1; !gk_wsub_synced(W); i++) {
		cr_assert_lt(i, 50, "no event reached the subscriber");
		FW.seq_a = i;
		pub("a", "synced");
		int64_t until = th_ms() + 200;
		while (!gk_wsub_synced(W) && th_ms() < until)
			gk_loop_once(L, 10);
	}
	cr_assert_eq(atomic_load(&FW.requests), 2, "the unsynced one, then the one the event brought");
	cr_assert(logged("reset s4") && logged("resynced first"));
	/* with a view, an event is applied and asks for nothing */
	pub("a", "e2");
	SPIN(logged("apply a e2"));
	cr_assert_eq(atomic_load(&FW.requests), 2);
}

Test(wsub, a_buffer_overflow_retries_the_snapshot)
{
	FW.script[0] = HOLD;
	open_w(2);
	SPIN(atomic_load(&FW.held) && gk_ipc_pub_peers(PUB) > 0);
	settle(100);
	pub("a", "e1");
	pub("a", "e2");
	pub("a", "e3");
	SPIN(gk_wsub_stats_get(W)->events == 3);
	cr_assert_eq(gk_wsub_stats_get(W)->overflows, 1);
	snprintf(FW.id, sizeof(FW.id), "s1");
	FW.seq_a = 3; /* once one of e1..e3 is lost, no snapshot may be used with the buffer */
	sem_post(&FW.go);
	SPIN(gk_wsub_synced(W));
	cr_assert_eq(atomic_load(&FW.requests), 2);
	cr_assert_eq(gk_wsub_stats_get(W)->snapshot_failures, 1);
	const char *want[] = { "reset s1", "resynced first" };
	expect_log(want, 2);
}

/* ---- the view's object table ------------------------------------------------------ */

Test(wsub_tab, copies_replaces_deletes_and_is_bounded)
{
	gk_wsub_tab t;
	gk_wsub_tab_init(&t, 2);
	Gpukmm__Leadership l = GPUKMM__LEADERSHIP__INIT;
	l.identity = "one";
	gk_err e;
	cr_assert_eq(gk_wsub_tab_put(&t, "a", &l.base, &e), 0);
	l.identity = "two"; /* a copy was kept */
	const Gpukmm__Leadership *a = (const Gpukmm__Leadership *)gk_wsub_tab_get(&t, "a");
	cr_assert_str_eq(a->identity, "one");
	cr_assert_eq(gk_wsub_tab_put(&t, "a", &l.base, &e), 0);
	cr_assert_str_eq(((const Gpukmm__Leadership *)gk_wsub_tab_get(&t, "a"))->identity, "two");
	cr_assert_eq(gk_wsub_tab_put(&t, "b", &l.base, &e), 0);
	cr_assert_eq(gk_wsub_tab_put(&t, "c", &l.base, &e), GK_RESOURCE_EXHAUSTED);
	cr_assert(strstr(e.msg, "dropping c"), "%s", e.msg);
	cr_assert_eq(t.n, 2);
	gk_wsub_tab_del(&t, "a");
	gk_wsub_tab_del(&t, "nope");
	cr_assert_null(gk_wsub_tab_get(&t, "a"));
	cr_assert_eq(gk_wsub_tab_put(&t, "c", &l.base, &e), 0, "room again");
	gk_wsub_tab_clear(&t);
	cr_assert_eq(t.n, 0);
	cr_assert_eq(gk_wsub_tab_put(&t, "d", &l.base, &e), 0, "usable after clear");
	cr_assert_eq(t.max, 2);
	gk_wsub_tab_clear(&t);
	cr_assert_null(gk_wsub_clone(NULL));
}

/* the hash index follows every swap of a delete; a set holds keys without messages */
Test(wsub_tab, the_index_follows_deletes_and_sets_hold_keys_only)
{
	gk_wsub_tab t;
	gk_wsub_tab_init(&t, 0);
	gk_wsub_tab_kind(&t, "ResourceClaim");
	Gpukmm__Leadership l = GPUKMM__LEADERSHIP__INIT;
	char key[32], id[32];
	for (int i = 0; i < 3000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		snprintf(id, sizeof(id), "id%d", i);
		l.identity = id;
		cr_assert_eq(gk_wsub_tab_put(&t, key, &l.base, NULL), 0);
	}
	for (int i = 0; i < 3000; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		gk_wsub_tab_del(&t, key);
	}
	/* deleting by an entry's own key (the index's copy) is safe */
	while (t.n > 1000)
		gk_wsub_tab_del(&t, t.v[t.n / 2].key);
	cr_assert_eq(t.n, 1000);
	for (size_t i = 0; i < t.n; i++) {
		const Gpukmm__Leadership *x = (const Gpukmm__Leadership *)gk_wsub_tab_get(&t, t.v[i].key);
		cr_assert_eq(&x->base, t.v[i].msg, "%s found at its own index", t.v[i].key);
		cr_assert_str_eq(x->identity + 2, t.v[i].key + 1);
	}
	gk_wsub_tab_clear(&t);
	gk_wsub_tab set;
	gk_wsub_tab_init(&set, 2);
	gk_wsub_tab_kind(&set, "ResourceClaim");
	cr_assert_eq(gk_wsub_tab_add(&set, "ns/a", NULL), 0);
	cr_assert_eq(gk_wsub_tab_add(&set, "ns/a", NULL), 0, "twice is once");
	cr_assert_eq(gk_wsub_tab_add(&set, "ns/b", NULL), 0);
	cr_assert(gk_wsub_tab_has(&set, "ns/a"));
	cr_assert_null(gk_wsub_tab_get(&set, "ns/a"), "no message");
	cr_assert_not(gk_wsub_tab_has(&set, "ns/c"));
	cr_assert_null(gk_wsub_tab_overflow(&set));
	cr_assert_eq(gk_wsub_tab_add(&set, "ns/c", NULL), GK_RESOURCE_EXHAUSTED);
	cr_assert(gk_wsub_tab_overflow(&set) && strstr(gk_wsub_tab_overflow(&set), "every ResourceClaim (at most 2"),
		  "%s", gk_wsub_tab_overflow(&set));
	gk_wsub_tab_del(&set, "ns/a");
	cr_assert_not(gk_wsub_tab_has(&set, "ns/a"));
	cr_assert(gk_wsub_tab_has(&set, "ns/b"));
	gk_wsub_tab_clear(&set);
	cr_assert_null(gk_wsub_tab_overflow(&set), "a clear starts over");
	cr_assert_eq(gk_wsub_tab_add(&set, "ns/c", NULL), 0);
	gk_wsub_tab_clear(&set);
}
