/* gpukmm — RPC server: a REP socket with N nng contexts (workers). Each worker
 * receives on nng's threads; a received request is queued and the eventfd
 * signalled, and gk_ipc_server_dispatch() (the owner's thread) decodes it,
 * runs the handler through ProtobufCService.invoke and sends the reply from the
 * same worker context. Handlers therefore run single-threaded. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpukmm/log.h"
#include "nngutil.h"

#define DEDUPE_ENTRIES 1024
#define DEDUPE_BYTES   (8u << 20)

enum { W_RECV, W_QUEUED, W_SEND };

typedef struct worker {
	struct gk_ipc_server *s;
	nng_aio *aio;
	nng_ctx ctx;
	int state;
	nng_msg *req;
	struct worker *next;
} worker;

typedef struct svc_entry {
	ProtobufCService *svc;
	void *user;
	bool *mutating;           /* by method index */
} svc_entry;

struct gk_ipc_server {
	nng_socket sock;
	gk_ipc_cfg cfg;
	char url[256];
	int is_ipc;
	worker *workers;
	int n_workers;
	pthread_mutex_t mu;
	worker *qhead, *qtail;    /* requests waiting for dispatch */
	int efd;
	svc_entry *svcs;
	size_t n_svcs;
	gk_dedupe *dedupe;
	gk_ipc_guard *guard;      /* the listener and its nng#1518 probe */
	gk_ipc_stats st;
};

/* Per-call state, passed to handlers as closure_data. */
typedef struct call_ctx {
	gk_ipc_server *s;
	gk_ipc_call_info info;
	char service[GK_IPC_NAME_MAX];
	char method[GK_IPC_NAME_MAX];
	void *user;
	nng_pipe pipe;
	int peer_done;
	int answered;
	int code;
	nng_msg *reply;
} call_ctx;

static void worker_cb(void *arg)
{
	worker *w = arg;
	gk_ipc_server *s = w->s;
	int rv = nng_aio_result(w->aio);
	if (w->state == W_SEND) {
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(w->aio));
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		w->state = W_RECV;
		nng_ctx_recv(w->ctx, w->aio);
		return;
	}
	/* W_RECV */
	if (rv != 0) {
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		nng_ctx_recv(w->ctx, w->aio); /* transient (e.g. a dropped pipe) */
		return;
	}
	w->req = nng_aio_get_msg(w->aio);
	w->state = W_QUEUED;
	w->next = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->qtail)
		s->qtail->next = w;
	else
		s->qhead = w;
	s->qtail = w;
	pthread_mutex_unlock(&s->mu);
	gk_evfd_signal(s->efd);
}

int gk_ipc_server_open(gk_ipc_server **out, const char *url, const gk_ipc_opts *opts, gk_err *err)
{
	*out = NULL;
	if (!url)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: server: no listen address");
	gk_ipc_server *s = calloc(1, sizeof(*s));
	if (!s)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	gk_ipc_cfg_from(opts, &s->cfg);
	s->efd = -1;
	pthread_mutex_init(&s->mu, NULL);
	s->is_ipc = gk_ipc_is_ipc_url(url);
	int rv;
	if ((rv = nng_rep0_open(&s->sock)) != 0) {
		gk_err_set(err, GK_INTERNAL, "ipc: rep socket: %s", nng_strerror(rv));
		pthread_mutex_destroy(&s->mu);
		free(s);
		return err ? err->code : GK_INTERNAL;
	}
	int code = 0;
	if ((code = gk_ipc_sock_setup(s->sock, &s->cfg, err)) != 0)
		goto fail;
	if ((s->efd = gk_evfd_new(err)) < 0) {
		code = GK_INTERNAL;
		goto fail;
	}
	s->dedupe = gk_dedupe_new(DEDUPE_ENTRIES, DEDUPE_BYTES);
	s->workers = calloc((size_t)s->cfg.workers, sizeof(*s->workers));
	if (!s->dedupe || !s->workers) {
		code = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
		goto fail;
	}
	for (int i = 0; i < s->cfg.workers; i++) {
		worker *w = &s->workers[i];
		w->s = s;
		if ((rv = nng_aio_alloc(&w->aio, worker_cb, w)) != 0) {
			code = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: worker: %s", nng_strerror(rv));
			goto fail;
		}
		s->n_workers = i + 1;
		if ((rv = nng_ctx_open(&w->ctx, s->sock)) != 0) {
			code = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: worker: %s", nng_strerror(rv));
			goto fail;
		}
	}
	if ((code = gk_ipc_guard_open(&s->guard, s->sock, url, &s->cfg, s->efd, s->url, sizeof(s->url),
				      err)) != 0)
		goto fail;
	for (int i = 0; i < s->n_workers; i++) {
		s->workers[i].state = W_RECV;
		nng_ctx_recv(s->workers[i].ctx, s->workers[i].aio);
	}
	*out = s;
	return 0;
fail:
	gk_ipc_server_close(s);
	return code ? code : GK_INTERNAL;
}

