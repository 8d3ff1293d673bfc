/* lib/policy: syntax checks with the messages of the libraries upstream uses
 * (Go distribution/reference, k8s.io/apimachinery validation). */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/policy.h"
#include "re2shim.h"

/* distribution/reference grammar (reference.ReferenceRegexp) */
#define RX_ALNUM "[a-z0-9]+"
#define RX_SEP "(?:[._]|__|[-]+)"
#define RX_PATH_COMP RX_ALNUM "(?:" RX_SEP RX_ALNUM ")*"
#define RX_DOMAIN_COMP "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
#define RX_HOST "(?:" RX_DOMAIN_COMP "(?:\\." RX_DOMAIN_COMP ")*|\\[(?:[a-fA-F0-9:]+)\\])"
#define RX_DOMAIN RX_HOST "(?::[0-9]+)?"
#define RX_NAME "(?:" RX_DOMAIN "/)?" RX_PATH_COMP "(?:/" RX_PATH_COMP ")*"
#define RX_TAG "[\\w][\\w.-]{0,127}"
#define RX_DIGEST "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}"
#define RX_REFERENCE "(" RX_NAME ")(?::(" RX_TAG "))?(?:@(" RX_DIGEST "))?"


static bool all_lower(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (isupper((unsigned char)s[i]))
			return false;
	return true;
}

