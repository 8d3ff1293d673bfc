/* gpukmm-statusd controller mode: the watcher view (policies, node digests,
 * leadership) and which changes mark policies dirty. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../services/statusd/view.h"
#include "gpukmm/ipc.h"

typedef struct rec {
	int all, named;
	char last[64];
} rec;

static void on_dirty(void *user, const char *policy)
{
	rec *r = user;
	if (policy) {
		r->named++;
		snprintf(r->last, sizeof(r->last), "%s", policy);
	} else {
		r->all++;
	}
}

static Gpukmm__Event *event(const char *json)
{
	ProtobufCMessage *m = NULL;
	gk_err e;
	cr_assert_eq(gk_pb_from_json(&gpukmm__event__descriptor, json, &m, &e), GK_OK, "%s", e.msg);
	return (Gpukmm__Event *)m;
}

static int apply(gk_sd_view *v, const char *topic, const char *json)
{
	Gpukmm__Event *ev = event(json);
	gk_err e;
	int rc = gk_sd_view_apply(v, topic, ev, &e);
	gk_ipc_free(&ev->base);
	return rc;
}

/* load a snapshot given as JSON */
static void load(gk_sd_view *v, const char *json)
{
	ProtobufCMessage *m = NULL;
	gk_err e;
	cr_assert_eq(gk_pb_from_json(&gpukmm__snapshot_reply__descriptor, json, &m, &e), GK_OK, "%s", e.msg);
	cr_assert_eq(gk_sd_view_load_snapshot(v, (Gpukmm__SnapshotReply *)m, &e), GK_OK);
	gk_ipc_free(m);
}

#define NODE(name, kernel, extra)                                                                                  \
	"{\"type\":\"MODIFIED\",\"node\":{\"metadata\":{\"name\":\"" name "\",\"labels\":[{\"key\":\"kubernetes.io/" \
	"arch\",\"value\":\"amd64\"}" extra "]},\"kernel_version\":\"" kernel "\"}}"

Test(statusd_view, snapshot_events_and_dirty_marks)
{
	rec r = { 0 };
	gk_sd_view *v;
	gk_err e;
	cr_assert_eq(gk_sd_view_new(&v, on_dirty, &r, &e), GK_OK);
	load(v, "{\"synced\":true,\"leadership\":{\"leader\":false},\"cluster_policies\":[{\"metadata\":"
		"{\"name\":\"gpu\"}}],\"nodes\":[{\"metadata\":{\"name\":\"b\"}},{\"metadata\":{\"name\":\"a\"}}]}");
	cr_assert_eq(r.all, 1);
	cr_assert(gk_sd_view_synced(v));
	cr_assert_not(gk_sd_view_leader(v));
	size_t n;
	const gk_sd_node *const *nodes = gk_sd_view_nodes(v, &n);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(nodes[0]->name, "a", "kept sorted by name");
	cr_assert_not_null(gk_sd_view_policy(v, "gpu"));

	/* a node change that changes the digest: every policy */
	cr_assert_eq(apply(v, "node", NODE("c", "6.8.0", "")), GK_OK);
	cr_assert_eq(r.all, 2);
	nodes = gk_sd_view_nodes(v, &n);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(nodes[2]->name, "c");
	/* the same node again (a heartbeat, a resourceVersion bump): nothing */
	cr_assert_eq(apply(v, "node", NODE("c", "6.8.0", "")), GK_OK);
	cr_assert_eq(r.all, 2);
	/* a label or the kernel changes: again */
	cr_assert_eq(apply(v, "node", NODE("c", "6.9.0", "")), GK_OK);
	cr_assert_eq(r.all, 3);
	cr_assert_eq(apply(v, "node", NODE("c", "6.9.0", ",{\"key\":\"x\",\"value\":\"y\"}")), GK_OK);
	cr_assert_eq(r.all, 4);
	/* deleted */
	cr_assert_eq(apply(v, "node", "{\"type\":\"DELETED\",\"node\":{\"metadata\":{\"name\":\"a\"}}}"), GK_OK);
	cr_assert_eq(r.all, 5);
	nodes = gk_sd_view_nodes(v, &n);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(nodes[0]->name, "b");
	/* garbage: a node without a name is refused, nothing marked */
	cr_assert_neq(apply(v, "node", "{\"type\":\"ADDED\",\"node\":{\"metadata\":{}}}"), GK_OK);
	cr_assert_eq(r.all, 5);

	/* a policy event marks that policy only */
	cr_assert_eq(apply(v, "clusterpolicy", "{\"type\":\"ADDED\",\"cluster_policy\":{\"metadata\":{\"name\":\"p2\"}}}"),
		     GK_OK);
	cr_assert_eq(r.named, 1);
	cr_assert_str_eq(r.last, "p2");
	cr_assert_eq(gk_sd_view_n_policies(v), 2);
	cr_assert_eq(apply(v, "clusterpolicy", "{\"type\":\"DELETED\",\"cluster_policy\":{\"metadata\":{\"name\":\"p2\"}}}"),
		     GK_OK);
	cr_assert_eq(gk_sd_view_n_policies(v), 1);
	cr_assert_null(gk_sd_view_policy(v, "p2"));

	/* leadership gained: every policy (to write); lost: every policy too (its
	 * per-policy metrics go, metrics.h); no change: nothing */
	cr_assert_eq(apply(v, "leadership", "{\"leadership\":{\"leader\":true}}"), GK_OK);
	cr_assert(gk_sd_view_leader(v));
	cr_assert_eq(r.all, 6);
	cr_assert_eq(apply(v, "leadership", "{\"leadership\":{\"leader\":false}}"), GK_OK);
	cr_assert_not(gk_sd_view_leader(v));
	cr_assert_eq(r.all, 7);
	cr_assert_eq(apply(v, "leadership", "{\"leadership\":{\"leader\":false}}"), GK_OK);
	cr_assert_eq(r.all, 7);
	/* other topics and empty events are ignored */
	cr_assert_eq(apply(v, "module", "{\"type\":\"ADDED\"}"), GK_OK);
	cr_assert_eq(apply(v, "node", "{\"type\":\"ADDED\"}"), GK_OK);
	cr_assert_eq(r.all, 7);
	gk_sd_view_free(v);
}

