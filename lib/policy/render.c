/* lib/policy: the KMM Module for a ClusterPolicy, as upstream §2 builds it
 * (moduleLoader only; devicePlugin/dra never set), plus gpukmm's additions
 * kernelModule.parameters (-> modprobe.parameters) and kernelModule.sign /
 * kernelMappings[].sign (-> container.sign / the mapping's sign, filesToSign
 * defaulted as lib/policy/sign.c says), with one deliberate change:
 *
 * inTreeModulesToRemove — what a cluster admin needs, and why:
 *  - KMM's loader runs ONE `modprobe -rv a b c` over the effective list, in list
 *    order, before it loads the out-of-tree module (KMM notes §3.7). The
 *    in-tree module of the same name as the one we load (moduleName, `xe`)
 *    must be in it: while in-tree xe is loaded, `modprobe xe` from the image
 *    is a silent no-op and the node keeps the in-tree driver. Removing
 *    "the module we load" here removes its in-tree copy, never the OoT one
 *    (removal runs before the load; the unloader never reloads in-tree).
 *  - The effective list of a kernel mapping is the mapping's own list when it
 *    has one, else the container's (KMM replaces, it does not merge). So the
 *    container level carries [moduleName] for mappings without a list, and a
 *    mapping's own list must name moduleName again (as upstream does).
 *  - Order: modprobe -r refuses to remove a module that is still in use, so
 *    in-tree modules that depend on moduleName must come BEFORE it (KMM
 *    issue #458, "list dependants first"). Upstream prepends moduleName,
 *    which breaks exactly that case; we keep the admin's order and append
 *    moduleName when it is missing: dedupe(list + [moduleName]). An admin who
 *    lists moduleName explicitly chooses its position.
 *  - Both levels set is what KMM expects of a list per mapping (only the
 *    deprecated singular field may not be mixed with the list): we never set
 *    inTreeModuleToRemove (singular). */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"

/* Does one of the policy's tolerations tolerate the cordon's taint
 * (node.kubernetes.io/unschedulable:NoSchedule, no value) already? */
static bool cordon_tolerated(const Gpukmm__ClusterPolicySpec *s)
{
	for (size_t i = 0; i < s->n_tolerations; i++) {
		const Gpukmm__Toleration *t = s->tolerations[i];
		bool exists = t->operator_ && !strcmp(t->operator_, "Exists");
		bool key = !t->key || !*t->key ? exists : !strcmp(t->key, GK_POLICY_CORDON_TAINT);
		bool value = exists || !t->value || !*t->value;
		bool effect = !t->effect || !*t->effect || !strcmp(t->effect, "NoSchedule");
		if (key && value && effect)
			return true;
	}
	return false;
}

typedef struct rctx {
	bool oom;
} rctx;

static char *dup(rctx *c, const char *s)
{
	char *d = strdup(s ? s : "");
	if (!d)
		c->oom = true;
	return d;
}

static void *zalloc(rctx *c, size_t n, size_t sz)
{
	if (n == 0)
		return NULL;
	void *p = calloc(n, sz);
	if (!p)
		c->oom = true;
	return p;
}

#define NEW(c, ptr, init) do { \
	(ptr) = malloc(sizeof(*(ptr))); \
	if (!(ptr)) { (c)->oom = true; return; } \
	init(ptr); \
} while (0)

static void copy_strings(rctx *c, char **src, size_t n, char ***dst, size_t *n_dst)
{
	if (!n || !(*dst = zalloc(c, n, sizeof(char *))))
		return;
	for (size_t i = 0; i < n; i++) {
		if (!((*dst)[i] = dup(c, src[i])))
			return;
		(*n_dst)++;
	}
}

static void copy_tls(rctx *c, const Gpukmm__RegistryTLS *src, Gpukmm__RegistryTLS **dst)
{
	NEW(c, *dst, gpukmm__registry_tls__init);
	/* upstream copies both booleans (Go has no absent bool); only true ones matter */
	if (src && src->has_insecure && src->insecure) {
		(*dst)->has_insecure = 1;
		(*dst)->insecure = 1;
	}
	if (src && src->has_insecure_skip_tls_verify && src->insecure_skip_tls_verify) {
		(*dst)->has_insecure_skip_tls_verify = 1;
		(*dst)->insecure_skip_tls_verify = 1;
	}
}

