/* kubesim pure parts: selectors, merge/JSON/strategic patches, schema handling,
 * YAML decoding, routes, fault decisions. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/kubesim/kubesim.h"
#include "../../tools/kubesim/jsonutil.h"
#include "../../tools/kubesim/patch.h"
#include "../../tools/kubesim/route.h"
#include "../../tools/kubesim/schema.h"
#include "../../tools/kubesim/selector.h"

static cJSON *J(const char *s)
{
	cJSON *j = cJSON_Parse(s);
	cr_assert(j, "bad test JSON: %s", s);
	return j;
}

static void assert_json(const cJSON *got, const char *want)
{
	cJSON *w = J(want);
	char *g = cJSON_PrintUnformatted(got);
	cr_assert(ks_json_equal(got, w), "got %s want %s", g, want);
	free(g);
	cJSON_Delete(w);
}

/* ---- label selectors ---- */
static int lmatch(const char *sel, const char *labels)
{
	ks_selector s;
	gk_err e = { 0 };
	cr_assert_eq(ks_label_selector_parse(sel, &s, &e), 0, "parse %s: %s", sel, e.msg);
	cJSON *l = J(labels);
	int m = ks_label_selector_match(&s, l);
	cJSON_Delete(l);
	ks_selector_free(&s);
	return m;
}

Test(selector, equality_and_set_based)
{
	cr_assert(lmatch("", "{}"));
	cr_assert(lmatch("a=b", "{\"a\":\"b\"}"));
	cr_assert(lmatch("a==b", "{\"a\":\"b\"}"));
	cr_assert(!lmatch("a=b", "{\"a\":\"c\"}"));
	cr_assert(lmatch("a!=b", "{}"));
	cr_assert(!lmatch("a!=b", "{\"a\":\"b\"}"));
	cr_assert(lmatch("a in (x, y)", "{\"a\":\"y\"}"));
	cr_assert(!lmatch("a in (x,y)", "{}"));
	cr_assert(lmatch("a notin (x,y)", "{}"));
	cr_assert(!lmatch("a notin (x,y)", "{\"a\":\"x\"}"));
	cr_assert(lmatch("a", "{\"a\":\"\"}"));
	cr_assert(!lmatch("!a", "{\"a\":\"1\"}"));
	cr_assert(lmatch("!a,b=c", "{\"b\":\"c\"}"));
	cr_assert(lmatch("kmm.node.kubernetes.io/ns.mod.ready", "{\"kmm.node.kubernetes.io/ns.mod.ready\":\"\"}"));
	cr_assert(lmatch("a=b , c in (d)", "{\"a\":\"b\",\"c\":\"d\"}"));
}

Test(selector, garbage_is_rejected)
{
	const char *bad[] = { "a in x", "a in (x", "=b", "a=b,", "a notin", "a==", "a b", "!", "a in (x,,", NULL };
	for (int i = 0; bad[i]; i++) {
		ks_selector s;
		gk_err e = { 0 };
		int rc = ks_label_selector_parse(bad[i], &s, &e);
		if (strcmp(bad[i], "a==") == 0) { /* empty value is legal: a == "" */
			cr_assert_eq(rc, 0);
			ks_selector_free(&s);
			continue;
		}
		cr_assert_neq(rc, 0, "accepted '%s'", bad[i]);
		cr_assert(strstr(e.msg, "unable to parse"), "%s", e.msg);
	}
}

Test(selector, field_selector_paths)
{
	ks_selector s;
	cr_assert_eq(ks_field_selector_parse("metadata.name=n1,spec.nodeName!=x", &s, NULL), 0);
	cJSON *o = J("{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"nodeName\":\"y\"}}");
	cr_assert(ks_field_selector_match(&s, o));
	ks_selector_free(&s);
	cr_assert_eq(ks_field_selector_parse("metadata.namespace=default", &s, NULL), 0);
	cr_assert(!ks_field_selector_match(&s, o));
	ks_selector_free(&s);
	cJSON_Delete(o);
}

