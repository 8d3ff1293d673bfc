/* lib/operands Kueue (operands.md §8.3) and lib/base quantities: the totals of
 * dp and dra mode, the even division with upstream's remainders and error
 * (pinned against upstream's misc_controller_test.go cases), the ResourceFlavor,
 * ClusterQueue and LocalQueue objects, the quota comparison (upstream writes
 * quantities in another format: no write after a migration), a moved LocalQueue
 * (immutable in Kueue: recreated), and how upstream's leftovers are recognised. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/operands.h"
#include "gpukmm/policy.h"
#include "gpukmm/quantity.h"
#include "gpukmm/yamljson.h"
#include "yaml_expect.h"

/* ---- quantities ------------------------------------------------------------------------ */

static int64_t val(const char *s)
{
	gk_qty q;
	cr_assert(gk_qty_parse(s, &q), "%s does not parse", s);
	return gk_qty_value(q);
}

Test(quantity, parses_the_api_syntax)
{
	cr_expect_eq(val("8"), 8);
	cr_expect_eq(val("3500m"), 4, "Value() rounds up");
	cr_expect_eq(val("1.5"), 2);
	cr_expect_eq(val("16Gi"), 17179869184LL);
	cr_expect_eq(val("16328972Ki"), 16720867328LL);
	cr_expect_eq(val("1.5Gi"), 1610612736LL);
	cr_expect_eq(val("2k"), 2000);
	cr_expect_eq(val("33554432e3"), 33554432000LL, "upstream's DecimalExponent form");
	cr_expect_eq(val("1E"), 1000000000000000000LL, "E is exa without an exponent");
	cr_expect_eq(val("2Ei") > 0, true);
	cr_expect_eq(val("1e-3"), 1);
	cr_expect_eq(val(".5"), 1);
	cr_expect_eq(val("0"), 0);
	cr_expect_eq(val("+7"), 7);
	gk_qty a, b;
	cr_assert(gk_qty_parse("500m", &a) && gk_qty_parse("0.5", &b));
	cr_expect(a == b && a == GK_QTY_ONE / 2);
	cr_assert(gk_qty_parse("1n", &a) && a == 1);
	cr_assert(gk_qty_parse("0.1n", &a) && a == 1, "more precise than nano: rounded up");
	static const char *bad[] = { "", "m", "1x", "1.2.3", "1e", "1ei", "e3", "1Kib", "--1", "1 ", "1e99999",
				     "1000000000000000000000000" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect(!gk_qty_parse(bad[i], &a), "'%s' parsed", bad[i]);
}

/* ---- totals and shares ---------------------------------------------------------------------- */

Test(kueue, dp_totals_count_gpu_nodes_only)
{
	gk_op_knode nodes[] = {
		{ .name = "a", .cpu = "8", .memory = "16Gi", .i915 = "5", .xe = "7" },
		{ .name = "b", .cpu = "3500m", .memory = "1Gi", .xe = "0" }, /* the key counts, not the value */
		{ .name = "cpu-only", .cpu = "64", .memory = "256Gi" },
		{ .name = "c", .cpu = "500m", .i915 = "1" },
	};
	gk_op_ktotals t;
	cr_assert_eq(gk_op_kueue_totals(false, nodes, 4, NULL, 0, &t), 0);
	cr_expect_eq(t.value[GK_OP_KR_I915], 6);
	cr_expect_eq(t.value[GK_OP_KR_XE], 7);
	cr_expect_eq(t.value[GK_OP_KR_CPU], 12, "8 + 3.5 + 0.5: exact sum");
	cr_expect_eq(t.value[GK_OP_KR_MEMORY], 17179869184LL + 1073741824LL);
	cr_expect_eq(t.value[GK_OP_KR_DRA], 0);
	cr_expect(gk_op_kueue_any(&t));
	gk_op_knode none[] = { { .name = "x", .cpu = "4", .memory = "1Gi" } };
	cr_assert_eq(gk_op_kueue_totals(false, none, 1, NULL, 0, &t), 0);
	cr_expect(!gk_op_kueue_any(&t), "no GPU node: nothing to share (upstream does nothing)");
}

Test(kueue, dra_totals_count_devices_of_known_nodes_newest_generation)
{
	gk_op_knode nodes[] = {
		{ .name = "n1", .cpu = "8", .memory = "25" },
		{ .name = "n2", .cpu = "4", .memory = "10", .xe = "3" }, /* allocatable does not count in dra mode */
	};
	gk_op_kslice sl[] = {
		{ .driver = "gpu.intel.com", .node = "n1", .pool = "n1", .generation = 1, .devices = 6 },
		{ .driver = "gpu.intel.com", .node = "n2", .pool = "n2", .generation = 3, .devices = 1 },
		{ .driver = "gpu.intel.com", .node = "n2", .pool = "n2", .generation = 3, .devices = 1 }, /* 2 slices */
		{ .driver = "gpu.intel.com", .node = "n2", .pool = "n2", .generation = 2, .devices = 5 }, /* old */
		{ .driver = "gpu.intel.com", .node = "gone", .pool = "gone", .generation = 1, .devices = 9 },
		{ .driver = "other.example.com", .node = "n1", .pool = "n1", .generation = 9, .devices = 9 },
		{ .driver = "gpu.intel.com", .node = NULL, .pool = "shared", .generation = 1, .devices = 9 },
	};
	gk_op_ktotals t;
	cr_assert_eq(gk_op_kueue_totals(true, nodes, 2, sl, sizeof(sl) / sizeof(sl[0]), &t), 0);
	cr_expect_eq(t.value[GK_OP_KR_DRA], 8);
	cr_expect_eq(t.value[GK_OP_KR_CPU], 12, "a node's cpu counts once, whatever its slices");
	cr_expect_eq(t.value[GK_OP_KR_MEMORY], 35);
	cr_expect_eq(t.value[GK_OP_KR_XE], 0);
}

/* upstream's "split resources into queues": cpu 8, memory 25, i915 5, xe 7 */
Test(kueue, divide_as_upstream)
{
	gk_op_ktotals t = { .value = { [GK_OP_KR_CPU] = 8, [GK_OP_KR_MEMORY] = 25, [GK_OP_KR_I915] = 5,
				       [GK_OP_KR_XE] = 7 } };
	int64_t q[6][GK_OP_KR_N];
	char msg[256] = "";
	cr_assert_eq(gk_op_kueue_divide(&t, 4, q, msg, sizeof(msg)), 0);
	int64_t i915[] = { 2, 1, 1, 1 }, xe[] = { 2, 2, 2, 1 }, cpu[] = { 2, 2, 2, 2 }, mem[] = { 7, 6, 6, 6 };
	for (int i = 0; i < 4; i++) {
		cr_expect_eq(q[i][GK_OP_KR_I915], i915[i], "queue %d i915", i);
		cr_expect_eq(q[i][GK_OP_KR_XE], xe[i], "queue %d xe", i);
		cr_expect_eq(q[i][GK_OP_KR_CPU], cpu[i]);
		cr_expect_eq(q[i][GK_OP_KR_MEMORY], mem[i]);
		cr_expect_eq(q[i][GK_OP_KR_DRA], 0, "a zero total is left out");
	}
	cr_expect_eq(gk_op_kueue_divide(&t, 6, q, msg, sizeof(msg)), -1);
	cr_expect_str_eq(msg, "unable to create 6 queues using 5 'gpu.intel.com/i915' reources");
	/* several short: upstream stops at the first queue whose share is 0, i.e. the smallest total */
	t.value[GK_OP_KR_CPU] = 3;
	cr_expect_eq(gk_op_kueue_divide(&t, 8, q, msg, sizeof(msg)), -1);
	cr_expect_str_eq(msg, "unable to create 8 queues using 3 'cpu' reources");
	cr_expect_eq(gk_op_kueue_divide(&t, 3, q, msg, sizeof(msg)), 0);
}

/* ---- objects ------------------------------------------------------------------------------- */

static gk_op_set S;
static gk_op_opts O;
static gk_op_ktotals T;

static void render(const char *spec_yaml)
{
	render_yaml(&S, &O, spec_yaml);
	/* only the Kueue objects (the device plugin of dp mode is operands_test.c's) */
	size_t k = 0;
	for (size_t i = 0; i < S.n; i++) {
		if (S.v[i].component == GK_OP_KUEUE) {
			gk_op_obj t = S.v[k];
			S.v[k++] = S.v[i];
			S.v[i] = t;
		}
	}
	for (size_t i = k; i < S.n; i++) {
		free(S.v[i].ns);
		free(S.v[i].name);
		cJSON_Delete(S.v[i].obj);
		for (size_t r = 0; r < S.v[i].n_rules; r++)
			free(S.v[i].rules[r].path);
		free(S.v[i].rules);
	}
	S.n = k;
}

static void init(void)
{
	O = (gk_op_opts){ .kueue = true, .kueue_totals = &T };
	T = (gk_op_ktotals){ .value = { [GK_OP_KR_CPU] = 8, [GK_OP_KR_MEMORY] = 33554432000LL, [GK_OP_KR_XE] = 3 } };
}

static void fini(void)
{
	gk_op_set_free(&S);
}

static gk_op_obj *find(const char *kind, const char *name)
{
	for (size_t i = 0; i < S.n; i++)
		if (strcmp(S.v[i].kind, kind) == 0 && strcmp(S.v[i].name, name) == 0)
			return &S.v[i];
	return NULL;
}

#define META(name) "  name: " name "\n  labels: {app.kubernetes.io/managed-by: gpukmm, app: gpu.intel.com-kueue-queue, owner: gpu}\n" \
	"  ownerReferences: [{apiVersion: intel.com/v1alpha1, kind: ClusterPolicy, name: gpu, uid: u-1, controller: true," \
	" blockOwnerDeletion: true}]\n"

#define SPEC "  resourceRegistration: dp\n  enableKueue: true\n" \
	"  kueue: {equalResources: [{name: team-a, localQueues: [{name: a, namespace: ns1}, {name: b, namespace: ns2}]}," \
	" {name: team-b, localQueues: [{name: c, namespace: ns1}]}]}\n"

TestSuite(kueue_objects, .init = init, .fini = fini);

Test(kueue_objects, flavor_cluster_queues_local_queues)
{
	render(SPEC);
	cr_assert_eq(S.n, 6, "flavor, team-a, a, b, team-b, c");
	const char *order[] = { "ResourceFlavor", "ClusterQueue", "LocalQueue", "LocalQueue", "ClusterQueue", "LocalQueue" };
	for (size_t i = 0; i < S.n; i++) {
		cr_expect_str_eq(S.v[i].kind, order[i]);
		cr_expect_eq(S.v[i].component, GK_OP_KUEUE);
		cr_expect_str_eq(S.v[i].api_version, "kueue.x-k8s.io/v1beta2");
	}
	expect_json(find("ResourceFlavor", "gpu.intel.com-kueue-flavor")->obj,
		    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n" META("gpu.intel.com-kueue-flavor"),
		    "flavor: labels only");
	expect_json(find("ClusterQueue", "team-a")->obj,
		    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n" META("team-a")
		    "spec:\n  namespaceSelector: {}\n  resourceGroups:\n"
		    "  - coveredResources: [cpu, gpu.intel.com/xe, memory]\n"
		    "    flavors: [{name: gpu.intel.com-kueue-flavor, resources: [{name: cpu, nominalQuota: '4'},"
		    " {name: gpu.intel.com/xe, nominalQuota: '2'}, {name: memory, nominalQuota: '16777216000'}]}]\n",
		    "first queue: the remainder");
	expect_json(cJSON_GetObjectItem(cJSON_GetObjectItem(find("ClusterQueue", "team-b")->obj, "spec"), "resourceGroups"),
		    "[{coveredResources: [cpu, gpu.intel.com/xe, memory], flavors: [{name: gpu.intel.com-kueue-flavor,"
		    " resources: [{name: cpu, nominalQuota: '4'}, {name: gpu.intel.com/xe, nominalQuota: '1'},"
		    " {name: memory, nominalQuota: '16777216000'}]}]}]", "second queue");
	gk_op_obj *lq = find("LocalQueue", "b");
	expect_json(lq->obj, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n" META("b")
		    "  namespace: ns2\nspec: {clusterQueue: team-a}\n", "local queue");
	cr_expect_str_eq(lq->ns, "ns2");
	cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(find("LocalQueue", "c")->obj, "spec"), "clusterQueue")
				 ->valuestring, "team-b");
	cr_expect_eq(S.n_errors, 0);
	cr_expect(S.wanted & (1u << GK_OP_KUEUE));
}

