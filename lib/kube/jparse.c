/* Arena-built read-only cJSON trees (see jparse.h). */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"

#define JA_FIRST (64u << 10)  /* a watch event needs ~4× its JSON size */
#define JA_MAX_BLK (1u << 20) /* growth stops doubling here */
#define JA_KEEP (256u << 10)  /* a reset keeps one block up to this size */
#define NESTING_LIMIT 1000    /* cJSON's CJSON_NESTING_LIMIT */

struct gk_jblk {
	gk_jblk *next;
	size_t cap, used;
	_Alignas(16) unsigned char data[];
};

static void *ja_alloc(gk_jarena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	gk_jblk *b = a->b;
	if ((!b || b->cap - b->used < n) && a->spare && a->spare->cap >= n) {
		gk_jblk *nb = a->spare;
		a->spare = nb->next;
		nb->next = b;
		nb->used = 0;
		a->b = b = nb;
	}
	if (!b || b->cap - b->used < n) {
		size_t cap = b ? (b->cap < JA_MAX_BLK ? b->cap * 2 : b->cap) : JA_FIRST;
		if (cap < n)
			cap = n;
		gk_jblk *nb = malloc(sizeof *nb + cap);
		if (!nb)
			return NULL;
		nb->next = b;
		nb->cap = cap;
		nb->used = 0;
		a->b = b = nb;
	}
	void *p = b->data + b->used;
	b->used += n;
	return p;
}

void gk_jarena_rewind(gk_jarena *a)
{
	for (gk_jblk *b = a->b, *n; b; b = n) {
		n = b->next;
		b->next = a->spare;
		a->spare = b;
	}
	a->b = NULL;
}

void gk_jarena_reset(gk_jarena *a)
{
	gk_jblk *keep = NULL;
	gk_jarena_rewind(a);
	for (gk_jblk *b = a->spare; b; b = b->next)
		if (b->cap <= JA_KEEP && (!keep || b->cap > keep->cap))
			keep = b;
	for (gk_jblk *b = a->spare, *n; b; b = n) {
		n = b->next;
		if (b != keep)
			free(b);
	}
	if (keep) {
		keep->next = NULL;
		keep->used = 0;
	}
	a->b = keep;
	a->spare = NULL;
}

