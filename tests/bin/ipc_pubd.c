/* Test helper: a publisher with a snapshot RPC, for bus gap/resync tests.
 *   ipc_pubd RPC_URL BUS_URL [TICK_MS]
 * Serves on RPC_URL:
 *   gpukmm.Echo.Echo {text: TOPIC, delay_ms: N}  publishes N events (gpukmm.Event,
 *       a Node named "<topic>-<seq>") on TOPIC at once; replies count = TOPIC's seq.
 *   gpukmm.Watcher.Snapshot {topics}  replies seqs = the current number per topic.
 * Publishes on BUS_URL and ticks every TICK_MS (default 50). Exits on SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "echo.pb-c.h"
#include "events.pb-c.h"
#include "gpukmm/ipc.h"
#include "gpukmm/loop.h"

typedef struct {
	Gpukmm__Echo_Service echo;
	Gpukmm__Watcher_Service watcher;
	gk_ipc_pub *pub;
	int tick_ms;
} pubd;

static pubd *from_echo(Gpukmm__Echo_Service *s) { return (pubd *)s; }
static pubd *from_watcher(Gpukmm__Watcher_Service *s)
{
	return (pubd *)((char *)s - offsetof(pubd, watcher));
}

static void e_echo(Gpukmm__Echo_Service *s, const Gpukmm__EchoRequest *in, Gpukmm__EchoReply_Closure cl, void *cd)
{
	pubd *p = from_echo(s);
	const char *topic = in->text ? in->text : "t";
	for (uint32_t i = 0; i < in->delay_ms; i++) {
		char name[96];
		Gpukmm__ObjectMeta meta = GPUKMM__OBJECT_META__INIT;
		Gpukmm__Node node = GPUKMM__NODE__INIT;
		Gpukmm__Event ev = GPUKMM__EVENT__INIT;
		snprintf(name, sizeof(name), "%s-%llu", topic, (unsigned long long)gk_ipc_pub_seq(p->pub, topic) + 1);
		meta.name = name;
		node.metadata = &meta;
		ev.has_type = 1;
		ev.type = GPUKMM__EVENT_TYPE__MODIFIED;
		ev.object_case = GPUKMM__EVENT__OBJECT_NODE;
		ev.node = &node;
		if (!gk_ipc_pub_send(p->pub, topic, &ev.base)) {
			gk_ipc_fail(cd, GK_INVALID_ARGUMENT, "topic refused");
			return;
		}
	}
	Gpukmm__EchoReply r = GPUKMM__ECHO_REPLY__INIT;
	r.has_count = 1;
	r.count = gk_ipc_pub_seq(p->pub, topic);
	cl(&r, cd);
}
static void e_slow(Gpukmm__Echo_Service *s, const Gpukmm__EchoRequest *in, Gpukmm__EchoReply_Closure cl, void *cd)
{
	gk_ipc_fail(cd, GK_UNIMPLEMENTED, "not here");
}
#define e_fail e_slow
#define e_add e_slow

static void w_snapshot(Gpukmm__Watcher_Service *s, const Gpukmm__SnapshotRequest *in, Gpukmm__SnapshotReply_Closure cl, void *cd)
{
	pubd *p = from_watcher(s);
	Gpukmm__SnapshotReply r = GPUKMM__SNAPSHOT_REPLY__INIT;
	Gpukmm__TopicSeq ts[16], *tp[16];
	size_t n = in->n_topics < 16 ? in->n_topics : 16;
	for (size_t i = 0; i < n; i++) {
		ts[i] = (Gpukmm__TopicSeq)GPUKMM__TOPIC_SEQ__INIT;
		ts[i].topic = in->topics[i];
		ts[i].has_seq = 1;
		ts[i].seq = gk_ipc_pub_seq(p->pub, in->topics[i]);
		tp[i] = &ts[i];
	}
	r.n_seqs = n;
	r.seqs = tp;
	r.has_synced = 1;
	r.synced = 1;
	r.has_epoch = 1;
	r.epoch = gk_ipc_pub_epoch(p->pub);
	cl(&r, cd);
}
static void w_get(Gpukmm__Watcher_Service *s, const Gpukmm__GetRequest *in, Gpukmm__Event_Closure cl, void *cd)
{
	gk_ipc_fail(cd, GK_NOT_FOUND, "nothing here");
}

static void on_server(gk_loop *l, int fd, uint32_t ev, void *user)
{
	gk_ipc_server_dispatch(user);
}

static void on_tick(gk_loop *l, gk_timer_id id, void *user)
{
	pubd *p = user;
	gk_ipc_pub_tick(p->pub);
	gk_loop_timer(l, p->tick_ms, on_tick, p);
}

static void on_term(gk_loop *l, int signo, void *user)
{
	gk_loop_stop(l, 0);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: ipc_pubd RPC_URL BUS_URL [TICK_MS]\n");
		return 2;
	}
	static pubd p = { .echo = GPUKMM__ECHO__INIT(e_), .watcher = GPUKMM__WATCHER__INIT(w_), .tick_ms = 50 };
	if (argc > 3)
		p.tick_ms = atoi(argv[3]) > 0 ? atoi(argv[3]) : 50;
	gk_loop *l;
	gk_err e;
	gk_ipc_server *s;
	if (gk_loop_new(&l, &e) || gk_loop_signal(l, SIGTERM, on_term, NULL, &e) ||
	    gk_ipc_server_open(&s, argv[1], NULL, &e) || gk_ipc_server_add(s, &p.echo.base, &p, NULL, &e) ||
	    gk_ipc_server_add(s, &p.watcher.base, &p, NULL, &e) || gk_ipc_pub_open(&p.pub, argv[2], NULL, &e) ||
	    gk_loop_add_fd(l, gk_ipc_server_fd(s), EPOLLIN, on_server, s, &e)) {
		fprintf(stderr, "ipc_pubd: %s\n", e.msg);
		return 1;
	}
	gk_loop_timer(l, p.tick_ms, on_tick, &p);
	int rc = gk_loop_run(l);
	gk_ipc_server_close(s);
	gk_ipc_pub_close(p.pub);
	gk_loop_free(l);
	gk_ipc_fini();
	return rc;
}