/* ---- patches ---- */
static void merge_case(const char *target, const char *patch, const char *want)
{
	cJSON *p = J(patch);
	cJSON *r = ks_merge_patch(J(target), p, NULL);
	assert_json(r, want);
	cJSON_Delete(r);
	cJSON_Delete(p);
}

Test(patch, merge_rfc7386)
{
	merge_case("{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
	merge_case("{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}");
	merge_case("{\"a\":\"b\"}", "{\"a\":null}", "{}");
	merge_case("{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}");
	merge_case("{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}");
	merge_case("{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}");
	merge_case("{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}");
}

static cJSON *jp(const char *doc, const char *ops, gk_err *e)
{
	cJSON *o = J(ops);
	cJSON *r = ks_json_patch(J(doc), o, e);
	cJSON_Delete(o);
	return r;
}

Test(patch, json_patch_ops)
{
	gk_err e = { 0 };
	cJSON *r = jp("{\"a\":[1,2],\"b\":{\"c\":1}}",
		      "[{\"op\":\"add\",\"path\":\"/a/1\",\"value\":9},{\"op\":\"add\",\"path\":\"/a/-\",\"value\":3},"
		      "{\"op\":\"replace\",\"path\":\"/b/c\",\"value\":2},{\"op\":\"copy\",\"from\":\"/b\",\"path\":\"/d\"},"
		      "{\"op\":\"move\",\"from\":\"/b/c\",\"path\":\"/e\"},{\"op\":\"remove\",\"path\":\"/a/0\"},"
		      "{\"op\":\"test\",\"path\":\"/e\",\"value\":2},{\"op\":\"add\",\"path\":\"/m~1n\",\"value\":\"x\"}]",
		      &e);
	cr_assert(r, "%s", e.msg);
	assert_json(r, "{\"a\":[9,2,3],\"b\":{},\"d\":{\"c\":2},\"e\":2,\"m/n\":\"x\"}");
	cJSON_Delete(r);
}

Test(patch, json_patch_errors)
{
	const char *bad[] = {
		"[{\"op\":\"remove\",\"path\":\"/zz\"}]",
		"[{\"op\":\"replace\",\"path\":\"/zz\",\"value\":1}]",
		"[{\"op\":\"test\",\"path\":\"/a\",\"value\":2}]",
		"[{\"op\":\"bogus\",\"path\":\"/a\"}]",
		"[{\"op\":\"add\",\"path\":\"/x/y\",\"value\":1}]",
		"[{\"op\":\"add\",\"path\":\"a\",\"value\":1}]",
		"[{\"op\":\"add\",\"path\":\"/a\"}]",
		"{\"op\":\"add\"}",
		NULL,
	};
	for (int i = 0; bad[i]; i++) {
		gk_err e = { 0 };
		cr_assert_null(jp("{\"a\":1}", bad[i], &e), "accepted %s", bad[i]);
		cr_assert(e.msg[0]);
	}
}

static void smp_case(const char *target, const char *patch, const char *want)
{
	cJSON *p = J(patch);
	gk_err e = { 0 };
	cJSON *r = ks_strategic_merge_patch("Pod", J(target), p, &e);
	cr_assert(r, "%s", e.msg);
	assert_json(r, want);
	cJSON_Delete(r);
	cJSON_Delete(p);
}

Test(patch, strategic_merge_lists_by_key)
{
	smp_case("{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"1\"},{\"name\":\"b\",\"image\":\"1\"}]}}",
		 "{\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":\"2\"}]}}",
		 "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"1\"},{\"name\":\"b\",\"image\":\"2\"}]}}");
	smp_case("{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
		 "{\"spec\":{\"containers\":[{\"name\":\"a\",\"$patch\":\"delete\"}]}}",
		 "{\"spec\":{\"containers\":[{\"name\":\"b\"}]}}");
	smp_case("{\"metadata\":{\"finalizers\":[\"x\"]}}", "{\"metadata\":{\"finalizers\":[\"y\",\"x\"]}}",
		 "{\"metadata\":{\"finalizers\":[\"y\",\"x\"]}}");
	smp_case("{\"metadata\":{\"finalizers\":[\"x\",\"y\"]}}",
		 "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"x\"]}}",
		 "{\"metadata\":{\"finalizers\":[\"y\"]}}");
	smp_case("{\"spec\":{\"unschedulable\":true,\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]}}",
		 "{\"spec\":{\"unschedulable\":null}}",
		 "{\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]}}");
	smp_case("{\"spec\":{\"tolerations\":[{\"key\":\"a\"}]}}", "{\"spec\":{\"tolerations\":[{\"key\":\"b\"}]}}",
		 "{\"spec\":{\"tolerations\":[{\"key\":\"b\"}]}}");
	smp_case("{\"data\":{\"a\":\"1\",\"b\":\"2\"}}", "{\"data\":{\"$patch\":\"replace\",\"c\":\"3\"}}",
		 "{\"data\":{\"c\":\"3\"}}");
	smp_case("{\"metadata\":{\"labels\":{\"a\":\"b\"}}}",
		 "{\"$setElementOrder/x\":[],\"metadata\":{\"labels\":{\"c\":\"d\"}}}",
		 "{\"metadata\":{\"labels\":{\"a\":\"b\",\"c\":\"d\"}}}");
}

Test(patch, strategic_merge_rejects_missing_merge_key)
{
	cJSON *p = J("{\"spec\":{\"containers\":[{\"image\":\"x\"}]}}");
	gk_err e = { 0 };
	cr_assert_null(ks_strategic_merge_patch("Pod", J("{\"spec\":{\"containers\":[{\"name\":\"a\"}]}}"), p, &e));
	cr_assert(strstr(e.msg, "merge key"), "%s", e.msg);
	cJSON_Delete(p);
}

/* ---- schema ---- */
static const char *widget_schema =
	"{\"type\":\"object\",\"properties\":{\"apiVersion\":{\"type\":\"string\"},\"kind\":{\"type\":\"string\"},"
	"\"metadata\":{\"type\":\"object\"},\"spec\":{\"type\":\"object\",\"required\":[\"size\"],\"properties\":{"
	"\"size\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":100},"
	"\"color\":{\"type\":\"string\",\"enum\":[\"red\",\"green\"],\"default\":\"green\"},"
	"\"name\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":4,\"pattern\":\"^[a-z]+$\"},"
	"\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"maxItems\":2},"
	"\"port\":{\"x-kubernetes-int-or-string\":true},"
	"\"extra\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true},"
	"\"tmpl\":{\"type\":\"object\",\"x-kubernetes-embedded-resource\":true,\"properties\":{\"spec\":{\"type\":\"object\"}}},"
	"\"limits\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}},"
	"\"nested\":{\"type\":\"object\",\"default\":{},\"properties\":{\"level\":{\"type\":\"string\",\"default\":\"low\"}}},"
	"\"opt\":{\"type\":\"string\",\"nullable\":true}}}}}";

