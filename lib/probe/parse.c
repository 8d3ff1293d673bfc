/* lib/probe — pure parsers of sysfs/procfs/efivars text. Buffer in, value out;
 * no I/O, so unit tests and the fuzz target call them directly. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/probe.h"

/* Printable text: tabs/newlines allowed, other control bytes and NUL are not. */
static int check_text(const char *buf, size_t len, gk_err *err)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c == 0)
			return gk_err_set(err, GK_DATA_LOSS, "contains a NUL byte at offset %zu (binary data)", i);
		if (c < 0x20 && c != '\n' && c != '\t')
			return gk_err_set(err, GK_DATA_LOSS, "contains control byte 0x%02x at offset %zu (binary data)",
					  c, i);
		if (c >= 0x7f) /* every attribute parsed here is ASCII */
			return gk_err_set(err, GK_DATA_LOSS, "contains byte 0x%02x at offset %zu (binary data)", c, i);
	}
	return GK_OK;
}

int gk_probe_parse_line(const char *buf, size_t len, char *out, size_t cap, gk_err *err)
{
	if (!buf || !out || cap == 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "no buffer");
	out[0] = 0;
	int rc = check_text(buf, len, err);
	if (rc)
		return rc;
	size_t b = 0, e = len;
	while (b < e && isspace((unsigned char)buf[b]))
		b++;
	while (e > b && isspace((unsigned char)buf[e - 1]))
		e--;
	if (b == e)
		return gk_err_set(err, GK_DATA_LOSS, "is empty (truncated?)");
	if (memchr(buf + b, '\n', e - b))
		return gk_err_set(err, GK_DATA_LOSS, "has more than one line");
	if (e - b >= cap)
		return gk_err_set(err, GK_DATA_LOSS, "line is too long (%zu bytes, at most %zu)", e - b, cap - 1);
	memcpy(out, buf + b, e - b);
	out[e - b] = 0;
	return GK_OK;
}

int gk_probe_parse_hex(const char *buf, size_t len, uint32_t max, uint32_t *out, gk_err *err)
{
	char line[32];
	int rc = gk_probe_parse_line(buf, len, line, sizeof line, err);
	if (rc)
		return rc;
	const char *p = line;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	if (!*p)
		return gk_err_set(err, GK_DATA_LOSS, "is not a hex number: '%s'", line);
	uint64_t v = 0;
	for (; *p; p++) {
		if (!isxdigit((unsigned char)*p))
			return gk_err_set(err, GK_DATA_LOSS, "is not a hex number: '%s'", line);
		v = v * 16 + (uint64_t)(isdigit((unsigned char)*p) ? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10));
		if (v > max)
			return gk_err_set(err, GK_DATA_LOSS, "hex value '%s' is out of range (max 0x%x)", line, max);
	}
	*out = (uint32_t)v;
	return GK_OK;
}

int gk_probe_parse_int(const char *buf, size_t len, int64_t min, int64_t max, int64_t *out, gk_err *err)
{
	char line[32];
	int rc = gk_probe_parse_line(buf, len, line, sizeof line, err);
	if (rc)
		return rc;
	char *end = NULL;
	errno = 0;
	long long v = strtoll(line, &end, 10);
	if (errno || end == line || *end)
		return gk_err_set(err, GK_DATA_LOSS, "is not a decimal number: '%s'", line);
	if (v < min || v > max)
		return gk_err_set(err, GK_DATA_LOSS, "value %lld is out of range [%lld, %lld]", v, (long long)min,
				  (long long)max);
	*out = v;
	return GK_OK;
}

int gk_probe_parse_secureboot(const uint8_t *buf, size_t len, Gpukmm__TriState *out, gk_err *err)
{
	*out = GPUKMM__TRI_STATE__TRI_UNKNOWN;
	if (!buf || len != 5)
		return gk_err_set(err, GK_DATA_LOSS, "has %zu bytes, expected 5 (4 attribute bytes + 1 value byte)",
				  buf ? len : 0);
	if (buf[4] == 0)
		*out = GPUKMM__TRI_STATE__TRI_NO;
	else if (buf[4] == 1)
		*out = GPUKMM__TRI_STATE__TRI_YES;
	else
		return gk_err_set(err, GK_DATA_LOSS, "has value byte 0x%02x, expected 0 or 1", buf[4]);
	return GK_OK;
}

