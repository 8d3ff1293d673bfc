/* Criterion-driven fuzzing of the policy path with a deterministic corpus of
 * mutated ClusterPolicies (structure and bytes): YAML/JSON -> validate -> render
 * -> Module JSON -> typed Module -> diff, and the webhook's AdmissionReview
 * handler. Must never crash or leak (the ASan pass checks both). The seeds are
 * the example policies plus policies touching every field. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../services/webhook/admission.h"
#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "gpukmm/yamljson.h"
#include "../fuzz/policy_pipeline.h"

static const char *const seeds[] = {
	"{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"gpu\",\"uid\":\"u\",\"labels\":{\"a\":\"b\"}},"
	"\"spec\":{\"resourceRegistration\":\"dp\",\"resourceMonitoring\":true,\"useNFDLabeling\":true,\"prometheusIntegration\":false,"
	"\"enableKueue\":true,\"kueue\":{\"equalResources\":[{\"name\":\"q\",\"localQueues\":[{\"name\":\"l\",\"namespace\":\"n\"}]}]},"
	"\"health\":{\"checkIntervalSeconds\":5,\"coreTemperatureThreshold\":100,\"memoryTemperatureThreshold\":100},"
	"\"dra\":{\"image\":\"r.io/d:1\",\"logLevel\":2,\"podHealthCheck\":true,\"manageBinding\":false},"
	"\"dp\":{\"plugin\":\"r.io/p:1\",\"levelzero\":\"r.io/l:1\",\"allowIDs\":[\"0x56a0\"],\"byPathMode\":\"all\",\"logLevel\":1},"
	"\"xpu\":{\"image\":\"r.io/x:1\",\"logLevel\":1,\"configMapOverride\":\"cm\",\"monitoringResource\":\"monitoring\"},"
	"\"pullSecret\":{\"name\":\"regcred\"},\"nodeSelector\":{\"pool\":\"gpu\"},\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\","
	"\"effect\":\"NoExecute\",\"tolerationSeconds\":3}],\"logLevel\":2,"
	"\"kernelModule\":{\"moduleName\":\"xe\",\"version\":\"1.0\",\"firmwarePath\":\"/fw\",\"modulesLoadingOrder\":[\"xe\",\"drm_buddy\"],"
	"\"registryTLS\":{\"insecure\":true,\"insecureSkipTLSVerify\":false},\"kernelMappings\":[{\"regexp\":\"^6\\\\.8\\\\..*$\","
	"\"containerImage\":\"r.io/xe:${KERNEL_FULL_VERSION}\",\"inTreeModulesToRemove\":[\"i915\",\"xe\"],\"registryTLS\":{\"insecure\":true},"
	"\"build\":{\"dockerfileConfigMap\":{\"name\":\"df\"},\"buildArgs\":[{\"name\":\"A\",\"value\":\"B\"}],\"secrets\":[{\"name\":\"s\"}]}}]}},"
	"\"status\":{\"kmmStatus\":\"1/1\",\"errors\":[\"e\"],\"observedGeneration\":3,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
	"\"reason\":\"R\",\"message\":\"m\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}],\"nodes\":{\"gpuNodes\":2,\"problems\":"
	"[{\"node\":\"n1\",\"reason\":\"VFsActive\",\"message\":\"m\"}]}}}",
	"{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"g\"},\"spec\":{\"resourceRegistration\":\"dra\","
	"\"kernelModule\":{\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":\"registry.example.com/xe-driver:1.0\"}]}}}",
};

/* Enough to walk every seed field a few hundred times; the open-ended search is
 * tests/fuzz/fuzz_policy.c (libFuzzer), so this stays a few seconds under ASan. */
#define ITERATIONS 700

static uint64_t rng_state;
static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)rng_state;
}

static cJSON *random_value(int depth)
{
	static const char *const strs[] = { "", "xe", "dp", "dra", "[", "(", "${", "$", "${KERNEL_FULL_VERSION}", "a:b@c",
					    "registry.example.com/x", "r.io/x@sha256:00", "0x56a0", "Exists", "NoExecute",
					    "Equal", "/opt", "\xff\xfe", "a\nb", "UPPER", "-", "." };
	switch (rnd() % 8) {
	case 0: return cJSON_CreateNull();
	case 1: return cJSON_CreateBool(rnd() & 1);
	case 2: {
		double v[] = { 0, -1, 1.5, 1e300, 4294967296.0, 2147483648.0, -2147483649.0, 9007199254740993.0 };
		return cJSON_CreateNumber(v[rnd() % 8]);
	}
	case 3:
	case 4: return cJSON_CreateString(strs[rnd() % (sizeof(strs) / sizeof(strs[0]))]);
	case 5: {
		cJSON *a = cJSON_CreateArray();
		for (int i = 0, n = rnd() % 3; i < n && depth < 4; i++)
			cJSON_AddItemToArray(a, random_value(depth + 1));
		return a;
	}
	case 6: {
		char big[300];
		memset(big, 'a' + rnd() % 26, sizeof(big) - 1);
		big[sizeof(big) - 1] = 0;
		return cJSON_CreateString(big);
	}
	default: {
		cJSON *o = cJSON_CreateObject();
		static const char *const keys[] = { "name", "regexp", "containerImage", "build", "moduleName", "key", "x" };
		for (int i = 0, n = rnd() % 3; i < n && depth < 4; i++)
			cJSON_AddItemToObject(o, keys[rnd() % 7], random_value(depth + 1));
		return o;
	}
	}
}

