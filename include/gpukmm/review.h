/* gpukmm — access reviews for the supervisor's /metrics (proto/review.proto).
 *
 * The server side (a credentialed service hosts it, statusd in both
 * profiles): Review(token, verb, path) starts TokenReview (who is this?) then
 * SubjectAccessReview (may they `verb` the non-resource URL `path`?) on a
 * lib/kube mux of the service's loop and answers PENDING; a later Review of
 * the same token, verb and path answers DONE with the verdict (kept
 * GK_REVIEW_KEEP_MS after it is known). An API failure is answered once as
 * an UNAVAILABLE error (the caller fails closed: 503, nothing cached).
 * Tokens are kept only until the TokenReview is sent, and only as a SHA-256
 * digest after that; they are never logged.
 *
 * The client side (the supervisor) keeps verdicts briefly (gk_review_cache).
 */
#ifndef GPUKMM_REVIEW_H
#define GPUKMM_REVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "gpukmm/err.h"
#include "gpukmm/kube.h"

#define GK_REVIEW_KEEP_MS 10000   /* a verdict waits this long to be picked up */
#define GK_REVIEW_MAX 64          /* reviews in flight or waiting to be picked up */
#define GK_REVIEW_TOKEN_MAX 8192  /* longer bearer tokens are refused */

typedef struct gk_review gk_review;

int gk_review_new(gk_review **out, gk_kube_mux *mux, gk_err *err);
/* The AccessReview service, for gk_ipc_server_add (user: anything). */
ProtobufCService *gk_review_service(gk_review *r);
void gk_review_free(gk_review *r);

/* ---- the verdict cache (pure: time passed in; not thread-safe) ----------------- */

typedef struct gk_review_key {
	uint8_t d[32];            /* SHA-256 of the token */
} gk_review_key;

void gk_review_key_of(const char *token, gk_review_key *k);

enum gk_review_verdict { GK_REVIEW_UNKNOWN = 0, GK_REVIEW_ALLOWED, GK_REVIEW_DENIED, GK_REVIEW_UNAUTHENTICATED };

typedef struct gk_review_cache {
	struct {
		gk_review_key k;
		enum gk_review_verdict v;
		int64_t expires_ms;
	} e[GK_REVIEW_MAX];
	size_t n;
	int64_t allow_ttl_ms, deny_ttl_ms;   /* 60000 and 10000 unless set */
} gk_review_cache;

void gk_review_cache_init(gk_review_cache *c, int64_t allow_ttl_ms, int64_t deny_ttl_ms);
enum gk_review_verdict gk_review_cache_get(gk_review_cache *c, const gk_review_key *k, int64_t now_ms);
/* Keep a verdict (the oldest entry goes when full). */
void gk_review_cache_put(gk_review_cache *c, const gk_review_key *k, enum gk_review_verdict v, int64_t now_ms);

#endif
