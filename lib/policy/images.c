/* lib/policy: every image a ClusterPolicy makes a cluster pull — what an
 * air-gapped cluster must mirror before the rollout (gpukmmctl images).
 *
 * Operands: the device plugin, DRA driver and XPU Manager images of the
 * DaemonSets the policy deploys (the policy's image, else upstream's default).
 * Module images: per node the Module selects (its node selector; taints do not
 * matter: a cordoned node comes back), the kernel mapping KMM picks for the
 * node's kernel (first match, trailing "+" trimmed) and its containerImage (the
 * container-level one when the mapping has none) with KMM's variables
 * substituted for that kernel and the Module's name and namespace; with
 * signing, the unsignedImage KMM's sign job pulls (KERNEL_* variables only),
 * the containerImage then being pushed by KMM. A node whose kernel no mapping
 * matches, or which KMM cannot template, gets no image and is listed apart. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"

/* upstream's webhook defaults (used when the policy names no image) */
#ifdef GK_POLICY_DEFAULT_DP_IMAGE
#define DP_IMAGE GK_POLICY_DEFAULT_DP_IMAGE
#define DRA_IMAGE GK_POLICY_DEFAULT_DRA_IMAGE
#define XPU_IMAGE GK_POLICY_DEFAULT_XPU_IMAGE
#else
#define DP_IMAGE \
	"docker.io/intel/intel-gpu-plugin:0.36.0@sha256:2db679be62b52ac985169084ca711cab6e6c59fe543ab2ddee58163d6f8d29e0"
#define DRA_IMAGE                                                                                  \
	"ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0@sha256:" \
	"49f38fcbee4f98d748b537b1a728a12f39e56fd208c86dc3fa32ab2162c21197"
#define XPU_IMAGE \
	"ghcr.io/intel/xpumanager/xpumd:v2.0.0@sha256:bd6bad4f95274832ce6863c6f7744fc73a610903617d9def2932588138be0b85"
#endif

static int add_str(char ***v, size_t *n, const char *s)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*v)[i], s) == 0)
			return 0;
	char **nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return GK_RESOURCE_EXHAUSTED;
	*v = nv;
	if (!(nv[*n] = strdup(s)))
		return GK_RESOURCE_EXHAUSTED;
	(*n)++;
	return 0;
}

/* the entry of `image` (kept sorted), created when new */
static gk_policy_image *entry(gk_policy_images *l, const char *image)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(l->v[mid].image, image);
		if (c == 0)
			return &l->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		gk_policy_image *nv = realloc(l->v, nc * sizeof(*nv));
		if (!nv)
			return NULL;
		l->v = nv;
		l->cap = nc;
	}
	char *dup = strdup(image);
	if (!dup)
		return NULL;
	memmove(&l->v[lo + 1], &l->v[lo], (l->n - lo) * sizeof(*l->v));
	memset(&l->v[lo], 0, sizeof(*l->v));
	l->v[lo].image = dup;
	l->n++;
	return &l->v[lo];
}

static int add(gk_policy_images *l, const char *image, unsigned role, const char *source, const char *kernel)
{
	gk_policy_image *e = entry(l, image);
	if (!e)
		return GK_RESOURCE_EXHAUSTED;
	e->roles |= role;
	if (add_str(&e->sources, &e->n_sources, source) || (kernel && add_str(&e->kernels, &e->n_kernels, kernel)))
		return GK_RESOURCE_EXHAUSTED;
	return 0;
}

