/* kubesim server-side apply and field ownership (ssa.c, pure): the FieldsV1 sets an
 * applied configuration claims (map lists by key, sets by value, atomic lists and
 * maps whole, for built-ins and for CRD schemas), what an Update owns, conflicts
 * with the API server's message and causes, force, removal of fields an applier
 * stops applying. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/kubesim/kubesim.h"
#include "../../tools/kubesim/jsonutil.h"
#include "../../tools/kubesim/ssa.h"

static cJSON *J(const char *s)
{
	cJSON *j = cJSON_Parse(s);
	cr_assert(j, "bad test JSON: %s", s);
	return j;
}

static void assert_json(const cJSON *got, const char *want, const char *what)
{
	cJSON *w = J(want);
	char *g = cJSON_PrintUnformatted(got);
	cr_assert(ks_json_equal(got, w), "%s: got %s\nwant %s", what, g, want);
	free(g);
	cJSON_Delete(w);
}

static ks_rtype POD = { .group = "", .version = "v1", .resource = "pods", .kind = "Pod", .namespaced = 1 };
static ks_rtype CM = { .group = "", .version = "v1", .resource = "configmaps", .kind = "ConfigMap", .namespaced = 1 };
static ks_rtype DS = { .group = "apps", .version = "v1", .resource = "daemonsets", .kind = "DaemonSet", .namespaced = 1 };

/* A CRD with every list and map type. */
static const char *WIDGET_SCHEMA =
	"{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{"
	"\"ports\":{\"type\":\"array\",\"x-kubernetes-list-type\":\"map\",\"x-kubernetes-list-map-keys\":[\"port\",\"proto\"],"
	"  \"items\":{\"type\":\"object\",\"properties\":{\"port\":{\"type\":\"integer\"},\"proto\":{\"type\":\"string\"},"
	"  \"opts\":{\"type\":\"array\",\"x-kubernetes-list-type\":\"set\",\"items\":{\"type\":\"string\"}}}}},"
	"\"tags\":{\"type\":\"array\",\"x-kubernetes-list-type\":\"set\",\"items\":{\"type\":\"string\"}},"
	"\"plain\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
	"\"atomicList\":{\"type\":\"array\",\"x-kubernetes-list-type\":\"atomic\",\"items\":{\"type\":\"object\"}},"
	"\"sel\":{\"type\":\"object\",\"x-kubernetes-map-type\":\"atomic\",\"additionalProperties\":{\"type\":\"string\"}},"
	"\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}}}}}";

static ks_rtype widget(cJSON *schema)
{
	ks_rtype t = { .group = "test.gpukmm.io", .version = "v1", .resource = "widgets", .kind = "Widget",
		       .namespaced = 1, .is_crd = 1, .schema = schema };
	return t;
}

