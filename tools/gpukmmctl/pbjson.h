/* gpukmmctl — protobuf → JSON (stopgap until lib/ipc's gk_pb_to_json). */
#ifndef GPUKMMCTL_PBJSON_H
#define GPUKMMCTL_PBJSON_H

#include <protobuf-c/protobuf-c.h>

/* malloc'd JSON text (free with free()); NULL on OOM. */
char *gkctl_pb_to_json(const ProtobufCMessage *m, int pretty);

#endif
