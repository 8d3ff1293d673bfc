/* gpukmm — the operands of a ClusterPolicy: every object the upstream
 * operator renders for one policy (reference operands.md §4–8, §10), as our
 * own rendering, plus the managed-field comparison that says whether a live
 * object already matches and the JSON merge patch that makes it match.
 *
 * Objects, in the order they are created (upstream's sub-controller order):
 *   device plugin   [OpenShift: SA, SCC, SCC role + binding] DaemonSet <cp>-device-plugin
 *   XPU Manager     [OpenShift: SA, SCC, role, binding] ResourceClaimTemplate <cp>-monitor-claim
 *                   (dra mode with DRA served), ConfigMap <cp>-xpumanager-otel-config (no
 *                   configMapOverride), DaemonSet <cp>-xpu-manager
 *   DRA driver      [OpenShift: SCC, role, binding] ServiceAccount / ClusterRole /
 *                   ClusterRoleBinding <cp>-gpu-dra, DeviceClasses gpu.intel.com and
 *                   gpu-vfio.intel.com, ValidatingAdmissionPolicy (+Binding) <cp>-gpu-dra,
 *                   DaemonSet <cp>-gpu-dra
 *   NFD             NodeFeatureRule intel-gpu-devices (useNFDLabeling, NFD CRD served)
 *   Prometheus      Service + ServiceMonitor intel-xpumanager (resourceMonitoring and
 *                   prometheusIntegration, ServiceMonitor CRD served)
 *   Kueue           ResourceFlavor gpu.intel.com-kueue-flavor, a ClusterQueue per
 *                   spec.kueue.equalResources[] entry with an even share of the
 *                   cluster's GPUs, cpu and memory, and its LocalQueues (enableKueue,
 *                   the Kueue CRDs served)
 *
 * Unlike upstream, every object carries the label app.kubernetes.io/managed-by=gpukmm
 * (the watcher lists and watches operands by it) and a controller owner reference
 * to its ClusterPolicy (garbage collection covers whatever explicit teardown
 * could not reach). Pod templates are exactly upstream's, so adopting an
 * upstream DaemonSet whose rendering is the same costs no rollout.
 *
 * Pure code: no I/O, no clock. Typed policies are proto/kube.proto messages. */
#ifndef GPUKMM_OPERANDS_H
#define GPUKMM_OPERANDS_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpukmm/err.h"
#include "gpukmm/policy.h"
#include "kube.pb-c.h"

#define GK_OP_MANAGED_BY_KEY   "app.kubernetes.io/managed-by"
#define GK_OP_MANAGED_BY_VALUE "gpukmm"
#define GK_OP_FINALIZER        "gpukmm.io/operand-protection"
#define GK_OP_UPSTREAM_FINALIZER "gpu.intel.com/clusterpolicy-protection"
#define GK_OP_OTEL_HASH_KEY    "gpu.intel.com/xpum-otel-config-hash"
#define GK_OP_OTEL_KEY         "config.yaml"
#define GK_OP_GPU_DRIVER       "gpu.intel.com"
#define GK_OP_KUEUE_API_VERSION "kueue.x-k8s.io/v1beta2"
#define GK_OP_KUEUE_FLAVOR     "gpu.intel.com-kueue-flavor"
#define GK_OP_KUEUE_APP        "gpu.intel.com-kueue-queue" /* upstream's `app` label of its Kueue objects */
/* status.errors while enableKueue cannot be acted on (no error loop: nothing is retried) */
#define GK_OP_MSG_KUEUE_ABSENT "Kueue is not installed (kueue.x-k8s.io/v1beta2 resourceflavors, clusterqueues, localqueues not served): enableKueue has no effect"
#define GK_OP_MSG_KUEUE_NO_RESOURCES "Kueue enabled, but cluster has no resources"

/* ---- Kueue quotas (operands.md §8.3) --------------------------------------------- */
/* The resources a queue may get, in name order (the order they are listed in). */
enum gk_op_kres { GK_OP_KR_CPU, GK_OP_KR_DRA, GK_OP_KR_I915, GK_OP_KR_XE, GK_OP_KR_MEMORY, GK_OP_KR_N };
extern const char *const gk_op_kres_names[GK_OP_KR_N];
/* A node: its name and the allocatable quantities that count (NULL = not there). */
typedef struct gk_op_knode {
	const char *name, *cpu, *memory, *i915, *xe;
} gk_op_knode;
/* A ResourceSlice: driver, node (NULL: not one node's), pool and its generation, and
 * how many of its devices have attributes or capacity (upstream's test of a device). */
