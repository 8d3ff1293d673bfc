/* gpukmm-watcher: the typed cache, one store per topic. Keys are "ns/name" (or
 * "name"); values are typed protobuf objects (no JSON is kept). An object can
 * be seen by several watches of the same topic (DaemonSets: the operator
 * namespace and the gated ones everywhere): each entry remembers which watches
 * (sources) currently report it, and disappears only when none does.
 *
 * Objects are kept packed (protobuf wire bytes): a Node with a dozen labels is
 * ~0.6 KB packed against ~2 KB as unpacked protobuf-c structs; readers unpack
 * the few they need (Get, DELETE events) or all of them for a Snapshot. */
#ifndef GPUKMM_WATCHER_STORE_H
#define GPUKMM_WATCHER_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

typedef struct ws_ent {
	struct ws_ent *next;
	uint8_t *buf;            /* varint length + packed object (a length-delimited field) */
	uint32_t len;            /* bytes of buf */
	uint32_t sources;        /* bit per watch */
	char key[];
} ws_ent;

typedef struct ws_store {
	ws_ent **b;
	size_t nb, n;
	const ProtobufCMessageDescriptor *desc; /* of the objects (set by the first put) */
	size_t bytes;                           /* packed bytes held */
} ws_store;

void ws_init(ws_store *s);
void ws_clear(ws_store *s);  /* frees every object */
ws_ent *ws_get(const ws_store *s, const char *key);
/* Insert or replace with obj packed (obj stays the caller's). Returns 1 if
 * new, 0 if replaced, -1 on OOM. */
int ws_put(ws_store *s, const char *key, const ProtobufCMessage *obj, uint32_t source);
/* The object of an entry, unpacked (free with protobuf_c_message_free_unpacked
 * (m, NULL)); NULL on OOM. */
ProtobufCMessage *ws_obj(const ws_store *s, const ws_ent *e);
/* Source no longer reports key: returns 1 when the entry is gone (its object,
 * unpacked, is handed to *gone, caller frees; NULL on OOM), 0 when other
 * sources still have it, -1 if absent. */
int ws_drop(ws_store *s, const char *key, uint32_t source, ProtobufCMessage **gone);
/* The packed object of an entry (without its length prefix): *msg, returns its length. */
size_t ws_msg(const ws_ent *e, const uint8_t **msg);
/* Every entry (any order): callback. */
void ws_each(const ws_store *s, void (*fn)(void *user, ws_ent *e), void *user);

#endif
