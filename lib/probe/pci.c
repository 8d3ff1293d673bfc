/* lib/probe — Intel display-class PCI devices.
 *
 * libpci enumerates (linux-sysfs with sysfs.path = <root>/sys/bus/pci, or the
 * dump method on an `lspci -x` file) and names devices (pci.ids). libpci's
 * default error handler exits the process and libpci stops the whole scan on
 * one broken device, so in sysfs mode every device directory is checked first
 * (the files libpci insists on: vendor, device, class, resource); when one is
 * broken it becomes a problem and the devices are read by our own bounded
 * sysfs reader instead. What libpci never reads (sriov_numvfs/totalvfs, the
 * physfn link) is read here through the same root. */
#include <dirent.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <pci/pci.h>

#include "probe_int.h"

#define MAX_PCI_ENTRIES 8192   /* entries of bus/pci/devices looked at */
#define DUMP_MAX (16u << 20)

/* libpci's error callback has no user pointer: the jump target and message
 * of the probe running on this thread live here (the only static state of
 * lib/probe; thread-local so concurrent probes do not share it). */
static _Thread_local jmp_buf *pci_jmp;
static _Thread_local char pci_errmsg[256];

static void __attribute__((noreturn)) pci_on_error(char *msg, ...)
{
	va_list ap;
	va_start(ap, msg);
	vsnprintf(pci_errmsg, sizeof pci_errmsg, msg, ap);
	va_end(ap);
	if (pci_jmp)
		longjmp(*pci_jmp, 1);
	abort(); /* unreachable: every libpci call below runs with pci_jmp set */
}

static void pci_quiet(char *msg, ...)
{
	(void)msg;
}

typedef struct rawdev {
	char addr[16];
	uint32_t vendor, device, subv, subd, class24;
	int has_sub, has_numa;
	int numa;
	char driver[64];
	uint32_t dump_totalvfs, dump_numvfs;
	int has_dump_sriov;
} rawdev;

typedef struct devlist {
	rawdev *v;
	size_t n, cap;
} devlist;

static rawdev *devlist_add(gk_probe_run_t *pr, devlist *l)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 64;
		rawdev *nv = realloc(l->v, nc * sizeof *nv);
		if (!nv) {
			pr->oom = 1;
			return NULL;
		}
		l->v = nv;
		l->cap = nc;
	}
	rawdev *d = &l->v[l->n++];
	memset(d, 0, sizeof *d);
	return d;
}

static bool is_intel_gpu(uint32_t vendor, uint32_t class24)
{
	return vendor == 0x8086 && (class24 >> 16) == 0x03;
}

