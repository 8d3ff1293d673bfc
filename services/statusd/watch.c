/* gpukmm-statusd controller mode: bus + snapshots → view (see watch.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "gpukmm/wsub.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "watch.h"

#define SNAPSHOT_TIMEOUT_MS 10000
#define SNAPSHOT_RETRY_MS 200
#define BUFFER_MAX 4096
/* A snapshot carries every Node with its gpukmm.io/node-report (each at most
 * 64 KiB, typically 1-2 KiB): the default 4 MiB would stop at a few thousand
 * nodes. The digests kept afterwards are small (nodes.h). */
#define SNAPSHOT_MAX (64u << 20)

static const char *const TOPICS[] = { "clusterpolicy", "node", "discovery", "leadership" };
#define N_TOPICS (sizeof(TOPICS) / sizeof(TOPICS[0]))

typedef struct buffered {
	char topic[32];
	uint64_t seq;
	ProtobufCMessage *msg;
} buffered;

struct gk_sd_watch {
	gk_loop *loop;
	gk_sd_view *view;
	gk_ipc_sub *sub;
	gk_ipc_client *watcher;
	bool inflight, again, have_view, closing;
	gk_timer_id retry;
	buffered *buf;
	size_t n_buf;
	bool overflow;
	gk_sd_watch_stats st;
};

static void request_snapshot(gk_sd_watch *w);

static void apply(gk_sd_watch *w, const char *topic, ProtobufCMessage *msg)
{
	gk_err e;
	if (gk_sd_view_apply(w->view, topic, (const Gpukmm__Event *)msg, &e) != GK_OK) {
		w->st.event_errors++;
		GK_WARN("view: %s", e.msg);
	}
}

static void on_event(void *user, const char *topic, uint64_t seq, ProtobufCMessage *msg)
{
	gk_sd_watch *w = user;
	w->st.events++;
	if (!w->have_view || w->inflight) {
		if (w->n_buf < BUFFER_MAX && strlen(topic) < sizeof(w->buf[0].topic)) {
			buffered *b = &w->buf[w->n_buf++];
			snprintf(b->topic, sizeof(b->topic), "%s", topic);
			b->seq = seq;
			b->msg = msg;
			return;
		}
		w->overflow = true; /* the snapshot is retried */
		gk_ipc_free(msg);
		return;
	}
	apply(w, topic, msg);
	gk_ipc_free(msg);
}

static void on_gap(void *user, const char *topic, uint64_t expected, uint64_t got)
{
	gk_sd_watch *w = user;
	w->st.gaps++;
	GK_INFO("bus gap on %s (expected %llu, got %llu): resync by snapshot", topic, (unsigned long long)expected,
		(unsigned long long)got);
	request_snapshot(w);
}

static void drop_buffer(gk_sd_watch *w)
{
	for (size_t i = 0; i < w->n_buf; i++)
		gk_ipc_free(w->buf[i].msg);
	w->n_buf = 0;
	w->overflow = false;
}

static void on_retry(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sd_watch *w = user;
	w->retry = 0;
	request_snapshot(w);
}

static void retry_later(gk_sd_watch *w)
{
	if (!w->retry && !w->closing)
		w->retry = gk_loop_timer(w->loop, SNAPSHOT_RETRY_MS, on_retry, w);
}

static void on_snapshot(void *user, int code, ProtobufCMessage *reply, const char *errmsg)
{
	gk_sd_watch *w = user;
	w->inflight = false;
	const Gpukmm__SnapshotReply *s = (const Gpukmm__SnapshotReply *)reply;
	if (w->closing || code != GK_OK || !s || !(s->has_synced && s->synced) || w->overflow) {
		if (code != GK_OK && code != GK_CANCELLED)
			GK_INFO("watcher snapshot: %s (retrying)", errmsg ? errmsg : gk_code_name(code));
		if (reply)
			gk_ipc_free(reply);
		drop_buffer(w);
		retry_later(w);
		return;
	}
	gk_err e;
	if (gk_sd_view_load_snapshot(w->view, s, &e) != GK_OK)
		GK_WARN("snapshot: %s", e.msg);
	gk_wsub_resume(w->sub, TOPICS, N_TOPICS, s);
	for (size_t i = 0; i < w->n_buf; i++)
		if (w->buf[i].seq > gk_wsub_snapshot_seq(s, w->buf[i].topic))
			apply(w, w->buf[i].topic, w->buf[i].msg);
	drop_buffer(w);
	gk_ipc_free(reply);
	w->st.snapshots++;
	w->have_view = true;
	gk_sd_view_stats vs;
	gk_sd_view_stats_get(w->view, &vs);
	GK_INFO("view rebuilt from snapshot: %zu policies, %zu nodes, leader=%d", vs.policies, vs.nodes, vs.leader);
	if (w->again) {
		w->again = false;
		request_snapshot(w);
	}
}

