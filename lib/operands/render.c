/* lib/operands: the whole set for one policy, and the catalogue of what a
 * policy may own (see operands.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static bool is(const char *a, const char *b)
{
	return a && strcmp(a, b) == 0;
}

int gk_op_render(const Gpukmm__ClusterPolicy *cp, const gk_op_opts *o, gk_op_set *s, gk_err *err)
{
	memset(s, 0, sizeof(*s));
	if (!cp || !cp->spec || !cp->metadata || !cp->metadata->name)
		return GK_OK;
	if (cp->metadata->deletion_timestamp && *cp->metadata->deletion_timestamp)
		return GK_OK;
	static const gk_op_opts none = { 0 };
	gk_opr r = { .cp = cp, .spec = cp->spec, .o = o ? o : &none, .cpn = cp->metadata->name, .s = s };
	r.ns = r.o->namespace_ && *r.o->namespace_ ? r.o->namespace_ : GK_POLICY_DEFAULT_NAMESPACE;
	const Gpukmm__ClusterPolicySpec *sp = cp->spec;
	bool dra_served = r.o->dra_version && *r.o->dra_version;
	if (is(sp->resource_registration, "dp"))
		s->wanted |= 1u << GK_OP_DP;
	if (sp->has_resource_monitoring && sp->resource_monitoring)
		s->wanted |= 1u << GK_OP_XPU;
	if (is(sp->resource_registration, "dra"))
		s->wanted |= 1u << GK_OP_DRA;
	if (sp->has_use_nfd_labeling && sp->use_nfd_labeling)
		s->wanted |= 1u << GK_OP_NFD;
	if (sp->has_resource_monitoring && sp->resource_monitoring && sp->has_prometheus_integration &&
	    sp->prometheus_integration)
		s->wanted |= 1u << GK_OP_PROMETHEUS;
	if (sp->has_enable_kueue && sp->enable_kueue)
		s->wanted |= 1u << GK_OP_KUEUE;
	/* upstream's order: device plugin, XPU Manager, DRA, misc */
	if (s->wanted & (1u << GK_OP_DP))
		gk_opr_dp(&r);
	if (!r.oom && (s->wanted & (1u << GK_OP_XPU)))
		gk_opr_xpu(&r);
	if (!r.oom && (s->wanted & (1u << GK_OP_DRA))) {
		if (dra_served)
			gk_opr_dra(&r);
		else
			gk_opr_error(&r, "%s", GK_POLICY_MSG_DRA_NOT_ENABLED);
	}
	if (!r.oom)
		gk_opr_misc(&r);
	if (!r.oom && (s->wanted & (1u << GK_OP_KUEUE)))
		gk_opr_kueue(&r);
	if (r.oom) {
		gk_op_set_free(s);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory rendering the operands");
	}
	return GK_OK;
}

/* ---- the catalogue ----------------------------------------------------------------- */

typedef struct cat {
	gk_op_ref *v;
	size_t n, cap;
	bool oom;
	const char *cp, *ns;
} cat;

static void put(cat *c, int comp, const char *av, const char *kind, const char *res, bool namespaced,
		const char *suffix_or_name, bool fixed, const char *upstream_app)
{
	if (c->oom)
		return;
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 32;
		gk_op_ref *nv = realloc(c->v, nc * sizeof(*nv));
		if (!nv) {
			c->oom = true;
			return;
		}
		c->v = nv;
		c->cap = nc;
	}
	gk_op_ref *r = &c->v[c->n++];
	memset(r, 0, sizeof(*r));
	r->component = comp;
	r->api_version = av;
	r->kind = kind;
	r->resource = res;
	r->upstream_app = upstream_app;
	if (namespaced)
		snprintf(r->ns, sizeof(r->ns), "%s", c->ns);
	if (fixed)
		snprintf(r->name, sizeof(r->name), "%s", suffix_or_name);
	else
		snprintf(r->name, sizeof(r->name), "%s%s", c->cp, suffix_or_name);
}

