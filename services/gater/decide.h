/* gpukmm-gater — the pure gating decision (reference gpu-base-operator §3).
 *
 * A DaemonSet is gated by ClusterPolicy <cp> when it carries the label
 * gpukmm.io/gate=<cp> (opt-in, any watched namespace), or is <cp>-device-plugin,
 * <cp>-gpu-dra or <cp>-xpu-manager in the operator namespace and not gpukmm's
 * own (label app.kubernetes.io/managed-by=gpukmm: gpukmm-opmgr renders the key
 * into those, one writer per field) — e.g. left by the Go operator until
 * gpukmm-opmgr adopts them. Gated + gating
 * wanted (KMM present, the policy alive and kernelModule set) → its pod
 * template's nodeSelector has the KMM ready label
 * kmm.node.kubernetes.io/<ns>.<cp>-gpu.ready: "" (while the policy's Module
 * is recreated: the value GK_POLICY_GATE_HOLD_VALUE, which no node carries);
 * otherwise that key is absent. Only that key is ever touched.
 *
 * Write = JSON merge patch {"spec":{"template":{"spec":{"nodeSelector":
 * {KEY:""|"module-recreating"|null}}}},"metadata":{"resourceVersion":RV}}. Why a merge patch with a
 * resourceVersion precondition rather than server-side apply: SSA would make us
 * co-owner of the key under our field manager and silently take it over from
 * (or conflict with) the operator that renders the DaemonSet with its own
 * manager (client-side apply or update: SSA's ownership then depends on how
 * the other writer writes); a one-key merge patch touches nothing else, the
 * precondition turns a concurrent change into a 409 after which we re-read and
 * decide again (level-triggered), and "no write when already right" is a plain
 * comparison on the cached object. Pure code: the typed DaemonSet of
 * proto/kube.proto (lib/kobj) in, a cJSON patch out. */
#ifndef GPUKMM_GATER_DECIDE_H
#define GPUKMM_GATER_DECIDE_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "kube.pb-c.h"

#define GK_GATER_LABEL "gpukmm.io/gate"

/* Is `ds` gated by policy `cp`? */
bool gk_gater_is_gated(const Gpukmm__DaemonSet *ds, const char *cp, const char *op_ns);
/* Should the policy's DaemonSets carry the key: the policy exists, is not
 * being deleted, has kernelModule, and KMM is served. */
bool gk_gater_policy_wants(const Gpukmm__ClusterPolicy *cp, bool kmm_available);
/* The value the key should have: "" (gated: the pods run where KMM loaded the
 * driver), GK_POLICY_GATE_HOLD_VALUE (the policy's Module is being recreated:
 * the pods leave every node, so that KMM can unload the old one), or NULL (the
 * key absent). */
const char *gk_gater_want(const Gpukmm__ClusterPolicy *cp, bool gating);
/* Does the template nodeSelector carry `key` with a value we write ("" or the
 * hold value)? */
bool gk_gater_has_gate(const Gpukmm__DaemonSet *ds, const char *key);
/* The merge patch that gives `ds` the key with the value `want` (NULL: without
 * the key), or NULL when it already has it (or on OOM: *oom set). `key` is the
 * ready label key. */
cJSON *gk_gater_patch(const Gpukmm__DaemonSet *ds, const char *key, const char *want, bool *oom);
/* "<numberReady>/<desiredNumberScheduled>" (missing counts as 0), or "N/A"
 * when ds is NULL. Returns the length (snprintf). */
int gk_gater_ds_status(char *buf, size_t cap, const Gpukmm__DaemonSet *ds);
/* The policies a DaemonSet concerns (its gate label's value; <cp> of a
 * <cp>-device-plugin / -gpu-dra / -xpu-manager name in the operator
 * namespace): fn once per candidate (duplicates possible). */
void gk_gater_ds_policies(const Gpukmm__DaemonSet *ds, const char *op_ns, void (*fn)(void *user, const char *cp),
			  void *user);

/* The message for a DaemonSet write the API refused with 403 (RBAC): what the admin
 * runs to opt namespace `ns` in (deploy/rbac/gate-daemonsets.yaml). The
 * ServiceAccount is the one the API's message names (User
 * "system:serviceaccount:NS:NAME"), else op_ns:gpukmm-controller. */
int gk_gater_forbidden_hint(char *buf, size_t cap, const char *ns, const char *api_msg, const char *op_ns);

#endif
