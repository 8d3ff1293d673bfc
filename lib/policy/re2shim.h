/* lib/policy internal: the C face of the tiny RE2 shim (re2.cc). */
#ifndef GPUKMM_LIB_POLICY_RE2SHIM_H
#define GPUKMM_LIB_POLICY_RE2SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gk_re2_span {
	size_t off, len;
	int matched;
} gk_re2_span;

/* Go/RE2 syntax check; 0 ok, -1 with a Go-style message in msg (via re2go.cc). */
int gk_policy_check_regexp(const char *re, char *msg, size_t cap);
/* re2go.cc: 0 ok, 1 invalid (Go's message in msg), -1 out of memory / NULL. */
int gk_policy_re2go_check(const char *pattern, char *msg, size_t cap);
/* Whole-text match of pattern (RE2 syntax, leftmost-first like Go) with up to 15
 * capture groups reported in groups[0..ngroups). 1 match, 0 no match, -1 bad
 * pattern or out of memory. */
int gk_re2_fullmatch(const char *pattern, const char *text, size_t ngroups, gk_re2_span *groups);

#ifdef __cplusplus
}
#endif

#ifndef __cplusplus
#include <stdarg.h>
#include <stdio.h>
/* Write a printf-style reason into msg (if any) and return -1: the one
 * "refuse with a message" helper of lib/policy's checkers. */
static inline int gk_policy_fail(char *msg, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int gk_policy_fail(char *msg, size_t cap, const char *fmt, ...)
{
	if (msg && cap) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, cap, fmt, ap);
		va_end(ap);
	}
	return -1;
}
#endif
#endif
