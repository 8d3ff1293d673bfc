/* kubesim --kube-version / --runtime-config: /version, the resource.k8s.io versions
 * each release serves (discovery, preferred version, 404 for the others), objects
 * written in one version and read in another (claims: inline vs `exactly`; slices:
 * `basic` vs flat, v1alpha3 bare capacities), the other versions' fields refused
 * under Strict, shape validation, watches converted; the pure conversion both ways. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/kubesim/versions.h"
#include "kubesim_call.h"

static void start(const char *ver, const char *rc)
{
	S = calloc(1, sizeof(*S));
	cr_assert(S);
	cr_assert_eq(ks_server_init(S, 200), 0);
	gk_err e = { 0 };
	cr_assert_eq(ks_versions_set(S, ver, rc, &e), 0, "%s", e.msg);
	cr_assert_eq(ks_server_seed(S), 0);
}

static void stop(void)
{
	if (!S)
		return;
	ks_server_free(S);
	free(S);
	S = NULL;
}

TestSuite(versions, .fini = stop);

#define RC(v) "/apis/resource.k8s.io/" v "/namespaces/default/resourceclaims"
#define JSON "application/json"
#define CLAIM_INLINE                                                                                              \
	"{\"metadata\":{\"name\":\"c1\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"deviceClassName\":" \
	"\"gpu.intel.com\",\"count\":2}]}}}"
#define CLAIM_EXACTLY                                                                                             \
	"{\"metadata\":{\"name\":\"c2\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{"       \
	"\"deviceClassName\":\"gpu.intel.com\",\"count\":1}}]}}}"

/* the group's discovery: served versions in order, preferred first */
static void expect_group(const char *versions_csv)
{
	int code;
	cJSON *g = call("GET", "/apis/resource.k8s.io", NULL, NULL, &code);
	if (!versions_csv) {
		cr_assert_eq(code, 404);
		cJSON_Delete(g);
		return;
	}
	cr_assert_eq(code, 200);
	char got[256] = "";
	const cJSON *v;
	cJSON_ArrayForEach(v, cJSON_GetObjectItem(g, "versions"))
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", got[0] ? "," : "",
			 cJSON_GetObjectItem(v, "version")->valuestring);
	cr_assert_str_eq(got, versions_csv);
	char pref[64];
	snprintf(pref, sizeof(pref), "%.*s", (int)strcspn(versions_csv, ","), versions_csv);
	cr_assert_str_eq(str(g, "preferredVersion.version"), pref);
	cJSON_Delete(g);
}

Test(versions, default_is_1_32_with_resource_v1)
{
	start(NULL, NULL);
	int code;
	cJSON *v = call("GET", "/version", NULL, NULL, &code);
	cr_assert_str_eq(str(v, "minor"), "32");
	cr_assert_str_eq(str(v, "gitVersion"), "v1.32.4-kubesim");
	cr_assert_null(cJSON_GetObjectItem(v, "emulationMinor"));
	cJSON_Delete(v);
	expect_group("v1");
	cr_assert_eq(do_("POST", RC("v1"), CLAIM_EXACTLY, JSON), 201);
	cr_assert_eq(do_("GET", RC("v1beta1"), NULL, NULL), 404);
}

