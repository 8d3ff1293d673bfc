/* kubesim — field ownership (metadata.managedFields) and server-side apply (pure),
 * after structured-merge-diff: FieldsV1 sets with per-item ownership of map lists
 * (k:{"name":"c"}) and sets (v:"x"), atomic lists and maps as one leaf, conflicts
 * as the API server reports them. See ssa.c for the type rules. */
#ifndef KUBESIM_SSA_H
#define KUBESIM_SSA_H

#include <cJSON.h>

#include "kubesim.h"

/* After a non-apply write (cur NULL on create) by `manager` (sub: "status" or NULL):
 * the paths the write added or changed become owned by its Update entry and are
 * taken from every other manager; paths it removed leave its entry. Apply writes
 * (is_apply) already carry their managedFields. Sets n's metadata.managedFields. */
void ks_ssa_track(const cJSON *cur, cJSON *n, const char *manager, const char *sub, int is_apply, const ks_rtype *t);

/* Server-side apply of `applied` (the configuration, an object) onto cur (NULL:
 * create). Returns the merged object with managedFields set, or NULL with out set:
 * 409 Conflict (causes FieldManagerConflict, one per field) when other managers own
 * fields whose values the apply changes, unless force (they then lose them). Fields
 * this manager applied before and no longer applies are removed unless another
 * manager owns them. */
cJSON *ks_ssa_apply(const cJSON *cur, const cJSON *applied, const char *manager, const char *sub, int force,
		    const ks_rtype *t, const char *name, ks_resp *out);

/* The FieldsV1 set (wire form) an applied configuration claims. */
cJSON *ks_ssa_config_set(const cJSON *applied, const ks_rtype *t);

#endif
