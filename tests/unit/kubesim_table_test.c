/* kubesim: the pieces of server-side Table printing (what `kubectl get`
 * shows): printer-column JSONPaths with filters and garbage paths, ages like
 * apimachinery. Whole tables: kubesim_pure_test.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "../../tools/kubesim/table.h"

static const char *OBJ =
	"{\"metadata\":{\"name\":\"gpu\",\"creationTimestamp\":\"2026-12-02T12:00:00Z\"},\"spec\":{\"n\":3},"
	"\"status\":{\"kmmStatus\":\"2/2\",\"conditions\":[{\"type\":\"Degraded\",\"status\":\"False\"},"
	"{\"type\":\"Ready\",\"status\":\"True\"}]}}";

Test(kubesim_table, wanted)
{
	cr_assert(ks_wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
	cr_assert_not(ks_wants_table("application/json"));
	cr_assert_not(ks_wants_table(NULL));
}

Test(kubesim_table, jsonpath)
{
	cJSON *o = cJSON_Parse(OBJ);
	cr_assert_str_eq(ks_jsonpath_first(o, ".status.kmmStatus")->valuestring, "2/2");
	cr_assert_str_eq(ks_jsonpath_first(o, ".status.conditions[?(@.type==\"Ready\")].status")->valuestring, "True");
	cr_assert_str_eq(ks_jsonpath_first(o, ".status.conditions[?(@.type=='Degraded')].status")->valuestring, "False");
	cr_assert_str_eq(ks_jsonpath_first(o, ".status.conditions[1].type")->valuestring, "Ready");
	cr_assert_null(ks_jsonpath_first(o, ".status.conditions[?(@.type==\"Nope\")].status"));
	cr_assert_null(ks_jsonpath_first(o, ".status.conditions[9]"));
	cr_assert_null(ks_jsonpath_first(o, ".status.missing"));
	const char *garbage[] = { "status", ".", "..a", ".status[", ".status.conditions[x]",
				  ".status.kmmStatus[0]", NULL };
	for (int i = 0; garbage[i]; i++)
		cr_assert_null(ks_jsonpath_first(o, garbage[i]), "%s", garbage[i]);
	cr_assert_null(ks_jsonpath_first(o, NULL));
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
		ks_human_duration(c[i].s, b, sizeof(b));
		cr_assert_str_eq(b, c[i].want, "%lld", c[i].s);
	}
}
