/* lib/policy: KMM's template variables and their substitution.
 *
 * KMM (internal/utils/replaceStrings.go, internal/module/kernelmapper.go)
 * substitutes, per node kernel, with github.com/a8m/envsubst and no
 * restrictions:
 *   KERNEL_FULL_VERSION, KERNEL_VERSION  the kernel (trailing "+" trimmed, then
 *                                        every byte outside [A-Za-z0-9._-] -> '_')
 *   KERNEL_XYZ                           its first three [.,-]-separated parts, '.'-joined
 *   KERNEL_X, KERNEL_Y, KERNEL_Z         those parts
 *   MOD_NAME, MOD_NAMESPACE              the Module's name and namespace
 * in containerImage (both levels); sign.unsignedImage and sign.filesToSign get
 * the KERNEL_* ones only. A kernel with fewer than three parts fails the
 * mapping ("expected at least three components"). An unknown (or, in sign
 * fields, MOD_*) variable becomes "" without an error; "${" without "}" is an
 * error. Syntax: $NAME, ${NAME}, ${NAME<op>default} with op - = + :- := :+,
 * and $$ for a literal '$'. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/policy.h"

static const char *const kernel_vars[] = { "KERNEL_FULL_VERSION", "KERNEL_VERSION", "KERNEL_XYZ",
					   "KERNEL_X", "KERNEL_Y", "KERNEL_Z", NULL };

static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

int gk_policy_kmm_vars_for_kernel(const char *kernel, gk_policy_kmm_vars *v, char *msg, size_t cap)
{
	memset(v, 0, sizeof(*v));
	size_t n = kernel ? strlen(kernel) : 0;
	if (n && kernel[n - 1] == '+')
		n--;
	if (n == 0 || n >= sizeof(v->full)) {
		snprintf(msg, cap, "invalid kernel version \"%.*s\"", (int)(n > 200 ? 200 : n), kernel ? kernel : "");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char c = kernel[i];
		v->full[i] = isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' ? c : '_';
	}
	/* KernelRegexp.Split(kernel, -1) on [.,-]: the first three parts */
	const char *p = v->full;
	char *parts[3] = { v->x, v->y, v->z };
	size_t k;
	for (k = 0; k < 3; k++) {
		size_t l = strcspn(p, ".,-");
		if (l >= sizeof(v->x))
			l = sizeof(v->x) - 1;
		memcpy(parts[k], p, l);
		parts[k][l] = 0;
		p += strcspn(p, ".,-");
		if (k < 2) {
			if (!*p)
				break;
			p++;
		}
	}
	if (k < 2) {
		snprintf(msg, cap, "invalid kernel version %s: expected at least three components (major.minor.patch)",
			 v->full);
		return -1;
	}
	snprintf(v->xyz, sizeof(v->xyz), "%s.%s.%s", v->x, v->y, v->z);
	return 0;
}

static const char *lookup(const gk_policy_kmm_vars *v, const char *name, size_t len)
{
#define IS(s) (len == strlen(s) && memcmp(name, s, len) == 0)
	if (IS("KERNEL_FULL_VERSION") || IS("KERNEL_VERSION"))
		return v->full;
	if (IS("KERNEL_XYZ"))
		return v->xyz;
	if (IS("KERNEL_X"))
		return v->x;
	if (IS("KERNEL_Y"))
		return v->y;
	if (IS("KERNEL_Z"))
		return v->z;
	if (IS("MOD_NAME"))
		return v->mod_name;
	if (IS("MOD_NAMESPACE"))
		return v->mod_namespace;
#undef IS
	return NULL; /* unset */
}

typedef struct sbuf {
	char *s;
	size_t n, cap;
	bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
	if (b->oom || !n)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t nc = (b->n + n + 1) * 2;
		char *ns = realloc(b->s, nc);
		if (!ns) {
			b->oom = true;
			return;
		}
		b->s = ns;
		b->cap = nc;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = 0;
}

/* The one scanner: calls var() for every variable reference (name, length) and
 * text() for literal pieces; for ${NAME<op>default} the op decides with the
 * variable's value (from value(), NULL = unset) which side is text. Returns 0,
 * or -1 for "${" without "}". value may be NULL (every variable unset). */
typedef struct scan_cb {
	void (*text)(void *u, const char *s, size_t n);
	void (*var)(void *u, const char *name, size_t n);
	const char *(*value)(void *u, const char *name, size_t n);
	void *u;
} scan_cb;

static const char *val_of(const scan_cb *cb, const char *name, size_t n)
{
	return cb->value ? cb->value(cb->u, name, n) : NULL;
}

static void emit_var(const scan_cb *cb, const char *name, size_t n)
{
	if (cb->var)
		cb->var(cb->u, name, n);
	const char *v = val_of(cb, name, n);
	if (v && cb->text)
		cb->text(cb->u, v, strlen(v));
}

