/* kubesim — validation of built-in kinds (pure): Node taints, DaemonSet
 * selector/template, Pod containers (see builtin.c). */
#ifndef KUBESIM_BUILTIN_H
#define KUBESIM_BUILTIN_H

#include "kubesim.h"
#include "schema.h"

/* Fills r (causes must be freed by the caller) and returns the number of errors
 * (0 valid, -1 out of memory); unknown fields are pruned into r->unknown. */
int ks_builtin_validate(const ks_rtype *t, cJSON *obj, ks_schema_result *r);
/* The API server's defaults of built-in kinds (DaemonSet: updateStrategy
 * RollingUpdate maxUnavailable 1 maxSurge 0, revisionHistoryLimit 10). */
void ks_builtin_default(const ks_rtype *t, cJSON *obj);

#endif
