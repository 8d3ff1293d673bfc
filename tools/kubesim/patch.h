/* kubesim — the three patch formats of the Kubernetes API (pure, on cJSON).
 * Each takes ownership of `target` and returns the patched document (possibly a
 * different pointer), or NULL with *err set (target then freed). */
#ifndef KUBESIM_PATCH_H
#define KUBESIM_PATCH_H

#include <cJSON.h>

#include "gpukmm/err.h"

/* RFC 7386 JSON merge patch (application/merge-patch+json). */
cJSON *ks_merge_patch(cJSON *target, const cJSON *patch, gk_err *err);
/* RFC 6902 JSON patch (application/json-patch+json): ops is an array. */
cJSON *ks_json_patch(cJSON *target, const cJSON *ops, gk_err *err);
/* Strategic merge patch (application/strategic-merge-patch+json) for the built-in
 * kinds: lists with a known merge key (containers/env/volumes by name, ports,
 * conditions by type, ownerReferences by uid, taints by key, ...) are merged by
 * key, finalizers as a set; "$patch": replace/delete, "$deleteFromPrimitiveList/",
 * "$setElementOrder/" and "$retainKeys" directives are honoured or stripped. */
cJSON *ks_strategic_merge_patch(cJSON *target, const cJSON *patch, gk_err *err);
/* The merge key of a list field for strategic merge (NULL: atomic list). */
const char *ks_smp_merge_key(const char *field, const cJSON *sample_item);

#endif
