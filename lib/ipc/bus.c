/* gpukmm — event bus: nng PUB/SUB with per-topic sequence numbers and ticks
 * (see the bus section of include/gpukmm/ipc.h). The subscriber reads through
 * nng's receive fd on the owner's thread: no extra thread hop. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "nngutil.h"

#define MAX_TOPICS 1024
#define BUS_BUF 1024          /* nng queue depth (messages) on both ends */
#define DISPATCH_BATCH 1024   /* per dispatch call, so other fds get a turn */

typedef struct topic_seq {
	char name[GK_BUS_TOPIC_MAX];
	uint64_t seq;
} topic_seq;

struct gk_ipc_pub {
	nng_socket sock;
	nng_aio *aio;             /* every send (owner's thread only, like the seqs) */
	gk_ipc_cfg cfg;
	char url[256];
	uint32_t epoch;
	topic_seq *topics;
	size_t n_topics;
	atomic_int pipes;
	gk_ipc_guard *guard;      /* the listener and its nng#1518 probe */
	gk_ipc_stats st;
};

static int topic_ok(const char *t)
{
	return t && strlen(t) < GK_BUS_TOPIC_MAX;
}

static void pub_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	gk_ipc_pub *pb = arg;
	atomic_fetch_add(&pb->pipes, ev == NNG_PIPE_EV_ADD_POST ? 1 : -1);
}

int gk_ipc_pub_open(gk_ipc_pub **out, const char *url, const gk_ipc_opts *opts, gk_err *err)
{
	*out = NULL;
	if (!url)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: pub: no address");
	gk_ipc_pub *p = calloc(1, sizeof(*p));
	if (!p)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	gk_ipc_cfg_from(opts, &p->cfg);
	atomic_init(&p->pipes, 0);
	if (getrandom(&p->epoch, sizeof(p->epoch), 0) != sizeof(p->epoch))
		p->epoch = (uint32_t)getpid() ^ (uint32_t)gk_mono_ms();
	if (p->epoch == 0) /* 0 means "unknown" to gk_ipc_sub_set_seq */
		p->epoch = 1;
	int rv = nng_aio_alloc(&p->aio, NULL, NULL), code;
	if (rv != 0) {
		free(p);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: pub aio: %s", nng_strerror(rv));
	}
	if ((rv = nng_pub0_open(&p->sock)) != 0) {
		nng_aio_free(p->aio);
		free(p);
		return gk_err_set(err, GK_INTERNAL, "ipc: pub socket: %s", nng_strerror(rv));
	}
	nng_pipe_notify(p->sock, NNG_PIPE_EV_ADD_POST, pub_pipe_cb, p);
	nng_pipe_notify(p->sock, NNG_PIPE_EV_REM_POST, pub_pipe_cb, p);
	nng_socket_set_int(p->sock, NNG_OPT_SENDBUF, BUS_BUF);
	if ((code = gk_ipc_sock_setup(p->sock, &p->cfg, err)) != 0 ||
	    (code = gk_ipc_guard_open(&p->guard, p->sock, url, &p->cfg, -1, p->url, sizeof(p->url),
				      err)) != 0) {
		gk_ipc_pub_close(p);
		return code;
	}
	*out = p;
	return 0;
}

const char *gk_ipc_pub_url(const gk_ipc_pub *p)
{
	return p->url;
}

int gk_ipc_pub_peers(const gk_ipc_pub *p)
{
	return atomic_load(&((gk_ipc_pub *)p)->pipes);
}

static topic_seq *find_topic(gk_ipc_pub *p, const char *topic, int create)
{
	for (size_t i = 0; i < p->n_topics; i++)
		if (strcmp(p->topics[i].name, topic) == 0)
			return &p->topics[i];
	if (!create || p->n_topics >= MAX_TOPICS)
		return NULL;
	topic_seq *n = realloc(p->topics, (p->n_topics + 1) * sizeof(*n));
	if (!n)
		return NULL;
	p->topics = n;
	topic_seq *t = &p->topics[p->n_topics++];
	memset(t, 0, sizeof(*t));
	strcpy(t->name, topic);
	return t;
}

