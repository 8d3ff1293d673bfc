/* gpukmm — RPC client over a REQ socket. Every call has its own nng context so
 * calls from several threads (blocking) or many outstanding calls (async) run
 * concurrently on one connection. Blocking calls reuse contexts from a small
 * pool; async calls complete on nng's threads and are handed to the owner's
 * thread through an eventfd, like server requests. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "nngutil.h"

#define DEFAULT_TIMEOUT_MS 30000
#define POOL_MAX 16

typedef struct slot {
	nng_ctx ctx;
	nng_aio *aio;
	struct slot *next;
} slot;

enum { A_SEND, A_RECV, A_DONE };

typedef struct acall {
	struct gk_ipc_client *c;
	nng_ctx ctx;
	nng_aio *aio;
	int state;
	int rv;                    /* nng result when it failed */
	nng_msg *rep;
	const ProtobufCMethodDescriptor *md;
	uint64_t request_id;
	int64_t deadline_mono;
	gk_ipc_done_fn done;
	void *user;
	struct acall *prev, *next; /* every call not yet dispatched */
	struct acall *qnext;       /* completion queue */
} acall;

struct gk_ipc_client {
	nng_socket sock;
	gk_ipc_cfg cfg;
	uint64_t client_id;
	atomic_uint_fast64_t next_request;
	gk_ipc_dialer *dial;       /* the connection, its pipe count and its re-dialing */
	pthread_mutex_t mu;        /* everything below */
	slot *pool;
	int pool_n;
	acall *calls;
	acall *qhead, *qtail;
	int efd;
	gk_ipc_stats st;
};

int gk_ipc_client_open(gk_ipc_client **out, const char *url, const gk_ipc_opts *opts, gk_err *err)
{
	*out = NULL;
	if (!url)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: client: no address");
	gk_ipc_client *c = calloc(1, sizeof(*c));
	if (!c)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	gk_ipc_cfg_from(opts, &c->cfg);
	pthread_mutex_init(&c->mu, NULL);
	atomic_init(&c->next_request, 1);
	c->efd = -1;
	if (getrandom(&c->client_id, sizeof(c->client_id), 0) != sizeof(c->client_id))
		c->client_id = (uint64_t)getpid() << 32 ^ (uint64_t)gk_mono_ms();
	int rv = nng_req0_open(&c->sock);
	if (rv != 0) {
		pthread_mutex_destroy(&c->mu);
		free(c);
		return gk_err_set(err, GK_INTERNAL, "ipc: req socket: %s", nng_strerror(rv));
	}
	int code;
	if ((code = gk_ipc_sock_setup(c->sock, &c->cfg, err)) != 0)
		goto fail;
	if ((c->efd = gk_evfd_new(err)) < 0) {
		code = GK_INTERNAL;
		goto fail;
	}
	if ((code = gk_ipc_dialer_open(&c->dial, c->sock, url, &c->cfg, err)) != 0)
		goto fail;
	*out = c;
	return 0;
fail:
	gk_ipc_client_close(c);
	return code;
}

uint64_t gk_ipc_client_id(const gk_ipc_client *c)
{
	return c->client_id;
}

/* Builds the request frame; NULL when the method is unknown (err set). */
static nng_msg *build(gk_ipc_client *c, const ProtobufCServiceDescriptor *svc, const char *method,
		      const ProtobufCMessage *req, int timeout_ms, const ProtobufCMethodDescriptor **md,
		      uint64_t *request_id, gk_err *err)
{
	*md = svc && method ? protobuf_c_service_descriptor_get_method_by_name(svc, method) : NULL;
	if (!*md) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: %s has no method %s", svc ? svc->name : "(null)",
			   method ? method : "(null)");
		return NULL;
	}
	if (!req || req->descriptor != (*md)->input) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: %s.%s takes a %s", svc->name, method,
			   (*md)->input->name);
		return NULL;
	}
	*request_id = atomic_fetch_add(&c->next_request, 1);
	int64_t deadline = gk_now_ms() + timeout_ms;
	size_t n = gk_frame_env_size(svc->name, method, *request_id, c->client_id, deadline, req);
	nng_msg *m;
	if (nng_msg_alloc(&m, n) != 0) {
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
		return NULL;
	}
	gk_frame_env_write(nng_msg_body(m), svc->name, method, *request_id, c->client_id, deadline, req);
	return m;
}

