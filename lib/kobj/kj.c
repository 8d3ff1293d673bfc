/* lib/kobj internal JSON readers (see kj.h). */
#include "kj.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gk_kj_type_name(const cJSON *v)
{
	if (!v)
		return "nothing";
	if (cJSON_IsString(v))
		return "string";
	if (cJSON_IsNumber(v))
		return "number";
	if (cJSON_IsBool(v))
		return "boolean";
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsArray(v))
		return "array";
	if (cJSON_IsObject(v))
		return "object";
	return "invalid";
}

const cJSON *gk_kj_child(const cJSON *obj, const char *key)
{
	if (!obj || !cJSON_IsObject(obj))
		return NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v || cJSON_IsNull(v))
		return NULL;
	return v;
}

static int type_err(gk_err *err, const char *path, const char *key, const char *want, const cJSON *got)
{
	return gk_err_set(err, GK_INVALID_ARGUMENT, "%s%s%s: expected %s, got %s", path,
			  *path && key ? "." : "", key ? key : "", want, gk_kj_type_name(got));
}

static int oom(gk_err *err)
{
	return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
}

char *gk_kj_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

int gk_kj_string(const cJSON *obj, const char *key, const char *path, char **out, gk_err *err)
{
	const cJSON *v = gk_kj_child(obj, key);
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || !v->valuestring)
		return type_err(err, path, key, "string", v);
	char *s = strdup(v->valuestring);
	if (!s)
		return oom(err);
	free(*out);
	*out = s;
	return 0;
}

int gk_kj_bool(const cJSON *obj, const char *key, const char *path, protobuf_c_boolean *has,
	       protobuf_c_boolean *out, gk_err *err)
{
	const cJSON *v = gk_kj_child(obj, key);
	if (!v)
		return 0;
	if (!cJSON_IsBool(v))
		return type_err(err, path, key, "boolean", v);
	*out = cJSON_IsTrue(v) ? 1 : 0;
	if (has)
		*has = 1;
	return 0;
}

int gk_kj_int64(const cJSON *obj, const char *key, const char *path, protobuf_c_boolean *has,
		int64_t *out, gk_err *err)
{
	const cJSON *v = gk_kj_child(obj, key);
	if (!v)
		return 0;
	double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
	/* integral and within the exactly representable range of a double */
	if (!cJSON_IsNumber(v) || !isfinite(d) || d != floor(d) || fabs(d) > 9007199254740992.0)
		return type_err(err, path, key, "integer", v);
	*out = (int64_t)d;
	if (has)
		*has = 1;
	return 0;
}

int gk_kj_int32(const cJSON *obj, const char *key, const char *path, protobuf_c_boolean *has,
		int32_t *out, gk_err *err)
{
	int64_t x = 0;
	protobuf_c_boolean h = 0;
	int rc = gk_kj_int64(obj, key, path, &h, &x, err);
	if (rc)
		return rc;
	if (!h)
		return 0;
	if (x < INT32_MIN || x > INT32_MAX)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s%s%s: integer out of 32-bit range", path,
				  *path ? "." : "", key);
	*out = (int32_t)x;
	if (has)
		*has = 1;
	return 0;
}

int gk_kj_object(const cJSON *obj, const char *key, const char *path, const cJSON **out, gk_err *err)
{
	const cJSON *v = gk_kj_child(obj, key);
	*out = NULL;
	if (!v)
		return 0;
	if (!cJSON_IsObject(v))
		return type_err(err, path, key, "object", v);
	*out = v;
	return 0;
}

int gk_kj_array(const cJSON *obj, const char *key, const char *path, const cJSON **out, gk_err *err)
{
	const cJSON *v = gk_kj_child(obj, key);
	*out = NULL;
	if (!v)
		return 0;
	if (!cJSON_IsArray(v))
		return type_err(err, path, key, "array", v);
	*out = v;
	return 0;
}

Gpukmm__KeyValue *gk_kj_kv_new(const char *key, const char *value)
{
	Gpukmm__KeyValue *kv = malloc(sizeof(*kv));
	if (!kv)
		return NULL;
	gpukmm__key_value__init(kv);
	kv->key = strdup(key);
	kv->value = strdup(value ? value : "");
	if (!kv->key || !kv->value) {
		free(kv->key);
		free(kv->value);
		free(kv);
		return NULL;
	}
	return kv;
}

static int kv_cmp(const void *a, const void *b)
{
	const Gpukmm__KeyValue *x = *(Gpukmm__KeyValue *const *)a, *y = *(Gpukmm__KeyValue *const *)b;
	return strcmp(x->key, y->key);
}