static int schema_case(const char *obj, ks_schema_result *r, cJSON **out)
{
	cJSON *s = J(widget_schema);
	cJSON *o = J(obj);
	int n = ks_schema_apply(s, o, r);
	cJSON_Delete(s);
	*out = o;
	return n;
}

Test(schema, defaults_and_pruning)
{
	ks_schema_result r;
	cJSON *o;
	int n = schema_case("{\"apiVersion\":\"a/v1\",\"kind\":\"W\",\"metadata\":{\"name\":\"x\",\"labels\":{\"q\":\"1\"}},"
			    "\"spec\":{\"size\":1,\"bogus\":1,\"extra\":{\"any\":[1]},\"port\":\"http\","
			    "\"tmpl\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"junk\":1},"
			    "\"limits\":{\"a\":1},\"opt\":null},\"top\":1}",
			    &r, &o);
	cr_assert_eq(n, 0, "%s", r.summary);
	cr_assert_eq(r.nunknown, 3, "%s", r.unknown);
	cr_assert(strstr(r.unknown, "unknown field \"spec.bogus\""), "%s", r.unknown);
	cr_assert(strstr(r.unknown, "unknown field \"spec.tmpl.junk\""), "%s", r.unknown);
	cr_assert(strstr(r.unknown, "unknown field \"top\""), "%s", r.unknown);
	assert_json(o, "{\"apiVersion\":\"a/v1\",\"kind\":\"W\",\"metadata\":{\"name\":\"x\",\"labels\":{\"q\":\"1\"}},"
		       "\"spec\":{\"size\":1,\"extra\":{\"any\":[1]},\"port\":\"http\","
		       "\"tmpl\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}},"
		       "\"limits\":{\"a\":1},\"opt\":null,\"color\":\"green\",\"nested\":{\"level\":\"low\"}}}");
	cJSON_Delete(o);
	cJSON_Delete(r.causes);
}

