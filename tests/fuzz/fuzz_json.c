/* libFuzzer target: gk_pb_from_json on arbitrary text, for a message type
 * picked by the first byte. Whatever parses must render back to JSON that
 * parses to the same message (compared packed). Built by tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/ipc/registry.h"
#include "gpukmm/ipc.h"

static uint8_t *packed(const ProtobufCMessage *m, size_t *n)
{
	*n = protobuf_c_message_get_packed_size(m);
	uint8_t *b = malloc(*n + 1);
	if (b)
		protobuf_c_message_pack(m, b);
	return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t nm = 0;
	while (gk_pb_all_messages[nm])
		nm++;
	const ProtobufCMessageDescriptor *d = gk_pb_all_messages[data[0] % nm];
	char *text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	ProtobufCMessage *m;
	gk_err e;
	if (gk_pb_from_json(d, text, &m, &e) == 0) {
		char *j = gk_pb_to_json(m);
		if (!j)
			abort();
		ProtobufCMessage *m2;
		if (gk_pb_from_json(d, j, &m2, &e) != 0)
			abort(); /* our own output must parse */
		size_t n1, n2;
		uint8_t *b1 = packed(m, &n1), *b2 = packed(m2, &n2);
		/* NaN != NaN byte-wise is fine (same bits); anything else must match */
		if (b1 && b2 && (n1 != n2 || memcmp(b1, b2, n1) != 0))
			abort();
		free(b1);
		free(b2);
		free(j);
		gk_ipc_free(m2);
		gk_ipc_free(m);
	}
	free(text);
	return 0;
}
