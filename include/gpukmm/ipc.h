/* gpukmm — IPC: protobuf RPC and an event bus over nng (DESIGN.md §3).
 *
 * This header is the whole public face of lib/ipc; nothing outside lib/ipc
 * includes <nng/nng.h>, so moving to a newer nng is a change in lib/ipc only.
 *
 * Threading model: nng runs its own threads, but every callback of this API
 * (RPC handlers, async call completions, bus deliveries) runs on the thread
 * that calls the matching *_dispatch() function. Each object exposes a pollable
 * file descriptor that becomes readable when dispatch has work, so a service
 * keeps ONE event loop (poll/epoll + signalfd + timerfd) and single-threaded
 * state. The blocking gk_ipc_call() is for CLIs, tests and simple clients.
 *
 * Addresses are nng URLs: "ipc:///run/gpukmm/watcher.sock", "inproc://x",
 * "tcp://127.0.0.1:0" (tests). For ipc:// listeners the socket file is created
 * with mode 0600 (the runtime dir is 0700, created by the supervisor).
 */
#ifndef GPUKMM_IPC_H
#define GPUKMM_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "gpukmm/err.h"

/* ---- options shared by every socket ------------------------------------ */

typedef struct gk_ipc_opts {
	size_t recv_max;         /* NNG_OPT_RECVMAXSZ; 0 = default 4 MiB */
	int reconnect_min_ms;    /* 0 = default 10 ms */
	int reconnect_max_ms;    /* 0 = default 1000 ms */
	int workers;             /* server: concurrent contexts; 0 = default 8 */
	size_t unpack_max;       /* capped allocator budget per unpack; 0 = 16 MiB */
	int socket_mode;         /* ipc:// listener file mode; 0 = 0600 */
	int probe_ms;            /* ipc:// listener self-probe interval (nng#1518
				  * work-around, see below); 0 = 1000, <0 = off */
} gk_ipc_opts;

/* Counters every object keeps (exported in heartbeats / metrics). */
typedef struct gk_ipc_stats {
	uint64_t calls;          /* requests handled (server) / made (client) */
	uint64_t errors;         /* non-OK replies */
	uint64_t bad_frames;     /* undecodable envelopes or payloads, dropped */
	uint64_t deduped;        /* requests answered from the dedupe cache */
	uint64_t deadline_exceeded;
	uint64_t published;      /* bus */
	uint64_t received;       /* bus */
	uint64_t gaps;           /* bus: sequence gaps detected */
	uint64_t relistens;      /* server/pub: stuck listener re-created (nng#1518) */
	uint64_t redials;        /* client/sub: dialer re-created after no connection (dialer.c) */
} gk_ipc_stats;

/* ---- RPC server ----------------------------------------------------------
 *
 * Services are the protoc-c generated ones: fill the generated
 * `Gpukmm__Foo_Service` with GPUKMM__FOO__INIT(prefix_) and register its
 * `.base`. Handlers have the generated signature
 *     void prefix_method(Gpukmm__Foo_Service *svc, const Req *in,
 *                        Reply_Closure closure, void *closure_data);
 * and must call closure(reply, closure_data) exactly once before returning,
 * or call gk_ipc_fail(closure_data, code, fmt, ...) instead to answer with an
 * error. Returning without either answers INTERNAL. Deferred replies are not
 * supported: handlers run on the dispatch thread and answer at once.
 *
 * To reach your own state from a handler, embed the generated service struct
 * as the first member of your own struct and cast, or use
 * gk_ipc_call_user(closure_data) which returns the `user` given to
 * gk_ipc_server_add(). */

typedef struct gk_ipc_server gk_ipc_server;

/* Information about the call being handled (valid during the handler). */
typedef struct gk_ipc_call_info {
	const char *service;
	const char *method;
	uint64_t client_id;
	uint64_t request_id;
	int64_t deadline_ms;     /* absolute CLOCK_REALTIME ms, 0 = none */
	pid_t peer_pid;          /* ipc:// only, else 0 */
	uid_t peer_uid;
} gk_ipc_call_info;

int gk_ipc_server_open(gk_ipc_server **out, const char *url, const gk_ipc_opts *opts, gk_err *err);
/* The address clients dial: the URL given, with a tcp port 0 replaced by the
 * port actually bound (tests listen on "tcp://127.0.0.1:0"). */
const char *gk_ipc_server_url(const gk_ipc_server *s);
/* Register a service. `mutating` names (NULL-terminated, may be NULL) are methods
 * whose replies are cached by (client_id, request_id) so that a resent request
 * is answered without running the handler twice. */
int gk_ipc_server_add(gk_ipc_server *s, ProtobufCService *service, void *user,
		      const char *const *mutating, gk_err *err);