Test(versions, each_release_serves_its_versions)
{
	static const struct {
		const char *ver, *group, *minor;
	} want[] = {
		{ "1.31", "v1alpha3", "31" },
		{ "1.32", "v1beta1", "32" },
		{ "1.33", "v1beta2,v1beta1", "33" },
		{ "1.34", "v1", "34" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		start(want[i].ver, NULL);
		int code;
		cJSON *v = call("GET", "/version", NULL, NULL, &code);
		cr_assert_str_eq(str(v, "minor"), want[i].minor);
		cr_assert_eq(strncmp(str(v, "gitVersion"), "v1.", 3), 0);
		cJSON_Delete(v);
		expect_group(want[i].group);
		/* every kind in every served version, DeviceClass and ResourceSlice cluster-scoped */
		char url[256];
		snprintf(url, sizeof(url), "/apis/resource.k8s.io/%.*s", (int)strcspn(want[i].group, ","), want[i].group);
		cJSON *l = call("GET", url, NULL, NULL, &code);
		cr_assert_eq(code, 200);
		int n = 0, cluster = 0;
		const cJSON *r;
		cJSON_ArrayForEach(r, cJSON_GetObjectItem(l, "resources")) {
			n++;
			if (cJSON_IsFalse(cJSON_GetObjectItem(r, "namespaced")))
				cluster++;
		}
		cr_assert_eq(n, 5, "4 kinds + resourceclaims/status in %s", want[i].ver);
		cr_assert_eq(cluster, 2);
		cJSON_Delete(l);
		stop();
	}
}

Test(versions, runtime_config_turns_versions_on_and_off)
{
	start("1.34", "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true");
	expect_group("v1,v1beta2,v1beta1");
	stop();
	start("1.33", "resource.k8s.io/v1beta2=false,resource.k8s.io/v1beta1=false");
	expect_group(NULL); /* DRA not enabled */
	cr_assert_eq(do_("GET", RC("v1beta1"), NULL, NULL), 404);
	stop();
	S = calloc(1, sizeof(*S));
	cr_assert_eq(ks_server_init(S, 10), 0);
	gk_err e = { 0 };
	cr_assert_neq(ks_versions_set(S, "1.30", NULL, &e), 0);
	cr_assert(strstr(e.msg, "1.31 to 1.34"), "%s", e.msg);
	cr_assert_neq(ks_versions_set(S, "1.33", "resource.k8s.io/v1=true", &e), 0);
	cr_assert(strstr(e.msg, "not an API version of Kubernetes 1.33"), "%s", e.msg);
	cr_assert_neq(ks_versions_set(S, "1.33", "resource.k8s.io/v1beta1=maybe", &e), 0);
	cr_assert_neq(ks_versions_set(S, "2.0", NULL, &e), 0);
}

Test(versions, written_in_one_version_read_in_another)
{
	start("1.33", NULL);
	int code;
	cJSON *o = call("POST", RC("v1beta1"), CLAIM_INLINE, JSON, &code);
	cr_assert_eq(code, 201);
	cr_assert_str_eq(str(o, "apiVersion"), "resource.k8s.io/v1beta1");
	cr_assert_str_eq(str(o, "spec.devices.requests.0.deviceClassName"), "gpu.intel.com");
	cJSON_Delete(o);
	o = call("GET", RC("v1beta2") "/c1", NULL, NULL, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "apiVersion"), "resource.k8s.io/v1beta2");
	cr_assert_str_eq(str(o, "spec.devices.requests.0.exactly.deviceClassName"), "gpu.intel.com");
	cr_assert_str_eq(str(o, "spec.devices.requests.0.exactly.count"), "2");
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
							    cJSON_GetObjectItem(o, "spec"), "devices"), "requests"), 0),
					 "deviceClassName"));
	cJSON_Delete(o);
	/* the allocation result (driver) is the same in both */
	cr_assert_eq(do_("PATCH", RC("v1beta2") "/c1/status",
			 "{\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":"
			 "\"gpu.intel.com\",\"pool\":\"n1\",\"device\":\"card0\"}]}}}}",
			 "application/merge-patch+json"),
		     200);
	o = call("GET", "/apis/resource.k8s.io/v1beta1/resourceclaims", NULL, NULL, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "apiVersion"), "resource.k8s.io/v1beta1");
	cr_assert_str_eq(str(o, "items.0.apiVersion"), "resource.k8s.io/v1beta1");
	cr_assert_str_eq(str(o, "items.0.spec.devices.requests.0.deviceClassName"), "gpu.intel.com");
	cr_assert_str_eq(str(o, "items.0.status.allocation.devices.results.0.driver"), "gpu.intel.com");
	cJSON_Delete(o);
	/* a merge patch at v1beta2 edits the nested shape */
	cr_assert_eq(do_("PATCH", RC("v1beta2") "/c1",
			 "{\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":"
			 "\"gpu-vfio.intel.com\"}}]}}}",
			 "application/merge-patch+json"),
		     200);
	o = call("GET", RC("v1beta1") "/c1", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "spec.devices.requests.0.deviceClassName"), "gpu-vfio.intel.com");
	cJSON_Delete(o);
	/* watches in either version get their own shape */
	char *s = watch_all(RC("v1beta2") "?watch=1&timeoutSeconds=1");
	cr_assert(strstr(s, "\"exactly\":{\"deviceClassName\":\"gpu-vfio.intel.com\"}"), "%s", s);
	cr_assert(strstr(s, "\"apiVersion\":\"resource.k8s.io/v1beta2\""), "%s", s);
	free(s);
	s = watch_all(RC("v1beta1") "?watch=1&timeoutSeconds=1");
	cr_assert(strstr(s, "\"deviceClassName\":\"gpu-vfio.intel.com\""), "%s", s);
	cr_assert_null(strstr(s, "exactly"), "%s", s);
	free(s);
}

