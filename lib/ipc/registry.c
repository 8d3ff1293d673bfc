/* gpukmm — lookups in the descriptor tables of proto/ (see registry.h). */
#include <string.h>

#include "gpukmm/ipc.h"
#include "registry.h"

const ProtobufCServiceDescriptor *gk_pb_find_service(const char *full_name)
{
	for (size_t i = 0; full_name && gk_pb_all_services[i]; i++)
		if (strcmp(gk_pb_all_services[i]->name, full_name) == 0)
			return gk_pb_all_services[i];
	return NULL;
}

const ProtobufCMessageDescriptor *gk_pb_find_message(const char *full_name)
{
	for (size_t i = 0; full_name && gk_pb_all_messages[i]; i++)
		if (strcmp(gk_pb_all_messages[i]->name, full_name) == 0)
			return gk_pb_all_messages[i];
	return NULL;
}