typedef struct gk_op_kslice {
	const char *driver, *node, *pool;
	int64_t generation;
	int32_t devices;
} gk_op_kslice;
/* The cluster totals, in whole units (rounded up); 0 = none. */
typedef struct gk_op_ktotals {
	int64_t value[GK_OP_KR_N];
} gk_op_ktotals;
/* dp mode (!dra): nodes only; dra mode: slices and their nodes. -1 on OOM. Pure. */
int gk_op_kueue_totals(bool dra, const gk_op_knode *nodes, size_t n, const gk_op_kslice *slices, size_t ns,
		       gk_op_ktotals *out);
/* Something to share (upstream does nothing otherwise). */
bool gk_op_kueue_any(const gk_op_ktotals *t);
/* quota[q][r] for q < queues (0 = left out); -1 with upstream's message when a share
 * would be below 1. */
int gk_op_kueue_divide(const gk_op_ktotals *t, size_t queues, int64_t (*quota)[GK_OP_KR_N], char *msg, size_t cap);

/* Operator-wide inputs (operands.md §3), discovered at run time by the controller. */
typedef struct gk_op_opts {
	const char *namespace_;       /* operator namespace; NULL = intel-gpu-base-operator */
	const char *operator_secret;  /* $OPERATOR_SECRET: first imagePullSecret; NULL/"" = none */
	bool kmm;                     /* KMM served: the ready-label gate when kernelModule is set */
	bool openshift;               /* security.openshift.io served: SCC plumbing per operand */
	/* The newest served resource.k8s.io version ("v1", "v1beta2", "v1beta1", "v1alpha3"),
	 * NULL or "" = DRA not served. DeviceClass and ResourceClaimTemplate are rendered in it. */
	const char *dra_version;
	bool nfd;                     /* nodefeaturerules.nfd.k8s-sigs.io served */
	bool nfd_namespaced;          /* ... and namespaced (else cluster-scoped) */
	bool prometheus;              /* servicemonitors.monitoring.coreos.com served */
	bool kueue;                   /* resourceflavors, clusterqueues, localqueues (kueue.x-k8s.io/v1beta2) served */
	/* The cluster totals in the policy's mode (gk_op_kueue_totals); NULL = not known yet:
	 * the Kueue objects are held as they are. */
	const gk_op_ktotals *kueue_totals;
	/* spec.xpu.configMapOverride: the override ConfigMap's config.yaml text as read
	 * (NULL = not found / no such key; the render then reports the error). */
	const char *otel_override;
	bool otel_override_has_cm;    /* the override ConfigMap exists (without the key: error) */
} gk_op_opts;

enum gk_op_component {
	GK_OP_DP = 1,
	GK_OP_XPU,
	GK_OP_DRA,
	GK_OP_NFD,
	GK_OP_PROMETHEUS,
	GK_OP_KUEUE,
};
const char *gk_op_component_name(int component);

/* How one managed field is compared and written (JSON Pointer paths, RFC 6901;
 * a segment "@NAME" is the element of a list whose "name" is NAME). */
enum gk_op_mode {
	GK_OP_SUBSET = 1, /* live must carry the wanted value: objects key by key (extra live keys,
			     e.g. API defaults, are fine), lists element by element, same length */
	GK_OP_EXACT,      /* live must equal the wanted value (maps owned whole: extra keys removed) */
	GK_OP_ABSENT,     /* live must not have it */
	GK_OP_QUOTAS,     /* Kueue resourceGroups: the same flavors, resources (any order) and
			     numerically equal quotas ("16", 16 and "16e0" are one quota) */
	GK_OP_REPLACE,    /* live must equal it, and the API forbids changing it: the object is
			     deleted and created again (gk_op_sync says GK_OP_RECREATE) */
};

typedef struct gk_op_rule {
	char *path;
	int mode;
} gk_op_rule;

typedef struct gk_op_obj {
	int component;              /* enum gk_op_component */
	const char *api_version;    /* e.g. "apps/v1" (static) */
	const char *kind;           /* e.g. "DaemonSet" (static) */
	const char *resource;       /* plural, e.g. "daemonsets" (static) */
	char *ns;                   /* NULL = cluster-scoped */
	char *name;
	cJSON *obj;                 /* the whole object as created */
	gk_op_rule *rules;          /* managed fields besides the label and owner reference */
	size_t n_rules;
} gk_op_obj;