Test(statusd_view, no_leadership_information_means_we_lead)
{
	rec r = { 0 };
	gk_sd_view *v;
	gk_err e;
	cr_assert_eq(gk_sd_view_new(&v, on_dirty, &r, &e), GK_OK);
	Gpukmm__SnapshotReply s = GPUKMM__SNAPSHOT_REPLY__INIT;
	s.has_synced = 1;
	s.synced = 1;
	cr_assert_eq(gk_sd_view_load_snapshot(v, &s, &e), GK_OK);
	cr_assert(gk_sd_view_leader(v));
	gk_sd_view_free(v);
}

/* the leadership term: kept from snapshots and events; a new term while
 * leading (a leadership lost and won again between two events, a watcher
 * restart) marks every policy like a gained leadership */
Test(statusd_view, leadership_term)
{
	rec r = { 0 };
	gk_sd_view *v;
	gk_err e;
	cr_assert_eq(gk_sd_view_new(&v, on_dirty, &r, &e), GK_OK);
	load(v, "{\"synced\":true,\"leadership\":{\"leader\":true,\"term\":\"41\"}}");
	cr_assert_eq(gk_sd_view_term(v), 41);
	cr_assert_eq(r.all, 1);
	cr_assert_eq(apply(v, "leadership", "{\"leadership\":{\"leader\":true,\"term\":\"41\"}}"), GK_OK);
	cr_assert_eq(r.all, 1, "the same term: nothing");
	cr_assert_eq(apply(v, "leadership", "{\"leadership\":{\"leader\":true,\"term\":\"57\"}}"), GK_OK);
	cr_assert_eq(gk_sd_view_term(v), 57);
	cr_assert_eq(r.all, 2, "a new term while leading: every policy");
	cr_assert_eq(apply(v, "leadership", "{\"leadership\":{\"leader\":false,\"term\":\"0\"}}"), GK_OK);
	cr_assert_eq(gk_sd_view_term(v), 0);
	cr_assert_eq(r.all, 3, "lost: every policy too (its metrics go)");
	/* a watcher without this field (or without an election): term 0 */
	cr_assert_eq(apply(v, "leadership", "{\"leadership\":{\"leader\":true}}"), GK_OK);
	cr_assert_eq(gk_sd_view_term(v), 0);
	cr_assert(gk_sd_view_leader(v));
	gk_sd_view_free(v);
}

/* #21: a cluster of 15,000 Nodes is kept whole (the view held 10,000 and left
 * the rest out of status.nodes), and their digests share their strings: the
 * pool holds each label key and value once, not once per node */
