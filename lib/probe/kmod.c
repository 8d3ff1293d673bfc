/* lib/probe — the GPU kernel module and its relatives.
 *
 * Loaded state comes from our own reads of <root>/sys/module/<m>/ and
 * <root>/proc/modules (libkmod reads those at fixed paths, so it cannot see a
 * fixture root). libkmod is used against <root>/lib/modules/<kver> for what it
 * is good at: the modules.dep index (which .ko modprobe would load, its
 * dependencies) and modinfo (version, srcversion, signature) of .ko files. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libkmod.h>

#include "probe_int.h"

static void kmod_quiet(void *data, int prio, const char *file, int line, const char *fn, const char *fmt,
		       va_list args)
{
	(void)data, (void)prio, (void)file, (void)line, (void)fn, (void)fmt, (void)args;
}

typedef struct kofacts {
	char version[128], srcversion[64], signer[256], hashalgo[32];
	bool intree;
} kofacts;

static int ko_info(struct kmod_module *m, kofacts *k)
{
	memset(k, 0, sizeof *k);
	struct kmod_list *info = NULL, *it;
	int rc = kmod_module_get_info(m, &info);
	if (rc < 0)
		return rc;
	kmod_list_foreach(it, info)
	{
		const char *key = kmod_module_info_get_key(it), *val = kmod_module_info_get_value(it);
		if (!key || !val)
			continue;
		if (!strcmp(key, "version"))
			snprintf(k->version, sizeof k->version, "%s", val);
		else if (!strcmp(key, "srcversion"))
			snprintf(k->srcversion, sizeof k->srcversion, "%s", val);
		else if (!strcmp(key, "signer"))
			snprintf(k->signer, sizeof k->signer, "%s", val);
		else if (!strcmp(key, "sig_hashalgo"))
			snprintf(k->hashalgo, sizeof k->hashalgo, "%s", val);
		else if (!strcmp(key, "intree"))
			k->intree = !strcmp(val, "Y");
	}
	kmod_module_info_free_list(info);
	return 0;
}

/* Printable and valid UTF-8 (signer names may be UTF-8): safe to put into a
 * report that other languages decode. */
static bool clean(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		if (*p < 0x20 || *p == 0x7f)
			return false;
		if (*p < 0x80) {
			p++;
			continue;
		}
		int n = (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : -1;
		if (n < 0 || (n == 1 && *p < 0xc2))
			return false;
		for (int k = 1; k <= n; k++)
			if ((p[k] & 0xc0) != 0x80)
				return false;
		p += n + 1;
	}
	return true;
}

typedef struct modctx {
	struct kmod_ctx *kctx;   /* NULL when there is no lib/modules/<kver> */
	char kdir[PATH_MAX];     /* <root>/lib/modules/<kver> */
	char *procmods;          /* NULL when absent/unreadable */
	size_t procmods_len;
	bool procmods_bad;
	char *builtin;
	size_t builtin_len;
} modctx;

/* Find the in-tree .ko of `name` when modules.dep points elsewhere (an
 * updates/ or extra/ module shadows it). */
static bool find_intree(gk_probe_run_t *pr, const char *name, char *rel, size_t cap)
{
	static const char *const dirs[] = { "kernel/drivers/gpu/drm/%s/%s.ko%s", "kernel/drivers/gpu/drm/%s%.0s.ko%s" };
	static const char *const ext[] = { "", ".xz", ".zst", ".gz" };
	for (size_t d = 0; d < 2; d++)
		for (size_t e = 0; e < 4; e++) {
			char r[256], full[PATH_MAX];
			int k = snprintf(r, sizeof r, dirs[d], name, name, ext[e]);
			if (k < 0 || (size_t)k >= sizeof r)
				continue;
			k = snprintf(full, sizeof full, "lib/modules/%s/%s", pr->kver, r);
			if (k < 0 || (size_t)k >= sizeof full)
				continue;
			if (gkp_exists(pr, full)) {
				if (strlen(r) >= cap)
					return false;
				memcpy(rel, r, strlen(r) + 1);
				return true;
			}
		}
	return false;
}

