/* fake-kmm — the subset of k8s.io/apimachinery/pkg/util/validation that KMM's
 * webhook uses, with the same messages (KMM returns them verbatim). */
#include <stdio.h>
#include <string.h>

#include "fakekmm.h"

#define QNAME_FMT "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
#define QNAME_MSG "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
#define LABEL_VALUE_MSG "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
#define DNS1123_LABEL_FMT "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define DNS1123_SUB_FMT DNS1123_LABEL_FMT "(\\." DNS1123_LABEL_FMT ")*"
#define DNS1123_SUB_MSG "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"

static int is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* apimachinery's RegexError(msg, fmt, examples...) */
static void regex_error(char *out, size_t cap, const char *prefix, const char *msg, const char *fmt,
			const char *const *ex, size_t nex)
{
	size_t o = 0;
	o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%s%s", prefix, msg);
	if (nex) {
		o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, " (e.g. ");
		for (size_t i = 0; i < nex; i++)
			o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%s'%s', ", i ? " or " : "", ex[i]);
		snprintf(out + o, o < cap ? cap - o : 0, "regex used for validation is '%s')", fmt);
	} else {
		snprintf(out + o, o < cap ? cap - o : 0, " (regex used for validation is '%s')", fmt);
	}
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], fully anchored; n > 0 */
static int qname_ok(const char *s, size_t n)
{
	if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return 0;
	return 1;
}

static int dns1123_sub_ok(const char *s, size_t n)
{
	/* labels of [a-z0-9]([-a-z0-9]*[a-z0-9])? separated by single dots */
	size_t start = 0;
	if (n == 0)
		return 0;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || s[i] == '.') {
			size_t len = i - start;
			if (len == 0)
				return 0;
			const char *l = s + start;
			char a = l[0], z = l[len - 1];
			if (!((a >= 'a' && a <= 'z') || (a >= '0' && a <= '9')))
				return 0;
			if (!((z >= 'a' && z <= 'z') || (z >= '0' && z <= '9')))
				return 0;
			for (size_t j = 0; j < len; j++) {
				char c = l[j];
				if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
					return 0;
			}
			start = i + 1;
		}
	}
	return 1;
}

static void append(char *msg, size_t cap, const char *s)
{
	size_t o = strlen(msg);
	if (o)
		o += (size_t)snprintf(msg + o, o < cap ? cap - o : 0, "; ");
	if (o < cap)
		snprintf(msg + o, cap - o, "%s", s);
}

static int subdomain_errs(const char *v, size_t n, const char *prefix, char *msg, size_t cap)
{
	char buf[1024];
	int bad = 0;
	if (n > 253) {
		snprintf(buf, sizeof buf, "%smust be no more than 253 characters", prefix);
		append(msg, cap, buf);
		bad = 1;
	}
	if (!dns1123_sub_ok(v, n)) {
		static const char *const ex[] = { "example.com" };
		regex_error(buf, sizeof buf, prefix, DNS1123_SUB_MSG, DNS1123_SUB_FMT, ex, 1);
		append(msg, cap, buf);
		bad = 1;
	}
	return bad;
}

int fk_valid_dns1123_subdomain(const char *v, char *msg, size_t cap)
{
	if (cap)
		msg[0] = 0;
	return subdomain_errs(v, strlen(v), "", msg, cap);
}

int fk_valid_qualified_name(const char *v, char *msg, size_t cap)
{
	static const char *const ex[] = { "MyName", "my.name", "123-abc" };
	char buf[1024];
	const char *name = v;
	int bad = 0;
	if (cap)
		msg[0] = 0;
	const char *slash = strchr(v, '/');
	if (slash && strchr(slash + 1, '/')) {
		regex_error(buf, sizeof buf, "a qualified name ", QNAME_MSG, QNAME_FMT, ex, 3);
		snprintf(msg, cap, "%s with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')", buf);
		return 1;
	}
	if (slash) {
		size_t plen = (size_t)(slash - v);
		name = slash + 1;
		if (plen == 0) {
			append(msg, cap, "prefix part must be non-empty");
			bad = 1;
		} else {
			bad |= subdomain_errs(v, plen, "prefix part ", msg, cap);
		}
	}
	size_t n = strlen(name);
	if (n == 0) {
		append(msg, cap, "name part must be non-empty");
		return 1;
	}
	if (n > 63) {
		append(msg, cap, "name part must be no more than 63 characters");
		bad = 1;
	}
	if (!qname_ok(name, n)) {
		regex_error(buf, sizeof buf, "name part ", QNAME_MSG, QNAME_FMT, ex, 3);
		append(msg, cap, buf);
		bad = 1;
	}
	return bad;
}

int fk_valid_label_value(const char *v, char *msg, size_t cap)
{
	static const char *const ex[] = { "MyValue", "my_value", "12345" };
	char buf[1024];
	size_t n = strlen(v);
	int bad = 0;
	if (cap)
		msg[0] = 0;
	if (n > 63) {
		append(msg, cap, "must be no more than 63 characters");
		bad = 1;
	}
	if (n > 0 && !qname_ok(v, n)) {
		regex_error(buf, sizeof buf, "", LABEL_VALUE_MSG, "(" QNAME_FMT ")?", ex, 3);
		append(msg, cap, buf);
		bad = 1;
	}
	return bad;
}
