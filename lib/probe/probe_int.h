/* lib/probe — private: the state of one probe run shared by its files. */
#ifndef GPUKMM_PROBE_INT_H
#define GPUKMM_PROBE_INT_H

#include "gpukmm/probe.h"

typedef struct gk_probe_run {
	const char *root;        /* never NULL; "/" or a fixture dir */
	const char *module;
	const char *pci_dump;
	size_t file_max;         /* cap of one sysfs/procfs attribute */
	size_t big_max;          /* cap of list files (/proc/modules, modules.builtin) */
	char kver[256];          /* "" when unknown */
	Gpukmm__NodeReport *r;
	int oom;                 /* an allocation failed: the run returns RESOURCE_EXHAUSTED */
	/* gkp_dir_enter: reads of <dir_rel>/<name> go through this open directory
	 * (one path walk per PCI device instead of one per attribute); -1 none */
	int dir_fd;
	size_t dir_len;
	char dir_rel[128];
} gk_probe_run_t;

/* Report building (malloc'd fields, freed by protobuf_c_message_free_unpacked). */
char *gkp_strdup(gk_probe_run_t *pr, const char *s);
void gkp_problem(gk_probe_run_t *pr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int gkp_strv_add(gk_probe_run_t *pr, size_t *n, char ***v, size_t max, const char *s);

/* Read <root>/<rel>; on any error other than NOT_FOUND adds a problem
 * "<rel> is unreadable: <why>" (when `problem_if_missing` also for NOT_FOUND).
 * Returns the gk code. */
int gkp_read(gk_probe_run_t *pr, const char *rel, char **buf, size_t *len, bool problem_if_missing);
int gkp_read_cap(gk_probe_run_t *pr, const char *rel, size_t cap, char **buf, size_t *len,
		 bool problem_if_missing);
/* Read and parse a one-line text file; 0 ok, NOT_FOUND absent (no problem),
 * else a problem was recorded. */
int gkp_read_line(gk_probe_run_t *pr, const char *rel, char *out, size_t cap);
int gkp_read_hex(gk_probe_run_t *pr, const char *rel, uint32_t max, uint32_t *out);
/* gkp_read_hex, and a missing file is a problem too */
int gkp_read_hex_req(gk_probe_run_t *pr, const char *rel, uint32_t max, uint32_t *out);
int gkp_read_int(gk_probe_run_t *pr, const char *rel, int64_t min, int64_t max, int64_t *out);
/* Open <root>/<rel> (a directory) so that the reads and links of its
 * entries named by their full rel (messages unchanged) skip the path walk;
 * leave closes it. Without the directory the reads go by path as before. */
void gkp_dir_enter(gk_probe_run_t *pr, const char *rel);
void gkp_dir_leave(gk_probe_run_t *pr);
/* <root>/<rel> joined; returns -1 when it does not fit. */
int gkp_path(const gk_probe_run_t *pr, char *out, size_t cap, const char *rel);
bool gkp_exists(const gk_probe_run_t *pr, const char *rel);
bool gkp_is_dir(const gk_probe_run_t *pr, const char *rel);
/* Base name of the target of symlink <root>/<rel> into out; -1 if not a symlink. */
int gkp_link_base(const gk_probe_run_t *pr, const char *rel, char *out, size_t cap);

/* The JSON names of the enums (rjson.c): "true"/"false"/"unknown";
 * "none"/"in-tree"/"oot"/"builtin"/"unknown". */
const char *gkp_tri_name(Gpukmm__TriState t);
const char *gkp_source_name(Gpukmm__ModuleSource s);

/* pci.ids answers kept while the file is the same (idscache.c). gkp_ids_cached:
 * 1 listed (NAME filled), 0 known not to be listed, -1 not cached. NAME NULL in
 * gkp_ids_remember: not listed. gkp_ids_forget empties the cache. */
#define GKP_IDS_CACHE_MAX 32
struct stat;
int gkp_ids_cached(const char *path, const struct stat *st, uint16_t vendor, uint16_t device, char *name, size_t cap);
void gkp_ids_remember(const char *path, const struct stat *st, uint16_t vendor, uint16_t device, const char *name);
void gkp_ids_forget(void);

/* Parts of a run. */
void gkp_pci(gk_probe_run_t *pr);
void gkp_modules(gk_probe_run_t *pr);

#endif
