/* Shared reference-counted strings (include/gpukmm/strpool.h): a gk_kmap whose
 * key is the string and whose `ptr` counts the references. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/strpool.h"

static const char empty[1];

const char *gk_strpool_get(gk_strpool *p, const char *s, size_t max)
{
	if (!s || !*s || !max)
		return empty;
	char *cut = NULL;
	if (max != SIZE_MAX && strnlen(s, max + 1) > max) {
		if (!(cut = strndup(s, max)))
			return NULL;
		s = cut;
	}
	gk_kmap_ent *e = gk_kmap_get(&p->m, s);
	if (!e)
		e = gk_kmap_put(&p->m, s, NULL, NULL);
	free(cut);
	if (!e)
		return NULL;
	e->ptr = (void *)((uintptr_t)e->ptr + 1);
	return e->key;
}

void gk_strpool_put(gk_strpool *p, const char *s)
{
	if (!s || s == empty || !*s)
		return;
	gk_kmap_ent *e = gk_kmap_get(&p->m, s);
	if (!e)
		return;
	uintptr_t n = (uintptr_t)e->ptr;
	if (n > 1)
		e->ptr = (void *)(n - 1);
	else
		gk_kmap_del(&p->m, s);
	if (p->m.n == 0)
		gk_kmap_clear(&p->m); /* nothing left: the bucket array too */
}

size_t gk_strpool_size(const gk_strpool *p)
{
	return p->m.n;
}
