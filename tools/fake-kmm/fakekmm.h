/* fake-kmm — a fake KMM (Kernel Module Management) controller for tests.
 *
 * It talks to the Kubernetes API only, like KMM: it serves KMM's validating
 * admission webhook for Modules, keeps the per-node ready labels and
 * status.moduleLoader counts, and holds its finalizer while unloading.
 * Reference: KMM's behaviour as described in the project's kmm.md notes.
 *
 * This header is the pure part (no I/O): Kubernetes name validation, the
 * admission rules, the AdmissionReview envelope, the Module/Node views, node
 * targeting and the per-(module, node) plan. main.c/ctrl.c/webhook.c do the I/O.
 *
 * Node annotations read and written by fake-kmm (documented in the report and
 * tools/fake-kmm/README.md):
 *   fake-kmm.gpukmm.io/fault: comma-separated list of
 *       image-pull-failure  the kmod image cannot be pulled: the node is desired,
 *                           never loads (never ready, never available)
 *       load-failure        modprobe fails: same effect as image-pull-failure
 *       unload-refused      modprobe -r fails (module in use): the node keeps the
 *                           module, so a deleted Module keeps its finalizer
 *   fake-kmm.gpukmm.io/unload-failed.<ns>.<name>: written by fake-kmm while an
 *       unload is wanted but fails: KMM's unloader worker pod crash-looping on
 *       "modprobe: FATAL: Module xe is in use" because a pod on the node holds
 *       the GPU (one requesting gpu.intel.com/..., holding a ResourceClaim, or a
 *       pod of a DaemonSet gated on the Module's ready label — the device
 *       plugin) or the unload-refused fault. Removed when the unload goes
 *       through or is no longer wanted.
 *   fake-kmm.gpukmm.io/loaded.<ns>.<name>: "<kernel>[ <version>]" — written by
 *       fake-kmm: what is loaded on the node (KMM keeps this in the node's
 *       NodeModulesConfig status). Derived state lives in the API, so a
 *       restarted fake-kmm continues where it stopped.
 *   gpukmm.io/node-report (read): the node profile's report; Secure Boot on
 *       (or kernel lockdown integrity/confidentiality) makes the node refuse
 *       an unsigned module, as the kernel does.
 * Module annotation written by fake-kmm (KMM keeps it in the ModuleImagesConfig
 * status):
 *   fake-kmm.gpukmm.io/image.<kernel>: "<state> <image>" — the signed module
 *       image for that (normalised) kernel: NeedsSigning while the sign job
 *       runs (--sign-delay-ms), then Exists. */
#ifndef GPUKMM_FAKEKMM_H
#define GPUKMM_FAKEKMM_H

#include <cJSON.h>
#include <stddef.h>

#include "gpukmm/err.h"
#include "gpukmm/policy.h"

#define FK_FINALIZER "kmm.node.kubernetes.io/module-finalizer"
#define FK_FAULT_ANNOTATION "fake-kmm.gpukmm.io/fault"
#define FK_LOADED_PREFIX "fake-kmm.gpukmm.io/loaded."
#define FK_LABEL_PREFIX "kmm.node.kubernetes.io/"
#define FK_VERSION_LABEL_PREFIX "kmm.node.kubernetes.io/version-module."
#define FK_WEBHOOK_PATH "/validate-kmm-sigs-x-k8s-io-v1beta1-module"
#define FK_WEBHOOK_NAME "vmodule.kb.io"
#define FK_IMAGE_PREFIX "fake-kmm.gpukmm.io/image."
#define FK_UNLOAD_FAILED_PREFIX "fake-kmm.gpukmm.io/unload-failed."
#define FK_REPORT_ANNOTATION "gpukmm.io/node-report"
#define FK_IMAGE_MAX 1024

/* ---- admission: lib/policy's gk_policy_kmm_admit_json (KMM's rules) ---------- */
typedef gk_policy_kube_version fk_kube_version;

