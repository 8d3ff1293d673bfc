/* lib/probe — pure decisions on a report: module source, unload verdict,
 * warnings, fingerprint. No I/O. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/probe.h"

Gpukmm__ModuleSource gk_probe_module_source(const gk_probe_srcfacts *f)
{
	if (f->builtin)
		return GPUKMM__MODULE_SOURCE__SOURCE_BUILTIN;
	if (!f->loaded)
		return GPUKMM__MODULE_SOURCE__SOURCE_NONE;
	if (f->taint && strchr(f->taint, 'O'))
		return GPUKMM__MODULE_SOURCE__SOURCE_OOT;
	if (f->srcversion && f->intree_srcversion && strcmp(f->srcversion, f->intree_srcversion))
		return GPUKMM__MODULE_SOURCE__SOURCE_OOT;
	return GPUKMM__MODULE_SOURCE__SOURCE_IN_TREE;
}

/* A growing sentence buffer: "a; b; c". */
typedef struct sbuf {
	char s[1024];
	size_t n;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...)
{
	if (b->n >= sizeof b->s - 1)
		return;
	if (b->n) {
		int k = snprintf(b->s + b->n, sizeof b->s - b->n, "; ");
		b->n += (size_t)k < sizeof b->s - b->n ? (size_t)k : sizeof b->s - b->n - 1;
	}
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
	va_end(ap);
	if (k > 0)
		b->n += (size_t)k < sizeof b->s - b->n ? (size_t)k : sizeof b->s - b->n - 1;
}

static int set_str(char **dst, const char *s, gk_err *err)
{
	char *d = strdup(s);
	if (!d)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	free(*dst);
	*dst = d;
	return GK_OK;
}

int gk_probe_unload_verdict(Gpukmm__NodeReport *r, gk_err *err)
{
	const char *name = r->module_name ? r->module_name : "the module";
	const Gpukmm__KernelModuleInfo *m = r->module;
	sbuf why = { .n = 0 };
	Gpukmm__TriState verdict = GPUKMM__TRI_STATE__TRI_YES;

	if (r->has_modules_supported && !r->modules_supported) {
		sb_add(&why, "the kernel has no loadable-module support (no /proc/modules)");
		verdict = GPUKMM__TRI_STATE__TRI_NO;
	}
	if (m && m->source == GPUKMM__MODULE_SOURCE__SOURCE_BUILTIN) {
		sb_add(&why, "%s is built into the kernel and cannot be unloaded", name);
		verdict = GPUKMM__TRI_STATE__TRI_NO;
	} else if (verdict == GPUKMM__TRI_STATE__TRI_YES && (!m || !m->loaded)) {
		/* nothing to unload: say so rather than "yes" (modprobe -r would fail) */
		sb_add(&why, "%s is not loaded: there is nothing to unload", name);
		verdict = GPUKMM__TRI_STATE__TRI_UNKNOWN;
	}
	if (m && m->loaded) {
		/* VFs: the known KMM limitation, the driver cannot go while VFs exist */
		bool unknown = false;
		for (size_t i = 0; i < r->n_gpus; i++) {
			const Gpukmm__PciGpu *g = r->gpus[i];
			if (!g->is_vf && g->has_sriov_totalvfs && !g->has_sriov_numvfs) {
				sb_add(&why, "the number of active SR-IOV VFs on %s is unknown", g->address ? g->address : "?");
				unknown = true;
			}
			if (g->is_vf || !g->has_sriov_numvfs || g->sriov_numvfs == 0)
				continue;
			sb_add(&why, "%u SR-IOV VF%s active on %s (set sriov_numvfs to 0 first)", g->sriov_numvfs,
			       g->sriov_numvfs == 1 ? "" : "s", g->address ? g->address : "?");
			verdict = GPUKMM__TRI_STATE__TRI_NO;
		}
		if ((m->has_refcount && m->refcount > 0) || m->n_holders) {
			char holders[512] = "";
			size_t hn = 0;
			for (size_t i = 0; i < m->n_holders && hn < sizeof holders - 1; i++) {
				int k = snprintf(holders + hn, sizeof holders - hn, "%s%s", i ? ", " : "", m->holders[i]);
				if (k < 0)
					break;
				hn += (size_t)k;
			}
			if (m->has_refcount && m->refcount > 0 && m->n_holders)
				sb_add(&why, "%s is in use (refcount %d, held by %s)", name, m->refcount, holders);
			else if (m->n_holders)
				sb_add(&why, "%s is in use (held by %s)", name, holders);
			else
				sb_add(&why, "%s is in use (refcount %d: a process or device holds it open)", name,
				       m->refcount);
			verdict = GPUKMM__TRI_STATE__TRI_NO;
		} else if (!m->has_refcount) {
			sb_add(&why, "the refcount of %s is unknown", name);
			unknown = true;
		}
		if (unknown && verdict == GPUKMM__TRI_STATE__TRI_YES)
			verdict = GPUKMM__TRI_STATE__TRI_UNKNOWN;
	}
	r->has_can_unload = 1;
	r->can_unload = verdict;
	if (why.n)
		return set_str(&r->unload_blocker, why.s, err);
	free(r->unload_blocker);
	r->unload_blocker = NULL;
	return GK_OK;
}