static void send_frame(gk_ipc_pub *p, const char *topic, int kind, uint64_t seq,
		       const ProtobufCMessage *msg)
{
	size_t h = gk_bus_header_size(topic);
	size_t n = h + (msg ? protobuf_c_message_get_packed_size(msg) : 0);
	nng_msg *m;
	if (nng_msg_alloc(&m, n) != 0)
		return; /* lossy bus: subscribers see the gap */
	uint8_t *b = nng_msg_body(m);
	gk_bus_header_write(b, topic, kind, p->epoch, seq);
	if (msg)
		protobuf_c_message_pack(msg, b + h);
	/* = nng_sendmsg(NONBLOCK) without its per-message aio: nng 1.5 picks the
	 * expiry queue of every new aio with a getrandom() syscall. An aio without
	 * callback completes inline (pub0 never waits), so the wait returns at once. */
	nng_aio_set_timeout(p->aio, NNG_DURATION_ZERO);
	nng_aio_set_msg(p->aio, m);
	nng_send_aio(p->sock, p->aio);
	nng_aio_wait(p->aio);
	if (nng_aio_result(p->aio) != 0)
		nng_msg_free(m);
	nng_aio_set_msg(p->aio, NULL);
}

uint64_t gk_ipc_pub_send(gk_ipc_pub *p, const char *topic, const ProtobufCMessage *msg)
{
	if (!topic_ok(topic) || !msg)
		return 0;
	topic_seq *t = find_topic(p, topic, 1);
	if (!t)
		return 0;
	t->seq++;
	send_frame(p, topic, GK_BUS_EVENT, t->seq, msg);
	p->st.published++;
	return t->seq;
}

uint64_t gk_ipc_pub_seq(const gk_ipc_pub *p, const char *topic)
{
	if (!topic_ok(topic))
		return 0;
	topic_seq *t = find_topic((gk_ipc_pub *)p, topic, 0);
	return t ? t->seq : 0;
}

uint32_t gk_ipc_pub_epoch(const gk_ipc_pub *p)
{
	return p->epoch;
}

void gk_ipc_pub_tick(gk_ipc_pub *p)
{
	gk_ipc_guard_service(p->guard);
	for (size_t i = 0; i < p->n_topics; i++)
		if (p->topics[i].seq)
			send_frame(p, p->topics[i].name, GK_BUS_TICK, p->topics[i].seq, NULL);
}

void gk_ipc_pub_close(gk_ipc_pub *p)
{
	if (!p)
		return;
	nng_close(p->sock); /* first: its pipe callbacks point at p and the guard */
	nng_aio_free(p->aio);
	gk_ipc_guard_close(p->guard);
	free(p->topics);
	free(p);
}

void gk_ipc_pub_stats(const gk_ipc_pub *p, gk_ipc_stats *out)
{
	*out = p->st;
	out->relistens = gk_ipc_guard_relistens(p->guard);
}

/* ---- subscriber ------------------------------------------------------------------ */

typedef struct sub_topic {
	char name[GK_BUS_TOPIC_MAX];  /* "" = every topic */
	const ProtobufCMessageDescriptor *desc;
} sub_topic;

typedef struct seq_entry {
	char name[GK_BUS_TOPIC_MAX];
	gk_seq_state st;
} seq_entry;

struct gk_ipc_sub {
	nng_socket sock;
	gk_ipc_dialer *dial;
	nng_aio *aio;                 /* reused for every receive (see dispatch) */
	gk_ipc_cfg cfg;
	int fd;
	gk_ipc_event_fn on_event;
	gk_ipc_gap_fn on_gap;
	void *user;
	sub_topic *topics;
	size_t n_topics;
	seq_entry *seqs;
	size_t n_seqs;
	gk_ipc_stats st;
};

