/* gpukmm — Kubernetes object JSON (cJSON, as the API returns it) <-> typed
 * protobuf objects of proto/kube.proto. All API JSON is parsed here, once.
 *
 * *_from_json take the whole object ({"apiVersion","kind","metadata",...}) and
 * return a newly allocated message (free with gk_kobj_free). They are strict on
 * types (a string where an object belongs is an error naming the field path)
 * and lenient on absence (absent optional fields stay unset). Maps become
 * repeated KeyValue sorted by key.
 *
 * Ownership of the files in lib/kobj/: meta.c, clusterpolicy.c, module.c
 * (policy side); node.c, resourceclaim.c, resourceslice.c, daemonset.c, pod.c, object.c (watcher side). */
#ifndef GPUKMM_KOBJ_H
#define GPUKMM_KOBJ_H

#include <cJSON.h>
#include <stdbool.h>

#include "gpukmm/err.h"
#include "kube.pb-c.h"

/* Frees any message built by this module (or NULL). */
void gk_kobj_free(void *msg);

/* metadata. `keep_annotation` (may be NULL = keep all) filters annotations by key. */
int gk_kobj_meta_from_json(const cJSON *obj, int (*keep_annotation)(const char *key),
			   Gpukmm__ObjectMeta **out, gk_err *err);
cJSON *gk_kobj_meta_to_json(const Gpukmm__ObjectMeta *m);

int gk_kobj_cluster_policy_from_json(const cJSON *obj, Gpukmm__ClusterPolicy **out, gk_err *err);
/* The collecting variant used by validation: does not stop at the first type
 * error; each problem ("<field path>: <what>") goes to on_error and the field
 * stays unset. With report_unknown, keys outside the ClusterPolicy schema are
 * reported too ("spec.foo: unknown field"). Returns the number of problems
 * (0: *out is complete), or -1 when out of memory (*out NULL). */
typedef void (*gk_kobj_error_fn)(void *arg, const char *msg);
int gk_kobj_cluster_policy_parse(const cJSON *obj, bool report_unknown, gk_kobj_error_fn on_error, void *arg,
				 Gpukmm__ClusterPolicy **out);
/* Status as the API wants it: errors always present (possibly []), so cleared errors vanish. */
cJSON *gk_kobj_cluster_policy_status_to_json(const Gpukmm__ClusterPolicyStatus *st);
/* status.upgrade (camelCase; only the fields set). NULL on OOM. */
cJSON *gk_kobj_upgrade_status_to_json(const Gpukmm__UpgradeStatus *u);

int gk_kobj_module_from_json(const cJSON *obj, Gpukmm__Module **out, gk_err *err);
/* The Module's spec as the API wants it (only the fields set in `spec`). */
cJSON *gk_kobj_module_spec_to_json(const Gpukmm__ModuleSpec *spec);

/* Node annotations kept: gpukmm.io/... only. */
int gk_kobj_node_from_json(const cJSON *obj, Gpukmm__Node **out, gk_err *err);
int gk_kobj_resource_claim_from_json(const cJSON *obj, Gpukmm__ResourceClaim **out, gk_err *err);
int gk_kobj_daemon_set_from_json(const cJSON *obj, Gpukmm__DaemonSet **out, gk_err *err);
/* Pods: gpu_resources lists gpu.intel.com/... resource names of any container's
 * requests or limits (init containers included); resource_claims the
 * ResourceClaims it holds (by name, in its namespace); empty_dir and mirror
 * (annotations kept: gpukmm.io/... and kubernetes.io/config.mirror). */
int gk_kobj_pod_from_json(const cJSON *obj, Gpukmm__Pod **out, gk_err *err);

/* ResourceSlices (any resource.k8s.io version): driver, node, pool, generation, and
 * the devices that have attributes or capacity. */
int gk_kobj_resource_slice_from_json(const cJSON *obj, Gpukmm__ResourceSlice **out, gk_err *err);

/* Any object: metadata (all annotations), apiVersion, kind, and the object as
 * JSON without metadata.managedFields (operands, lib/operands). */
int gk_kobj_object_from_json(const cJSON *obj, Gpukmm__Object **out, gk_err *err);

/* A core/v1 Event about an object, as client-go's recorder creates it (count,
 * first/lastTimestamp, source.component, reportingComponent/Instance). An
 * Event about a cluster-scoped object goes to namespace "default". */
typedef struct gk_kobj_event {
	const char *name;                 /* the Event's name */
	const char *ns;                   /* its namespace, NULL = "default" */
	const char *api_version, *kind, *object, *object_ns, *uid; /* involvedObject (object_ns, uid may be NULL) */
	bool warning;                     /* type Warning, else Normal */
	const char *reason, *message;
	int count;                        /* 0 = 1 */
	const char *ts;                   /* RFC 3339 */
	const char *component;            /* source.component, e.g. "gpukmm-modmgr" */
	const char *reporting_component;  /* e.g. "gpukmm.io/modmgr" */
	const char *instance;             /* reportingInstance (host name), may be NULL */
} gk_kobj_event;
cJSON *gk_kobj_event_json(const gk_kobj_event *e);

/* Map helpers on sorted repeated KeyValue. */
const char *gk_kv_get(Gpukmm__KeyValue *const *kv, size_t n, const char *key);

#endif