static int note(gk_policy_images *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int note(gk_policy_images *l, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return add_str(&l->notes, &l->n_notes, buf);
}

static int unmapped(gk_policy_images *l, const char *node, const char *kernel, const char *reason)
{
	for (size_t i = 0; i < l->n_unmapped; i++)
		if (!strcmp(l->unmapped[i].node, node) && !strcmp(l->unmapped[i].reason, reason))
			return 0;
	gk_policy_unmapped *nv = realloc(l->unmapped, (l->n_unmapped + 1) * sizeof(*nv));
	if (!nv)
		return GK_RESOURCE_EXHAUSTED;
	l->unmapped = nv;
	gk_policy_unmapped *u = &nv[l->n_unmapped];
	u->node = strdup(node);
	u->kernel = strdup(kernel);
	u->reason = strdup(reason);
	if (!u->node || !u->kernel || !u->reason) {
		free(u->node);
		free(u->kernel);
		free(u->reason);
		return GK_RESOURCE_EXHAUSTED;
	}
	l->n_unmapped++;
	return 0;
}

static int operands(gk_policy_images *l, const Gpukmm__ClusterPolicySpec *s)
{
	unsigned ds = gk_policy_daemonsets(s, true);
	int rc = 0;
	const char *img;
	if (!rc && (ds & GK_POLICY_DS_DEVICE_PLUGIN)) {
		img = s->dp && s->dp->plugin && *s->dp->plugin ? s->dp->plugin : DP_IMAGE;
		rc = add(l, img, GK_POLICY_IMAGE_OPERAND, "spec.dp.plugin", NULL);
	}
	if (!rc && (ds & GK_POLICY_DS_DRA)) {
		img = s->dra && s->dra->image && *s->dra->image ? s->dra->image : DRA_IMAGE;
		rc = add(l, img, GK_POLICY_IMAGE_OPERAND, "spec.dra.image", NULL);
	}
	if (!rc && (ds & GK_POLICY_DS_XPU_MANAGER)) {
		img = s->xpu && s->xpu->image && *s->xpu->image ? s->xpu->image : XPU_IMAGE;
		rc = add(l, img, GK_POLICY_IMAGE_OPERAND, "spec.xpu.image", NULL);
	}
	return rc;
}

/* The images of mapping i for one kernel (vars filled for it). */
static int mapping_images(gk_policy_images *l, const Gpukmm__KernelModuleSpec *km, size_t i,
			  const gk_policy_kmm_vars *v, const char *kernel, const char *node)
{
	const Gpukmm__KernelMapping *m = km->kernel_mappings[i];
	char src[128], msg[512];
	snprintf(src, sizeof(src), "spec.kernelModule.kernelMappings[%zu].containerImage", i);
	if (!m->container_image || !*m->container_image)
		return node ? unmapped(l, node, kernel, "its kernel mapping has no containerImage") : 0;
	if (!kernel && gk_policy_kmm_has_vars(m->container_image))
		return note(l, "kernelMappings[%zu]: the image depends on the node kernel: give the nodes (--nodes or "
			    "--kubeconfig)", i);
	char *img = gk_policy_kmm_expand(m->container_image, v, msg, sizeof(msg));
	if (!img)
		return node ? unmapped(l, node, kernel, msg) : 0;
	unsigned role = GK_POLICY_IMAGE_MODULE;
	bool sign = gk_policy_mapping_signed(km, i);
	if (m->build)
		role |= GK_POLICY_IMAGE_BUILT;
	if (sign)
		role |= GK_POLICY_IMAGE_SIGNED;
	int rc = add(l, img, role, src, kernel);
	free(img);
	const char *uimg = gk_policy_mapping_unsigned_image(km, i);
	if (!rc && uimg && !kernel && gk_policy_kmm_has_vars(uimg)) {
		rc = note(l, "kernelMappings[%zu]: the unsigned image depends on the node kernel: give the nodes "
			  "(--nodes or --kubeconfig)", i);
	} else if (!rc && uimg) {
		gk_policy_kmm_vars kv = *v;
		kv.mod_name = kv.mod_namespace = NULL; /* KMM substitutes KERNEL_* only there */
		char *u = gk_policy_kmm_expand(uimg, &kv, msg, sizeof(msg));
		if (u) {
			bool own = m->sign && m->sign->unsigned_image && *m->sign->unsigned_image;
			snprintf(src, sizeof(src), own ? "spec.kernelModule.kernelMappings[%zu].sign.unsignedImage"
						       : "spec.kernelModule.sign.unsignedImage", i);
			rc = add(l, u, GK_POLICY_IMAGE_UNSIGNED, src, kernel);
			free(u);
		}
	}
	if (!rc && m->build && m->build->dockerfile_config_map)
		rc = note(l, "kernelMappings[%zu] builds its image in-cluster: mirror the base images its Dockerfile "
			  "(ConfigMap %s) uses, and KMM's build image", i, m->build->dockerfile_config_map);
	if (!rc && sign)
		rc = note(l, "module images are signed in-cluster: mirror KMM's sign image too (the KMM operator's "
			  "RELATED_IMAGE_SIGN)");
	return rc;
}

static bool selected(const Gpukmm__Node *n, const gk_policy_selector *sel)
{
	const Gpukmm__ObjectMeta *md = n->metadata;
	for (size_t i = 0; i < sel->n; i++) {
		const char *v = md ? gk_kv_get(md->labels, md->n_labels, sel->kv[i]->key) : NULL;
		if (!v || strcmp(v, sel->kv[i]->value ? sel->kv[i]->value : "") != 0)
			return false;
	}
	return true;
}

int gk_policy_images_add(gk_policy_images *l, const Gpukmm__ClusterPolicy *cp, const gk_policy_opts *o,
			 Gpukmm__Node *const *nodes, size_t n_nodes, bool have_nodes)
{
	const Gpukmm__ClusterPolicySpec *s = cp ? cp->spec : NULL;
	if (!s)
		return 0;
	int rc = operands(l, s);
	const Gpukmm__KernelModuleSpec *km = s->kernel_module;
	if (rc || !km)
		return rc;
	const char *cp_name = cp->metadata && cp->metadata->name ? cp->metadata->name : "";
	char mod_name[GK_POLICY_KEY_MAX], msg[256];
	if (gk_policy_module_name(mod_name, sizeof(mod_name), cp_name))
		return GK_INVALID_ARGUMENT;
	gk_policy_kmm_vars v;
	if (!have_nodes) {
		/* no kernels known: the images that do not depend on one */
		gk_policy_kmm_vars_for_kernel("0.0.0", &v, msg, sizeof(msg));
		v.mod_name = mod_name;
		v.mod_namespace = o && o->namespace_ && *o->namespace_ ? o->namespace_ : GK_POLICY_DEFAULT_NAMESPACE;
		for (size_t i = 0; !rc && i < km->n_kernel_mappings; i++)
			rc = mapping_images(l, km, i, &v, NULL, NULL);
		return rc;
	}
	gk_policy_selector sel = { 0 };
	if ((rc = gk_policy_node_selector(s, NULL, &sel)))
		return rc;
	for (size_t k = 0; !rc && k < n_nodes; k++) {
		const Gpukmm__Node *n = nodes[k];
		if (!n || !selected(n, &sel))
			continue;
		const char *name = n->metadata && n->metadata->name ? n->metadata->name : "";
		const char *kernel = n->kernel_version ? n->kernel_version : "";
		int mi = gk_policy_kernel_mapping(km, kernel);
		if (mi < 0) {
			rc = unmapped(l, name, kernel, *kernel ? "no kernelMapping matches its kernel" : "no kernel version");
			continue;
		}
		if (gk_policy_kmm_vars_for_kernel(kernel, &v, msg, sizeof(msg))) {
			rc = unmapped(l, name, kernel, msg);
			continue;
		}
		v.mod_name = mod_name;
		v.mod_namespace = o && o->namespace_ && *o->namespace_ ? o->namespace_ : GK_POLICY_DEFAULT_NAMESPACE;
		char k_norm[sizeof(v.full)];
		snprintf(k_norm, sizeof(k_norm), "%s", v.full);
		rc = mapping_images(l, km, (size_t)mi, &v, k_norm, name);
	}
	gk_policy_selector_free(&sel);
	return rc;
}

void gk_policy_images_free(gk_policy_images *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].image);
		for (size_t j = 0; j < l->v[i].n_sources; j++)
			free(l->v[i].sources[j]);
		free(l->v[i].sources);
		for (size_t j = 0; j < l->v[i].n_kernels; j++)
			free(l->v[i].kernels[j]);
		free(l->v[i].kernels);
	}
	free(l->v);
	for (size_t i = 0; i < l->n_unmapped; i++) {
		free(l->unmapped[i].node);
		free(l->unmapped[i].kernel);
		free(l->unmapped[i].reason);
	}
	free(l->unmapped);
	for (size_t i = 0; i < l->n_notes; i++)
		free(l->notes[i]);
	free(l->notes);
	memset(l, 0, sizeof(*l));
}
