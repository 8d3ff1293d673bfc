/* gpukmm — errors as values.
 *
 * Every fallible function in lib/ returns an int status (0 = ok, otherwise a
 * gRPC-style code from gk_code, see rpc.proto) and, when the caller passes one,
 * fills a gk_err with a human message. Messages never contain secrets. */
#ifndef GPUKMM_ERR_H
#define GPUKMM_ERR_H

#include <stdarg.h>
#include <stddef.h>

enum gk_code {
	GK_OK = 0,
	GK_CANCELLED = 1,
	GK_UNKNOWN = 2,
	GK_INVALID_ARGUMENT = 3,
	GK_DEADLINE_EXCEEDED = 4,
	GK_NOT_FOUND = 5,
	GK_ALREADY_EXISTS = 6,
	GK_PERMISSION_DENIED = 7,
	GK_RESOURCE_EXHAUSTED = 8,
	GK_FAILED_PRECONDITION = 9,
	GK_ABORTED = 10,
	GK_OUT_OF_RANGE = 11,
	GK_UNIMPLEMENTED = 12,
	GK_INTERNAL = 13,
	GK_UNAVAILABLE = 14,
	GK_DATA_LOSS = 15,
	GK_UNAUTHENTICATED = 16,
};

#define GK_ERR_MSG_MAX 512

typedef struct gk_err {
	int code;                    /* enum gk_code */
	char msg[GK_ERR_MSG_MAX];
} gk_err;

/* Set *err (if non-NULL) and return code. printf-style message. */
int gk_err_set(gk_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int gk_err_vset(gk_err *err, int code, const char *fmt, va_list ap);
/* Prefix an existing message: "<prefix>: <old message>". Returns err->code. */
int gk_err_wrap(gk_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gk_err_clear(gk_err *err);

/* "OK", "INVALID_ARGUMENT", ... ; "CODE_<n>" for unknown values (static storage). */
const char *gk_code_name(int code);
/* Parse a name as printed by gk_code_name; -1 if unknown. */
int gk_code_from_name(const char *name);

#endif
