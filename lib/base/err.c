/* gpukmm — errors as values (see include/gpukmm/err.h). */
#include "gpukmm/err.h"

#include <stdio.h>
#include <string.h>

static const char *const code_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};
#define N_CODES (sizeof(code_names) / sizeof(code_names[0]))

const char *gk_code_name(int code)
{
	static const char unknown[] = "CODE_UNKNOWN";
	if (code >= 0 && (size_t)code < N_CODES)
		return code_names[code];
	return unknown;
}

int gk_code_from_name(const char *name)
{
	if (!name)
		return -1;
	for (size_t i = 0; i < N_CODES; i++)
		if (strcmp(name, code_names[i]) == 0)
			return (int)i;
	return -1;
}

int gk_err_vset(gk_err *err, int code, const char *fmt, va_list ap)
{
	if (err) {
		err->code = code;
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	}
	return code;
}

int gk_err_set(gk_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gk_err_vset(err, code, fmt, ap);
	va_end(ap);
	return code;
}

int gk_err_wrap(gk_err *err, const char *fmt, ...)
{
	if (!err)
		return GK_UNKNOWN;
	char old[GK_ERR_MSG_MAX];
	va_list ap;
	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %.*s",
			 (int)(sizeof(err->msg) - (size_t)n), old);
	return err->code;
}

void gk_err_clear(gk_err *err)
{
	if (err) {
		err->code = GK_OK;
		err->msg[0] = '\0';
	}
}
