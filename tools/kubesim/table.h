/* kubesim — server-side printing: the meta.k8s.io/v1 Table kubectl asks for with
 * "Accept: application/json;as=Table;v=v1;g=meta.k8s.io" (pure, no store access).
 * Custom resources get Name + the served version's additionalPrinterColumns (Age
 * alone when there are none); built-ins the columns kubectl users know (Node
 * NAME/STATUS/ROLES/AGE/VERSION, Namespace, Pod, DaemonSet, ConfigMap, Secret, ...,
 * others NAME/AGE). */
#ifndef KUBESIM_TABLE_H
#define KUBESIM_TABLE_H

#include <cJSON.h>
#include <time.h>

#include "kubesim.h"

/* 1 when the Accept header asks for a Table (meta.k8s.io v1 or v1beta1) before JSON. */
int ks_wants_table(const char *accept);
/* Table of one object or of a List (items); include_object: "None", "Object" or
 * anything else (Metadata, the default). Returns a new document or NULL (OOM). */
cJSON *ks_table(const ks_rtype *t, const cJSON *obj_or_list, const char *include_object, time_t now);
/* apimachinery's duration.HumanDuration ("5s", "3m2s", "4h10m", "2d5h", ...). */
void ks_human_duration(long long seconds, char *buf, size_t cap);
/* First result of a kubectl-style JSONPath (".a.b[0].c", "[?(@.type==\"Ready\")]",
 * "[*]") or NULL. */
const cJSON *ks_jsonpath_first(const cJSON *obj, const char *path);

#endif
