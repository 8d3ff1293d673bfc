/* gpukmm — node probe: what a node has (Intel GPUs, the GPU kernel module,
 * kernel, Secure Boot) as a gpukmm.NodeReport (proto/status.proto).
 *
 * Every input is read below a configurable root ("/" on a real node, a fixture
 * tree in tests): <root>/sys/bus/pci/devices, <root>/sys/module,
 * <root>/proc/modules, <root>/proc/sys/kernel/osrelease (uname when root is
 * "/"), <root>/lib/modules/<kver>, <root>/sys/firmware/efi/efivars,
 * <root>/sys/kernel/security/lockdown. libkmod is used only for the module
 * index and modinfo (it reads /sys/module and /proc/modules at fixed paths, so
 * those are read here, through the root). libpci enumerates PCI (linux-sysfs
 * with sysfs.path inside the root, or the `dump` method on an `lspci -x` file)
 * with an error handler that never exits the process.
 *
 * The inputs are untrusted: every file read is capped, a corrupted, truncated,
 * binary or oversized file becomes a `problems` sentence in the report, never a
 * crash. The parsers below are pure (buffer in, value out) so they can be unit
 * tested and fuzzed without files.
 *
 * Threads: libpci's error callback carries no context, so the jump target it
 * needs is thread-local; concurrent probes on different threads are fine. */
#ifndef GPUKMM_PROBE_H
#define GPUKMM_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "status.pb-c.h"

#define GK_PROBE_FILE_MAX   (64 * 1024)   /* default cap of one file read */
#define GK_PROBE_MAX_GPUS   1024          /* devices kept in one report */
#define GK_PROBE_MAX_RELATED 32           /* related modules kept */
#define GK_PROBE_MAX_HOLDERS 64
#define GK_PROBE_MAX_PROBLEMS 64

typedef struct gk_probe_opts {
	const char *root;        /* NULL or "" = "/" */
	const char *module;      /* NULL = "xe" */
	const char *node_name;   /* copied into the report when set */
	const char *pci_dump;    /* an `lspci -x` file: libpci dump method instead of sysfs */
	const char *kver;        /* override the kernel version (else osrelease / uname) */
	size_t file_max;         /* 0 = GK_PROBE_FILE_MAX */
} gk_probe_opts;

/* Probe once. On GK_OK *out is a new report (free with gk_probe_report_free);
 * unreadable inputs are listed in (*out)->problems, not returned as errors.
 * Errors: INVALID_ARGUMENT (bad module name / root), RESOURCE_EXHAUSTED (OOM). */
int gk_probe_run(const gk_probe_opts *opts, Gpukmm__NodeReport **out, gk_err *err);
void gk_probe_report_free(Gpukmm__NodeReport *r);

/* 64-bit FNV-1a over the packed report without probed_at_ms and generation:
 * equal fingerprints = nothing worth resending. */
uint64_t gk_probe_fingerprint(const Gpukmm__NodeReport *r);

/* ---- the report as JSON (schema/node-report.v1alpha1.json) ---------------
 * What `gpukmmctl probe --json` prints, what the node profile sends and what
 * the Node's gpukmm.io/node-report annotation holds: camelCase keys, PCI ids
 * in hex as lspci prints them ("8086", "e20b", class "0380"), plain enums
 * ("oot", "in-tree"; "true"/"false"/"unknown"), RFC 3339 times, numbers as
 * numbers, "apiVersion": GK_PROBE_JSON_API_VERSION, "kind": "NodeReport".
 * Under a byte budget the report is summarized instead of cut: first the VFs
 * are counted per physical function ("vfSummary") instead of listed, then
 * (form "minimal") only the counts, the module verdict and the node facts
 * stay; "summarized" says why, "summary" always carries the counts. */

#define GK_PROBE_JSON_API_VERSION "gpukmm.io/v1alpha1"
#define GK_PROBE_JSON_KIND "NodeReport"
#define GK_PROBE_JSON_BUDGET (16 * 1024) /* the Node annotation's budget */
#define GK_PROBE_JSON_MIN_BUDGET 4096    /* the minimal form always fits */

typedef enum gk_probe_json_form {
	GK_PROBE_JSON_FULL = 0,
	GK_PROBE_JSON_VFS_SUMMARIZED, /* VFs counted per PF, not listed */
	GK_PROBE_JSON_MINIMAL,        /* counts, module verdict, node facts */
} gk_probe_json_form;

typedef struct gk_probe_json_info {
	gk_probe_json_form form;
	size_t full_bytes;  /* the full form's size (encoder; 0 when parsed) */
	size_t bytes;       /* the size of what was printed / parsed */
	uint32_t pfs;       /* physical functions (GPUs) */
	uint32_t vfs;       /* active VFs: the sum of numVFs, at least the VFs seen */
	char reason[256];   /* why summarized, "" when full */
} gk_probe_json_info;

