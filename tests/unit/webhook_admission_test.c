/* gpukmm-webhook's pure AdmissionReview handling (services/webhook/admission.c). */
#include <criterion/criterion.h>

#include "gpukmm/policy.h"
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../services/webhook/admission.h"

#define REVIEW(op, obj) "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u-1\"," \
	"\"operation\":\"" op "\",\"object\":" obj "}}"
#define CP(spec) "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"gpu\"},\"spec\":" spec "}"

static cJSON *run(enum gk_webhook_kind k, const char *body, int want_status, enum gk_webhook_outcome want)
{
	gk_webhook_result r;
	gk_webhook_review(k, body, strlen(body), NULL, &r);
	cr_assert_eq(r.http_status, want_status, "%s -> %d %s", body, r.http_status, r.body);
	cr_assert_eq(r.outcome, want, "%s", body);
	cJSON *j = want_status == 200 ? cJSON_Parse(r.body) : NULL;
	if (want_status == 200) {
		cr_assert_not_null(j, "%s", r.body);
		cr_assert_str_eq(cJSON_GetObjectItem(j, "apiVersion")->valuestring, "admission.k8s.io/v1");
		cr_assert_str_eq(cJSON_GetObjectItem(j, "kind")->valuestring, "AdmissionReview");
		cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "response"), "uid")->valuestring, "u-1");
	} else {
		cr_assert_not_null(r.body);
	}
	gk_webhook_result_free(&r);
	return j;
}

static char *patch_of(cJSON *review)
{
	cJSON *resp = cJSON_GetObjectItem(review, "response");
	cJSON *p = cJSON_GetObjectItem(resp, "patch");
	if (!p)
		return NULL;
	cr_assert_str_eq(cJSON_GetObjectItem(resp, "patchType")->valuestring, "JSONPatch");
	size_t n = strlen(p->valuestring);
	unsigned char *out = calloc(1, n + 1);
	int len = EVP_DecodeBlock(out, (const unsigned char *)p->valuestring, (int)n);
	cr_assert(len > 0);
	while (len > 0 && out[len - 1] == 0)
		len--;
	out[len] = 0;
	return (char *)out;
}

/* the images and monitoringResource given: only moduleName is defaulted */
#define IMAGES "\"dp\":{\"plugin\":\"r.io/dp:1\"},\"dra\":{\"image\":\"r.io/dra:1\"}," \
	       "\"xpu\":{\"image\":\"r.io/x:1\",\"monitoringResource\":\"monitoring\"}"

Test(mutate, defaults_module_name)
{
	cJSON *j = run(GK_WEBHOOK_MUTATE, REVIEW("CREATE", CP("{\"resourceRegistration\":\"dp\"," IMAGES ",\"kernelModule\":{\"kernelMappings\":[]}}")),
		       200, GK_WEBHOOK_ALLOWED);
	char *p = patch_of(j);
	cr_assert_str_eq(p, "[{\"op\":\"add\",\"path\":\"/spec/kernelModule/moduleName\",\"value\":\"xe\"}]");
	cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "response"), "allowed")));
	free(p);
	cJSON_Delete(j);
}

Test(mutate, nothing_when_set_or_in_tree)
{
	const char *objs[] = { CP("{\"resourceRegistration\":\"dp\"," IMAGES ",\"kernelModule\":{\"moduleName\":\"i915\"}}"),
			       CP("{\"resourceRegistration\":\"dp\"," IMAGES "}") };
	for (int i = 0; i < 2; i++) {
		char body[1024];
		snprintf(body, sizeof(body), REVIEW("UPDATE", "%s"), objs[i]);
		cJSON *j = run(GK_WEBHOOK_MUTATE, body, 200, GK_WEBHOOK_ALLOWED);
		cr_assert_null(patch_of(j));
		cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "response"), "patchType"));
		cJSON_Delete(j);
	}
}

