/* gpukmm — the ClusterPolicy model: defaulting, validation (the upstream
 * webhook's rules and messages plus gpukmm's stricter ones), KMM Module
 * rendering, the label keys and DaemonSet names derived from a policy, the
 * "does the existing Module already match" comparison, and the exact status /
 * error strings. Pure code: no I/O, no global state.
 *
 * Typed objects are the protobuf messages of proto/kube.proto built by
 * lib/kobj (free them with gk_kobj_free). */
#ifndef GPUKMM_POLICY_H
#define GPUKMM_POLICY_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/err.h"
#include "kube.pb-c.h"

/* ---- constants ------------------------------------------------------------ */
#define GK_POLICY_API_VERSION        "intel.com/v1alpha1"
#define GK_POLICY_KIND               "ClusterPolicy"
#define GK_POLICY_DEFAULT_MODULE     "xe"
#define GK_POLICY_DEFAULT_NAMESPACE  "intel-gpu-base-operator"   /* $OPERATOR_NAMESPACE */
#define GK_POLICY_DEFAULT_SA         "module-loader"             /* $MODULE_LOADER_SERVICE_ACCOUNT_NAME */
#define GK_POLICY_FINALIZER          "gpu.intel.com/clusterpolicy-protection"
#define GK_POLICY_MODULE_SUFFIX      "-gpu"
#define GK_POLICY_KMM_API_VERSION    "kmm.sigs.x-k8s.io/v1beta1"
#define GK_POLICY_KMM_GROUP          "kmm.sigs.x-k8s.io"
#define GK_POLICY_KMM_LABEL_PREFIX   "kmm.node.kubernetes.io/"
#define GK_POLICY_ARCH_LABEL         "kubernetes.io/arch"
#define GK_POLICY_ARCH_VALUE         "amd64"
#define GK_POLICY_NFD_LABEL          "intel.feature.node.kubernetes.io/gpu"
/* the taint a cordon means; the Module tolerates it (drain-safe) */
#define GK_POLICY_CORDON_TAINT       "node.kubernetes.io/unschedulable"
#define GK_POLICY_KMM_DIRNAME_DEFAULT "/opt"
#define GK_POLICY_KMM_MAX_NAME_NS    41  /* KMM: len(Module name) + len(namespace) */
#define GK_POLICY_LABEL_NAME_MAX     63
#define GK_POLICY_REQUEUE_DELAY_MS   5000
/* What the mutating webhook writes into empty fields (upstream's defaults, §2.2 of operands.md). */
#define GK_POLICY_DEFAULT_DP_IMAGE                                                                  \
	"docker.io/intel/intel-gpu-plugin:0.36.0@sha256:"                                       \
	"2db679be62b52ac985169084ca711cab6e6c59fe543ab2ddee58163d6f8d29e0"
#define GK_POLICY_DEFAULT_DRA_IMAGE                                                                 \
	"ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0@sha256:" \
	"49f38fcbee4f98d748b537b1a728a12f39e56fd208c86dc3fa32ab2162c21197"
#define GK_POLICY_DEFAULT_XPU_IMAGE                                                                 \
	"ghcr.io/intel/xpumanager/xpumd:v2.0.0@sha256:"                                        \
	"bd6bad4f95274832ce6863c6f7744fc73a610903617d9def2932588138be0b85"
#define GK_POLICY_DEFAULT_MONITORING "monitoring"
/* Names and label keys never exceed this (incl. NUL) for valid object names. */
#define GK_POLICY_KEY_MAX            512

/* Size limits of a ClusterPolicy: the CRD's maxItems / maxProperties / maxLength
 * (deploy/crd/intel.com_clusterpolicies.yaml says the same; policy_validate_test
 * checks that they agree), enforced by lib/policy too so that `gpukmmctl
 * validate` and the webhook say what the API server says. They bound the work
 * of one review (the webhook answers within the API server's 10 s) and are far
 * above any real need. Items past a limit are not checked further. */
