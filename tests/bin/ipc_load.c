/* Test helper: N concurrent async calls of gpukmm.Echo.Add from one process.
 *   ipc_load URL N TAG
 * Every call carries text "TAG-i"; exits 0 only if every reply is OK and echoes
 * its own text, else prints what was wrong and exits 1. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "echo.pb-c.h"
#include "gpukmm/ipc.h"

typedef struct {
	char text[64];
	int done, code;
	int ok;
} call;

static void on_done(void *user, int code, ProtobufCMessage *reply, const char *msg)
{
	call *c = user;
	c->done = 1;
	c->code = code;
	if (code == 0) {
		const char *t = ((Gpukmm__EchoReply *)reply)->text;
		c->ok = t && strcmp(t, c->text) == 0;
	} else {
		fprintf(stderr, "ipc_load: %s: %s %s\n", c->text, gk_code_name(code), msg);
	}
	gk_ipc_free(reply);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int n = atoi(argv[2]);
	call *calls = calloc((size_t)n, sizeof(*calls));
	gk_ipc_client *c;
	gk_err e;
	gk_ipc_opts o = { .reconnect_min_ms = 10, .reconnect_max_ms = 100 };
	if (!calls || gk_ipc_client_open(&c, argv[1], &o, &e)) {
		fprintf(stderr, "ipc_load: open failed\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		Gpukmm__EchoRequest r = GPUKMM__ECHO_REQUEST__INIT;
		snprintf(calls[i].text, sizeof(calls[i].text), "%s-%d", argv[3], i);
		r.text = calls[i].text;
		if (gk_ipc_call_async(c, &gpukmm__echo__descriptor, "Add", &r.base, 20000, on_done, &calls[i], &e)) {
			fprintf(stderr, "ipc_load: %s\n", e.msg);
			return 1;
		}
	}
	int done = 0;
	struct pollfd p = { gk_ipc_client_fd(c), POLLIN, 0 };
	while (done < n) {
		if (poll(&p, 1, 30000) <= 0)
			break;
		gk_ipc_client_dispatch(c);
		done = 0;
		for (int i = 0; i < n; i++)
			done += calls[i].done;
	}
	int good = 0;
	for (int i = 0; i < n; i++)
		good += calls[i].done && calls[i].code == 0 && calls[i].ok;
	gk_ipc_client_close(c);
	gk_ipc_fini();
	free(calls);
	if (good != n) {
		fprintf(stderr, "ipc_load: %d of %d calls answered correctly\n", good, n);
		return 1;
	}
	return 0;
}
