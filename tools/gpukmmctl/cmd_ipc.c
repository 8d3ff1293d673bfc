/* gpukmmctl ipc — the IPC harness: call any RPC of proto/ with a JSON request,
 * subscribe to a bus and print events as JSON lines, publish one event.
 *
 *   gpukmmctl ipc call ADDR SERVICE.METHOD ['JSON'] [--timeout-ms T]
 *   gpukmmctl ipc sub  ADDR [TOPIC] [--count N] [--timeout-ms T] [--type MSG]
 *   gpukmmctl ipc pub  ADDR TOPIC 'JSON' [--type MSG] [--wait-ms T]
 *
 * Exit codes: 0 ok; 1 the call failed (code name and message on stderr) or the
 * expected events did not come; 2 usage, unknown service/method/type, bad JSON. */
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "gpukmm/ipc.h"
#include "gpukmm/svc.h"

#define LINGER_MS 200

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpukmmctl ipc call ADDR SERVICE.METHOD ['JSON'] [--timeout-ms T]\n"
		"       gpukmmctl ipc sub  ADDR [TOPIC] [--count N] [--timeout-ms T] [--type MSG]\n"
		"       gpukmmctl ipc pub  ADDR TOPIC 'JSON' [--type MSG] [--wait-ms T]\n"
		"\n"
		"ADDR is an nng URL (ipc:///run/gpukmm/echo.sock, tcp://127.0.0.1:5555).\n"
		"SERVICE.METHOD as in proto/: gpukmm.Echo.Echo or Echo.Echo. JSON uses the proto\n"
		"field names; 64-bit integers as strings, bytes as base64, enums by name.\n"
		"call prints the reply as JSON; exit 1 with CODE: message on stderr when it fails.\n"
		"sub prints one JSON line per event: {\"topic\":..,\"seq\":..,\"event\":{..}};\n"
		"gaps go to stderr. TOPIC empty or absent = every topic. MSG defaults to gpukmm.Event.\n"
		"pub listens on ADDR, waits (--wait-ms, default 2000) for a subscriber, publishes\n"
		"and exits 1 if nobody was there to receive it.\n");
}

static const ProtobufCMessageDescriptor *find_type(const char *name)
{
	const ProtobufCMessageDescriptor *d = gk_pb_find_message(name);
	if (!d && !strchr(name, '.')) {
		char full[256];
		snprintf(full, sizeof(full), "gpukmm.%s", name);
		d = gk_pb_find_message(full);
	}
	return d;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

enum { OPT_TIMEOUT = 256, OPT_COUNT, OPT_TYPE, OPT_WAIT, OPT_HELP };
static const struct option opts[] = {
	{ "timeout-ms", 1, NULL, OPT_TIMEOUT }, { "count", 1, NULL, OPT_COUNT },
	{ "type", 1, NULL, OPT_TYPE },          { "wait-ms", 1, NULL, OPT_WAIT },
	{ "help", 0, NULL, OPT_HELP },          { NULL, 0, NULL, 0 },
};

typedef struct args {
	long timeout_ms, count, wait_ms;
	const char *type;
	const char *pos[4];
	int npos;
} args;

/* Options may come before or after the positional arguments. */
static int parse_args(int argc, char **argv, args *a)
{
	*a = (args){ .timeout_ms = -1, .count = -1, .wait_ms = 2000, .type = "gpukmm.Event" };
	optind = 0;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "-h", opts, NULL)) != -1) {
		switch (c) {
		case 1:
			if (a->npos >= 4) {
				fprintf(stderr, "gpukmmctl ipc: too many arguments\n");
				return 2;
			}
			a->pos[a->npos++] = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_int(optarg, 1, 86400000, &a->timeout_ms)) goto bad;
			break;
		case OPT_COUNT:
			if (parse_int(optarg, 1, 1000000000, &a->count)) goto bad;
			break;
		case OPT_WAIT:
			if (parse_int(optarg, 0, 86400000, &a->wait_ms)) goto bad;
			break;
		case OPT_TYPE:
			a->type = optarg;
			break;
		case 'h':
		case OPT_HELP:
			usage(stdout);
			exit(0);
		default:
			fprintf(stderr, "gpukmmctl ipc: unknown option '%s'\n", argv[optind - 1]);
			return 2;
		}
	}
	return 0;