const char *gk_ipc_server_url(const gk_ipc_server *s)
{
	return s->url;
}

int gk_ipc_server_add(gk_ipc_server *s, ProtobufCService *service, void *user,
		      const char *const *mutating, gk_err *err)
{
	if (!service || !service->descriptor || !service->invoke)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: server_add: not a service");
	const ProtobufCServiceDescriptor *d = service->descriptor;
	for (size_t i = 0; i < s->n_svcs; i++)
		if (strcmp(s->svcs[i].svc->descriptor->name, d->name) == 0)
			return gk_err_set(err, GK_ALREADY_EXISTS, "ipc: service %s registered twice", d->name);
	bool *mut = calloc(d->n_methods ? d->n_methods : 1, sizeof(bool));
	if (!mut)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	for (const char *const *m = mutating; m && *m; m++) {
		const ProtobufCMethodDescriptor *md = protobuf_c_service_descriptor_get_method_by_name(d, *m);
		if (!md) {
			free(mut);
			return gk_err_set(err, GK_NOT_FOUND, "ipc: service %s has no method %s", d->name, *m);
		}
		mut[md - d->methods] = true;
	}
	svc_entry *n = realloc(s->svcs, (s->n_svcs + 1) * sizeof(*n));
	if (!n) {
		free(mut);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	}
	s->svcs = n;
	s->svcs[s->n_svcs++] = (svc_entry){ service, user, mut };
	return 0;
}

int gk_ipc_server_fd(gk_ipc_server *s)
{
	return s->efd;
}

static nng_msg *make_reply(int code, const char *message, uint64_t request_id,
			   const ProtobufCMessage *payload)
{
	size_t n = gk_frame_reply_size(code, message, request_id, payload);
	nng_msg *m;
	if (nng_msg_alloc(&m, n) != 0)
		return NULL;
	gk_frame_reply_write(nng_msg_body(m), code, message, request_id, payload);
	return m;
}

static void answer(call_ctx *c, int code, const char *message, const ProtobufCMessage *payload)
{
	if (c->answered) {
		GK_ERROR("ipc: %s.%s answered twice; the second answer is dropped", c->service, c->method);
		return;
	}
	c->answered = 1;
	c->code = code;
	c->reply = make_reply(code, message, c->info.request_id, payload);
}

static void on_closure(const ProtobufCMessage *msg, void *data)
{
	call_ctx *c = data;
	if (!msg)
		answer(c, GK_INTERNAL, "handler answered with no message", NULL);
	else
		answer(c, GK_OK, NULL, msg);
}