Test(schema, violations_have_api_server_messages)
{
	ks_schema_result r;
	cJSON *o;
	int n = schema_case("{\"spec\":{\"size\":101,\"color\":\"pink\",\"name\":\"ABCDE\",\"tags\":[],"
			    "\"port\":1.5,\"limits\":{\"a\":\"x\"},\"tmpl\":{}}}",
			    &r, &o);
	cr_assert_eq(n, 9, "%d: %s", n, r.summary);
	const char *want[] = {
		"spec.size: Invalid value: 101: spec.size in body should be less than or equal to 100",
		"spec.color: Unsupported value: \"pink\": supported values: \"red\", \"green\"",
		"spec.name: Too long: may not be more than 4 bytes",
		"spec.name: Invalid value: \"ABCDE\": spec.name in body should match '^[a-z]+$'",
		"spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
		"spec.port: Invalid value: \"number\": spec.port in body must be of type integer,string: \"number\"",
		"spec.limits.a: Invalid value: \"string\": spec.limits.a in body must be of type integer",
		"spec.tmpl.apiVersion: Required value",
		NULL,
	};
	for (int i = 0; want[i]; i++)
		cr_assert(strstr(r.summary, want[i]), "missing <%s> in %s", want[i], r.summary);
	cr_assert_eq(cJSON_GetArraySize(r.causes), 9);
	cJSON *c0 = cJSON_GetArrayItem(r.causes, 0);
	cr_assert_str_eq(cJSON_GetObjectItem(c0, "field")->valuestring, "spec.size");
	cJSON_Delete(o);
	cJSON_Delete(r.causes);
	n = schema_case("{\"spec\":{\"tags\":[\"a\",\"b\",\"c\"],\"name\":\"a\"}}", &r, &o);
	cr_assert_eq(n, 3, "%s", r.summary);
	cr_assert(strstr(r.summary, "spec.size: Required value"), "%s", r.summary);
	cr_assert(strstr(r.summary, "spec.tags: Too many: 3: must have at most 2 items"), "%s", r.summary);
	cr_assert(strstr(r.summary, "should be at least 2 chars long"), "%s", r.summary);
	cJSON_Delete(o);
	cJSON_Delete(r.causes);
}

Test(schema, wrong_top_level_types)
{
	ks_schema_result r;
	cJSON *o;
	cr_assert_eq(schema_case("{\"spec\":\"oops\"}", &r, &o), 1);
	cr_assert(strstr(r.summary, "spec in body must be of type object"), "%s", r.summary);
	cJSON_Delete(o);
	cJSON_Delete(r.causes);
}