Test(kueue_objects, held_or_nothing)
{
	O.kueue = false;
	render(SPEC);
	cr_expect_eq(S.n, 0, "the Kueue CRDs not served: nothing");
	cr_expect(S.wanted & (1u << GK_OP_KUEUE));
	cr_expect(S.held & (1u << GK_OP_KUEUE), "not served: nothing deleted either");
	cr_assert_eq(S.n_errors, 1, "the status says Kueue is not installed");
	cr_expect_str_eq(S.errors[0], GK_OP_MSG_KUEUE_ABSENT);
	O.kueue = true;
	O.kueue_totals = NULL;
	render(SPEC);
	cr_expect_eq(S.n, 0);
	cr_expect(S.held & (1u << GK_OP_KUEUE), "inputs not known yet: the live objects stay as they are");
	O.kueue_totals = &T;
	memset(&T, 0, sizeof(T));
	render(SPEC);
	cr_expect(S.held & (1u << GK_OP_KUEUE), "no GPU in the cluster: upstream changes nothing");
	cr_assert_eq(S.n_errors, 1);
	cr_expect_str_eq(S.errors[0], GK_OP_MSG_KUEUE_NO_RESOURCES);
	T.value[GK_OP_KR_XE] = 1;
	render(SPEC);
	cr_expect(S.held & (1u << GK_OP_KUEUE));
	cr_assert_eq(S.n_errors, 1);
	cr_expect_str_eq(S.errors[0], "unable to create 2 queues using 1 'gpu.intel.com/xe' reources");
	T.value[GK_OP_KR_XE] = 2;
	render("  resourceRegistration: dp\n  enableKueue: false\n  kueue: {equalResources: [{name: q, localQueues: []}]}\n");
	cr_expect_eq(S.n, 0);
	cr_expect(!(S.wanted & (1u << GK_OP_KUEUE)) && !S.held, "off: nothing wanted, nothing held (all goes)");
	render("  resourceRegistration: dp\n  enableKueue: true\n");
	cr_expect(S.n == 0 && !S.held, "no queue listed: what we had goes");
}

