/* gpukmm-upgrader's view (services/upgrader/view.c): a view whose node table refused
 * a Node (over its bound) does not hold the whole fleet, so it says it is incomplete
 * and the pass picks nothing on it (pass.c: in.confirmed); a snapshot that fits makes
 * it complete again. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

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

/* A Node event from JSON (the watcher's conversion), applied to the view. */
static void node_ev(gk_upv *v, const char *json, bool del)
{
	cJSON *j = cJSON_Parse(json);
	cr_assert(j, "%s", json);
	Gpukmm__Node *n;
	cr_assert_eq(gk_kobj_node_from_json(j, &n, NULL), 0, "%s", json);
	cJSON_Delete(j);
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.has_type = true;
	ev.type = del ? GPUKMM__EVENT_TYPE__DELETED : GPUKMM__EVENT_TYPE__MODIFIED;
	ev.object_case = GPUKMM__EVENT__OBJECT_NODE;
	ev.node = n;
	gk_err e = { 0 };
	cr_assert_eq(gk_upv_apply(v, "nodes", &ev, &e), 0, "%s", e.msg);
	gk_kobj_free(n);
}

#define REPORT(ver)                                                                                               \
	"{\\\"apiVersion\\\":\\\"gpukmm.io/v1alpha1\\\",\\\"kind\\\":\\\"NodeReport\\\",\\\"module\\\":{\\\"name\\\":" \
	"\\\"xe\\\",\\\"loaded\\\":true,\\\"source\\\":\\\"oot\\\",\\\"version\\\":\\\"" ver "\\\"}}"

#define NODE(name, rv, extra)                                                                                      \
	"{\"metadata\":{\"name\":\"" name "\",\"resourceVersion\":\"" rv "\",\"uid\":\"u-" name "\",\"labels\":{"   \
	"\"zone\":\"z1\",\"kubernetes.io/hostname\":\"" name "\"},\"annotations\":{\"gpukmm.io/upgrade-reason\":" \
	"\"r-" name "\"" extra "}},\"spec\":{\"unschedulable\":true},\"status\":{\"conditions\":[{\"type\":"       \
	"\"Ready\",\"status\":\"False\"}]}}"

Test(upgrader_view, a_node_keeps_what_a_pass_reads_and_shares_its_strings)
{
	gk_upv *v;
	cr_assert_eq(gk_upv_new(&v, "ns", 0, NULL, NULL, NULL), 0);
	node_ev(v, NODE("n1", "5", ",\"gpukmm.io/node-report\":\"" REPORT("1.4") "\""), false);
	node_ev(v, NODE("n2", "6", ""), false);
	cr_assert_eq(gk_upv_n_nodes(v), 2);
	const gk_upv_node *a = gk_upv_node_get(v, "n1"), *b = gk_upv_node_get(v, "n2");
	cr_assert(a && b);
	cr_expect_str_eq(gk_upv_node_name(a), "n1");
	cr_expect_str_eq(gk_upv_node_rv(a), "5");
	cr_expect_str_eq(gk_upv_node_uid(a), "u-n1");
	cr_expect_not(gk_upv_node_ready(a), "Ready False");
	cr_expect(gk_upv_node_unschedulable(a));
	cr_expect_str_eq(gk_upv_node_label(a, "kubernetes.io/hostname"), "n1");
	cr_expect_str_eq(gk_upv_node_label(b, "kubernetes.io/hostname"), "n2");
	cr_expect_null(gk_upv_node_label(a, "gpukmm.io/upgrade-reason"), "annotations are not labels");
	cr_expect_str_eq(gk_upv_node_annotation(a, "gpukmm.io/upgrade-reason"), "r-n1");
	cr_expect_null(gk_upv_node_annotation(a, "zone"), "labels are not annotations");
	cr_expect_null(gk_upv_node_annotation(a, "gpukmm.io/node-report"), "the report is kept as its digest only");
	/* one copy of a string every node has */
	cr_expect_eq(gk_upv_node_label(a, "zone"), gk_upv_node_label(b, "zone"));
	const gk_upg_report *r = gk_upv_node_report(a);
	cr_assert(r, "n1's report is digested");
	cr_expect(r->present && r->loaded && r->oot);
	cr_expect_str_eq(r->module, "xe");
	cr_expect_str_eq(r->version, "1.4");
	cr_expect_null(gk_upv_node_report(b), "n2 has no report");
	/* a new report is digested again; an older event changes nothing */
	node_ev(v, NODE("n1", "7", ",\"gpukmm.io/node-report\":\"" REPORT("1.5") "\""), false);
	cr_expect_str_eq(gk_upv_node_report(gk_upv_node_get(v, "n1"))->version, "1.5");
	node_ev(v, NODE("n1", "6", ",\"gpukmm.io/node-report\":\"" REPORT("1.3") "\""), false);
	cr_expect_str_eq(gk_upv_node_report(gk_upv_node_get(v, "n1"))->version, "1.5", "rv 6 < 7: stale");
	cr_expect_str_eq(gk_upv_node_rv(gk_upv_node_get(v, "n1")), "7");
	/* a garbled report is no report */
	node_ev(v, NODE("n1", "8", ",\"gpukmm.io/node-report\":\"{}\""), false);
	cr_expect_null(gk_upv_node_report(gk_upv_node_get(v, "n1")));
	gk_upv_free(v);
}