static bool is_hex64(const char *s)
{
	size_t n = strlen(s);
	if (n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
			return false;
	return true;
}

/* go-digest Digest.Validate */
static int check_digest(const char *d, size_t n, char *msg, size_t cap)
{
	const char *colon = memchr(d, ':', n);
	if (!colon || colon == d || (size_t)(colon - d) + 1 == n)
		return gk_policy_fail(msg, cap, "invalid checksum digest format");
	size_t alen = (size_t)(colon - d), elen = n - alen - 1;
	size_t want = 0;
	if (alen == 6 && memcmp(d, "sha256", 6) == 0)
		want = 64;
	else if (alen == 6 && memcmp(d, "sha384", 6) == 0)
		want = 96;
	else if (alen == 6 && memcmp(d, "sha512", 6) == 0)
		want = 128;
	else
		return gk_policy_fail(msg, cap, "unsupported digest algorithm");
	if (elen != want)
		return gk_policy_fail(msg, cap, "invalid checksum digest length");
	for (size_t i = 0; i < elen; i++) {
		char c = colon[1 + i];
		if (!isdigit((unsigned char)c) && !(c >= 'a' && c <= 'f'))
			return gk_policy_fail(msg, cap, "invalid checksum digest format");
	}
	return 0;
}

/* reference.Parse */
static int parse_reference(const char *s, char *msg, size_t cap)
{
	gk_re2_span g[3];
	int m = gk_re2_fullmatch(RX_REFERENCE, s, 3, g);
	if (m < 0)
		return gk_policy_fail(msg, cap, "out of memory");
	if (m == 0) {
		if (!*s)
			return gk_policy_fail(msg, cap, "repository name must have at least one component");
		char *low = strdup(s);
		if (!low)
			return gk_policy_fail(msg, cap, "out of memory");
		for (char *p = low; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		int lm = gk_re2_fullmatch(RX_REFERENCE, low, 3, g);
		free(low);
		if (lm == 1)
			return gk_policy_fail(msg, cap, "repository name must be lowercase");
		return gk_policy_fail(msg, cap, "invalid reference format");
	}
	if (g[0].len > 255)
		return gk_policy_fail(msg, cap, "repository name must not be more than 255 characters");
	if (g[2].matched)
		return check_digest(s + g[2].off, g[2].len, msg, cap);
	return 0;
}

/* reference.ParseNormalizedNamed */
int gk_policy_check_image_ref(const char *ref, char *msg, size_t cap)
{
	if (!ref)
		ref = "";
	if (is_hex64(ref))
		return gk_policy_fail(msg, cap, "invalid repository name (%s), cannot specify 64-byte hexadecimal strings", ref);
	const char *slash = strchr(ref, '/');
	const char *domain = "docker.io", *rem = ref;
	size_t dlen = 9;
	bool official = false;
	if (slash) {
		size_t n = (size_t)(slash - ref);
		bool has_dot_colon = memchr(ref, '.', n) || memchr(ref, ':', n);
		bool localhost = n == 9 && memcmp(ref, "localhost", 9) == 0;
		if (has_dot_colon || localhost || !all_lower(ref, n)) {
			domain = ref;
			dlen = n;
			rem = slash + 1;
		}
	}
	if (dlen == 15 && memcmp(domain, "index.docker.io", 15) == 0) {
		domain = "docker.io";
		dlen = 9;
	}
	if (dlen == 9 && memcmp(domain, "docker.io", 9) == 0 && !strchr(rem, '/'))
		official = true;
	const char *colon = strchr(rem, ':');
	size_t rlen = colon ? (size_t)(colon - rem) : strlen(rem);
	if (!all_lower(rem, rlen))
		return gk_policy_fail(msg, cap, "invalid reference format: repository name (%s%.*s) must be lowercase",
			    official ? "library/" : "", (int)rlen, rem);
	size_t total = dlen + 1 + (official ? 8 : 0) + strlen(rem) + 1;
	char *full = malloc(total);
	if (!full)
		return gk_policy_fail(msg, cap, "out of memory");
	snprintf(full, total, "%.*s/%s%s", (int)dlen, domain, official ? "library/" : "", rem);
	int rc = parse_reference(full, msg, cap);
	free(full);
	return rc;
}

char *gk_policy_substitute_kmm_vars(const char *image)
{
	size_t n = strlen(image);
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		if (image[i] == '$' && image[i + 1] == '{') {
			const char *close = strchr(image + i + 2, '}');
			if (close) {
				*o++ = '0';
				i = (size_t)(close - image) + 1;
				continue;
			}
		} else if (image[i] == '$' && (isalpha((unsigned char)image[i + 1]) || image[i + 1] == '_')) {
			size_t j = i + 1;
			while (j < n && (isalnum((unsigned char)image[j]) || image[j] == '_'))
				j++;
			*o++ = '0';
			i = j;
			continue;
		}
		*o++ = image[i++];
	}
	*o = 0;
	return out;
}

/* ---- k8s.io/apimachinery/pkg/util/validation ------------------------------------ */

#define DNS1123_LABEL_FMT "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define DNS1123_SUBDOMAIN_FMT DNS1123_LABEL_FMT "(\\." DNS1123_LABEL_FMT ")*"
#define LABEL_VALUE_FMT "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
#define QUALIFIED_NAME_FMT "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

static bool rx(const char *pattern, const char *s)
{
	return gk_re2_fullmatch(pattern, s, 0, NULL) == 1;
}

/* Appends "; " between messages like strings.Join(msgs, "; "). */
static void add(char *msg, size_t cap, int *count, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char *msg, size_t cap, int *count, const char *fmt, ...)
{
	if (msg && cap) {
		size_t used = strnlen(msg, cap);
		if (*count && used + 2 < cap) {
			memcpy(msg + used, "; ", 3);
			used += 2;
		}
		va_list ap;
		va_start(ap, fmt);
		if (used < cap)
			vsnprintf(msg + used, cap - used, fmt, ap);
		va_end(ap);
	}
	(*count)++;
}

/* The apimachinery checks of one shape: a length limit, then one anchored
 * regexp whose failure message is `text`. */
static const struct len_rx {
	size_t max;
	const char *pattern, *text;
} DNS1123_SUBDOMAIN = { 253, DNS1123_SUBDOMAIN_FMT,
			"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
			"'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
			"for validation is '" DNS1123_SUBDOMAIN_FMT "')" },
  DNS1123_LABEL = { 63, DNS1123_LABEL_FMT,
		    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
		    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
		    "used for validation is '" DNS1123_LABEL_FMT "')" },
  LABEL_VALUE = { 63, LABEL_VALUE_FMT,
		  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
		  "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
		  "'my_value',  or '12345', regex used for validation is '" LABEL_VALUE_FMT "')" };

static int check_len_rx(const struct len_rx *k, const char *s, char *msg, size_t cap)
{
	int n = 0;
	if (msg && cap)
		msg[0] = 0;
	if (!s)
		s = "";
	if (strlen(s) > k->max)
		add(msg, cap, &n, "must be no more than %zu characters", k->max);
	if (!rx(k->pattern, s))
		add(msg, cap, &n, "%s", k->text);
	return n ? -1 : 0;
}

int gk_policy_check_dns1123_subdomain(const char *s, char *msg, size_t cap)
{
	return check_len_rx(&DNS1123_SUBDOMAIN, s, msg, cap);
}

int gk_policy_check_dns1123_label(const char *s, char *msg, size_t cap)
{
	return check_len_rx(&DNS1123_LABEL, s, msg, cap);
}

int gk_policy_check_label_value(const char *s, char *msg, size_t cap)
{
	return check_len_rx(&LABEL_VALUE, s, msg, cap);
}

int gk_policy_check_qualified_name(const char *s, char *msg, size_t cap)
{
	int n = 0;
	if (msg && cap)
		msg[0] = 0;
	if (!s)
		s = "";
	const char *slash = strchr(s, '/');
	const char *name = s;
	if (slash) {
		if (strchr(slash + 1, '/')) {
			add(msg, cap, &n,
			    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
			    "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
			    "'123-abc', regex used for validation is '" QUALIFIED_NAME_FMT "') with an optional "
			    "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
			return -1;
		}
		size_t plen = (size_t)(slash - s);
		char prefix[256];
		if (plen == 0) {
			add(msg, cap, &n, "prefix part must be non-empty");
		} else if (plen > 253) {
			add(msg, cap, &n, "prefix part must be no more than 253 characters");
		} else {
			memcpy(prefix, s, plen);
			prefix[plen] = 0;
			if (!rx(DNS1123_SUBDOMAIN_FMT, prefix))
				add(msg, cap, &n,
				    "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
				    "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
				    "character (e.g. 'example.com', regex used for validation is '" DNS1123_SUBDOMAIN_FMT
				    "')");
		}
		name = slash + 1;
	}
	if (!*name)
		add(msg, cap, &n, "name part must be non-empty");
	else if (strlen(name) > 63)
		add(msg, cap, &n, "name part must be no more than 63 characters");
	if (*name && !rx(QUALIFIED_NAME_FMT, name))
		add(msg, cap, &n,
		    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
		    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
		    "validation is '" QUALIFIED_NAME_FMT "')");
	return n ? -1 : 0;
}