static int add_warning(Gpukmm__NodeReport *r, const char *s, gk_err *err)
{
	if (r->n_warnings >= 32)
		return GK_OK;
	char **nv = realloc(r->warnings, (r->n_warnings + 1) * sizeof *nv);
	if (!nv)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	r->warnings = nv;
	char *d = strdup(s);
	if (!d)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	nv[r->n_warnings++] = d;
	return GK_OK;
}

int gk_probe_warnings(Gpukmm__NodeReport *r, gk_err *err)
{
	const char *name = r->module_name ? r->module_name : "the module";
	const Gpukmm__KernelModuleInfo *m = r->module;
	char w[1024];
	bool sb = r->has_secure_boot && r->secure_boot == GPUKMM__TRI_STATE__TRI_YES;
	bool lock = r->lockdown && (!strcmp(r->lockdown, "integrity") || !strcmp(r->lockdown, "confidentiality"));
	int rc;
	if ((sb || lock) && m && m->ko_path && !m->ko_signer && !m->loaded) {
		snprintf(w, sizeof w,
			 "%s is on and %s (the %s that modprobe would load) is not signed: the kernel will refuse "
			 "to load it; configure module signing (KMM sign) or enroll a key",
			 sb ? "Secure Boot" : "kernel lockdown", m->ko_path, name);
		if ((rc = add_warning(r, w, err)))
			return rc;
	}
	if (m && m->loaded && m->taint && strchr(m->taint, 'E')) {
		snprintf(w, sizeof w, "%s was loaded without a valid signature (taint E)", name);
		if ((rc = add_warning(r, w, err)))
			return rc;
	}
	for (size_t i = 0; i < r->n_gpus; i++) {
		const Gpukmm__PciGpu *g = r->gpus[i];
		if (g->is_vf)
			continue;
		bool dump = r->pci_source && !strcmp(r->pci_source, "dump"); /* no driver links in a dump */
		if (dump)
			continue;
		if (!g->driver && m && m->loaded) {
			snprintf(w, sizeof w, "GPU %s has no driver bound although %s is loaded", g->address, name);
			if ((rc = add_warning(r, w, err)))
				return rc;
		} else if (g->driver && strcmp(g->driver, name) && (!strcmp(g->driver, "i915") || !strcmp(g->driver, "xe"))) {
			snprintf(w, sizeof w, "GPU %s is bound to %s, not to %s", g->address, g->driver, name);
			if ((rc = add_warning(r, w, err)))
				return rc;
		}
	}
	return GK_OK;
}

uint64_t gk_probe_fingerprint(const Gpukmm__NodeReport *r)
{
	Gpukmm__NodeReport c = *r; /* shallow: only the two scalars differ */
	c.has_probed_at_ms = 0;
	c.probed_at_ms = 0;
	c.has_generation = 0;
	c.generation = 0;
	size_t n = protobuf_c_message_get_packed_size(&c.base);
	uint8_t stackbuf[4096];
	uint8_t *buf = n <= sizeof stackbuf ? stackbuf : malloc(n);
	uint64_t h = 1469598103934665603ull;
	if (!buf) /* cannot hash: a value that never equals a real hash of this size */
		return h ^ n;
	protobuf_c_message_pack(&c.base, buf);
	for (size_t i = 0; i < n; i++) {
		h ^= buf[i];
		h *= 1099511628211ull;
	}
	if (buf != stackbuf)
		free(buf);
	return h;
}
