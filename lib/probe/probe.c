/* lib/probe — one probe run: kernel, Secure Boot, lockdown, PCI, modules,
 * then the pure verdicts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "probe_int.h"

#define SECUREBOOT_VAR "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

static bool root_is_slash(const char *root)
{
	for (; *root; root++)
		if (*root != '/')
			return false;
	return true;
}

/* A kernel release is used as a path component: no '/', no "..", printable. */
static bool valid_kver(const char *s)
{
	if (!*s || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (*s == '/' || (unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

static void probe_kernel(gk_probe_run_t *pr, const gk_probe_opts *o)
{
	char v[256] = "";
	if (o->kver && *o->kver) {
		snprintf(v, sizeof v, "%s", o->kver);
	} else if (root_is_slash(pr->root)) {
		struct utsname u;
		if (uname(&u) == 0)
			snprintf(v, sizeof v, "%s", u.release);
	} else {
		int rc = gkp_read_line(pr, "proc/sys/kernel/osrelease", v, sizeof v);
		if (rc == GK_NOT_FOUND)
			gkp_problem(pr, "/proc/sys/kernel/osrelease does not exist: the kernel version is unknown");
		if (rc)
			v[0] = 0;
	}
	if (v[0] && !valid_kver(v)) {
		gkp_problem(pr, "the kernel version is not usable as a directory name; ignored");
		v[0] = 0;
	}
	snprintf(pr->kver, sizeof pr->kver, "%s", v);
	if (v[0])
		pr->r->kernel_version = gkp_strdup(pr, v);
}

static void probe_secure_boot(gk_probe_run_t *pr)
{
	Gpukmm__NodeReport *r = pr->r;
	r->has_secure_boot = 1;
	r->secure_boot = GPUKMM__TRI_STATE__TRI_UNKNOWN;
	if (!gkp_is_dir(pr, "sys/firmware/efi")) {
		r->secure_boot = GPUKMM__TRI_STATE__TRI_NO; /* legacy BIOS boot: no Secure Boot */
	} else {
		char *b;
		size_t n;
		int rc = gkp_read_cap(pr, SECUREBOOT_VAR, 64, &b, &n, false);
		if (rc == GK_OK) {
			gk_err e;
			if (gk_probe_parse_secureboot((const uint8_t *)b, n, &r->secure_boot, &e))
				gkp_problem(pr, "/%s is unreadable: it %s", SECUREBOOT_VAR, e.msg);
			free(b);
		} else if (rc == GK_NOT_FOUND) {
			/* efivarfs mounted but no variable: firmware without Secure Boot */
			if (gkp_is_dir(pr, "sys/firmware/efi/efivars"))
				r->secure_boot = GPUKMM__TRI_STATE__TRI_NO;
		}
	}
	char mode[32], *b;
	size_t n;
	if (gkp_read(pr, "sys/kernel/security/lockdown", &b, &n, false) == GK_OK) {
		gk_err e;
		if (gk_probe_parse_lockdown(b, n, mode, sizeof mode, &e)) {
			gkp_problem(pr, "/sys/kernel/security/lockdown is unreadable: it %s", e.msg);
			snprintf(mode, sizeof mode, "unknown");
		}
		free(b);
	} else {
		/* no lockdown LSM (or securityfs not mounted) */
		snprintf(mode, sizeof mode, "unknown");
	}
	r->lockdown = gkp_strdup(pr, mode);
}

void gk_probe_report_free(Gpukmm__NodeReport *r)
{
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
}

int gk_probe_run(const gk_probe_opts *o, Gpukmm__NodeReport **out, gk_err *err)
{
	*out = NULL;
	gk_probe_opts def = { 0 };
	if (!o)
		o = &def;
	gk_probe_run_t pr = {
		.root = o->root && *o->root ? o->root : "/",
		.module = o->module && *o->module ? o->module : "xe",
		.pci_dump = o->pci_dump && *o->pci_dump ? o->pci_dump : NULL,
		.file_max = o->file_max ? o->file_max : GK_PROBE_FILE_MAX,
		.big_max = 4u << 20,
		.dir_fd = -1,
	};
	if (!gk_probe_valid_module_name(pr.module))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "module name '%.64s' is not valid (letters, digits, '_' and '-', at most 55)", pr.module);
	if (!gkp_is_dir(&pr, ""))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "root %.256s is not a directory", pr.root);
	Gpukmm__NodeReport *r = malloc(sizeof *r);
	if (!r)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	gpukmm__node_report__init(r);
	pr.r = r;
	if (o->node_name)
		r->node_name = gkp_strdup(&pr, o->node_name);

	probe_kernel(&pr, o);
	probe_secure_boot(&pr);
	gkp_pci(&pr);
	gkp_modules(&pr);

	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	r->has_probed_at_ms = 1;
	r->probed_at_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;

	int rc = GK_OK;
	if (!pr.oom)
		rc = gk_probe_unload_verdict(r, err);
	if (!pr.oom && !rc)
		rc = gk_probe_warnings(r, err);
	if (pr.oom || rc) {
		gk_probe_report_free(r);
		return rc ? rc : gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory while probing");
	}
	*out = r;
	return GK_OK;
}
