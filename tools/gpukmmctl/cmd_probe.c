/* gpukmmctl probe — the node report without any cluster: like `lspci -k` +
 * `modinfo` for the GPU stack, or the NodeReport as JSON. Also the whole of
 * the `gpukmm-probe` program (tools/gpukmm-probe), which calls this with
 * argv[0] "gpukmm-probe". */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "gpukmm/probe.h"

int gkctl_probe(int argc, char **argv);

/* the name in messages: "gpukmmctl probe" or "gpukmm-probe" */
static const char *prog = "gpukmmctl probe";

static void usage(FILE *f)
{
	fprintf(f, "usage: %s [--root DIR] [--module NAME] [--pci-dump FILE] [--kver VER]\n"
		   "       %*s [--node-name NAME] [--json [--annotation]]\n"
		   "  --root DIR       read sysfs/procfs/lib/modules below DIR (default /)\n"
		   "  --module NAME    the GPU kernel module to report on (default xe)\n"
		   "  --pci-dump FILE  read PCI devices from an `lspci -x` dump instead of sysfs\n"
		   "  --kver VER       kernel version to look up in lib/modules (default: the running one)\n"
		   "  --node-name NAME put NAME into the report (default $NODE_NAME)\n"
		   "  --json           print the report as JSON (apiVersion gpukmm.io/v1alpha1, kind\n"
		   "                   NodeReport; schema/node-report.v1alpha1.json in the source tree)\n"
		   "  --annotation     with --json: as the Node annotation gpukmm.io/node-report holds it\n"
		   "                   (one line, summarized to fit its 16 KiB budget; why on stderr)\n"
		   "Exit: 0 report printed (problems are part of it), 2 usage error or unusable root.\n", prog, (int)strlen(prog), "");
}

static const char *tri(Gpukmm__TriState t, const char *yes, const char *no)
{
	return t == GPUKMM__TRI_STATE__TRI_YES ? yes : t == GPUKMM__TRI_STATE__TRI_NO ? no : "unknown";
}

static const char *source_text(Gpukmm__ModuleSource s)
{
	switch (s) {
	case GPUKMM__MODULE_SOURCE__SOURCE_NONE: return "not loaded";
	case GPUKMM__MODULE_SOURCE__SOURCE_IN_TREE: return "loaded, in-tree";
	case GPUKMM__MODULE_SOURCE__SOURCE_OOT: return "loaded, out-of-tree";
	case GPUKMM__MODULE_SOURCE__SOURCE_BUILTIN: return "built into the kernel";
	default: return "unknown";
	}
}

static void print_gpu(FILE *o, const Gpukmm__PciGpu *g, int dump)
{
	if (g->is_vf) {
		fprintf(o, "  %s  VF of %s [%04x:%04x], driver: %s\n", g->address, g->physfn ? g->physfn : "?",
			g->vendor_id, g->device_id, g->driver ? g->driver : "none");
		return;
	}
	fprintf(o, "%s %s [%04x]: Intel Corporation %s [%04x:%04x]\n", g->address,
		(g->class_code >> 8) == 0x0300 ? "VGA compatible controller" : "Display controller", g->class_code >> 8,
		g->product_name ? g->product_name : "unknown device", g->vendor_id, g->device_id);
	if (g->has_subsystem_vendor_id)
		fprintf(o, "\tSubsystem: [%04x:%04x]\n", g->subsystem_vendor_id, g->subsystem_device_id);
	fprintf(o, "\tKernel driver in use: %s\n", g->driver ? g->driver : dump ? "unknown (PCI dump)" : "none");
	if (g->has_numa_node)
		fprintf(o, "\tNUMA node: %d\n", g->numa_node);
	if (g->has_sriov_totalvfs)
		fprintf(o, "\tSR-IOV: %u of %u VFs enabled\n", g->has_sriov_numvfs ? g->sriov_numvfs : 0,
			g->sriov_totalvfs);
}

static void print_module(FILE *o, const Gpukmm__KernelModuleInfo *m, const char *indent)
{
	const char *sub = *indent ? "    " : "\t";
	fprintf(o, "%s%s: %s", indent, m->name, source_text(m->source));
	if (m->taint)
		fprintf(o, " (taint %s)", m->taint);
	fprintf(o, "\n");
	if (m->version || m->srcversion)
		fprintf(o, "%sversion: %s, srcversion: %s\n", sub, m->version ? m->version : "-",
			m->srcversion ? m->srcversion : "-");
	if (m->loaded) {
		fprintf(o, "%srefcount: ", sub);
		if (m->has_refcount)
			fprintf(o, "%d", m->refcount);
		else
			fprintf(o, "unknown");
		fprintf(o, ", holders: ");
		for (size_t i = 0; i < m->n_holders; i++)
			fprintf(o, "%s%s", i ? ", " : "", m->holders[i]);
		fprintf(o, "%s\n", m->n_holders ? "" : "none");
	}
	if (m->ko_path)
		fprintf(o, "%smodprobe would load: %s (version %s, %s%s%s%s)\n", sub, m->ko_path,
			m->ko_version ? m->ko_version : "-", m->ko_signer ? "signed by " : "unsigned",
			m->ko_signer ? m->ko_signer : "", m->ko_sig_hashalgo ? ", " : "",
			m->ko_sig_hashalgo ? m->ko_sig_hashalgo : "");
	if (m->in_tree_ko_exists)
		fprintf(o, "%sin-tree .ko: %s (srcversion %s, %s%s)\n", sub,
			m->in_tree_ko_path ? m->in_tree_ko_path : "?",
			m->in_tree_srcversion ? m->in_tree_srcversion : "-", m->signer ? "signed by " : "unsigned",
			m->signer ? m->signer : "");
	else
		fprintf(o, "%sin-tree .ko: none\n", sub);
}

