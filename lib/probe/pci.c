/* lib/probe — Intel display-class PCI devices.
 *
 * sysfs (<root>/sys/bus/pci/devices): read here by our own bounded reader,
 * one opened directory per device (gkp_dir_enter); every device's vendor,
 * device and class must be clean hex (a problem each when not), the rest
 * (subsystem, NUMA node, driver link, SR-IOV counts, physfn) only for Intel
 * display devices. libpci scanned sysfs before and was slower than `lspci`
 * itself: its scan reads every attribute of every device (resources, irq,
 * config space), stops on one broken device and parses ids with a lenient
 * strtol, so each device had to be checked first and read twice.
 * libpci reads an `lspci -x` dump (the dump method: SR-IOV from the
 * extended capability). Names come from libpci's pci.ids, read here line by
 * line for the few devices found (libpci only for a compressed list). */
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

/* The devices of the `lspci -x` dump pr->pci_dump.
 * Returns 0 when the scan worked, -1 after recording a problem. */
static int libpci_scan(gk_probe_run_t *pr, devlist *out)
{
	jmp_buf jb;
	struct pci_access *volatile a = NULL;
	pci_jmp = &jb;
	if (setjmp(jb)) {
		pci_jmp = NULL;
		gkp_problem(pr, "PCI dump %s is unreadable: %s", pr->pci_dump, pci_errmsg);
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
	a->method = PCI_ACCESS_DUMP;
	pci_set_param(a, "dump.name", (char *)pr->pci_dump);
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
		int want = PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS | PCI_FILL_CAPS |
			   PCI_FILL_EXT_CAPS;
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
		struct pci_cap *c = pci_find_cap(d, PCI_EXT_CAP_ID_SRIOV, PCI_CAP_EXTENDED);
		if (c) {
			r->has_dump_sriov = 1;
			r->dump_totalvfs = pci_read_word(d, c->addr + PCI_IOV_TOTALVF);
			r->dump_numvfs = pci_read_word(d, c->addr + PCI_IOV_NUMVF);
		}
	}
	pci_cleanup(a);
	pci_jmp = NULL;
	return 0;
}

/* Value of 4 hex digits at s (followed by a blank), -1 otherwise. */
static int hex4(const char *s)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		int c = (unsigned char)s[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return s[4] == ' ' || s[4] == '\t' ? v : -1;
}

/* The device names of pci.ids read line by line (the vendor and device lines
 * only; no copy of the list is kept), stopping once every device is named.
 * libpci's pci_lookup_name parses and hashes the whole list (~1.3 MB: 35 ms
 * and 2 MB of heap for a few names). The answers, "not listed" among them, are
 * kept while the file is the same (idscache.c): the next probes read nothing.
 * Returns -1 when the plain file cannot be read: libpci then looks the names
 * up (it also reads pci.ids.gz). */
static int ids_file_names(gk_probe_run_t *pr, const char *path, Gpukmm__PciGpu **g, size_t n)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	struct stat st;
	bool cacheable = fstat(fileno(f), &st) == 0;
	char line[512];
	int vendor = -1;
	size_t left = 0, uncached = 0; /* devices still unnamed / the cache could not answer */
	for (size_t i = 0; i < n; i++) {
		int c = cacheable ? gkp_ids_cached(path, &st, (uint16_t)g[i]->vendor_id, (uint16_t)g[i]->device_id,
						   line, sizeof line)
				  : -1;
		if (c == 1 && !g[i]->product_name)
			g[i]->product_name = gkp_strdup(pr, line);
		uncached += c < 0;
		left += !g[i]->product_name;
	}
	if (!uncached) {
		fclose(f);
		return 0;
	}
	bool skipping = false; /* the rest of a line longer than the buffer */
	while (left && fgets(line, sizeof line, f)) {
		size_t len = strlen(line);
		bool whole = len && line[len - 1] == '\n';
		bool was_skipping = skipping;
		skipping = !whole && !feof(f);
		if (was_skipping)
			continue;
		line[strcspn(line, "\r\n")] = 0;
		if (line[0] != '\t') {
			vendor = line[0] == '#' || !line[0] ? vendor : hex4(line);
			continue;
		}
		if (vendor < 0 || line[1] == '\t')
			continue; /* subsystem line, or outside a vendor */
		int dev = hex4(line + 1);
		if (dev < 0)
			continue;
		const char *name = line + 5;
		while (*name == ' ' || *name == '\t')
			name++;
		if (!*name)
			continue;
		for (size_t i = 0; i < n; i++)
			if (!g[i]->product_name && g[i]->vendor_id == (uint32_t)vendor && g[i]->device_id == (uint32_t)dev) {
				g[i]->product_name = gkp_strdup(pr, name);
				left--;
			}
	}
	/* read to its end, or stopped with every device named: what is still
	 * unnamed is not listed (a read error proves nothing: not kept) */
	bool complete = !ferror(f);
	fclose(f);
	for (size_t i = 0; cacheable && complete && i < n; i++)
		gkp_ids_remember(path, &st, (uint16_t)g[i]->vendor_id, (uint16_t)g[i]->device_id, g[i]->product_name);
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
	/* libpci's list: <dir>/pci.ids.gz when it exists, else <dir>/pci.ids */
	bool by_libpci = true;
	const char *ids = a ? a->id_file_name : NULL;
	if (ids) {
		char plain[PATH_MAX];
		size_t l = strlen(ids);
		struct stat st;
		if (l > 3 && !strcmp(ids + l - 3, ".gz")) {
			if (stat(ids, &st) != 0 && l - 3 < sizeof plain) {
				memcpy(plain, ids, l - 3);
				plain[l - 3] = 0;
				by_libpci = ids_file_names(pr, plain, g, n) != 0;
			}
		} else {
			by_libpci = ids_file_names(pr, ids, g, n) != 0;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (g[i]->product_name)
			continue;
		char buf[256];
		const char *name = NULL;
		if (a && by_libpci)
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

/* ---- sysfs ------------------------------------------------------------------------ */

/* One device directory: vendor, device and class of every device (a problem
 * when one is missing or not clean hex), the rest for Intel display devices. */
static void read_device(gk_probe_run_t *pr, const char *bdf, devlist *out)
{
	char rel[160];
	uint32_t vendor, class24, device;
#define REL(f) (snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/%s", bdf, f), rel)
	snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s", bdf);
	gkp_dir_enter(pr, rel);
	int bad = gkp_read_hex_req(pr, REL("vendor"), 0xffff, &vendor);
	bad |= gkp_read_hex_req(pr, REL("device"), 0xffff, &device);
	bad |= gkp_read_hex_req(pr, REL("class"), 0xffffff, &class24);
	if (bad || !is_intel_gpu(vendor, class24))
		goto out;
	rawdev *r = devlist_add(pr, out);
	if (!r)
		goto out;
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
out:
	gkp_dir_leave(pr);
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
		for (size_t i = 0; i < nb && !pr->oom; i++)
			read_device(pr, bdfs[i], &l);
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
		snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s", d->addr);
		gkp_dir_enter(pr, rel);
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
		gkp_dir_leave(pr);
	}
	free(l.v);
	if (r->n_gpus) {
		qsort(r->gpus, r->n_gpus, sizeof *r->gpus, cmp_gpu);
		fill_names(pr, r->gpus, r->n_gpus);
	}
}