void gk_kj_sort_kv(Gpukmm__KeyValue **kv, size_t n)
{
	if (n > 1)
		qsort(kv, n, sizeof(*kv), kv_cmp);
}

int gk_kj_string_map(const cJSON *obj, const char *key, const char *path, int (*keep)(const char *),
		     size_t *n_out, Gpukmm__KeyValue ***out, gk_err *err)
{
	const cJSON *m;
	int rc = gk_kj_object(obj, key, path, &m, err);
	if (rc || !m)
		return rc;
	size_t cap = (size_t)cJSON_GetArraySize(m), n = 0;
	if (cap == 0)
		return 0;
	Gpukmm__KeyValue **kv = calloc(cap, sizeof(*kv));
	if (!kv)
		return oom(err);
	const cJSON *e;
	cJSON_ArrayForEach(e, m) {
		if (!e->string)
			continue;
		if (!cJSON_IsString(e)) {
			rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s%s%s.%s: expected string, got %s", path,
					*path ? "." : "", key, e->string, gk_kj_type_name(e));
			goto fail;
		}
		if (keep && !keep(e->string))
			continue;
		if (!(kv[n] = gk_kj_kv_new(e->string, e->valuestring))) {
			rc = oom(err);
			goto fail;
		}
		n++;
	}
	gk_kj_sort_kv(kv, n);
	if (n == 0) {
		free(kv);
		return 0;
	}
	*out = kv;
	*n_out = n;
	return 0;
fail:
	for (size_t i = 0; i < n; i++)
		protobuf_c_message_free_unpacked(&kv[i]->base, NULL);
	free(kv);
	return rc;
}

static int list_common(const cJSON *obj, const char *key, const char *path, bool by_name,
		       size_t *n_out, char ***out, gk_err *err)
{
	const cJSON *a;
	int rc = gk_kj_array(obj, key, path, &a, err);
	if (rc || !a)
		return rc;
	size_t cap = (size_t)cJSON_GetArraySize(a), n = 0;
	if (cap == 0)
		return 0;
	char **v = calloc(cap, sizeof(*v));
	if (!v)
		return oom(err);
	const cJSON *e;
	cJSON_ArrayForEach(e, a) {
		const cJSON *s = e;
		if (by_name) {
			if (!cJSON_IsObject(e)) {
				rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s%s%s[%zu]: expected object, got %s",
						path, *path ? "." : "", key, n, gk_kj_type_name(e));
				goto fail;
			}
			s = gk_kj_child(e, "name");
			if (s && !cJSON_IsString(s)) {
				rc = gk_err_set(err, GK_INVALID_ARGUMENT,
						"%s%s%s[%zu].name: expected string, got %s", path,
						*path ? "." : "", key, n, gk_kj_type_name(s));
				goto fail;
			}
		} else if (!cJSON_IsString(e)) {
			rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s%s%s[%zu]: expected string, got %s", path,
					*path ? "." : "", key, n, gk_kj_type_name(e));
			goto fail;
		}
		if (!(v[n] = strdup(s ? s->valuestring : ""))) {
			rc = oom(err);
			goto fail;
		}
		n++;
	}
	*out = v;
	*n_out = n;
	return 0;
fail:
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	return rc;
}

int gk_kj_string_list(const cJSON *obj, const char *key, const char *path, size_t *n_out,
		      char ***out, gk_err *err)
{
	return list_common(obj, key, path, false, n_out, out, err);
}

int gk_kj_name_list(const cJSON *obj, const char *key, const char *path, size_t *n_out, char ***out,
		    gk_err *err)
{
	return list_common(obj, key, path, true, n_out, out, err);
}

bool gk_kj_add_str(cJSON *obj, const char *key, const char *s)
{
	if (!s)
		return true;
	return cJSON_AddStringToObject(obj, key, s) != NULL;
}

cJSON *gk_kj_kv_to_object(Gpukmm__KeyValue *const *kv, size_t n)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (!kv[i] || !kv[i]->key)
			continue;
		if (!cJSON_AddStringToObject(o, kv[i]->key, kv[i]->value ? kv[i]->value : "")) {
			cJSON_Delete(o);
			return NULL;
		}
	}
	return o;
}

cJSON *gk_kj_strings_to_array(char *const *s, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	if (!a)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		cJSON *e = cJSON_CreateString(s[i] ? s[i] : "");
		if (!e) {
			cJSON_Delete(a);
			return NULL;
		}
		cJSON_AddItemToArray(a, e);
	}
	return a;
}

