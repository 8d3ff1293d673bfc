// gpukmm — Go-regexp semantics on top of RE2 (C++ shim with a C API).
//
// KMM (Go) compiles kernel-mapping regexps with regexp.Compile and matches them
// with MatchString (unanchored). RE2 implements the same syntax; this file turns
// RE2's error codes into the exact text Go prints ("error parsing regexp: CODE:
// `ARG`") so messages copied from KMM's webhook match byte for byte.
// The C prototypes live in the header of the caller that needs them (see
// tools/fake-kmm/fakekmm.h); all functions are exception-free.
#include <re2/re2.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

static void opts_go(RE2::Options *o)
{
	o->set_log_errors(false);
	o->set_encoding(RE2::Options::EncodingUTF8);
	o->set_max_mem(8 << 20);
}

static const char *go_code(RE2::ErrorCode c)
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
	default: break;
	}
	return "regexp/syntax: internal error";
}

extern "C" int gk_policy_re2go_check(const char *pattern, char *msg, size_t cap)
{
	if (!pattern)
		return -1;
	try {
		RE2::Options o;
		opts_go(&o);
		RE2 re(pattern, o);
		if (re.ok())
			return 0;
		if (msg && cap) {
			std::string arg = re.error_arg();
			const char *code = go_code(re.error_code());
			std::snprintf(msg, cap, "error parsing regexp: %s: `%s`", code, arg.c_str());
		}
		return 1;
	} catch (...) {
		if (msg && cap)
			std::snprintf(msg, cap, "error parsing regexp: out of memory");
		return -1;
	}
}

/* The last patterns compiled, for matching: statusd matches every selected
 * Node's kernel against its policy's mappings (15,000 nodes × 3 policies at a
 * cold start), and compiling the pattern each time was most of that work. A
 * policy has a few mappings; a small ring is enough and bounds the memory (each
 * RE2 may grow its DFA cache up to its share of max_mem). A compiled RE2 is
 * safe to match from several threads; the ring itself is under a mutex. */
#define RE_CACHE_SLOTS 16

struct re_slot {
	std::string pattern;
	std::shared_ptr<const RE2> re;
};

static std::mutex re_mu;
static re_slot re_cache[RE_CACHE_SLOTS];
static unsigned re_next;

static std::shared_ptr<const RE2> compiled(const char *pattern)
{
	{
		std::lock_guard<std::mutex> g(re_mu);
		for (const re_slot &sl : re_cache)
			if (sl.re && sl.pattern == pattern)
				return sl.re;
	}
	RE2::Options o;
	opts_go(&o);
	auto re = std::make_shared<const RE2>(pattern, o);
	std::lock_guard<std::mutex> g(re_mu);
	re_slot &sl = re_cache[re_next++ % RE_CACHE_SLOTS];
	sl.pattern = pattern;
	sl.re = re;
	return re;
}

/* 1 = matches (unanchored, like Go's MatchString), 0 = no match, -1 = invalid pattern. */
extern "C" int gk_policy_re2go_match(const char *pattern, const char *text)
{
	if (!pattern || !text)
		return -1;
	try {
		std::shared_ptr<const RE2> re = compiled(pattern);
		if (!re->ok())
			return -1;
		return RE2::PartialMatch(text, *re) ? 1 : 0;
	} catch (...) {
		return -1;
	}
}
