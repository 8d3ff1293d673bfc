/* Resource paths: one function builds every URL path the client uses. */
#include <stdio.h>
#include <string.h>

#include "gpukmm/kube.h"

static int seg_ok(const char *s)
{
	/* A path segment: non-empty, no '/', not "." or "..". Names of Kubernetes
	 * objects are DNS subdomains, so anything else is a caller bug. */
	if (!s || !*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, ".."))
		return 0;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x21 || *p == '?' || *p == '#' || *p == '%')
			return 0;
	return 1;
}

static int put(char *buf, size_t cap, size_t *n, const char *s)
{
	size_t l = strlen(s);
	if (*n + l + 1 > cap)
		return -1;
	memcpy(buf + *n, s, l + 1);
	*n += l;
	return 0;
}

int gk_kube_path(char *buf, size_t cap, const gk_kube_ref *r)
{
	size_t n = 0;
	if (!buf || cap == 0 || !r || !seg_ok(r->version) || !seg_ok(r->resource))
		return -1;
	buf[0] = 0;
	bool core = !r->group || !*r->group;
	if (!core && !seg_ok(r->group))
		return -1;
	if (put(buf, cap, &n, core ? "/api/" : "/apis/"))
		return -1;
	if (!core && (put(buf, cap, &n, r->group) || put(buf, cap, &n, "/")))
		return -1;
	if (put(buf, cap, &n, r->version))
		return -1;
	if (r->ns && *r->ns) {
		if (!seg_ok(r->ns) || put(buf, cap, &n, "/namespaces/") || put(buf, cap, &n, r->ns))
			return -1;
	}
	if (put(buf, cap, &n, "/") || put(buf, cap, &n, r->resource))
		return -1;
	if (r->name && *r->name) {
		if (!seg_ok(r->name) || put(buf, cap, &n, "/") || put(buf, cap, &n, r->name))
			return -1;
	}
	if (r->subresource && *r->subresource) {
		if (!r->name || !*r->name || !seg_ok(r->subresource) || put(buf, cap, &n, "/") ||
		    put(buf, cap, &n, r->subresource))
			return -1;
	}
	return (int)n;
}

int gk_kube_query_add(char *buf, size_t cap, const char *key, const char *value)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strnlen(buf, cap);
	if (n >= cap || !key || !value)
		return -1;
	char sep = strchr(buf, '?') ? '&' : '?';
	size_t need = 1 + strlen(key) + 1;
	for (const char *p = value; *p; p++)
		need += (strchr("-_.~", *p) || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
			 (*p >= 'A' && *p <= 'Z')) ? 1 : 3;
	if (n + need + 1 > cap)
		return -1;
	char *o = buf + n;
	*o++ = sep;
	o += sprintf(o, "%s=", key);
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		if (strchr("-_.~", *p) || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= 'A' && *p <= 'Z')) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = 0;
	return (int)(o - buf);
}