static Gpukmm__KernelModuleInfo *module_info(gk_probe_run_t *pr, modctx *mc, const char *name)
{
	Gpukmm__KernelModuleInfo *mi = malloc(sizeof *mi);
	if (!mi) {
		pr->oom = 1;
		return NULL;
	}
	gpukmm__kernel_module_info__init(mi);
	mi->name = gkp_strdup(pr, name);

	char rel[PATH_MAX], line[256];
	char initstate[32] = "", taint[64] = "", srcversion[64] = "";
	bool sysdir = false;
	snprintf(rel, sizeof rel, "sys/module/%s", name);
	sysdir = gkp_is_dir(pr, rel);
	if (sysdir) {
		snprintf(rel, sizeof rel, "sys/module/%s/initstate", name);
		if (gkp_read_line(pr, rel, initstate, sizeof initstate))
			initstate[0] = 0;
		snprintf(rel, sizeof rel, "sys/module/%s/taint", name);
		char *b;
		size_t n;
		if (gkp_read(pr, rel, &b, &n, false) == 0) {
			/* empty (just "\n") when the module taints nothing */
			gk_err e;
			if (n > 0 && !(n == 1 && b[0] == '\n')) {
				if (gk_probe_parse_line(b, n, taint, sizeof taint, &e)) {
					gkp_problem(pr, "/%s is unreadable: it %s", rel, e.msg);
					taint[0] = 0;
				}
			}
			free(b);
		}
		snprintf(rel, sizeof rel, "sys/module/%s/version", name);
		if (gkp_read_line(pr, rel, line, sizeof line) == 0)
			mi->version = gkp_strdup(pr, line);
		snprintf(rel, sizeof rel, "sys/module/%s/srcversion", name);
		if (gkp_read_line(pr, rel, srcversion, sizeof srcversion) == 0)
			mi->srcversion = gkp_strdup(pr, srcversion);
		else
			srcversion[0] = 0;
		int64_t rc;
		snprintf(rel, sizeof rel, "sys/module/%s/refcnt", name);
		if (gkp_read_int(pr, rel, 0, INT32_MAX, &rc) == 0) {
			mi->has_refcount = 1;
			mi->refcount = (int32_t)rc;
		}
		snprintf(rel, sizeof rel, "sys/module/%s/holders", name);
		char dir[PATH_MAX];
		DIR *d = gkp_path(pr, dir, sizeof dir, rel) == 0 ? opendir(dir) : NULL;
		if (d) {
			struct dirent *e;
			char **hv = NULL;
			size_t hn = 0;
			while ((e = readdir(d))) {
				if (e->d_name[0] == '.')
					continue;
				if (!gk_probe_valid_module_name(e->d_name)) {
					gkp_problem(pr, "/%s has an entry that is not a module name; ignored", rel);
					continue;
				}
				if (gkp_strv_add(pr, &hn, &hv, GK_PROBE_MAX_HOLDERS, e->d_name)) {
					if (!pr->oom)
						gkp_problem(pr, "/%s has more than %d entries; the rest are ignored", rel,
							    GK_PROBE_MAX_HOLDERS);
					break;
				}
			}
			closedir(d);
			/* stable order */
			for (size_t i = 1; i < hn; i++)
				for (size_t j = i; j > 0 && strcmp(hv[j - 1], hv[j]) > 0; j--) {
					char *t = hv[j];
					hv[j] = hv[j - 1];
					hv[j - 1] = t;
				}
			mi->holders = hv;
			mi->n_holders = hn;
		}
	}

	gk_probe_procmod pm = { 0 };
	if (mc->procmods && !mc->procmods_bad) {
		gk_err e;
		if (gk_probe_parse_proc_modules(mc->procmods, mc->procmods_len, name, &pm, &e)) {
			gkp_problem(pr, "/proc/modules is unreadable: it %s", e.msg);
			mc->procmods_bad = true;
			memset(&pm, 0, sizeof pm);
		}
	}
	if (!mi->has_refcount && pm.found && pm.refcount >= 0) {
		mi->has_refcount = 1;
		mi->refcount = (int32_t)pm.refcount;
	}
	if (!taint[0] && pm.found)
		snprintf(taint, sizeof taint, "%s", pm.taint);

	bool loaded = pm.found || !strcmp(initstate, "live") || !strcmp(initstate, "coming") ||
		      !strcmp(initstate, "going");
	bool builtin = (sysdir && !initstate[0] && !pm.found) ||
		       (mc->builtin && gk_probe_builtin_has(mc->builtin, mc->builtin_len, name));
	if (builtin)
		loaded = false;
	mi->has_loaded = 1;
	mi->loaded = loaded;
	if (initstate[0])
		mi->initstate = gkp_strdup(pr, initstate);
	else if (builtin)
		mi->initstate = gkp_strdup(pr, "builtin");
	if (taint[0])
		mi->taint = gkp_strdup(pr, taint);

	/* the module tree */
	kofacts ko = { 0 }, it = { 0 };
	bool have_it = false;
	if (mc->kctx) {
		struct kmod_module *m = NULL;
		if (kmod_module_new_from_name(mc->kctx, name, &m) == 0 && m) {
			const char *path = kmod_module_get_path(m);
			size_t kl = strlen(mc->kdir);
			if (path && !strncmp(path, mc->kdir, kl) && path[kl] == '/' && clean(path + kl + 1)) {
				const char *krel = path + kl + 1;
				mi->ko_path = gkp_strdup(pr, krel);
				if (ko_info(m, &ko) < 0)
					gkp_problem(pr, "/lib/modules/%s/%s is unreadable: libkmod cannot read its module "
						    "info (not a kernel module?)", pr->kver, krel);
				if (ko.version[0] && clean(ko.version))
					mi->ko_version = gkp_strdup(pr, ko.version);
				if (ko.srcversion[0] && clean(ko.srcversion))
					mi->ko_srcversion = gkp_strdup(pr, ko.srcversion);
				if (ko.signer[0] && clean(ko.signer))
					mi->ko_signer = gkp_strdup(pr, ko.signer);
				if (ko.hashalgo[0] && clean(ko.hashalgo))
					mi->ko_sig_hashalgo = gkp_strdup(pr, ko.hashalgo);
				if (!strncmp(krel, "kernel/", 7)) {
					it = ko;
					have_it = true;
					mi->in_tree_ko_path = gkp_strdup(pr, krel);
				}
			}
			kmod_module_unref(m);
		}
		char irel[256];
		if (!have_it && pr->kver[0] && find_intree(pr, name, irel, sizeof irel)) {
			char full[PATH_MAX];
			struct kmod_module *im = NULL;
			if (snprintf(full, sizeof full, "%s/%s", mc->kdir, irel) < (int)sizeof full &&
			    kmod_module_new_from_path(mc->kctx, full, &im) == 0 && im) {
				if (ko_info(im, &it) < 0)
					gkp_problem(pr, "/lib/modules/%s/%s is unreadable: libkmod cannot read its module "
						    "info (not a kernel module?)", pr->kver, irel);
				have_it = true;
				mi->in_tree_ko_path = gkp_strdup(pr, irel);
				kmod_module_unref(im);
			}
		}
	}
	mi->has_in_tree_ko_exists = 1;
	mi->in_tree_ko_exists = have_it;
	if (have_it) {
		if (it.srcversion[0] && clean(it.srcversion))
			mi->in_tree_srcversion = gkp_strdup(pr, it.srcversion);
		if (it.signer[0] && clean(it.signer))
			mi->signer = gkp_strdup(pr, it.signer);
		if (it.hashalgo[0] && clean(it.hashalgo))
			mi->sig_hashalgo = gkp_strdup(pr, it.hashalgo);
	}

	gk_probe_srcfacts f = {
		.loaded = loaded,
		.builtin = builtin,
		.taint = taint[0] ? taint : NULL,
		.srcversion = srcversion[0] ? srcversion : NULL,
		.intree_srcversion = have_it && it.srcversion[0] ? it.srcversion : NULL,
	};
	mi->has_source = 1;
	mi->source = gk_probe_module_source(&f);
	return mi;
}