/* Resends only matter when a request was lost inside a live server; a server
 * that restarts gets the request again anyway (nng resends on a new pipe).
 * Half the deadline (at least 1 s) gives one retry without doubling every
 * slow call. */
static nng_duration resend_ms(int timeout_ms)
{
	int r = timeout_ms / 2;
	return r < 1000 ? 1000 : r;
}

static int nng_code(gk_ipc_client *c, int rv, const char *what, gk_err *err)
{
	if (rv == NNG_ETIMEDOUT) {
		if (gk_ipc_dialer_pipes(c->dial) == 0)
			return gk_err_set(err, GK_UNAVAILABLE, "ipc: %s: no server is reachable", what);
		return gk_err_set(err, GK_DEADLINE_EXCEEDED, "ipc: %s: deadline exceeded", what);
	}
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return gk_err_set(err, GK_CANCELLED, "ipc: %s: cancelled", what);
	return gk_err_set(err, GK_UNAVAILABLE, "ipc: %s: %s", what, nng_strerror(rv));
}

/* Decodes a reply frame into *reply (or the error). */
static int decode(gk_ipc_client *c, nng_msg *rep, const ProtobufCMethodDescriptor *md,
		  uint64_t request_id, ProtobufCMessage **reply, gk_err *err)
{
	gk_reply_view v;
	if (gk_frame_reply_parse(nng_msg_body(rep), nng_msg_len(rep), &v) != 0)
		return gk_err_set(err, GK_INTERNAL, "ipc: %s: undecodable reply", md->name);
	if (v.request_id && v.request_id != request_id)
		return gk_err_set(err, GK_INTERNAL, "ipc: %s: reply to another request", md->name);
	if (v.code != GK_OK) {
		int code = v.code > 0 && v.code <= GK_UNAUTHENTICATED ? v.code : GK_UNKNOWN;
		return gk_err_set(err, code, "%.*s", (int)(v.message.n > 400 ? 400 : v.message.n),
				  (const char *)v.message.p);
	}
	*reply = gk_unpack_capped(md->output, v.payload.p, v.payload.n, c->cfg.unpack_max);
	if (!*reply)
		return gk_err_set(err, GK_INTERNAL, "ipc: %s: undecodable %s in reply", md->name,
				  md->output->name);
	return 0;
}

static void count(gk_ipc_client *c, int code)
{
	pthread_mutex_lock(&c->mu);
	c->st.calls++;
	if (code)
		c->st.errors++;
	if (code == GK_DEADLINE_EXCEEDED)
		c->st.deadline_exceeded++;
	pthread_mutex_unlock(&c->mu);
}

static slot *get_slot(gk_ipc_client *c, gk_err *err)
{
	pthread_mutex_lock(&c->mu);
	slot *s = c->pool;
	if (s) {
		c->pool = s->next;
		c->pool_n--;
	}
	pthread_mutex_unlock(&c->mu);
	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s) {
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
		return NULL;
	}
	int rv;
	if ((rv = nng_aio_alloc(&s->aio, NULL, NULL)) != 0) {
		free(s);
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: aio: %s", nng_strerror(rv));
		return NULL;
	}
	if ((rv = nng_ctx_open(&s->ctx, c->sock)) != 0) {
		nng_aio_free(s->aio);
		free(s);
		gk_err_set(err, rv == NNG_ECLOSED ? GK_CANCELLED : GK_RESOURCE_EXHAUSTED, "ipc: ctx: %s",
			   nng_strerror(rv));
		return NULL;
	}
	return s;
}

static void put_slot(gk_ipc_client *c, slot *s, int healthy)
{
	if (healthy) {
		pthread_mutex_lock(&c->mu);
		if (c->pool_n < POOL_MAX) {
			s->next = c->pool;
			c->pool = s;
			c->pool_n++;
			s = NULL;
		}
		pthread_mutex_unlock(&c->mu);
		if (!s)
			return;
	}
	nng_ctx_close(s->ctx);
	nng_aio_free(s->aio);
	free(s);
}