typedef struct gk_op_set {
	gk_op_obj *v;
	size_t n, cap;
	/* Errors the policy's operands produce now (e.g. the DRA-not-enabled message,
	 * a missing override ConfigMap key); rendering goes on without that part. */
	char **errors;
	size_t n_errors;
	/* Components the policy wants (bit 1 << component), whether or not rendered. */
	unsigned wanted;
	/* Components whose rendering stopped on an error: their live objects stay as
	 * they are (nothing patched, nothing deleted) until the error is gone. */
	unsigned held;
} gk_op_set;

void gk_op_set_free(gk_op_set *s);

/* Every object the policy produces with these inputs (the policy should be
 * defaulted: gk_policy_default). A policy being deleted, or NULL,
 * produces nothing. GK_RESOURCE_EXHAUSTED on OOM; other problems go to s->errors. */
int gk_op_render(const Gpukmm__ClusterPolicy *cp, const gk_op_opts *o, gk_op_set *s, gk_err *err);

/* ---- pieces, exposed for tests and the controller ---------------------------- */
/* The OTel collector configuration text for the policy (upstream's typed config,
 * re-serialised the way sigs.k8s.io/yaml does: keys sorted, go-yaml v2 style). malloc'd. */
char *gk_op_otel_config(const Gpukmm__ClusterPolicy *cp);
/* Lower-case hex SHA-256 of text into out[65]. */
void gk_op_sha256_hex(const char *text, char out[65]);
/* Does the text parse as the OTel config (a YAML mapping whose known sections are
 * mappings)? 0, or writes upstream's message into msg. */
int gk_op_otel_check(const char *text, char *msg, size_t cap);

/* ---- the catalogue of what a policy may own (teardown) ----------------------- */
typedef struct gk_op_ref {
	int component;
	const char *api_version, *kind, *resource;
	/* The `app` label upstream put on this object (with `owner: <cp>`), NULL when it
	 * put none: how an object upstream left behind is recognised (gk_op_is_upstream). */
	const char *upstream_app;
	bool upstream_ref;          /* upstream put a controller reference to the policy on it */
	char ns[256];               /* "" = cluster-scoped */
	char name[256];
} gk_op_ref;
/* Every object a policy named `cp` may own with these inputs, in teardown order:
 * device plugin and XPU Manager (DaemonSets first), then DRA (DaemonSet, then its
 * dependencies), then NFD and Prometheus. *out malloc'd. */
int gk_op_catalogue(const char *cp, const gk_op_opts *o, gk_op_ref **out, size_t *n, gk_err *err);

/* ---- live vs wanted ---------------------------------------------------------------- */
enum gk_op_sync {
	GK_OP_IN_SYNC = 0,
	GK_OP_PATCH,          /* *patch is the JSON merge patch to send */
	GK_OP_FOREIGN,        /* another controller owns it: not touched (msg says who) */
	GK_OP_RECREATE,       /* a GK_OP_REPLACE field differs: delete it, then create it again */
};
/* Compare the live object (as the API returns it) with the wanted one: the
 * managed-by label, our controller owner reference (a reference to the same
 * policy with another uid is replaced: adoption), and want->rules. The patch
 * carries metadata.resourceVersion of live as a precondition. */
int gk_op_sync(const gk_op_obj *want, const cJSON *live, cJSON **patch, char *msg, size_t cap);
/* Is `live` policy cp's: a controller reference to the ClusterPolicy named cp, or our
 * label and no controller reference (one to anything else, another policy included: not
 * cp's, whatever its labels say). */
bool gk_op_is_ours(const cJSON *live, const char *cp);
/* Did gpu-base-operator leave `live` for policy cp: its labels `app: <app>` and
 * `owner: <cp>`, and no controller reference to anything but that policy? */
bool gk_op_is_upstream(const cJSON *live, const char *cp, const char *app);
/* A Kueue object (ResourceFlavor, ClusterQueue, LocalQueue) of policy cp: upstream's
 * labels (which we set too), or our label with a controller reference to cp. */
bool gk_op_kueue_mine(const cJSON *live, const char *cp);

/* "<numberReady>/<desiredNumberScheduled>" of a DaemonSet (missing counts 0), "N/A" for NULL. */
int gk_op_ds_status(char *buf, size_t cap, const Gpukmm__DaemonSet *ds);

#endif