void gk_jarena_free(gk_jarena *a)
{
	gk_jarena_rewind(a);
	for (gk_jblk *b = a->spare, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	a->spare = NULL;
}

typedef struct jp {
	gk_jarena *a;
	const char *s, *end;
	int depth;
} jp;

static void skip_ws(jp *p)
{
	while (p->s < p->end && (unsigned char)*p->s <= 32)
		p->s++;
}

static cJSON *node(jp *p, int type)
{
	cJSON *n = ja_alloc(p->a, sizeof *n);
	if (n) {
		memset(n, 0, sizeof *n);
		n->type = type;
	}
	return n;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* \uXXXX (and its low surrogate) at r (after the 'u'): UTF-8 into *w. */
static int utf16(const char **rp, const char *end, char **wp)
{
	const char *r = *rp;
	unsigned c, lo;
	if (end - r < 4 || hex4(r, &c))
		return -1;
	r += 4;
	if (c >= 0xDC00 && c <= 0xDFFF)
		return -1;
	if (c >= 0xD800 && c <= 0xDBFF) {
		if (end - r < 6 || r[0] != '\\' || r[1] != 'u' || hex4(r + 2, &lo) || lo < 0xDC00 ||
		    lo > 0xDFFF)
			return -1;
		r += 6;
		c = 0x10000 + (((c & 0x3FF) << 10) | (lo & 0x3FF));
	}
	unsigned char *w = (unsigned char *)*wp;
	if (c < 0x80) {
		*w++ = (unsigned char)c;
	} else if (c < 0x800) {
		*w++ = (unsigned char)(0xC0 | (c >> 6));
		*w++ = (unsigned char)(0x80 | (c & 0x3F));
	} else if (c < 0x10000) {
		*w++ = (unsigned char)(0xE0 | (c >> 12));
		*w++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
		*w++ = (unsigned char)(0x80 | (c & 0x3F));
	} else {
		*w++ = (unsigned char)(0xF0 | (c >> 18));
		*w++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
		*w++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
		*w++ = (unsigned char)(0x80 | (c & 0x3F));
	}
	*wp = (char *)w;
	*rp = r;
	return 0;
}

/* At the opening quote. */
static char *string(jp *p)
{
	const char *s = p->s + 1, *q = s;
	while (q < p->end && *q != '"' && *q != '\\')
		q++;
	if (q >= p->end)
		return NULL;
	if (*q == '"') { /* no escapes: the common case */
		size_t n = (size_t)(q - s);
		char *o = ja_alloc(p->a, n + 1);
		if (!o)
			return NULL;
		memcpy(o, s, n);
		o[n] = 0;
		p->s = q + 1;
		return o;
	}
	const char *e = q; /* the closing quote: the decoded text is never longer */
	while (e < p->end && *e != '"')
		e += *e == '\\' ? 2 : 1;
	if (e >= p->end)
		return NULL;
	char *o = ja_alloc(p->a, (size_t)(e - s) + 1), *w = o;
	if (!o)
		return NULL;
	memcpy(w, s, (size_t)(q - s));
	w += q - s;
	for (const char *r = q; r < e;) {
		if (*r != '\\') {
			*w++ = *r++;
			continue;
		}
		r++;
		switch (*r++) {
		case '"': *w++ = '"'; break;
		case '\\': *w++ = '\\'; break;
		case '/': *w++ = '/'; break;
		case 'b': *w++ = '\b'; break;
		case 'f': *w++ = '\f'; break;
		case 'n': *w++ = '\n'; break;
		case 'r': *w++ = '\r'; break;
		case 't': *w++ = '\t'; break;
		case 'u':
			if (utf16(&r, e, &w))
				return NULL;
			break;
		default: return NULL;
		}
	}
	*w = 0;
	p->s = e + 1;
	return o;
}

static cJSON *number(jp *p)
{
	char tmp[64];
	size_t n = 0;
	for (const char *r = p->s; r < p->end && n < sizeof tmp - 1; r++) {
		char c = *r;
		if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E')
			tmp[n++] = c;
		else
			break;
	}
	tmp[n] = 0;
	char *after;
	double d = strtod(tmp, &after);
	if (after == tmp)
		return NULL;
	cJSON *v = node(p, cJSON_Number);
	if (!v)
		return NULL;
	v->valuedouble = d;
	v->valueint = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : (int)d;
	p->s += after - tmp;
	return v;
}

static cJSON *value(jp *p);

static cJSON *container(jp *p, bool obj)
{
	if (++p->depth > NESTING_LIMIT)
		return NULL;
	char close = obj ? '}' : ']';
	cJSON *c = node(p, obj ? cJSON_Object : cJSON_Array), *tail = NULL;
	if (!c)
		return NULL;
	p->s++;
	skip_ws(p);
	if (p->s < p->end && *p->s == close) {
		p->s++;
		p->depth--;
		return c;
	}
	for (;;) {
		char *key = NULL;
		skip_ws(p);
		if (obj) {
			if (p->s >= p->end || *p->s != '"' || !(key = string(p)))
				return NULL;
			skip_ws(p);
			if (p->s >= p->end || *p->s != ':')
				return NULL;
			p->s++;
			skip_ws(p);
		}
		cJSON *v = value(p);
		if (!v)
			return NULL;
		v->string = key;
		if (tail) {
			tail->next = v;
			v->prev = tail;
		} else {
			c->child = v;
		}
		tail = v;
		skip_ws(p);
		if (p->s >= p->end)
			return NULL;
		if (*p->s == ',') {
			p->s++;
			continue;
		}
		if (*p->s != close)
			return NULL;
		p->s++;
		break;
	}
	c->child->prev = tail; /* cJSON keeps the last element there */
	p->depth--;
	return c;
}

static bool lit(jp *p, const char *w, size_t n)
{
	if ((size_t)(p->end - p->s) < n || memcmp(p->s, w, n))
		return false;
	p->s += n;
	return true;
}

static cJSON *value(jp *p)
{
	if (p->s >= p->end)
		return NULL;
	cJSON *v;
	switch (*p->s) {
	case '{': return container(p, true);
	case '[': return container(p, false);
	case '"': {
		char *s = string(p);
		if (!s || !(v = node(p, cJSON_String)))
			return NULL;
		v->valuestring = s;
		return v;
	}
	case 'n': return lit(p, "null", 4) ? node(p, cJSON_NULL) : NULL;
	case 'f': return lit(p, "false", 5) ? node(p, cJSON_False) : NULL;
	case 't':
		if (!lit(p, "true", 4) || !(v = node(p, cJSON_True)))
			return NULL;
		v->valueint = 1;
		return v;
	default:
		if (*p->s == '-' || (*p->s >= '0' && *p->s <= '9'))
			return number(p);
		return NULL;
	}
}

cJSON *gk_jparse(gk_jarena *a, const char *s, size_t len, size_t *used)
{
	jp p = {a, s, s + len, 0};
	skip_ws(&p);
	cJSON *v = value(&p);
	if (v && used)
		*used = (size_t)(p.s - s);
	return v;
}
