/* kubesim — the scheduling predicates kubesim's controllers need (pure): label
 * selectors as objects (matchLabels/matchExpressions), node selectors and required
 * node affinity, taints against tolerations, where a DaemonSet's pod should run,
 * pod readiness. Semantics of k8s.io/component-helpers and the DaemonSet controller. */
#ifndef KUBESIM_SCHED_H
#define KUBESIM_SCHED_H

#include <cJSON.h>
#include <stdint.h>

/* metav1.LabelSelector against labels. A NULL selector matches nothing, an empty
 * one ({}) everything; a malformed one nothing. */
int ks_labelsel_match(const cJSON *sel, const cJSON *labels);

/* A taint (key, value, effect) tolerated by one of the tolerations. */
int ks_tolerates(const cJSON *tolerations, const cJSON *taint);

/* The pod spec's nodeSelector and required node affinity match the node. */
int ks_node_affinity_match(const cJSON *pod_spec, const cJSON *node);

/* The DaemonSet controller's NodeShouldRunDaemonPod for a pod template spec: the
 * template's nodeName, node selector and affinity, and its tolerations plus the ones
 * every DaemonSet pod gets (not-ready/unreachable NoExecute; disk-, memory-,
 * pid-pressure and unschedulable NoSchedule; network-unavailable when hostNetwork)
 * against the node's NoSchedule/NoExecute taints. *should_run: a pod is wanted;
 * *should_continue: an existing pod may stay (only an untolerated NoExecute taint
 * evicts it). */
void ks_ds_should_run(const cJSON *pod_spec, const cJSON *node, int *should_run, int *should_continue);

/* The tolerations a DaemonSet adds to its pods (a new array with the template's). */
cJSON *ks_ds_tolerations(const cJSON *pod_spec);

/* Pod condition Ready is True; *since: its lastTransitionTime (epoch s, 0 unknown). */
int ks_pod_ready(const cJSON *pod, int64_t *since);

/* intstr (int or "N%") scaled against total, rounded up like the controllers do;
 * def when absent or malformed. */
int ks_intstr_scaled(const cJSON *v, int total, int def);

/* RFC 3339 to epoch seconds; -1 malformed. */
int64_t ks_rfc3339_parse(const char *s);

#endif