static void copy_selector(rctx *c, const gk_policy_selector *sel, Gpukmm__KeyValue ***dst, size_t *n_dst)
{
	if (!sel->n || !(*dst = zalloc(c, sel->n, sizeof(**dst))))
		return;
	for (size_t i = 0; i < sel->n; i++) {
		Gpukmm__KeyValue *kv = malloc(sizeof(*kv));
		if (!kv) {
			c->oom = true;
			return;
		}
		gpukmm__key_value__init(kv);
		(*dst)[(*n_dst)++] = kv;
		kv->key = dup(c, sel->kv[i]->key);
		kv->value = dup(c, sel->kv[i]->value);
	}
}

/* KMM's Sign as given; filesToSign = [default_file] when the level lists none
 * and default_file is set (see lib/policy/sign.c for the default). */
static void copy_sign(rctx *c, const Gpukmm__Sign *src, const char *default_file, Gpukmm__Sign **dst)
{
	NEW(c, *dst, gpukmm__sign__init);
	Gpukmm__Sign *s = *dst;
	s->key_secret = dup(c, src->key_secret);
	s->cert_secret = dup(c, src->cert_secret);
	if (src->unsigned_image && *src->unsigned_image)
		s->unsigned_image = dup(c, src->unsigned_image);
	if (src->unsigned_image_registry_tls)
		copy_tls(c, src->unsigned_image_registry_tls, &s->unsigned_image_registry_tls);
	if (src->n_files_to_sign)
		copy_strings(c, src->files_to_sign, src->n_files_to_sign, &s->files_to_sign, &s->n_files_to_sign);
	else if (default_file)
		copy_strings(c, (char **)&default_file, 1, &s->files_to_sign, &s->n_files_to_sign);
}

static void render_mapping(rctx *c, const Gpukmm__KernelModuleSpec *km, const Gpukmm__KernelMapping *src,
			   const gk_policy_selector *sel, Gpukmm__ModuleKernelMapping *m)
{
	m->regexp = dup(c, src->regexp);
	m->container_image = dup(c, src->container_image);
	if (src->n_in_tree_modules_to_remove) {
		/* dedupe(mapping list + [moduleName]), first occurrence wins: see
		 * "inTreeModulesToRemove" at the top of this file */
		size_t cap = src->n_in_tree_modules_to_remove + 1;
		if (!(m->in_tree_modules_to_remove = zalloc(c, cap, sizeof(char *))))
			return;
		m->has_has_in_tree_modules_to_remove = 1;
		m->has_in_tree_modules_to_remove = 1;
		for (size_t i = 0; i < cap; i++) {
			const char *v = i + 1 == cap ? km->module_name : src->in_tree_modules_to_remove[i];
			bool seen = false;
			for (size_t j = 0; j < m->n_in_tree_modules_to_remove && !seen; j++)
				seen = strcmp(m->in_tree_modules_to_remove[j], v ? v : "") == 0;
			if (seen)
				continue;
			if (!(m->in_tree_modules_to_remove[m->n_in_tree_modules_to_remove] = dup(c, v)))
				return;
			m->n_in_tree_modules_to_remove++;
		}
	}
	if (src->registry_tls)
		copy_tls(c, src->registry_tls, &m->registry_tls);
	if (src->sign) {
		/* the default only when no level lists a file: KMM appends this list to
		 * the container's, which has the default already */
		char def[GK_POLICY_KEY_MAX];
		bool use_default = !km->sign && gk_policy_sign_default_file(def, sizeof(def), km->module_name) == 0;
		copy_sign(c, src->sign, use_default ? def : NULL, &m->sign);
	}
	if (src->build) {
		const Gpukmm__KernelModuleBuild *b = src->build;
		NEW(c, m->build, gpukmm__module_build__init);
		m->build->dockerfile_config_map = dup(c, b->dockerfile_config_map);
		if (b->n_build_args && (m->build->build_args = zalloc(c, b->n_build_args, sizeof(void *)))) {
			for (size_t i = 0; i < b->n_build_args; i++) {
				Gpukmm__BuildArg *a;
				NEW(c, a, gpukmm__build_arg__init);
				m->build->build_args[m->build->n_build_args++] = a;
				a->name = dup(c, b->build_args[i]->name);
				a->value = dup(c, b->build_args[i]->value);
			}
		}
		copy_strings(c, b->secrets, b->n_secrets, &m->build->secrets, &m->build->n_secrets);
		/* the build runs on the GPU nodes whose kernel headers it needs */
		copy_selector(c, sel, &m->build->selector, &m->build->n_selector);
	}
}

