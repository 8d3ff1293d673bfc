// lib/policy: Go-compatible regular expression syntax check through RE2
// (KMM and the upstream webhook compile kernel-mapping regexps with Go's
// regexp package, which is RE2 syntax). The C API is gk_policy_check_regexp.
#include <re2/re2.h>

#include <cstdio>
#include <new>
#include <string>

#include "re2shim.h"

namespace {

// Go's regexp/syntax ErrorCode strings for the matching RE2 codes.
const char *go_code(RE2::ErrorCode c)
{
	switch (c) {
	case RE2::ErrorBadEscape: return "invalid escape sequence";
	case RE2::ErrorBadCharClass: return "invalid character class";
	case RE2::ErrorBadCharRange: return "invalid character class range";
	case RE2::ErrorMissingBracket: return "missing closing ]";
	case RE2::ErrorMissingParen: return "missing closing )";
	case RE2::ErrorUnexpectedParen: return "unexpected )";
	case RE2::ErrorTrailingBackslash: return "trailing backslash at end of expression";
	case RE2::ErrorRepeatArgument: return "missing argument to repetition operator";
	case RE2::ErrorRepeatSize: return "invalid repeat count";
	case RE2::ErrorRepeatOp: return "invalid nested repetition operator";
	case RE2::ErrorBadPerlOp: return "invalid or unsupported Perl syntax";
	case RE2::ErrorBadUTF8: return "invalid UTF-8";
	case RE2::ErrorBadNamedCapture: return "invalid named capture";
	case RE2::ErrorPatternTooLarge: return "expression too large";
	default: return "internal error";
	}
}

} // namespace

extern "C" int gk_policy_check_regexp(const char *re, char *msg, size_t cap)
{
	if (!re)
		re = "";
	try {
		RE2::Options opt;
		opt.set_log_errors(false);
		RE2 r(re, opt);
		if (r.ok())
			return 0;
		// Go: "error parsing regexp: <code>: `<offending text>`"
		if (msg && cap)
			std::snprintf(msg, cap, "error parsing regexp: %s: `%s`", go_code(r.error_code()),
				      r.error_arg().c_str());
	} catch (const std::bad_alloc &) {
		if (msg && cap)
			std::snprintf(msg, cap, "out of memory");
	}
	return -1;
}

extern "C" int gk_re2_fullmatch(const char *pattern, const char *text, size_t ngroups, gk_re2_span *groups)
{
	try {
		RE2::Options opt;
		opt.set_log_errors(false);
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
			if (sub[i + 1].data() == nullptr) {
				groups[i].off = 0;
				groups[i].len = 0;
				groups[i].matched = 0;
			} else {
				groups[i].off = (size_t)(sub[i + 1].data() - text);
				groups[i].len = sub[i + 1].size();
				groups[i].matched = 1;
			}
		}
		return 1;
	} catch (const std::bad_alloc &) {
		return -1;
	}
}