/* "0000:03:00.0": a safe directory name to build paths from. */
static bool valid_bdf(const char *s)
{
	unsigned dom, bus, dev, fn;
	char tail;
	if (strlen(s) != 12)
		return false;
	return sscanf(s, "%4x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) == 4;
}

/* ---- libpci ------------------------------------------------------------------ */

static struct pci_access *pci_new(void)
{
	struct pci_access *a = pci_alloc();
	if (!a)
		return NULL;
	a->error = pci_on_error;
	a->warning = pci_quiet;
	a->debug = pci_quiet;
	return a;
}

/* Returns 0 when the scan worked, -1 after recording a problem. */
static int libpci_scan(gk_probe_run_t *pr, devlist *out)
{
	char sysfs[PATH_MAX];
	jmp_buf jb;
	struct pci_access *volatile a = NULL;
	if (!pr->pci_dump && gkp_path(pr, sysfs, sizeof sysfs, "sys/bus/pci")) {
		gkp_problem(pr, "PCI: the sysfs path is too long");
		return -1;
	}
	pci_jmp = &jb;
	if (setjmp(jb)) {
		pci_jmp = NULL;
		if (pr->pci_dump)
			gkp_problem(pr, "PCI dump %s is unreadable: %s", pr->pci_dump, pci_errmsg);
		else
			gkp_problem(pr, "PCI: libpci could not scan /sys/bus/pci: %s", pci_errmsg);
		if (a)
			pci_cleanup(a);
		return -1;
	}
	a = pci_new();
	if (!a) {
		pr->oom = 1;
		pci_jmp = NULL;
		return -1;
	}
	if (pr->pci_dump) {
		a->method = PCI_ACCESS_DUMP;
		pci_set_param(a, "dump.name", (char *)pr->pci_dump);
	} else {
		a->method = PCI_ACCESS_SYS_BUS_PCI;
		pci_set_param(a, "sysfs.path", sysfs);
	}
	pci_init(a);
	pci_scan_bus(a);
	size_t seen = 0;
	for (struct pci_dev *d = a->devices; d; d = d->next) {
		if (++seen > MAX_PCI_ENTRIES) {
			gkp_problem(pr, "PCI: more than %d devices; the rest are ignored", MAX_PCI_ENTRIES);
			break;
		}
		/* ids and class first: the rest only for Intel display devices */
		int base = pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS);
		if (!(base & PCI_FILL_IDENT) || d->vendor_id != 0x8086 || (d->device_class >> 8) != 0x03)
			continue;
		int want = PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS;
		if (pr->pci_dump)
			want |= PCI_FILL_CAPS | PCI_FILL_EXT_CAPS;
		else
			want |= PCI_FILL_NUMA_NODE | PCI_FILL_DRIVER;
		int got = pci_fill_info(d, want);
		uint32_t class24 = ((uint32_t)d->device_class << 8) | ((got & PCI_FILL_CLASS_EXT) ? d->prog_if : 0);
		if (!is_intel_gpu(d->vendor_id, class24))
			continue;
		rawdev *r = devlist_add(pr, out);
		if (!r)
			break;
		snprintf(r->addr, sizeof r->addr, "%04x:%02x:%02x.%d", (unsigned)d->domain & 0xffff,
			 d->bus, d->dev, d->func);
		r->vendor = d->vendor_id;
		r->device = d->device_id;
		r->class24 = class24;
		if (got & PCI_FILL_SUBSYS) {
			r->has_sub = 1;
			r->subv = d->subsys_vendor_id;
			r->subd = d->subsys_id;
		}
		if ((got & PCI_FILL_NUMA_NODE) && d->numa_node >= 0) {
			r->has_numa = 1;
			r->numa = d->numa_node;
		}
		if (got & PCI_FILL_DRIVER) {
			char *drv = pci_get_string_property(d, PCI_FILL_DRIVER);
			if (drv)
				snprintf(r->driver, sizeof r->driver, "%s", drv);
		}
		if (pr->pci_dump) {
			struct pci_cap *c = pci_find_cap(d, PCI_EXT_CAP_ID_SRIOV, PCI_CAP_EXTENDED);
			if (c) {
				r->has_dump_sriov = 1;
				r->dump_totalvfs = pci_read_word(d, c->addr + PCI_IOV_TOTALVF);
				r->dump_numvfs = pci_read_word(d, c->addr + PCI_IOV_NUMVF);
			}
		}
	}
	pci_cleanup(a);
	pci_jmp = NULL;
	return 0;
}

/* Product name: pci.ids first, our table when pci.ids has none. */
static void fill_names(gk_probe_run_t *pr, Gpukmm__PciGpu **g, size_t n)
{
	jmp_buf jb;
	struct pci_access *volatile a = NULL;
	pci_jmp = &jb;
	if (setjmp(jb)) {
		pci_jmp = NULL;
		if (a)
			pci_cleanup(a);
		a = NULL;
		/* pci.ids unreadable: our own table still names what it knows */
		for (size_t i = 0; i < n; i++)
			if (!g[i]->product_name)
				g[i]->product_name = gkp_strdup(
					pr, gk_probe_product_name((uint16_t)g[i]->vendor_id, (uint16_t)g[i]->device_id));
		return;
	}
	a = pci_new(); /* no pci_init: name lookups need no access method */
	for (size_t i = 0; i < n; i++) {
		char buf[256];
		const char *name = NULL;
		if (a)
			name = pci_lookup_name(a, buf, sizeof buf,
					       PCI_LOOKUP_DEVICE | PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB,
					       (int)g[i]->vendor_id, (int)g[i]->device_id);
		if (!name)
			name = gk_probe_product_name((uint16_t)g[i]->vendor_id, (uint16_t)g[i]->device_id);
		g[i]->product_name = gkp_strdup(pr, name);
	}
	if (a)
		pci_cleanup(a);
	pci_jmp = NULL;
}

/* ---- our own sysfs reader ------------------------------------------------------ */

static const char *const required[] = { "vendor", "device", "class", "resource" };