Test(statusd_view, fifteen_thousand_nodes_share_their_strings)
{
	enum { N = 15000 };
	gk_sd_view *v;
	gk_err e;
	cr_assert_eq(gk_sd_view_new(&v, NULL, NULL, &e), GK_OK);
	Gpukmm__SnapshotReply s = GPUKMM__SNAPSHOT_REPLY__INIT;
	Gpukmm__Node *nodes = calloc(N, sizeof(*nodes)), **np = calloc(N, sizeof(*np));
	Gpukmm__ObjectMeta *meta = calloc(N, sizeof(*meta));
	char(*names)[24] = calloc(N, sizeof(*names));
	cr_assert(nodes && np && meta && names);
	Gpukmm__KeyValue kv[3], *kvp[3];
	const char *k[3] = { "kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/instance-type" };
	const char *val[3] = { "amd64", "linux", "gpu-large" };
	for (int i = 0; i < 3; i++) {
		gpukmm__key_value__init(&kv[i]);
		kv[i].key = (char *)k[i];
		kv[i].value = (char *)val[i];
		kvp[i] = &kv[i];
	}
	for (int i = 0; i < N; i++) {
		gpukmm__node__init(&nodes[i]);
		gpukmm__object_meta__init(&meta[i]);
		snprintf(names[i], sizeof(names[i]), "node-%05d", i);
		meta[i].name = names[i];
		meta[i].labels = kvp;
		meta[i].n_labels = 3;
		nodes[i].metadata = &meta[i];
		nodes[i].kernel_version = "6.8.0-45-generic";
		np[i] = &nodes[i];
	}
	s.nodes = np;
	s.n_nodes = N;
	s.has_synced = s.synced = true;
	cr_assert_eq(gk_sd_view_load_snapshot(v, &s, &e), GK_OK);
	gk_sd_view_stats st;
	gk_sd_view_stats_get(v, &st);
	cr_assert_eq(st.nodes, N);
	cr_assert_eq(st.node_dropped, 0);
	size_t n;
	const gk_sd_node *const *d = gk_sd_view_nodes(v, &n);
	cr_assert_eq(d[0]->labels[0], d[N - 1]->labels[0], "one copy of a label key");
	cr_assert_eq(d[0]->kernel, d[N - 1]->kernel, "one copy of a kernel version");
	cr_assert_eq(gk_sd_node_pooled(), N + 7, "the names, 3 keys, 3 values and the kernel");
	gk_sd_view_free(v);
	cr_assert_eq(gk_sd_node_pooled(), 0, "every string is given back");
	free(names);
	free(meta);
	free(np);
	free(nodes);
}

/* gk_sd_view_gen moves on what a node summary is computed from (statusd reuses
 * a policy's summary while it stays): a snapshot, a policy put or deleted, a
 * node whose digest changed, added or deleted; not on an equal node event. */
Test(statusd_view, generation_moves_with_what_a_summary_reads)
{
	rec r = { 0 };
	gk_sd_view *v;
	gk_err e;
	cr_assert_eq(gk_sd_view_new(&v, on_dirty, &r, &e), GK_OK);
	uint64_t g = gk_sd_view_gen(v);
	load(v, "{\"synced\":true,\"cluster_policies\":[{\"metadata\":{\"name\":\"gpu\"}}],"
		"\"nodes\":[{\"metadata\":{\"name\":\"a\"}}]}");
	cr_assert_gt(gk_sd_view_gen(v), g, "a snapshot");
	g = gk_sd_view_gen(v);
	cr_assert_eq(apply(v, "node", NODE("b", "6.8.0", "")), GK_OK);
	cr_assert_gt(gk_sd_view_gen(v), g, "a node added");
	g = gk_sd_view_gen(v);
	cr_assert_eq(apply(v, "node", NODE("b", "6.8.0", "")), GK_OK);
	cr_assert_eq(gk_sd_view_gen(v), g, "an equal node event");
	cr_assert_eq(apply(v, "node", NODE("b", "6.9.0", "")), GK_OK);
	cr_assert_gt(gk_sd_view_gen(v), g, "a node's kernel changed");
	g = gk_sd_view_gen(v);
	cr_assert_eq(apply(v, "node", "{\"type\":\"DELETED\",\"node\":{\"metadata\":{\"name\":\"b\"}}}"), GK_OK);
	cr_assert_gt(gk_sd_view_gen(v), g, "a node deleted");
	g = gk_sd_view_gen(v);
	cr_assert_eq(apply(v, "clusterpolicy", "{\"type\":\"MODIFIED\",\"cluster_policy\":{\"metadata\":"
						"{\"name\":\"gpu\",\"generation\":2}}}"),
		     GK_OK);
	cr_assert_gt(gk_sd_view_gen(v), g, "a policy put");
	g = gk_sd_view_gen(v);
	cr_assert_eq(apply(v, "clusterpolicy", "{\"type\":\"DELETED\",\"cluster_policy\":{\"metadata\":"
						"{\"name\":\"gpu\"}}}"),
		     GK_OK);
	cr_assert_gt(gk_sd_view_gen(v), g, "a policy deleted");
	g = gk_sd_view_gen(v);
	cr_assert_eq(apply(v, "leadership", "{\"leadership\":{\"leader\":true,\"term\":9}}"), GK_OK);
	cr_assert_eq(gk_sd_view_gen(v), g, "leadership is not what a summary reads");
	gk_sd_view_free(v);
}