/* Readable when requests are waiting; then call dispatch (non-blocking). */
int gk_ipc_server_fd(gk_ipc_server *s);
/* Handle every request that is waiting; returns how many were handled.
 * Also re-creates the ipc:// listener when its self-probe found it stuck:
 * nng 1.5.2 (bug #1518) stops accepting for good after a peer disconnects in
 * the middle of the handshake. Contexts and queued requests survive; clients
 * of the old listener reconnect and resend. */
int gk_ipc_server_dispatch(gk_ipc_server *s);
/* Probe the listener now rather than at the next interval: call it when a
 * peer died (e.g. the supervisor, after a service exit), since a peer dying
 * mid-handshake is what breaks the listener. */
void gk_ipc_server_probe(gk_ipc_server *s);
void gk_ipc_server_close(gk_ipc_server *s);
void gk_ipc_server_stats(const gk_ipc_server *s, gk_ipc_stats *out);

/* In a handler: answer with an error instead of calling the closure. */
void gk_ipc_fail(void *closure_data, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const gk_ipc_call_info *gk_ipc_call_info_of(void *closure_data);
void *gk_ipc_call_user(void *closure_data);

/* ---- RPC client ------------------------------------------------------------ */

typedef struct gk_ipc_client gk_ipc_client;

/* Dial is asynchronous: opening succeeds even if the server is not up yet;
 * calls then wait (within their deadline) for the connection. */
int gk_ipc_client_open(gk_ipc_client **out, const char *url, const gk_ipc_opts *opts, gk_err *err);
void gk_ipc_client_close(gk_ipc_client *c);
void gk_ipc_client_stats(const gk_ipc_client *c, gk_ipc_stats *out);

/* The random id this client puts in every envelope (dedupe key with request_id). */
uint64_t gk_ipc_client_id(const gk_ipc_client *c);

/* Blocking call. `method` is the method name in `svc` (e.g. "Ready").
 * timeout_ms <= 0 means the default, 30 s; the deadline travels in the envelope.
 * On GK_OK, *reply is the unpacked reply (free with gk_ipc_free). On error,
 * returns the status code (UNAVAILABLE when no server answered, DEADLINE_EXCEEDED
 * when timeout_ms passed, or the server's code) and fills err.
 * Thread-safe: each call uses its own nng context. */
int gk_ipc_call(gk_ipc_client *c, const ProtobufCServiceDescriptor *svc, const char *method,
		const ProtobufCMessage *req, ProtobufCMessage **reply, int timeout_ms, gk_err *err);

/* Async call for event loops: `done` runs inside gk_ipc_client_dispatch() on
 * the dispatching thread, with the code, the reply (NULL unless GK_OK; owned by
 * the callee, free with gk_ipc_free) and an error message. Calls still
 * outstanding at gk_ipc_client_close() get `done` with GK_CANCELLED there. */
typedef void (*gk_ipc_done_fn)(void *user, int code, ProtobufCMessage *reply, const char *errmsg);
int gk_ipc_call_async(gk_ipc_client *c, const ProtobufCServiceDescriptor *svc, const char *method,
		      const ProtobufCMessage *req, int timeout_ms, gk_ipc_done_fn done, void *user,
		      gk_err *err);
int gk_ipc_client_fd(gk_ipc_client *c);       /* readable when completions wait */
int gk_ipc_client_dispatch(gk_ipc_client *c); /* run waiting completions */

/* Free a message returned by this library (reply, bus event, decoded payload). */
void gk_ipc_free(ProtobufCMessage *msg);

/* ---- bus (PUB/SUB with per-topic sequence numbers) -------------------------
 *
 * Lossy by design (nng PUB drops when a subscriber lags). The publisher stamps
 * each message with its topic's sequence number (1, 2, 3 … per topic) and, every
 * `tick_ms`, republishes each topic's current number as an empty "tick" so a
 * subscriber notices a lost tail. A subscriber tracks the last number per topic
 * and calls its gap callback when one is skipped; the owner then resyncs by a
 * snapshot RPC (whose reply carries the numbers to resume from, see
 * gk_ipc_sub_set_seq()). Nothing that must arrive goes only over the bus. */

typedef struct gk_ipc_pub gk_ipc_pub;
typedef struct gk_ipc_sub gk_ipc_sub;

/* The publisher listens on url; subscribers dial it. */
int gk_ipc_pub_open(gk_ipc_pub **out, const char *url, const gk_ipc_opts *opts, gk_err *err);
const char *gk_ipc_pub_url(const gk_ipc_pub *p);    /* resolved like gk_ipc_server_url */
int gk_ipc_pub_peers(const gk_ipc_pub *p);          /* subscribers connected now */
/* Publish msg on topic (a short name, under 64 bytes). Returns the sequence
 * number used, 0 when refused (bad topic, too many topics). Never blocks. */
uint64_t gk_ipc_pub_send(gk_ipc_pub *p, const char *topic, const ProtobufCMessage *msg);
uint64_t gk_ipc_pub_seq(const gk_ipc_pub *p, const char *topic); /* current number, 0 if none */
/* This publisher's epoch (random, never 0): a snapshot reply carries it with
 * its numbers so a subscriber can tell them from a restarted publisher's. */
uint32_t gk_ipc_pub_epoch(const gk_ipc_pub *p);
/* Publish ticks for every topic; call from a timer (the library keeps no
 * thread). Also re-creates a stuck listener (see gk_ipc_server_dispatch). */
void gk_ipc_pub_tick(gk_ipc_pub *p);
void gk_ipc_pub_close(gk_ipc_pub *p);
void gk_ipc_pub_stats(const gk_ipc_pub *p, gk_ipc_stats *out);

/* Deliveries: msg is unpacked with the descriptor given for the topic (owned by
 * the callee, free with gk_ipc_free). */
typedef void (*gk_ipc_event_fn)(void *user, const char *topic, uint64_t seq, ProtobufCMessage *msg);
/* A gap: `expected` was due, `got` arrived (or a tick announced it). A
 * restarted publisher (its numbers start again) is a gap with expected 1. */
typedef void (*gk_ipc_gap_fn)(void *user, const char *topic, uint64_t expected, uint64_t got);

int gk_ipc_sub_open(gk_ipc_sub **out, const char *url, const gk_ipc_opts *opts,
		    gk_ipc_event_fn on_event, gk_ipc_gap_fn on_gap, void *user, gk_err *err);
/* Subscribe to a topic ("" = all topics, then desc decodes every topic). */
int gk_ipc_sub_topic(gk_ipc_sub *s, const char *topic, const ProtobufCMessageDescriptor *desc,
		     gk_err *err);
/* After a snapshot: drop deliveries with seq <= `seq` and expect seq+1 next.
 * `epoch` is the publisher's epoch the snapshot's numbers belong to
 * (gk_ipc_pub_epoch, sent in the snapshot reply); with it, a publisher that
 * restarted between the snapshot and its next message is seen as a gap. 0 =
 * unknown: the next message's epoch is taken as the snapshot's (a restart in
 * that window then goes unnoticed: its low numbers look already seen). */
void gk_ipc_sub_set_seq(gk_ipc_sub *s, const char *topic, uint64_t seq, uint32_t epoch);
int gk_ipc_sub_fd(gk_ipc_sub *s);
int gk_ipc_sub_dispatch(gk_ipc_sub *s);
/* Call about once a second from the owner's thread (lib/wsub does): re-dials
 * when no publisher has been connected for a while, since an nng 1.5.2 dialer
 * can stop retrying for good after a publisher died mid-handshake. Returns 1
 * when it re-dialed. */
int gk_ipc_sub_service(gk_ipc_sub *s);
void gk_ipc_sub_close(gk_ipc_sub *s);
void gk_ipc_sub_stats(const gk_ipc_sub *s, gk_ipc_stats *out);

/* ---- JSON <-> protobuf through descriptors (the harness, logs, tests) ---- */

/* Parse JSON text into a new message of type desc. Field names are the proto
 * names (snake_case); lowerCamelCase is also accepted. Enums by name or number,
 * 64-bit integers as numbers or strings, bytes as base64. Unknown fields are an
 * error naming the field. Free the result with gk_ipc_free. */
int gk_pb_from_json(const ProtobufCMessageDescriptor *desc, const char *json,
		    ProtobufCMessage **out, gk_err *err);
/* Render a message as compact JSON (malloc'd string; NULL on OOM). Unset
 * optional fields are omitted. */
char *gk_pb_to_json(const ProtobufCMessage *msg);

/* Every service descriptor and message descriptor from proto/, by full name
 * ("gpukmm.Control", "gpukmm.ReadyRequest"); NULL if unknown. */
const ProtobufCServiceDescriptor *gk_pb_find_service(const char *full_name);
const ProtobufCMessageDescriptor *gk_pb_find_message(const char *full_name);

/* ---- helpers ----------------------------------------------------------------- */

/* At exit, after closing every ipc object. Under AddressSanitizer it releases
 * nng's process-wide state (nng_fini: its threads and the objects it frees in
 * the background), so LeakSanitizer sees a clean process and never waits on an
 * nng thread; in other builds it does nothing (exit() ends those threads, and
 * nng 1.5.2's nng_fini can abort racing them). Not in Criterion tests:
 * Criterion itself talks to its runner over nng. */
void gk_ipc_fini(void);

int64_t gk_now_ms(void);        /* CLOCK_REALTIME ms (deadlines on the wire) */
int64_t gk_mono_ms(void);       /* CLOCK_MONOTONIC ms (local timers) */

#endif