/* upstream §2.2: the images and monitoringResource, whatever the mode */
Test(mutate, defaults_images_and_monitoring_resource)
{
	cJSON *j = run(GK_WEBHOOK_MUTATE, REVIEW("CREATE", CP("{\"resourceRegistration\":\"dra\"}")), 200, GK_WEBHOOK_ALLOWED);
	char *p = patch_of(j);
	cr_assert_str_eq(p, "[{\"op\":\"add\",\"path\":\"/spec/dp\",\"value\":{\"plugin\":\"" GK_POLICY_DEFAULT_DP_IMAGE "\"}},"
			    "{\"op\":\"add\",\"path\":\"/spec/dra\",\"value\":{\"image\":\"" GK_POLICY_DEFAULT_DRA_IMAGE "\"}},"
			    "{\"op\":\"add\",\"path\":\"/spec/xpu\",\"value\":{\"image\":\"" GK_POLICY_DEFAULT_XPU_IMAGE "\"}},"
			    "{\"op\":\"add\",\"path\":\"/spec/xpu/monitoringResource\",\"value\":\"monitoring\"}]");
	free(p);
	cJSON_Delete(j);
}

Test(validate, allow_and_deny_with_upstream_message)
{
	cJSON *j = run(GK_WEBHOOK_VALIDATE, REVIEW("CREATE", CP("{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"kernelMappings\":"
			"[{\"regexp\":\"^.+$\",\"containerImage\":\"registry.example.com/xe-driver:1.0\"}]}}")), 200, GK_WEBHOOK_ALLOWED);
	cJSON *resp = cJSON_GetObjectItem(j, "response");
	cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(resp, "allowed")));
	cr_assert_null(cJSON_GetObjectItem(resp, "status"));
	cJSON_Delete(j);
	j = run(GK_WEBHOOK_VALIDATE, REVIEW("UPDATE", CP("{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"modulesLoadingOrder\":[\"xe\"],"
			"\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":\"registry.example.com/xe-driver\"}]}}")), 200, GK_WEBHOOK_DENIED);
	resp = cJSON_GetObjectItem(j, "response");
	cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(resp, "allowed")));
	cJSON *st = cJSON_GetObjectItem(resp, "status");
	cr_assert_eq(cJSON_GetObjectItem(st, "code")->valueint, 403);
	cr_assert_str_eq(cJSON_GetObjectItem(st, "message")->valuestring,
			 "kernelModule.kernelMappings[0].containerImage: image \"registry.example.com/xe-driver\" must include an "
			 "explicit tag or digest\nkernelModule.modulesLoadingOrder must have at least 2 entries");
	cJSON_Delete(j);
}

Test(validate, levelzero_warning)
{
	cJSON *j = run(GK_WEBHOOK_VALIDATE, REVIEW("CREATE", CP("{\"resourceRegistration\":\"dp\",\"dp\":{\"levelzero\":\"intel/l0:1\"}}")),
		       200, GK_WEBHOOK_ALLOWED);
	cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "response"), "warnings");
	cr_assert_eq(cJSON_GetArraySize(w), 1);
	cr_assert_str_eq(cJSON_GetArrayItem(w, 0)->valuestring, "dp.levelzero is no longer used and will be ignored.");
	cJSON_Delete(j);
}

Test(validate, deletion_in_progress_is_not_blocked)
{
	const char *obj = "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"gpu\","
			  "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},\"spec\":{\"resourceRegistration\":\"bogus\"}}";
	char body[1024];
	snprintf(body, sizeof(body), REVIEW("UPDATE", "%s"), obj);
	cJSON_Delete(run(GK_WEBHOOK_VALIDATE, body, 200, GK_WEBHOOK_ALLOWED));
	snprintf(body, sizeof(body), REVIEW("CREATE", "%s"), obj);
	cJSON_Delete(run(GK_WEBHOOK_VALIDATE, body, 200, GK_WEBHOOK_DENIED));
	cJSON_Delete(run(GK_WEBHOOK_VALIDATE, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
			 "\"request\":{\"uid\":\"u-1\",\"operation\":\"DELETE\"}}", 200, GK_WEBHOOK_ALLOWED));
}

