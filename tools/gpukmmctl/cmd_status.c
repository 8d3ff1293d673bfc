/* gpukmmctl status — ask the supervisor's Control.List and print the table. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.pb-c.h"
#include "ctl.h"
#include "gpukmm/ipc.h"
#include "gpukmm/svc.h"
#include "rpc.pb-c.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: gpukmmctl status [--control URL | --runtime-dir DIR] [--json] [--timeout-ms N]\n"
		   "\n"
		   "Prints the supervisor's services: state, pid, restarts, last exit, uptime.\n"
		   "The address defaults to $GPUKMM_CONTROL, then ipc://DIR/control.sock with DIR\n"
		   "from --runtime-dir, $GPUKMM_RUNTIME_DIR, $RUNTIME_DIRECTORY or /run/gpukmm.\n"
		   "Exit status: 0 all required services ready, 1 not ready or no answer, 2 usage.\n");
}

static void fmt_ms(char *buf, size_t cap, uint64_t ms)
{
	if (ms >= 86400000ULL)
		snprintf(buf, cap, "%llud%lluh", (unsigned long long)(ms / 86400000), (unsigned long long)(ms / 3600000 % 24));
	else if (ms >= 3600000ULL)
		snprintf(buf, cap, "%lluh%llum", (unsigned long long)(ms / 3600000), (unsigned long long)(ms / 60000 % 60));
	else if (ms >= 60000ULL)
		snprintf(buf, cap, "%llum%llus", (unsigned long long)(ms / 60000), (unsigned long long)(ms / 1000 % 60));
	else
		snprintf(buf, cap, "%.1fs", (double)ms / 1000.0);
}

int gkctl_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "control", required_argument, NULL, 'c' },
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *control = NULL, *dir = NULL;
	int json = 0, timeout = 3000, o;
	optind = 1;
	opterr = 0;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'c': control = optarg; break;
		case 'r': dir = optarg; break;
		case 'j': json = 1; break;
		case 't': timeout = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || timeout <= 0) {
		usage(stderr);
		return 2;
	}
	char url[4200];
	if (!control && !dir)
		control = getenv("GPUKMM_CONTROL");
	if (!control) {
		if (!dir)
			dir = getenv("GPUKMM_RUNTIME_DIR");
		if (!dir)
			dir = getenv("RUNTIME_DIRECTORY");
		if (!dir)
			dir = "/run/gpukmm";
		snprintf(url, sizeof(url), "ipc://%s/control.sock", dir);
		control = url;
	}
	gk_ipc_client *c = NULL;
	gk_err err;
	if (gk_ipc_client_open(&c, control, NULL, &err)) {
		fprintf(stderr, "gpukmmctl status: %s\n", err.msg);
		return 1;
	}
	Gpukmm__Empty e = GPUKMM__EMPTY__INIT;
	ProtobufCMessage *r = NULL;
	int rc = gk_ipc_call(c, &gpukmm__control__descriptor, "List", &e.base, &r, timeout, &err);
	if (rc) {
		fprintf(stderr, "gpukmmctl status: %s: %s\n", control, err.msg);
		rc = 1;
		goto out;
	}
	Gpukmm__ServiceTable *t = (Gpukmm__ServiceTable *)r;
	if (json) {
		char *s = gk_pb_to_json(r);
		if (s)
			printf("%s\n", s);
		free(s);
	} else {
		char up[32];
		fmt_ms(up, sizeof(up), t->uptime_ms);
		printf("supervisor: %s, up %s\n", t->ready ? "ready" : "NOT READY", up);
		printf("%-14s %-9s %-8s %-8s %-10s %-9s %s\n", "SERVICE", "STATE", "PID", "RESTARTS", "LAST EXIT",
		       "UPTIME", "NOTE");
		for (size_t i = 0; i < t->n_services; i++) {
			Gpukmm__ServiceInfo *s = t->services[i];
			char last[32] = "-", pid[16] = "-", note[64] = "";
			if (s->last_signal)
				snprintf(last, sizeof(last), "signal %d", s->last_signal);
			else if (s->last_exit_code >= 0)
				snprintf(last, sizeof(last), "code %d", s->last_exit_code);
			if (s->pid > 0)
				snprintf(pid, sizeof(pid), "%d", s->pid);
			fmt_ms(up, sizeof(up), s->uptime_ms);
			if (s->backoff_ms)
				snprintf(note, sizeof(note), "restart in %llu ms", (unsigned long long)s->backoff_ms);
			else if (!s->required)
				snprintf(note, sizeof(note), "optional");
			printf("%-14s %-9s %-8s %-8u %-10s %-9s %s\n", s->name, s->state, pid, s->restarts, last,
			       s->pid > 0 ? up : "-", note);
		}
	}
	rc = t->ready ? 0 : 1;
	gk_ipc_free(r);
out:
	fflush(stdout);
	/* the answer is out: a close hung in nng (a probe of a supervisor that is starting
	 * can leave a pipe in its handshake) must not hang the command */
	gk_exit_bound("gpukmmctl status", "closing the connection", rc);
	gk_ipc_client_close(c);
	gk_ipc_fini();
	return rc;
}
