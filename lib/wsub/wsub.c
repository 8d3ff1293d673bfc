/* gpukmm — the watcher bus consumer (gpukmm/wsub.h). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "gpukmm/log.h"
#include "gpukmm/wsub.h"
#include "rpc.pb-c.h"

#define TOPIC_MAX 32
#define SERVICE_MS 1000 /* how often the bus connection is checked (gk_ipc_sub_service) */
#define SNAPSHOT_FRAME 4096 /* the reply frame around a snapshot (code, message, ids): far less */
#define TRIM_EVENTS 1024 /* events after which the heap is trimmed (on the next service tick) */

typedef struct buffered {
	char topic[TOPIC_MAX];
	uint64_t seq;
	ProtobufCMessage *msg;
} buffered;

struct gk_wsub {
	gk_loop *loop;
	gk_wsub_opts o;
	gk_wsub_view v;
	gk_ipc_sub *sub;
	gk_ipc_client *watcher;
	bool inflight;      /* a snapshot call is out */
	bool again;         /* a gap while it was out: ask once more after it */
	bool have_view, closing;
	bool unsynced;      /* the last reply was refused as unsynced: the next event asks again */
	gk_timer_id retry, service;
	buffered *buf;
	size_t n_buf;
	bool overflow;
	uint64_t untrimmed; /* events received since the heap was last trimmed */
	uint64_t untrimmed_tick; /* untrimmed at the previous service tick */
	gk_wsub_stats st;
};

/* Hand the pages a burst or a snapshot freed back to the system: the
 * messages nng queued and the objects decoded from them were interleaved with
 * what the view keeps, and glibc gives back only a free heap top by itself. */
static void trim(gk_wsub *w)
{
	malloc_trim(0);
	w->untrimmed = 0;
}

uint64_t gk_wsub_snapshot_seq(const Gpukmm__SnapshotReply *s, const char *topic)
{
	for (size_t i = 0; i < s->n_seqs; i++)
		if (s->seqs[i]->topic && strcmp(s->seqs[i]->topic, topic) == 0)
			return s->seqs[i]->seq;
	return 0;
}

bool gk_wsub_lead_update(bool *leader, uint64_t *term, const Gpukmm__Leadership *l)
{
	bool ld = !l || !l->has_leader || l->leader;
	uint64_t t = l && l->has_term ? l->term : 0;
	bool changed = ld != *leader || t != *term;
	*leader = ld;
	*term = t;
	return changed;
}

static void request_snapshot(gk_wsub *w);

static void apply(gk_wsub *w, const char *topic, const ProtobufCMessage *msg)
{
	gk_err e = { 0 };
	if (w->v.apply(w->v.user, topic, (const Gpukmm__Event *)msg, &e) != GK_OK) {
		w->st.event_errors++;
		GK_WARN("view: %s", e.msg);
	}
}

static void on_event(void *user, const char *topic, uint64_t seq, ProtobufCMessage *msg)
{
	gk_wsub *w = user;
	w->st.events++;
	w->untrimmed++;
	if (w->unsynced && w->retry && !w->inflight) {
		/* an unsynced watcher publishes only its state (no object before its
		 * first lists complete): a change of it is most likely the sync. Ask
		 * now, once, rather than at the retry timer (up to retry_ms later) */
		w->unsynced = false;
		gk_loop_cancel(w->loop, w->retry);
		w->retry = 0;
		request_snapshot(w);
	}
	if (!w->have_view || w->inflight) {
		/* kept: applied after the snapshot when newer than it */
		if (w->n_buf < w->o.buffer_max && strlen(topic) < TOPIC_MAX) {
			buffered *b = &w->buf[w->n_buf++];
			snprintf(b->topic, sizeof(b->topic), "%s", topic);
			b->seq = seq;
			b->msg = msg;
			return;
		}
		w->st.overflows++;
		w->overflow = true; /* the snapshot is retried */
		gk_ipc_free(msg);
		return;
	}
	apply(w, topic, msg);
	gk_ipc_free(msg);
}

static void on_gap(void *user, const char *topic, uint64_t expected, uint64_t got)
{
	gk_wsub *w = user;
	w->st.gaps++;
	GK_INFO("bus gap on %s (expected %llu, got %llu): resync by snapshot", topic, (unsigned long long)expected,
		(unsigned long long)got);
	request_snapshot(w);
}