/* Returns false (and records a problem) when libpci would fail on this device. */
static bool check_for_libpci(gk_probe_run_t *pr, const char *bdf)
{
	bool ok = true;
	for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
		char rel[128];
		snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/%s", bdf, required[i]);
		if (i == 3) { /* resource: libpci only needs to open it; its lines are bounded there */
			char p[PATH_MAX];
			struct stat st;
			if (gkp_path(pr, p, sizeof p, rel) || stat(p, &st) || !S_ISREG(st.st_mode)) {
				gkp_problem(pr, "/%s is unreadable: it does not exist or is not a regular file", rel);
				ok = false;
			}
			continue;
		}
		char *b;
		size_t n;
		gk_err e;
		int rc = gk_probe_read(pr->root, rel, pr->file_max, &b, &n, &e);
		if (rc) {
			gkp_problem(pr, "/%s is unreadable: it %s", rel, e.msg);
			ok = false;
			continue;
		}
		/* text ids libpci parses with strtol: must be clean hex */
		uint32_t v;
		if (gk_probe_parse_hex(b, n, i == 2 ? 0xffffff : 0xffff, &v, &e)) {
			gkp_problem(pr, "/%s is unreadable: it %s", rel, e.msg);
			ok = false;
		}
		free(b);
	}
	return ok;
}

static void own_read_device(gk_probe_run_t *pr, const char *bdf, devlist *out)
{
	char rel[160];
	uint32_t vendor, class24, device;
#define REL(f) (snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/%s", bdf, f), rel)
	if (gkp_read_hex(pr, REL("vendor"), 0xffff, &vendor) || gkp_read_hex(pr, REL("class"), 0xffffff, &class24))
		return;
	if (!is_intel_gpu(vendor, class24))
		return;
	if (gkp_read_hex(pr, REL("device"), 0xffff, &device))
		return;
	rawdev *r = devlist_add(pr, out);
	if (!r)
		return;
	snprintf(r->addr, sizeof r->addr, "%s", bdf);
	r->vendor = vendor;
	r->device = device;
	r->class24 = class24;
	if (gkp_read_hex(pr, REL("subsystem_vendor"), 0xffff, &r->subv) == 0 &&
	    gkp_read_hex(pr, REL("subsystem_device"), 0xffff, &r->subd) == 0)
		r->has_sub = 1;
	int64_t numa;
	if (gkp_read_int(pr, REL("numa_node"), -1, 4095, &numa) == 0 && numa >= 0) {
		r->has_numa = 1;
		r->numa = (int)numa;
	}
	gkp_link_base(pr, REL("driver"), r->driver, sizeof r->driver);
#undef REL
}

/* List the device directory names (validated), sorted. */
static char (*list_bdfs(gk_probe_run_t *pr, size_t *n))[16]
{
	char dir[PATH_MAX];
	*n = 0;
	if (gkp_path(pr, dir, sizeof dir, "sys/bus/pci/devices"))
		return NULL;
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	char (*v)[16] = NULL;
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (!valid_bdf(e->d_name)) {
			gkp_problem(pr, "/sys/bus/pci/devices/%.64s is not a PCI address; ignored", e->d_name);
			continue;
		}
		if (*n >= MAX_PCI_ENTRIES) {
			gkp_problem(pr, "PCI: more than %d devices; the rest are ignored", MAX_PCI_ENTRIES);
			break;
		}
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			char (*nv)[16] = realloc(v, nc * sizeof *nv);
			if (!nv) {
				pr->oom = 1;
				break;
			}
			v = nv;
			cap = nc;
		}
		memcpy(v[(*n)++], e->d_name, 13); /* valid_bdf: exactly 12 chars + NUL */
	}
	closedir(d);
	return v;
}