/* Physical functions and active VFs of a report (as info.pfs / info.vfs). */
void gk_probe_counts(const Gpukmm__NodeReport *r, uint32_t *pfs, uint32_t *vfs);
/* The report as compact JSON (pretty: indented) in at most `budget` bytes
 * (0 = no budget: always the full form; else at least
 * GK_PROBE_JSON_MIN_BUDGET). A new string, NULL on OOM. info may be NULL. */
char *gk_probe_report_json(const Gpukmm__NodeReport *r, size_t budget, bool pretty, gk_probe_json_info *info);
/* Parse what gk_probe_report_json printed (any form) into a new report (free
 * with gk_probe_report_free): input from another machine, so every type,
 * enum and length is checked (unknown keys are ignored: a newer writer).
 * info gets the form, the reason and the counts of "summary". Errors:
 * INVALID_ARGUMENT naming the field (not JSON, wrong apiVersion/kind/type),
 * RESOURCE_EXHAUSTED. */
int gk_probe_report_parse(const char *json, size_t len, Gpukmm__NodeReport **out, gk_probe_json_info *info,
			  gk_err *err);

/* ---- bounded file reading ------------------------------------------------ */

/* Read <root>/<rel> (rel without leading '/') into a new NUL-terminated buffer.
 * Reads at most `cap` bytes; a longer file is FAILED_PRECONDITION "larger than
 * N bytes". Only regular files (sysfs/procfs attributes are); FIFOs, devices
 * and directories are refused. NOT_FOUND when absent. */
int gk_probe_read(const char *root, const char *rel, size_t cap, char **buf, size_t *len,
		  gk_err *err);

/* ---- pure parsers (buffer in, value out; GK_OK or INVALID_ARGUMENT/DATA_LOSS
 *      with a message saying what is wrong) ------------------------------ */

/* One line of text ("0x8086\n", "live\n"): rejects NUL and control bytes,
 * more than one line, and empty input; copies the trimmed line into out. */
int gk_probe_parse_line(const char *buf, size_t len, char *out, size_t cap, gk_err *err);
/* "0x8086\n" / "8086" → value, with max as an upper bound. */
int gk_probe_parse_hex(const char *buf, size_t len, uint32_t max, uint32_t *out, gk_err *err);
/* Decimal, optionally negative ("-1\n" for numa_node). */
int gk_probe_parse_int(const char *buf, size_t len, int64_t min, int64_t max, int64_t *out,
		       gk_err *err);
/* SecureBoot efivar: 4 bytes attributes + 1 byte value (0/1). */
int gk_probe_parse_secureboot(const uint8_t *buf, size_t len,
			      Gpukmm__TriState *out, gk_err *err);
/* "[none] integrity confidentiality" → "none" (out gets the bracketed word). */
int gk_probe_parse_lockdown(const char *buf, size_t len, char *out, size_t cap, gk_err *err);

/* One module from /proc/modules. */
typedef struct gk_probe_procmod {
	bool found;
	int64_t refcount;        /* -1 when the kernel prints "-" */
	char state[16];          /* Live / Loading / Unloading */
	char taint[16];          /* letters inside "(...)", "" when none */
	char deps[512];          /* "drm_gpuvm,drm_exec" without the trailing comma */
} gk_probe_procmod;
/* Find `name` in /proc/modules text. A malformed line is an error naming the
 * line number, unless it is after the match. */
int gk_probe_parse_proc_modules(const char *buf, size_t len, const char *name,
				gk_probe_procmod *out, gk_err *err);
/* modules.builtin text ("kernel/drivers/gpu/drm/xe/xe.ko" lines): is `name` built in? */
bool gk_probe_builtin_has(const char *buf, size_t len, const char *name);
/* Module names: [A-Za-z0-9_-]{1,55}. */
bool gk_probe_valid_module_name(const char *name);

/* Our own small id table for Intel GPUs pci.ids (3.9, 2023) does not know
 * (Battlemage) plus the data-centre parts; NULL when unknown. */
const char *gk_probe_product_name(uint16_t vendor, uint16_t device);

/* ---- pure decisions --------------------------------------------------------- */

typedef struct gk_probe_srcfacts {
	bool loaded;             /* /proc/modules or initstate live/coming/going */
	bool builtin;            /* modules.builtin or /sys/module/<m> without initstate */
	const char *taint;       /* /sys/module/<m>/taint or /proc/modules "(...)", may be NULL */
	const char *srcversion;  /* of the loaded module, may be NULL */
	const char *intree_srcversion; /* of the in-tree .ko, may be NULL */
} gk_probe_srcfacts;
Gpukmm__ModuleSource gk_probe_module_source(const gk_probe_srcfacts *f);

/* Fill r->can_unload / r->unload_blocker from r->module, r->gpus and
 * r->modules_supported. Sentences, e.g.
 *   "4 SR-IOV VFs active on 0000:03:00.0; xe is in use (refcount 2, held by xe_vfio)". */
int gk_probe_unload_verdict(Gpukmm__NodeReport *r, gk_err *err);
/* Fill r->warnings (Secure Boot / lockdown vs unsigned modules, ...). */
int gk_probe_warnings(Gpukmm__NodeReport *r, gk_err *err);

#endif
