/* A small chained hash map (include/gpukmm/kmap.h). */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kmap.h"

static size_t hash(const char *s)
{
	size_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

void gk_kmap_init(gk_kmap *m)
{
	memset(m, 0, sizeof *m);
}

void gk_kmap_clear(gk_kmap *m)
{
	for (size_t i = 0; i < m->nb; i++) {
		for (gk_kmap_ent *e = m->b[i], *n; e; e = n) {
			n = e->next;
			free(e->val);
			free(e);
		}
	}
	free(m->b);
	memset(m, 0, sizeof *m);
}

gk_kmap_ent *gk_kmap_get(const gk_kmap *m, const char *key)
{
	if (!m->nb)
		return NULL;
	for (gk_kmap_ent *e = m->b[hash(key) & (m->nb - 1)]; e; e = e->next)
		if (!strcmp(e->key, key))
			return e;
	return NULL;
}

static int grow(gk_kmap *m)
{
	size_t nb = m->nb ? m->nb * 2 : 64;
	gk_kmap_ent **b = calloc(nb, sizeof *b);
	if (!b)
		return -1;
	for (size_t i = 0; i < m->nb; i++) {
		for (gk_kmap_ent *e = m->b[i], *n; e; e = n) {
			n = e->next;
			size_t h = hash(e->key) & (nb - 1);
			e->next = b[h];
			b[h] = e;
		}
	}
	free(m->b);
	m->b = b;
	m->nb = nb;
	return 0;
}

gk_kmap_ent *gk_kmap_put(gk_kmap *m, const char *key, const char *val, int *was_new)
{
	gk_kmap_ent *e = gk_kmap_get(m, key);
	char *v = val ? strdup(val) : NULL;
	if (val && !v)
		return NULL;
	if (e) {
		free(e->val);
		e->val = v;
		if (was_new)
			*was_new = 0;
		return e;
	}
	if (m->n + 1 > m->nb && grow(m)) {
		free(v);
		return NULL;
	}
	size_t kl = strlen(key);
	e = malloc(sizeof *e + kl + 1);
	if (!e) {
		free(v);
		return NULL;
	}
	memcpy(e->key, key, kl + 1);
	e->val = v;
	e->ptr = NULL;
	size_t h = hash(key) & (m->nb - 1);
	e->next = m->b[h];
	m->b[h] = e;
	m->n++;
	if (was_new)
		*was_new = 1;
	return e;
}

int gk_kmap_del(gk_kmap *m, const char *key)
{
	if (!m->nb)
		return 0;
	for (gk_kmap_ent **pp = &m->b[hash(key) & (m->nb - 1)]; *pp; pp = &(*pp)->next) {
		if (!strcmp((*pp)->key, key)) {
			gk_kmap_ent *e = *pp;
			*pp = e->next;
			free(e->val);
			free(e);
			m->n--;
			return 1;
		}
	}
	return 0;
}

const char **gk_kmap_keys(const gk_kmap *m)
{
	const char **k = malloc((m->n ? m->n : 1) * sizeof *k);
	if (!k)
		return NULL;
	size_t j = 0;
	for (size_t i = 0; i < m->nb; i++)
		for (gk_kmap_ent *e = m->b[i]; e; e = e->next)
			k[j++] = e->key;
	return k;
}
