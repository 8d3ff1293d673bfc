/* gpukmm-gater: pure gating decision (see decide.h). */
#include <stdio.h>
#include <string.h>

#include "decide.h"
#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"

static const char *const SUFFIXES[] = { "-device-plugin", "-gpu-dra", "-xpu-manager" };

static const char *gate_label(const Gpukmm__DaemonSet *ds)
{
	const Gpukmm__ObjectMeta *m = ds ? ds->metadata : NULL;
	return m ? gk_kv_get(m->labels, m->n_labels, GK_GATER_LABEL) : NULL;
}

static bool in_ns(const Gpukmm__DaemonSet *ds, const char *op_ns)
{
	const Gpukmm__ObjectMeta *m = ds->metadata;
	return m && m->namespace_ && op_ns && strcmp(m->namespace_, op_ns) == 0;
}

bool gk_gater_is_gated(const Gpukmm__DaemonSet *ds, const char *cp, const char *op_ns)
{
	if (!ds || !ds->metadata || !ds->metadata->name || !cp || !*cp)
		return false;
	const char *gate = gate_label(ds);
	if (gate && strcmp(gate, cp) == 0)
		return true;
	if (!in_ns(ds, op_ns))
		return false;
	/* gpukmm-opmgr's own operands carry the ready key in the node selector it
	 * renders: one writer per field, so the gater leaves them alone */
	const char *mb = gk_kv_get(ds->metadata->labels, ds->metadata->n_labels, "app.kubernetes.io/managed-by");
	if (mb && strcmp(mb, "gpukmm") == 0)
		return false;
	static const enum gk_policy_ds all[] = { GK_POLICY_DS_DEVICE_PLUGIN, GK_POLICY_DS_DRA,
						  GK_POLICY_DS_XPU_MANAGER };
	char buf[GK_POLICY_KEY_MAX];
	for (size_t i = 0; i < 3; i++)
		if (gk_policy_ds_name(buf, sizeof(buf), cp, all[i]) == 0 && strcmp(buf, ds->metadata->name) == 0)
			return true;
	return false;
}

bool gk_gater_policy_wants(const Gpukmm__ClusterPolicy *cp, bool kmm_available)
{
	if (!cp || !cp->spec)
		return false;
	if (cp->metadata && cp->metadata->deletion_timestamp && *cp->metadata->deletion_timestamp)
		return false;
	return gk_policy_gating_wanted(cp->spec, kmm_available);
}

static const char *sel_value(const Gpukmm__DaemonSet *ds, const char *key)
{
	return ds ? gk_kv_get(ds->node_selector, ds->n_node_selector, key) : NULL;
}

const char *gk_gater_want(const Gpukmm__ClusterPolicy *cp, bool gating)
{
	if (!gating)
		return NULL;
	return gk_policy_module_recreating(cp) ? GK_POLICY_GATE_HOLD_VALUE : "";
}

bool gk_gater_has_gate(const Gpukmm__DaemonSet *ds, const char *key)
{
	const char *v = sel_value(ds, key);
	return v && (!*v || !strcmp(v, GK_POLICY_GATE_HOLD_VALUE));
}

cJSON *gk_gater_patch(const Gpukmm__DaemonSet *ds, const char *key, const char *want, bool *oom)
{
	*oom = false;
	const char *cur = sel_value(ds, key);
	bool right = want ? (cur && !strcmp(cur, want)) : cur == NULL;
	if (right)
		return NULL;
	cJSON *p = cJSON_CreateObject();
	cJSON *spec, *tmpl, *tspec, *ns;
	const char *rv = ds && ds->metadata ? ds->metadata->resource_version : NULL;
	if (!p || !(spec = cJSON_AddObjectToObject(p, "spec")) || !(tmpl = cJSON_AddObjectToObject(spec, "template")) ||
	    !(tspec = cJSON_AddObjectToObject(tmpl, "spec")) || !(ns = cJSON_AddObjectToObject(tspec, "nodeSelector")) ||
	    !(want ? cJSON_AddStringToObject(ns, key, want) : cJSON_AddNullToObject(ns, key)))
		goto fail;
	if (rv && *rv) {
		cJSON *m = cJSON_AddObjectToObject(p, "metadata");
		if (!m || !cJSON_AddStringToObject(m, "resourceVersion", rv))
			goto fail;
	}
	return p;
fail:
	*oom = true;
	cJSON_Delete(p);
	return NULL;
}

int gk_gater_ds_status(char *buf, size_t cap, const Gpukmm__DaemonSet *ds)
{
	if (!ds)
		return snprintf(buf, cap, "%s", GK_POLICY_STATUS_NA);
	return snprintf(buf, cap, "%ld/%ld", ds->has_number_ready ? (long)ds->number_ready : 0L,
			ds->has_desired_number_scheduled ? (long)ds->desired_number_scheduled : 0L);
}

void gk_gater_ds_policies(const Gpukmm__DaemonSet *ds, const char *op_ns, void (*fn)(void *user, const char *cp),
			  void *user)
{
	if (!ds || !ds->metadata || !ds->metadata->name)
		return;
	const char *gate = gate_label(ds);
	if (gate && *gate)
		fn(user, gate);
	if (!in_ns(ds, op_ns))
		return;
	const char *name = ds->metadata->name;
	size_t len = strlen(name);
	char buf[GK_POLICY_KEY_MAX];
	for (size_t i = 0; i < sizeof(SUFFIXES) / sizeof(SUFFIXES[0]); i++) {
		size_t sl = strlen(SUFFIXES[i]);
		if (len > sl && len - sl < sizeof(buf) && strcmp(name + len - sl, SUFFIXES[i]) == 0) {
			memcpy(buf, name, len - sl);
			buf[len - sl] = 0;
			fn(user, buf);
		}
	}
}

int gk_gater_forbidden_hint(char *buf, size_t cap, const char *ns, const char *api_msg, const char *op_ns)
{
	static const char pre[] = "User \"system:serviceaccount:";
	char sa[256];
	const char *u = api_msg ? strstr(api_msg, pre) : NULL;
	const char *e = u ? strchr(u + sizeof(pre) - 1, '"') : NULL;
	if (u && e && (size_t)(e - u) - (sizeof(pre) - 1) < sizeof(sa) && memchr(u, ':', (size_t)(e - u)))
		snprintf(sa, sizeof(sa), "%.*s", (int)(e - u - (sizeof(pre) - 1)), u + sizeof(pre) - 1);
	else
		snprintf(sa, sizeof(sa), "%s:gpukmm-controller", op_ns && *op_ns ? op_ns : "intel-gpu-base-operator");
	return snprintf(buf, cap,
			"no permission to write DaemonSets in namespace %s: opt it in with `kubectl -n %s create "
			"rolebinding gpukmm-gate-daemonsets --clusterrole=gpukmm-gate-daemonsets --serviceaccount=%s`",
			ns, ns, sa);
}