/* ---- AdmissionReview v1 envelope (review.c) ------------------------------ */
/* Handles one AdmissionReview request body like controller-runtime: the
 * answer is always an AdmissionReview (HTTP 200) — denied: allowed=false,
 * status {403, Forbidden, KMM's message}; undecodable: status {400, why}.
 * Returns the malloc'd response body, NULL only on out-of-memory. */
char *fk_review_handle(const char *body, size_t len, const fk_kube_version *kv, int *http_status);

/* ---- webhook listener and its registration (webhook.c, whconfig.c) ------ */
typedef struct fk_listen {
	int tls;        /* https */
	char host[64];  /* numeric IPv4 address */
	int port;       /* 0 = ephemeral */
} fk_listen;
/* "http://127.0.0.1:0", "https://0.0.0.0:9443"; host must be numeric IPv4. */
int fk_listen_parse(const char *url, fk_listen *l, gk_err *err);

/* The ValidatingWebhookConfiguration KMM installs (vmodule.kb.io, CREATE and
 * UPDATE of modules, failurePolicy Fail) pointing at `url` (clientConfig.url,
 * path included); ca_pem (may be NULL) becomes clientConfig.caBundle. */
cJSON *fk_webhook_config_object(const char *name, const char *url, const char *ca_pem);

typedef struct fk_webhook fk_webhook;
/* Serves POST FK_WEBHOOK_PATH and GET /healthz on its own thread (libmicrohttpd).
 * cert/key files (PEM) are needed for https. kv: Kubernetes version for the DRA
 * gate (copied; NULL = no gate). */
int fk_webhook_start(fk_webhook **out, const fk_listen *l, const char *cert_file, const char *key_file,
		     const fk_kube_version *kv, gk_err *err);
/* "http://127.0.0.1:PORT" with the port really bound. */
const char *fk_webhook_base_url(const fk_webhook *w);
/* The PEM certificate served (https), NULL for http: the caBundle to register. */
const char *fk_webhook_cert_pem(const fk_webhook *w);
void fk_webhook_stop(fk_webhook *w);

/* ---- views of Modules and Nodes (model.c) --------------------------------
 * Strings point into the cJSON object the view was parsed from (borrowed:
 * keep the object alive while the view is used). Bounded arrays. */
#define FK_MAX_ITEMS 64
typedef struct fk_kv {
	const char *key, *val;
} fk_kv;
typedef struct fk_toleration {
	const char *key, *op, *value, *effect;
} fk_toleration;
typedef struct fk_taint {
	const char *key, *value, *effect;
} fk_taint;
typedef struct fk_mapping {
	const char *literal, *regexp;
	const char *image;  /* containerImage, "" when unset */
	int has_sign;       /* the mapping has its own sign */
} fk_mapping;

typedef struct fk_module {
	const char *ns, *name, *rv;
	int deleting, has_finalizer, has_loader;
	fk_kv selector[FK_MAX_ITEMS];
	size_t nselector;
	fk_toleration tols[FK_MAX_ITEMS];
	size_t ntols;
	fk_mapping maps[FK_MAX_ITEMS];
	size_t nmaps;
	const char *version; /* "" when unset */
	const char *module_name; /* container.modprobe.moduleName, "" when unset */
	const char *container_image; /* container.containerImage, "" when unset */
	int has_sign;                /* container.sign set */
	const cJSON *annotations;    /* metadata.annotations (or NULL) */
	/* current status.moduleLoader (absent fields = 0) */
	int st_present, st_matching, st_desired, st_available;
} fk_module;

enum fk_fault { FK_FAULT_PULL = 1, FK_FAULT_LOAD = 2, FK_FAULT_UNLOAD = 4 };

typedef struct fk_node {
	const char *name;
	const char *kernel; /* status.nodeInfo.kernelVersion, "" when unset */
	int unschedulable;  /* spec.unschedulable (cordon) */
	const cJSON *labels, *annotations; /* objects (or NULL) */
	fk_taint taints[FK_MAX_ITEMS];
	size_t ntaints;
	unsigned faults; /* enum fk_fault bits */
	int secure;      /* the node report says Secure Boot on or lockdown integrity/confidentiality */
	const cJSON *const *pods; /* the live pods bound to the node (borrowed, may be NULL) */
	size_t npods;
} fk_node;