static void openshift(cat *c, int comp, const char *part, bool sa)
{
	char n[128];
	/* the pods first, then what they ran with */
	if (sa) {
		snprintf(n, sizeof(n), "-%s-sa", part);
		put(c, comp, "v1", "ServiceAccount", "serviceaccounts", true, n, false, NULL);
	}
	snprintf(n, sizeof(n), "-%s-scc-binding", part);
	put(c, comp, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", false, n, false, NULL);
	snprintf(n, sizeof(n), "-%s-scc-role", part);
	put(c, comp, "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false, n, false, NULL);
	snprintf(n, sizeof(n), "-%s-scc", part);
	put(c, comp, "security.openshift.io/v1", "SecurityContextConstraints", "securitycontextconstraints", false, n,
	    false, NULL);
}

int gk_op_catalogue(const char *cp, const gk_op_opts *o, gk_op_ref **out, size_t *n, gk_err *err)
{
	static const gk_op_opts none = { 0 };
	if (!o)
		o = &none;
	cat c = { .cp = cp, .ns = o->namespace_ && *o->namespace_ ? o->namespace_ : GK_POLICY_DEFAULT_NAMESPACE };
	*out = NULL;
	*n = 0;
	const char *dav = NULL;
	char davbuf[64];
	static const char *const AV[] = { "resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1",
					  "resource.k8s.io/v1alpha3" };
	if (o->dra_version && *o->dra_version) {
		snprintf(davbuf, sizeof(davbuf), "resource.k8s.io/%s", o->dra_version);
		for (size_t i = 0; i < 4; i++)
			if (strcmp(AV[i], davbuf) == 0)
				dav = AV[i];
	}
	/* device plugin and XPU Manager DaemonSets first (XPU Manager's monitor claim
	 * goes with its pods, before the DRA driver), then what they used */
	put(&c, GK_OP_DP, "apps/v1", "DaemonSet", "daemonsets", true, "-device-plugin", false, "intel-gpu-plugin");
	put(&c, GK_OP_XPU, "apps/v1", "DaemonSet", "daemonsets", true, "-xpu-manager", false, "intel-xpumanager");
	put(&c, GK_OP_XPU, "v1", "ConfigMap", "configmaps", true, "-xpumanager-otel-config", false, NULL);
	if (c.n && !c.oom)
		c.v[c.n - 1].upstream_ref = true;
	if (dav) {
		put(&c, GK_OP_XPU, dav, "ResourceClaimTemplate", "resourceclaimtemplates", true, "-monitor-claim", false,
		    NULL);
		if (c.n && !c.oom)
			c.v[c.n - 1].upstream_ref = true;
	}
	if (o->openshift) {
		openshift(&c, GK_OP_DP, "gpu-dp", true);
		openshift(&c, GK_OP_XPU, "xpu-manager", true);
	}
	if (dav) {
		put(&c, GK_OP_DRA, "apps/v1", "DaemonSet", "daemonsets", true, "-gpu-dra", false,
		    "intel-gpu-resource-driver-kubelet-plugin");
		put(&c, GK_OP_DRA, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding",
		    "validatingadmissionpolicybindings", false, "-gpu-dra", false, NULL);
		put(&c, GK_OP_DRA, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy",
		    "validatingadmissionpolicies", false, "-gpu-dra", false, NULL);
		put(&c, GK_OP_DRA, dav, "DeviceClass", "deviceclasses", false, "gpu-vfio.intel.com", true, NULL);
		put(&c, GK_OP_DRA, dav, "DeviceClass", "deviceclasses", false, "gpu.intel.com", true, NULL);
		put(&c, GK_OP_DRA, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", false,
		    "-gpu-dra", false, NULL);
		put(&c, GK_OP_DRA, "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false, "-gpu-dra", false,
		    NULL);
		put(&c, GK_OP_DRA, "v1", "ServiceAccount", "serviceaccounts", true, "-gpu-dra", false, NULL);
		if (o->openshift)
			openshift(&c, GK_OP_DRA, "gpu-dra", false);
	}
	if (o->nfd) {
		put(&c, GK_OP_NFD, "nfd.k8s-sigs.io/v1alpha1", "NodeFeatureRule", "nodefeaturerules", o->nfd_namespaced,
		    "intel-gpu-devices", true, "nfd-gpu");
	}
	if (o->prometheus) {
		put(&c, GK_OP_PROMETHEUS, "monitoring.coreos.com/v1", "ServiceMonitor", "servicemonitors", true,
		    "intel-xpumanager", true, "intel-xpumanager");
		put(&c, GK_OP_PROMETHEUS, "v1", "Service", "services", true, "intel-xpumanager", true,
		    "intel-xpumanager");
	}
	if (c.oom) {
		free(c.v);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	*out = c.v;
	*n = c.n;
	return GK_OK;
}
