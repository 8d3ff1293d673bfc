/* fake-kmm AdmissionReview envelope: shape of allowed/denied/errored answers,
 * uid echo, garbage bodies. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/fake-kmm/fakekmm.h"

static cJSON *review(const char *body, int *status)
{
	char *out = fk_review_handle(body, body ? strlen(body) : 0, NULL, status);
	cr_assert_not_null(out);
	cJSON *r = cJSON_Parse(out);
	free(out);
	cr_assert_not_null(r);
	cr_expect_str_eq(cJSON_GetObjectItem(r, "apiVersion")->valuestring, "admission.k8s.io/v1");
	cr_expect_str_eq(cJSON_GetObjectItem(r, "kind")->valuestring, "AdmissionReview");
	return r;
}

static const cJSON *resp(const cJSON *r, const char *k)
{
	return cJSON_GetObjectItem(cJSON_GetObjectItem(r, "response"), k);
}
static const cJSON *st(const cJSON *r, const char *k)
{
	return cJSON_GetObjectItem(resp(r, "status"), k);
}

#define REQ(op, obj, old)                                                                                         \
	"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u-1\",\"operation\":\"" op \
	"\",\"namespace\":\"ns\",\"name\":\"n\",\"object\":" obj ",\"oldObject\":" old "}}"
#define GOOD "{\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\"},\"spec\":{\"selector\":{}}}"

Test(review, allowed)
{
	int s;
	cJSON *r = review(REQ("CREATE", GOOD, "null"), &s);
	cr_expect_eq(s, 200);
	cr_expect_str_eq(resp(r, "uid")->valuestring, "u-1");
	cr_expect(cJSON_IsTrue(resp(r, "allowed")));
	cr_expect_eq(st(r, "code")->valueint, 200);
	cJSON_Delete(r);
}

Test(review, denied_with_kmm_message)
{
	int s;
	cJSON *r = review(REQ("CREATE",
			      "{\"metadata\":{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"},\"spec\":{\"selector\":{}}}",
			      "null"),
			  &s);
	cr_expect_eq(s, 200);
	cr_expect(cJSON_IsFalse(resp(r, "allowed")));
	cr_expect_eq(st(r, "code")->valueint, 403);
	cr_expect_str_eq(st(r, "reason")->valuestring, "Forbidden");
	/* namespace taken from the request: 41 + 2 */
	cr_expect_str_eq(st(r, "message")->valuestring,
			 "module name and namespace have a combined length of 43 characters, which exceeds the maximum of 41 when version is set");
	cJSON_Delete(r);
}

Test(review, update_uses_old_object)
{
	int s;
	cJSON *r = review(REQ("UPDATE",
			      "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"selector\":{},\"moduleLoader\":{\"container\":{\"version\":\"v1\",\"modprobe\":{\"moduleName\":\"x\"},\"kernelMappings\":[{\"literal\":\"1\",\"containerImage\":\"i:t\"}]}}}}",
			      "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"selector\":{},\"moduleLoader\":{\"container\":{\"modprobe\":{\"moduleName\":\"x\"},\"kernelMappings\":[{\"literal\":\"1\",\"containerImage\":\"i:t\"}]}}}}"),
			  &s);
	cr_expect(cJSON_IsFalse(resp(r, "allowed")));
	cr_expect_str_eq(st(r, "message")->valuestring,
			 "cannot update to or from an empty version; please delete the Module and create it again");
	cJSON_Delete(r);
}

Test(review, garbage)
{
	int s;
	const char *bad[] = { "", "not json", "[]", "{\"kind\":\"AdmissionReview\"}", "{\"kind\":\"Pod\",\"request\":{}}",
			      "{\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"operation\":\"CREATE\"}}",
			      REQ("CREATE", "{\"metadata\":{\"name\":\"n\"},\"spec\":[]}", "null") };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cJSON *r = review(bad[i], &s);
		cr_expect_eq(s, 200);
		cr_expect(cJSON_IsFalse(resp(r, "allowed")), "case %zu", i);
		cr_expect_eq(st(r, "code")->valueint, 400, "case %zu", i);
		cJSON_Delete(r);
	}
	cJSON *r = review(REQ("CONNECT", GOOD, "null"), &s);
	cr_expect(cJSON_IsTrue(resp(r, "allowed")));
	cJSON_Delete(r);
	r = review(REQ("DELETE", "null", GOOD), &s);
	cr_expect(cJSON_IsFalse(resp(r, "allowed")));
	cJSON_Delete(r);
}
