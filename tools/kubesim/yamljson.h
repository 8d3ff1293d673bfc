/* kubesim — YAML (one document) to cJSON, for apply-patch+yaml bodies (libyaml). */
#ifndef KUBESIM_YAMLJSON_H
#define KUBESIM_YAMLJSON_H

#include <cJSON.h>
#include <stddef.h>

#include "gpukmm/err.h"

cJSON *ks_yaml_to_json(const char *buf, size_t len, gk_err *err);

#endif
