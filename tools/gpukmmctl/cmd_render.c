/* gpukmmctl render FILE — print the KMM Module gpukmm would apply. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "gpukmm/kobj.h"
#include "gpukmm/operands.h"
#include "gpukmm/policy.h"
#include "policy_io.h"

#define UID_PLACEHOLDER "00000000-0000-0000-0000-000000000000"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpukmmctl render [--namespace NS] [--service-account SA] FILE\n"
		"       gpukmmctl render --all [--namespace NS] [CLUSTER OPTIONS] FILE\n"
		"\n"
		"Prints, as JSON, the KMM Module (kmm.sigs.x-k8s.io/v1beta1) that gpukmm would\n"
		"create for each ClusterPolicy in FILE (YAML or JSON, '-' = stdin), after the\n"
		"same defaulting and validation as the admission webhook.\n"
		"With --all: every object the policy produces (the Module, then the device\n"
		"plugin / DRA driver / XPU Manager and what they need, in creation order), as\n"
		"one JSON List (kind: List, items: [...]) per policy, and its errors on stderr.\n"
		"\n"
		"  --namespace NS         operator namespace of the Module (default %s)\n"
		"  --service-account SA   module-loader ServiceAccount (default %s)\n"
		"  --all                  every object, not only the Module\n"
		"cluster options (what gpukmm discovers at run time; default: KMM, DRA v1, NFD\n"
		"and ServiceMonitor served, not OpenShift):\n"
		"  --operator-secret S    the $OPERATOR_SECRET pull secret (first in imagePullSecrets)\n"
		"  --dra-version V        newest served resource.k8s.io version (v1, v1beta2,\n"
		"                         v1beta1, v1alpha3; 'none' = DRA not served)\n"
		"  --no-kmm               KMM not installed (no ready-label gate)\n"
		"  --openshift            OpenShift: the SCC plumbing per operand\n"
		"  --no-nfd, --nfd-namespaced, --no-prometheus   the NFD / ServiceMonitor CRDs\n"
		"\n"
		"The owner reference's uid is the policy's metadata.uid; a file has none, so the\n"
		"placeholder %s is printed instead. The output is for review:\n"
		"gpukmm creates the Module itself (do not apply it by hand).\n"
		"A policy without spec.kernelModule renders no Module (a note on stderr).\n"
		"An override ConfigMap (spec.xpu.configMapOverride) cannot be read offline: --all\n"
		"reports it as missing.\n"
		"Exit status: 0 rendered, 1 invalid policy (violations on stderr), 2 unreadable input or usage.\n",
		GK_POLICY_DEFAULT_NAMESPACE, GK_POLICY_DEFAULT_SA, UID_PLACEHOLDER);
}

static int render_all(Gpukmm__ClusterPolicy *cp, const char *label, const gk_policy_opts *po,
		      const gk_op_opts *oo)
{
	cJSON *list = cJSON_CreateObject();
	cJSON *items = list ? cJSON_CreateArray() : NULL;
	if (!items || !cJSON_AddStringToObject(list, "apiVersion", "v1") ||
	    !cJSON_AddStringToObject(list, "kind", "List")) {
		cJSON_Delete(items);
		cJSON_Delete(list);
		return 2;
	}
	cJSON_AddItemToObject(list, "items", items);
	int rc = 0;
	gk_err e = { 0 };
	if (cp->spec->kernel_module && oo->kmm) {
		Gpukmm__Module *m = NULL;
		if (gk_policy_render_module(cp, po, &m, &e)) {
			fprintf(stderr, "%s: %s\n", label, e.msg);
			rc = 2;
		} else {
			cJSON *j = gk_policy_module_to_json(m);
			if (j)
				cJSON_AddItemToArray(items, j);
			else
				rc = 2;
			gk_kobj_free(m);
		}
	} else if (cp->spec->kernel_module) {
		fprintf(stderr, "%s: %s\n", label, GK_POLICY_MSG_KMM_NOT_INSTALLED);
	}
	gk_op_set s;
	if (gk_op_render(cp, oo, &s, &e)) {
		fprintf(stderr, "%s: %s\n", label, e.msg);
		cJSON_Delete(list);
		return 2;
	}
	for (size_t i = 0; i < s.n; i++) {
		cJSON_AddItemToArray(items, s.v[i].obj);
		s.v[i].obj = NULL;
	}
	for (size_t i = 0; i < s.n_errors; i++)
		fprintf(stderr, "%s: %s\n", label, s.errors[i]);
	gk_op_set_free(&s);
	char *out = cJSON_Print(list);
	if (out)
		printf("%s\n", out);
	else
		rc = 2;
	cJSON_free(out);
	cJSON_Delete(list);
	return rc;
}

static int render_one(const cJSON *doc, const char *label, const gk_policy_opts *po, const gk_op_opts *all)
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
	if (all) {
		if (!cp->metadata->uid && !(cp->metadata->uid = strdup(UID_PLACEHOLDER))) {
			rc = 2;
			goto out;
		}
		rc = render_all(cp, label, po, all);
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
		{ "all", no_argument, NULL, 'a' },
		{ "operator-secret", required_argument, NULL, 'o' },
		{ "dra-version", required_argument, NULL, 'd' },
		{ "no-kmm", no_argument, NULL, 'K' },
		{ "openshift", no_argument, NULL, 'O' },
		{ "no-nfd", no_argument, NULL, 'N' },
		{ "nfd-namespaced", no_argument, NULL, 'M' },
		{ "no-prometheus", no_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	gk_policy_opts po = { 0 };
	gk_op_opts oo = { .kmm = true, .dra_version = "v1", .nfd = true, .prometheus = true };
	bool all = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': po.namespace_ = optarg; break;
		case 's': po.service_account = optarg; break;
		case 'a': all = true; break;
		case 'o': oo.operator_secret = optarg; break;
		case 'd':
			if (strcmp(optarg, "none") && strcmp(optarg, "v1") && strcmp(optarg, "v1beta2") &&
			    strcmp(optarg, "v1beta1") && strcmp(optarg, "v1alpha3")) {
				fprintf(stderr, "gpukmmctl render: --dra-version: v1, v1beta2, v1beta1, v1alpha3 or none\n");
				return 2;
			}
			oo.dra_version = strcmp(optarg, "none") ? optarg : NULL;
			break;
		case 'K': oo.kmm = false; break;
		case 'O': oo.openshift = true; break;
		case 'N': oo.nfd = false; break;
		case 'M': oo.nfd_namespaced = true; break;
		case 'P': oo.prometheus = false; break;
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
		oo.namespace_ = po.namespace_;
		int rc = render_one(ps.cp[d], label, &po, all ? &oo : NULL);
		if (rc > worst)
			worst = rc;
	}
	gkctl_policies_free(&ps);
	fflush(stdout);
	return worst;
}