static void request_snapshot(gk_sd_watch *w)
{
	if (w->closing)
		return;
	if (w->inflight) {
		w->again = true;
		return;
	}
	Gpukmm__SnapshotRequest req = GPUKMM__SNAPSHOT_REQUEST__INIT;
	char *topics[N_TOPICS];
	for (size_t i = 0; i < N_TOPICS; i++)
		topics[i] = (char *)TOPICS[i];
	req.topics = topics;
	req.n_topics = N_TOPICS;
	gk_err e;
	if (gk_ipc_call_async(w->watcher, &gpukmm__watcher__descriptor, "Snapshot", &req.base, SNAPSHOT_TIMEOUT_MS,
			      on_snapshot, w, &e) != GK_OK) {
		GK_WARN("watcher snapshot: %s", e.msg);
		retry_later(w);
		return;
	}
	w->inflight = true;
}

static void on_sub_fd(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_sub_dispatch(((gk_sd_watch *)user)->sub);
}

static void on_client_fd(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_client_dispatch(user);
}

int gk_sd_watch_open(gk_sd_watch **out, gk_loop *loop, const char *events_url, const char *watcher_url,
		     gk_sd_view *view, gk_err *err)
{
	gk_sd_watch *w = calloc(1, sizeof(*w));
	if (w)
		w->buf = calloc(BUFFER_MAX, sizeof(*w->buf));
	if (!w || !w->buf) {
		free(w);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	w->loop = loop;
	w->view = view;
	if (gk_ipc_sub_open(&w->sub, events_url, NULL, on_event, on_gap, w, err))
		goto fail;
	for (size_t i = 0; i < N_TOPICS; i++)
		if (gk_ipc_sub_topic(w->sub, TOPICS[i], &gpukmm__event__descriptor, err))
			goto fail;
	const gk_ipc_opts co = { .recv_max = SNAPSHOT_MAX, .unpack_max = 2 * SNAPSHOT_MAX };
	if (gk_ipc_client_open(&w->watcher, watcher_url, &co, err))
		goto fail;
	if (gk_loop_add_fd(loop, gk_ipc_sub_fd(w->sub), EPOLLIN, on_sub_fd, w, err))
		goto fail;
	if (gk_loop_add_fd(loop, gk_ipc_client_fd(w->watcher), EPOLLIN, on_client_fd, w->watcher, err)) {
		gk_loop_del_fd(loop, gk_ipc_sub_fd(w->sub));
		goto fail;
	}
	request_snapshot(w);
	*out = w;
	return GK_OK;
fail:
	if (w->watcher)
		gk_ipc_client_close(w->watcher);
	if (w->sub)
		gk_ipc_sub_close(w->sub);
	free(w->buf);
	free(w);
	return err->code;
}

void gk_sd_watch_close(gk_sd_watch *w)
{
	if (!w)
		return;
	w->closing = true;
	if (w->retry)
		gk_loop_cancel(w->loop, w->retry);
	gk_loop_del_fd(w->loop, gk_ipc_sub_fd(w->sub));
	gk_loop_del_fd(w->loop, gk_ipc_client_fd(w->watcher));
	gk_ipc_client_close(w->watcher); /* an outstanding snapshot: GK_CANCELLED */
	gk_ipc_sub_close(w->sub);
	drop_buffer(w);
	free(w->buf);
	free(w);
}

const gk_sd_watch_stats *gk_sd_watch_stats_get(const gk_sd_watch *w)
{
	return &w->st;
}