Test(malformed, four_hundred_never_a_crash)
{
	const char *bad[] = {
		"", "not json", "[]", "null", "{}", "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\"}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Other\"}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":5}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"operation\":\"CREATE\"}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"\",\"operation\":\"CREATE\"}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\"}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"operation\":\"CREATE\"}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":[]}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":{}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (int k = 0; k < 2; k++) {
			gk_webhook_result r;
			gk_webhook_review(k ? GK_WEBHOOK_MUTATE : GK_WEBHOOK_VALIDATE, bad[i], strlen(bad[i]), NULL, &r);
			cr_expect_eq(r.http_status, 400, "%s -> %d", bad[i], r.http_status);
			cr_expect(r.body && strstr(r.body, "malformed AdmissionReview: "), "%s", bad[i]);
			gk_webhook_result_free(&r);
		}
	}
	/* not NUL-terminated: only len bytes are read */
	char buf[8] = { '{', '}', 'x', 'x', 'x', 'x', 'x', 'x' };
	gk_webhook_result r;
	gk_webhook_review(GK_WEBHOOK_VALIDATE, buf, 2, NULL, &r);
	cr_expect_eq(r.http_status, 400);
	gk_webhook_result_free(&r);
}

Test(content_type, json_only)
{
	cr_assert(gk_webhook_json_content_type("application/json"));
	cr_assert(gk_webhook_json_content_type("application/json; charset=utf-8"));
	cr_assert(gk_webhook_json_content_type("Application/JSON"));
	cr_assert(!gk_webhook_json_content_type("application/jsonx"));
	cr_assert(!gk_webhook_json_content_type("text/plain"));
	cr_assert(!gk_webhook_json_content_type(NULL));
	cr_assert(!gk_webhook_json_content_type(""));
}

Test(validate, sign_and_parameters_refused_with_their_fields)
{
	cJSON *j = run(GK_WEBHOOK_VALIDATE, REVIEW("CREATE", CP("{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"parameters\":"
			"[\"max_vfs=1 2\"],\"sign\":{\"keySecret\":{\"name\":\"k\"},\"certSecret\":{\"name\":\"c\"},\"unsignedImage\":"
			"\"r.io/u:1\",\"filesToSign\":[\"/etc/xe.ko\"]},\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":"
			"\"r.io/xe:1\"}]}}")), 200, GK_WEBHOOK_DENIED);
	cJSON *st = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "response"), "status");
	cr_assert_str_eq(cJSON_GetObjectItem(st, "message")->valuestring,
			 "kernelModule.parameters[0] \"max_vfs=1 2\": the value contains whitespace; a value is letters, digits "
			 "and . _ , : + / @ % = - only (no whitespace, quotes or shell metacharacters)\n"
			 "kernelModule.sign.filesToSign[0] \"/etc/xe.ko\" must be under KMM's dirName \"/opt/\" (the module "
			 "image's tree KMM signs and loads from), e.g. \"/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko\"");
	cJSON_Delete(j);
}

Test(refuse, a_review_refused_unparsed_is_a_denial_with_its_code)
{
	gk_webhook_result r;
	gk_webhook_refuse("u-1", 413, "RequestEntityTooLarge", "too \"big\"", &r);
	cr_assert_eq(r.http_status, 200);
	cr_assert_eq(r.outcome, GK_WEBHOOK_DENIED);
	cr_assert_str_eq(r.body, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":\"u-1\","
				 "\"allowed\":false,\"status\":{\"code\":413,\"reason\":\"RequestEntityTooLarge\","
				 "\"message\":\"too \\\"big\\\"\"}}}");
	gk_webhook_result_free(&r);
}