static bool have_name(char **v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

void gkp_modules(gk_probe_run_t *pr)
{
	Gpukmm__NodeReport *r = pr->r;
	modctx mc = { 0 };
	r->has_modules_supported = 1;
	r->modules_supported = gkp_exists(pr, "proc/modules");
	if (r->modules_supported &&
	    gkp_read_cap(pr, "proc/modules", pr->big_max, &mc.procmods, &mc.procmods_len, false))
		mc.procmods_bad = true;

	if (pr->kver[0]) {
		char rel[PATH_MAX];
		snprintf(rel, sizeof rel, "lib/modules/%s", pr->kver);
		if (gkp_is_dir(pr, rel) && gkp_path(pr, mc.kdir, sizeof mc.kdir, rel) == 0) {
			char conf1[PATH_MAX], conf2[PATH_MAX];
			gkp_path(pr, conf1, sizeof conf1, "etc/modprobe.d");
			gkp_path(pr, conf2, sizeof conf2, "lib/modprobe.d");
			const char *cfg[] = { conf1, conf2, NULL };
			mc.kctx = kmod_new(mc.kdir, cfg);
			if (mc.kctx)
				kmod_set_log_fn(mc.kctx, kmod_quiet, NULL);
			else
				gkp_problem(pr, "/%s: libkmod could not open the module tree", rel);
			snprintf(rel, sizeof rel, "lib/modules/%s/modules.builtin", pr->kver);
			gkp_read_cap(pr, rel, pr->big_max, &mc.builtin, &mc.builtin_len, false);
		}
	}

	r->module_name = gkp_strdup(pr, pr->module);
	r->module = module_info(pr, &mc, pr->module);

	/* relatives: holders, dependencies (loaded and per modules.dep), the other driver */
	char **names = NULL;
	size_t nn = 0;
	if (r->module)
		for (size_t i = 0; i < r->module->n_holders; i++)
			if (!have_name(names, nn, r->module->holders[i]))
				gkp_strv_add(pr, &nn, &names, GK_PROBE_MAX_RELATED, r->module->holders[i]);
	if (mc.procmods && !mc.procmods_bad) {
		gk_probe_procmod pm;
		gk_err e;
		if (gk_probe_parse_proc_modules(mc.procmods, mc.procmods_len, pr->module, &pm, &e) == 0 && pm.found) {
			char *save = NULL;
			for (char *t = strtok_r(pm.deps, ",", &save); t; t = strtok_r(NULL, ",", &save))
				if (gk_probe_valid_module_name(t) && !have_name(names, nn, t))
					gkp_strv_add(pr, &nn, &names, GK_PROBE_MAX_RELATED, t);
		}
	}
	if (mc.kctx) {
		struct kmod_module *m = NULL;
		if (kmod_module_new_from_name(mc.kctx, pr->module, &m) == 0 && m) {
			struct kmod_list *deps = kmod_module_get_dependencies(m), *it;
			kmod_list_foreach(it, deps)
			{
				struct kmod_module *dm = kmod_module_get_module(it);
				const char *dn = dm ? kmod_module_get_name(dm) : NULL;
				if (dn && gk_probe_valid_module_name(dn) && !have_name(names, nn, dn))
					gkp_strv_add(pr, &nn, &names, GK_PROBE_MAX_RELATED, dn);
				if (dm)
					kmod_module_unref(dm);
			}
			kmod_module_unref_list(deps);
			kmod_module_unref(m);
		}
	}
	const char *alt = strcmp(pr->module, "i915") ? "i915" : "xe";
	if (!have_name(names, nn, alt))
		gkp_strv_add(pr, &nn, &names, GK_PROBE_MAX_RELATED, alt);

	for (size_t i = 0; i < nn && !pr->oom; i++) {
		Gpukmm__KernelModuleInfo *mi = module_info(pr, &mc, names[i]);
		if (!mi)
			break;
		Gpukmm__KernelModuleInfo **nv = realloc(r->related, (r->n_related + 1) * sizeof *nv);
		if (!nv) {
			protobuf_c_message_free_unpacked(&mi->base, NULL);
			pr->oom = 1;
			break;
		}
		r->related = nv;
		r->related[r->n_related++] = mi;
	}
	for (size_t i = 0; i < nn; i++)
		free(names[i]);
	free(names);
	free(mc.procmods);
	free(mc.builtin);
	if (mc.kctx)
		kmod_unref(mc.kctx);
}
