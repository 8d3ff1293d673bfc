/* lib/operands: NodeFeatureRule, and the Service + ServiceMonitor of the
 * XPU Manager's metrics (operands.md §8.1, §8.2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PCI_RULE(name, product, arch, devices)                                                  \
	"- name: " name "\n"                                                                    \
	"  labels: {gpu.intel.com/product: " product ", gpu.intel.com/architecture: " arch "}\n" \
	"  matchFeatures:\n"                                                                    \
	"  - feature: pci.device\n"                                                             \
	"    matchExpressions:\n"                                                               \
	"      vendor: {op: In, value: ['8086']}\n"                                             \
	"      class: {op: In, value: ['0300']}\n"                                              \
	"      device: {op: In, value: " devices "}\n"

#define MODULE(feature, mod) \
	"  - matchFeatures:\n" \
	"    - feature: " feature "\n" \
	"      matchExpressions: {" mod ": {op: Exists}}\n"

/* The rules: the Intel GPU label once an i915 or xe module is present, and the
 * product / architecture of the known Battlemage / Panther Lake devices. */
static const char NFD_RULES[] =
	"- name: intel.gpu\n"
	"  labels: {intel.feature.node.kubernetes.io/gpu: 'true'}\n"
	"  matchFeatures:\n"
	"  - feature: pci.device\n"
	"    matchExpressions:\n"
	"      vendor: {op: In, value: ['8086']}\n"
	"      class: {op: In, value: ['0300', '0380']}\n"
	"  matchAny:\n"
	MODULE("kernel.loadedmodule", "i915")
	MODULE("kernel.enabledmodule", "i915")
	MODULE("kernel.loadedmodule", "xe")
	MODULE("kernel.enabledmodule", "xe")
	PCI_RULE("intel.gpu.pro.b50", "Arc_Pro_B50", "Xe2", "[e212]")
	PCI_RULE("intel.gpu.pro.b60", "Arc_Pro_B60", "Xe2", "[e211]")
	PCI_RULE("intel.gpu.pro.b65", "Arc_Pro_B65", "Xe2", "[e222]")
	PCI_RULE("intel.gpu.pro.b70", "Arc_Pro_B70", "Xe2", "[e223]")
	PCI_RULE("intel.gpu.b370", "Arc_B370", "Xe3", "[b081, b083, b085, b087]")
	PCI_RULE("intel.gpu.b390", "Arc_B390", "Xe3", "[b080, b082, b084, b086]")
	PCI_RULE("intel.gpu.b570", "Arc_B570", "Xe2", "[e20c]")
	PCI_RULE("intel.gpu.b580", "Arc_B580", "Xe2", "[e20b]");

static void labels(gk_opr *r, gk_op_obj *o, const char *app)
{
	gk_opr_set_str(r, o->obj, "/metadata/labels/app", app);
	gk_opr_set_str(r, o->obj, "/metadata/labels/owner", r->cpn);
}

void gk_opr_misc(gk_opr *r)
{
	const Gpukmm__ClusterPolicySpec *s = r->spec;
	bool nfd = s->has_use_nfd_labeling && s->use_nfd_labeling;
	bool mon = s->has_resource_monitoring && s->resource_monitoring;
	bool prom = mon && s->has_prometheus_integration && s->prometheus_integration;
	if (nfd && r->o->nfd) {
		gk_op_obj *o = gk_opr_add(r, GK_OP_NFD, "nfd.k8s-sigs.io/v1alpha1", "NodeFeatureRule", "nodefeaturerules",
					  r->o->nfd_namespaced ? r->ns : NULL, "intel-gpu-devices", NULL);
		if (o) {
			labels(r, o, "nfd-gpu");
			gk_opr_set(r, o->obj, "/spec/rules", gk_opr_template(r, NFD_RULES));
			gk_opr_rule(r, o, GK_OP_EXACT, "/spec");
		}
	}
	if (prom && r->o->prometheus) {
		gk_op_obj *o = gk_opr_add(r, GK_OP_PROMETHEUS, "v1", "Service", "services", r->ns, "intel-xpumanager",
					  "spec: {ports: [{name: http, port: 8080, targetPort: http, protocol: TCP}],"
					  " selector: {app: intel-xpumanager}, sessionAffinity: None}");
		if (o) {
			labels(r, o, "intel-xpumanager");
			gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/ports");
			gk_opr_rule(r, o, GK_OP_EXACT, "/spec/selector");
		}
		o = gk_opr_add(r, GK_OP_PROMETHEUS, "monitoring.coreos.com/v1", "ServiceMonitor", "servicemonitors", r->ns,
			       "intel-xpumanager",
			       "spec:\n"
			       "  selector: {matchLabels: {app: intel-xpumanager}}\n"
			       "  namespaceSelector: {matchNames: ['']}\n"
			       "  endpoints: [{port: http, path: /metrics, interval: 5s}]\n");
		if (o) {
			labels(r, o, "intel-xpumanager");
			gk_opr_set_str(r, o->obj, "/spec/namespaceSelector/matchNames/0", r->ns);
			gk_opr_rule(r, o, GK_OP_SUBSET, "/spec");
		}
	}
}
