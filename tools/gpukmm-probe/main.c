/* gpukmm-probe — `gpukmmctl probe` as a program of its own: the same command
 * (tools/gpukmmctl/cmd_probe.c), linked without the cluster client (libcurl,
 * OpenSSL, RE2 and their dependencies). Starting gpukmmctl loads and relocates
 * ~50 shared libraries before the probe begins; this program loads the few the
 * probe uses (libpci, libkmod, protobuf-c, cJSON), so on a node it costs what
 * `lspci -k` + `modinfo` cost. */
#include <stdio.h>
#include <string.h>

#include "gpukmm/log.h"
#include "gpukmm/version.h"

int gkctl_probe(int argc, char **argv);

int main(int argc, char **argv)
{
	gk_log_init_env("gpukmm-probe");
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("gpukmm-probe %s\n", gk_version);
		return 0;
	}
	argv[0] = "gpukmm-probe";
	return gkctl_probe(argc, argv);
}
