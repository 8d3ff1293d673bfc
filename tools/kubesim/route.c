/* kubesim — URL path parsing. */
#include "route.h"

#include <string.h>

#define MAXSEG 10

static int split(const char *path, char segs[MAXSEG][256], int *n)
{
	*n = 0;
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (*n >= MAXSEG || len >= 256)
			return -1;
		memcpy(segs[*n], p, len);
		segs[*n][len] = 0;
		(*n)++;
		p += len;
	}
	return 0;
}

static void cp(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

int ks_route_parse(const char *path, ks_route *r)
{
	char segs[MAXSEG][256];
	int n, i;
	memset(r, 0, sizeof(*r));
	if (split(path, segs, &n))
		return -1;
	if (n >= 2 && strcmp(segs[0], "api") == 0) {
		cp(r->version, sizeof(r->version), segs[1]);
		i = 2;
	} else if (n >= 2 && strcmp(segs[0], "apis") == 0) {
		cp(r->group, sizeof(r->group), segs[1]);
		if (n == 2) {
			r->kind = KS_ROUTE_GROUP;
			return 0;
		}
		cp(r->version, sizeof(r->version), segs[2]);
		i = 3;
	} else {
		r->kind = KS_ROUTE_NONE;
		return 0;
	}
	int rest = n - i;
	if (rest > 0 && strcmp(segs[i], "watch") == 0) {
		r->watch_prefix = 1;
		i++;
		rest--;
	}
	if (rest == 0) {
		r->kind = r->watch_prefix ? KS_ROUTE_NONE : KS_ROUTE_GV;
		return r->watch_prefix ? -1 : 0;
	}
	r->kind = KS_ROUTE_RESOURCE;
	if (strcmp(segs[i], "namespaces") == 0 && rest >= 3 &&
	    !(rest == 3 && r->group[0] == 0 && (strcmp(segs[i + 2], "status") == 0 ||
						 strcmp(segs[i + 2], "finalize") == 0))) {
		cp(r->ns, sizeof(r->ns), segs[i + 1]);
		i += 2;
		rest -= 2;
	}
	if (rest > 3)
		return -1;
	cp(r->resource, sizeof(r->resource), segs[i]);
	if (rest >= 2)
		cp(r->name, sizeof(r->name), segs[i + 1]);
	if (rest == 3)
		cp(r->sub, sizeof(r->sub), segs[i + 2]);
	return 0;
}