/* ---- the set an applied configuration claims ---- */
static const struct set_case {
	const char *name;
	int crd; /* 0: t below, 1: widget */
	ks_rtype *t;
	const char *applied, *want;
} set_cases[] = {
	{ "pod: containers, env by name, ports by containerPort+protocol, tolerations atomic, finalizers a set", 0, &POD,
	  "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"labels\":{\"a\":\"b\"},"
	  "\"finalizers\":[\"x.io/f\"]},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"env\":[{\"name\":\"E\",\"value\":\"1\"}],"
	  "\"ports\":[{\"containerPort\":80,\"protocol\":\"UDP\"}]}],\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\"}]}}",
	  "{\"f:metadata\":{\"f:labels\":{\"f:a\":{}},\"f:finalizers\":{\"v:\\\"x.io/f\\\"\":{}}},\"f:spec\":{"
	  "\"f:containers\":{\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{},\"f:name\":{},\"f:image\":{},"
	  "\"f:env\":{\"k:{\\\"name\\\":\\\"E\\\"}\":{\".\":{},\"f:name\":{},\"f:value\":{}}},"
	  "\"f:ports\":{\"k:{\\\"containerPort\\\":80,\\\"protocol\\\":\\\"UDP\\\"}\":{\".\":{},\"f:containerPort\":{},\"f:protocol\":{}}}}},"
	  "\"f:tolerations\":{}}}" },
	{ "a port without protocol is keyed with TCP", 0, &POD,
	  "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":8080}]}]}}",
	  "{\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{},\"f:name\":{},"
	  "\"f:ports\":{\"k:{\\\"containerPort\\\":8080,\\\"protocol\\\":\\\"TCP\\\"}\":{\".\":{},\"f:containerPort\":{}}}}}}}" },
	{ "configmap data is a granular map; empty maps claim nothing", 0, &CM,
	  "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{}},\"data\":{\"x\":\"1\",\"y\":\"\"}}",
	  "{\"f:data\":{\"f:x\":{},\"f:y\":{}}}" },
	{ "daemonset: selector atomic, template containers by name, ownerReferences by uid", 0, &DS,
	  "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"ownerReferences\":[{\"uid\":\"u1\",\"name\":\"o\"}]},"
	  "\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
	  "{\"f:metadata\":{\"f:ownerReferences\":{\"k:{\\\"uid\\\":\\\"u1\\\"}\":{\".\":{},\"f:uid\":{},\"f:name\":{}}}},"
	  "\"f:spec\":{\"f:selector\":{},\"f:template\":{\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{},\"f:name\":{}}}}}}}" },
	{ "CRD: list-type map with two keys (sorted), set, atomic by default and explicit, map-type atomic, granular map", 1,
	  NULL,
	  "{\"apiVersion\":\"test.gpukmm.io/v1\",\"kind\":\"Widget\",\"spec\":{"
	  "\"ports\":[{\"proto\":\"udp\",\"port\":53,\"opts\":[\"a\",\"b\"]}],\"tags\":[\"t1\",\"t2\"],\"plain\":[\"p\"],"
	  "\"atomicList\":[{\"x\":1}],\"sel\":{\"k\":\"v\"},\"env\":{\"E\":\"1\"}}}",
	  "{\"f:spec\":{\"f:ports\":{\"k:{\\\"port\\\":53,\\\"proto\\\":\\\"udp\\\"}\":{\".\":{},\"f:port\":{},\"f:proto\":{},"
	  "\"f:opts\":{\"v:\\\"a\\\"\":{},\"v:\\\"b\\\"\":{}}}},\"f:tags\":{\"v:\\\"t1\\\"\":{},\"v:\\\"t2\\\"\":{}},"
	  "\"f:plain\":{},\"f:atomicList\":{},\"f:sel\":{},\"f:env\":{\"f:E\":{}}}}" },
};

Test(ssa, config_sets)
{
	cJSON *schema = J(WIDGET_SCHEMA);
	ks_rtype w = widget(schema);
	for (size_t i = 0; i < sizeof(set_cases) / sizeof(set_cases[0]); i++) {
		const struct set_case *c = &set_cases[i];
		cJSON *a = J(c->applied);
		cJSON *set = ks_ssa_config_set(a, c->crd ? &w : c->t);
		cr_assert(set, "%s", c->name);
		assert_json(set, c->want, c->name);
		cJSON_Delete(set);
		cJSON_Delete(a);
	}
	cJSON_Delete(schema);
}

/* ---- helpers for write sequences ---- */
static const cJSON *entry(const cJSON *obj, const char *manager, const char *op)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "managedFields")) {
		if (strcmp(cJSON_GetObjectItem(e, "manager")->valuestring, manager) == 0 &&
		    strcmp(cJSON_GetObjectItem(e, "operation")->valuestring, op) == 0)
			return e;
	}
	return NULL;
}

static void assert_fields(const cJSON *obj, const char *manager, const char *op, const char *want)
{
	const cJSON *e = entry(obj, manager, op);
	char what[128];
	snprintf(what, sizeof(what), "fieldsV1 of %s/%s", manager, op);
	if (!want) {
		cr_assert_null(e, "%s: should be gone", what);
		return;
	}
	cr_assert(e, "%s missing", what);
	assert_json(cJSON_GetObjectItem(e, "fieldsV1"), want, what);
}