/* a LocalQueue listed under two ClusterQueues (stored before validation refused it): the first wins */
Test(kueue_objects, local_queue_in_two_cluster_queues)
{
	render("  resourceRegistration: dp\n  enableKueue: true\n  kueue: {equalResources: [{name: q1, localQueues: "
	       "[{name: a, namespace: ns}]}, {name: q2, localQueues: [{name: a, namespace: ns}]}]}\n");
	gk_op_obj *lq = find("LocalQueue", "a");
	cr_assert_not_null(lq);
	cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(lq->obj, "spec"), "clusterQueue")->valuestring, "q1");
	cr_assert_eq(S.n_errors, 1);
	cr_expect_str_eq(S.errors[0], "kueue.equalResources[1]: localQueue \"ns/a\" is already in equalResources[0]");
}

/* ---- live vs wanted ------------------------------------------------------------------------------ */

static int sync(const gk_op_obj *o, const cJSON *live, char **patch)
{
	cJSON *p = NULL;
	char msg[256];
	int rc = gk_op_sync(o, live, &p, msg, sizeof(msg));
	*patch = p ? cJSON_PrintUnformatted(p) : NULL;
	cJSON_Delete(p);
	return rc;
}

/* what upstream created: its labels, no owner reference, quantities as resource.NewQuantity(v, "")
 * prints them (DecimalExponent), resources in a Go map's order, Kueue's defaults */
