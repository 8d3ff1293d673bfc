/* gpukmm — Kubernetes resource quantities (see include/gpukmm/quantity.h). */
#include "gpukmm/quantity.h"

#include <string.h>

#define MAX_NANO ((gk_qty)100000000000000000LL * (gk_qty)1000000000000LL) /* 10^29 nano = 10^20 units */

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

bool gk_qty_parse(const char *s, gk_qty *out)
{
	*out = 0;
	if (!s)
		return false;
	bool neg = false;
	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	/* mantissa: digits [. digits] | . digits; its value as an integer and the
	 * count of fraction digits (leading zeros skipped: they do not overflow) */
	gk_qty m = 0;
	int frac = 0, ndig = 0;
	bool any = false, dot = false;
	for (; digit(*s) || (*s == '.' && !dot); s++) {
		if (*s == '.') {
			dot = true;
			continue;
		}
		any = true;
		if (m == 0 && *s == '0') {
			if (dot)
				frac++;
			continue;
		}
		if (++ndig > 30)
			return false;
		m = m * 10 + (*s - '0');
		if (dot)
			frac++;
	}
	if (!any)
		return false;
	/* suffix: a power of ten (exp10) and of two (exp2) */
	int exp10 = 0, exp2 = 0;
	static const struct {
		const char *s;
		int e10, e2;
	} sfx[] = {
		{ "Ki", 0, 10 }, { "Mi", 0, 20 }, { "Gi", 0, 30 }, { "Ti", 0, 40 }, { "Pi", 0, 50 }, { "Ei", 0, 60 },
		{ "n", -9, 0 },  { "u", -6, 0 },  { "m", -3, 0 },  { "k", 3, 0 },   { "M", 6, 0 },   { "G", 9, 0 },
		{ "T", 12, 0 },  { "P", 15, 0 },  { "E", 18, 0 },
	};
	if ((*s == 'e' || *s == 'E') && (digit(s[1]) || s[1] == '+' || s[1] == '-')) {
		const char *p = s + 1;
		bool eneg = false;
		if (*p == '+' || *p == '-')
			eneg = *p++ == '-';
		if (!digit(*p))
			return false;
		long e = 0;
		for (; digit(*p); p++) {
			e = e * 10 + (*p - '0');
			if (e > 1000)
				return false;
		}
		if (*p)
			return false;
		exp10 = eneg ? -(int)e : (int)e;
	} else if (*s) {
		bool found = false;
		for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++)
			if (strcmp(s, sfx[i].s) == 0) {
				exp10 = sfx[i].e10;
				exp2 = sfx[i].e2;
				found = true;
				break;
			}
		if (!found)
			return false;
	}
	/* nano = m * 2^exp2 * 10^(exp10 + 9 - frac), rounded up when the power is negative */
	int p10 = exp10 + 9 - frac;
	gk_qty v = m;
	for (int i = 0; i < exp2 && v; i++) {
		if (v > MAX_NANO / 2)
			return false;
		v *= 2;
	}
	if (p10 >= 0) {
		for (int i = 0; i < p10 && v; i++) {
			if (v > MAX_NANO / 10)
				return false;
			v *= 10;
		}
	} else {
		bool rest = false;
		for (int i = 0; i < -p10 && v; i++) {
			rest |= v % 10 != 0;
			v /= 10;
		}
		if (rest)
			v++;
	}
	if (v > MAX_NANO)
		return false;
	*out = neg ? -v : v;
	return true;
}

int64_t gk_qty_value(gk_qty q)
{
	gk_qty v = q / GK_QTY_ONE;
	if (q % GK_QTY_ONE > 0)
		v++;
	if (v > (gk_qty)INT64_MAX)
		return INT64_MAX;
	if (v < (gk_qty)INT64_MIN)
		return INT64_MIN;
	return (int64_t)v;
}