int gk_ipc_sub_open(gk_ipc_sub **out, const char *url, const gk_ipc_opts *opts,
		    gk_ipc_event_fn on_event, gk_ipc_gap_fn on_gap, void *user, gk_err *err)
{
	*out = NULL;
	if (!url || !on_event)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: sub: no address or no event callback");
	gk_ipc_sub *s = calloc(1, sizeof(*s));
	if (!s)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	gk_ipc_cfg_from(opts, &s->cfg);
	s->on_event = on_event;
	s->on_gap = on_gap;
	s->user = user;
	s->fd = -1;
	int rv = nng_aio_alloc(&s->aio, NULL, NULL), code;
	if (rv != 0) {
		free(s);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: sub aio: %s", nng_strerror(rv));
	}
	nng_aio_set_timeout(s->aio, NNG_DURATION_ZERO);
	if ((rv = nng_sub0_open(&s->sock)) != 0) {
		nng_aio_free(s->aio);
		free(s);
		return gk_err_set(err, GK_INTERNAL, "ipc: sub socket: %s", nng_strerror(rv));
	}
	nng_socket_set_int(s->sock, NNG_OPT_RECVBUF, BUS_BUF);
	if ((code = gk_ipc_sock_setup(s->sock, &s->cfg, err)) != 0)
		goto fail;
	if ((rv = nng_socket_get_int(s->sock, NNG_OPT_RECVFD, &s->fd)) != 0) {
		code = gk_err_set(err, GK_INTERNAL, "ipc: sub: recv fd: %s", nng_strerror(rv));
		goto fail;
	}
	if ((code = gk_ipc_dialer_open(&s->dial, s->sock, url, &s->cfg, err)) != 0)
		goto fail;
	*out = s;
	return 0;
fail:
	gk_ipc_sub_close(s);
	return code;
}

int gk_ipc_sub_topic(gk_ipc_sub *s, const char *topic, const ProtobufCMessageDescriptor *desc,
		     gk_err *err)
{
	if (!topic_ok(topic) || !desc)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: sub: bad topic or no descriptor");
	for (size_t i = 0; i < s->n_topics; i++)
		if (strcmp(s->topics[i].name, topic) == 0) {
			s->topics[i].desc = desc;
			return 0;
		}
	if (s->n_topics >= MAX_TOPICS)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: sub: too many topics");
	sub_topic *n = realloc(s->topics, (s->n_topics + 1) * sizeof(*n));
	if (!n)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	s->topics = n;
	/* prefix = topic and its NUL, so "node" does not match "nodes" */
	size_t len = *topic ? strlen(topic) + 1 : 0;
	int rv = nng_socket_set(s->sock, NNG_OPT_SUB_SUBSCRIBE, topic, len);
	if (rv != 0)
		return gk_err_set(err, GK_INTERNAL, "ipc: subscribe %s: %s", topic, nng_strerror(rv));
	sub_topic *t = &s->topics[s->n_topics++];
	memset(t, 0, sizeof(*t));
	strcpy(t->name, topic);
	t->desc = desc;
	return 0;
}

static seq_entry *find_seq(gk_ipc_sub *s, const char *topic)
{
	for (size_t i = 0; i < s->n_seqs; i++)
		if (strcmp(s->seqs[i].name, topic) == 0)
			return &s->seqs[i];
	if (s->n_seqs >= MAX_TOPICS)
		return NULL;
	seq_entry *n = realloc(s->seqs, (s->n_seqs + 1) * sizeof(*n));
	if (!n)
		return NULL;
	s->seqs = n;
	seq_entry *e = &s->seqs[s->n_seqs++];
	memset(e, 0, sizeof(*e));
	strcpy(e->name, topic);
	return e;
}

void gk_ipc_sub_set_seq(gk_ipc_sub *s, const char *topic, uint64_t seq, uint32_t epoch)
{
	if (!topic_ok(topic))
		return;
	seq_entry *e = find_seq(s, topic);
	if (!e)
		return;
	e->st.last = seq;
	e->st.known = true;
	e->st.epoch_known = epoch != 0;
	e->st.epoch = epoch;
}