static void render(rctx *c, const Gpukmm__ClusterPolicy *cp, const gk_policy_opts *o, Gpukmm__Module *mod)
{
	const Gpukmm__ClusterPolicySpec *s = cp->spec;
	const Gpukmm__KernelModuleSpec *km = s->kernel_module;
	const char *cp_name = cp->metadata && cp->metadata->name ? cp->metadata->name : "";
	const char *ns = o && o->namespace_ && *o->namespace_ ? o->namespace_ : GK_POLICY_DEFAULT_NAMESPACE;
	const char *sa = o && o->service_account && *o->service_account ? o->service_account : GK_POLICY_DEFAULT_SA;
	char name[GK_POLICY_KEY_MAX];
	if (gk_policy_module_name(name, sizeof(name), cp_name)) {
		c->oom = true;
		return;
	}

	NEW(c, mod->metadata, gpukmm__object_meta__init);
	mod->metadata->name = dup(c, name);
	mod->metadata->namespace_ = dup(c, ns);
	if (!(mod->metadata->owner_references = zalloc(c, 1, sizeof(void *))))
		return;
	Gpukmm__OwnerReference *ref;
	NEW(c, ref, gpukmm__owner_reference__init);
	mod->metadata->owner_references[mod->metadata->n_owner_references++] = ref;
	ref->api_version = dup(c, GK_POLICY_API_VERSION);
	ref->kind = dup(c, GK_POLICY_KIND);
	ref->name = dup(c, cp_name);
	if (cp->metadata && cp->metadata->uid)
		ref->uid = dup(c, cp->metadata->uid);
	ref->has_controller = ref->controller = 1;
	ref->has_block_owner_deletion = ref->block_owner_deletion = 1;

	NEW(c, mod->spec, gpukmm__module_spec__init);
	Gpukmm__ModuleSpec *ms = mod->spec;
	gk_policy_selector sel = { 0 };
	if (gk_policy_node_selector(s, NULL, &sel)) {
		c->oom = true;
		return;
	}
	copy_selector(c, &sel, &ms->selector, &ms->n_selector);
	/* the policy's tolerations, plus the cordon's taint (drain-safe: a cordon
	 * or `kubectl drain` never unloads the driver, ARCHITECTURE §5) */
	bool cordon = cordon_tolerated(s);
	size_t nt = s->n_tolerations + (cordon ? 0 : 1);
	if (nt && (ms->tolerations = zalloc(c, nt, sizeof(void *)))) {
		for (size_t i = 0; i < s->n_tolerations && !c->oom; i++) {
			const Gpukmm__Toleration *t = s->tolerations[i];
			Gpukmm__Toleration *d = malloc(sizeof(*d));
			if (!d) {
				c->oom = true;
				break;
			}
			gpukmm__toleration__init(d);
			ms->tolerations[ms->n_tolerations++] = d;
			if (t->key)
				d->key = dup(c, t->key);
			if (t->operator_)
				d->operator_ = dup(c, t->operator_);
			if (t->value)
				d->value = dup(c, t->value);
			if (t->effect)
				d->effect = dup(c, t->effect);
			d->has_toleration_seconds = t->has_toleration_seconds;
			d->toleration_seconds = t->toleration_seconds;
		}
		if (!cordon && !c->oom) {
			Gpukmm__Toleration *d = malloc(sizeof(*d));
			if (!d) {
				c->oom = true;
			} else {
				gpukmm__toleration__init(d);
				ms->tolerations[ms->n_tolerations++] = d;
				d->key = dup(c, GK_POLICY_CORDON_TAINT);
				d->operator_ = dup(c, "Exists");
				d->effect = dup(c, "NoSchedule");
			}
		}
	}
	if (s->pull_secret)
		ms->image_repo_secret = dup(c, s->pull_secret);

	Gpukmm__ModuleLoader *ml;
	Gpukmm__ModuleLoaderContainer *ct;
	Gpukmm__ModprobeSpec *mp;
	ml = malloc(sizeof(*ml));
	ct = malloc(sizeof(*ct));
	mp = malloc(sizeof(*mp));
	if (!ml || !ct || !mp) {
		free(ml);
		free(ct);
		free(mp);
		c->oom = true;
		gk_policy_selector_free(&sel);
		return;
	}
	gpukmm__module_loader__init(ml);
	gpukmm__module_loader_container__init(ct);
	gpukmm__modprobe_spec__init(mp);
	ms->module_loader = ml;
	ml->container = ct;
	ct->modprobe = mp;
	ml->service_account_name = dup(c, sa);
	mp->module_name = dup(c, km->module_name);
	if (km->firmware_path && *km->firmware_path)
		mp->firmware_path = dup(c, km->firmware_path);
	copy_strings(c, km->modules_loading_order, km->n_modules_loading_order, &mp->modules_loading_order,
		     &mp->n_modules_loading_order);
	copy_strings(c, km->parameters, km->n_parameters, &mp->parameters, &mp->n_parameters);
	if (km->version && *km->version)
		ct->version = dup(c, km->version);
	copy_strings(c, (char **)&km->module_name, 1, &ct->in_tree_modules_to_remove, &ct->n_in_tree_modules_to_remove);
	ct->image_pull_policy = dup(c, "IfNotPresent");
	copy_tls(c, km->registry_tls, &ct->registry_tls);
	if (km->sign) {
		char def[GK_POLICY_KEY_MAX];
		if (gk_policy_sign_default_file(def, sizeof(def), km->module_name)) {
			c->oom = true; /* a module name longer than any valid one */
			gk_policy_selector_free(&sel);
			return;
		}
		copy_sign(c, km->sign, def, &ct->sign);
	}
	if (km->n_kernel_mappings && (ct->kernel_mappings = zalloc(c, km->n_kernel_mappings, sizeof(void *)))) {
		for (size_t i = 0; i < km->n_kernel_mappings && !c->oom; i++) {
			Gpukmm__ModuleKernelMapping *m = malloc(sizeof(*m));
			if (!m) {
				c->oom = true;
				break;
			}
			gpukmm__module_kernel_mapping__init(m);
			ct->kernel_mappings[ct->n_kernel_mappings++] = m;
			render_mapping(c, km, km->kernel_mappings[i], &sel, m);
		}
	}
	gk_policy_selector_free(&sel);
}