int gk_probe_parse_lockdown(const char *buf, size_t len, char *out, size_t cap, gk_err *err)
{
	char line[128];
	int rc = gk_probe_parse_line(buf, len, line, sizeof line, err);
	if (rc)
		return rc;
	char *o = strchr(line, '['), *c = o ? strchr(o, ']') : NULL;
	if (!o || !c || c == o + 1)
		return gk_err_set(err, GK_DATA_LOSS, "has no [selected] mode: '%s'", line);
	if (strchr(c + 1, '['))
		return gk_err_set(err, GK_DATA_LOSS, "has more than one [selected] mode: '%s'", line);
	*c = 0;
	const char *mode = o + 1;
	if (strcmp(mode, "none") && strcmp(mode, "integrity") && strcmp(mode, "confidentiality"))
		return gk_err_set(err, GK_DATA_LOSS, "has unknown mode '%s'", mode);
	if (strlen(mode) >= cap)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "output too small");
	strcpy(out, mode);
	return GK_OK;
}

bool gk_probe_valid_module_name(const char *name)
{
	if (!name || !*name)
		return false;
	size_t n = 0;
	for (const char *p = name; *p; p++, n++)
		if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-'))
			return false;
	return n <= 55;
}

/* Module names compare with '-' and '_' equal (the kernel does the same). */
static bool modname_eq(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);
	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++) {
		char x = a[i] == '-' ? '_' : a[i], y = b[i] == '-' ? '_' : b[i];
		if (x != y)
			return false;
	}
	return true;
}

/* /proc/modules: "name size refcnt deps state offset [(taints)]"
 *   xe 2838528 4 drm_gpuvm,drm_exec, Live 0xffffffffc0a00000 (OE)
 * refcnt is "-" when the module cannot be unloaded; deps "-" when none. */
int gk_probe_parse_proc_modules(const char *buf, size_t len, const char *name, gk_probe_procmod *out,
				gk_err *err)
{
	memset(out, 0, sizeof *out);
	if (!buf)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "no buffer");
	int rc = check_text(buf, len, err);
	if (rc)
		return rc;
	size_t lineno = 0;
	const char *p = buf, *end = buf + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		lineno++;
		/* split into at most 8 fields */
		const char *f[8];
		size_t fl[8];
		int nf = 0;
		const char *q = p;
		while (q < le && nf < 8) {
			while (q < le && (*q == ' ' || *q == '\t'))
				q++;
			if (q >= le)
				break;
			f[nf] = q;
			while (q < le && *q != ' ' && *q != '\t')
				q++;
			fl[nf] = (size_t)(q - f[nf]);
			nf++;
		}
		if (nf == 0) { /* blank line */
			p = nl ? nl + 1 : end;
			continue;
		}
		if (nf < 6 || nf > 7)
			return gk_err_set(err, GK_DATA_LOSS, "line %zu has %d fields, expected 6 or 7", lineno, nf);
		if (modname_eq(f[0], fl[0], name)) {
			out->found = true;
			if (fl[2] == 1 && f[2][0] == '-') {
				out->refcount = -1;
			} else {
				int64_t v;
				gk_err e2;
				if (gk_probe_parse_int(f[2], fl[2], 0, INT32_MAX, &v, &e2))
					return gk_err_set(err, GK_DATA_LOSS, "line %zu: refcount %s", lineno, e2.msg);
				out->refcount = v;
			}
			if (!(fl[3] == 1 && f[3][0] == '-')) {
				size_t dl = fl[3];
				if (dl && f[3][dl - 1] == ',')
					dl--;
				if (dl >= sizeof out->deps)
					return gk_err_set(err, GK_DATA_LOSS, "line %zu: dependency list too long", lineno);
				memcpy(out->deps, f[3], dl);
				out->deps[dl] = 0;
			}
			if (fl[4] >= sizeof out->state)
				return gk_err_set(err, GK_DATA_LOSS, "line %zu: state too long", lineno);
			memcpy(out->state, f[4], fl[4]);
			out->state[fl[4]] = 0;
			if (nf == 7) {
				if (fl[6] < 2 || f[6][0] != '(' || f[6][fl[6] - 1] != ')' ||
				    fl[6] - 2 >= sizeof out->taint)
					return gk_err_set(err, GK_DATA_LOSS, "line %zu: taint field is malformed", lineno);
				memcpy(out->taint, f[6] + 1, fl[6] - 2);
				out->taint[fl[6] - 2] = 0;
			}
			return GK_OK;
		}
		p = nl ? nl + 1 : end;
	}
	return GK_OK;
}

bool gk_probe_builtin_has(const char *buf, size_t len, const char *name)
{
	if (!buf || !name)
		return false;
	const char *p = buf, *end = buf + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *base = p;
		for (const char *q = p; q < le; q++)
			if (*q == '/')
				base = q + 1;
		size_t bl = (size_t)(le - base);
		const char *dot = memchr(base, '.', bl); /* xe.ko, xe.ko.xz */
		if (dot && modname_eq(base, (size_t)(dot - base), name))
			return true;
		p = nl ? nl + 1 : end;
	}
	return false;
}
