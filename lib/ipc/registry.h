/* gpukmm — every descriptor of proto/ (NULL-terminated tables, generated into
 * $(BUILD)/gen/pb_registry.c by tools/gen-pb-registry.sh at build time). */
#ifndef GPUKMM_IPC_REGISTRY_H
#define GPUKMM_IPC_REGISTRY_H

#include <protobuf-c/protobuf-c.h>

extern const ProtobufCMessageDescriptor *const gk_pb_all_messages[];
extern const ProtobufCEnumDescriptor *const gk_pb_all_enums[];
extern const ProtobufCServiceDescriptor *const gk_pb_all_services[];

#endif