void gk_ipc_fail(void *closure_data, int code, const char *fmt, ...)
{
	call_ctx *c = closure_data;
	char buf[GK_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (code == GK_OK)
		code = GK_UNKNOWN; /* failing with OK is a handler bug */
	answer(c, code, buf, NULL);
}

const gk_ipc_call_info *gk_ipc_call_info_of(void *closure_data)
{
	call_ctx *c = closure_data;
	if (!c->peer_done && c->s->is_ipc) {
		uint64_t v; /* nng 1.5.2 types these options as uint64 */
		if (nng_pipe_get_uint64(c->pipe, NNG_OPT_IPC_PEER_PID, &v) == 0)
			c->info.peer_pid = (pid_t)v;
		if (nng_pipe_get_uint64(c->pipe, NNG_OPT_IPC_PEER_UID, &v) == 0)
			c->info.peer_uid = (uid_t)v;
	}
	c->peer_done = 1;
	return &c->info;
}

void *gk_ipc_call_user(void *closure_data)
{
	return ((call_ctx *)closure_data)->user;
}

static const svc_entry *find_service(const gk_ipc_server *s, gk_bytes name)
{
	for (size_t i = 0; i < s->n_svcs; i++) {
		const char *n = s->svcs[i].svc->descriptor->name;
		if (strlen(n) == name.n && memcmp(n, name.p, name.n) == 0)
			return &s->svcs[i];
	}
	return NULL;
}

/* Decodes and runs one request; returns the reply frame (NULL only on OOM). */
static nng_msg *handle(gk_ipc_server *s, nng_msg *req)
{
	gk_env_view env;
	call_ctx c = { .s = s, .pipe = nng_msg_get_pipe(req) };
	s->st.calls++;
	if (gk_frame_env_parse(nng_msg_body(req), nng_msg_len(req), &env) != 0 ||
	    gk_frame_name(env.service, c.service) != 0 || gk_frame_name(env.method, c.method) != 0) {
		s->st.bad_frames++;
		s->st.errors++;
		GK_DEBUG("ipc: undecodable request envelope (%zu bytes)", nng_msg_len(req));
		return make_reply(GK_INVALID_ARGUMENT, "undecodable request envelope", 0, NULL);
	}
	c.info = (gk_ipc_call_info){ .service = c.service, .method = c.method,
				     .client_id = env.client_id, .request_id = env.request_id,
				     .deadline_ms = env.deadline_ms };
	char msg[GK_IPC_NAME_MAX * 2 + 64];
	if (env.deadline_ms && gk_now_ms() > env.deadline_ms) {
		s->st.deadline_exceeded++;
		s->st.errors++;
		return make_reply(GK_DEADLINE_EXCEEDED, "deadline passed before the call was handled",
				  env.request_id, NULL);
	}
	const svc_entry *se = find_service(s, env.service);
	const ProtobufCMethodDescriptor *md =
		se ? protobuf_c_service_descriptor_get_method_by_name(se->svc->descriptor, c.method) : NULL;
	if (!md) {
		s->st.errors++;
		snprintf(msg, sizeof(msg), se ? "unknown method %s.%s" : "unknown service %s",
			 c.service, c.method);
		return make_reply(GK_UNIMPLEMENTED, msg, env.request_id, NULL);
	}
	unsigned idx = (unsigned)(md - se->svc->descriptor->methods);
	bool mutating = se->mutating[idx] && (env.client_id || env.request_id);
	if (mutating) {
		const gk_bytes *hit = gk_dedupe_get(s->dedupe, env.client_id, env.request_id);
		if (hit) {
			s->st.deduped++;
			nng_msg *m;
			if (nng_msg_alloc(&m, hit->n) != 0)
				return NULL;
			memcpy(nng_msg_body(m), hit->p, hit->n);
			return m;
		}
	}
	ProtobufCMessage *in = gk_unpack_capped(md->input, env.payload.p, env.payload.n, s->cfg.unpack_max);
	if (!in) {
		s->st.bad_frames++;
		s->st.errors++;
		snprintf(msg, sizeof(msg), "undecodable %s payload for %s.%s", md->input->name, c.service,
			 c.method);
		return make_reply(GK_INVALID_ARGUMENT, msg, env.request_id, NULL);
	}
	c.user = se->user;
	se->svc->invoke(se->svc, idx, in, on_closure, &c);
	gk_ipc_free(in);
	if (!c.answered) {
		snprintf(msg, sizeof(msg), "%s.%s returned without an answer", c.service, c.method);
		GK_ERROR("ipc: %s", msg);
		answer(&c, GK_INTERNAL, msg, NULL);
	}
	if (c.code != GK_OK)
		s->st.errors++;
	if (mutating && c.reply)
		gk_dedupe_put(s->dedupe, env.client_id, env.request_id, nng_msg_body(c.reply),
			      nng_msg_len(c.reply));
	return c.reply;
}

int gk_ipc_server_dispatch(gk_ipc_server *s)
{
	int n = 0;
	gk_evfd_drain(s->efd);
	gk_ipc_guard_service(s->guard);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		worker *w = s->qhead;
		if (w) {
			s->qhead = w->next;
			if (!s->qhead)
				s->qtail = NULL;
		}
		pthread_mutex_unlock(&s->mu);
		if (!w)
			break;
		nng_msg *req = w->req;
		w->req = NULL;
		nng_msg *rep = handle(s, req);
		nng_msg_free(req);
		n++;
		if (!rep) {
			GK_ERROR("ipc: out of memory building a reply; the caller will time out");
			w->state = W_RECV;
			nng_ctx_recv(w->ctx, w->aio);
			continue;
		}
		w->state = W_SEND;
		nng_aio_set_msg(w->aio, rep);
		nng_ctx_send(w->ctx, w->aio);
	}
	return n;
}

void gk_ipc_server_probe(gk_ipc_server *s)
{
	gk_ipc_guard_kick(s->guard);
}

void gk_ipc_server_close(gk_ipc_server *s)
{
	if (!s)
		return;
	/* socket first: its pipe callbacks point at the guard, and nng_close
	 * returns only when no pipe callback can run any more */
	nng_close(s->sock); /* completes every pending aio with NNG_ECLOSED */
	gk_ipc_guard_close(s->guard);
	for (int i = 0; i < s->n_workers; i++)
		nng_aio_stop(s->workers[i].aio);
	for (int i = 0; i < s->n_workers; i++) {
		nng_aio_free(s->workers[i].aio);
		if (s->workers[i].req)
			nng_msg_free(s->workers[i].req);
	}
	free(s->workers);
	for (size_t i = 0; i < s->n_svcs; i++)
		free(s->svcs[i].mutating);
	free(s->svcs);
	gk_dedupe_free(s->dedupe);
	if (s->efd >= 0)
		close(s->efd);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void gk_ipc_server_stats(const gk_ipc_server *s, gk_ipc_stats *out)
{
	*out = s->st;
	out->relistens = gk_ipc_guard_relistens(s->guard);
}