int gk_policy_render_module(const Gpukmm__ClusterPolicy *cp, const gk_policy_opts *o, Gpukmm__Module **out,
			    gk_err *err)
{
	*out = NULL;
	if (!cp || !cp->spec || !cp->spec->kernel_module)
		return gk_err_set(err, GK_FAILED_PRECONDITION, "the ClusterPolicy has no spec.kernelModule: no Module");
	Gpukmm__Module *m = malloc(sizeof(*m));
	if (!m)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	gpukmm__module__init(m);
	rctx c = { 0 };
	render(&c, cp, o, m);
	if (c.oom) {
		gk_kobj_free(m);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	}
	*out = m;
	return 0;
}

cJSON *gk_policy_module_to_json(const Gpukmm__Module *m)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	if (!cJSON_AddStringToObject(o, "apiVersion", GK_POLICY_KMM_API_VERSION) ||
	    !cJSON_AddStringToObject(o, "kind", "Module"))
		goto fail;
	cJSON *meta = gk_kobj_meta_to_json(m->metadata);
	if (!meta)
		goto fail;
	cJSON_AddItemToObject(o, "metadata", meta);
	cJSON *spec = gk_kobj_module_spec_to_json(m->spec);
	if (!spec)
		goto fail;
	cJSON_AddItemToObject(o, "spec", spec);
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}