int fk_module_parse(const cJSON *obj, fk_module *m, gk_err *err);
int fk_node_parse(const cJSON *obj, fk_node *n, gk_err *err);
/* Parses the fault annotation value; unknown words are ignored. */
unsigned fk_faults_parse(const char *v);
/* String value of a key in a JSON object of strings, NULL when absent. */
const char *fk_obj_str(const cJSON *obj, const char *key);

/* Label/annotation keys for a module (buffers of FK_KEY_MAX). */
#define FK_KEY_MAX 320
void fk_key_ready(char *buf, const fk_module *m);         /* …/<ns>.<name>.ready */
void fk_key_version_ready(char *buf, const fk_module *m); /* …/<ns>.<name>.version.ready */
void fk_key_version_module(char *buf, const fk_module *m);/* …/version-module.<ns>.<name> */
void fk_key_loaded(char *buf, const fk_module *m);        /* fake-kmm.gpukmm.io/loaded.<ns>.<name> */
void fk_key_unload_failed(char *buf, const fk_module *m); /* fake-kmm.gpukmm.io/unload-failed.<ns>.<name> */
/* Does this pod (live, on the node) hold the module's GPUs open: it requests a
 * gpu.intel.com/... resource, holds a ResourceClaim, or its nodeSelector has
 * the Module's ready label (a DaemonSet gated on it: the device plugin). */
int fk_pod_holds(const fk_module *m, const cJSON *pod);
/* fake-kmm.gpukmm.io/image.<normalised kernel> (a Module annotation) */
void fk_key_image(char *buf, const char *kernel);
/* 1 when the report JSON says Secure Boot on or kernel lockdown integrity/confidentiality. */
int fk_report_secure(const char *report_json);

/* ---- signing (sign.c) ------------------------------------------------------ */
enum fk_image_state { FK_IMAGE_NONE = 0, FK_IMAGE_NEEDS_SIGNING, FK_IMAGE_EXISTS };
/* Is the image of mapping i signed by KMM (container-level or the mapping's sign)? */
int fk_mapping_signed(const fk_module *m, int i);
/* The module image of mapping i for a node kernel, KMM's variables substituted
 * (the mapping's containerImage, else the container's). 0, or -1 (msg) when
 * KMM could not substitute it. */
int fk_mapping_image(const fk_module *m, int i, const char *kernel, char *buf, size_t cap, char *msg, size_t mcap);
/* The recorded state of `image` for `kernel` (NONE when absent or for another image). */
enum fk_image_state fk_image_state(const fk_module *m, const char *kernel, const char *image);
/* "<state> <image>" */
void fk_image_value(char *buf, size_t cap, enum fk_image_state st, const char *image);
/* KMM's DNS-safe kernel (kernel.DNSSafeKernelVersion): the sign pod's name suffix and its events' kernel. */
void fk_dns_safe_kernel(char *buf, size_t cap, const char *kernel);
/* KMM's Event for a sign job (involvedObject: the ModuleBuildSignConfig named
 * after the Module, the sign pod's owner): reason "SignimageCreated" (Normal,
 * "Signimage created for kernel K"), "SignimageSucceeded" (Normal, "Signimage
 * job succeeded for kernel K") or "SignimageFailed" (Warning). ts: RFC 3339. */
cJSON *fk_sign_event(const fk_module *m, const char *kernel, const char *reason, const char *ts);

/* ---- targeting (target.c) ------------------------------------------------ */
/* Kubernetes Toleration.ToleratesTaint. */
int fk_toleration_tolerates(const fk_toleration *t, const fk_taint *taint);
/* Every NoSchedule/NoExecute taint (plus the cordon taint implied by
 * spec.unschedulable) tolerated by the module's tolerations or KMM's internal
 * ones (NoSchedule disk-/memory-/pid-pressure). */
int fk_node_schedulable(const fk_module *m, const fk_node *n);
int fk_selector_matches(const fk_module *m, const fk_node *n);
/* Index of the first kernel mapping matching kernel (literal equal, or RE2
 * unanchored match), -1 when none. */