#define GK_POLICY_MAX_KERNEL_MAPPINGS 128  /* spec.kernelModule.kernelMappings */
#define GK_POLICY_MAX_BUILD_ARGS      32   /* kernelMappings[].build.buildArgs */
#define GK_POLICY_MAX_BUILD_SECRETS   16   /* kernelMappings[].build.secrets */
#define GK_POLICY_MAX_IN_TREE_REMOVE  16   /* kernelMappings[].inTreeModulesToRemove */
#define GK_POLICY_MAX_LOADING_ORDER   16   /* spec.kernelModule.modulesLoadingOrder */
#define GK_POLICY_MAX_PCI_IDS         256  /* spec.dp.allowIDs, spec.dp.denyIDs (each) */
#define GK_POLICY_MAX_TOLERATIONS     64   /* spec.tolerations */
#define GK_POLICY_MAX_CLUSTER_QUEUES  32   /* spec.kueue.equalResources */
#define GK_POLICY_MAX_LOCAL_QUEUES    64   /* spec.kueue.equalResources[].localQueues */
#define GK_POLICY_MAX_NODE_SELECTOR   64   /* spec.nodeSelector (properties) */
#define GK_POLICY_MAX_REGEXP_LEN      1024 /* kernelMappings[].regexp (bytes) */
#define GK_POLICY_MAX_IMAGE_LEN       1024 /* containerImage, dra.image, dp.plugin, dp.levelzero, xpu.image */

typedef struct gk_policy_opts {
	const char *namespace_;       /* operator namespace; NULL = GK_POLICY_DEFAULT_NAMESPACE */
	const char *service_account;  /* module-loader SA; NULL = GK_POLICY_DEFAULT_SA */
} gk_policy_opts;

/* ---- validation report ------------------------------------------------------ */
typedef struct gk_policy_violation {
	char *field;   /* field path, e.g. "spec.kernelModule.kernelMappings[0].regexp" */
	char *msg;     /* the whole message as reported (upstream messages name the field themselves) */
} gk_policy_violation;

typedef struct gk_policy_report {
	gk_policy_violation *v;
	size_t n, cap;
	char **warnings;
	size_t n_warnings;
	bool oom;      /* a message could not be recorded: treat as invalid */
} gk_policy_report;

