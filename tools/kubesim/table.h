/* kubesim — server-side printing (meta.k8s.io/v1 Table) of custom resources,
 * what `kubectl get` asks for (Accept: application/json;as=Table;...): the
 * Name column plus the CRD version's additionalPrinterColumns (default: Age),
 * cells from their JSONPaths, "date" columns as ages, rows carrying
 * PartialObjectMetadata. Pure: no store, no lock, time passed in. */
#ifndef KUBESIM_TABLE_H
#define KUBESIM_TABLE_H

#include <cJSON.h>
#include <stdint.h>

/* Does the Accept header ask for a Table? */
int ks_table_wanted(const char *accept);
/* The Table of objs (n of them) for CRD object `crd` (may be NULL: default
 * columns) at `version`. NULL on OOM. */
cJSON *ks_table_build(const cJSON *crd, const char *version, const cJSON *const *objs, int n, const char *rv,
		      int64_t now_s);
/* The value at a printer-column JSONPath (".a.b", "[N]", "[?(@.k==\"v\")]"
 * segments; the first match), or NULL. */
const cJSON *ks_table_jsonpath(const cJSON *obj, const char *path);
/* Kubernetes' HumanDuration of a number of seconds ("5s", "3m20s", "2d3h"). */
void ks_table_age(char *buf, size_t cap, int64_t seconds);

#endif