#define UPSTREAM_CQ "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\n" \
	"metadata: {name: team-a, resourceVersion: '7', uid: cq-uid, labels: {app: gpu.intel.com-kueue-queue, owner: gpu}}\n" \
	"spec:\n  namespaceSelector: {}\n  queueingStrategy: BestEffortFIFO\n  stopPolicy: None\n  resourceGroups:\n" \
	"  - coveredResources: [memory, gpu.intel.com/xe, cpu]\n" \
	"    flavors: [{name: gpu.intel.com-kueue-flavor, resources: [{name: memory, nominalQuota: 16777216e3}," \
	" {name: gpu.intel.com/xe, nominalQuota: '2'}, {name: cpu, nominalQuota: 4}]}]\n"

Test(kueue_objects, upstream_quotas_in_another_format_are_the_same)
{
	render(SPEC);
	gk_op_obj *o = find("ClusterQueue", "team-a");
	cJSON *live = yaml(UPSTREAM_CQ);
	char *p = NULL;
	cr_assert_eq(sync(o, live, &p), GK_OP_PATCH);
	cJSON *pj = cJSON_Parse(p);
	cr_expect_null(cJSON_GetObjectItem(pj, "spec"), "adoption patches metadata only: %s", p);
	free(p);
	cJSON_Delete(pj);
	cr_expect(gk_op_kueue_mine(live, "gpu"));
	cr_expect(gk_op_is_upstream(live, "gpu", GK_OP_KUEUE_APP));
	cr_expect(!gk_op_kueue_mine(live, "other"));
	/* adopted: label and owner reference there → nothing to write */
	cJSON *md = cJSON_GetObjectItem(live, "metadata");
	cJSON_AddStringToObject(cJSON_GetObjectItem(md, "labels"), GK_OP_MANAGED_BY_KEY, GK_OP_MANAGED_BY_VALUE);
	cJSON_AddItemToObject(md, "ownerReferences", cJSON_Duplicate(cJSON_GetObjectItem(cJSON_GetObjectItem(o->obj, "metadata"), "ownerReferences"), 1));
	cr_expect_eq(sync(o, live, &p), GK_OP_IN_SYNC, "%s", p ? p : "");
	free(p);
	/* a quota that really changed: resourceGroups replaced whole, nothing else */
	cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(live, "spec"), "resourceGroups"), 0);
	cJSON *r1 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(g0, "flavors"), 0),
							   "resources"), 1);
	cJSON *q = cJSON_GetObjectItem(r1, "nominalQuota");
	cJSON_SetValuestring(q, "3");
	cr_assert_eq(sync(o, live, &p), GK_OP_PATCH);
	pj = cJSON_Parse(p);
	expect_json(pj, "metadata: {resourceVersion: '7'}\nspec:\n  resourceGroups:\n"
		    "  - coveredResources: [cpu, gpu.intel.com/xe, memory]\n"
		    "    flavors: [{name: gpu.intel.com-kueue-flavor, resources: [{name: cpu, nominalQuota: '4'},"
		    " {name: gpu.intel.com/xe, nominalQuota: '2'}, {name: memory, nominalQuota: '16777216000'}]}]\n",
		    "the groups whole, with the resourceVersion");
	cJSON_Delete(pj);
	free(p);
	/* someone's extra limit in our groups: ours again; a cohort elsewhere in the spec: theirs */
	cJSON_SetValuestring(q, "2");
	cJSON_AddStringToObject(cJSON_GetObjectItem(live, "spec"), "cohortName", "theirs");
	cr_expect_eq(sync(o, live, &p), GK_OP_IN_SYNC);
	free(p);
	cJSON_AddStringToObject(r1, "borrowingLimit", "1");
	cr_expect_eq(sync(o, live, &p), GK_OP_PATCH, "resourceGroups are ours whole");
	free(p);
	cJSON_Delete(live);
}

