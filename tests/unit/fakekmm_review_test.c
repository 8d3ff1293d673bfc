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

Test(whconfig, listen_parse)
{
	fk_listen l;
	gk_err e;
	cr_expect_eq(fk_listen_parse("http://127.0.0.1:0", &l, &e), 0);
	cr_expect_eq(l.tls, 0);
	cr_expect_eq(l.port, 0);
	cr_expect_str_eq(l.host, "127.0.0.1");
	cr_expect_eq(fk_listen_parse("https://0.0.0.0:9443/", &l, &e), 0);
	cr_expect_eq(l.tls, 1);
	cr_expect_eq(l.port, 9443);
	const char *bad[] = { NULL, "", "ftp://1.2.3.4:1", "http://localhost:80", "http://1.2.3.4", "http://1.2.3.4:x",
			      "http://1.2.3.4:70000", "http://:80", "http://1.2.3.4:-1", "http://1.2.3.4:80/path" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_eq(fk_listen_parse(bad[i], &l, &e), GK_INVALID_ARGUMENT, "case %zu", i);
}

Test(whconfig, configuration_object)
{
	cJSON *o = fk_webhook_config_object("cfg", "http://127.0.0.1:5/validate-kmm-sigs-x-k8s-io-v1beta1-module", NULL);
	cr_assert_not_null(o);
	char *s = cJSON_PrintUnformatted(o);
	cr_expect_str_eq(s,
			 "{\"metadata\":{\"name\":\"cfg\"},\"webhooks\":[{\"rules\":[{\"apiGroups\":[\"kmm.sigs.x-k8s.io\"],\"apiVersions\":[\"v1beta1\"],"
			 "\"operations\":[\"CREATE\",\"UPDATE\"],\"resources\":[\"modules\"]}],\"clientConfig\":{\"url\":\"http://127.0.0.1:5/validate-kmm-sigs-x-k8s-io-v1beta1-module\"},"
			 "\"name\":\"vmodule.kb.io\",\"failurePolicy\":\"Fail\",\"sideEffects\":\"None\",\"timeoutSeconds\":10,\"admissionReviewVersions\":[\"v1\"]}],"
			 "\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":\"ValidatingWebhookConfiguration\"}");
	cJSON_free(s);
	cJSON_Delete(o);
	o = fk_webhook_config_object("cfg", "https://x", "PEM");
	const cJSON *cc = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "webhooks"), 0), "clientConfig");
	cr_expect_str_eq(cJSON_GetObjectItem(cc, "caBundle")->valuestring, "UEVN"); /* base64("PEM") */
	cJSON_Delete(o);
}
