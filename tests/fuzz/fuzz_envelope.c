/* libFuzzer target: everything a server or subscriber does with untrusted
 * bytes — envelope / reply / bus framing, name checks, capped unpack of the
 * payload with the addressed method's input type (and with a type picked by
 * the input), then rendering the result as JSON. Built by tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/ipc/internal.h"
#include "../../lib/ipc/registry.h"

static size_t n_messages(void)
{
	size_t n = 0;
	while (gk_pb_all_messages[n])
		n++;
	return n;
}

static void unpack_render(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n)
{
	ProtobufCMessage *m = gk_unpack_capped(d, p, n, 1 << 20);
	if (!m)
		return;
	char *j = gk_pb_to_json(m);
	free(j);
	/* what we decoded must pack again */
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *b = malloc(len ? len : 1);
	if (b && protobuf_c_message_pack(m, b) != len)
		abort();
	free(b);
	gk_ipc_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gk_env_view env;
	if (gk_frame_env_parse(data, size, &env) == 0) {
		char svc[GK_IPC_NAME_MAX], method[GK_IPC_NAME_MAX];
		if (gk_frame_name(env.service, svc) == 0 && gk_frame_name(env.method, method) == 0) {
			const ProtobufCServiceDescriptor *sd = gk_pb_find_service(svc);
			const ProtobufCMethodDescriptor *md =
				sd ? protobuf_c_service_descriptor_get_method_by_name(sd, method) : NULL;
			if (md)
				unpack_render(md->input, env.payload.p, env.payload.n);
			/* re-encoding what we parsed parses to the same values */
			uint8_t *b = malloc(gk_frame_env_size(svc, method, env.request_id, env.client_id,
							      env.deadline_ms, NULL) + 1);
			if (b) {
				size_t n = gk_frame_env_write(b, svc, method, env.request_id, env.client_id,
							      env.deadline_ms, NULL);
				gk_env_view again;
				if (gk_frame_env_parse(b, n, &again) != 0 || again.request_id != env.request_id ||
				    again.client_id != env.client_id || again.deadline_ms != env.deadline_ms)
					abort();
				free(b);
			}
		}
		if (size) /* the payload as any message type, chosen by the first byte */
			unpack_render(gk_pb_all_messages[data[0] % n_messages()], env.payload.p, env.payload.n);
	}
	gk_reply_view r;
	gk_frame_reply_parse(data, size, &r);
	gk_bus_view v;
	if (gk_bus_parse(data, size, &v) == 0 && v.payload.n > size)
		abort();
	return 0;
}
