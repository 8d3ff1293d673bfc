/* lib/probe pure parsers and decisions, plus a Criterion-driven mutation corpus
 * (bit flips, truncation, junk insertion, duplication) over every sysfs/procfs
 * parser: no crash, no overrun (the ASan pass checks), outputs stay bounded. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpukmm/probe.h"

#define S(x) x, sizeof(x) - 1

Test(probe_parse, line)
{
	char out[16];
	gk_err e;
	cr_expect_eq(gk_probe_parse_line(S("live\n"), out, sizeof out, &e), GK_OK);
	cr_expect_str_eq(out, "live");
	cr_expect_eq(gk_probe_parse_line(S("  x y \n\n"), out, sizeof out, &e), GK_OK);
	cr_expect_str_eq(out, "x y");
	cr_expect_eq(gk_probe_parse_line(S(""), out, sizeof out, &e), GK_DATA_LOSS);
	cr_expect(strstr(e.msg, "empty"));
	cr_expect_eq(gk_probe_parse_line(S("\n"), out, sizeof out, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_line(S("a\nb\n"), out, sizeof out, &e), GK_DATA_LOSS);
	cr_expect(strstr(e.msg, "more than one line"));
	cr_expect_eq(gk_probe_parse_line(S("a\0b"), out, sizeof out, &e), GK_DATA_LOSS);
	cr_expect(strstr(e.msg, "NUL byte at offset 1"));
	cr_expect_eq(gk_probe_parse_line(S("a\x01"), out, sizeof out, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_line(S("0123456789abcdefX"), out, sizeof out, &e), GK_DATA_LOSS);
	cr_expect(strstr(e.msg, "too long"));
	cr_expect_eq(gk_probe_parse_line(NULL, 0, out, sizeof out, &e), GK_INVALID_ARGUMENT);
}

Test(probe_parse, hex_and_int)
{
	uint32_t v;
	int64_t i;
	gk_err e;
	cr_expect_eq(gk_probe_parse_hex(S("0x8086\n"), 0xffff, &v, &e), GK_OK);
	cr_expect_eq(v, 0x8086);
	cr_expect_eq(gk_probe_parse_hex(S("E20B"), 0xffff, &v, &e), GK_OK);
	cr_expect_eq(v, 0xe20b);
	cr_expect_eq(gk_probe_parse_hex(S("0x038000\n"), 0xffffff, &v, &e), GK_OK);
	cr_expect_eq(v, 0x038000);
	cr_expect_eq(gk_probe_parse_hex(S("0x10000"), 0xffff, &v, &e), GK_DATA_LOSS);
	cr_expect(strstr(e.msg, "out of range"));
	cr_expect_eq(gk_probe_parse_hex(S("0x"), 0xffff, &v, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_hex(S("0xzz"), 0xffff, &v, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_hex(S("0xffffffffffffffffffff"), 0xffffffff, &v, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_int(S("-1\n"), -1, 10, &i, &e), GK_OK);
	cr_expect_eq(i, -1);
	cr_expect_eq(gk_probe_parse_int(S("63\n"), 0, 65535, &i, &e), GK_OK);
	cr_expect_eq(i, 63);
	cr_expect_eq(gk_probe_parse_int(S("-2"), -1, 10, &i, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_int(S("12abc"), 0, 100, &i, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_int(S("99999999999999999999999"), 0, 100, &i, &e), GK_DATA_LOSS);
}

Test(probe_parse, secure_boot)
{
	Gpukmm__TriState t;
	gk_err e;
	cr_expect_eq(gk_probe_parse_secureboot((const uint8_t *)"\x06\0\0\0\x01", 5, &t, &e), GK_OK);
	cr_expect_eq(t, GPUKMM__TRI_STATE__TRI_YES);
	cr_expect_eq(gk_probe_parse_secureboot((const uint8_t *)"\x06\0\0\0\0", 5, &t, &e), GK_OK);
	cr_expect_eq(t, GPUKMM__TRI_STATE__TRI_NO);
	cr_expect_eq(gk_probe_parse_secureboot((const uint8_t *)"\x06\0\0", 3, &t, &e), GK_DATA_LOSS);
	cr_expect_eq(t, GPUKMM__TRI_STATE__TRI_UNKNOWN);
	cr_expect(strstr(e.msg, "has 3 bytes"));
	cr_expect_eq(gk_probe_parse_secureboot((const uint8_t *)"\x06\0\0\0\x07", 5, &t, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_secureboot((const uint8_t *)"\x06\0\0\0\x01\x01", 6, &t, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_secureboot(NULL, 0, &t, &e), GK_DATA_LOSS);
}

Test(probe_parse, lockdown)
{
	char m[32];
	gk_err e;
	cr_expect_eq(gk_probe_parse_lockdown(S("[none] integrity confidentiality\n"), m, sizeof m, &e), GK_OK);
	cr_expect_str_eq(m, "none");
	cr_expect_eq(gk_probe_parse_lockdown(S("none integrity [confidentiality]\n"), m, sizeof m, &e), GK_OK);
	cr_expect_str_eq(m, "confidentiality");
	cr_expect_eq(gk_probe_parse_lockdown(S("none integrity\n"), m, sizeof m, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_lockdown(S("[none] [integrity]\n"), m, sizeof m, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_lockdown(S("[] x\n"), m, sizeof m, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_lockdown(S("[evil] x\n"), m, sizeof m, &e), GK_DATA_LOSS);
	cr_expect(strstr(e.msg, "unknown mode 'evil'"));
}

static const char procmods[] = "xe 2838528 4 drm_gpuvm,drm_exec, Live 0xffffffffc0a00000 (OE)\n"
			       "\n"
			       "drm_gpuvm 40960 1 - Live 0x0000000000000000\n"
			       "xe_vfio_pci 16384 - - Loading 0x0000000000000000\n";

Test(probe_parse, proc_modules)
{
	gk_probe_procmod m;
	gk_err e;
	cr_assert_eq(gk_probe_parse_proc_modules(S(procmods), "xe", &m, &e), GK_OK);
	cr_expect(m.found);
	cr_expect_eq(m.refcount, 4);
	cr_expect_str_eq(m.deps, "drm_gpuvm,drm_exec");
	cr_expect_str_eq(m.state, "Live");
	cr_expect_str_eq(m.taint, "OE");
	cr_assert_eq(gk_probe_parse_proc_modules(S(procmods), "drm_gpuvm", &m, &e), GK_OK);
	cr_expect(m.found);
	cr_expect_str_eq(m.deps, "");
	cr_expect_str_eq(m.taint, "");
	cr_assert_eq(gk_probe_parse_proc_modules(S(procmods), "xe-vfio-pci", &m, &e), GK_OK, "- and _ are equal");
	cr_expect(m.found);
	cr_expect_eq(m.refcount, -1);
	cr_expect_str_eq(m.state, "Loading");
	cr_assert_eq(gk_probe_parse_proc_modules(S(procmods), "i915", &m, &e), GK_OK);
	cr_expect(!m.found);
	cr_expect_eq(gk_probe_parse_proc_modules(S("xe 1 2\n"), "xe", &m, &e), GK_DATA_LOSS);
	cr_expect(strstr(e.msg, "line 1 has 3 fields"));
	cr_expect_eq(gk_probe_parse_proc_modules(S("xe 1 x - Live 0x0\n"), "xe", &m, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_proc_modules(S("xe 1 1 - Live 0x0 OE\n"), "xe", &m, &e), GK_DATA_LOSS);
	cr_expect(strstr(e.msg, "taint"));
	cr_expect_eq(gk_probe_parse_proc_modules(S("xe 1 1 - Live\x01 0x0\n"), "xe", &m, &e), GK_DATA_LOSS);
	cr_expect_eq(gk_probe_parse_proc_modules(S(""), "xe", &m, &e), GK_OK);
	cr_expect(!m.found);
}

Test(probe_parse, builtin_and_names)
{
	const char b[] = "kernel/drivers/gpu/drm/drm.ko\nkernel/drivers/gpu/drm/xe/xe.ko\nkernel/foo/i915-x.ko.xz";
	cr_expect(gk_probe_builtin_has(S(b), "xe"));
	cr_expect(gk_probe_builtin_has(S(b), "drm"));
	cr_expect(gk_probe_builtin_has(S(b), "i915_x"));
	cr_expect(!gk_probe_builtin_has(S(b), "x"));
	cr_expect(!gk_probe_builtin_has(S(b), "drm_gpuvm"));
	cr_expect(gk_probe_valid_module_name("xe"));
	cr_expect(gk_probe_valid_module_name("xe_vfio-pci"));
	cr_expect(!gk_probe_valid_module_name(""));
	cr_expect(!gk_probe_valid_module_name("../xe"));
	cr_expect(!gk_probe_valid_module_name("xe ko"));
	cr_expect(!gk_probe_valid_module_name(NULL));
	char longname[80];
	memset(longname, 'a', 56);
	longname[56] = 0;
	cr_expect(!gk_probe_valid_module_name(longname));
}

Test(probe_parse, product_names)
{
	cr_expect_str_eq(gk_probe_product_name(0x8086, 0xe223), "Battlemage G31");
	cr_expect_str_eq(gk_probe_product_name(0x8086, 0xe20b), "Battlemage G21 [Arc B580]");
	cr_expect_str_eq(gk_probe_product_name(0x8086, 0xe20c), "Battlemage G21 [Arc B570]");
	cr_expect_str_eq(gk_probe_product_name(0x8086, 0x56c0), "ATS-M [Data Center GPU Flex 170]");
	cr_expect_str_eq(gk_probe_product_name(0x8086, 0x0bd5), "Ponte Vecchio XT [Data Center GPU Max 1550]");
	cr_expect_null(gk_probe_product_name(0x8086, 0x1234));
	cr_expect_null(gk_probe_product_name(0x1002, 0xe223));
}

Test(probe_parse, module_source)
{
	gk_probe_srcfacts f = { 0 };
	cr_expect_eq(gk_probe_module_source(&f), GPUKMM__MODULE_SOURCE__SOURCE_NONE);
	f.builtin = true;
	cr_expect_eq(gk_probe_module_source(&f), GPUKMM__MODULE_SOURCE__SOURCE_BUILTIN);
	f = (gk_probe_srcfacts){ .loaded = true };
	cr_expect_eq(gk_probe_module_source(&f), GPUKMM__MODULE_SOURCE__SOURCE_IN_TREE);
	f.taint = "OE";
	cr_expect_eq(gk_probe_module_source(&f), GPUKMM__MODULE_SOURCE__SOURCE_OOT);
	f = (gk_probe_srcfacts){ .loaded = true, .taint = "E", .srcversion = "A", .intree_srcversion = "A" };
	cr_expect_eq(gk_probe_module_source(&f), GPUKMM__MODULE_SOURCE__SOURCE_IN_TREE);
	f.intree_srcversion = "B";
	cr_expect_eq(gk_probe_module_source(&f), GPUKMM__MODULE_SOURCE__SOURCE_OOT);
}

/* A report built by hand for the pure decisions. */
typedef struct hand {
	Gpukmm__NodeReport r;
	Gpukmm__KernelModuleInfo m;
	Gpukmm__PciGpu g[2], *gp[2];
	char *holders[2];
} hand;