int fk_mapping_find(const fk_module *m, const char *kernel);

enum fk_want_state {
	FK_WANT_NOT_SELECTED = 0, /* selector does not match */
	FK_WANT_UNSCHEDULABLE,    /* untolerated NoSchedule/NoExecute taint or cordon */
	FK_WANT_NO_LOADER,        /* spec.moduleLoader unset */
	FK_WANT_NO_MAPPING,       /* no kernel mapping matches the node's kernel */
	FK_WANT_VERSION_MISSING,  /* version set, node has no version-module label */
	FK_WANT_VERSION_OTHER,    /* version set, node labelled with another version: keep what runs */
	FK_WANT_DELETING,         /* Module is being deleted */
	FK_WANT_LOAD,             /* load kernel/version */
};
#define FK_KERNEL_MAX 256
typedef struct fk_want {
	enum fk_want_state state;
	char kernel[FK_KERNEL_MAX]; /* kernel version with one trailing '+' trimmed */
	const char *version;        /* module version ("" unversioned) */
	const char *node_version;   /* version-module label value or NULL */
	int mapping;                /* index or -1 */
} fk_want;
void fk_want_compute(const fk_module *m, const fk_node *n, fk_want *w);
const char *fk_want_state_name(enum fk_want_state s);

/* ---- plan (plan.c) ------------------------------------------------------- */
typedef struct fk_loaded {
	int present;
	char kernel[FK_KERNEL_MAX];
	char version[FK_KERNEL_MAX];
} fk_loaded;
/* Parses "<kernel>[ <version>]"; NULL → not present. */
void fk_loaded_parse(const char *v, fk_loaded *l);
/* Formats the annotation value into buf (cap bytes). */
void fk_loaded_format(char *buf, size_t cap, const char *kernel, const char *version);

enum fk_op { FK_OP_NONE = 0, FK_OP_LOAD, FK_OP_UNLOAD, FK_OP_SIGN };
typedef struct fk_pair_plan {
	fk_want want;
	fk_loaded loaded;
	/* labels wanted now: ready present?, version.ready value (NULL = absent) */
	int ready;
	const char *version_ready;
	/* labels on the node now (NULL = absent) */
	const char *has_ready;
	const char *has_version_ready;
	enum fk_op op;   /* timed operation needed */
	int blocked;     /* op is needed but a fault (or a pod holding the GPU) makes it fail */
	char holder[320];              /* an unload blocked by a pod: "pod <ns>/<name>" */
	/* the unload-failed annotation wanted now (NULL = absent) and on the node now */
	char unload_failed[512];
	const char *has_unload_failed;
	int signed_image;              /* the mapping's image is signed by KMM */
	int sign_needed;               /* ...and not signed yet: no load until it is */
	int unsigned_refused;          /* Secure Boot node, unsigned module: the load fails */
	char image[FK_IMAGE_MAX];      /* the module image for this node's kernel (signed mappings) */
	int matching, desired, available; /* contributions to status counts */
} fk_pair_plan;
void fk_plan_pair(const fk_module *m, const fk_node *n, fk_pair_plan *p);
/* 1 when the labels (and the unload-failed annotation) on the node differ
 * from what the plan wants now. */
int fk_plan_labels_differ(const fk_pair_plan *p);

typedef struct fk_counts {
	int matching, desired, available;
} fk_counts;
/* Sums fk_plan_pair over nodes; returns 1 if any node still has the module
 * loaded (the finalizer must stay). */
int fk_plan_module(const fk_module *m, const fk_node *nodes, size_t nnodes, fk_counts *c);

/* 1 when status.moduleLoader differs from the counts (or must be cleared
 * because spec.moduleLoader is unset). */
int fk_status_needs_write(const fk_module *m, const fk_counts *c);
/* The merge-patch body for the status subresource: {"status":{"moduleLoader":
 * {counts, zero counts omitted}}} or {"status":{"moduleLoader":null}}. */
cJSON *fk_status_body(const fk_module *m, const fk_counts *c);

#endif
