/* kubesim — JSON helpers cJSON lacks. */
#ifndef KUBESIM_JSONUTIL_H
#define KUBESIM_JSONUTIL_H

#include <cJSON.h>

/* Deep equality, linear in the size of the documents (cJSON_Compare checks objects
 * in both directions at every level, which is exponential in the depth). Object key
 * order does not matter; duplicate keys are not expected. */
int ks_json_equal(const cJSON *a, const cJSON *b);

/* o[k] (NULL when o is not an object or has no k). */
static inline const cJSON *ks_jget(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* o[k] when it is a string, else NULL. */
static inline const char *ks_jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* o[k] = v (replaced or added; v taken; nothing when v is NULL). */
void ks_jset(cJSON *o, const char *k, cJSON *v);

#endif
