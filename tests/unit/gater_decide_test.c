/* gpukmm-gater: the pure gating decision (§3, §8.1 item 9) on typed
 * DaemonSets (lib/kobj), as the watcher publishes them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../../services/gater/decide.h"
#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"

#define NS "intel-gpu-base-operator"
#define KEY "kmm.node.kubernetes.io/intel-gpu-base-operator.gpu-gpu.ready"

static Gpukmm__DaemonSet *ds(const char *name, const char *ns, const char *sel_json, const char *labels_json)
{
	char buf[2048];
	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"resourceVersion\":\"42\",\"labels\":%s},"
		 "\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":%s,\"containers\":[{\"image\":\"x\"}]}}},"
		 "\"status\":{\"numberReady\":1,\"desiredNumberScheduled\":2}}",
		 name, ns, labels_json ? labels_json : "{}", sel_json ? sel_json : "null");
	cJSON *o = cJSON_Parse(buf);
	cr_assert_not_null(o);
	Gpukmm__DaemonSet *d = NULL;
	gk_err e;
	cr_assert_eq(gk_kobj_daemon_set_from_json(o, &d, &e), 0, "%s", e.msg);
	cJSON_Delete(o);
	return d;
}

static char *patch_str(const Gpukmm__DaemonSet *d, bool want)
{
	bool oom;
	cJSON *p = gk_gater_patch(d, KEY, want ? "" : NULL, &oom);
	cr_assert_not(oom);
	if (!p)
		return NULL;
	char *s = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	return s;
}

Test(gater_decide, ready_label_key_from_lib_policy)
{
	char k[GK_POLICY_KEY_MAX];
	cr_assert_eq(gk_policy_ready_label(k, sizeof(k), NS, "gpu"), 0);
	cr_assert_str_eq(k, KEY);
}

Test(gater_decide, which_daemonsets_are_gated)
{
	const char *yes[] = { "gpu-device-plugin", "gpu-gpu-dra", "gpu-xpu-manager" };
	for (int i = 0; i < 3; i++) {
		Gpukmm__DaemonSet *d = ds(yes[i], NS, NULL, NULL);
		cr_assert(gk_gater_is_gated(d, "gpu", NS), "%s", yes[i]);
		cr_assert_not(gk_gater_is_gated(d, "other", NS));
		cr_assert_not(gk_gater_is_gated(d, "", NS));
		cr_assert_not(gk_gater_is_gated(d, NULL, NS));
		gk_kobj_free(d);
	}
	Gpukmm__DaemonSet *d = ds("gpu-device-plugin", "default", NULL, NULL);
	cr_assert_not(gk_gater_is_gated(d, "gpu", NS), "right name, wrong namespace");
	gk_kobj_free(d);
	d = ds("gpu-node-exporter", NS, NULL, NULL);
	cr_assert_not(gk_gater_is_gated(d, "gpu", NS), "other DaemonSets of the namespace");
	gk_kobj_free(d);
	d = ds("my-gpu-app", "default", NULL, "{\"gpukmm.io/gate\":\"gpu\"}");
	cr_assert(gk_gater_is_gated(d, "gpu", NS), "opt-in label, any namespace");
	cr_assert_not(gk_gater_is_gated(d, "gpu2", NS));
	gk_kobj_free(d);
	cr_assert_not(gk_gater_is_gated(NULL, "gpu", NS));
	Gpukmm__DaemonSet empty = GPUKMM__DAEMON_SET__INIT;
	cr_assert_not(gk_gater_is_gated(&empty, "gpu", NS), "no metadata");
}

static char got[8][64];
static int n;
static void collect(void *u, const char *cp)
{
	(void)u;
	cr_assert_lt(n, 8);
	snprintf(got[n++], 64, "%s", cp);
}

Test(gater_decide, policies_a_daemonset_concerns)
{
	n = 0;
	Gpukmm__DaemonSet *d = ds("gpu-gpu-dra", NS, NULL, "{\"gpukmm.io/gate\":\"other\"}");
	gk_gater_ds_policies(d, NS, collect, NULL);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(got[0], "other");
	cr_assert_str_eq(got[1], "gpu");
	gk_kobj_free(d);
	n = 0;
	d = ds("gpu-device-plugin", "elsewhere", NULL, NULL);
	gk_gater_ds_policies(d, NS, collect, NULL);
	cr_assert_eq(n, 0, "names only count in the operator namespace");
	gk_kobj_free(d);
	d = ds("-device-plugin", NS, NULL, NULL);
	gk_gater_ds_policies(d, NS, collect, NULL);
	cr_assert_eq(n, 0, "empty policy name");
	gk_kobj_free(d);
	gk_gater_ds_policies(NULL, NS, collect, NULL);
	cr_assert_eq(n, 0);
}

Test(gater_decide, gate_adds_only_our_key_with_precondition)
{
	Gpukmm__DaemonSet *d = ds("gpu-device-plugin", NS, "{\"kubernetes.io/arch\":\"amd64\",\"other\":\"x\"}", NULL);
	char *s = patch_str(d, true);
	cr_assert_not_null(s);
	cr_assert_str_eq(s, "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"" KEY
			    "\":\"\"}}}},\"metadata\":{\"resourceVersion\":\"42\"}}");
	cJSON_free(s);
	gk_kobj_free(d);
}

Test(gater_decide, no_write_when_already_right)
{
	Gpukmm__DaemonSet *d = ds("gpu-device-plugin", NS, "{\"" KEY "\":\"\",\"other\":\"x\"}", NULL);
	cr_assert_null(patch_str(d, true));
	cr_assert(gk_gater_has_gate(d, KEY));
	gk_kobj_free(d);
	d = ds("gpu-device-plugin", NS, "{\"other\":\"x\"}", NULL);
	cr_assert_null(patch_str(d, false));
	cr_assert_not(gk_gater_has_gate(d, KEY));
	gk_kobj_free(d);
	d = ds("gpu-device-plugin", NS, NULL, NULL); /* no nodeSelector at all */
	cr_assert_null(patch_str(d, false));
	gk_kobj_free(d);
}

