/* gpukmm-webhook: AdmissionReview v1 handling, pure (no I/O): request body in,
 * HTTP status and response body out. Uses lib/policy, so the webhook and
 * `gpukmmctl validate` never disagree. */
#ifndef GPUKMM_WEBHOOK_ADMISSION_H
#define GPUKMM_WEBHOOK_ADMISSION_H

#include <stddef.h>

#include "gpukmm/policy.h"

#define GK_WEBHOOK_MUTATE_PATH   "/mutate-intel-com-v1alpha1-clusterpolicy"
#define GK_WEBHOOK_VALIDATE_PATH "/validate-intel-com-v1alpha1-clusterpolicy"

enum gk_webhook_kind { GK_WEBHOOK_MUTATE, GK_WEBHOOK_VALIDATE };

enum gk_webhook_outcome {
	GK_WEBHOOK_ALLOWED,   /* response allowed (possibly with a patch) */
	GK_WEBHOOK_DENIED,    /* response denied */
	GK_WEBHOOK_BAD,       /* malformed AdmissionReview: HTTP 400 */
	GK_WEBHOOK_INTERNAL,  /* out of memory: HTTP 500 */
};

typedef struct gk_webhook_result {
	int http_status;      /* 200, 400, 500 */
	char *body;           /* malloc'd; JSON AdmissionReview for 200, a reason otherwise */
	const char *content_type;
	enum gk_webhook_outcome outcome;
} gk_webhook_result;

/* body need not be NUL-terminated. */
void gk_webhook_review(enum gk_webhook_kind kind, const char *body, size_t len, const gk_policy_opts *o,
		       gk_webhook_result *out);
void gk_webhook_result_free(gk_webhook_result *r);
/* A review refused without being parsed (too big to look at; see scan.h):
 * an AdmissionReview denying request `uid` with status `code` and `message`. */
void gk_webhook_refuse(const char *uid, int code, const char *reason, const char *message, gk_webhook_result *out);

/* Content-Type acceptable for an AdmissionReview (application/json, any params). */
int gk_webhook_json_content_type(const char *ct);

#endif