static int cmp_bdf(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

static int cmp_gpu(const void *a, const void *b)
{
	const Gpukmm__PciGpu *x = *(Gpukmm__PciGpu *const *)a, *y = *(Gpukmm__PciGpu *const *)b;
	return strcmp(x->address, y->address);
}

void gkp_pci(gk_probe_run_t *pr)
{
	devlist l = { 0 };
	bool use_libpci = true;
	pr->r->pci_source = gkp_strdup(pr, pr->pci_dump ? "dump" : "sysfs");
	if (pr->pci_dump) {
		FILE *f = fopen(pr->pci_dump, "r");
		long sz = -1;
		if (f && fseek(f, 0, SEEK_END) == 0)
			sz = ftell(f);
		if (f)
			fclose(f);
		if (sz < 0) {
			gkp_problem(pr, "PCI dump %s is unreadable", pr->pci_dump);
			return;
		}
		if ((unsigned long)sz > DUMP_MAX) {
			gkp_problem(pr, "PCI dump %s is unreadable: it is larger than %u bytes", pr->pci_dump, DUMP_MAX);
			return;
		}
		libpci_scan(pr, &l);
	} else {
		if (!gkp_is_dir(pr, "sys/bus/pci/devices")) {
			/* no PCI bus at all (containers without /sys, some VMs): a fact, not a problem */
			return;
		}
		size_t nb;
		char(*bdfs)[16] = list_bdfs(pr, &nb);
		if (bdfs)
			qsort(bdfs, nb, sizeof *bdfs, cmp_bdf);
		for (size_t i = 0; i < nb; i++)
			if (!check_for_libpci(pr, bdfs[i]))
				use_libpci = false;
		if (!use_libpci || libpci_scan(pr, &l)) {
			l.n = 0;
			for (size_t i = 0; i < nb && !pr->oom; i++)
				own_read_device(pr, bdfs[i], &l);
		}
		free(bdfs);
	}

	Gpukmm__NodeReport *r = pr->r;
	for (size_t i = 0; i < l.n && !pr->oom; i++) {
		rawdev *d = &l.v[i];
		if (r->n_gpus >= GK_PROBE_MAX_GPUS) {
			gkp_problem(pr, "PCI: more than %d Intel GPUs; the rest are not listed", GK_PROBE_MAX_GPUS);
			break;
		}
		Gpukmm__PciGpu *g = malloc(sizeof *g);
		Gpukmm__PciGpu **nv = realloc(r->gpus, (r->n_gpus + 1) * sizeof *nv);
		if (!g || !nv) {
			free(g);
			if (nv)
				r->gpus = nv;
			pr->oom = 1;
			break;
		}
		r->gpus = nv;
		gpukmm__pci_gpu__init(g);
		r->gpus[r->n_gpus++] = g;
		g->address = gkp_strdup(pr, d->addr);
		g->has_vendor_id = g->has_device_id = g->has_class_code = 1;
		g->vendor_id = d->vendor;
		g->device_id = d->device;
		g->class_code = d->class24;
		if (d->has_sub) {
			g->has_subsystem_vendor_id = g->has_subsystem_device_id = 1;
			g->subsystem_vendor_id = d->subv;
			g->subsystem_device_id = d->subd;
		}
		if (d->has_numa) {
			g->has_numa_node = 1;
			g->numa_node = d->numa;
		}
		if (d->driver[0])
			g->driver = gkp_strdup(pr, d->driver);
		g->has_is_vf = 1;
		if (pr->pci_dump) {
			if (d->has_dump_sriov) {
				g->has_sriov_totalvfs = g->has_sriov_numvfs = 1;
				g->sriov_totalvfs = d->dump_totalvfs;
				g->sriov_numvfs = d->dump_numvfs;
			}
			continue;
		}
		char rel[160], pf[32];
		snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/physfn", d->addr);
		if (gkp_link_base(pr, rel, pf, sizeof pf) == 0) {
			g->is_vf = 1;
			if (valid_bdf(pf))
				g->physfn = gkp_strdup(pr, pf);
			else
				gkp_problem(pr, "/%s does not point to a PCI device", rel);
		}
		int64_t v;
		snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/sriov_totalvfs", d->addr);
		if (gkp_read_int(pr, rel, 0, 65535, &v) == 0) {
			g->has_sriov_totalvfs = 1;
			g->sriov_totalvfs = (uint32_t)v;
		}
		snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/sriov_numvfs", d->addr);
		if (gkp_read_int(pr, rel, 0, 65535, &v) == 0) {
			g->has_sriov_numvfs = 1;
			g->sriov_numvfs = (uint32_t)v;
		}
	}
	free(l.v);
	if (r->n_gpus) {
		qsort(r->gpus, r->n_gpus, sizeof *r->gpus, cmp_gpu);
		fill_names(pr, r->gpus, r->n_gpus);
	}
}