/* ---- routes ---- */
Test(route, paths)
{
	ks_route r;
	cr_assert_eq(ks_route_parse("/api/v1/namespaces/default/pods/p1/status", &r), 0);
	cr_assert_eq(r.kind, KS_ROUTE_RESOURCE);
	cr_assert_str_eq(r.ns, "default");
	cr_assert_str_eq(r.resource, "pods");
	cr_assert_str_eq(r.name, "p1");
	cr_assert_str_eq(r.sub, "status");
	cr_assert_eq(ks_route_parse("/api/v1/namespaces/kube-system", &r), 0);
	cr_assert_str_eq(r.resource, "namespaces");
	cr_assert_str_eq(r.name, "kube-system");
	cr_assert_eq(ks_route_parse("/api/v1/namespaces/x/status", &r), 0);
	cr_assert_str_eq(r.resource, "namespaces");
	cr_assert_str_eq(r.sub, "status");
	cr_assert_eq(ks_route_parse("/apis/apps/v1/daemonsets", &r), 0);
	cr_assert_str_eq(r.group, "apps");
	cr_assert_str_eq(r.resource, "daemonsets");
	cr_assert_eq(ks_route_parse("/apis/apps/v1", &r), 0);
	cr_assert_eq(r.kind, KS_ROUTE_GV);
	cr_assert_eq(ks_route_parse("/apis/apps", &r), 0);
	cr_assert_eq(r.kind, KS_ROUTE_GROUP);
	cr_assert_eq(ks_route_parse("/version", &r), 0);
	cr_assert_eq(r.kind, KS_ROUTE_NONE);
	cr_assert_neq(ks_route_parse("/api/v1/namespaces/a/pods/b/c/d", &r), 0);
}

/* ---- faults ---- */
static int decide(ks_faults *f, const char *verb, const char *resource, const char *path)
{
	ks_fault_hit h;
	ks_faults_decide(f, verb, resource, path, &h);
	return h.code;
}

Test(faults, deterministic_with_seed)
{
	cJSON *j = J("{\"seed\":7,\"rules\":[{\"verb\":\"list\",\"resource\":\"nodes\",\"rate\":0.5,\"code\":503}]}");
	ks_faults a, b;
	cr_assert_eq(ks_faults_parse(&a, j, NULL), 0);
	cr_assert_eq(ks_faults_parse(&b, j, NULL), 0);
	int hits = 0;
	for (int i = 0; i < 1000; i++) {
		int x = decide(&a, "list", "nodes", "/api/v1/nodes");
		int y = decide(&b, "list", "nodes", "/api/v1/nodes");
		cr_assert_eq(x, y);
		hits += x == 503;
		cr_assert_eq(decide(&a, "get", "nodes", "/api/v1/nodes/a"), 0);
		decide(&b, "get", "nodes", "/api/v1/nodes/a");
	}
	cr_assert(hits > 400 && hits < 600, "%d", hits);
	cJSON_Delete(j);
	const char *bad[] = { "[]", "{\"rules\":[{\"rate\":2}]}", "{\"rules\":[{\"code\":200}]}", "{\"nope\":1}",
			      "{\"watch\":{\"closeAfterEvents\":-1}}", "{\"rules\":[{\"code\":302,\"body\":\"x\"}]}",
			      "{\"rules\":[{\"body\":\"{}\"}]}", "{\"rules\":[{\"code\":200,\"body\":1}]}",
			      "{\"rules\":[{\"path\":\"apis\",\"code\":500}]}", "{\"rules\":[{\"code\":500,\"tiems\":1}]}",
			      NULL };
	for (int i = 0; bad[i]; i++) {
		ks_faults f;
		gk_err e = { 0 };
		cJSON *x = J(bad[i]);
		cr_assert_neq(ks_faults_parse(&f, x, &e), 0, "accepted %s", bad[i]);
		cJSON_Delete(x);
	}
}

