/* gpukmm — a string-keyed hash map: each key holds a string (`val`: the
 * reflector's key → resourceVersion index; NULL for a set, like the YAML reader's
 * duplicate-key check) and/or a pointer (`ptr`, the caller's, never freed by the map:
 * kubesim's controllers). Iterate with gk_kmap_keys or over the b[0..nb) chains. */
#ifndef GPUKMM_KMAP_H
#define GPUKMM_KMAP_H

#include <stddef.h>

typedef struct gk_kmap_ent {
	struct gk_kmap_ent *next;
	char *val;  /* owned; NULL when put with NULL */
	void *ptr;  /* the caller's, NULL until set */
	char key[]; /* NUL-terminated */
} gk_kmap_ent;

typedef struct gk_kmap {
	gk_kmap_ent **b;
	size_t nb, n;
} gk_kmap;

void gk_kmap_init(gk_kmap *m);
void gk_kmap_clear(gk_kmap *m);
gk_kmap_ent *gk_kmap_get(const gk_kmap *m, const char *key);
/* Insert or replace val (copied; NULL stores NULL); returns the entry (NULL on
 * OOM). *was_new set. A new entry's ptr is NULL, a replaced one keeps it. */
gk_kmap_ent *gk_kmap_put(gk_kmap *m, const char *key, const char *val, int *was_new);
int gk_kmap_del(gk_kmap *m, const char *key);
/* Array of every key (borrowed pointers, valid until the map changes); caller frees. */
const char **gk_kmap_keys(const gk_kmap *m);

#endif