int gk_ipc_sub_fd(gk_ipc_sub *s)
{
	return s->fd;
}

static const ProtobufCMessageDescriptor *desc_for(const gk_ipc_sub *s, const char *topic)
{
	const ProtobufCMessageDescriptor *any = NULL;
	for (size_t i = 0; i < s->n_topics; i++) {
		if (strcmp(s->topics[i].name, topic) == 0)
			return s->topics[i].desc;
		if (!s->topics[i].name[0])
			any = s->topics[i].desc;
	}
	return any;
}

static void handle(gk_ipc_sub *s, const uint8_t *b, size_t n)
{
	gk_bus_view v;
	if (gk_bus_parse(b, n, &v) != 0) {
		s->st.bad_frames++;
		return;
	}
	const ProtobufCMessageDescriptor *d = desc_for(s, v.topic);
	if (!d)
		return; /* not subscribed (a prefix match of another topic cannot happen) */
	seq_entry *e = find_seq(s, v.topic);
	if (!e) {
		s->st.bad_frames++; /* topic table full: refuse rather than grow */
		return;
	}
	uint64_t expected;
	enum gk_seq_action a = gk_seq_decide(&e->st, v.kind, v.epoch, v.seq, &expected);
	/* e may move if a callback subscribes or sets a sequence: looked up again */
	if (a == GK_SEQ_GAP_DELIVER || a == GK_SEQ_TICK_GAP) {
		s->st.gaps++;
		if (s->on_gap) {
			s->on_gap(s->user, v.topic, expected, v.seq);
			/* The owner may have resynced inside the callback (snapshot +
			 * gk_ipc_sub_set_seq): then this message counts against the
			 * snapshot's number, not the one we had. */
			e = find_seq(s, v.topic);
			if (e && !e->st.epoch_known) {
				e->st.epoch_known = true;
				e->st.epoch = v.epoch;
				if (v.seq <= e->st.last)
					return; /* covered by the snapshot */
				e->st.last = v.seq;
			}
		}
	}
	if (a != GK_SEQ_DELIVER && a != GK_SEQ_GAP_DELIVER)
		return;
	ProtobufCMessage *m = gk_unpack_capped(d, v.payload.p, v.payload.n, s->cfg.unpack_max);
	if (!m) {
		s->st.bad_frames++;
		return;
	}
	s->st.received++;
	s->on_event(s->user, v.topic, v.seq, m);
}

int gk_ipc_sub_dispatch(gk_ipc_sub *s)
{
	int n = 0;
	while (n < DISPATCH_BATCH) {
		/* = nng_recvmsg(NONBLOCK) without its two aio allocations per
		 * message (each picks an expiry queue with a getrandom() syscall):
		 * an aio without callback and a zero timeout completes inline */
		nng_recv_aio(s->sock, s->aio);
		nng_aio_wait(s->aio);
		if (nng_aio_result(s->aio) != 0)
			break;
		nng_msg *m = nng_aio_get_msg(s->aio);
		nng_aio_set_msg(s->aio, NULL);
		handle(s, nng_msg_body(m), nng_msg_len(m));
		nng_msg_free(m);
		n++;
	}
	return n;
}

void gk_ipc_sub_close(gk_ipc_sub *s)
{
	if (!s)
		return;
	nng_close(s->sock);
	gk_ipc_dialer_free(s->dial); /* after nng_close: its pipe callbacks are done */
	nng_aio_free(s->aio);
	free(s->topics);
	free(s->seqs);
	free(s);
}

int gk_ipc_sub_service(gk_ipc_sub *s)
{
	return gk_ipc_dialer_service(s->dial);
}

void gk_ipc_sub_stats(const gk_ipc_sub *s, gk_ipc_stats *out)
{
	*out = s->st;
	out->redials = gk_ipc_dialer_redials(s->dial);
}
