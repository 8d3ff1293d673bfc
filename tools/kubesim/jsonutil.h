/* kubesim — JSON helpers cJSON lacks. */
#ifndef KUBESIM_JSONUTIL_H
#define KUBESIM_JSONUTIL_H

#include <cJSON.h>

/* Deep equality, linear in the size of the documents (cJSON_Compare checks objects
 * in both directions at every level, which is exponential in the depth). Object key
 * order does not matter; duplicate keys are not expected. */
int ks_json_equal(const cJSON *a, const cJSON *b);

#endif