Test(versions, the_other_versions_shape_is_refused)
{
	start("1.34", "resource.k8s.io/v1beta1=true");
	int code;
	/* v1: inline fields are unknown (Strict: 400), and the request then lacks `exactly` */
	cJSON *o = call("POST", RC("v1") "?fieldValidation=Strict", CLAIM_INLINE, JSON, &code);
	cr_assert_eq(code, 400);
	cr_assert(strstr(str(o, "message"), "strict decoding error: unknown field \"spec.devices.requests[0].deviceClassName\""),
		  "%s", str(o, "message"));
	cJSON_Delete(o);
	o = call("POST", RC("v1"), CLAIM_INLINE, JSON, &code);
	cr_assert_eq(code, 422);
	cr_assert(strstr(str(o, "message"), "spec.devices.requests[0]: Required value: exactly one of `exactly` or "
					    "`firstAvailable` is required"),
		  "%s", str(o, "message"));
	cJSON_Delete(o);
	/* v1beta1: `exactly` is unknown there */
	o = call("POST", RC("v1beta1") "?fieldValidation=Strict", CLAIM_EXACTLY, JSON, &code);
	cr_assert_eq(code, 400);
	cr_assert(strstr(str(o, "message"), "unknown field \"spec.devices.requests[0].exactly\""), "%s", str(o, "message"));
	cJSON_Delete(o);
	o = call("POST", RC("v1beta1"), CLAIM_EXACTLY, JSON, &code);
	cr_assert_eq(code, 422);
	cr_assert(strstr(str(o, "message"), "spec.devices.requests[0].deviceClassName: Required value"), "%s",
		  str(o, "message"));
	cJSON_Delete(o);
	cr_assert_eq(do_("POST", RC("v1"),
			 "{\"metadata\":{\"name\":\"c3\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\","
			 "\"exactly\":{\"count\":1}}]}}}",
			 JSON),
		     422);
	cr_assert_eq(do_("POST", RC("v1"), CLAIM_EXACTLY, JSON), 201);
	cr_assert_eq(do_("POST", "/apis/resource.k8s.io/v1/deviceclasses",
			 "{\"metadata\":{\"name\":\"gpu.intel.com\"},\"spec\":{\"selectors\":[{\"cel\":{\"expression\":"
			 "\"device.driver == 'gpu.intel.com'\"}}]}}",
			 JSON),
		     201);
	cr_assert_eq(do_("GET", "/apis/resource.k8s.io/v1beta1/deviceclasses/gpu.intel.com", NULL, NULL), 200);
	cr_assert_eq(do_("POST", "/apis/resource.k8s.io/v1/namespaces/default/deviceclasses",
			 "{\"metadata\":{\"name\":\"x\"}}", JSON),
		     404, "DeviceClass is cluster-scoped");
}

