/* lib/kobj: ObjectMeta conversion, gk_kv_get, gk_kobj_free. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpukmm/kobj.h"

static int keep_gpukmm(const char *k)
{
	return strncmp(k, "gpukmm.io/", 10) == 0;
}

Test(kobj_meta, full_round_trip)
{
	const char *src =
		"{\"metadata\":{\"name\":\"n1\",\"namespace\":\"ns\",\"uid\":\"u-1\",\"resourceVersion\":\"42\","
		"\"generation\":3,\"labels\":{\"z\":\"1\",\"a\":\"2\",\"m\":\"\"},"
		"\"annotations\":{\"gpukmm.io/x\":\"y\",\"other\":\"drop\"},"
		"\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"deletionTimestamp\":\"2026-01-02T00:00:00Z\","
		"\"finalizers\":[\"f1\",\"f2\"],"
		"\"ownerReferences\":[{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\","
		"\"name\":\"cp\",\"uid\":\"u-0\",\"controller\":true,\"blockOwnerDeletion\":true}]}}";
	cJSON *j = cJSON_Parse(src);
	Gpukmm__ObjectMeta *m = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_meta_from_json(j, keep_gpukmm, &m, &e), 0, "%s", e.msg);
	cr_assert_str_eq(m->name, "n1");
	cr_assert_str_eq(m->namespace_, "ns");
	cr_assert(m->has_generation && m->generation == 3);
	cr_assert_eq(m->n_labels, 3);
	cr_assert_str_eq(m->labels[0]->key, "a");
	cr_assert_str_eq(m->labels[2]->key, "z");
	cr_assert_str_eq(gk_kv_get(m->labels, m->n_labels, "m"), "");
	cr_assert_str_eq(gk_kv_get(m->labels, m->n_labels, "z"), "1");
	cr_assert_null(gk_kv_get(m->labels, m->n_labels, "nope"));
	cr_assert_eq(m->n_annotations, 1);
	cr_assert_eq(m->n_finalizers, 2);
	cr_assert_eq(m->n_owner_references, 1);
	cr_assert(m->owner_references[0]->controller);
	cJSON *back = gk_kobj_meta_to_json(m);
	char *s = cJSON_PrintUnformatted(back);
	cr_assert(strstr(s, "\"labels\":{\"a\":\"2\",\"m\":\"\",\"z\":\"1\"}"), "%s", s);
	cr_assert(strstr(s, "\"blockOwnerDeletion\":true"), "%s", s);
	cr_assert(strstr(s, "\"generation\":3"), "%s", s);
	cJSON_free(s);
	cJSON_Delete(back);
	gk_kobj_free(m);
	cJSON_Delete(j);
}

Test(kobj_meta, absent_metadata_is_empty)
{
	cJSON *j = cJSON_Parse("{\"kind\":\"X\"}");
	Gpukmm__ObjectMeta *m = NULL;
	cr_assert_eq(gk_kobj_meta_from_json(j, NULL, &m, NULL), 0);
	cr_assert_null(m->name);
	cr_assert_eq(m->n_labels, 0);
	gk_kobj_free(m);
	gk_kobj_free(NULL);
	cJSON_Delete(j);
}

static void expect_bad(const char *src, const char *msg)
{
	cJSON *j = cJSON_Parse(src);
	Gpukmm__ObjectMeta *m = (void *)1;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_meta_from_json(j, NULL, &m, &e), GK_INVALID_ARGUMENT, "%s", src);
	cr_assert_null(m);
	cr_assert_str_eq(e.msg, msg);
	cJSON_Delete(j);
}

Test(kobj_meta, strict_types_name_the_field)
{
	expect_bad("{\"metadata\":\"x\"}", "metadata: expected object, got string");
	expect_bad("{\"metadata\":{\"name\":5}}", "metadata.name: expected string, got number");
	expect_bad("{\"metadata\":{\"generation\":1.5}}", "metadata.generation: expected integer, got number");
	expect_bad("{\"metadata\":{\"labels\":{\"a\":1}}}", "metadata.labels.a: expected string, got number");
	expect_bad("{\"metadata\":{\"labels\":[]}}", "metadata.labels: expected object, got array");
	expect_bad("{\"metadata\":{\"finalizers\":[\"a\",true]}}",
		   "metadata.finalizers[1]: expected string, got boolean");
	expect_bad("{\"metadata\":{\"ownerReferences\":[{\"controller\":\"yes\"}]}}",
		   "metadata.ownerReferences[0].controller: expected boolean, got string");
	expect_bad("[1]", "object: expected object, got array");
}
