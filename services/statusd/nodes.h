/* gpukmm-statusd controller mode: the per-node digest (what a ClusterPolicy's
 * `status.nodes` needs from a Node and its gpukmm.io/node-report annotation,
 * bounded — not the whole report) and the pure per-policy summary: counts of
 * GPU nodes by module state and the first problem nodes with their reason.
 * No I/O, no clock. */
#ifndef GPUKMM_STATUSD_NODES_H
#define GPUKMM_STATUSD_NODES_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "kube.pb-c.h"

#define GK_SD_NODE_NAME_MAX 254
#define GK_SD_MAX_PROBLEMS 10            /* problem nodes listed in status.nodes.problems */
#define GK_SD_MAX_REASONS 16             /* distinct problem reasons counted */
#define GK_SD_NODE_LABELS_MAX 256         /* labels kept per node */
#define GK_SD_NODE_LABEL_BYTES 32768      /* their total size */
#define GK_SD_NODE_REPORT_MAX (256 * 1024) /* larger annotations are not parsed */
#define GK_SD_NODE_MODS 4                 /* modules kept from a report (main + related) */

typedef enum gk_sd_report_state {
	GK_SD_REPORT_NONE = 0, /* no gpukmm.io/node-report annotation */
	GK_SD_REPORT_BAD,      /* present but unreadable (garbage, truncated, too large) */
	GK_SD_REPORT_OK,
} gk_sd_report_state;

/* The strings of a digest are pooled (gk_strpool, one pool for every digest
 * of the process): thousands of Nodes share their label keys and values, their
 * kernel, module names; the same string is the same pointer. Each is cut to
 * the size the fixed fields had (a report is node-written). */
#define GK_SD_KERNEL_MAX 127  /* bytes kept of a kernel version */
#define GK_SD_MOD_NAME_MAX 47 /* of a module name */
#define GK_SD_SUMMARY_MAX 255 /* of the summary reason */

typedef struct gk_sd_mod {
	const char *name; /* pooled */
	int source;       /* Gpukmm__ModuleSource */
	bool loaded;
	bool ko_unsigned; /* the .ko modprobe would load carries no signature */
} gk_sd_mod;

typedef struct gk_sd_node {
	const char *name;          /* pooled */
	const char *kernel;        /* status.nodeInfo.kernelVersion (what KMM matches); "" when none */
	const char *report_kernel; /* the report's kernel, when the Node has none */
	const char **labels;       /* n_labels (key, value) pairs, pooled */
	uint32_t n_labels;
	bool labels_truncated;
	gk_sd_report_state report;
	uint32_t gpus;           /* physical functions */
	uint32_t vfs;            /* active SR-IOV VFs (sum of sriov_numvfs, at least the VFs seen) */
	bool secure;             /* Secure Boot on, or kernel lockdown integrity/confidentiality */
	bool secure_boot;        /* Secure Boot on (for the wording) */
	bool summarized;         /* the report was over the annotation budget */
	gk_sd_mod mods[GK_SD_NODE_MODS];
	size_t n_mods;
	const char *summary;     /* why, as the report says; "" when not summarized */
} gk_sd_node;

/* Digest of a typed Node (the watcher's; annotations are the gpukmm.io/ ones).
 * `out` is overwritten; free with gk_sd_node_clear (also after an error).
 * GK_RESOURCE_EXHAUSTED on OOM. */
int gk_sd_node_digest(const Gpukmm__Node *n, gk_sd_node *out, gk_err *err);
void gk_sd_node_clear(gk_sd_node *d);
bool gk_sd_node_equal(const gk_sd_node *a, const gk_sd_node *b);
/* A label's value, NULL when absent. */
const char *gk_sd_node_label(const gk_sd_node *d, const char *key);
/* Distinct strings the digests of the process hold (the pool's size). */
size_t gk_sd_node_pooled(void);

typedef struct gk_sd_problem {
	char node[GK_SD_NODE_NAME_MAX];
	const char *reason; /* CamelCase, static */
	char message[256];
} gk_sd_problem;

/* A policy's node summary. Selected nodes = those matching the Module's node
 * selector (kubernetes.io/arch=amd64, spec.nodeSelector, the NFD label with
 * useNFDLabeling). Of those, GPU nodes are the ones whose node report shows a
 * GPU (a physical function) and the module's state:
 *   gpu_nodes = oot_loaded + in_tree_loaded + not_loaded
 * unknown = selected nodes whose GPU/module state is not known (no report,
 * unreadable report, or the report does not cover the policy's module). */
typedef struct gk_sd_nodes {
	uint32_t selected, gpu_nodes, oot_loaded, in_tree_loaded, not_loaded, unknown;
	uint32_t problem_nodes;  /* all problem nodes (problems[] lists the first few) */
	struct {
		const char *reason;  /* static */
		uint32_t nodes;
	} by_reason[GK_SD_MAX_REASONS]; /* problem nodes per reason (metrics) */
	size_t n_reasons;
	gk_sd_problem problems[GK_SD_MAX_PROBLEMS];
	size_t n_problems;
	/* GPU nodes where the module is not what the policy wants (ModuleLoaded) */
	uint32_t blocking;
	gk_sd_problem first_blocking;
	/* problem nodes an admin has to act on (Degraded): not plain rollout
	 * progress ("not loaded" while KMM works) nor a missing report */
	uint32_t attention;
	gk_sd_problem first_attention;
	bool wants_oot;          /* spec.kernelModule set */
	/* selected nodes whose report is summarized (over the annotation budget):
	 * not a problem, listed with the reason (the first few by name) */
	uint32_t summarized_nodes;
	gk_sd_problem summarized[GK_SD_MAX_PROBLEMS];
	size_t n_summarized;
} gk_sd_nodes;

/* The summary of policy `cp` over `nodes` (sorted by name: problems keep that
 * order). 0, or GK_RESOURCE_EXHAUSTED. */
int gk_sd_nodes_summarize(const Gpukmm__ClusterPolicy *cp, const gk_sd_node *const *nodes, size_t n,
			  gk_sd_nodes *out, gk_err *err);
/* status.nodes as JSON (a new object), NULL on OOM. */
cJSON *gk_sd_nodes_json(const gk_sd_nodes *s);

#endif