static int scan(const char *t, const scan_cb *cb)
{
	size_t i = 0, n = strlen(t);
	while (i < n) {
		size_t j = i;
		while (j < n && t[j] != '$')
			j++;
		if (j > i && cb->text)
			cb->text(cb->u, t + i, j - i);
		if (j >= n)
			break;
		i = j + 1; /* past '$' */
		if (i < n && t[i] == '$') { /* $$ -> $ */
			if (cb->text)
				cb->text(cb->u, "$", 1);
			i++;
		} else if (i < n && t[i] == '{' && i + 1 < n && name_char(t[i + 1])) {
			size_t ns = i + 1, ne = ns;
			while (ne < n && name_char(t[ne]))
				ne++;
			const char *close = strchr(t + ne, '}');
			if (!close || memchr(t + ne, '\n', (size_t)(close - (t + ne))))
				return -1;
			size_t ce = (size_t)(close - t);
			const char *op = t + ne;
			size_t oplen = 0;
			if (*op == ':' && (op[1] == '-' || op[1] == '=' || op[1] == '+'))
				oplen = 2;
			else if (*op == '-' || *op == '=' || *op == '+')
				oplen = 1;
			const char *def = op + oplen;
			size_t deflen = ce - (size_t)(def - t);
			if (cb->var)
				cb->var(cb->u, t + ns, ne - ns);
			const char *v = val_of(cb, t + ns, ne - ns);
			bool colon = oplen == 2, set = v != NULL, nonempty = v && *v;
			char kind = oplen ? op[oplen - 1] : 0;
			bool use_default = false, use_value = true;
			if (kind == '-' || kind == '=') {
				use_default = colon ? !nonempty : !set;
				use_value = !use_default;
			} else if (kind == '+') {
				use_default = colon ? nonempty : set;
				use_value = false;
			}
			if (use_value && v && cb->text)
				cb->text(cb->u, v, strlen(v));
			/* the default is text with $NAME references */
			for (size_t k = 0; use_default && k < deflen;) {
				const char *d = def + k;
				if (*d == '$' && k + 1 < deflen && name_char(d[1])) {
					size_t e = k + 1;
					while (e < deflen && name_char(def[e]))
						e++;
					emit_var(cb, def + k + 1, e - k - 1);
					k = e;
				} else {
					if (cb->text)
						cb->text(cb->u, d, 1);
					k++;
				}
			}
			i = ce + 1;
		} else if (i < n && name_char(t[i])) {
			size_t e = i;
			while (e < n && name_char(t[e]))
				e++;
			if (e - i == 1 && t[i] == '_') { /* "$_" stays text */
				if (cb->text)
					cb->text(cb->u, "$_", 2);
			} else {
				emit_var(cb, t + i, e - i);
			}
			i = e;
		} else {
			if (cb->text)
				cb->text(cb->u, "$", 1);
		}
	}
	return 0;
}

typedef struct expand_ctx {
	sbuf b;
	const gk_policy_kmm_vars *v;
} expand_ctx;

static void ex_text(void *u, const char *s, size_t n)
{
	put(&((expand_ctx *)u)->b, s, n);
}

static const char *ex_value(void *u, const char *name, size_t n)
{
	return lookup(((expand_ctx *)u)->v, name, n);
}

char *gk_policy_kmm_expand(const char *tmpl, const gk_policy_kmm_vars *v, char *msg, size_t cap)
{
	expand_ctx c = { .v = v };
	scan_cb cb = { ex_text, NULL, ex_value, &c };
	put(&c.b, "", 0);
	if (scan(tmpl ? tmpl : "", &cb) != 0) {
		free(c.b.s);
		snprintf(msg, cap, "failed to substitute \"%s\": closing brace expected", tmpl);
		return NULL;
	}
	if (c.b.oom || (!c.b.s && !(c.b.s = strdup("")))) {
		free(c.b.s);
		snprintf(msg, cap, "out of memory");
		return NULL;
	}
	return c.b.s;
}

typedef struct unknown_ctx {
	bool with_mod;
	char *name;
	size_t cap;
	bool found;
} unknown_ctx;

static void un_var(void *u, const char *name, size_t n)
{
	unknown_ctx *c = u;
	if (c->found)
		return;
	for (const char *const *k = kernel_vars; *k; k++)
		if (strlen(*k) == n && memcmp(*k, name, n) == 0)
			return;
	if (c->with_mod && ((n == 8 && memcmp(name, "MOD_NAME", 8) == 0) ||
			    (n == 13 && memcmp(name, "MOD_NAMESPACE", 13) == 0)))
		return;
	c->found = true;
	snprintf(c->name, c->cap, "%.*s", (int)n, name);
}

int gk_policy_kmm_unknown_var(const char *tmpl, bool with_mod, char *name, size_t cap)
{
	unknown_ctx c = { with_mod, name, cap, false };
	scan_cb cb = { NULL, un_var, NULL, &c };
	if (scan(tmpl ? tmpl : "", &cb) != 0) {
		snprintf(name, cap, "${");
		return -1;
	}
	return c.found ? 1 : 0;
}

bool gk_policy_kmm_has_vars(const char *tmpl)
{
	for (const char *p = tmpl ? strchr(tmpl, '$') : NULL; p; p = strchr(p + 1, '$'))
		if (p[1] == '{' || name_char(p[1]))
			return true;
	return false;
}
