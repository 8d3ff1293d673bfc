/* gpukmmctl validate FILE... — the admission webhook's checks, offline. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "policy_io.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpukmmctl validate [--namespace NS] FILE...\n"
		"\n"
		"Checks ClusterPolicy files (YAML or JSON, several documents allowed, '-' = stdin)\n"
		"with the same rules as gpukmm-webhook: the upstream webhook's rules and messages,\n"
		"the CRD schema (types, required fields, enums, unknown fields) and gpukmm's own\n"
		"(build needs containerImage, KMM's 41-character Module name+namespace limit, the\n"
		"63-character ready-label limit). Documents of other kinds are skipped.\n"
		"\n"
		"  --namespace NS  operator namespace the Module would live in (default %s)\n"
		"\n"
		"Prints 'FILE: ok' (then one 'FILE: default PATH = VALUE' line per default the\n"
		"mutating webhook would fill in: images, monitoringResource, moduleName) or one\n"
		"line per violation, each naming its field.\n"
		"Exit status: 0 all valid, 1 some violation, 2 unreadable input or usage error.\n",
		GK_POLICY_DEFAULT_NAMESPACE);
}

int gkctl_validate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "namespace", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	gk_policy_opts po = { 0 };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': po.namespace_ = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	int worst = 0;
	for (int i = optind; i < argc; i++) {
		const char *path = argv[i];
		gkctl_policies ps;
		int rc = gkctl_load_policies(path, &ps);
		if (rc) {
			worst = 2;
			continue;
		}
		if (ps.n == 0) {
			printf("%s: no ClusterPolicy found\n", path);
			if (worst < 1)
				worst = 1;
		}
		for (size_t d = 0; d < ps.n; d++) {
			char label[4200];
			gkctl_doc_label(label, sizeof(label), path, &ps, d);
			gk_policy_report r;
			gk_policy_report_init(&r);
			gk_policy_validate_json(ps.cp[d], true, &po, &r, NULL);
			for (size_t w = 0; w < r.n_warnings; w++)
				printf("%s: warning: %s\n", label, r.warnings[w]);
			if (r.oom) {
				fprintf(stderr, "%s: out of memory\n", label);
				worst = 2;
			} else if (r.n == 0) {
				printf("%s: ok\n", label);
				/* what the mutating webhook would fill in */
				cJSON *ops = gk_policy_default_patch(ps.cp[d]);
				const cJSON *op;
				cJSON_ArrayForEach(op, ops) {
					const cJSON *path = cJSON_GetObjectItemCaseSensitive(op, "path");
					char *v = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(op, "value"));
					if (cJSON_IsString(path) && v)
						printf("%s: default %s = %s\n", label, path->valuestring, v);
					cJSON_free(v);
				}
				cJSON_Delete(ops);
			} else {
				for (size_t v = 0; v < r.n; v++)
					printf("%s: %s\n", label, r.v[v].msg);
				if (worst < 1)
					worst = 1;
			}
			gk_policy_report_free(&r);
		}
		gkctl_policies_free(&ps);
	}
	fflush(stdout);
	return worst;
}
