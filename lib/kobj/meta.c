/* lib/kobj: ObjectMeta <-> JSON, gk_kobj_free, gk_kv_get. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "kj.h"

void gk_kobj_free(void *msg)
{
	if (msg)
		protobuf_c_message_free_unpacked((ProtobufCMessage *)msg, NULL);
}

const char *gk_kv_get(Gpukmm__KeyValue *const *kv, size_t n, const char *key)
{
	size_t lo = 0, hi = n;
	if (!kv || !key)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(kv[mid]->key ? kv[mid]->key : "", key);
		if (c == 0)
			return kv[mid]->value ? kv[mid]->value : "";
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int owner_refs(const cJSON *meta, Gpukmm__ObjectMeta *m, gk_err *err)
{
	const cJSON *a;
	int rc = gk_kj_array(meta, "ownerReferences", "metadata", &a, err);
	if (rc || !a)
		return rc;
	size_t cap = (size_t)cJSON_GetArraySize(a);
	if (cap == 0)
		return 0;
	m->owner_references = calloc(cap, sizeof(*m->owner_references));
	if (!m->owner_references)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	const cJSON *e;
	size_t i = 0;
	cJSON_ArrayForEach(e, a) {
		char path[64];
		snprintf(path, sizeof(path), "metadata.ownerReferences[%zu]", i);
		if (!cJSON_IsObject(e))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: expected object, got %s", path,
					  gk_kj_type_name(e));
		Gpukmm__OwnerReference *o = malloc(sizeof(*o));
		if (!o)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		gpukmm__owner_reference__init(o);
		m->owner_references[m->n_owner_references++] = o;
		if ((rc = gk_kj_string(e, "apiVersion", path, &o->api_version, err)) ||
		    (rc = gk_kj_string(e, "kind", path, &o->kind, err)) ||
		    (rc = gk_kj_string(e, "name", path, &o->name, err)) ||
		    (rc = gk_kj_string(e, "uid", path, &o->uid, err)) ||
		    (rc = gk_kj_bool(e, "controller", path, &o->has_controller, &o->controller, err)) ||
		    (rc = gk_kj_bool(e, "blockOwnerDeletion", path, &o->has_block_owner_deletion,
				     &o->block_owner_deletion, err)))
			return rc;
		i++;
	}
	return 0;
}

int gk_kobj_meta_from_json(const cJSON *obj, int (*keep_annotation)(const char *key),
			   Gpukmm__ObjectMeta **out, gk_err *err)
{
	const cJSON *meta;
	*out = NULL;
	if (!obj || !cJSON_IsObject(obj))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "object: expected object, got %s",
				  gk_kj_type_name(obj));
	int rc = gk_kj_object(obj, "metadata", "", &meta, err);
	if (rc)
		return rc;
	Gpukmm__ObjectMeta *m = malloc(sizeof(*m));
	if (!m)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	gpukmm__object_meta__init(m);
	if (!meta) {
		*out = m;
		return 0;
	}
	const char *p = "metadata";
	if ((rc = gk_kj_string(meta, "name", p, &m->name, err)) ||
	    (rc = gk_kj_string(meta, "namespace", p, &m->namespace_, err)) ||
	    (rc = gk_kj_string(meta, "uid", p, &m->uid, err)) ||
	    (rc = gk_kj_string(meta, "resourceVersion", p, &m->resource_version, err)) ||
	    (rc = gk_kj_int64(meta, "generation", p, &m->has_generation, &m->generation, err)) ||
	    (rc = gk_kj_string_map(meta, "labels", p, NULL, &m->n_labels, &m->labels, err)) ||
	    (rc = gk_kj_string_map(meta, "annotations", p, keep_annotation, &m->n_annotations,
				   &m->annotations, err)) ||
	    (rc = gk_kj_string(meta, "creationTimestamp", p, &m->creation_timestamp, err)) ||
	    (rc = gk_kj_string(meta, "deletionTimestamp", p, &m->deletion_timestamp, err)) ||
	    (rc = gk_kj_string_list(meta, "finalizers", p, &m->n_finalizers, &m->finalizers, err)) ||
	    (rc = owner_refs(meta, m, err))) {
		gk_kobj_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

static cJSON *owner_to_json(const Gpukmm__OwnerReference *o)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	if (!gk_kj_add_str(j, "apiVersion", o->api_version) || !gk_kj_add_str(j, "kind", o->kind) ||
	    !gk_kj_add_str(j, "name", o->name) || !gk_kj_add_str(j, "uid", o->uid) ||
	    (o->has_controller && !cJSON_AddBoolToObject(j, "controller", o->controller)) ||
	    (o->has_block_owner_deletion &&
	     !cJSON_AddBoolToObject(j, "blockOwnerDeletion", o->block_owner_deletion))) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

cJSON *gk_kobj_meta_to_json(const Gpukmm__ObjectMeta *m)
{
	cJSON *j = cJSON_CreateObject();
	if (!j || !m)
		return j;
	if (!gk_kj_add_str(j, "name", m->name) || !gk_kj_add_str(j, "namespace", m->namespace_) ||
	    !gk_kj_add_str(j, "uid", m->uid) || !gk_kj_add_str(j, "resourceVersion", m->resource_version) ||
	    (m->has_generation && !cJSON_AddNumberToObject(j, "generation", (double)m->generation)) ||
	    !gk_kj_add_str(j, "creationTimestamp", m->creation_timestamp) ||
	    !gk_kj_add_str(j, "deletionTimestamp", m->deletion_timestamp))
		goto fail;
	if (m->n_labels) {
		cJSON *l = gk_kj_kv_to_object(m->labels, m->n_labels);
		if (!l)
			goto fail;
		cJSON_AddItemToObject(j, "labels", l);
	}
	if (m->n_annotations) {
		cJSON *a = gk_kj_kv_to_object(m->annotations, m->n_annotations);
		if (!a)
			goto fail;
		cJSON_AddItemToObject(j, "annotations", a);
	}
	if (m->n_finalizers) {
		cJSON *f = gk_kj_strings_to_array(m->finalizers, m->n_finalizers);
		if (!f)
			goto fail;
		cJSON_AddItemToObject(j, "finalizers", f);
	}
	if (m->n_owner_references) {
		cJSON *a = cJSON_AddArrayToObject(j, "ownerReferences");
		if (!a)
			goto fail;
		for (size_t i = 0; i < m->n_owner_references; i++) {
			cJSON *o = owner_to_json(m->owner_references[i]);
			if (!o)
				goto fail;
			cJSON_AddItemToArray(a, o);
		}
	}
	return j;
fail:
	cJSON_Delete(j);
	return NULL;
}