int gk_ipc_call(gk_ipc_client *c, const ProtobufCServiceDescriptor *svc, const char *method,
		const ProtobufCMessage *req, ProtobufCMessage **reply, int timeout_ms, gk_err *err)
{
	*reply = NULL;
	if (timeout_ms <= 0)
		timeout_ms = DEFAULT_TIMEOUT_MS;
	const ProtobufCMethodDescriptor *md;
	uint64_t rid;
	int64_t end = gk_mono_ms() + timeout_ms;
	nng_msg *m = build(c, svc, method, req, timeout_ms, &md, &rid, err);
	if (!m)
		return err ? err->code : GK_INVALID_ARGUMENT;
	slot *s = get_slot(c, err);
	if (!s) {
		nng_msg_free(m);
		return err ? err->code : GK_RESOURCE_EXHAUSTED;
	}
	gk_ipc_dialer_service(c->dial);
	nng_ctx_set_ms(s->ctx, NNG_OPT_REQ_RESENDTIME, resend_ms(timeout_ms));
	nng_aio_set_msg(s->aio, m);
	nng_aio_set_timeout(s->aio, timeout_ms);
	nng_ctx_send(s->ctx, s->aio);
	nng_aio_wait(s->aio);
	int rv = nng_aio_result(s->aio), code;
	if (rv != 0) {
		nng_msg_free(nng_aio_get_msg(s->aio));
		code = nng_code(c, rv, md->name, err);
		put_slot(c, s, 0);
		count(c, code);
		return code;
	}
	int64_t left = end - gk_mono_ms();
	nng_aio_set_timeout(s->aio, left > 0 ? (nng_duration)left : 1);
	nng_ctx_recv(s->ctx, s->aio);
	nng_aio_wait(s->aio);
	rv = nng_aio_result(s->aio);
	if (rv != 0) {
		code = nng_code(c, rv, md->name, err);
		put_slot(c, s, 0);
		count(c, code);
		return code;
	}
	nng_msg *rep = nng_aio_get_msg(s->aio);
	put_slot(c, s, 1);
	code = decode(c, rep, md, rid, reply, err);
	nng_msg_free(rep);
	count(c, code);
	return code;
}

/* ---- async --------------------------------------------------------------------- */

static void complete(acall *a)
{
	gk_ipc_client *c = a->c;
	pthread_mutex_lock(&c->mu);
	a->state = A_DONE;
	a->qnext = NULL;
	if (c->qtail)
		c->qtail->qnext = a;
	else
		c->qhead = a;
	c->qtail = a;
	pthread_mutex_unlock(&c->mu);
	gk_evfd_signal(c->efd);
}

static void acall_cb(void *arg)
{
	acall *a = arg;
	int rv = nng_aio_result(a->aio);
	if (rv != 0) {
		if (a->state == A_SEND)
			nng_msg_free(nng_aio_get_msg(a->aio));
		a->rv = rv;
		complete(a);
		return;
	}
	if (a->state == A_SEND) {
		a->state = A_RECV;
		int64_t left = a->deadline_mono - gk_mono_ms();
		nng_aio_set_timeout(a->aio, left > 0 ? (nng_duration)left : 1);
		nng_ctx_recv(a->ctx, a->aio);
		return;
	}
	a->rep = nng_aio_get_msg(a->aio);
	complete(a);
}

static void acall_free(acall *a)
{
	if (a->aio)
		nng_aio_free(a->aio);
	nng_ctx_close(a->ctx);
	if (a->rep)
		nng_msg_free(a->rep);
	free(a);
}

int gk_ipc_call_async(gk_ipc_client *c, const ProtobufCServiceDescriptor *svc, const char *method,
		      const ProtobufCMessage *req, int timeout_ms, gk_ipc_done_fn done, void *user,
		      gk_err *err)
{
	if (!done)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "ipc: async call without a callback");
	if (timeout_ms <= 0)
		timeout_ms = DEFAULT_TIMEOUT_MS;
	acall *a = calloc(1, sizeof(*a));
	if (!a)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: out of memory");
	a->c = c;
	a->done = done;
	a->user = user;
	a->deadline_mono = gk_mono_ms() + timeout_ms;
	nng_msg *m = build(c, svc, method, req, timeout_ms, &a->md, &a->request_id, err);
	if (!m) {
		free(a);
		return err ? err->code : GK_INVALID_ARGUMENT;
	}
	int rv;
	if ((rv = nng_aio_alloc(&a->aio, acall_cb, a)) != 0 || (rv = nng_ctx_open(&a->ctx, c->sock)) != 0) {
		nng_msg_free(m);
		if (a->aio)
			nng_aio_free(a->aio);
		free(a);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "ipc: async call: %s", nng_strerror(rv));
	}
	nng_ctx_set_ms(a->ctx, NNG_OPT_REQ_RESENDTIME, resend_ms(timeout_ms));
	gk_ipc_dialer_service(c->dial);
	pthread_mutex_lock(&c->mu);
	a->next = c->calls;
	if (c->calls)
		c->calls->prev = a;
	c->calls = a;
	pthread_mutex_unlock(&c->mu);
	a->state = A_SEND;
	nng_aio_set_msg(a->aio, m);
	nng_aio_set_timeout(a->aio, timeout_ms);
	nng_ctx_send(a->ctx, a->aio);
	return 0;
}