Test(gater_decide, ungate_removes_key_with_null_and_fixes_wrong_value)
{
	Gpukmm__DaemonSet *d = ds("gpu-device-plugin", NS, "{\"" KEY "\":\"\",\"keep\":\"me\"}", NULL);
	char *s = patch_str(d, false);
	cr_assert_not_null(s);
	cr_assert_str_eq(s, "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"" KEY
			    "\":null}}}},\"metadata\":{\"resourceVersion\":\"42\"}}");
	cJSON_free(s);
	gk_kobj_free(d);
	d = ds("gpu-device-plugin", NS, "{\"" KEY "\":\"true\"}", NULL); /* someone set a wrong value */
	cr_assert_not(gk_gater_has_gate(d, KEY));
	s = patch_str(d, true);
	cr_assert_not_null(s);
	cr_assert(strstr(s, "\"" KEY "\":\"\""));
	cJSON_free(s);
	s = patch_str(d, false);
	cr_assert_not_null(s, "a wrong value is removed too when not gating");
	cJSON_free(s);
	gk_kobj_free(d);
}

Test(gater_decide, policy_wants_gating)
{
	Gpukmm__KernelModuleSpec km = GPUKMM__KERNEL_MODULE_SPEC__INIT;
	Gpukmm__ClusterPolicySpec spec = GPUKMM__CLUSTER_POLICY_SPEC__INIT;
	Gpukmm__ObjectMeta md = GPUKMM__OBJECT_META__INIT;
	Gpukmm__ClusterPolicy cp = GPUKMM__CLUSTER_POLICY__INIT;
	cp.metadata = &md;
	cp.spec = &spec;
	cr_assert_not(gk_gater_policy_wants(&cp, true), "no kernelModule: not gated");
	spec.kernel_module = &km;
	cr_assert(gk_gater_policy_wants(&cp, true));
	cr_assert_not(gk_gater_policy_wants(&cp, false), "KMM not installed: not gated");
	md.deletion_timestamp = "2026-12-02T12:00:00Z";
	cr_assert_not(gk_gater_policy_wants(&cp, true), "being deleted: ungated");
	cr_assert_not(gk_gater_policy_wants(NULL, true), "policy gone");
}

Test(gater_decide, ds_status_strings)
{
	char b[64];
	gk_gater_ds_status(b, sizeof(b), NULL);
	cr_assert_str_eq(b, "N/A");
	Gpukmm__DaemonSet *d = ds("gpu-device-plugin", NS, NULL, NULL);
	gk_gater_ds_status(b, sizeof(b), d);
	cr_assert_str_eq(b, "1/2");
	gk_kobj_free(d);
	Gpukmm__DaemonSet empty = GPUKMM__DAEMON_SET__INIT;
	gk_gater_ds_status(b, sizeof(b), &empty);
	cr_assert_str_eq(b, "0/0");
}

/* gpukmm-opmgr's own DaemonSets carry the key it renders: the gater leaves them alone */
Test(gater_decide, opmgr_operands_are_not_gated_by_name)
{
	Gpukmm__DaemonSet *d = ds("gpu-device-plugin", NS, NULL, NULL);
	cr_assert(gk_gater_is_gated(d, "gpu", NS));
	gk_kobj_free(d);
	d = ds("gpu-device-plugin", NS, NULL, "{\"app.kubernetes.io/managed-by\":\"gpukmm\"}");
	cr_assert_not(gk_gater_is_gated(d, "gpu", NS));
	gk_kobj_free(d);
	d = ds("mine", "apps", NULL, "{\"app.kubernetes.io/managed-by\":\"gpukmm\",\"gpukmm.io/gate\":\"gpu\"}");
	cr_assert(gk_gater_is_gated(d, "gpu", NS), "the opt-in label still gates");
	gk_kobj_free(d);
}