static void hand_init(hand *h)
{
	memset(h, 0, sizeof *h);
	gpukmm__node_report__init(&h->r);
	gpukmm__kernel_module_info__init(&h->m);
	for (int i = 0; i < 2; i++) {
		gpukmm__pci_gpu__init(&h->g[i]);
		h->gp[i] = &h->g[i];
	}
	h->g[0].address = "0000:03:00.0";
	h->g[1].address = "0000:03:00.1";
	h->g[1].is_vf = 1;
	h->r.gpus = h->gp;
	h->r.n_gpus = 2;
	h->r.module = &h->m;
	h->r.module_name = "xe";
	h->r.has_modules_supported = h->r.modules_supported = 1;
	h->m.name = "xe";
	h->m.loaded = 1;
	h->m.has_refcount = 1;
	h->m.source = GPUKMM__MODULE_SOURCE__SOURCE_OOT;
	h->holders[0] = "xe_vfio_pci";
	h->holders[1] = "drm_x";
}

static void hand_fini(hand *h)
{
	free(h->r.unload_blocker);
	for (size_t i = 0; i < h->r.n_warnings; i++)
		free(h->r.warnings[i]);
	free(h->r.warnings);
}

Test(probe_decide, unload_verdict)
{
	hand h;
	hand_init(&h);
	cr_assert_eq(gk_probe_unload_verdict(&h.r, NULL), GK_OK);
	cr_expect_eq(h.r.can_unload, GPUKMM__TRI_STATE__TRI_YES);
	cr_expect_null(h.r.unload_blocker);

	h.g[0].has_sriov_numvfs = 1;
	h.g[0].sriov_numvfs = 1;
	h.m.refcount = 2;
	h.m.holders = h.holders;
	h.m.n_holders = 2;
	cr_assert_eq(gk_probe_unload_verdict(&h.r, NULL), GK_OK);
	cr_expect_eq(h.r.can_unload, GPUKMM__TRI_STATE__TRI_NO);
	cr_expect_str_eq(h.r.unload_blocker, "1 SR-IOV VF active on 0000:03:00.0 (set sriov_numvfs to 0 first); "
					     "xe is in use (refcount 2, held by xe_vfio_pci, drm_x)");
	hand_fini(&h);

	hand_init(&h);
	h.m.has_refcount = 0;
	cr_assert_eq(gk_probe_unload_verdict(&h.r, NULL), GK_OK);
	cr_expect_eq(h.r.can_unload, GPUKMM__TRI_STATE__TRI_UNKNOWN);
	cr_expect_str_eq(h.r.unload_blocker, "the refcount of xe is unknown");
	hand_fini(&h);

	hand_init(&h);
	h.m.loaded = 0;
	h.m.source = GPUKMM__MODULE_SOURCE__SOURCE_NONE;
	h.g[0].has_sriov_numvfs = 1;
	h.g[0].sriov_numvfs = 3; /* VFs without the module loaded do not block anything */
	cr_assert_eq(gk_probe_unload_verdict(&h.r, NULL), GK_OK);
	cr_expect_eq(h.r.can_unload, GPUKMM__TRI_STATE__TRI_UNKNOWN);
	cr_expect_str_eq(h.r.unload_blocker, "xe is not loaded: there is nothing to unload");
	hand_fini(&h);

	hand_init(&h);
	h.r.module = NULL;
	cr_assert_eq(gk_probe_unload_verdict(&h.r, NULL), GK_OK);
	cr_expect_eq(h.r.can_unload, GPUKMM__TRI_STATE__TRI_UNKNOWN);
	hand_fini(&h);
}

