/* gpukmm — the supervisor (work in progress: configuration only). */
#include <stdio.h>
#include <string.h>

#include "sup.h"

int main(int argc, char **argv)
{
	const char *profile = NULL, *config = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
			profile = argv[++i];
		else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			config = argv[++i];
	}
	gk_sup_conf c;
	gk_err err;
	int rc = config ? gk_sup_conf_load(&c, profile, config, &err) : gk_sup_conf_profile(&c, profile, &err);
	if (rc) {
		fprintf(stderr, "gpukmm: %s\n", err.msg);
		return 2;
	}
	gk_sup_conf_free(&c);
	return 0;
}
