/* gpukmmctl render FILE — print the KMM Module gpukmm would apply. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "policy_io.h"

#define UID_PLACEHOLDER "00000000-0000-0000-0000-000000000000"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpukmmctl render [--namespace NS] [--service-account SA] FILE\n"
		"\n"
		"Prints, as JSON, the KMM Module (kmm.sigs.x-k8s.io/v1beta1) that gpukmm would\n"
		"create for each ClusterPolicy in FILE (YAML or JSON, '-' = stdin), after the\n"
		"same defaulting and validation as the admission webhook.\n"
		"\n"
		"  --namespace NS         operator namespace of the Module (default %s)\n"
		"  --service-account SA   module-loader ServiceAccount (default %s)\n"
		"\n"
		"The owner reference's uid is the policy's metadata.uid; a file has none, so the\n"
		"placeholder %s is printed instead. The output is for review:\n"
		"gpukmm creates the Module itself (do not apply it by hand).\n"
		"A policy without spec.kernelModule renders no Module (a note on stderr).\n"
		"Exit status: 0 rendered, 1 invalid policy (violations on stderr), 2 unreadable input or usage.\n",
		GK_POLICY_DEFAULT_NAMESPACE, GK_POLICY_DEFAULT_SA, UID_PLACEHOLDER);
}

static int render_one(const cJSON *doc, const char *label, const gk_policy_opts *po)
{
	gk_policy_report r;
	Gpukmm__ClusterPolicy *cp = NULL;
	gk_policy_report_init(&r);
	gk_policy_validate_json(doc, true, po, &r, &cp);
	int rc = 0;
	if (r.oom || !cp) {
		fprintf(stderr, "%s: out of memory\n", label);
		rc = 2;
		goto out;
	}
	if (r.n) {
		for (size_t v = 0; v < r.n; v++)
			fprintf(stderr, "%s: %s\n", label, r.v[v].msg);
		rc = 1;
		goto out;
	}
	if (!cp->spec->kernel_module) {
		fprintf(stderr, "%s: ClusterPolicy %s has no spec.kernelModule: no Module (in-tree driver)\n", label,
			cp->metadata->name);
		goto out;
	}
	if (!cp->metadata->uid && !(cp->metadata->uid = strdup(UID_PLACEHOLDER))) {
		rc = 2;
		goto out;
	}
	Gpukmm__Module *m = NULL;
	gk_err e = { 0 };
	if (gk_policy_render_module(cp, po, &m, &e)) {
		fprintf(stderr, "%s: %s\n", label, e.msg);
		rc = 2;
		goto out;
	}
	cJSON *j = gk_policy_module_to_json(m);
	char *s = j ? cJSON_Print(j) : NULL;
	if (s)
		printf("%s\n", s);
	else
		rc = 2;
	cJSON_free(s);
	cJSON_Delete(j);
	gk_kobj_free(m);
out:
	gk_policy_report_free(&r);
	gk_kobj_free(cp);
	return rc;
}

int gkctl_render(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "namespace", required_argument, NULL, 'n' },
		{ "service-account", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	gk_policy_opts po = { 0 };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': po.namespace_ = optarg; break;
		case 's': po.service_account = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	const char *path = argv[optind];
	gkctl_policies ps;
	if (gkctl_load_policies(path, &ps))
		return 2;
	int worst = 0;
	if (ps.n == 0) {
		fprintf(stderr, "%s: no ClusterPolicy found\n", path);
		worst = 1;
	}
	for (size_t d = 0; d < ps.n; d++) {
		char label[4200];
		gkctl_doc_label(label, sizeof(label), path, &ps, d);
		int rc = render_one(ps.cp[d], label, &po);
		if (rc > worst)
			worst = rc;
	}
	gkctl_policies_free(&ps);
	fflush(stdout);
	return worst;
}