Test(kueue_objects, moved_local_queue_is_recreated)
{
	render(SPEC);
	gk_op_obj *o = find("LocalQueue", "a");
	cJSON *live = cJSON_Duplicate(o->obj, 1);
	cJSON_AddStringToObject(cJSON_GetObjectItem(live, "metadata"), "resourceVersion", "3");
	char *p = NULL;
	cr_expect_eq(sync(o, live, &p), GK_OP_IN_SYNC);
	free(p);
	cJSON_SetValuestring(cJSON_GetObjectItem(cJSON_GetObjectItem(live, "spec"), "clusterQueue"), "team-b");
	cr_expect_eq(sync(o, live, &p), GK_OP_RECREATE, "spec.clusterQueue is immutable in Kueue");
	cr_expect_null(p);
	cJSON_Delete(live);
}

/* leftovers: only upstream's markers for this policy, never someone else's object */
Test(kueue, upstream_markers)
{
	cJSON *o = yaml("metadata: {name: gpu-device-plugin, labels: {app: intel-gpu-plugin, owner: gpu}}");
	cr_expect(gk_op_is_upstream(o, "gpu", "intel-gpu-plugin"));
	cr_expect(!gk_op_is_upstream(o, "other", "intel-gpu-plugin"), "another policy's");
	cr_expect(!gk_op_is_upstream(o, "gpu", "intel-xpumanager"), "another app");
	cJSON_AddItemToObject(cJSON_GetObjectItem(o, "metadata"), "ownerReferences",
			      yaml("[{apiVersion: apps/v1, kind: Deployment, name: x, uid: u, controller: true}]"));
	cr_expect(!gk_op_is_upstream(o, "gpu", "intel-gpu-plugin"), "controlled by someone else now");
	cJSON_Delete(o);
	o = yaml("metadata: {name: intel-xpumanager, labels: {app: intel-xpumanager}}");
	cr_expect(!gk_op_is_upstream(o, "gpu", "intel-xpumanager"), "no owner label: not upstream's for this policy");
	cJSON_Delete(o);
	gk_op_opts opts = { .dra_version = "v1", .nfd = true, .prometheus = true };
	gk_op_ref *v;
	size_t n;
	gk_err e;
	cr_assert_eq(gk_op_catalogue("gpu", &opts, &v, &n, &e), 0);
	int marked = 0;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].upstream_app)
			continue;
		marked++;
		char got[600];
		snprintf(got, sizeof(got), "%s %s %s", v[i].kind, v[i].name, v[i].upstream_app);
		cr_expect(strcmp(got, "DaemonSet gpu-device-plugin intel-gpu-plugin") == 0 ||
			  strcmp(got, "DaemonSet gpu-xpu-manager intel-xpumanager") == 0 ||
			  strcmp(got, "DaemonSet gpu-gpu-dra intel-gpu-resource-driver-kubelet-plugin") == 0 ||
			  strcmp(got, "NodeFeatureRule intel-gpu-devices nfd-gpu") == 0 ||
			  strcmp(got, "ServiceMonitor intel-xpumanager intel-xpumanager") == 0 ||
			  strcmp(got, "Service intel-xpumanager intel-xpumanager") == 0, "%s", got);
	}
	cr_expect_eq(marked, 6);
	free(v);
}
