/* gpukmm — lib/kobj internal: strict-typed, absence-lenient JSON field readers
 * shared by the lib/kobj converters (not a public header; include only from
 * the lib/kobj sources).
 *
 * Every reader takes the parent object, the key and the parent's field path
 * (for messages such as "spec.nodeSelector.foo: expected string, got number").
 * Absent or JSON null leaves the output untouched and returns 0. Strings are
 * malloc'd so protobuf_c_message_free_unpacked(msg, NULL) frees them. */
#ifndef GPUKMM_LIB_KOBJ_KJ_H
#define GPUKMM_LIB_KOBJ_KJ_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "kube.pb-c.h"

/* "string", "number", "object", ... for messages */
const char *gk_kj_type_name(const cJSON *v);
/* Child of obj by key (case-sensitive); NULL when absent or JSON null. */
const cJSON *gk_kj_child(const cJSON *obj, const char *key);

int gk_kj_string(const cJSON *obj, const char *key, const char *path, char **out, gk_err *err);
int gk_kj_bool(const cJSON *obj, const char *key, const char *path, protobuf_c_boolean *has,
	       protobuf_c_boolean *out, gk_err *err);
int gk_kj_int64(const cJSON *obj, const char *key, const char *path, protobuf_c_boolean *has,
		int64_t *out, gk_err *err);
int gk_kj_int32(const cJSON *obj, const char *key, const char *path, protobuf_c_boolean *has,
		int32_t *out, gk_err *err);
/* Object or array child: *out NULL when absent/null; error when another type. */
int gk_kj_object(const cJSON *obj, const char *key, const char *path, const cJSON **out, gk_err *err);
int gk_kj_array(const cJSON *obj, const char *key, const char *path, const cJSON **out, gk_err *err);
/* map[string]string -> repeated KeyValue sorted by key. keep may be NULL (keep all). */
int gk_kj_string_map(const cJSON *obj, const char *key, const char *path, int (*keep)(const char *),
		     size_t *n_out, Gpukmm__KeyValue ***out, gk_err *err);
/* []string */
int gk_kj_string_list(const cJSON *obj, const char *key, const char *path, size_t *n_out,
		      char ***out, gk_err *err);
/* [{name: string}] -> names (LocalObjectReference list) */
int gk_kj_name_list(const cJSON *obj, const char *key, const char *path, size_t *n_out, char ***out,
		    gk_err *err);

/* core/v1 Toleration list (first type error wins). */
int gk_kj_tolerations(const cJSON *obj, const char *key, const char *path, size_t *n_out,
		      Gpukmm__Toleration ***out, gk_err *err);
/* {insecure, insecureSkipTLSVerify} -> *out (NULL when absent). */
int gk_kj_registry_tls(const cJSON *obj, const char *key, const char *path, Gpukmm__RegistryTLS **out,
		       gk_err *err);
/* [{name, value}] build arguments. */
int gk_kj_build_args(const cJSON *obj, const char *key, const char *path, size_t *n_out,
		     Gpukmm__BuildArg ***out, gk_err *err);
/* KMM's Sign {keySecret{name}, certSecret{name}, filesToSign, unsignedImage,
 * unsignedImageRegistryTLS} -> *out (NULL when absent); and back. */
int gk_kj_sign(const cJSON *obj, const char *key, const char *path, Gpukmm__Sign **out, gk_err *err);
cJSON *gk_kj_sign_to_json(const Gpukmm__Sign *s);
cJSON *gk_kj_tolerations_to_json(Gpukmm__Toleration *const *t, size_t n);
cJSON *gk_kj_registry_tls_to_json(const Gpukmm__RegistryTLS *t);
cJSON *gk_kj_build_args_to_json(Gpukmm__BuildArg *const *a, size_t n);

/* Allocation helpers: NULL on out-of-memory. */
char *gk_kj_strdup(const char *s);
Gpukmm__KeyValue *gk_kj_kv_new(const char *key, const char *value);
void gk_kj_sort_kv(Gpukmm__KeyValue **kv, size_t n);
/* JSON builders: add only when set; return false on out-of-memory. */
bool gk_kj_add_str(cJSON *obj, const char *key, const char *s);
cJSON *gk_kj_kv_to_object(Gpukmm__KeyValue *const *kv, size_t n);
cJSON *gk_kj_strings_to_array(char *const *s, size_t n);

#endif