Test(upgrader_view, deletes_and_snapshots_keep_every_node_reachable)
{
	gk_upv *v;
	cr_assert_eq(gk_upv_new(&v, "ns", 0, NULL, NULL, NULL), 0);
	char buf[1024];
	for (int i = 0; i < 200; i++) {
		snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"n%d\",\"resourceVersion\":\"%d\",\"labels\":{\"i\":\"%d\"}}}",
			 i, 10 + i, i);
		node_ev(v, buf, false);
	}
	for (int i = 0; i < 200; i += 3) {
		snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"n%d\"}}", i);
		node_ev(v, buf, true);
	}
	cr_assert_eq(gk_upv_n_nodes(v), 200 - 67);
	/* every index holds a distinct node that the name finds again, with its own labels */
	for (size_t i = 0; i < gk_upv_n_nodes(v); i++) {
		const gk_upv_node *n = gk_upv_node_at(v, i);
		cr_assert(n);
		cr_assert_eq(gk_upv_node_get(v, gk_upv_node_name(n)), n);
		int k = atoi(gk_upv_node_name(n) + 1);
		cr_assert_neq(k % 3, 0, "n%d was deleted", k);
		snprintf(buf, sizeof(buf), "%d", k);
		cr_assert_str_eq(gk_upv_node_label(n, "i"), buf);
	}
	/* a snapshot: n1 is newer in the view than in the snapshot (our write), n2 older,
	 * n4 is not listed any more, n300 is new */
	Gpukmm__SnapshotReply s = GPUKMM__SNAPSHOT_REPLY__INIT;
	const char *js[] = { "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"3\",\"labels\":{\"i\":\"old\"}}}",
			     "{\"metadata\":{\"name\":\"n2\",\"resourceVersion\":\"99\",\"labels\":{\"i\":\"new\"}}}",
			     "{\"metadata\":{\"name\":\"n300\",\"resourceVersion\":\"100\"}}",
			     "{\"metadata\":{\"name\":\"n2\",\"resourceVersion\":\"98\",\"labels\":{\"i\":\"dup\"}}}" };
	Gpukmm__Node *ns[4];
	for (int i = 0; i < 4; i++) {
		cJSON *j = cJSON_Parse(js[i]);
		cr_assert_eq(gk_kobj_node_from_json(j, &ns[i], NULL), 0);
		cJSON_Delete(j);
	}
	s.n_nodes = 4;
	s.nodes = ns;
	cr_assert_eq(gk_upv_load_snapshot(v, &s, NULL), 0);
	for (int i = 0; i < 4; i++)
		gk_kobj_free(ns[i]);
	cr_assert_eq(gk_upv_n_nodes(v), 3);
	cr_expect_str_eq(gk_upv_node_label(gk_upv_node_get(v, "n1"), "i"), "1", "our newer write stands");
	cr_expect_str_eq(gk_upv_node_rv(gk_upv_node_get(v, "n1")), "11");
	cr_expect_str_eq(gk_upv_node_label(gk_upv_node_get(v, "n2"), "i"), "new");
	cr_expect_null(gk_upv_node_get(v, "n4"));
	cr_expect(gk_upv_node_get(v, "n300"));
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(gk_upv_node_get(v, gk_upv_node_name(gk_upv_node_at(v, i))), gk_upv_node_at(v, i));
	gk_upv_free(v);
}

static void claim_ev(gk_upv *v, const char *name, bool gpu, bool del, int expect)
{
	Gpukmm__ObjectMeta md = GPUKMM__OBJECT_META__INIT;
	md.name = (char *)name;
	md.namespace_ = "apps";
	char *drv[] = { gpu ? "gpu.intel.com" : "other.example.com" };
	Gpukmm__ResourceClaim c = GPUKMM__RESOURCE_CLAIM__INIT;
	c.metadata = &md;
	c.has_allocated = c.allocated = true;
	c.n_allocated_drivers = 1;
	c.allocated_drivers = drv;
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.has_type = true;
	ev.type = del ? GPUKMM__EVENT_TYPE__DELETED : GPUKMM__EVENT_TYPE__ADDED;
	ev.object_case = GPUKMM__EVENT__OBJECT_RESOURCE_CLAIM;
	ev.resource_claim = &c;
	cr_assert_eq(gk_upv_apply(v, "claims", &ev, NULL), expect, "%s", name);
}

Test(upgrader_view, gpu_claims_are_a_bounded_set)
{
	gk_upv *v;
	cr_assert_eq(gk_upv_new(&v, "ns", 2, NULL, NULL, NULL), 0);
	claim_ev(v, "c1", true, false, GK_OK);
	claim_ev(v, "c1", true, false, GK_OK);
	claim_ev(v, "c2", false, false, GK_OK);
	claim_ev(v, "c3", true, false, GK_OK);
	cr_expect(gk_upv_gpu_claim(v, "apps", "c1"));
	cr_expect_not(gk_upv_gpu_claim(v, "apps", "c2"), "another driver's");
	cr_expect_not(gk_upv_gpu_claim(v, "other", "c1"));
	cr_expect(gk_upv_complete(v));
	claim_ev(v, "c4", true, false, GK_RESOURCE_EXHAUSTED);
	cr_expect_not(gk_upv_complete(v), "c4 could not be kept");
	claim_ev(v, "c1", true, true, GK_OK);
	cr_expect_not(gk_upv_gpu_claim(v, "apps", "c1"));
	Gpukmm__SnapshotReply s = GPUKMM__SNAPSHOT_REPLY__INIT;
	cr_assert_eq(gk_upv_load_snapshot(v, &s, NULL), 0);
	cr_expect(gk_upv_complete(v));
	cr_expect_not(gk_upv_gpu_claim(v, "apps", "c3"), "the snapshot has no claim");
	gk_upv_free(v);
}
