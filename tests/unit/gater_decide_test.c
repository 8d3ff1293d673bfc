/* gpukmm-gater: the pure gating decision (§3, §8.1 item 9).
 * (services/gater has no main.c yet, so its code is not in libgpukmm-app.a:
 * the test compiles the source directly.) */
#include <criterion/criterion.h>
#include <string.h>

#include "../../services/gater/decide.c"

#define NS "intel-gpu-base-operator"
#define KEY "kmm.node.kubernetes.io/intel-gpu-base-operator.gpu-gpu.ready"

static cJSON *ds(const char *name, const char *ns, const char *sel_json, const char *labels_json)
{
	char buf[2048];
	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"resourceVersion\":\"42\",\"labels\":%s},"
		 "\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":%s,\"containers\":[{\"image\":\"x\"}]}}},"
		 "\"status\":{\"numberReady\":1,\"desiredNumberScheduled\":2}}",
		 name, ns, labels_json ? labels_json : "{}", sel_json ? sel_json : "null");
	cJSON *o = cJSON_Parse(buf);
	cr_assert_not_null(o);
	return o;
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
		cJSON *d = ds(yes[i], NS, NULL, NULL);
		cr_assert(gk_gater_is_gated(d, "gpu", NS), "%s", yes[i]);
		cr_assert_not(gk_gater_is_gated(d, "other", NS));
		cJSON_Delete(d);
	}
	cJSON *d = ds("gpu-device-plugin", "default", NULL, NULL);
	cr_assert_not(gk_gater_is_gated(d, "gpu", NS), "right name, wrong namespace");
	cJSON_Delete(d);
	d = ds("my-gpu-app", "default", NULL, "{\"gpukmm.io/gate\":\"gpu\"}");
	cr_assert(gk_gater_is_gated(d, "gpu", NS), "opt-in label, any namespace");
	cr_assert_not(gk_gater_is_gated(d, "gpu2", NS));
	cJSON_Delete(d);
	d = ds("unrelated", NS, NULL, "{\"gpukmm.io/gate\":7}");
	cr_assert_not(gk_gater_is_gated(d, "gpu", NS));
	cJSON_Delete(d);
	cr_assert_not(gk_gater_is_gated(NULL, "gpu", NS));
	cJSON *garbage = cJSON_Parse("[1]");
	cr_assert_not(gk_gater_is_gated(garbage, "gpu", NS));
	cJSON_Delete(garbage);
}

Test(gater_decide, gate_adds_only_our_key_with_precondition)
{
	cJSON *d = ds("gpu-device-plugin", NS, "{\"kubernetes.io/arch\":\"amd64\",\"other\":\"x\"}", NULL);
	bool oom;
	cJSON *p = gk_gater_patch(d, KEY, true, &oom);
	cr_assert_not_null(p);
	char *s = cJSON_PrintUnformatted(p);
	cr_assert_str_eq(s, "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"" KEY
			    "\":\"\"}}}},\"metadata\":{\"resourceVersion\":\"42\"}}");
	cJSON_free(s);
	cJSON_Delete(p);
	cJSON_Delete(d);
}

Test(gater_decide, no_write_when_already_right)
{
	bool oom;
	cJSON *d = ds("gpu-device-plugin", NS, "{\"" KEY "\":\"\",\"other\":\"x\"}", NULL);
	cr_assert_null(gk_gater_patch(d, KEY, true, &oom));
	cr_assert_not(oom);
	cJSON_Delete(d);
	d = ds("gpu-device-plugin", NS, "{\"other\":\"x\"}", NULL);
	cr_assert_null(gk_gater_patch(d, KEY, false, &oom));
	cJSON_Delete(d);
	d = ds("gpu-device-plugin", NS, NULL, NULL); /* no nodeSelector at all */
	cr_assert_null(gk_gater_patch(d, KEY, false, &oom));
	cJSON_Delete(d);
}

Test(gater_decide, ungate_removes_key_with_null_and_fixes_wrong_value)
{
	bool oom;
	cJSON *d = ds("gpu-device-plugin", NS, "{\"" KEY "\":\"\"}", NULL);
	cJSON *p = gk_gater_patch(d, KEY, false, &oom);
	cr_assert_not_null(p);
	const cJSON *v = cJSON_GetObjectItem(
		cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "template"),
							"spec"),
				    "nodeSelector"),
		KEY);
	cr_assert(cJSON_IsNull(v));
	cJSON_Delete(p);
	cJSON_Delete(d);
	d = ds("gpu-device-plugin", NS, "{\"" KEY "\":\"true\"}", NULL); /* someone set a wrong value */
	p = gk_gater_patch(d, KEY, true, &oom);
	cr_assert_not_null(p);
	cJSON_Delete(p);
	cJSON_Delete(d);
}

Test(gater_decide, ds_status_strings)
{
	char b[64];
	gk_gater_ds_status(b, sizeof(b), NULL);
	cr_assert_str_eq(b, "N/A");
	cJSON *d = ds("gpu-device-plugin", NS, NULL, NULL);
	gk_gater_ds_status(b, sizeof(b), d);
	cr_assert_str_eq(b, "1/2");
	cJSON_Delete(d);
	cJSON *e = cJSON_Parse("{\"metadata\":{\"name\":\"x\"}}");
	gk_gater_ds_status(b, sizeof(b), e);
	cr_assert_str_eq(b, "0/0");
	cJSON_Delete(e);
}
