/* gpukmm — lib/ipc internals: pure pieces (wire framing, capped unpack, dedupe
 * cache, bus sequence tracking) kept apart from the nng I/O so unit tests and
 * fuzz targets call them directly. Not part of the public API: only lib/ipc,
 * tests/ and the fuzz targets include this file. */
#ifndef GPUKMM_IPC_INTERNAL_H
#define GPUKMM_IPC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "gpukmm/ipc.h"

#define GK_IPC_DEFAULT_RECV_MAX   (4u << 20)
#define GK_IPC_DEFAULT_UNPACK_MAX (16u << 20)
#define GK_IPC_NAME_MAX 128      /* service / method name, incl. NUL */

/* ---- wire framing (rpc.proto Envelope / Reply, encoded by hand) ------------
 *
 * The encoders write exactly what protobuf-c would for an Envelope / Reply, but
 * straight into the transport buffer, packing the payload message in place (no
 * intermediate buffer). The decoders return views into the frame (no copy, no
 * allocation); unknown fields are skipped as protobuf requires. */

typedef struct gk_bytes {
	const uint8_t *p;
	size_t n;
} gk_bytes;

typedef struct gk_env_view {
	gk_bytes service, method, payload;
	uint64_t request_id, client_id;
	int64_t deadline_ms;
} gk_env_view;

typedef struct gk_reply_view {
	int code;
	gk_bytes message, payload;
	uint64_t request_id;
} gk_reply_view;

/* Sizes of an encoded envelope / reply whose payload is `payload` (NULL = none). */
size_t gk_frame_env_size(const char *service, const char *method, uint64_t request_id,
			 uint64_t client_id, int64_t deadline_ms, const ProtobufCMessage *payload);
/* Writes exactly gk_frame_env_size(...) bytes into buf; returns that size. */
size_t gk_frame_env_write(uint8_t *buf, const char *service, const char *method,
			  uint64_t request_id, uint64_t client_id, int64_t deadline_ms,
			  const ProtobufCMessage *payload);
size_t gk_frame_reply_size(int code, const char *message, uint64_t request_id,
			   const ProtobufCMessage *payload);
size_t gk_frame_reply_write(uint8_t *buf, int code, const char *message, uint64_t request_id,
			    const ProtobufCMessage *payload);

/* 0 on success, -1 when the bytes are not a well-formed message. */
int gk_frame_env_parse(const uint8_t *buf, size_t len, gk_env_view *out);
int gk_frame_reply_parse(const uint8_t *buf, size_t len, gk_reply_view *out);
/* Copy a name field into a NUL-terminated buffer of GK_IPC_NAME_MAX; -1 when it
 * is too long or contains a NUL byte. */
int gk_frame_name(gk_bytes b, char out[GK_IPC_NAME_MAX]);

/* ---- capped unpack -----------------------------------------------------------
 * Unpacks with a malloc-backed allocator that refuses to hand out more than
 * `cap` bytes in total, so hostile input cannot make the receiver allocate
 * without bound. The result is freed with gk_ipc_free (plain free()). NULL when
 * the bytes do not decode or the budget is exhausted. */
ProtobufCMessage *gk_unpack_capped(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
				   size_t len, size_t cap);

/* ---- dedupe cache (server) ----------------------------------------------------
 * Replies of mutating calls, keyed by (client_id, request_id), oldest evicted
 * first; bounded by entry count and total bytes. */
typedef struct gk_dedupe gk_dedupe;
gk_dedupe *gk_dedupe_new(size_t max_entries, size_t max_bytes);
void gk_dedupe_free(gk_dedupe *d);
/* The cached reply frame, or NULL. Valid until the next put. */
const gk_bytes *gk_dedupe_get(gk_dedupe *d, uint64_t client_id, uint64_t request_id);
/* Store a copy; silently skipped if larger than max_bytes or on OOM. */
void gk_dedupe_put(gk_dedupe *d, uint64_t client_id, uint64_t request_id, const void *frame,
		   size_t len);
size_t gk_dedupe_count(const gk_dedupe *d);

/* ---- bus framing and sequence tracking ------------------------------------------
 * A bus message is: topic bytes, NUL, kind ('E' event / 'T' tick), publisher
 * epoch (4 bytes, random per publisher instance, so a restarted publisher whose
 * numbers start again at 1 is noticed), sequence number (8 bytes big-endian),
 * then the packed event (events only). */
#define GK_BUS_EVENT 'E'
#define GK_BUS_TICK  'T'
#define GK_BUS_TOPIC_MAX 64

typedef struct gk_bus_view {
	char topic[GK_BUS_TOPIC_MAX];
	int kind;
	uint32_t epoch;
	uint64_t seq;
	gk_bytes payload;
} gk_bus_view;

size_t gk_bus_header_size(const char *topic);
size_t gk_bus_header_write(uint8_t *buf, const char *topic, int kind, uint32_t epoch, uint64_t seq);
int gk_bus_parse(const uint8_t *buf, size_t len, gk_bus_view *out);

/* What the subscriber does with a sequence number (pure decision). */
enum gk_seq_action {
	GK_SEQ_DELIVER,      /* in order (or the first one seen) */
	GK_SEQ_GAP_DELIVER,  /* numbers were skipped: report the gap, then deliver */
	GK_SEQ_STALE,        /* already seen or covered by a snapshot: drop */
	GK_SEQ_TICK_OK,      /* a tick that matches what we have */
	GK_SEQ_TICK_GAP,     /* a tick announcing events we never got */
};
typedef struct gk_seq_state {
	uint64_t last;    /* last number seen or set */
	uint32_t epoch;   /* publisher instance it belongs to */
	bool known;       /* false until the first message */
	bool epoch_known; /* false after gk_ipc_sub_set_seq until a message */
} gk_seq_state;
/* Updates *st. A new epoch (publisher restarted) is a gap with expected 1. */
enum gk_seq_action gk_seq_decide(gk_seq_state *st, int kind, uint32_t epoch, uint64_t seq,
				 uint64_t *expected);

/* ---- the listener guard's verdict on a probe (pure; guard.c) -------------------
 * A probe is a raw connection that sent nng's SP header. piped: the socket got
 * a pipe (any) since the probe began; started: when it began; answered: when
 * the server's 8-byte SP header came back on it (<0: not yet). nng#1518 breaks
 * the hand-over, not the transport: a stuck listener still answers the
 * handshake and then never hands the connection to the socket. So the clock
 * that convicts runs from the answer: a loaded machine that is slow to accept
 * and to answer (seconds, under ASan on 2 shared cores) is waited for, up to
 * GK_PROBE_HANDSHAKE_WAITS timeouts, before "no handshake" convicts too. */
#define GK_PROBE_HANDSHAKE_WAITS 5
enum gk_probe_verdict {
	GK_PROBE_WAIT,
	GK_PROBE_ALIVE,
	GK_PROBE_NOT_HANDED_OVER, /* answered, then no pipe within timeout_ms */
	GK_PROBE_NO_HANDSHAKE,    /* no answer within GK_PROBE_HANDSHAKE_WAITS x timeout_ms */
};
enum gk_probe_verdict gk_probe_decide(bool piped, int64_t started, int64_t answered, int64_t now,
				      int timeout_ms);

#endif