Test(probe_decide, warnings)
{
	hand h;
	hand_init(&h);
	h.m.loaded = 0;
	h.m.ko_path = "updates/xe.ko";
	h.r.has_secure_boot = 1;
	h.r.secure_boot = GPUKMM__TRI_STATE__TRI_YES;
	h.g[0].driver = "xe";
	cr_assert_eq(gk_probe_warnings(&h.r, NULL), GK_OK);
	cr_assert_eq(h.r.n_warnings, 1);
	cr_expect(strstr(h.r.warnings[0], "Secure Boot is on and updates/xe.ko (the xe that modprobe would load) "
					  "is not signed"));
	hand_fini(&h);

	hand_init(&h);
	h.m.ko_path = "updates/xe.ko";
	h.m.ko_signer = "MOK";
	h.r.lockdown = "integrity";
	h.m.taint = "OE";
	cr_assert_eq(gk_probe_warnings(&h.r, NULL), GK_OK);
	cr_assert_eq(h.r.n_warnings, 2);
	cr_expect_str_eq(h.r.warnings[0], "xe was loaded without a valid signature (taint E)");
	cr_expect_str_eq(h.r.warnings[1], "GPU 0000:03:00.0 has no driver bound although xe is loaded");
	hand_fini(&h);

	hand_init(&h);
	h.r.pci_source = "dump";
	cr_assert_eq(gk_probe_warnings(&h.r, NULL), GK_OK);
	cr_expect_eq(h.r.n_warnings, 0);
	hand_fini(&h);
}

