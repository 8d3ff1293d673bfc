/* kubesim: server-side Table printing of custom resources (what `kubectl get`
 * shows): printer-column JSONPaths with filters, date columns as ages,
 * default columns, garbage paths. */
#include <criterion/criterion.h>
#include <string.h>

#include "../../tools/kubesim/table.h"

static const char *CRD =
	"{\"spec\":{\"versions\":[{\"name\":\"v1alpha1\",\"additionalPrinterColumns\":["
	"{\"name\":\"KMM\",\"type\":\"string\",\"jsonPath\":\".status.kmmStatus\"},"
	"{\"name\":\"Ready\",\"type\":\"string\",\"jsonPath\":\".status.conditions[?(@.type==\\\"Ready\\\")].status\"},"
	"{\"name\":\"N\",\"type\":\"integer\",\"jsonPath\":\".spec.n\",\"priority\":1},"
	"{\"name\":\"Age\",\"type\":\"date\",\"jsonPath\":\".metadata.creationTimestamp\"}]}]}}";
static const char *OBJ =
	"{\"metadata\":{\"name\":\"gpu\",\"creationTimestamp\":\"2026-12-02T12:00:00Z\"},\"spec\":{\"n\":3},"
	"\"status\":{\"kmmStatus\":\"2/2\",\"conditions\":[{\"type\":\"Degraded\",\"status\":\"False\"},"
	"{\"type\":\"Ready\",\"status\":\"True\"}]}}";

Test(kubesim_table, wanted)
{
	cr_assert(ks_table_wanted("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
	cr_assert_not(ks_table_wanted("application/json"));
	cr_assert_not(ks_table_wanted(NULL));
}

Test(kubesim_table, jsonpath)
{
	cJSON *o = cJSON_Parse(OBJ);
	cr_assert_str_eq(ks_table_jsonpath(o, ".status.kmmStatus")->valuestring, "2/2");
	cr_assert_str_eq(ks_table_jsonpath(o, ".status.conditions[?(@.type==\"Ready\")].status")->valuestring, "True");
	cr_assert_str_eq(ks_table_jsonpath(o, ".status.conditions[?(@.type=='Degraded')].status")->valuestring, "False");
	cr_assert_str_eq(ks_table_jsonpath(o, ".status.conditions[1].type")->valuestring, "Ready");
	cr_assert_null(ks_table_jsonpath(o, ".status.conditions[?(@.type==\"Nope\")].status"));
	cr_assert_null(ks_table_jsonpath(o, ".status.conditions[9]"));
	cr_assert_null(ks_table_jsonpath(o, ".status.missing"));
	const char *garbage[] = { "status", ".", "..a", ".status[", ".status.conditions[x]", ".status.conditions[?(@.type)]",
				  ".status.conditions[?(@.type==Ready)]", ".status.kmmStatus[0]", NULL };
	for (int i = 0; garbage[i]; i++)
		cr_assert_null(ks_table_jsonpath(o, garbage[i]), "%s", garbage[i]);
	cr_assert_null(ks_table_jsonpath(o, NULL));
	cJSON_Delete(o);
}

Test(kubesim_table, ages_like_kubernetes)
{
	struct { long long s; const char *want; } c[] = {
		{ 5, "5s" }, { 119, "119s" }, { 200, "3m20s" }, { 300, "5m" }, { 3000, "50m" }, { 4 * 3600 + 60, "4h1m" },
		{ 20 * 3600, "20h" }, { 3 * 86400 + 3600, "3d1h" }, { 30 * 86400, "30d" }, { -5, "<invalid>" }, { -1, "0s" },
	};
	char b[32];
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ks_table_age(b, sizeof(b), c[i].s);
		cr_assert_str_eq(b, c[i].want, "%lld", c[i].s);
	}
}

Test(kubesim_table, printer_columns)
{
	cJSON *crd = cJSON_Parse(CRD), *o = cJSON_Parse(OBJ);
	const cJSON *objs[] = { o };
	/* 2026-12-02T12:00:00Z + 90 s */
	cJSON *t = ks_table_build(crd, "v1alpha1", objs, 1, "7", 1796212800 + 90);
	cr_assert_not_null(t);
	cr_assert_str_eq(cJSON_GetObjectItem(t, "kind")->valuestring, "Table");
	const cJSON *defs = cJSON_GetObjectItem(t, "columnDefinitions");
	cr_assert_eq(cJSON_GetArraySize(defs), 5);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(defs, 0), "name")->valuestring, "Name");
	cr_assert_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(defs, 3), "priority")->valueint, 1);
	const cJSON *cells = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(t, "rows"), 0), "cells");
	char *s = cJSON_PrintUnformatted(cells);
	cr_assert_str_eq(s, "[\"gpu\",\"2/2\",\"True\",3,\"90s\"]");
	cJSON_free(s);
	const cJSON *po = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(t, "rows"), 0), "object");
	cr_assert_str_eq(cJSON_GetObjectItem(po, "kind")->valuestring, "PartialObjectMetadata");
	cJSON_Delete(t);
	/* an object without status: empty cells */
	cJSON *bare = cJSON_Parse("{\"metadata\":{\"name\":\"x\"}}");
	objs[0] = bare;
	t = ks_table_build(crd, "v1alpha1", objs, 1, NULL, 0);
	s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(t, "rows"), 0), "cells"));
	cr_assert_str_eq(s, "[\"x\",null,null,null,null]");
	cJSON_free(s);
	cJSON_Delete(t);
	/* a timestamp that does not parse */
	cJSON *odd = cJSON_Parse("{\"metadata\":{\"name\":\"y\",\"creationTimestamp\":\"yesterday\"}}");
	objs[0] = odd;
	t = ks_table_build(crd, "v1alpha1", objs, 1, NULL, 0);
	s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(t, "rows"), 0), "cells"));
	cr_assert_str_eq(s, "[\"y\",null,null,null,\"<unknown>\"]");
	cJSON_free(s);
	cJSON_Delete(t);
	cJSON_Delete(odd);
	objs[0] = bare;
	/* unknown version / no CRD: Name and Age */
	t = ks_table_build(NULL, "v1", objs, 1, NULL, 0);
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(t, "columnDefinitions")), 2);
	s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(t, "rows"), 0), "cells"));
	cr_assert_str_eq(s, "[\"x\",null]");
	cJSON_free(s);
	cJSON_Delete(t);
	cJSON_Delete(bare);
	cJSON_Delete(o);
	cJSON_Delete(crd);
}
