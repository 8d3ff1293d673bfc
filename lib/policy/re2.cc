// lib/policy: whole-text RE2 matching with capture groups (the image reference
// grammar in names_check.c). Go syntax checking and Go error wording live in
// re2go.cc (gk_policy_re2go_check / gk_policy_re2go_match); this file adds only
// what those do not cover.
#include <re2/re2.h>

#include <new>

#include "re2shim.h"

extern "C" int gk_policy_check_regexp(const char *re, char *msg, size_t cap)
{
	return gk_policy_re2go_check(re ? re : "", msg, cap) == 0 ? 0 : -1;
}

extern "C" int gk_re2_fullmatch(const char *pattern, const char *text, size_t ngroups, gk_re2_span *groups)
{
	try {
		RE2::Options opt;
		opt.set_log_errors(false);
		opt.set_max_mem(8 << 20);
		RE2 r(pattern, opt);
		if (!r.ok())
			return -1;
		re2::StringPiece in(text);
		re2::StringPiece sub[16];
		if (ngroups > 15)
			ngroups = 15;
		if (!r.Match(in, 0, in.size(), RE2::ANCHOR_BOTH, sub, (int)ngroups + 1))
			return 0;
		for (size_t i = 0; i < ngroups; i++) {
			groups[i].matched = sub[i + 1].data() != nullptr;
			groups[i].off = groups[i].matched ? (size_t)(sub[i + 1].data() - text) : 0;
			groups[i].len = groups[i].matched ? sub[i + 1].size() : 0;
		}
		return 1;
	} catch (...) {
		return -1;
	}
}