Test(probe_decide, fingerprint_ignores_time_and_generation)
{
	hand h;
	hand_init(&h);
	uint64_t a = gk_probe_fingerprint(&h.r);
	h.r.has_probed_at_ms = 1;
	h.r.probed_at_ms = 12345;
	h.r.has_generation = 1;
	h.r.generation = 7;
	cr_expect_eq(gk_probe_fingerprint(&h.r), a);
	h.g[0].has_sriov_numvfs = 1;
	cr_expect_neq(gk_probe_fingerprint(&h.r), a);
	hand_fini(&h);
}

Test(probe_read, bounded_and_regular_files_only)
{
	char dir[] = "/tmp/gk-probe-read-XXXXXX", p[256];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(p, sizeof p, "%s/small", dir);
	FILE *f = fopen(p, "w");
	fputs("0x8086\n", f);
	fclose(f);
	snprintf(p, sizeof p, "%s/big", dir);
	f = fopen(p, "w");
	for (int i = 0; i < 5000; i++)
		fputs("0123456789", f);
	fclose(f);
	snprintf(p, sizeof p, "%s/fifo", dir);
	cr_assert_eq(mkfifo(p, 0600), 0);
	char *b;
	size_t n;
	gk_err e;
	cr_expect_eq(gk_probe_read(dir, "small", 64, &b, &n, &e), GK_OK);
	cr_expect_eq(n, 7);
	cr_expect_str_eq(b, "0x8086\n");
	free(b);
	cr_expect_eq(gk_probe_read(dir, "/small", 7, &b, &n, &e), GK_OK, "exactly the cap is fine");
	free(b);
	cr_expect_eq(gk_probe_read(dir, "small", 6, &b, &n, &e), GK_FAILED_PRECONDITION);
	cr_expect_eq(gk_probe_read(dir, "big", 4096, &b, &n, &e), GK_FAILED_PRECONDITION);
	cr_expect(strstr(e.msg, "larger than 4096 bytes"));
	cr_expect_null(b);
	cr_expect_eq(gk_probe_read(dir, "fifo", 64, &b, &n, &e), GK_FAILED_PRECONDITION, "no hang on a FIFO");
	cr_expect_eq(gk_probe_read(dir, "", 64, &b, &n, &e), GK_FAILED_PRECONDITION, "a directory");
	cr_expect_eq(gk_probe_read(dir, "nope", 64, &b, &n, &e), GK_NOT_FOUND);
	cr_expect_eq(gk_probe_read(dir, "small/x", 64, &b, &n, &e), GK_NOT_FOUND);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

/* ---- mutation corpus ---------------------------------------------------------- */

static uint64_t rng_state;
static uint32_t rnd(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}

static size_t mutate(const char *seed, size_t slen, char *out, size_t cap)
{
	size_t n = slen < cap ? slen : cap;
	memcpy(out, seed, n);
	int ops = 1 + (int)(rnd() % 4);
	for (int k = 0; k < ops; k++) {
		switch (rnd() % 6) {
		case 0: /* bit flip */
			if (n)
				out[rnd() % n] ^= (char)(1u << (rnd() % 8));
			break;
		case 1: /* truncate */
			if (n)
				n = rnd() % n;
			break;
		case 2: /* insert junk byte */
			if (n < cap) {
				size_t at = n ? rnd() % n : 0;
				memmove(out + at + 1, out + at, n - at);
				out[at] = (char)rnd();
				n++;
			}
			break;
		case 3: /* duplicate a chunk */
			if (n && n < cap) {
				size_t at = rnd() % n, len = 1 + rnd() % (n - at);
				if (len > cap - n)
					len = cap - n;
				memmove(out + at + len, out + at, n - at);
				n += len;
			}
			break;
		case 4: /* interesting byte */
			if (n) {
				static const char x[] = { 0, '\n', ' ', '-', '(', ')', '[', ']', ',', (char)0xff };
				out[rnd() % n] = x[rnd() % sizeof x];
			}
			break;
		default: /* append digits */
			for (int d = 0; d < 8 && n < cap; d++)
				out[n++] = (char)('0' + rnd() % 10);
		}
	}
	return n;
}

Test(probe_fuzz, mutated_inputs_never_crash, .timeout = 60)
{
	static const struct {
		const char *s;
		size_t n;
	} seeds[] = {
		{ S("0x8086\n") },
		{ S("0x038000\n") },
		{ S("-1\n") },
		{ S("[none] integrity confidentiality\n") },
		{ S("\x06\0\0\0\x01") },
		{ S(procmods) },
		{ S("kernel/drivers/gpu/drm/xe/xe.ko\n") },
	};
	rng_state = 0x5eed1234;
	char buf[1024], out[64];
	gk_err e;
	for (int it = 0; it < 20000; it++) {
		size_t si = rnd() % (sizeof seeds / sizeof seeds[0]);
		size_t n = mutate(seeds[si].s, seeds[si].n, buf, sizeof buf);
		/* exact-size heap copy so ASan catches any read past the end */
		char *h = malloc(n ? n : 1);
		cr_assert_not_null(h);
		memcpy(h, buf, n);
		if (gk_probe_parse_line(h, n, out, sizeof out, &e) == GK_OK)
			cr_assert_lt(strlen(out), sizeof out);
		uint32_t v;
		if (gk_probe_parse_hex(h, n, 0xffffff, &v, &e) == GK_OK)
			cr_assert_leq(v, 0xffffff);
		int64_t i;
		if (gk_probe_parse_int(h, n, -1, 65535, &i, &e) == GK_OK)
			cr_assert(i >= -1 && i <= 65535);
		Gpukmm__TriState t;
		if (gk_probe_parse_secureboot((const uint8_t *)h, n, &t, &e) == GK_OK)
			cr_assert(t == GPUKMM__TRI_STATE__TRI_YES || t == GPUKMM__TRI_STATE__TRI_NO);
		if (gk_probe_parse_lockdown(h, n, out, sizeof out, &e) == GK_OK)
			cr_assert(!strcmp(out, "none") || !strcmp(out, "integrity") || !strcmp(out, "confidentiality"));
		gk_probe_procmod pm;
		if (gk_probe_parse_proc_modules(h, n, "xe", &pm, &e) == GK_OK && pm.found) {
			cr_assert_lt(strlen(pm.deps), sizeof pm.deps);
			cr_assert_lt(strlen(pm.taint), sizeof pm.taint);
			cr_assert_lt(strlen(pm.state), sizeof pm.state);
		}
		(void)gk_probe_builtin_has(h, n, "xe");
		free(h);
	}
}
