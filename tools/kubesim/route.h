/* kubesim — URL path parsing (pure). */
#ifndef KUBESIM_ROUTE_H
#define KUBESIM_ROUTE_H

enum ks_route_kind {
	KS_ROUTE_NONE,      /* not an API path */
	KS_ROUTE_GV,        /* /api/v1, /apis/g/v: resource list */
	KS_ROUTE_RESOURCE,  /* a collection or an object */
	KS_ROUTE_GROUP,     /* /apis/g */
};

typedef struct ks_route {
	enum ks_route_kind kind;
	char group[128], version[64], ns[256], resource[128], name[256], sub[64];
	int watch_prefix; /* legacy /watch/ path */
} ks_route;

/* 0 on success (kind set), -1 if the path is malformed for an API path. */
int ks_route_parse(const char *path, ks_route *r);

#endif
