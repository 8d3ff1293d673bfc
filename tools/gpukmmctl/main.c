/* gpukmmctl — the command-line tool: one binary, one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "gpukmm/log.h"
#include "gpukmm/version.h"

/* Subcommands, one line each (keep sorted). */
int gkctl_ipc(int argc, char **argv);
int gkctl_probe(int argc, char **argv);
int gkctl_status(int argc, char **argv);
int gkctl_uninstall(int argc, char **argv);

static const gkctl_cmd commands[] = {
	{ "images", "every image a ClusterPolicy makes the cluster pull, per node kernel (air-gap mirrors)", gkctl_images },
	{ "ipc", "call an RPC, subscribe to or publish on a bus (JSON)", gkctl_ipc },
	{ "probe", "node report: Intel GPUs, the GPU kernel module, Secure Boot, unload verdict", gkctl_probe },
	{ "render", "print the KMM Module (--all: every object) a ClusterPolicy file would produce", gkctl_render },
	{ "status", "the supervisor's service table (Control.List)", gkctl_status },
	{ "uninstall", "remove gpukmm from a cluster: the policies released under the guard first", gkctl_uninstall },
	{ "validate", "check ClusterPolicy files like the admission webhook does", gkctl_validate },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: gpukmmctl COMMAND [ARGS...]\n\ncommands:\n");
	for (const gkctl_cmd *c = commands; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fprintf(f, "\n`gpukmmctl COMMAND --help` describes each command; --version prints the version.\n");
}

int main(int argc, char **argv)
{
	gk_log_init_env("gpukmmctl");
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
		printf("gpukmmctl %s\n", gk_version);
		return 0;
	}
	for (const gkctl_cmd *c = commands; c->name; c++)
		if (strcmp(argv[1], c->name) == 0)
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "gpukmmctl: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
