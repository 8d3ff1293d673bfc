/* gpukmmctl images FILE [--nodes NODES.yaml | --kubeconfig K] — every image the
 * policy makes a cluster pull (lib/policy/images.c), for air-gapped mirrors. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "gpukmm/kobj.h"
#include "gpukmm/kube.h"
#include "gpukmm/policy.h"
#include "policy_io.h"

#define MAX_NODES 100000

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpukmmctl images [--nodes FILE | --kubeconfig FILE] [--namespace NS] [--json] POLICY-FILE\n"
		"\n"
		"Lists every image the ClusterPolicies in POLICY-FILE make the cluster pull, one per\n"
		"line, sorted and deduplicated: the operand images (device plugin, DRA driver, XPU\n"
		"Manager: the policy's or the default), and for each node the policy selects the\n"
		"module image of the kernel mapping KMM picks for the node's kernel, with KMM's\n"
		"variables (${KERNEL_FULL_VERSION}, ${KERNEL_VERSION}, ${KERNEL_XYZ}, ${KERNEL_X},\n"
		"${KERNEL_Y}, ${KERNEL_Z}, ${MOD_NAME}, ${MOD_NAMESPACE}) substituted as KMM does,\n"
		"plus the unsigned image KMM signs. Only kernels that have a mapping appear; the\n"
		"selected nodes that get no module image are listed on stderr.\n"
		"\n"
		"  --nodes FILE       the nodes: `kubectl get nodes -o yaml` output (a List), a\n"
		"                     Node, or several YAML/JSON documents ('-' = stdin)\n"
		"  --kubeconfig FILE  read the nodes from the cluster instead\n"
		"  --namespace NS     operator namespace, the Module's ${MOD_NAMESPACE} (default %s)\n"
		"  --json             {\"images\":[{image, roles, sources, kernels}],\n"
		"                     \"nodesWithoutImage\":[{node, kernel, reason}], \"notes\":[...]}\n"
		"\n"
		"Without nodes only the module images that do not depend on the kernel are listed.\n"
		"KMM's own images (worker, build, sign) come with the KMM installation.\n"
		"Exit status: 0 listed, 1 invalid policy or the nodes could not be read, 2 usage or\n"
		"unreadable input.\n",
		GK_POLICY_DEFAULT_NAMESPACE);
}

typedef struct nodes {
	Gpukmm__Node **v;
	size_t n, cap;
	int bad;
} nodes;

static void add_node(nodes *ns, const cJSON *obj, const char *where)
{
	if (ns->bad)
		return;
	if (ns->n >= MAX_NODES) {
		fprintf(stderr, "%s: more than %d nodes\n", where, MAX_NODES);
		ns->bad = 1;
		return;
	}
	if (ns->n == ns->cap) {
		size_t nc = ns->cap ? ns->cap * 2 : 64;
		Gpukmm__Node **nv = realloc(ns->v, nc * sizeof(*nv));
		if (!nv) {
			fprintf(stderr, "%s: out of memory\n", where);
			ns->bad = 1;
			return;
		}
		ns->v = nv;
		ns->cap = nc;
	}
	gk_err e = { 0 };
	if (gk_kobj_node_from_json(obj, &ns->v[ns->n], &e) != 0) {
		fprintf(stderr, "%s: not a Node: %s\n", where, e.msg);
		ns->bad = 1;
		return;
	}
	ns->n++;
}

static void on_item(void *user, const cJSON *item)
{
	add_node(user, item, "the API's node list");
}

static int nodes_from_file(const char *path, nodes *ns)
{
	gk_yamljson_docs docs;
	if (gkctl_load_docs(path, &docs))
		return 2;
	for (size_t d = 0; d < docs.n && !ns->bad; d++) {
		const cJSON *doc = docs.doc[d];
		if (cJSON_IsNull(doc))
			continue;
		const cJSON *kind = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "kind") : NULL;
		const char *k = cJSON_IsString(kind) ? kind->valuestring : "";
		if (!strcmp(k, "List") || !strcmp(k, "NodeList")) {
			const cJSON *it;
			cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "items"))
				add_node(ns, it, path);
		} else if (!strcmp(k, "Node")) {
			add_node(ns, doc, path);
		} else {
			fprintf(stderr, "%s (document %zu): skipped: kind %s is not Node or List\n", path, d + 1, *k ? k : "(none)");
		}
	}
	gk_yamljson_free(&docs);
	return ns->bad ? 1 : 0;
}

static int nodes_from_api(const char *kubeconfig, nodes *ns)
{
	gk_kube_config cfg = { 0 };
	gk_kube_client *cl = NULL;
	gk_err e = { 0 };
	gk_kube_opts ko = { .user_agent = "gpukmmctl" };
	gk_kube_ref r = { "", "v1", "nodes", NULL, NULL, NULL };
	int rc = gk_kube_config_load(&cfg, kubeconfig, &e);
	if (!rc)
		rc = gk_kube_client_new(&cl, &cfg, &ko, &e);
	if (!rc)
		rc = gk_kube_list(cl, &r, NULL, on_item, ns, NULL, 0, NULL, &e);
	gk_kube_client_free(cl);
	gk_kube_config_free(&cfg);
	if (rc) {
		fprintf(stderr, "listing nodes: %s\n", e.msg);
		return 1;
	}
	return ns->bad ? 1 : 0;
}

static const char *const role_names[] = { "operand", "module", "unsigned", "built", "signed" };

static int print_json(const gk_policy_images *l)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *a = o ? cJSON_AddArrayToObject(o, "images") : NULL;
	cJSON *u = o ? cJSON_AddArrayToObject(o, "nodesWithoutImage") : NULL;
	cJSON *n = o ? cJSON_AddArrayToObject(o, "notes") : NULL;
	bool ok = a && u && n;
	for (size_t i = 0; ok && i < l->n; i++) {
		const gk_policy_image *e = &l->v[i];
		cJSON *it = cJSON_CreateObject(), *roles;
		ok = it && cJSON_AddItemToArray(a, it) && cJSON_AddStringToObject(it, "image", e->image) &&
		     (roles = cJSON_AddArrayToObject(it, "roles"));
		for (size_t r = 0; ok && r < sizeof(role_names) / sizeof(role_names[0]); r++)
			if (e->roles & (1u << r))
				ok = cJSON_AddItemToArray(roles, cJSON_CreateString(role_names[r]));
		cJSON *src = ok ? cJSON_CreateStringArray((const char *const *)e->sources, (int)e->n_sources) : NULL;
		ok = ok && src && cJSON_AddItemToObject(it, "sources", src);
		if (ok && e->n_kernels) {
			cJSON *k = cJSON_CreateStringArray((const char *const *)e->kernels, (int)e->n_kernels);
			ok = k && cJSON_AddItemToObject(it, "kernels", k);
		}
	}
	for (size_t i = 0; ok && i < l->n_unmapped; i++) {
		cJSON *it = cJSON_CreateObject();
		ok = it && cJSON_AddItemToArray(u, it) && cJSON_AddStringToObject(it, "node", l->unmapped[i].node) &&
		     cJSON_AddStringToObject(it, "kernel", l->unmapped[i].kernel) &&
		     cJSON_AddStringToObject(it, "reason", l->unmapped[i].reason);
	}
	for (size_t i = 0; ok && i < l->n_notes; i++)
		ok = cJSON_AddItemToArray(n, cJSON_CreateString(l->notes[i]));
	char *s = ok ? cJSON_Print(o) : NULL;
	if (s)
		printf("%s\n", s);
	cJSON_free(s);
	cJSON_Delete(o);
	return s ? 0 : 2;
}

int gkctl_images(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nodes", required_argument, NULL, 'N' },
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	gk_policy_opts po = { 0 };
	const char *nodes_file = NULL, *kubeconfig = NULL;
	int json = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'N': nodes_file = optarg; break;
		case 'k': kubeconfig = optarg; break;
		case 'n': po.namespace_ = optarg; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || (nodes_file && kubeconfig)) {
		usage(stderr);
		return 2;
	}
	const char *path = argv[optind];
	gkctl_policies ps;
	if (gkctl_load_policies(path, &ps))
		return 2;
	nodes ns = { 0 };
	int rc = 0;
	if (ps.n == 0) {
		fprintf(stderr, "%s: no ClusterPolicy found\n", path);
		rc = 1;
	}
	if (!rc && nodes_file)
		rc = nodes_from_file(nodes_file, &ns);
	else if (!rc && kubeconfig)
		rc = nodes_from_api(kubeconfig, &ns);
	gk_policy_images l = { 0 };
	for (size_t d = 0; !rc && d < ps.n; d++) {
		char label[4200];
		gkctl_doc_label(label, sizeof(label), path, &ps, d);
		gk_policy_report r;
		Gpukmm__ClusterPolicy *cp = NULL;
		gk_policy_report_init(&r);
		gk_policy_validate_json(ps.cp[d], true, &po, &r, &cp);
		if (r.oom || !cp) {
			fprintf(stderr, "%s: out of memory\n", label);
			rc = 2;
		} else if (r.n) {
			for (size_t v = 0; v < r.n; v++)
				fprintf(stderr, "%s: %s\n", label, r.v[v].msg);
			rc = 1;
		} else if (gk_policy_images_add(&l, cp, &po, ns.v, ns.n, nodes_file || kubeconfig)) {
			fprintf(stderr, "%s: out of memory\n", label);
			rc = 2;
		}
		gk_policy_report_free(&r);
		gk_kobj_free(cp);
	}
	if (!rc) {
		for (size_t i = 0; i < l.n_unmapped; i++)
			fprintf(stderr, "node %s (kernel %s): no module image: %s\n", l.unmapped[i].node,
				*l.unmapped[i].kernel ? l.unmapped[i].kernel : "unknown", l.unmapped[i].reason);
		for (size_t i = 0; i < l.n_notes; i++)
			fprintf(stderr, "note: %s\n", l.notes[i]);
		if (json)
			rc = print_json(&l);
		else
			for (size_t i = 0; i < l.n; i++)
				printf("%s\n", l.v[i].image);
	}
	gk_policy_images_free(&l);
	for (size_t i = 0; i < ns.n; i++)
		gk_kobj_free(ns.v[i]);
	free(ns.v);
	gkctl_policies_free(&ps);
	fflush(stdout);
	return rc;
}
