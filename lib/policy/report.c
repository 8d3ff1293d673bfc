/* lib/policy: the validation report (violations with field paths, warnings). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/policy.h"

void gk_policy_report_init(gk_policy_report *r)
{
	memset(r, 0, sizeof(*r));
}

void gk_policy_report_free(gk_policy_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].field);
		free(r->v[i].msg);
	}
	free(r->v);
	for (size_t i = 0; i < r->n_warnings; i++)
		free(r->warnings[i]);
	free(r->warnings);
	memset(r, 0, sizeof(*r));
}

bool gk_policy_report_ok(const gk_policy_report *r)
{
	return r->n == 0 && !r->oom;
}

/* Bounded: a hostile policy cannot make the report grow without limit. */
#define MAX_VIOLATIONS 1000

void gk_policy_reportf(gk_policy_report *r, const char *field, const char *fmt, ...)
{
	if (r->n >= MAX_VIOLATIONS)
		return;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 8;
		gk_policy_violation *v = realloc(r->v, cap * sizeof(*v));
		if (!v) {
			r->oom = true;
			return;
		}
		r->v = v;
		r->cap = cap;
	}
	va_list ap;
	va_start(ap, fmt);
	char *msg = NULL;
	int len = vasprintf(&msg, fmt, ap);
	va_end(ap);
	char *f = strdup(field ? field : "");
	if (len < 0 || !f) {
		if (len >= 0)
			free(msg);
		free(f);
		r->oom = true;
		return;
	}
	r->v[r->n].field = f;
	r->v[r->n].msg = msg;
	r->n++;
}

char *gk_policy_report_join(const gk_policy_report *r)
{
	size_t len = 1;
	for (size_t i = 0; i < r->n; i++)
		len += strlen(r->v[i].msg) + 1;
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	*p = 0;
	for (size_t i = 0; i < r->n; i++) {
		if (i)
			*p++ = '\n';
		size_t l = strlen(r->v[i].msg);
		memcpy(p, r->v[i].msg, l + 1);
		p += l;
	}
	return s;
}

void gk_policy_report_warnf(gk_policy_report *r, const char *fmt, ...)
{
	if (r->n_warnings >= MAX_VIOLATIONS)
		return;
	char **w = realloc(r->warnings, (r->n_warnings + 1) * sizeof(*w));
	if (!w) {
		r->oom = true;
		return;
	}
	r->warnings = w;
	va_list ap;
	va_start(ap, fmt);
	int len = vasprintf(&r->warnings[r->n_warnings], fmt, ap);
	va_end(ap);
	if (len < 0)
		r->oom = true;
	else
		r->n_warnings++;
}
