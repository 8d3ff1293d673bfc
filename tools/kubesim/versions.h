/* kubesim — which Kubernetes release kubesim acts as (--kube-version, --runtime-config):
 * /version, the built-in API versions that release serves (resource.k8s.io above all),
 * and the conversion of resource.k8s.io objects between those versions (pure). */
#ifndef KUBESIM_VERSIONS_H
#define KUBESIM_VERSIONS_H

#include <cJSON.h>

#include "kubesim.h"

/* Minor versions --kube-version accepts. */
#define KS_KUBE_MINOR_MIN 31
#define KS_KUBE_MINOR_MAX 34

/* Sets the release ("1.33"; NULL: kubesim's default, /version 1.32 with
 * resource.k8s.io/v1) and runtime-config ("resource.k8s.io/v1beta1=true,...", may be
 * NULL) and rebuilds the built-in part of the registry. Call before objects exist. */
int ks_versions_set(ks_server *s, const char *kube_version, const char *runtime_config, gk_err *err);

/* The /version document of the release. */
cJSON *ks_version_doc(const ks_server *s);
/* "v1.33.2" style git version (OpenAPI info). */
const char *ks_version_git(const ks_server *s);

/* Converts obj (whatever its apiVersion says it is) in place into the shape of
 * group/version `to` (apiVersion rewritten; resource.k8s.io shapes converted).
 * 0, or -1 out of memory. */
int ks_conv(cJSON *obj, const char *group, const char *resource, const char *to);

/* Keys a request/device of resource.k8s.io at `version` must not carry (the other
 * versions' shape), as "unknown field" paths appended to r (builtin validation). */
struct ks_schema_result;
void ks_conv_unknown_fields(const char *resource, const char *version, cJSON *obj, struct ks_schema_result *r);

#endif