/* ---- shared sub-objects ---------------------------------------------------- */

/* [{...}] -> a vector of messages of type d, one per array entry (each must be an
 * object), each filled by fill(entry, "path.key[i]", message). *out_vec is the
 * address of the typed vector (Gpukmm__X ***). */
typedef int (*kj_fill_fn)(const cJSON *e, const char *path, ProtobufCMessage *m, gk_err *err);

static int object_list(const cJSON *obj, const char *key, const char *path, const ProtobufCMessageDescriptor *d,
		       kj_fill_fn fill, size_t *n_out, void *out_vec, gk_err *err)
{
	const cJSON *a;
	int rc = gk_kj_array(obj, key, path, &a, err);
	if (rc || !a || cJSON_GetArraySize(a) == 0)
		return rc;
	size_t cap = (size_t)cJSON_GetArraySize(a), n = 0;
	ProtobufCMessage **v = calloc(cap, sizeof(*v));
	if (!v)
		return oom(err);
	const cJSON *e;
	cJSON_ArrayForEach(e, a) {
		char p[256];
		snprintf(p, sizeof(p), "%s%s%s[%zu]", path, *path ? "." : "", key, n);
		if (!cJSON_IsObject(e)) {
			rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s: expected object, got %s", p, gk_kj_type_name(e));
			goto fail;
		}
		ProtobufCMessage *m = malloc(d->sizeof_message);
		if (!m) {
			rc = oom(err);
			goto fail;
		}
		protobuf_c_message_init(d, m);
		v[n++] = m;
		if ((rc = fill(e, p, m, err)))
			goto fail;
	}
	memcpy(out_vec, &v, sizeof(v));
	*n_out = n;
	return 0;
fail:
	for (size_t i = 0; i < n; i++)
		protobuf_c_message_free_unpacked(v[i], NULL);
	free(v);
	return rc;
}

static int fill_toleration(const cJSON *e, const char *p, ProtobufCMessage *m, gk_err *err)
{
	Gpukmm__Toleration *t = (Gpukmm__Toleration *)m;
	int rc;
	if ((rc = gk_kj_string(e, "key", p, &t->key, err)) || (rc = gk_kj_string(e, "operator", p, &t->operator_, err)) ||
	    (rc = gk_kj_string(e, "value", p, &t->value, err)) || (rc = gk_kj_string(e, "effect", p, &t->effect, err)))
		return rc;
	return gk_kj_int64(e, "tolerationSeconds", p, &t->has_toleration_seconds, &t->toleration_seconds, err);
}

int gk_kj_tolerations(const cJSON *obj, const char *key, const char *path, size_t *n_out,
		      Gpukmm__Toleration ***out, gk_err *err)
{
	return object_list(obj, key, path, &gpukmm__toleration__descriptor, fill_toleration, n_out, out, err);
}

static int fill_build_arg(const cJSON *e, const char *p, ProtobufCMessage *m, gk_err *err)
{
	Gpukmm__BuildArg *b = (Gpukmm__BuildArg *)m;
	int rc = gk_kj_string(e, "name", p, &b->name, err);
	return rc ? rc : gk_kj_string(e, "value", p, &b->value, err);
}

int gk_kj_build_args(const cJSON *obj, const char *key, const char *path, size_t *n_out,
		     Gpukmm__BuildArg ***out, gk_err *err)
{
	return object_list(obj, key, path, &gpukmm__build_arg__descriptor, fill_build_arg, n_out, out, err);
}

int gk_kj_registry_tls(const cJSON *obj, const char *key, const char *path, Gpukmm__RegistryTLS **out,
		       gk_err *err)
{
	const cJSON *o;
	int rc = gk_kj_object(obj, key, path, &o, err);
	if (rc || !o)
		return rc;
	char p[256];
	snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", key);
	Gpukmm__RegistryTLS *t = malloc(sizeof(*t));
	if (!t)
		return oom(err);
	gpukmm__registry_tls__init(t);
	if ((rc = gk_kj_bool(o, "insecure", p, &t->has_insecure, &t->insecure, err)) ||
	    (rc = gk_kj_bool(o, "insecureSkipTLSVerify", p, &t->has_insecure_skip_tls_verify,
			     &t->insecure_skip_tls_verify, err))) {
		protobuf_c_message_free_unpacked(&t->base, NULL);
		return rc;
	}
	if (*out)
		protobuf_c_message_free_unpacked(&(*out)->base, NULL);
	*out = t;
	return 0;
}

