/* lib/operands: shared pieces of the renderers (not a public header). */
#ifndef GPUKMM_OPERANDS_INTERNAL_H
#define GPUKMM_OPERANDS_INTERNAL_H

#include <cJSON.h>
#include <stdbool.h>

#include "gpukmm/operands.h"
#include "gpukmm/policy.h"

/* A render in progress: the policy, the inputs, the set, and a sticky OOM flag. */
typedef struct gk_opr {
	const Gpukmm__ClusterPolicy *cp;
	const Gpukmm__ClusterPolicySpec *spec;
	const gk_op_opts *o;
	const char *cpn;      /* policy name */
	const char *ns;       /* operator namespace */
	gk_op_set *s;
	bool oom;
} gk_opr;

/* A YAML/JSON text (our own template) as cJSON; NULL on OOM (a bad template is a bug: abort). */
cJSON *gk_opr_template(gk_opr *r, const char *yaml);
/* Start an object: a template (or NULL for {}), apiVersion/kind, name, namespace,
 * the managed-by label and the controller owner reference. Appended to the set;
 * NULL on OOM. */
gk_op_obj *gk_opr_add(gk_opr *r, int component, const char *api_version, const char *kind, const char *resource,
		      const char *ns, const char *name, const char *tmpl);
void gk_opr_rule(gk_opr *r, gk_op_obj *o, int mode, const char *path);
void gk_opr_error(gk_opr *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cJSON helpers that set r->oom instead of failing */
cJSON *gk_opr_at(gk_opr *r, cJSON *root, const char *path);      /* JSON Pointer, objects created */
void gk_opr_set(gk_opr *r, cJSON *root, const char *path, cJSON *v); /* replace/insert, takes v */
void gk_opr_set_str(gk_opr *r, cJSON *root, const char *path, const char *s);
cJSON *gk_opr_str(gk_opr *r, const char *s);
cJSON *gk_opr_strf(gk_opr *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gk_opr_push(gk_opr *r, cJSON *arr, cJSON *v);

/* JSON Pointer with "@NAME" list elements: get (create missing objects and named
 * elements when create), set (takes v; false when the parent cannot hold it), delete */
cJSON *gk_op_pointer(cJSON *root, const char *path, bool create, bool *oom);
bool gk_op_pointer_set(cJSON *root, const char *path, cJSON *v, bool *oom);
void gk_op_pointer_del(cJSON *root, const char *path);

/* pod-spec pieces (operands.md §4) */
cJSON *gk_opr_node_selector(gk_opr *r);
cJSON *gk_opr_tolerations(gk_opr *r);
cJSON *gk_opr_affinity(gk_opr *r);       /* NULL when not versioned and gated */
cJSON *gk_opr_pull_secrets(gk_opr *r);   /* NULL when there are none */
/* Put nodeSelector, tolerations and imagePullSecrets into the pod spec at
 * /spec/template/spec and add their rules. */
void gk_opr_pod_common(gk_opr *r, gk_op_obj *o);
int32_t gk_opr_level(const Gpukmm__ClusterPolicySpec *s, int32_t component_level, bool has);

/* "<cp>-<suffix>" into a malloc'd string via the set's OOM rule */
char *gk_opr_name(gk_opr *r, const char *suffix);

/* the renderers, in upstream order */
void gk_opr_dp(gk_opr *r);
void gk_opr_xpu(gk_opr *r);
void gk_opr_dra(gk_opr *r);
void gk_opr_misc(gk_opr *r);
void gk_opr_kueue(gk_opr *r);
/* GK_OP_QUOTAS: are two Kueue resourceGroups lists the same? */
bool gk_op_kueue_groups_equal(const cJSON *want, const cJSON *live);
/* OpenShift SCC plumbing of one component ("gpu-dp", "xpu-manager", "gpu-dra"):
 * SA (unless with_sa is false), SCC, ClusterRole, ClusterRoleBinding for SA sa. */
void gk_opr_openshift(gk_opr *r, int component, const char *part, bool with_sa, const char *sa);

#endif