void gk_policy_report_init(gk_policy_report *r);
void gk_policy_report_free(gk_policy_report *r);
bool gk_policy_report_ok(const gk_policy_report *r);   /* no violations, no oom */
/* Violations' messages joined with "\n" (the upstream denial format); malloc'd, NULL on OOM. */
char *gk_policy_report_join(const gk_policy_report *r);
/* Record one violation (printf-style message). */
void gk_policy_reportf(gk_policy_report *r, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Record one warning (printf-style; admission passes them to the client). */
void gk_policy_report_warnf(gk_policy_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- defaulting ----------------------------------------------------------------- */
/* The mutating webhook's defaults (upstream §2.2): moduleName = "xe" when
 * kernelModule is set and moduleName is empty; dp.plugin, dra.image, xpu.image
 * and xpu.monitoringResource when empty, whatever resourceRegistration says.
 * Returns 1 if changed, 0 if not, -1 on OOM. Idempotent. */
int gk_policy_default(Gpukmm__ClusterPolicy *cp);
/* The mutating webhook's RFC 6902 JSONPatch for the object as submitted: a JSON
 * array, empty when nothing is to be defaulted. NULL on OOM. */
cJSON *gk_policy_default_patch(const cJSON *obj);

/* ---- validation ------------------------------------------------------------------ */
/* Validates a ClusterPolicy JSON object as submitted: type errors (per field),
 * unknown fields when report_unknown, schema rules (required, enums, minItems,
 * ranges), then — on the defaulted typed model — every rule of the upstream
 * webhook and gpukmm's own (gk_policy_validate). All violations are reported.
 * `typed` (may be NULL) receives the defaulted model (also when invalid). */
void gk_policy_validate_json(const cJSON *obj, bool report_unknown, const gk_policy_opts *o,
			     gk_policy_report *r, Gpukmm__ClusterPolicy **typed);
/* The admission rules on a typed policy, in upstream order, then gpukmm's.
 * Deprecation warnings go to r->warnings. */
void gk_policy_validate(const Gpukmm__ClusterPolicy *cp, const gk_policy_opts *o, gk_policy_report *r);

/* Pieces also used elsewhere. Each returns 0 when valid, else writes a message. */
int gk_policy_check_regexp(const char *re, char *msg, size_t cap);       /* Go RE2 syntax */
/* lib/policy/re2go.cc (Go regexp semantics over RE2): check 0 ok / 1 invalid
 * (Go's message) / -1 OOM; match (unanchored, like MatchString) 1 / 0 / -1 invalid. */
int gk_policy_re2go_check(const char *pattern, char *msg, size_t cap);
int gk_policy_re2go_match(const char *pattern, const char *text);
int gk_policy_check_image_ref(const char *ref, char *msg, size_t cap);   /* distribution/reference */
int gk_policy_check_dns1123_subdomain(const char *s, char *msg, size_t cap);
int gk_policy_check_dns1123_label(const char *s, char *msg, size_t cap);
int gk_policy_check_label_value(const char *s, char *msg, size_t cap);
int gk_policy_check_qualified_name(const char *s, char *msg, size_t cap);
/* KMM template placeholders (${...}, $NAME) replaced with "0"; malloc'd. */
char *gk_policy_substitute_kmm_vars(const char *image);

/* ---- KMM template variables (lib/policy/kmmvars.c) ------------------------------- */
/* The values KMM substitutes for one node kernel. mod_name/mod_namespace:
 * the Module's (containerImage only); leave NULL for sign fields, where KMM
 * does not substitute them (they become ""). */
typedef struct gk_policy_kmm_vars {
	char full[256];              /* KERNEL_FULL_VERSION = KERNEL_VERSION */
	char xyz[256];               /* KERNEL_XYZ */
	char x[64], y[64], z[64];    /* KERNEL_X, KERNEL_Y, KERNEL_Z */
	const char *mod_name, *mod_namespace;
} gk_policy_kmm_vars;
/* From a node's kernelVersion as KMM does (one trailing "+" trimmed, bytes
 * outside [A-Za-z0-9._-] -> '_', at least three [.,-] parts). 0, or -1 with
 * KMM's message ("...expected at least three components...") in msg. */
int gk_policy_kmm_vars_for_kernel(const char *kernel, gk_policy_kmm_vars *v, char *msg, size_t cap);
/* envsubst as KMM runs it: $NAME, ${NAME}, ${NAME<op>default} (- = + :- := :+),
 * $$ = '$'; unknown names are unset (""). malloc'd, or NULL with msg
 * ("${" without "}", out of memory). */
char *gk_policy_kmm_expand(const char *tmpl, const gk_policy_kmm_vars *v, char *msg, size_t cap);
/* 1 when tmpl references a variable KMM does not substitute in that field
 * (KERNEL_* everywhere, MOD_NAME/MOD_NAMESPACE only when with_mod): its name in
 * `name`; 0 when none; -1 for "${" without "}". */
int gk_policy_kmm_unknown_var(const char *tmpl, bool with_mod, char *name, size_t cap);
/* Does tmpl reference any variable (so its value depends on the node)? */
bool gk_policy_kmm_has_vars(const char *tmpl);

/* ---- signing and module parameters (lib/policy/sign.c) ------------------------- */
/* kernelModule.sign.filesToSign when no level lists a file: the module as KMM's
 * documented kmod image layout holds it, <dirName>/lib/modules/<kernel>/<name>.ko:
 * "/opt/lib/modules/${KERNEL_FULL_VERSION}/<module_name>.ko". 0 or GK_OUT_OF_RANGE. */
int gk_policy_sign_default_file(char *buf, size_t cap, const char *module_name);
/* Is the module image of mapping i signed by KMM (kernelModule.sign or the mapping's own)? */
bool gk_policy_mapping_signed(const Gpukmm__KernelModuleSpec *km, size_t i);
/* The unsigned image KMM signs for mapping i: the mapping's sign.unsignedImage,
 * else kernelModule.sign's; NULL when unsigned, built in-cluster or unset. */
const char *gk_policy_mapping_unsigned_image(const Gpukmm__KernelModuleSpec *km, size_t i);
/* lib/policy/validate_kmm.c, called by gk_policy_validate: kernelModule.parameters
 * (key=value, a module-parameter key, a value without whitespace or shell
 * metacharacters, no key twice), every KMM signing rule with the field in the
 * message (both secrets, filesToSign under dirName and safe for KMM's sign
 * shell, unsignedImage unless built and not the containerImage, the list KMM
 * needs per level), and template variables KMM would not substitute. */
void gk_policy_validate_kmm(const Gpukmm__KernelModuleSpec *km, gk_policy_report *r);

/* ---- kernelModule.upgradePolicy (lib/policy/upgrade.c) --------------------------- */
#define GK_POLICY_UPGRADE_MAX_PARALLEL        1
#define GK_POLICY_UPGRADE_MAX_UNAVAILABLE_PCT 25
#define GK_POLICY_UPGRADE_DRAIN_TIMEOUT_S     300
/* The node labels and annotations of a rolling upgrade (gpukmm-upgrader). */
#define GK_POLICY_UPGRADE_STATE_LABEL     "gpukmm.io/upgrade-state"
#define GK_POLICY_UPGRADE_SKIP_LABEL      "gpukmm.io/upgrade-skip"
#define GK_POLICY_UPGRADE_CORDONED_ANN    "gpukmm.io/upgrade-cordoned"
#define GK_POLICY_UPGRADE_STARTED_ANN     "gpukmm.io/upgrade-started"
#define GK_POLICY_UPGRADE_FROM_ANN        "gpukmm.io/upgrade-from"
#define GK_POLICY_UPGRADE_REASON_ANN      "gpukmm.io/upgrade-reason"
/* The values of the state label (absent: not in a rollout). */
#define GK_POLICY_UPGRADE_DRAINING  "draining"
#define GK_POLICY_UPGRADE_UNLOADING "unloading"
#define GK_POLICY_UPGRADE_LOADING   "loading"
#define GK_POLICY_UPGRADE_DONE      "done"
#define GK_POLICY_UPGRADE_FAILED    "failed"

/* The policy with its defaults applied (strings borrowed from the policy). */
typedef struct gk_policy_upgrade {
	bool auto_upgrade;            /* false */
	int max_parallel;             /* 1 */
	int max_unavailable;          /* 25, a percentage when max_unavailable_percent */
	bool max_unavailable_percent;
	bool drain_enable;            /* true */
	int drain_timeout_s;          /* 300 */
	bool has_grace_period;
	int64_t grace_period_s;
	const char *pod_selector;     /* NULL: pods using Intel GPUs */
	bool delete_empty_dir_data, force;
} gk_policy_upgrade;
/* km may be NULL (all defaults). Invalid values (refused at admission) fall back to the defaults. */
void gk_policy_upgrade_resolve(const Gpukmm__KernelModuleSpec *km, gk_policy_upgrade *out);
/* maxUnavailable for `nodes` nodes: the number, or the percentage rounded up
 * (at least 1 when nodes > 0). */
int gk_policy_upgrade_max_unavailable(const gk_policy_upgrade *u, int nodes);
/* An IntOrString that is an integer >= 1 or "N%" with 1 <= N <= 100: 0 and
 * the value, else -1. */
int gk_policy_int_or_percent(const Gpukmm__IntOrString *v, int *out, bool *percent);
/* The upgradePolicy rules (called by gk_policy_validate). */
void gk_policy_validate_upgrade(const Gpukmm__KernelModuleSpec *km, gk_policy_report *r);
/* A label selector in kubectl -l syntax with valid keys and values: 0, else 1 and why in msg. */
int gk_policy_check_label_selector(const char *sel, char *msg, size_t cap);

/* ---- the images a policy makes a cluster pull (lib/policy/images.c) ------------- */
enum gk_policy_image_role {
	GK_POLICY_IMAGE_OPERAND = 1u << 0,  /* device plugin, DRA driver, XPU Manager */
	GK_POLICY_IMAGE_MODULE = 1u << 1,   /* a kernel mapping's module image, pulled by KMM's loader */
	GK_POLICY_IMAGE_UNSIGNED = 1u << 2, /* pulled by KMM's sign job, signed, pushed as the module image */
	GK_POLICY_IMAGE_BUILT = 1u << 3,    /* the module image is built in-cluster and pushed by KMM */
	GK_POLICY_IMAGE_SIGNED = 1u << 4,   /* the module image is pushed by KMM's sign job */
};
typedef struct gk_policy_image {
	char *image;
	unsigned roles;          /* enum gk_policy_image_role bits */
	char **sources;          /* field paths it comes from (deduplicated) */
	size_t n_sources;
	char **kernels;          /* node kernels it serves, as KMM normalises them (module images) */
	size_t n_kernels;
} gk_policy_image;
typedef struct gk_policy_unmapped {
	char *node, *kernel, *reason;
} gk_policy_unmapped;
typedef struct gk_policy_images {
	gk_policy_image *v;      /* sorted by image */
	size_t n, cap;
	gk_policy_unmapped *unmapped; /* selected nodes that get no module image */
	size_t n_unmapped;
	char **notes;            /* templated images left out for want of nodes, build base images */
	size_t n_notes;
} gk_policy_images;
/* Adds every image policy `cp` (defaulted) makes a cluster pull: the operand
 * images of what it deploys, and, per node selected by the Module's node
 * selector (nodes may be NULL: then only module images without KMM variables),
 * the module image of the kernel mapping KMM would pick, KMM's variables
 * substituted for that node's kernel, plus the unsigned image KMM signs.
 * Calls accumulate (several policies). GK_RESOURCE_EXHAUSTED on OOM. */
int gk_policy_images_add(gk_policy_images *out, const Gpukmm__ClusterPolicy *cp, const gk_policy_opts *o,
			 Gpukmm__Node *const *nodes, size_t n_nodes, bool have_nodes);
void gk_policy_images_free(gk_policy_images *l);

/* ---- names and keys --------------------------------------------------------------- */
/* All write a NUL-terminated string into buf and return 0, or GK_OUT_OF_RANGE if
 * it does not fit. */
int gk_policy_module_name(char *buf, size_t cap, const char *cp_name);            /* <cp>-gpu */
int gk_policy_ready_label(char *buf, size_t cap, const char *ns, const char *cp_name);
/* kmm.node.kubernetes.io/version-module.<ns>.<cp>-gpu */
int gk_policy_version_label(char *buf, size_t cap, const char *ns, const char *cp_name);

enum gk_policy_ds {
	GK_POLICY_DS_DEVICE_PLUGIN = 1u << 0,   /* <cp>-device-plugin */
	GK_POLICY_DS_DRA = 1u << 1,             /* <cp>-gpu-dra */
	GK_POLICY_DS_XPU_MANAGER = 1u << 2,     /* <cp>-xpu-manager */
};
#define GK_POLICY_DS_ALL (GK_POLICY_DS_DEVICE_PLUGIN | GK_POLICY_DS_DRA | GK_POLICY_DS_XPU_MANAGER)
/* Which DaemonSets the policy deploys (dp: device plugin; dra with DRA available:
 * DRA plugin; resourceMonitoring: XPU manager). */
unsigned gk_policy_daemonsets(const Gpukmm__ClusterPolicySpec *spec, bool dra_available);
int gk_policy_ds_name(char *buf, size_t cap, const char *cp_name, enum gk_policy_ds which);
/* Gating applies when KMM is available and kernelModule is set. */
bool gk_policy_gating_wanted(const Gpukmm__ClusterPolicySpec *spec, bool kmm_available);
/* The policy's KMM Module is being deleted to be created again (gpukmm-modmgr
 * deleted it for a version toggle, or someone else deleted it): the status's
 * ModuleLoaded condition has the reason "Recreating", as modmgr reports it from
 * a read of the Module. Its gated operands then leave the nodes: they hold the
 * driver open, and KMM's unload of the old Module fails while they run there
 * (ARCHITECTURE §5 "The operands leave before KMM unloads"). */
bool gk_policy_module_recreating(const Gpukmm__ClusterPolicy *cp);
#define GK_POLICY_COND_MODULE_LOADED "ModuleLoaded"
#define GK_POLICY_REASON_RECREATING  "Recreating"
/* The ready key's value in a gated DaemonSet's nodeSelector while the policy's
 * Module is recreated: no node carries it, so the DaemonSet controller takes the
 * pods off every node (KMM's ready label itself is ""). */
#define GK_POLICY_GATE_HOLD_VALUE    "module-recreating"

/* A node selector: sorted KeyValue list owned by the struct. */
typedef struct gk_policy_selector {
	Gpukmm__KeyValue **kv;
	size_t n;
} gk_policy_selector;
void gk_policy_selector_free(gk_policy_selector *s);
/* {arch: amd64} overlaid by spec.nodeSelector, + NFD label when useNFDLabeling,
 * + {ready_label: ""} when ready_label is non-NULL (DaemonSets when gated; the
 * Module's own selector never has it). 0 or GK_RESOURCE_EXHAUSTED. */
int gk_policy_node_selector(const Gpukmm__ClusterPolicySpec *spec, const char *ready_label,
			    gk_policy_selector *out);

/* The index of the first kernelMapping whose regexp matches `kernel` (a
 * node's status.nodeInfo.kernelVersion; one trailing "+" is ignored, as KMM
 * does), or -1 when none matches (also for an empty kernel or no mappings). */
int gk_policy_kernel_mapping(const Gpukmm__KernelModuleSpec *km, const char *kernel);

/* ---- Module rendering -------------------------------------------------------------- */
/* The desired Module for a policy with kernelModule set (call gk_policy_default
 * first; a policy that fails validation may render something KMM rejects).
 * The owner reference's uid is the policy's metadata.uid (unset when absent).
 * Its tolerations are the policy's plus, unless one of them tolerates it
 * already, node.kubernetes.io/unschedulable:NoSchedule (Exists): a cordon or a
 * drain never unloads the driver.
 * GK_FAILED_PRECONDITION when kernelModule is unset. */
int gk_policy_render_module(const Gpukmm__ClusterPolicy *cp, const gk_policy_opts *o, Gpukmm__Module **out,
			    gk_err *err);
/* The whole Module object {apiVersion, kind, metadata{name, namespace,
 * ownerReferences}, spec} as it would be created. NULL on OOM. */
cJSON *gk_policy_module_to_json(const Gpukmm__Module *m);

/* RFC 7386 JSON merge patch turning a into b, recursing into objects (a key of a
 * missing from b becomes null at any depth; arrays and scalars are replaced whole).
 * *out is NULL when a equals b. Returns false on OOM. Pure. */
bool gk_policy_merge_diff(const cJSON *a, const cJSON *b, cJSON **out);

/* ---- existing vs desired ------------------------------------------------------------ */
/* Compares the managed parts (controller owner reference, selector, tolerations,
 * imageRepoSecret, moduleLoader) of the existing Module with the desired one,
 * ignoring what KMM defaults (modprobe.dirName "/opt") and what gpukmm does not
 * manage. *patch = NULL when no write is needed, else the JSON merge patch to
 * send (removed keys null, lists replaced wholesale). GK_FAILED_PRECONDITION
 * when the Module has another controller owner ("failed to set controller
 * reference: ..."); GK_RESOURCE_EXHAUSTED on OOM. */
int gk_policy_module_diff(const Gpukmm__Module *existing, const Gpukmm__Module *desired, cJSON **patch,
			  gk_err *err);
/* KMM rejects switching container.version between empty and non-empty in place:
 * true when that is what existing -> desired would do (delete + recreate needed). */
bool gk_policy_version_toggled(const Gpukmm__Module *existing, const Gpukmm__Module *desired);

/* ---- KMM's own Module admission (lib/policy/kmm_admit.c) ---------------------------- */
/* The API server's Kubernetes version (KMM gates spec.dra on >= 1.34). */
typedef struct gk_policy_kube_version {
	int major, minor;
} gk_policy_kube_version;
enum gk_policy_kmm_verdict { GK_POLICY_KMM_ALLOW = 0, GK_POLICY_KMM_DENY = 1, GK_POLICY_KMM_BAD = 2 };
/* KMM's validateModule (and ValidateUpdate when old != NULL) on Module JSON, in
 * KMM's order (name length, tolerations, DRA, hostPath volumes, container and
 * kernel mappings, modprobe, signing; version empty<->non-empty on update).
 * Returns GK_POLICY_KMM_ALLOW, GK_POLICY_KMM_DENY (msg = KMM's first error,
 * worded as KMM words it) or GK_POLICY_KMM_BAD (not decodable as a Module; msg
 * says which field). kv may be NULL (no DRA version gate, like KMM's hub). */
int gk_policy_kmm_admit_json(const cJSON *obj, const cJSON *old, const gk_policy_kube_version *kv, char *msg,
			     size_t cap);
/* The same on a typed Module (as created: no old object, no version gate). */
int gk_policy_kmm_admit(const Gpukmm__Module *m, char *msg, size_t cap);

/* ---- status and error strings (upstream §1.5 / §5.2, exact) --------------------------- */
#define GK_POLICY_STATUS_NA          "N/A"
#define GK_POLICY_STATUS_RECREATING  "Recreating"
#define GK_POLICY_STATUS_REMOVING    "Removing"
#define GK_POLICY_MSG_KMM_NOT_INSTALLED "KMM is not installed in the cluster."
#define GK_POLICY_MSG_DRA_NOT_ENABLED   "DRA is not enabled in the cluster, but ClusterPolicy requests it."
#define GK_POLICY_WARN_LEVELZERO        "dp.levelzero is no longer used and will be ignored."

/* kmmStatus "<available>/<desired>" (missing counts as 0). */
int gk_policy_kmm_status(char *buf, size_t cap, const Gpukmm__Module *m);
/* desiredNumber > 0 && availableNumber < desiredNumber */
bool gk_policy_module_not_fully_available(const Gpukmm__Module *m);

/* Each formats one message into buf (snprintf semantics, returns its length).
 * m = Module name, cp = ClusterPolicy name, e = the underlying error text. */
int gk_policy_msg_not_fully_available(char *buf, size_t cap, const char *m, int avail, int desired);
int gk_policy_msg_blocking_deletion(char *buf, size_t cap, const char *m);
int gk_policy_msg_pending_deletion(char *buf, size_t cap, const char *m);
int gk_policy_msg_blocking_recreation(char *buf, size_t cap, const char *m);
int gk_policy_msg_get_failed(char *buf, size_t cap, const char *m, const char *e);
int gk_policy_msg_delete_failed(char *buf, size_t cap, const char *m, const char *e);
int gk_policy_msg_delete_for_version_failed(char *buf, size_t cap, const char *m, const char *e);
int gk_policy_msg_reconcile_failed(char *buf, size_t cap, const char *m, const char *cp, const char *e);
int gk_policy_msg_owner_conflict(char *buf, size_t cap, const char *ns, const char *m, const char *owner_kind,
				 const char *owner_name);
/* log lines */
int gk_policy_log_ordered_upgrade(char *buf, size_t cap, const char *ns, const char *m, const char *version);
int gk_policy_log_version_toggled(char *buf, size_t cap, const char *m, const char *old_v, const char *new_v);
int gk_policy_log_apply_result(char *buf, size_t cap, const char *m, const char *result); /* unchanged|created|updated */

#endif