Test(faults, path_prefix_lying_body_and_times)
{
	cJSON *j = J("{\"rules\":[{\"verb\":\"discovery\",\"path\":\"/apis/kmm.sigs.x-k8s.io/v1beta1\",\"code\":404,"
		     "\"times\":1},{\"verb\":\"list\",\"path\":\"/apis/resource.k8s.io/\",\"code\":200,"
		     "\"body\":\"{\\\"kind\\\":\\\"Status\\\"}\"}]}");
	ks_faults f;
	gk_err e = { 0 };
	cr_assert_eq(ks_faults_parse(&f, j, &e), 0, "%s", e.msg);
	cJSON_Delete(j);
	ks_fault_hit h;
	/* another group's discovery: untouched; ours: one 404, then the rule is spent */
	cr_assert_eq(decide(&f, "discovery", "", "/apis/apps/v1"), 0);
	cr_assert_eq(decide(&f, "discovery", "", "/apis/kmm.sigs.x-k8s.io/v1beta1"), 404);
	cr_assert_eq(decide(&f, "discovery", "", "/apis/kmm.sigs.x-k8s.io/v1beta1"), 0);
	/* a lying 200 for every list under the prefix, with the body verbatim */
	ks_faults_decide(&f, "list", "resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims", &h);
	cr_assert_eq(h.code, 200);
	cr_assert_eq(h.body_len, 17);
	cr_assert(strncmp(h.body, "{\"kind\":\"Status\"}", 17) == 0);
	cr_assert_eq(decide(&f, "get", "resourceclaims", "/apis/resource.k8s.io/v1/namespaces/a/resourceclaims/x"), 0);
	cr_assert_eq(decide(&f, "list", "nodes", "/api/v1/nodes"), 0);
	cJSON *echo = ks_faults_to_json(&f);
	char *txt = cJSON_PrintUnformatted(echo);
	cr_assert(strstr(txt, "\"path\":\"/apis/kmm.sigs.x-k8s.io/v1beta1\"") && strstr(txt, "\"used\":1"), "%s", txt);
	free(txt);
	cJSON_Delete(echo);
}

/* ---- server-side printing (Table) ---- */
#include "../../tools/kubesim/table.h"

Test(table, accept_negotiation)
{
	cr_assert(ks_wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
				 "g=meta.k8s.io,application/json"));
	cr_assert(ks_wants_table("application/json;as=Table;g=meta.k8s.io;v=v1"));
	cr_assert_not(ks_wants_table("application/json"));
	cr_assert_not(ks_wants_table("application/json, application/json;as=Table;v=v1;g=meta.k8s.io"));
	cr_assert_not(ks_wants_table("application/json;as=Table;v=v2;g=other.io"));
	cr_assert_not(ks_wants_table(NULL));
}

Test(table, human_duration)
{
	static const struct {
		long long s;
		const char *want;
	} c[] = { { -5, "<invalid>" }, { -1, "0s" }, { 0, "0s" },	   { 119, "119s" },  { 120, "2m" },
		  { 185, "3m5s" },     { 600, "10m" }, { 179 * 60, "179m" }, { 3 * 3600, "3h" }, { 3 * 3600 + 60, "3h1m" },
		  { 47 * 3600, "47h" }, { 49 * 3600, "2d1h" }, { 8 * 86400, "8d" }, { 800 * 86400, "2y70d" },
		  { 3000LL * 86400, "8y" } };
	char b[32];
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ks_human_duration(c[i].s, b, sizeof(b));
		cr_expect_str_eq(b, c[i].want, "%lld s", c[i].s);
	}
}