/* all nodes of the tree, in order */
static void collect(cJSON *n, cJSON **out, size_t *cnt, size_t cap)
{
	if (*cnt < cap)
		out[(*cnt)++] = n;
	for (cJSON *c = n->child; c; c = c->next)
		collect(c, out, cnt, cap);
}

static void mutate_tree(cJSON *root)
{
	cJSON *nodes[512];
	size_t n = 0;
	collect(root, nodes, &n, 512);
	for (int k = 0, m = 1 + rnd() % 3; k < m; k++) {
		cJSON *victim = nodes[1 + rnd() % (n - 1)];
		cJSON *parent = NULL;
		for (size_t i = 0; i < n && !parent; i++)
			for (cJSON *c = nodes[i]->child; c; c = c->next)
				if (c == victim)
					parent = nodes[i];
		if (!parent)
			continue;
		cJSON *nv = random_value(0);
		cJSON_ReplaceItemViaPointer(parent, victim, nv);
		/* the tree changed: recollect */
		n = 0;
		collect(root, nodes, &n, 512);
		if (n < 2)
			return;
	}
}

static void exercise(const char *text, size_t len)
{
	char why[512] = "";
	const char *bad = policy_pipeline(text, len, rnd() & 1, why, sizeof(why));
	cr_assert_null(bad, "%s: %s", bad, why);
}

Test(fuzz, structural_mutations, .timeout = 120)
{
	rng_state = 0x9e3779b97f4a7c15ULL;
	for (int it = 0; it < ITERATIONS; it++) {
		cJSON *j = cJSON_Parse(seeds[it % 2]);
		mutate_tree(j);
		char *s = cJSON_PrintUnformatted(j);
		exercise(s, strlen(s));
		/* and as an AdmissionReview */
		char *rv = NULL;
		if (asprintf(&rv, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
				  "\"operation\":\"CREATE\",\"object\":%s}}", s) > 0) {
			gk_webhook_result res;
			gk_webhook_review(it & 1 ? GK_WEBHOOK_MUTATE : GK_WEBHOOK_VALIDATE, rv, strlen(rv), NULL, &res);
			cr_assert(res.http_status == 200 || res.http_status == 400, "status %d", res.http_status);
			gk_webhook_result_free(&res);
			free(rv);
		}
		cJSON_free(s);
		cJSON_Delete(j);
	}
}

Test(fuzz, byte_mutations, .timeout = 120)
{
	rng_state = 0x243f6a8885a308d3ULL;
	size_t n0 = strlen(seeds[0]);
	char *buf = malloc(n0 + 64);
	for (int it = 0; it < ITERATIONS; it++) {
		const char *seed = seeds[it % 2];
		size_t n = strlen(seed);
		memcpy(buf, seed, n);
		for (int k = 0, m = 1 + rnd() % 4; k < m; k++) {
			size_t at = rnd() % n;
			switch (rnd() % 3) {
			case 0: buf[at] = (char)(rnd() & 0xff); break;
			case 1: n = at; break;                 /* truncate */
			default: buf[at] = "{}[]\":,\\0-"[rnd() % 11]; break;
			}
			if (n == 0)
				break;
		}
		exercise(buf, n);
		gk_webhook_result res;
		gk_webhook_review(GK_WEBHOOK_VALIDATE, buf, n, NULL, &res);
		gk_webhook_result_free(&res);
	}
	free(buf);
}

Test(fuzz, yaml_oddities)
{
	const char *inputs[] = {
		"a: &x [1]\nb: *x\n", "---\n---\n", "- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -\n",
		"{a: 1, a: 2}", "!!binary AAAA", "? [a]\n: b\n", "a: 'unterminated", "a: yes\nb: NO\nc: 0x1F\nd: 1_000\ne: .5\nf: ~\n", "\t\t", "%YAML 1.1\n---\na: b\n",
	};
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++)
		exercise(inputs[i], strlen(inputs[i]));
	gk_yamljson_docs d;
	cr_assert_eq(gk_yamljson_parse("a: yes\nb: NO\nc: 0x1F\nd: 1_000\ne: .5\nf: ~\ng: '1'\n", 48, &d, NULL), 0);
	char *s = cJSON_PrintUnformatted(d.doc[0]);
	cr_assert_str_eq(s, "{\"a\":true,\"b\":false,\"c\":31,\"d\":1000,\"e\":0.5,\"f\":null,\"g\":\"1\"}");
	cJSON_free(s);
	gk_yamljson_free(&d);
	gk_err e;
	cr_assert_neq(gk_yamljson_parse("a: &x [1]\nb: *x\n", 16, &d, &e), 0);
	cr_assert(strstr(e.msg, "aliases are not supported"), "%s", e.msg);
}