/* a 403 on a DaemonSet write names the binding that opts its namespace in */
Test(gater_decide, forbidden_hint_names_the_binding_to_create)
{
	char buf[512];
	const char *api = "daemonsets.apps \"app\" is forbidden: User \"system:serviceaccount:gpu-ops:ctrl\" cannot patch "
			  "resource \"daemonsets\" in API group \"apps\" in the namespace \"my-apps\"";
	gk_gater_forbidden_hint(buf, sizeof(buf), "my-apps", api, "intel-gpu-base-operator");
	cr_assert_str_eq(buf, "no permission to write DaemonSets in namespace my-apps: opt it in with `kubectl -n my-apps "
			      "create rolebinding gpukmm-gate-daemonsets --clusterrole=gpukmm-gate-daemonsets "
			      "--serviceaccount=gpu-ops:ctrl`");
	gk_gater_forbidden_hint(buf, sizeof(buf), "x", "forbidden", "intel-gpu-base-operator");
	cr_assert(strstr(buf, "--serviceaccount=intel-gpu-base-operator:gpukmm-controller`"), "%s", buf);
	gk_gater_forbidden_hint(buf, sizeof(buf), "x", "User \"system:serviceaccount:broken", NULL);
	cr_assert(strstr(buf, "--serviceaccount=intel-gpu-base-operator:gpukmm-controller`"), "%s", buf);
}

/* While the policy's Module is recreated (modmgr's ModuleLoaded condition says
 * Recreating) the key holds a value no node carries: the gated pods leave every
 * node, which lets KMM unload the old Module they hold open; they come back on
 * "" once the new Module is there. */
Test(gater_decide, module_recreating_holds_the_pods_off_every_node)
{
	Gpukmm__Condition ready = GPUKMM__CONDITION__INIT, ml = GPUKMM__CONDITION__INIT;
	ready.type = "Ready";
	ready.reason = GK_POLICY_REASON_RECREATING; /* another condition's reason does not count */
	ml.type = GK_POLICY_COND_MODULE_LOADED;
	ml.reason = "ModuleLoaded";
	Gpukmm__Condition *conds[] = { &ready, &ml };
	Gpukmm__ClusterPolicyStatus st = GPUKMM__CLUSTER_POLICY_STATUS__INIT;
	st.conditions = conds;
	st.n_conditions = 2;
	Gpukmm__ClusterPolicy cp = GPUKMM__CLUSTER_POLICY__INIT;
	cr_assert_str_eq(gk_gater_want(&cp, true), "", "no status yet: gated as usual");
	cp.status = &st;
	cr_assert_str_eq(gk_gater_want(&cp, true), "");
	cr_assert_null(gk_gater_want(&cp, false));
	ml.reason = GK_POLICY_REASON_RECREATING;
	cr_assert_str_eq(gk_gater_want(&cp, true), GK_POLICY_GATE_HOLD_VALUE);
	cr_assert_null(gk_gater_want(&cp, false), "not gating: the key goes, recreating or not");

	Gpukmm__DaemonSet *d = ds("gpu-device-plugin", NS, "{\"" KEY "\":\"\"}", NULL);
	bool oom;
	cJSON *p = gk_gater_patch(d, KEY, GK_POLICY_GATE_HOLD_VALUE, &oom);
	cr_assert_not_null(p);
	char *s = cJSON_PrintUnformatted(p);
	cr_assert_str_eq(s, "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"" KEY
			    "\":\"" GK_POLICY_GATE_HOLD_VALUE "\"}}}},\"metadata\":{\"resourceVersion\":\"42\"}}");
	cJSON_free(s);
	cJSON_Delete(p);
	gk_kobj_free(d);
	d = ds("gpu-device-plugin", NS, "{\"" KEY "\":\"" GK_POLICY_GATE_HOLD_VALUE "\"}", NULL);
	cr_assert(gk_gater_has_gate(d, KEY), "held off: still gated");
	cr_assert_null(gk_gater_patch(d, KEY, GK_POLICY_GATE_HOLD_VALUE, &oom), "already held: no write");
	p = gk_gater_patch(d, KEY, "", &oom);
	cr_assert_not_null(p, "the new Module there: back to \"\"");
	s = cJSON_PrintUnformatted(p);
	cr_assert(strstr(s, "\"" KEY "\":\"\""), "%s", s);
	cJSON_free(s);
	cJSON_Delete(p);
	gk_kobj_free(d);
}
