// lib/policy: whole-text RE2 matching with capture groups (the image reference
// grammar in names_check.c). Go syntax checking and Go error wording live in
// re2go.cc (gk_policy_re2go_check / gk_policy_re2go_match); this file adds only
// what those do not cover.
#include <re2/re2.h>

#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "re2shim.h"

extern "C" int gk_policy_check_regexp(const char *re, char *msg, size_t cap)
{
	return gk_policy_re2go_check(re ? re : "", msg, cap) == 0 ? 0 : -1;
}

// The patterns matched here are the grammar's constants (a handful): each is
// compiled once and kept (RE2 matching is thread-safe on a const object).
// Compiling RX_REFERENCE per image reference cost ~0.2 ms, for every mapping
// of every review. A pattern beyond the table's size is compiled per call.
namespace {
struct cached {
	std::string pattern;
	std::unique_ptr<RE2> re;
};
constexpr size_t CACHE_MAX = 16;
std::mutex cache_mu;
cached cache[CACHE_MAX];
size_t cache_n;

const RE2 *compiled(const char *pattern, std::unique_ptr<RE2> *own)
{
	{
		std::lock_guard<std::mutex> g(cache_mu);
		for (size_t i = 0; i < cache_n; i++)
			if (cache[i].pattern == pattern)
				return cache[i].re.get();
	}
	RE2::Options opt;
	opt.set_log_errors(false);
	opt.set_max_mem(8 << 20);
	std::unique_ptr<RE2> r(new RE2(pattern, opt));
	if (!r->ok())
		return nullptr;
	std::lock_guard<std::mutex> g(cache_mu);
	for (size_t i = 0; i < cache_n; i++) // compiled meanwhile by another thread
		if (cache[i].pattern == pattern)
			return cache[i].re.get();
	if (cache_n < CACHE_MAX) {
		cache[cache_n].pattern = pattern;
		cache[cache_n].re = std::move(r);
		return cache[cache_n++].re.get();
	}
	*own = std::move(r);
	return own->get();
}
} // namespace

extern "C" int gk_re2_fullmatch(const char *pattern, const char *text, size_t ngroups, gk_re2_span *groups)
{
	try {
		std::unique_ptr<RE2> own;
		const RE2 *r = compiled(pattern, &own);
		if (!r)
			return -1;
		re2::StringPiece in(text);
		re2::StringPiece sub[16];
		if (ngroups > 15)
			ngroups = 15;
		if (!r->Match(in, 0, in.size(), RE2::ANCHOR_BOTH, sub, (int)ngroups + 1))
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