/* applies cfg as mgr onto *obj (replaced on success); returns the HTTP code (0 ok). */
static int apply(cJSON **obj, const char *cfg, const char *mgr, int force, const ks_rtype *t, ks_resp *out)
{
	cJSON *a = J(cfg);
	memset(out, 0, sizeof(*out));
	cJSON *r = ks_ssa_apply(*obj, a, mgr, NULL, force, t, "p", out);
	cJSON_Delete(a);
	if (!r)
		return out->code;
	cJSON_Delete(*obj);
	*obj = r;
	return 0;
}

/* an Update by mgr: *obj -> next (JSON text, managedFields carried over) */
static void update(cJSON **obj, const char *next, const char *mgr, const char *sub, const ks_rtype *t)
{
	cJSON *n = J(next);
	if (*obj) {
		const cJSON *mf = cJSON_GetObjectItem(cJSON_GetObjectItem(*obj, "metadata"), "managedFields");
		if (mf)
			cJSON_AddItemToObject(ks_meta(n), "managedFields", cJSON_Duplicate(mf, 1));
	}
	ks_ssa_track(*obj, n, mgr, sub, 0, t);
	cJSON_Delete(*obj);
	*obj = n;
}

Test(ssa, update_owns_what_it_added_and_changed)
{
	cJSON *o = NULL;
	update(&o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"p\",\"labels\":{\"a\":\"1\"}},"
		   "\"data\":{\"x\":\"1\"}}",
	       "creator", NULL, &CM);
	/* created maps are members themselves (".": {}), like the API server's Update entries */
	assert_fields(o, "creator", "Update", "{\"f:metadata\":{\"f:labels\":{\".\":{},\"f:a\":{}}},\"f:data\":{\".\":{},\"f:x\":{}}}");
	update(&o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"p\",\"labels\":{\"a\":\"1\",\"b\":\"2\"}},"
		   "\"data\":{\"x\":\"2\"}}",
	       "editor", NULL, &CM);
	assert_fields(o, "editor", "Update", "{\"f:metadata\":{\"f:labels\":{\"f:b\":{}}},\"f:data\":{\"f:x\":{}}}");
	assert_fields(o, "creator", "Update", "{\"f:metadata\":{\"f:labels\":{\".\":{},\"f:a\":{}}},\"f:data\":{}}");
	/* a removal leaves everybody's sets; a write that changes nothing adds no entry */
	update(&o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"p\",\"labels\":{\"a\":\"1\"}},"
		   "\"data\":{\"x\":\"2\"}}",
	       "noop", NULL, &CM);
	cr_assert_null(entry(o, "noop", "Update"));
	assert_fields(o, "editor", "Update", "{\"f:data\":{\"f:x\":{}}}");
	/* status writes are recorded with their subresource */
	update(&o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"p\",\"labels\":{\"a\":\"1\"}},"
		   "\"data\":{\"x\":\"2\"},\"status\":{\"s\":1}}",
	       "ctl", "status", &CM);
	const cJSON *e = entry(o, "ctl", "Update");
	cr_assert(e);
	cr_assert_str_eq(cJSON_GetObjectItem(e, "subresource")->valuestring, "status");
	cJSON_Delete(o);
}

#define POD_A                                                                                                          \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"i:1\"}]}}"
#define POD_B                                                                                                          \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":\"j:1\"}]}}"