static void print_human(FILE *o, const Gpukmm__NodeReport *r)
{
	if (r->node_name)
		fprintf(o, "Node: %s\n", r->node_name);
	fprintf(o, "Kernel: %s, loadable modules: %s\n", r->kernel_version ? r->kernel_version : "unknown",
		r->modules_supported ? "supported" : "not supported (no /proc/modules)");
	fprintf(o, "Secure Boot: %s, lockdown: %s\n", tri(r->secure_boot, "on", "off"),
		r->lockdown ? r->lockdown : "unknown");
	size_t vfs = 0;
	int dump = r->pci_source && !strcmp(r->pci_source, "dump");
	for (size_t i = 0; i < r->n_gpus; i++)
		vfs += r->gpus[i]->is_vf;
	if (r->n_gpus == 0)
		fprintf(o, "\nIntel GPUs: none (no Intel display-class PCI device)\n");
	else
		fprintf(o, "\nIntel GPUs: %zu physical, %zu virtual functions\n", r->n_gpus - vfs, vfs);
	for (size_t i = 0; i < r->n_gpus; i++)
		if (!r->gpus[i]->is_vf)
			print_gpu(o, r->gpus[i], dump);
	if (vfs) {
		fprintf(o, "Virtual functions:\n");
		for (size_t i = 0; i < r->n_gpus; i++)
			if (r->gpus[i]->is_vf)
				print_gpu(o, r->gpus[i], dump);
	}
	fprintf(o, "\nModule ");
	if (r->module)
		print_module(o, r->module, "");
	else
		fprintf(o, "%s: unknown\n", r->module_name ? r->module_name : "?");
	if (r->n_related) {
		fprintf(o, "Related modules:\n");
		for (size_t i = 0; i < r->n_related; i++)
			print_module(o, r->related[i], "  ");
	}
	fprintf(o, "\nCan unload %s now: %s", r->module_name ? r->module_name : "the module",
		tri(r->can_unload, "yes", "no"));
	if (r->unload_blocker)
		fprintf(o, " — %s", r->unload_blocker);
	fprintf(o, "\n");
	if (r->n_warnings) {
		fprintf(o, "\nWarnings:\n");
		for (size_t i = 0; i < r->n_warnings; i++)
			fprintf(o, "  - %s\n", r->warnings[i]);
	}
	if (r->n_problems) {
		fprintf(o, "\nProblems (inputs that could not be read):\n");
		for (size_t i = 0; i < r->n_problems; i++)
			fprintf(o, "  - %s\n", r->problems[i]);
	}
}

int gkctl_probe(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "root", required_argument, NULL, 'r' },   { "module", required_argument, NULL, 'm' },
		{ "pci-dump", required_argument, NULL, 'd' }, { "kver", required_argument, NULL, 'k' },
		{ "node-name", required_argument, NULL, 'n' }, { "json", no_argument, NULL, 'j' },
		{ "annotation", no_argument, NULL, 'a' },   { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	prog = strcmp(argv[0], "gpukmm-probe") == 0 ? "gpukmm-probe" : "gpukmmctl probe";
	gk_probe_opts o = { .node_name = getenv("NODE_NAME") };
	int json = 0, annotation = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hr:m:d:k:n:ja", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': o.root = optarg; break;
		case 'm': o.module = optarg; break;
		case 'd': o.pci_dump = optarg; break;
		case 'k': o.kver = optarg; break;
		case 'n': o.node_name = optarg; break;
		case 'j': json = 1; break;
		case 'a': annotation = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
		usage(stderr);
		return 2;
	}
	if (annotation && !json) {
		fprintf(stderr, "%s: --annotation goes with --json\n", prog);
		usage(stderr);
		return 2;
	}
	Gpukmm__NodeReport *r = NULL;
	gk_err err = { 0 };
	int rc = gk_probe_run(&o, &r, &err);
	if (rc) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return rc == GK_INVALID_ARGUMENT ? 2 : 1;
	}
	if (json) {
		gk_probe_json_info info;
		char *s = gk_probe_report_json(r, annotation ? GK_PROBE_JSON_BUDGET : 0, !annotation, &info);
		if (!s) {
			fprintf(stderr, "%s: out of memory\n", prog);
			gk_probe_report_free(r);
			return 1;
		}
		printf("%s\n", s);
		free(s);
		if (info.form != GK_PROBE_JSON_FULL)
			fprintf(stderr, "%s: summarized: %s\n", prog, info.reason);
	} else {
		print_human(stdout, r);
	}
	gk_probe_report_free(r);
	return fflush(stdout) == 0 ? 0 : 1;
}