bad:
	fprintf(stderr, "gpukmmctl ipc: bad value '%s' for %s\n", optarg, argv[optind - 1]);
	return 2;
}

static int do_call(const args *a)
{
	if (a->npos < 3 || a->npos > 4) {
		usage(stderr);
		return 2;
	}
	const char *addr = a->pos[1], *sm = a->pos[2], *json = a->npos == 4 ? a->pos[3] : "{}";
	const char *dot = strrchr(sm, '.');
	if (!dot || dot == sm || !dot[1]) {
		fprintf(stderr, "gpukmmctl ipc call: '%s' is not SERVICE.METHOD\n", sm);
		return 2;
	}
	char svc_name[256];
	snprintf(svc_name, sizeof(svc_name), "%.*s", (int)(dot - sm), sm);
	const ProtobufCServiceDescriptor *svc = gk_pb_find_service(svc_name);
	if (!svc && !strchr(svc_name, '.')) {
		char full[300];
		snprintf(full, sizeof(full), "gpukmm.%s", svc_name);
		svc = gk_pb_find_service(full);
	}
	if (!svc) {
		fprintf(stderr, "gpukmmctl ipc call: unknown service '%s'\n", svc_name);
		return 2;
	}
	const ProtobufCMethodDescriptor *md = protobuf_c_service_descriptor_get_method_by_name(svc, dot + 1);
	if (!md) {
		fprintf(stderr, "gpukmmctl ipc call: %s has no method '%s'\n", svc->name, dot + 1);
		return 2;
	}
	gk_err e;
	ProtobufCMessage *req;
	if (gk_pb_from_json(md->input, json, &req, &e) != 0) {
		fprintf(stderr, "gpukmmctl ipc call: bad %s JSON: %s\n", md->input->name, e.msg);
		return 2;
	}
	gk_ipc_client *c;
	if (gk_ipc_client_open(&c, addr, NULL, &e) != 0) {
		fprintf(stderr, "gpukmmctl ipc call: %s\n", e.msg);
		gk_ipc_free(req);
		return 2;
	}
	ProtobufCMessage *rep;
	int code = gk_ipc_call(c, svc, md->name, req, &rep, a->timeout_ms > 0 ? (int)a->timeout_ms : 10000, &e);
	gk_ipc_free(req);
	int rc = 0;
	if (code != GK_OK) {
		fprintf(stderr, "%s: %s\n", gk_code_name(code), e.msg);
		rc = 1;
	} else {
		char *s = gk_pb_to_json(rep);
		printf("%s\n", s ? s : "{}");
		free(s);
		gk_ipc_free(rep);
	}
	fflush(stdout);
	gk_exit_bound("gpukmmctl ipc call", "closing the connection", rc); /* as in cmd_status.c */
	gk_ipc_client_close(c);
	gk_ipc_fini();
	return rc;
}

typedef struct sub_state {
	long want, got;
} sub_state;

static void on_event(void *user, const char *topic, uint64_t seq, ProtobufCMessage *msg)
{
	sub_state *s = user;
	char *j = gk_pb_to_json(msg);
	char esc[2 * 64 + 1];
	size_t k = 0;
	for (const char *p = topic; *p && k + 2 < sizeof(esc); p++) {
		if (*p == '"' || *p == '\\')
			esc[k++] = '\\';
		esc[k++] = *p;
	}
	esc[k] = 0;
	printf("{\"topic\":\"%s\",\"seq\":%llu,\"event\":%s}\n", esc, (unsigned long long)seq, j ? j : "null");
	fflush(stdout);
	free(j);
	gk_ipc_free(msg);
	s->got++;
}

static void on_gap(void *user, const char *topic, uint64_t expected, uint64_t got)
{
	fprintf(stderr, "# gap on %s: expected %llu, got %llu\n", topic, (unsigned long long)expected,
		(unsigned long long)got);
}