int gk_ipc_client_fd(gk_ipc_client *c)
{
	return c->efd;
}

static void unlink_call(gk_ipc_client *c, acall *a)
{
	if (a->prev)
		a->prev->next = a->next;
	else
		c->calls = a->next;
	if (a->next)
		a->next->prev = a->prev;
}

static int run_completions(gk_ipc_client *c, int closing)
{
	int n = 0;
	for (;;) {
		pthread_mutex_lock(&c->mu);
		acall *a = c->qhead;
		if (a) {
			c->qhead = a->qnext;
			if (!c->qhead)
				c->qtail = NULL;
			unlink_call(c, a);
		}
		pthread_mutex_unlock(&c->mu);
		if (!a)
			break;
		nng_aio_stop(a->aio); /* the callback has returned */
		gk_err e = { 0 };
		ProtobufCMessage *reply = NULL;
		int code;
		if (closing)
			code = gk_err_set(&e, GK_CANCELLED, "ipc: client closed");
		else if (a->rv)
			code = nng_code(c, a->rv, a->md->name, &e);
		else
			code = decode(c, a->rep, a->md, a->request_id, &reply, &e);
		count(c, code);
		a->done(a->user, code, reply, code ? e.msg : NULL);
		acall_free(a);
		n++;
	}
	return n;
}

int gk_ipc_client_dispatch(gk_ipc_client *c)
{
	gk_evfd_drain(c->efd);
	int n = run_completions(c, 0);
	gk_ipc_dialer_service(c->dial); /* a call that found no server: re-dial now if stale */
	return n;
}

void gk_ipc_client_close(gk_ipc_client *c)
{
	if (!c)
		return;
	/* Stop every call's aio first, then close the socket. nng_aio_stop()
	 * cancels the operation, waits for the callback to return and refuses
	 * any new operation on the aio (a callback moving SEND->RECV gets
	 * NNG_ECANCELED at once), so afterwards nothing of ours is pending inside
	 * nng and no callback can touch the client. Waiting for calls "marked
	 * done" was not enough: complete() still signals the eventfd after that,
	 * and nng_close() with our operations in flight hung in nng 1.5.2 (the
	 * reaper waited on an aio task, nng#1543). The list only changes on this
	 * (the owner's) thread: no lock needed to walk it, and none may be held
	 * here (the callbacks take c->mu). */
	for (acall *a = c->calls; a; a = a->next)
		nng_aio_stop(a->aio);
	/* A callback that moved SEND->RECV as the aio was stopped had its
	 * receive refused without another callback (nng 1.5.2 does not run it
	 * again on a stopped aio): queue such calls here, they end CANCELLED. */
	pthread_mutex_lock(&c->mu);
	for (acall *a = c->calls; a; a = a->next)
		if (a->state != A_DONE) {
			a->state = A_DONE;
			a->rv = NNG_ECANCELED;
			a->qnext = NULL;
			if (c->qtail)
				c->qtail->qnext = a;
			else
				c->qhead = a;
			c->qtail = a;
		}
	pthread_mutex_unlock(&c->mu);
	nng_close(c->sock);
	run_completions(c, 1);
	while (c->pool) {
		slot *s = c->pool;
		c->pool = s->next;
		nng_aio_stop(s->aio);
		nng_aio_free(s->aio);
		free(s);
	}
	if (c->efd >= 0)
		close(c->efd);
	gk_ipc_dialer_free(c->dial); /* after nng_close: its pipe callbacks are done */
	pthread_mutex_destroy(&c->mu);
	free(c);
}

void gk_ipc_client_stats(const gk_ipc_client *c, gk_ipc_stats *out)
{
	pthread_mutex_lock((pthread_mutex_t *)&c->mu);
	*out = c->st;
	pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
	out->redials = gk_ipc_dialer_redials(c->dial);
}
