/* gpukmm-watcher typed cache (see store.h). */
#include <stdlib.h>
#include <string.h>

#include "store.h"

static size_t hash(const char *s)
{
	size_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

void ws_init(ws_store *s)
{
	memset(s, 0, sizeof *s);
}

void ws_clear(ws_store *s)
{
	for (size_t i = 0; i < s->nb; i++)
		for (ws_ent *e = s->b[i], *n; e; e = n) {
			n = e->next;
			free(e->buf);
			free(e);
		}
	free(s->b);
	memset(s, 0, sizeof *s);
}

ws_ent *ws_get(const ws_store *s, const char *key)
{
	if (!s->nb)
		return NULL;
	for (ws_ent *e = s->b[hash(key) & (s->nb - 1)]; e; e = e->next)
		if (!strcmp(e->key, key))
			return e;
	return NULL;
}

static int grow(ws_store *s)
{
	size_t nb = s->nb ? s->nb * 2 : 64;
	ws_ent **b = calloc(nb, sizeof *b);
	if (!b)
		return -1;
	for (size_t i = 0; i < s->nb; i++)
		for (ws_ent *e = s->b[i], *n; e; e = n) {
			n = e->next;
			size_t h = hash(e->key) & (nb - 1);
			e->next = b[h];
			b[h] = e;
		}
	free(s->b);
	s->b = b;
	s->nb = nb;
	return 0;
}

/* buf = varint(n) + the n packed bytes: the length prefix makes the entry a
 * ready-made length-delimited field (Snapshot replies send it as it is). */
static uint8_t *pack(const ProtobufCMessage *obj, uint32_t *len)
{
	size_t n = protobuf_c_message_get_packed_size(obj);
	if (n > UINT32_MAX - 8)
		return NULL;
	uint8_t pfx[8];
	size_t pl = 0;
	for (size_t v = n;; v >>= 7) {
		pfx[pl++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		if (v <= 0x7f)
			break;
	}
	uint8_t *buf = malloc(pl + n);
	if (!buf)
		return NULL;
	memcpy(buf, pfx, pl);
	*len = (uint32_t)(pl + protobuf_c_message_pack(obj, buf + pl));
	return buf;
}

size_t ws_msg(const ws_ent *e, const uint8_t **msg)
{
	size_t n = 0, i = 0;
	for (int shift = 0; i < e->len && i < 5; shift += 7) {
		uint8_t b = e->buf[i++];
		n |= (size_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	if (n > e->len - i)
		n = e->len - i;
	*msg = e->buf + i;
	return n;
}

ProtobufCMessage *ws_obj(const ws_store *s, const ws_ent *e)
{
	const uint8_t *m;
	size_t n = ws_msg(e, &m);
	return s->desc ? protobuf_c_message_unpack(s->desc, NULL, n, m) : NULL;
}

int ws_put(ws_store *s, const char *key, const ProtobufCMessage *obj, uint32_t source)
{
	uint32_t len;
	uint8_t *buf = pack(obj, &len);
	if (!buf)
		return -1;
	s->desc = obj->descriptor;
	ws_ent *e = ws_get(s, key);
	if (e) {
		s->bytes += len - e->len;
		free(e->buf);
		e->buf = buf;
		e->len = len;
		e->sources |= source;
		return 0;
	}
	if (s->n + 1 > s->nb && grow(s)) {
		free(buf);
		return -1;
	}
	size_t kl = strlen(key);
	e = malloc(sizeof *e + kl + 1);
	if (!e) {
		free(buf);
		return -1;
	}
	memcpy(e->key, key, kl + 1);
	e->buf = buf;
	e->len = len;
	e->sources = source;
	size_t h = hash(key) & (s->nb - 1);
	e->next = s->b[h];
	s->b[h] = e;
	s->n++;
	s->bytes += len;
	return 1;
}

int ws_drop(ws_store *s, const char *key, uint32_t source, ProtobufCMessage **gone)
{
	*gone = NULL;
	if (!s->nb)
		return -1;
	for (ws_ent **pp = &s->b[hash(key) & (s->nb - 1)]; *pp; pp = &(*pp)->next) {
		ws_ent *e = *pp;
		if (strcmp(e->key, key))
			continue;
		e->sources &= ~source;
		if (e->sources)
			return 0;
		*pp = e->next;
		*gone = ws_obj(s, e);
		s->bytes -= e->len;
		free(e->buf);
		free(e);
		s->n--;
		return 1;
	}
	return -1;
}

void ws_each(const ws_store *s, void (*fn)(void *user, ws_ent *e), void *user)
{
	for (size_t i = 0; i < s->nb; i++)
		for (ws_ent *e = s->b[i]; e; e = e->next)
			fn(user, e);
}
