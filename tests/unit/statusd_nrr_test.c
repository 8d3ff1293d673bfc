/* gpukmm-statusd: NodeReportRequests, the pure part (nrr.c): what a request must
 * carry, the TokenReview verdict (which node wrote it), the report check. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../../services/statusd/nrr.h"

#define SA "system:serviceaccount:ops:gpukmm-node"

static cJSON *review(const char *json)
{
	cJSON *o = cJSON_Parse(json);
	cr_assert_not_null(o, "%s", json);
	return o;
}

/* the TokenReview answer for a pod-bound token of user on node */
static char *answer(char *buf, size_t cap, const char *user, const char *node, const char *aud)
{
	snprintf(buf, cap,
		 "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"%s\",\"groups\":[\"system:serviceaccounts\"],"
		 "\"extra\":{\"authentication.kubernetes.io/node-name\":[\"%s\"],"
		 "\"authentication.kubernetes.io/pod-name\":[\"gpukmm-node-x\"]}},\"audiences\":[\"%s\"]}}",
		 user, node, aud);
	return buf;
}

static bool verdict(const char *json, const char *node, char *why, size_t cap)
{
	cJSON *r = review(json);
	bool ok = gk_sd_nrr_verdict(r, node, SA, why, cap);
	cJSON_Delete(r);
	return ok;
}

Test(statusd_nrr, the_token_must_name_the_requests_node)
{
	char buf[1024], why[512] = "";
	cr_expect(verdict(answer(buf, sizeof buf, SA, "n1", GK_SD_NRR_AUDIENCE), "n1", why, sizeof why), "%s", why);
	cr_expect_not(verdict(answer(buf, sizeof buf, SA, "n2", GK_SD_NRR_AUDIENCE), "n1", why, sizeof why));
	cr_expect_str_eq(why, "it was written by node n2's pod, for another node");
	cr_expect_not(verdict(answer(buf, sizeof buf, "system:serviceaccount:ops:intruder", "n1", GK_SD_NRR_AUDIENCE), "n1",
			      why, sizeof why));
	cr_expect(strstr(why, "written with the token of system:serviceaccount:ops:intruder, not of the node ServiceAccount"),
		  "%s", why);
	cr_expect_not(verdict(answer(buf, sizeof buf, SA, "n1", "https://kubernetes.default.svc.cluster.local"), "n1", why,
			      sizeof why));
	cr_expect(strstr(why, "not for the audience gpukmm.io/node-report"), "%s", why);
	/* not authenticated, with the API server's error */
	cr_expect_not(verdict("{\"status\":{\"user\":{},\"error\":\"token expired\"}}", "n1", why, sizeof why));
	cr_expect_str_eq(why, "its token does not authenticate for the audience gpukmm.io/node-report: token expired");
	/* authenticated, but no node in the token (Kubernetes < 1.30, or a token not bound to a pod) */
	cr_expect_not(verdict("{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"" SA "\"},"
			      "\"audiences\":[\"gpukmm.io/node-report\"]}}",
			      "n1", why, sizeof why));
	cr_expect(strstr(why, "its token names no node"), "%s", why);
	/* two node names: ambiguous, refused */
	cr_expect_not(verdict("{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"" SA "\",\"extra\":"
			      "{\"authentication.kubernetes.io/node-name\":[\"n1\",\"n2\"]}},\"audiences\":[\"gpukmm.io/node-report\"]}}",
			      "n1", why, sizeof why));
	/* garbage answers are refusals, never acceptances */
	cr_expect_not(verdict("{}", "n1", why, sizeof why));
	cr_expect_not(verdict("{\"status\":{\"authenticated\":\"true\"}}", "n1", why, sizeof why));
}

Test(statusd_nrr, review_body)
{
	cJSON *b = gk_sd_nrr_review("t0k");
	char *s = cJSON_PrintUnformatted(b);
	cr_expect_str_eq(s, "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":"
			    "{\"token\":\"t0k\",\"audiences\":[\"gpukmm.io/node-report\"]}}");
	free(s);
	cJSON_Delete(b);
}

static gk_sd_nrr parse(const char *json, int want_rc)
{
	cJSON *o = cJSON_Parse(json);
	gk_sd_nrr r;
	gk_err e = { 0 };
	cr_expect_eq(gk_sd_nrr_from_json(o, &r, &e), want_rc, "%s: %s", json, e.msg);
	cJSON_Delete(o);
	return r;
}

Test(statusd_nrr, what_a_request_must_carry)
{
	gk_sd_nrr r = parse("{\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\",\"resourceVersion\":\"7\"},"
			    "\"spec\":{\"token\":\"t\",\"report\":\"{}\"}}",
			    GK_OK);
	cr_expect_str_eq(r.name, "n1");
	cr_expect_str_eq(r.uid, "u1");
	cr_expect_str_eq(r.rv, "7");
	cr_expect_str_eq(r.token, "t");
	cr_expect_str_eq(r.bad, "");
	gk_sd_nrr_clear(&r);
	r = parse("{\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\"},\"spec\":{\"report\":\"{}\"}}", GK_OK);
	cr_expect_str_eq(r.bad, "spec.token is missing");
	cr_expect_null(r.token);
	gk_sd_nrr_clear(&r);
	r = parse("{\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\"},\"spec\":{\"token\":\"t\"}}", GK_OK);
	cr_expect_str_eq(r.bad, "spec.report is missing");
	gk_sd_nrr_clear(&r);
	char big[GK_PROBE_JSON_BUDGET + 200];
	int n = snprintf(big, sizeof big, "{\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\"},\"spec\":{\"token\":\"t\",\"report\":\"");
	memset(big + n, 'x', GK_PROBE_JSON_BUDGET + 1);
	strcpy(big + n + GK_PROBE_JSON_BUDGET + 1, "\"}}");
	r = parse(big, GK_OK);
	cr_expect(strstr(r.bad, "over the budget of 16384"), "%s", r.bad);
	gk_sd_nrr_clear(&r);
	r = parse("{\"metadata\":{\"name\":\"n1\"},\"spec\":{}}", GK_INVALID_ARGUMENT);
}

Test(statusd_nrr, the_report_must_parse_and_name_the_node)
{
	const char *rep = "{\"apiVersion\":\"gpukmm.io/v1alpha1\",\"kind\":\"NodeReport\",\"nodeName\":\"n1\","
			  "\"summary\":{\"physicalFunctions\":2,\"virtualFunctions\":0}}";
	Gpukmm__NodeReport *r = NULL;
	gk_probe_json_info info;
	char why[512] = "";
	cr_expect(gk_sd_nrr_report("n1", rep, &r, &info, why, sizeof why), "%s", why);
	cr_expect_eq(info.pfs, 2);
	gk_probe_report_free(r);
	cr_expect_not(gk_sd_nrr_report("n2", rep, &r, &info, why, sizeof why));
	cr_expect_str_eq(why, "its report names node 'n1'");
	cr_expect_null(r);
	cr_expect_not(gk_sd_nrr_report("n1", "{\"node_name\":\"n1\"}", &r, &info, why, sizeof why));
	cr_expect(strstr(why, "apiVersion"), "the format of the release before is not accepted from a node: %s", why);
	cr_expect_not(gk_sd_nrr_report("n1", "{\"apiVersion\":\"gpukmm.io/v1alpha1\",\"kind\":\"NodeReport\"}", &r, &info,
				       why, sizeof why));
	cr_expect(strstr(why, "names node ''"), "%s", why);
}
