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
 * kind `kind` (smp.c): lists merge or are replaced according to the kind's Go
 * patchStrategy/patchMergeKey tags; "$patch" (replace/delete), "$retainKeys",
 * "$setElementOrder/" and "$deleteFromPrimitiveList/" directives are applied. */
cJSON *ks_strategic_merge_patch(const char *kind, cJSON *target, const cJSON *patch, gk_err *err);
/* Strategy of the list at a dotted path of `kind` ("spec.template.spec.containers"):
 * 1 merge (merge key in *merge_key, NULL for a set of scalars), 0 atomic. */
int ks_smp_list_strategy(const char *kind, const char *path, const char **merge_key);
/* One step of the same type graph: the type of `field` of `type` (of its items for a
 * list; NULL when not in the graph), *merge 1 for a merge list (*merge_key its key,
 * NULL for a set of scalars). Server-side apply (ssa.c) derives list types from it,
 * as structured-merge-diff derives them from the built-ins' patch tags. */
const char *ks_smp_field(const char *type, const char *field, int *merge, const char **merge_key);

#endif