Test(ssa, map_list_items_are_owned_one_by_one)
{
	cJSON *o = NULL;
	ks_resp out;
	cr_assert_eq(apply(&o, POD_A, "m1", 0, &POD, &out), 0);
	cr_assert_eq(apply(&o, POD_B, "m2", 0, &POD, &out), 0, "other container: no conflict");
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "containers")), 2);
	assert_fields(o, "m2", "Apply", "{\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"b\\\"}\":{\".\":{},\"f:name\":{},\"f:image\":{}}}}}");
	/* m1 changes b's image: conflict on that one field, message and cause like the API server */
	const char *a_and_b = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":["
			      "{\"name\":\"a\",\"image\":\"i:1\"},{\"name\":\"b\",\"image\":\"j:2\"}]}}";
	cr_assert_eq(apply(&o, a_and_b, "m1", 0, &POD, &out), 409);
	cJSON *st = J(out.body);
	cr_assert_str_eq(cJSON_GetObjectItem(st, "reason")->valuestring, "Conflict");
	cr_assert_str_eq(cJSON_GetObjectItem(st, "message")->valuestring,
			 "Apply failed with 1 conflict: conflict with \"m2\": .spec.containers[name=\"b\"].image");
	assert_json(cJSON_GetObjectItem(cJSON_GetObjectItem(st, "details"), "causes"),
		    "[{\"reason\":\"FieldManagerConflict\",\"message\":\"conflict with \\\"m2\\\"\","
		    "\"field\":\".spec.containers[name=\\\"b\\\"].image\"}]",
		    "causes");
	cJSON_Delete(st);
	ks_resp_free(&out);
	/* force: m1 takes the image, m2 keeps b's name */
	cr_assert_eq(apply(&o, a_and_b, "m1", 1, &POD, &out), 0);
	assert_fields(o, "m2", "Apply", "{\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"b\\\"}\":{\".\":{},\"f:name\":{}}}}}");
	/* m1 stops applying both: a goes (nobody else owns it), b stays (m2 owns it) but
	 * loses the image m1 owned */
	cr_assert_eq(apply(&o, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}", "m1", 0, &POD, &out), 0);
	char *s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "containers"));
	cr_assert_str_eq(s, "[{\"name\":\"b\"}]");
	free(s);
	assert_fields(o, "m1", "Apply", NULL);
	cJSON_Delete(o);
}

Test(ssa, conflicts_with_several_managers_grouped_and_sorted)
{
	cJSON *o = NULL;
	update(&o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"p\"},\"data\":{\"x\":\"1\",\"y\":\"1\"}}",
	       "zed", NULL, &CM);
	ks_resp out;
	cr_assert_eq(apply(&o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"z\":\"1\"}}", "alpha", 0, &CM, &out), 0);
	cr_assert_eq(apply(&o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"x\":\"2\",\"y\":\"2\",\"z\":\"2\"}}",
			   "me", 0, &CM, &out),
		     409);
	cJSON *st = J(out.body);
	cr_assert_str_eq(cJSON_GetObjectItem(st, "message")->valuestring,
			 "Apply failed with 3 conflicts: conflicts with \"alpha\":\n- .data.z\n"
			 "conflicts with \"zed\" using v1:\n- .data.x\n- .data.y");
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(st, "details"), "causes")), 3);
	cr_assert_eq(cJSON_GetObjectItem(st, "code")->valueint, 409);
	cJSON_Delete(st);
	ks_resp_free(&out);
	/* same values: shared, no conflict */
	cr_assert_eq(apply(&o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"x\":\"1\",\"z\":\"1\"}}", "me", 0, &CM, &out), 0);
	assert_fields(o, "me", "Apply", "{\"f:data\":{\"f:x\":{},\"f:z\":{}}}");
	assert_fields(o, "zed", "Update", "{\"f:data\":{\".\":{},\"f:x\":{},\"f:y\":{}}}");
	/* me drops x: zed still owns it, so it stays */
	cr_assert_eq(apply(&o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"z\":\"1\"}}", "me", 0, &CM, &out), 0);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "data"), "x")->valuestring, "1");
	cJSON_Delete(o);
}