Test(versions, slices_basic_and_capacities)
{
	start("1.32", "resource.k8s.io/v1alpha3=true");
	int code;
	cr_assert_eq(do_("POST", "/apis/resource.k8s.io/v1alpha3/resourceslices",
			 "{\"metadata\":{\"name\":\"n1-gpu\"},\"spec\":{\"driver\":\"gpu.intel.com\",\"nodeName\":\"n1\","
			 "\"pool\":{\"name\":\"n1\",\"resourceSliceCount\":1},\"devices\":[{\"name\":\"card0\",\"basic\":{"
			 "\"attributes\":{\"model\":{\"string\":\"B580\"}},\"capacity\":{\"memory\":\"12Gi\"}}}]}}",
			 JSON),
		     201);
	cJSON *o = call("GET", "/apis/resource.k8s.io/v1beta1/resourceslices/n1-gpu", NULL, NULL, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "spec.devices.0.basic.capacity.memory.value"), "12Gi");
	cr_assert_str_eq(str(o, "spec.devices.0.basic.attributes.model.string"), "B580");
	cJSON_Delete(o);
	o = call("GET", "/apis/resource.k8s.io/v1alpha3/resourceslices/n1-gpu", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "spec.devices.0.basic.capacity.memory"), "12Gi");
	cJSON_Delete(o);
}

Test(versions, pure_conversion_round_trips)
{
	const char *claim = "{\"apiVersion\":\"resource.k8s.io/v1beta1\",\"spec\":{\"devices\":{\"requests\":[{\"name\":"
			    "\"a\",\"deviceClassName\":\"c\",\"selectors\":[{\"cel\":{\"expression\":\"true\"}}],"
			    "\"allocationMode\":\"ExactCount\",\"count\":3,\"adminAccess\":true},{\"name\":\"b\","
			    "\"firstAvailable\":[{\"name\":\"x\",\"deviceClassName\":\"c\"}]}]}}}";
	cJSON *o = cJSON_Parse(claim), *orig = cJSON_Parse(claim);
	cr_assert_eq(ks_conv(o, "resource.k8s.io", "resourceclaims", "v1"), 0);
	cr_assert_str_eq(str(o, "apiVersion"), "resource.k8s.io/v1");
	cr_assert_str_eq(str(o, "spec.devices.requests.0.exactly.allocationMode"), "ExactCount");
	cr_assert_str_eq(str(o, "spec.devices.requests.0.exactly.adminAccess"), "true");
	cr_assert_str_eq(str(o, "spec.devices.requests.1.firstAvailable.0.deviceClassName"), "c",
			 "firstAvailable subrequests are the same in both");
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
							    cJSON_GetObjectItem(o, "spec"), "devices"), "requests"), 1),
					 "exactly"));
	cr_assert_eq(ks_conv(o, "resource.k8s.io", "resourceclaims", "v1beta1"), 0);
	cr_assert(cJSON_Compare(o, orig, 1), "%s", cJSON_PrintUnformatted(o));
	cJSON_Delete(o);
	cJSON_Delete(orig);
	const char *slice = "{\"apiVersion\":\"resource.k8s.io/v1\",\"spec\":{\"devices\":[{\"name\":\"d\",\"attributes\":"
			    "{\"a\":{\"int\":1}},\"capacity\":{\"memory\":{\"value\":\"1Gi\"}}}]}}";
	o = cJSON_Parse(slice);
	orig = cJSON_Parse(slice);
	cr_assert_eq(ks_conv(o, "resource.k8s.io", "resourceslices", "v1alpha3"), 0);
	cr_assert_str_eq(str(o, "spec.devices.0.basic.capacity.memory"), "1Gi");
	cr_assert_str_eq(str(o, "spec.devices.0.name"), "d");
	cr_assert_eq(ks_conv(o, "resource.k8s.io", "resourceslices", "v1"), 0);
	cr_assert(cJSON_Compare(o, orig, 1), "%s", cJSON_PrintUnformatted(o));
	cJSON_Delete(o);
	cJSON_Delete(orig);
	/* other groups: only the apiVersion */
	o = cJSON_Parse("{\"apiVersion\":\"x.io/v1\",\"spec\":{\"basic\":1}}");
	cr_assert_eq(ks_conv(o, "x.io", "things", "v2"), 0);
	cr_assert_str_eq(str(o, "apiVersion"), "x.io/v2");
	cr_assert_str_eq(str(o, "spec.basic"), "1");
	cJSON_Delete(o);
}
