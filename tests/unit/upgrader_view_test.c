/* gpukmm-upgrader's view (services/upgrader/view.c): a view whose node table refused
 * a Node (over its bound) does not hold the whole fleet, so it says it is incomplete
 * and the pass picks nothing on it (pass.c: in.confirmed); a snapshot that fits makes
 * it complete again. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "../../services/upgrader/view.h"
#include "gpukmm/kobj.h"

static void put(gk_upv *v, const char *name, int expect)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"1\"}}", name);
	cJSON *j = cJSON_Parse(buf);
	Gpukmm__Node *n;
	cr_assert_eq(gk_kobj_node_from_json(j, &n, NULL), 0);
	cJSON_Delete(j);
	gk_err e = { 0 };
	cr_assert_eq(gk_upv_put_node(v, n, &e), expect, "%s: %s", name, e.msg);
	gk_kobj_free(n);
}

Test(upgrader_view, a_refused_node_makes_the_view_incomplete_until_a_snapshot)
{
	gk_upv *v;
	cr_assert_eq(gk_upv_new(&v, "ns", 2, NULL, NULL, NULL), 0);
	put(v, "n1", GK_OK);
	put(v, "n2", GK_OK);
	cr_assert(gk_upv_complete(v), "two nodes fit");
	put(v, "n3", GK_RESOURCE_EXHAUSTED);
	cr_assert_not(gk_upv_complete(v), "n3 was dropped: the view cannot vouch for the fleet");
	Gpukmm__SnapshotReply s = GPUKMM__SNAPSHOT_REPLY__INIT;
	s.has_synced = s.synced = 1;
	cr_assert_eq(gk_upv_load_snapshot(v, &s, NULL), 0);
	cr_assert(gk_upv_complete(v), "a snapshot that fits makes it whole again");
	gk_upv_free(v);
}