static int do_sub(const args *a)
{
	if (a->npos < 2 || a->npos > 3) {
		usage(stderr);
		return 2;
	}
	const ProtobufCMessageDescriptor *d = find_type(a->type);
	if (!d) {
		fprintf(stderr, "gpukmmctl ipc sub: unknown message type '%s'\n", a->type);
		return 2;
	}
	sub_state st = { a->count, 0 };
	gk_err e;
	gk_ipc_sub *s;
	if (gk_ipc_sub_open(&s, a->pos[1], NULL, on_event, on_gap, &st, &e) != 0 ||
	    gk_ipc_sub_topic(s, a->npos == 3 ? a->pos[2] : "", d, &e) != 0) {
		fprintf(stderr, "gpukmmctl ipc sub: %s\n", e.msg);
		return 2;
	}
	int64_t end = a->timeout_ms > 0 ? gk_mono_ms() + a->timeout_ms : 0;
	struct pollfd p = { gk_ipc_sub_fd(s), POLLIN, 0 };
	while (st.want < 0 || st.got < st.want) {
		int wait = 1000; /* at least once a second: gk_ipc_sub_service */
		if (end) {
			int64_t left = end - gk_mono_ms();
			if (left <= 0)
				break;
			if (left < wait)
				wait = (int)left;
		}
		if (poll(&p, 1, wait) > 0)
			gk_ipc_sub_dispatch(s);
		gk_ipc_sub_service(s);
	}
	gk_ipc_sub_close(s);
	gk_ipc_fini();
	if (st.want > 0 && st.got < st.want) {
		fprintf(stderr, "gpukmmctl ipc sub: got %ld of %ld events before the timeout\n", st.got, st.want);
		return 1;
	}
	return 0;
}

static int do_pub(const args *a)
{
	if (a->npos != 4) {
		usage(stderr);
		return 2;
	}
	const ProtobufCMessageDescriptor *d = find_type(a->type);
	if (!d) {
		fprintf(stderr, "gpukmmctl ipc pub: unknown message type '%s'\n", a->type);
		return 2;
	}
	gk_err e;
	ProtobufCMessage *m;
	if (gk_pb_from_json(d, a->pos[3], &m, &e) != 0) {
		fprintf(stderr, "gpukmmctl ipc pub: bad %s JSON: %s\n", d->name, e.msg);
		return 2;
	}
	gk_ipc_pub *p;
	if (gk_ipc_pub_open(&p, a->pos[1], NULL, &e) != 0) {
		fprintf(stderr, "gpukmmctl ipc pub: %s\n", e.msg);
		gk_ipc_free(m);
		return 2;
	}
	/* no event API for "a subscriber connected": poll the count, 10 ms steps */
	int64_t end = gk_mono_ms() + a->wait_ms;
	while (gk_ipc_pub_peers(p) == 0 && gk_mono_ms() < end)
		poll(NULL, 0, 10);
	int peers = gk_ipc_pub_peers(p);
	uint64_t seq = gk_ipc_pub_send(p, a->pos[2], m);
	gk_ipc_free(m);
	/* let nng hand the message to the connections before closing the socket */
	poll(NULL, 0, LINGER_MS);
	gk_ipc_pub_close(p);
	gk_ipc_fini();
	if (!seq) {
		fprintf(stderr, "gpukmmctl ipc pub: topic '%s' refused\n", a->pos[2]);
		return 2;
	}
	if (!peers) {
		fprintf(stderr, "gpukmmctl ipc pub: no subscriber connected within %ld ms\n", a->wait_ms);
		return 1;
	}
	return 0;
}

int gkctl_ipc(int argc, char **argv)
{
	args a;
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc;
	if (a.npos < 1) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(a.pos[0], "call"))
		return do_call(&a);
	if (!strcmp(a.pos[0], "sub"))
		return do_sub(&a);
	if (!strcmp(a.pos[0], "pub"))
		return do_pub(&a);
	fprintf(stderr, "gpukmmctl ipc: unknown action '%s'\n", a.pos[0]);
	usage(stderr);
	return 2;
}
