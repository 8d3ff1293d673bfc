/* lib/kobj: a core/v1 Event object (what client-go's recorder creates). */
#include <stdio.h>
#include <string.h>

#include "gpukmm/kobj.h"

cJSON *gk_kobj_event_json(const gk_kobj_event *e)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *md = o ? cJSON_AddObjectToObject(o, "metadata") : NULL;
	cJSON *inv = o ? cJSON_AddObjectToObject(o, "involvedObject") : NULL;
	cJSON *src = o ? cJSON_AddObjectToObject(o, "source") : NULL;
	if (!md || !inv || !src)
		goto oom;
	bool ok = cJSON_AddStringToObject(o, "apiVersion", "v1") && cJSON_AddStringToObject(o, "kind", "Event") &&
		  cJSON_AddStringToObject(md, "name", e->name) &&
		  cJSON_AddStringToObject(md, "namespace", e->ns && *e->ns ? e->ns : "default") &&
		  cJSON_AddStringToObject(inv, "apiVersion", e->api_version) &&
		  cJSON_AddStringToObject(inv, "kind", e->kind) && cJSON_AddStringToObject(inv, "name", e->object) &&
		  (!e->object_ns || cJSON_AddStringToObject(inv, "namespace", e->object_ns)) &&
		  (!e->uid || cJSON_AddStringToObject(inv, "uid", e->uid)) &&
		  cJSON_AddStringToObject(o, "type", e->warning ? "Warning" : "Normal") &&
		  cJSON_AddStringToObject(o, "reason", e->reason) && cJSON_AddStringToObject(o, "message", e->message) &&
		  cJSON_AddNumberToObject(o, "count", e->count > 0 ? e->count : 1) &&
		  cJSON_AddStringToObject(o, "firstTimestamp", e->ts) && cJSON_AddStringToObject(o, "lastTimestamp", e->ts) &&
		  cJSON_AddStringToObject(src, "component", e->component) &&
		  cJSON_AddStringToObject(o, "reportingComponent", e->reporting_component) &&
		  cJSON_AddStringToObject(o, "reportingInstance", e->instance ? e->instance : "");
	if (ok)
		return o;
oom:
	cJSON_Delete(o);
	return NULL;
}
