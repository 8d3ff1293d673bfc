/* gpukmm — a view's objects: typed copies by key (gpukmm/wsub.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/wsub.h"

ProtobufCMessage *gk_wsub_clone(const ProtobufCMessage *m)
{
	if (!m)
		return NULL;
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t stackbuf[1024];
	uint8_t *buf = len <= sizeof(stackbuf) ? stackbuf : malloc(len);
	if (!buf)
		return NULL;
	protobuf_c_message_pack(m, buf);
	ProtobufCMessage *c = protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
	if (buf != stackbuf)
		free(buf);
	return c;
}

void gk_wsub_tab_init(gk_wsub_tab *t, size_t max)
{
	memset(t, 0, sizeof(*t));
	t->max = max ? max : GK_WSUB_TAB_MAX;
}

void gk_wsub_tab_kind(gk_wsub_tab *t, const char *kind)
{
	t->kind = kind;
}

const char *gk_wsub_tab_overflow(const gk_wsub_tab *t)
{
	return t->overflow ? t->why : NULL;
}

/* a put refused: the kind can no longer be vouched for */
static void refused(gk_wsub_tab *t)
{
	t->overflow = true;
	snprintf(t->why, sizeof(t->why), "the view could not keep every %s (at most %zu, or out of memory): they cannot be confirmed",
		 t->kind ? t->kind : "object", t->max);
}

static gk_wsub_obj *find(const gk_wsub_tab *t, const char *key)
{
	gk_kmap_ent *e = key ? gk_kmap_get(&t->idx, key) : NULL;
	return e ? &t->v[(uintptr_t)e->ptr - 1] : NULL;
}

const ProtobufCMessage *gk_wsub_tab_get(const gk_wsub_tab *t, const char *key)
{
	const gk_wsub_obj *o = find(t, key);
	return o ? o->msg : NULL;
}

bool gk_wsub_tab_has(const gk_wsub_tab *t, const char *key)
{
	return find(t, key) != NULL;
}

void gk_wsub_tab_del(gk_wsub_tab *t, const char *key)
{
	gk_wsub_obj *o = find(t, key);
	if (!o)
		return;
	protobuf_c_message_free_unpacked(o->msg, NULL);
	gk_kmap_del(&t->idx, key); /* o->key was its copy */
	size_t i = (size_t)(o - t->v);
	if (i != --t->n) {
		*o = t->v[t->n];
		gk_kmap_get(&t->idx, o->key)->ptr = (void *)(uintptr_t)(i + 1);
	}
}

void gk_wsub_tab_clear(gk_wsub_tab *t)
{
	for (size_t i = 0; i < t->n; i++)
		protobuf_c_message_free_unpacked(t->v[i].msg, NULL);
	free(t->v);
	gk_kmap_clear(&t->idx);
	const char *kind = t->kind;
	gk_wsub_tab_init(t, t->max);
	t->kind = kind;
}

/* stores c (owned; NULL for a set's member) under key */
static int store(gk_wsub_tab *t, const char *key, ProtobufCMessage *c, gk_err *err)
{
	gk_wsub_obj *o = find(t, key);
	if (o) {
		protobuf_c_message_free_unpacked(o->msg, NULL);
		o->msg = c;
		return GK_OK;
	}
	if (t->n >= t->max) {
		refused(t);
		protobuf_c_message_free_unpacked(c, NULL);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: more than %zu objects, dropping %s", t->max, key);
	}
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 16;
		gk_wsub_obj *nv = realloc(t->v, nc * sizeof(*nv));
		if (nv) {
			t->v = nv;
			t->cap = nc;
		}
	}
	gk_kmap_ent *e = t->n < t->cap ? gk_kmap_put(&t->idx, key, NULL, NULL) : NULL;
	if (!e) {
		refused(t);
		protobuf_c_message_free_unpacked(c, NULL);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: out of memory");
	}
	t->v[t->n++] = (gk_wsub_obj){ e->key, c };
	e->ptr = (void *)(uintptr_t)t->n;
	return GK_OK;
}

int gk_wsub_tab_put(gk_wsub_tab *t, const char *key, const ProtobufCMessage *msg, gk_err *err)
{
	ProtobufCMessage *c = gk_wsub_clone(msg);
	if (!c) {
		refused(t);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "view: cannot copy %s", key);
	}
	return store(t, key, c, err);
}

int gk_wsub_tab_add(gk_wsub_tab *t, const char *key, gk_err *err)
{
	return store(t, key, NULL, err);
}