Test(table, jsonpath_subset)
{
	cJSON *o = J("{\"status\":{\"conditions\":[{\"type\":\"A\",\"status\":\"x\"},{\"type\":\"Ready\",\"status\":\"True\"}],"
		     "\"n\":3,\"l\":[1,2]}}");
	const cJSON *v = ks_jsonpath_first(o, ".status.conditions[?(@.type==\"Ready\")].status");
	cr_assert(cJSON_IsString(v) && strcmp(v->valuestring, "True") == 0);
	cr_assert(cJSON_IsNumber(ks_jsonpath_first(o, "{.status.n}")));
	cr_assert_eq(ks_jsonpath_first(o, ".status.l[1]")->valueint, 2);
	cr_assert_eq(ks_jsonpath_first(o, ".status.l[-1]")->valueint, 2);
	cr_assert_eq(ks_jsonpath_first(o, ".status.l[*]")->valueint, 1);
	cr_assert_null(ks_jsonpath_first(o, ".status.conditions[?(@.type=='Gone')].status"));
	cr_assert_null(ks_jsonpath_first(o, ".status.l[9]"));
	cr_assert_null(ks_jsonpath_first(o, ".status..n"));
	cr_assert_null(ks_jsonpath_first(o, ".status.l[x]"));
	cr_assert_null(ks_jsonpath_first(o, ".status.conditions[?(@.type==\"Ready\""));
	cJSON_Delete(o);
}

Test(table, crd_columns_and_builtin_nodes)
{
	ks_rtype crd = { .group = "intel.com", .version = "v1alpha1", .kind = "ClusterPolicy", .is_crd = 1 };
	crd.columns = J("[{\"name\":\"KMM\",\"type\":\"string\",\"jsonPath\":\".status.kmmStatus\"},"
			"{\"name\":\"Ready\",\"type\":\"string\",\"jsonPath\":\".status.conditions[?(@.type==\\\"Ready\\\")].status\"},"
			"{\"name\":\"N\",\"type\":\"integer\",\"jsonPath\":\".spec.n\"},"
			"{\"name\":\"Age\",\"type\":\"date\",\"jsonPath\":\".metadata.creationTimestamp\"}]");
	cJSON *list = J("{\"kind\":\"ClusterPolicyList\",\"metadata\":{\"resourceVersion\":\"7\",\"continue\":\"c\"},"
			"\"items\":[{\"metadata\":{\"name\":\"p\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"},"
			"\"spec\":{\"n\":4},\"status\":{\"kmmStatus\":\"1/2\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}},"
			"{\"metadata\":{\"name\":\"q\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"}}]}");
	cJSON *tb = ks_table(&crd, list, NULL, 1767225600 + 185); /* 2026-01-01 + 3m5s */
	char *s = cJSON_PrintUnformatted(tb);
	cr_assert(strstr(s, "\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"7\",\"continue\":\"c\"}"), "%s", s);
	cr_assert(strstr(s, "\"cells\":[\"p\",\"1/2\",\"False\",4,\"3m5s\"]"), "%s", s);
	cr_assert(strstr(s, "\"cells\":[\"q\",null,null,null,\"3m5s\"]"), "%s", s);
	cr_assert(strstr(s, "\"kind\":\"PartialObjectMetadata\""), "%s", s);
	free(s);
	cJSON_Delete(tb);
	tb = ks_table(&crd, list, "None", 0);
	s = cJSON_PrintUnformatted(tb);
	cr_assert_null(strstr(s, "\"object\""), "%s", s);
	free(s);
	cJSON_Delete(tb);
	cJSON_Delete(list);
	cJSON_Delete(crd.columns);

	ks_rtype node = { .group = "", .version = "v1", .kind = "Node" };
	cJSON *n = J("{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"3\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
		     "\"labels\":{\"node-role.kubernetes.io/worker\":\"\",\"node-role.kubernetes.io/gpu\":\"\"}},"
		     "\"spec\":{\"unschedulable\":true},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
		     "\"nodeInfo\":{\"kubeletVersion\":\"v1.32.1\",\"kernelVersion\":\"6.8\"}}}");
	tb = ks_table(&node, n, "Object", 1767225600 + 7200);
	s = cJSON_PrintUnformatted(tb);
	cr_assert(strstr(s, "\"cells\":[\"n1\",\"Ready,SchedulingDisabled\",\"worker,gpu\",\"120m\",\"v1.32.1\",\"6.8\"]"), "%s", s);
	cr_assert(strstr(s, "\"object\":{\"metadata\""), "%s", s);
	free(s);
	cJSON_Delete(tb);
	cJSON_Delete(n);
}