static void drop_buffer(gk_wsub *w)
{
	for (size_t i = 0; i < w->n_buf; i++)
		gk_ipc_free(w->buf[i].msg);
	w->n_buf = 0;
	w->overflow = false;
}

static void on_retry(gk_loop *l, gk_timer_id id, void *user)
{
	gk_wsub *w = user;
	w->retry = 0;
	request_snapshot(w);
}

static void retry_later(gk_wsub *w)
{
	if (!w->retry && !w->closing)
		w->retry = gk_loop_timer(w->loop, w->o.retry_ms, on_retry, w);
}

/* Resume each topic after the snapshot. A topic with buffered events newer
 * than the snapshot keeps the subscription's own numbers: they already stand
 * after the newest of those (setting the snapshot's would make the next
 * message, or tick, look like a gap and resync for nothing), and they carry
 * the epoch those events came with (a publisher restart since is still seen). */
static void resume(gk_wsub *w, const Gpukmm__SnapshotReply *s)
{
	for (size_t i = 0; i < w->o.n_topics; i++) {
		const char *t = w->o.topics[i];
		uint64_t seq = gk_wsub_snapshot_seq(s, t);
		bool newer = false;
		for (size_t j = 0; j < w->n_buf && !newer; j++)
			newer = w->buf[j].seq > seq && strcmp(w->buf[j].topic, t) == 0;
		if (!newer)
			gk_ipc_sub_set_seq(w->sub, t, seq, s->epoch);
	}
}

static void on_snapshot(void *user, int code, ProtobufCMessage *reply, const char *errmsg)
{
	gk_wsub *w = user;
	w->inflight = false;
	const Gpukmm__SnapshotReply *s = (const Gpukmm__SnapshotReply *)reply;
	if (w->closing || code != GK_OK || !s || !(s->has_synced && s->synced) || w->overflow) {
		if (!w->closing) {
			w->st.snapshot_failures++;
			if (code == GK_RESOURCE_EXHAUSTED) /* it will not fit on a retry either, until the cluster shrinks */
				GK_WARN("watcher snapshot: %s (retrying)", errmsg ? errmsg : gk_code_name(code));
			else if (code != GK_OK)
				GK_INFO("watcher snapshot: %s (retrying)", errmsg ? errmsg : gk_code_name(code));
			else if (w->overflow)
				GK_INFO("watcher snapshot: more than %zu events meanwhile (retrying)", w->o.buffer_max);
			else
				GK_DEBUG("watcher snapshot: watcher not synced yet (retrying)");
			w->unsynced = code == GK_OK && s && !(s->has_synced && s->synced) && !w->overflow;
		}
		drop_buffer(w);
		if (reply) {
			gk_ipc_free(reply);
			trim(w); /* a refused reply can be as large as a good one */
		}
		retry_later(w);
		return;
	}
	gk_err e = { 0 };
	if (w->v.reset(w->v.user, s, &e) != GK_OK)
		GK_WARN("snapshot: %s", e.msg);
	resume(w, s);
	for (size_t i = 0; i < w->n_buf; i++)
		if (w->buf[i].seq > gk_wsub_snapshot_seq(s, w->buf[i].topic))
			apply(w, w->buf[i].topic, w->buf[i].msg);
	drop_buffer(w);
	gk_ipc_free(reply);
	trim(w); /* the reply's objects (every Node, claim... of the topics): only the view stays */
	w->st.snapshots++;
	bool first = !w->have_view;
	w->have_view = true;
	if (w->again) {
		w->again = false;
		request_snapshot(w);
	}
	if (w->v.resynced)
		w->v.resynced(w->v.user, first);
}

static void request_snapshot(gk_wsub *w)
{
	if (w->closing)
		return;
	if (w->inflight) {
		w->again = true;
		return;
	}
	Gpukmm__SnapshotRequest req = GPUKMM__SNAPSHOT_REQUEST__INIT;
	req.topics = (char **)w->o.topics;
	req.n_topics = w->o.n_topics;
	req.has_max_bytes = true;
	req.max_bytes = w->o.snapshot_max > SNAPSHOT_FRAME ? w->o.snapshot_max - SNAPSHOT_FRAME : 0;
	gk_err e;
	if (gk_ipc_call_async(w->watcher, &gpukmm__watcher__descriptor, "Snapshot", &req.base, w->o.snapshot_timeout_ms,
			      on_snapshot, w, &e) != GK_OK) {
		w->st.snapshot_failures++;
		GK_WARN("watcher snapshot: %s", e.msg);
		retry_later(w);
		return;
	}
	w->inflight = true;
	w->unsynced = false;
}

