/* lib/policy: defaulting (the CRD default and the mutating webhook agree:
 * kernelModule.moduleName = "xe" when empty). */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/policy.h"

int gk_policy_default(Gpukmm__ClusterPolicy *cp)
{
	if (!cp || !cp->spec || !cp->spec->kernel_module)
		return 0;
	Gpukmm__KernelModuleSpec *km = cp->spec->kernel_module;
	if (km->module_name && *km->module_name)
		return 0;
	char *n = strdup(GK_POLICY_DEFAULT_MODULE);
	if (!n)
		return -1;
	free(km->module_name);
	km->module_name = n;
	return 1;
}

cJSON *gk_policy_default_patch(const cJSON *obj)
{
	cJSON *ops = cJSON_CreateArray();
	if (!ops)
		return NULL;
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	const cJSON *km = cJSON_IsObject(spec) ? cJSON_GetObjectItemCaseSensitive(spec, "kernelModule") : NULL;
	if (!cJSON_IsObject(km))
		return ops;
	const cJSON *mn = cJSON_GetObjectItemCaseSensitive(km, "moduleName");
	if (cJSON_IsString(mn) && mn->valuestring[0])
		return ops;
	if (mn && !cJSON_IsString(mn) && !cJSON_IsNull(mn))
		return ops; /* a type error: validation reports it, defaulting leaves it alone */
	cJSON *op = cJSON_CreateObject();
	if (!op || !cJSON_AddStringToObject(op, "op", mn ? "replace" : "add") ||
	    !cJSON_AddStringToObject(op, "path", "/spec/kernelModule/moduleName") ||
	    !cJSON_AddStringToObject(op, "value", GK_POLICY_DEFAULT_MODULE)) {
		cJSON_Delete(op);
		cJSON_Delete(ops);
		return NULL;
	}
	cJSON_AddItemToArray(ops, op);
	return ops;
}
