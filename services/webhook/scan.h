/* gpukmm-webhook: a look at an AdmissionReview body while it arrives, before
 * any tree is built. It counts the JSON values cJSON would allocate (objects,
 * arrays, strings, numbers, literals; member names are not values), follows
 * the nesting, and keeps request.uid (first in the API server's encoding), so
 * a review too big to parse is refused with an AdmissionReview of its own
 * instead of costing ~90 bytes per value (a 2.9 MB body of 1.45 million small
 * values took 125 MB). Incremental (chunk boundaries anywhere), no allocation,
 * pure. It does not validate the JSON: cJSON does that afterwards, on a body
 * already known to be small enough. */
#ifndef GPUKMM_WEBHOOK_SCAN_H
#define GPUKMM_WEBHOOK_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Values in one review: the largest ClusterPolicy the CRD admits has about
 * 27,000 (every list at its maxItems), an UPDATE carries it twice (object,
 * oldObject), the rest is metadata and the envelope. About 9 MB of tree. */
#define GK_WH_SCAN_MAX_VALUES 100000
/* Nesting: the CRD's deepest path is 9 levels under the review's object. */
#define GK_WH_SCAN_MAX_DEPTH 64
#define GK_WH_SCAN_UID_MAX 128

enum gk_wh_scan_over { GK_WH_SCAN_OK, GK_WH_SCAN_TOO_MANY, GK_WH_SCAN_TOO_DEEP };

typedef struct gk_wh_scan {
	size_t values, max_values;
	int depth, max_depth;
	enum gk_wh_scan_over over;
	char uid[GK_WH_SCAN_UID_MAX]; /* request.uid, "" until seen (or not usable) */
	/* private */
	int st;                        /* lexer state */
	uint64_t obj;                  /* bit d: the container at depth d+1 is an object */
	bool want_key;                 /* in an object, the next string is a member name */
	bool in_request;               /* inside the top-level "request" object */
	bool key_request, key_uid;     /* the member name just read */
	char key[8];                   /* the member name being read at depth 1-2 (truncated) */
	size_t key_len;
	bool uid_value;                /* the string being read is request.uid */
	size_t uid_len;
} gk_wh_scan;

void gk_wh_scan_init(gk_wh_scan *s, size_t max_values, int max_depth);
/* Feed the next bytes. false once a budget is exceeded (s->over says which);
 * the rest of the body then need not be fed. */
bool gk_wh_scan_feed(gk_wh_scan *s, const char *buf, size_t len);

#endif