static void on_sub_fd(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_sub_dispatch(((gk_wsub *)user)->sub);
}

static void on_client_fd(gk_loop *l, int fd, uint32_t events, void *user)
{
	gk_ipc_client_dispatch(((gk_wsub *)user)->watcher);
}

/* A bus with no publisher for a while is dialed anew (nng 1.5.2 can give a
 * dialer up); once it reconnects, the new publisher's first message or tick
 * shows the gap and the view resyncs as after any gap. */
static void on_service(gk_loop *l, gk_timer_id id, void *user)
{
	gk_wsub *w = user;
	w->service = gk_loop_timer(l, SERVICE_MS, on_service, w);
	/* during a burst every TRIM_EVENTS events, and once it is over (nothing
	 * new for a tick): at most once a tick, a few ms */
	if (w->untrimmed >= TRIM_EVENTS || (w->untrimmed && w->untrimmed == w->untrimmed_tick))
		trim(w);
	w->untrimmed_tick = w->untrimmed;
	gk_ipc_sub_service(w->sub);
}

int gk_wsub_open(gk_wsub **out, gk_loop *loop, const char *events_url, const char *watcher_url,
		 const gk_wsub_opts *opts, const gk_wsub_view *view, gk_err *err)
{
	*out = NULL;
	if (!opts || !opts->n_topics || !view || !view->reset || !view->apply)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "wsub: no topics or no view callbacks");
	for (size_t i = 0; i < opts->n_topics; i++)
		if (strlen(opts->topics[i]) >= TOPIC_MAX)
			return gk_err_set(err, GK_INVALID_ARGUMENT, "wsub: topic name too long");
	gk_wsub *w = calloc(1, sizeof(*w));
	if (!w)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "wsub: out of memory");
	w->loop = loop;
	w->o = *opts;
	w->v = *view;
	if (!w->o.buffer_max)
		w->o.buffer_max = 4096;
	if (w->o.snapshot_timeout_ms <= 0)
		w->o.snapshot_timeout_ms = 10000;
	if (w->o.retry_ms <= 0)
		w->o.retry_ms = 200;
	w->buf = calloc(w->o.buffer_max, sizeof(*w->buf));
	if (!w->buf) {
		free(w);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "wsub: out of memory");
	}
	if (gk_ipc_sub_open(&w->sub, events_url, NULL, on_event, on_gap, w, err))
		goto fail;
	for (size_t i = 0; i < w->o.n_topics; i++)
		if (gk_ipc_sub_topic(w->sub, w->o.topics[i], &gpukmm__event__descriptor, err))
			goto fail;
	if (!w->o.snapshot_max)
		w->o.snapshot_max = GK_WSUB_SNAPSHOT_MAX;
	const gk_ipc_opts co = { .recv_max = w->o.snapshot_max, .unpack_max = 2 * w->o.snapshot_max };
	if (gk_ipc_client_open(&w->watcher, watcher_url, &co, err))
		goto fail;
	if (gk_loop_add_fd(loop, gk_ipc_sub_fd(w->sub), EPOLLIN, on_sub_fd, w, err))
		goto fail;
	if (gk_loop_add_fd(loop, gk_ipc_client_fd(w->watcher), EPOLLIN, on_client_fd, w, err)) {
		gk_loop_del_fd(loop, gk_ipc_sub_fd(w->sub));
		goto fail;
	}
	w->service = gk_loop_timer(loop, SERVICE_MS, on_service, w);
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
	return err ? err->code : GK_INTERNAL;
}

void gk_wsub_close(gk_wsub *w)
{
	if (!w)
		return;
	w->closing = true;
	if (w->retry)
		gk_loop_cancel(w->loop, w->retry);
	if (w->service)
		gk_loop_cancel(w->loop, w->service);
	gk_loop_del_fd(w->loop, gk_ipc_sub_fd(w->sub));
	gk_loop_del_fd(w->loop, gk_ipc_client_fd(w->watcher));
	gk_ipc_client_close(w->watcher); /* an outstanding snapshot: GK_CANCELLED */
	gk_ipc_sub_close(w->sub);
	drop_buffer(w);
	free(w->buf);
	free(w);
}

bool gk_wsub_synced(const gk_wsub *w)
{
	return w && w->have_view && !w->inflight;
}

const gk_wsub_stats *gk_wsub_stats_get(const gk_wsub *w)
{
	return &w->st;
}
