/* kubesim — field ownership (metadata.managedFields) and server-side apply (pure).
 *
 * Field sets are FieldsV1 trees ({"f:spec":{"f:replicas":{}}}); lists and scalars are
 * leaves (lists are owned atomically). */
#ifndef KUBESIM_SSA_H
#define KUBESIM_SSA_H

#include <cJSON.h>

#include "kubesim.h"

/* After a non-apply write (cur NULL on create): the fields that changed become owned
 * by `manager` (operation Update) and are taken from other managers. Apply writes
 * (is_apply) already carry their managedFields. Sets n's metadata.managedFields. */
void ks_ssa_track(const cJSON *cur, cJSON *n, const char *manager, int is_apply, const ks_rtype *t);

/* Server-side apply of `applied` (the configuration, an object) onto cur (NULL: create).
 * Returns the new object with managedFields set, or NULL with out set (409 with the
 * conflicting fields and their managers unless force). */
cJSON *ks_ssa_apply(const cJSON *cur, const cJSON *applied, const char *manager, int force, const ks_rtype *t,
		    const char *name, ks_resp *out);

/* Leaf paths of an object as a FieldsV1 tree (system metadata excluded). */
cJSON *ks_ssa_fieldset(const cJSON *obj, int skip_status);

#endif
