/* kubesim — structural openAPIV3Schema handling for custom resources (pure):
 * pruning of unknown fields, defaulting, validation (type, required, enum, min/max,
 * minLength/maxLength, pattern (PCRE2), minItems/maxItems, min/maxProperties,
 * nullable, x-kubernetes-preserve-unknown-fields, x-kubernetes-int-or-string,
 * x-kubernetes-embedded-resource). x-kubernetes-validations (CEL) is not evaluated. */
#ifndef KUBESIM_SCHEMA_H
#define KUBESIM_SCHEMA_H

#include <cJSON.h>

typedef struct ks_schema_result {
	cJSON *causes;     /* array of {reason, message, field}; owned by the caller after */
	int ncauses;
	char summary[4096];    /* "spec.a: Required value, spec.b: ..." */
	char unknown[2048];    /* "unknown field \"spec.x\", ..." */
	int nunknown;
} ks_schema_result;

/* Prunes unknown fields (listing them in r->unknown), applies defaults and validates
 * obj against the CRD version's openAPIV3Schema. Returns the number of validation
 * errors (0 = valid). r->causes must be freed by the caller (cJSON_Delete). */
int ks_schema_apply(const cJSON *schema, cJSON *obj, ks_schema_result *r);
/* Adds one validation error (the API server's StatusCause: reason, field,
 * message) to r and to its summary; also used by builtin.c. */
void ks_schema_add_cause(ks_schema_result *r, const char *reason, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Records a pruned field ("unknown field \"spec.x\"") in r->unknown. */
void ks_schema_note_unknown(ks_schema_result *r, const char *path);

#endif
