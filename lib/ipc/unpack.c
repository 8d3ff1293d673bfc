/* gpukmm — unpack untrusted bytes with a capped allocator (anchors §B.2:
 * protobuf-c allocates per repeated field from counts found in the input). */
#include <stdlib.h>

#include "internal.h"

struct budget {
	size_t left;
};

static void *capped_alloc(void *data, size_t size)
{
	struct budget *b = data;
	if (size > b->left)
		return NULL;
	b->left -= size;
	return malloc(size ? size : 1);
}

static void plain_free(void *data, void *ptr)
{
	free(ptr);
}

ProtobufCMessage *gk_unpack_capped(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
				   size_t len, size_t cap)
{
	struct budget b = { cap ? cap : GK_IPC_DEFAULT_UNPACK_MAX };
	ProtobufCAllocator a = { capped_alloc, plain_free, &b };
	static const uint8_t none[1];
	/* The messages outlive this frame and are freed with plain free()
	 * (gk_ipc_free), which matches: capped_alloc is malloc with a counter. */
	return protobuf_c_message_unpack(desc, &a, len, data ? data : none);
}

void gk_ipc_free(ProtobufCMessage *msg)
{
	if (msg)
		protobuf_c_message_free_unpacked(msg, NULL);
}