Test(ssa, crd_sets_and_atomic_lists)
{
	cJSON *schema = J(WIDGET_SCHEMA);
	ks_rtype w = widget(schema);
	cJSON *o = NULL;
	ks_resp out;
	const char *c1 = "{\"apiVersion\":\"test.gpukmm.io/v1\",\"kind\":\"Widget\",\"spec\":{\"tags\":[\"a\",\"b\"],\"plain\":[\"p\"]}}";
	const char *c2 = "{\"apiVersion\":\"test.gpukmm.io/v1\",\"kind\":\"Widget\",\"spec\":{\"tags\":[\"c\"],\"plain\":[\"q\"]}}";
	cr_assert_eq(apply(&o, c1, "one", 0, &w, &out), 0);
	/* a set merges by value (no conflict); an atomic list is one field: conflict */
	cr_assert_eq(apply(&o, c2, "two", 0, &w, &out), 409);
	cJSON *st = J(out.body);
	cr_assert_str_eq(cJSON_GetObjectItem(st, "message")->valuestring,
			 "Apply failed with 1 conflict: conflict with \"one\": .spec.plain");
	cJSON_Delete(st);
	ks_resp_free(&out);
	cr_assert_eq(apply(&o, "{\"apiVersion\":\"test.gpukmm.io/v1\",\"kind\":\"Widget\",\"spec\":{\"tags\":[\"c\"]}}", "two", 0,
			   &w, &out),
		     0);
	char *s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "tags"));
	cr_assert_str_eq(s, "[\"a\",\"b\",\"c\"]");
	free(s);
	/* one drops b from its set: b goes, c (two's) stays */
	cr_assert_eq(apply(&o, "{\"apiVersion\":\"test.gpukmm.io/v1\",\"kind\":\"Widget\",\"spec\":{\"tags\":[\"a\"],\"plain\":[\"p\"]}}",
			   "one", 0, &w, &out),
		     0);
	s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "tags"));
	cr_assert_str_eq(s, "[\"a\",\"c\"]");
	free(s);
	cJSON_Delete(o);
	cJSON_Delete(schema);
}

Test(ssa, item_kept_for_another_owner_keeps_its_key)
{
	cJSON *o = NULL;
	ks_resp out;
	cr_assert_eq(apply(&o, POD_A, "m1", 0, &POD, &out), 0);
	/* an editor changes a's image (Update), then m1 stops applying container a */
	update(&o, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"i:2\"}]}}",
	       "kubectl-edit", NULL, &POD);
	assert_fields(o, "kubectl-edit", "Update",
		      "{\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"a\\\"}\":{\"f:image\":{}}}}}");
	cr_assert_eq(apply(&o, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{}}", "m1", 0, &POD, &out), 0);
	char *s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "containers"));
	cr_assert_str_eq(s, "[{\"name\":\"a\",\"image\":\"i:2\"}]");
	free(s);
	cJSON_Delete(o);
}

Test(ssa, status_is_not_applied_through_the_main_resource)
{
	ks_rtype node = { .group = "", .version = "v1", .resource = "nodes", .kind = "Node", .has_status = 1 };
	cJSON *o = NULL;
	ks_resp out;
	cr_assert_eq(apply(&o, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"labels\":{\"a\":\"1\"}},"
			       "\"status\":{\"phase\":\"x\"}}",
			   "m", 0, &node, &out),
		     0);
	cr_assert_null(cJSON_GetObjectItem(o, "status"), "status ignored on the main resource");
	assert_fields(o, "m", "Apply", "{\"f:metadata\":{\"f:labels\":{\"f:a\":{}}}}");
	/* through /status only status is applied and claimed, with the subresource */
	cJSON *a = J("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"labels\":{\"b\":\"2\"}},\"status\":{\"phase\":\"y\"}}");
	memset(&out, 0, sizeof(out));
	cJSON *r = ks_ssa_apply(o, a, "m", "status", 0, &node, "p", &out);
	cr_assert(r);
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "metadata"), "labels"), "b"));
	const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "metadata"), "managedFields"), 1);
	cr_assert_str_eq(cJSON_GetObjectItem(e, "subresource")->valuestring, "status");
	assert_json(cJSON_GetObjectItem(e, "fieldsV1"), "{\"f:status\":{\"f:phase\":{}}}", "status apply set");
	cJSON_Delete(a);
	cJSON_Delete(r);
	cJSON_Delete(o);
}
