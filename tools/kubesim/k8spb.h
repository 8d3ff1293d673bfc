/* kubesim — a minimal decoder for Kubernetes' protobuf wire format (the "k8s\0"
 * envelope around runtime.Unknown), enough for the objects kubectl's imperative
 * `create` commands send as protobuf: Namespace, ConfigMap, Secret, ServiceAccount
 * (metadata name/generateName/namespace/labels/annotations and their data fields),
 * the requests of `kubectl auth can-i|whoami` and `kubectl create token`
 * (SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview,
 * SelfSubjectRulesReview, SelfSubjectReview, TokenRequest: metadata and spec) and
 * `kubectl create role|clusterrole|rolebinding|clusterrolebinding` (rules,
 * subjects, roleRef). */
#ifndef KUBESIM_K8SPB_H
#define KUBESIM_K8SPB_H

#include <cJSON.h>
#include <stddef.h>

#include "gpukmm/err.h"

/* Returns the object as JSON, or NULL with err (unsupported kind, malformed data). */
cJSON *ks_k8spb_decode(const unsigned char *buf, size_t len, gk_err *err);

#endif
