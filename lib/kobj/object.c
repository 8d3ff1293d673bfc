/* lib/kobj: any object as an operand (proto Object): its metadata typed, the
 * whole object as JSON without metadata.managedFields (the controller
 * compares managed fields on it, lib/operands). */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"

int gk_kobj_object_from_json(const cJSON *obj, Gpukmm__Object **out, gk_err *err)
{
	*out = NULL;
	if (!cJSON_IsObject(obj))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "not an object");
	const cJSON *av = cJSON_GetObjectItemCaseSensitive(obj, "apiVersion");
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
	Gpukmm__Object *o = malloc(sizeof(*o));
	if (!o)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	gpukmm__object__init(o);
	int rc = gk_kobj_meta_from_json(obj, NULL, &o->metadata, err);
	if (rc) {
		gk_kobj_free(o);
		return rc;
	}
	cJSON *copy = cJSON_Duplicate(obj, 1);
	if (copy)
		cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(copy, "metadata"), "managedFields");
	o->json = copy ? cJSON_PrintUnformatted(copy) : NULL;
	cJSON_Delete(copy);
	o->api_version = strdup(cJSON_IsString(av) ? av->valuestring : "");
	o->kind = strdup(cJSON_IsString(kind) ? kind->valuestring : "");
	if (!o->json || !o->api_version || !o->kind) {
		gk_kobj_free(o);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	*out = o;
	return GK_OK;
}