cJSON *gk_kj_tolerations_to_json(Gpukmm__Toleration *const *t, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	if (!a)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o)
			goto fail;
		cJSON_AddItemToArray(a, o);
		if (!gk_kj_add_str(o, "key", t[i]->key) || !gk_kj_add_str(o, "operator", t[i]->operator_) ||
		    !gk_kj_add_str(o, "value", t[i]->value) || !gk_kj_add_str(o, "effect", t[i]->effect) ||
		    (t[i]->has_toleration_seconds &&
		     !cJSON_AddNumberToObject(o, "tolerationSeconds", (double)t[i]->toleration_seconds)))
			goto fail;
	}
	return a;
fail:
	cJSON_Delete(a);
	return NULL;
}

cJSON *gk_kj_registry_tls_to_json(const Gpukmm__RegistryTLS *t)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !t)
		return o;
	if ((t->has_insecure && !cJSON_AddBoolToObject(o, "insecure", t->insecure)) ||
	    (t->has_insecure_skip_tls_verify &&
	     !cJSON_AddBoolToObject(o, "insecureSkipTLSVerify", t->insecure_skip_tls_verify))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

cJSON *gk_kj_build_args_to_json(Gpukmm__BuildArg *const *a, size_t n)
{
	cJSON *arr = cJSON_CreateArray();
	if (!arr)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o)
			goto fail;
		cJSON_AddItemToArray(arr, o);
		if (!cJSON_AddStringToObject(o, "name", a[i]->name ? a[i]->name : "") ||
		    !cJSON_AddStringToObject(o, "value", a[i]->value ? a[i]->value : ""))
			goto fail;
	}
	return arr;
fail:
	cJSON_Delete(arr);
	return NULL;
}

/* {name} -> *out ("" when the object has no name, as the schema default does) */
static int name_ref(const cJSON *obj, const char *key, const char *path, char **out, gk_err *err)
{
	const cJSON *o;
	int rc = gk_kj_object(obj, key, path, &o, err);
	if (rc || !o)
		return rc;
	char p[300];
	snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", key);
	if ((rc = gk_kj_string(o, "name", p, out, err)))
		return rc;
	if (!*out && !(*out = strdup("")))
		return oom(err);
	return 0;
}

int gk_kj_sign(const cJSON *obj, const char *key, const char *path, Gpukmm__Sign **out, gk_err *err)
{
	const cJSON *o;
	int rc = gk_kj_object(obj, key, path, &o, err);
	if (rc || !o)
		return rc;
	char p[300];
	snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", key);
	Gpukmm__Sign *s = malloc(sizeof(*s));
	if (!s)
		return oom(err);
	gpukmm__sign__init(s);
	if ((rc = name_ref(o, "keySecret", p, &s->key_secret, err)) ||
	    (rc = name_ref(o, "certSecret", p, &s->cert_secret, err)) ||
	    (rc = gk_kj_string_list(o, "filesToSign", p, &s->n_files_to_sign, &s->files_to_sign, err)) ||
	    (rc = gk_kj_string(o, "unsignedImage", p, &s->unsigned_image, err)) ||
	    (rc = gk_kj_registry_tls(o, "unsignedImageRegistryTLS", p, &s->unsigned_image_registry_tls, err))) {
		protobuf_c_message_free_unpacked(&s->base, NULL);
		return rc;
	}
	if (*out)
		protobuf_c_message_free_unpacked(&(*out)->base, NULL);
	*out = s;
	return 0;
}

static bool add_name_ref(cJSON *o, const char *key, const char *name)
{
	if (!name)
		return true;
	cJSON *r = cJSON_AddObjectToObject(o, key);
	return r && cJSON_AddStringToObject(r, "name", name);
}

cJSON *gk_kj_sign_to_json(const Gpukmm__Sign *s)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !s)
		return o;
	if (!add_name_ref(o, "keySecret", s->key_secret) || !add_name_ref(o, "certSecret", s->cert_secret) ||
	    !gk_kj_add_str(o, "unsignedImage", s->unsigned_image))
		goto fail;
	if (s->unsigned_image_registry_tls) {
		cJSON *t = gk_kj_registry_tls_to_json(s->unsigned_image_registry_tls);
		if (!t)
			goto fail;
		cJSON_AddItemToObject(o, "unsignedImageRegistryTLS", t);
	}
	if (s->n_files_to_sign) {
		cJSON *a = gk_kj_strings_to_array(s->files_to_sign, s->n_files_to_sign);
		if (!a)
			goto fail;
		cJSON_AddItemToObject(o, "filesToSign", a);
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}
