/* kubesim's controllers through the request handler, with the test's own clock:
 * the DaemonSet controller (pods where they should run, status counters, taints vs
 * tolerations incl. the DaemonSet ones, node label/taint changes, rolling updates,
 * OnDelete, minReadySeconds, deletion), the kubelet (start after the delay, not-ready
 * annotation, pods waiting for their node, client-set phases left alone), the
 * scheduling predicates (pure) and --controllers parsing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/kubesim/ctrl.h"
#include "../../tools/kubesim/sched.h"
#include "kubesim_call.h"

#define READY_MS 1000
#define STOP_MS 200
static int64_t T; /* the controllers' clock */

static void start_with(unsigned enabled)
{
	S = calloc(1, sizeof(*S));
	cr_assert(S);
	cr_assert_eq(ks_server_init(S, 100000), 0);
	cr_assert_eq(ks_server_seed(S), 0);
	ks_ctrl_opts o = { enabled, READY_MS, STOP_MS };
	cr_assert_eq(ks_ctrl_init(S, &o), 0);
	T = 1000000;
}

static void setup(void)
{
	start_with(KS_CTRL_ALL);
}

static void teardown(void)
{
	ks_server_free(S);
	free(S);
}

TestSuite(ctrl, .init = setup, .fini = teardown);
TestSuite(sched);

/* passes until nothing is left to do at time T */
static void settle(void)
{
	for (int i = 0; i < 200; i++) {
		pthread_mutex_lock(&S->mu);
		int64_t r = ks_ctrl_pass_locked(S, T);
		int busy = r == 0 || S->ctrl->cursor != S->store.rv;
		pthread_mutex_unlock(&S->mu);
		if (!busy)
			return;
	}
	cr_assert_fail("controllers never settled");
}

/* what is due now happens, then ms pass */
static void later(int64_t ms)
{
	settle();
	T += ms;
	settle();
}

#define JSON "application/json"
#define MERGE "application/merge-patch+json"
#define DSURL "/apis/apps/v1/namespaces/default/daemonsets"

static void node(const char *name, const char *labels_json, const char *spec_json)
{
	char b[1024];
	snprintf(b, sizeof(b), "{\"metadata\":{\"name\":\"%s\",\"labels\":%s},\"spec\":%s}", name, labels_json,
		 spec_json ? spec_json : "{}");
	cr_assert_eq(do_("POST", "/api/v1/nodes", b, JSON), 201);
}

static void node_patch(const char *name, const char *patch)
{
	char u[256];
	snprintf(u, sizeof(u), "/api/v1/nodes/%s", name);
	cr_assert_eq(do_("PATCH", u, patch, MERGE), 200);
}

static void ds(const char *name, const char *spec_extra, const char *pod_spec_extra)
{
	char b[4096];
	snprintf(b, sizeof(b),
		 "{\"metadata\":{\"name\":\"%s\"},\"spec\":{%s\"selector\":{\"matchLabels\":{\"app\":\"%s\"}},"
		 "\"template\":{\"metadata\":{\"labels\":{\"app\":\"%s\"}},\"spec\":{%s\"containers\":[{\"name\":\"c\","
		 "\"image\":\"img:1\",\"resources\":{\"limits\":{\"gpu.intel.com/xe\":\"1\"}}}]}}}}",
		 name, spec_extra ? spec_extra : "", name, name, pod_spec_extra ? pod_spec_extra : "");
	cr_assert_eq(do_("POST", DSURL, b, JSON), 201);
}

static cJSON *get_ds(const char *name)
{
	char u[256];
	snprintf(u, sizeof(u), DSURL "/%s", name);
	int code;
	cJSON *o = call("GET", u, NULL, NULL, &code);
	cr_assert_eq(code, 200);
	return o;
}

/* "desired/current/ready/updated/available/misscheduled" */
static const char *counts(const char *name)
{
	static char buf[128];
	cJSON *o = get_ds(name);
	const cJSON *st = cJSON_GetObjectItem(o, "status");
	const char *f[] = { "desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled",
			    "numberAvailable", "numberMisscheduled" };
	buf[0] = 0;
	for (int i = 0; i < 6; i++) {
		const cJSON *v = cJSON_GetObjectItem(st, f[i]);
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%d", i ? "/" : "",
			 cJSON_IsNumber(v) ? (int)v->valuedouble : 0);
	}
	cJSON_Delete(o);
	return buf;
}

/* pods of the DaemonSet: "node:ready:deleting ..." sorted by node */
static cJSON *pods(void)
{
	int code;
	cJSON *o = call("GET", "/api/v1/namespaces/default/pods", NULL, NULL, &code);
	cr_assert_eq(code, 200);
	return o;
}

static int npods_on(const char *nodename, int live_only)
{
	cJSON *l = pods();
	int n = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(l, "items")) {
		const char *nn = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "nodeName"));
		int deleting = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "deletionTimestamp") != NULL;
		if (nn && strcmp(nn, nodename) == 0 && !(live_only && deleting))
			n++;
	}
	cJSON_Delete(l);
	return n;
}

Test(ctrl, daemonset_pods_and_status_follow_nodes)
{
	node("n1", "{\"gpu\":\"true\"}", NULL);
	node("n2", "{\"gpu\":\"true\"}", NULL);
	node("n3", "{\"gpu\":\"false\"}", NULL);
	ds("dp", NULL, "\"nodeSelector\":{\"gpu\":\"true\"},");
	settle();
	cr_assert_str_eq(counts("dp"), "2/2/0/2/0/0", "created, not ready yet: %s", counts("dp"));
	cr_assert_eq(npods_on("n1", 0), 1);
	cr_assert_eq(npods_on("n3", 0), 0);
	cJSON *l = pods();
	const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(l, "items"), 0);
	cr_assert_str_eq(str(p, "metadata.ownerReferences.0.kind"), "DaemonSet");
	cr_assert_str_eq(str(p, "metadata.ownerReferences.0.name"), "dp");
	cr_assert_str_eq(str(p, "metadata.ownerReferences.0.controller"), "true");
	cr_assert_eq(strncmp(str(p, "metadata.name"), "dp-", 3), 0);
	cr_assert_str_eq(str(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(
					cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "containers"), 0),
					"resources"), "limits"), "gpu.intel.com/xe"), ""),
			 "1");
	cr_assert(str(p, "metadata.labels.controller-revision-hash")[0]);
	cr_assert_str_eq(str(p, "metadata.labels.pod-template-generation"), "1");
	cr_assert_str_eq(str(p, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
				"nodeSelectorTerms.0.matchFields.0.values.0"),
			 str(p, "spec.nodeName"));
	int tol_unsched = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "tolerations"))
		tol_unsched |= strcmp(str(t, "key"), "node.kubernetes.io/unschedulable") == 0;
	cr_assert(tol_unsched, "DaemonSet tolerations added");
	cr_assert_str_eq(str(p, "status.phase"), "Pending");
	cJSON_Delete(l);
	/* the kubelet: Running and Ready after the delay */
	later(READY_MS - 10);
	cr_assert_str_eq(counts("dp"), "2/2/0/2/0/0");
	later(10);
	cr_assert_str_eq(counts("dp"), "2/2/2/2/2/0");
	cJSON *o = get_ds("dp");
	cr_assert_str_eq(str(o, "status.observedGeneration"), "1");
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "numberUnavailable"));
	cJSON_Delete(o);
	/* somebody else writes the status: the controller puts its own back */
	cr_assert_eq(do_("PATCH", DSURL "/dp/status", "{\"status\":{\"numberReady\":7}}", MERGE), 200);
	settle();
	cr_assert_str_eq(counts("dp"), "2/2/2/2/2/0");
	/* a node gets the label: a pod there; one loses it: its pod goes */
	node_patch("n3", "{\"metadata\":{\"labels\":{\"gpu\":\"true\"}}}");
	settle();
	cr_assert_str_eq(counts("dp"), "3/3/2/3/2/0");
	o = get_ds("dp");
	cr_assert_str_eq(str(o, "status.numberUnavailable"), "1");
	cJSON_Delete(o);
	node_patch("n1", "{\"metadata\":{\"labels\":{\"gpu\":null}}}");
	later(READY_MS);
	cr_assert_eq(npods_on("n1", 1), 0);
	cr_assert_str_eq(counts("dp"), "2/2/2/2/2/0");
	/* a node goes away */
	cr_assert_eq(do_("DELETE", "/api/v1/nodes/n2", NULL, NULL), 200);
	settle();
	cr_assert_str_eq(counts("dp"), "1/1/1/1/1/0");
}

Test(ctrl, taints_tolerations_and_cordon)
{
	node("n1", "{}", NULL);
	node("n2", "{}", "{\"taints\":[{\"key\":\"gpu\",\"value\":\"busy\",\"effect\":\"NoSchedule\"}]}");
	node("n3", "{}", "{\"unschedulable\":true,\"taints\":[{\"key\":\"node.kubernetes.io/unschedulable\",\"effect\":"
			 "\"NoSchedule\"},{\"key\":\"node.kubernetes.io/not-ready\",\"effect\":\"NoExecute\"}]}");
	ds("plain", NULL, NULL);
	ds("tolerant", NULL, "\"tolerations\":[{\"key\":\"gpu\",\"operator\":\"Equal\",\"value\":\"busy\",\"effect\":"
			     "\"NoSchedule\"}],");
	later(READY_MS);
	/* cordoned and not-ready nodes are tolerated by every DaemonSet pod */
	cr_assert_str_eq(counts("plain"), "2/2/2/2/2/0");
	cr_assert_str_eq(counts("tolerant"), "3/3/3/3/3/0");
	/* NoSchedule added under a running pod: it stays, misscheduled */
	node_patch("n1", "{\"spec\":{\"taints\":[{\"key\":\"maint\",\"effect\":\"NoSchedule\"}]}}");
	settle();
	cr_assert_str_eq(counts("plain"), "1/1/1/1/1/1");
	cr_assert_eq(npods_on("n1", 1), 2);
	/* NoExecute: the untolerating pods go */
	node_patch("n1", "{\"spec\":{\"taints\":[{\"key\":\"maint\",\"effect\":\"NoExecute\"}]}}");
	later(READY_MS);
	cr_assert_str_eq(counts("plain"), "1/1/1/1/1/0");
	cr_assert_str_eq(counts("tolerant"), "2/2/2/2/2/0");
	cr_assert_eq(npods_on("n1", 1), 0);
	/* taint removed: pods come back */
	node_patch("n1", "{\"spec\":{\"taints\":null}}");
	later(READY_MS);
	cr_assert_str_eq(counts("plain"), "2/2/2/2/2/0");
	cr_assert_str_eq(counts("tolerant"), "3/3/3/3/3/0");
}

Test(ctrl, node_affinity_and_node_name)
{
	node("a1", "{\"zone\":\"a\",\"rank\":\"5\"}", NULL);
	node("a2", "{\"zone\":\"a\",\"rank\":\"1\"}", NULL);
	node("b1", "{\"zone\":\"b\",\"rank\":\"9\"}", NULL);
	ds("aff", NULL,
	   "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":["
	   "{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\"]},{\"key\":\"rank\","
	   "\"operator\":\"Gt\",\"values\":[\"3\"]}]},{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
	   "\"values\":[\"b1\"]}]}]}}},");
	ds("pinned", NULL, "\"nodeName\":\"a2\",");
	settle();
	cr_assert_str_eq(counts("aff"), "2/2/0/2/0/0");
	cr_assert_eq(npods_on("a2", 0), 1, "only the pinned one");
	cr_assert_str_eq(counts("pinned"), "1/1/0/1/0/0");
}

Test(ctrl, rolling_update_one_at_a_time_and_on_delete)
{
	for (int i = 0; i < 4; i++) {
		char n[16];
		snprintf(n, sizeof(n), "n%d", i);
		node(n, "{}", NULL);
	}
	ds("roll", NULL, NULL);
	ds("ondel", "\"updateStrategy\":{\"type\":\"OnDelete\"},", NULL);
	later(READY_MS);
	cr_assert_str_eq(counts("roll"), "4/4/4/4/4/0");
	const char *patch = "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"img:2\"}]}}}}";
	cr_assert_eq(do_("PATCH", DSURL "/roll", patch, "application/strategic-merge-patch+json"), 200);
	cr_assert_eq(do_("PATCH", DSURL "/ondel", patch, "application/strategic-merge-patch+json"), 200);
	settle();
	/* maxUnavailable 1: one old pod deleted; it counts until the kubelet stopped it */
	cr_assert_str_eq(counts("roll"), "4/4/4/0/4/0", "%s", counts("roll"));
	cJSON *o = get_ds("roll");
	cr_assert_str_eq(str(o, "status.observedGeneration"), "2");
	cJSON_Delete(o);
	later(STOP_MS);
	/* replaced; until the new one is available no other */
	cr_assert_str_eq(counts("roll"), "4/4/3/1/3/0", "%s", counts("roll"));
	later(READY_MS);
	later(STOP_MS);
	cr_assert_str_eq(counts("roll"), "4/4/3/2/3/0", "%s", counts("roll"));
	for (int i = 0; i < 2; i++) {
		later(READY_MS);
		later(STOP_MS);
	}
	cr_assert_str_eq(counts("roll"), "4/4/3/4/3/0", "%s", counts("roll"));
	later(READY_MS);
	cr_assert_str_eq(counts("roll"), "4/4/4/4/4/0");
	/* OnDelete: nothing replaced until a pod is deleted by hand */
	cr_assert_str_eq(counts("ondel"), "4/4/4/0/4/0");
	/* percent: maxUnavailable 50% of 4 = 2 at a time */
	cr_assert_eq(do_("PATCH", DSURL "/roll",
			 "{\"spec\":{\"updateStrategy\":{\"rollingUpdate\":{\"maxUnavailable\":\"50%\"}},\"template\":{"
			 "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"img:3\"}]}}}}",
			 "application/strategic-merge-patch+json"),
		     200);
	later(STOP_MS);
	cr_assert_str_eq(counts("roll"), "4/4/2/2/2/0", "%s", counts("roll"));
	later(READY_MS);
	later(STOP_MS);
	cr_assert_str_eq(counts("roll"), "4/4/2/4/2/0", "%s", counts("roll"));
	later(READY_MS);
	cr_assert_str_eq(counts("roll"), "4/4/4/4/4/0", "%s", counts("roll"));
}

Test(ctrl, min_ready_seconds_delays_available)
{
	node("n1", "{}", NULL);
	ds("slow", "\"minReadySeconds\":2,", NULL);
	later(READY_MS);
	cr_assert_str_eq(counts("slow"), "1/1/1/1/0/0");
	/* availability is judged on the wall clock of the Ready transition */
	struct timespec ts = { 3, 0 };
	nanosleep(&ts, NULL);
	later(3000);
	cr_assert_str_eq(counts("slow"), "1/1/1/1/1/0");
}

Test(ctrl, daemonset_deleted_pods_collected)
{
	node("n1", "{}", NULL);
	node("n2", "{}", NULL);
	ds("gone", NULL, NULL);
	later(READY_MS);
	cr_assert_eq(npods_on("n1", 0) + npods_on("n2", 0), 2);
	cr_assert_eq(do_("DELETE", DSURL "/gone", NULL, NULL), 200);
	later(READY_MS);
	cr_assert_eq(npods_on("n1", 0) + npods_on("n2", 0), 0);
}

Test(ctrl, kubelet_starts_pods_on_existing_nodes)
{
	const char *pod = "{\"metadata\":{\"name\":\"%s\"%s},\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":"
			  "\"c\",\"image\":\"i\"}]}%s}";
	char b[1024];
	snprintf(b, sizeof(b), pod, "early", "", "late-node", "");
	cr_assert_eq(do_("POST", "/api/v1/namespaces/default/pods", b, JSON), 201);
	snprintf(b, sizeof(b), pod, "sick", ",\"annotations\":{\"kubesim.gpukmm.io/ready\":\"false\"}", "n1", "");
	cr_assert_eq(do_("POST", "/api/v1/namespaces/default/pods", b, JSON), 201);
	snprintf(b, sizeof(b), pod, "client", "", "n1", ",\"status\":{\"phase\":\"Succeeded\"}");
	cr_assert_eq(do_("POST", "/api/v1/namespaces/default/pods", b, JSON), 201);
	node("n1", "{}", NULL);
	later(READY_MS);
	int code;
	cJSON *o = call("GET", "/api/v1/namespaces/default/pods/sick", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "status.phase"), "Running");
	cr_assert_str_eq(str(o, "status.conditions.2.type"), "Ready");
	cr_assert_str_eq(str(o, "status.conditions.2.status"), "False");
	cr_assert_str_eq(str(o, "status.conditions.2.reason"), "ContainersNotReady");
	cr_assert_str_eq(str(o, "status.containerStatuses.0.name"), "c");
	cr_assert_str_eq(str(o, "status.containerStatuses.0.started"), "true");
	cJSON_Delete(o);
	o = call("GET", "/api/v1/namespaces/default/pods/client", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "status.phase"), "Succeeded", "a phase the client set stays");
	cJSON_Delete(o);
	o = call("GET", "/api/v1/namespaces/default/pods/early", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "status.phase"), "", "its node does not exist");
	cJSON_Delete(o);
	node("late-node", "{}", NULL);
	settle();
	later(READY_MS);
	o = call("GET", "/api/v1/namespaces/default/pods/early", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "status.phase"), "Running");
	int64_t since = 0;
	cr_assert(ks_pod_ready(o, &since));
	cr_assert(since > 0);
	cJSON_Delete(o);
}

Test(ctrl, disabled_daemonset_controller_leaves_status_alone)
{
	teardown();
	start_with(KS_CTRL_ALL & ~KS_CTRL_DAEMONSET);
	node("n1", "{}", NULL);
	ds("hand", NULL, NULL);
	cr_assert_eq(do_("PATCH", DSURL "/hand/status", "{\"status\":{\"numberReady\":1,\"desiredNumberScheduled\":2}}",
			 MERGE),
		     200);
	later(READY_MS);
	cr_assert_eq(npods_on("n1", 0), 0);
	cr_assert_str_eq(counts("hand"), "2/0/1/0/0/0");
}

Test(ctrl, controllers_flag)
{
	unsigned on = 0;
	gk_err e = { 0 };
	cr_assert_eq(ks_ctrl_parse("*", &on, &e), 0);
	cr_assert_eq(on, KS_CTRL_ALL);
	cr_assert_eq(ks_ctrl_parse("*,-daemonset", &on, &e), 0);
	cr_assert_eq(on, KS_CTRL_ALL & ~KS_CTRL_DAEMONSET);
	cr_assert_eq(ks_ctrl_parse("kubelet,disruption", &on, &e), 0);
	cr_assert_eq(on, KS_CTRL_KUBELET | KS_CTRL_DISRUPTION);
	cr_assert_neq(ks_ctrl_parse("scheduler", &on, &e), 0);
	cr_assert(strstr(e.msg, "unknown controller 'scheduler'"), "%s", e.msg);
}

/* ---- predicates ------------------------------------------------------------- */
Test(sched, label_selectors)
{
	cJSON *l = cJSON_Parse("{\"app\":\"x\",\"tier\":\"gpu\"}");
	cJSON *s1 = cJSON_Parse("{\"matchLabels\":{\"app\":\"x\"},\"matchExpressions\":[{\"key\":\"tier\",\"operator\":"
				"\"In\",\"values\":[\"gpu\",\"cpu\"]},{\"key\":\"zone\",\"operator\":\"DoesNotExist\"}]}");
	cJSON *s2 = cJSON_Parse("{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"NotIn\",\"values\":[\"gpu\"]}]}");
	cJSON *all = cJSON_Parse("{}");
	cr_assert(ks_labelsel_match(s1, l));
	cr_assert_not(ks_labelsel_match(s2, l));
	cr_assert(ks_labelsel_match(all, l), "{} matches everything");
	cr_assert_not(ks_labelsel_match(NULL, l), "no selector matches nothing");
	cJSON_Delete(l);
	cJSON_Delete(s1);
	cJSON_Delete(s2);
	cJSON_Delete(all);
}

Test(sched, tolerations_and_daemonset_verdict)
{
	cJSON *tols = cJSON_Parse("[{\"key\":\"a\",\"operator\":\"Equal\",\"value\":\"1\",\"effect\":\"NoSchedule\"},"
				  "{\"key\":\"b\",\"operator\":\"Exists\"},{\"operator\":\"Exists\",\"effect\":\"NoExecute\"}]");
	cJSON *t1 = cJSON_Parse("{\"key\":\"a\",\"value\":\"1\",\"effect\":\"NoSchedule\"}");
	cJSON *t2 = cJSON_Parse("{\"key\":\"a\",\"value\":\"2\",\"effect\":\"NoSchedule\"}");
	cJSON *t3 = cJSON_Parse("{\"key\":\"b\",\"value\":\"z\",\"effect\":\"NoExecute\"}");
	cJSON *t4 = cJSON_Parse("{\"key\":\"c\",\"effect\":\"NoExecute\"}");
	cr_assert(ks_tolerates(tols, t1));
	cr_assert_not(ks_tolerates(tols, t2));
	cr_assert(ks_tolerates(tols, t3));
	cr_assert(ks_tolerates(tols, t4), "empty key with Exists tolerates every key");
	cJSON_Delete(tols);
	cJSON_Delete(t1);
	cJSON_Delete(t2);
	cJSON_Delete(t3);
	cJSON_Delete(t4);
	int run, cont;
	cJSON *spec = cJSON_Parse("{\"hostNetwork\":true}");
	cJSON *n = cJSON_Parse("{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":"
			       "\"node.kubernetes.io/network-unavailable\",\"effect\":\"NoSchedule\"},{\"key\":"
			       "\"node.kubernetes.io/memory-pressure\",\"effect\":\"NoSchedule\"},{\"key\":\"x\",\"effect\":"
			       "\"PreferNoSchedule\"}]}}");
	ks_ds_should_run(spec, n, &run, &cont);
	cr_assert(run && cont, "hostNetwork tolerates network-unavailable; PreferNoSchedule ignored");
	cJSON_DeleteItemFromObject(spec, "hostNetwork");
	ks_ds_should_run(spec, n, &run, &cont);
	cr_assert(!run && cont, "network-unavailable only tolerated with hostNetwork");
	cJSON *tl = ks_ds_tolerations(spec);
	cr_assert_eq(cJSON_GetArraySize(tl), 6);
	cJSON_Delete(tl);
	cJSON_Delete(spec);
	cJSON_Delete(n);
	cJSON *pct = cJSON_CreateString("25%");
	cr_assert_eq(ks_intstr_scaled(pct, 10, 1), 3, "rounded up");
	cJSON_Delete(pct);
	cr_assert_eq(ks_intstr_scaled(NULL, 10, 1), 1);
	cr_assert_eq(ks_rfc3339_parse("2026-01-01T00:00:10Z") - ks_rfc3339_parse("2026-01-01T00:00:00Z"), 10);
}

/* ---- the disruption controller ----------------------------------------------- */
#define PODS "/api/v1/namespaces/default/pods"
#define PDBS "/apis/policy/v1/namespaces/default/poddisruptionbudgets"

/* a pod of app=web on n1, optionally owned (kind/name/uid) */
static void web_pod(const char *name, const char *owner_json, const char *ann)
{
	char b[1024];
	snprintf(b, sizeof(b),
		 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"app\":\"web\"}%s%s%s%s},\"spec\":{\"nodeName\":\"n1\","
		 "\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
		 name, owner_json ? ",\"ownerReferences\":[" : "", owner_json ? owner_json : "", owner_json ? "]" : "",
		 ann ? ann : "");
	cr_assert_eq(do_("POST", PODS, b, JSON), 201);
}

static void pdb(const char *name, const char *spec)
{
	char b[512];
	snprintf(b, sizeof(b), "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}},%s}}",
		 name, spec);
	cr_assert_eq(do_("POST", PDBS, b, JSON), 201);
}

/* "expected/desired/healthy/allowed reason" */
static const char *budget(const char *name)
{
	static char buf[256];
	char u[256];
	snprintf(u, sizeof(u), PDBS "/%s", name);
	int code;
	cJSON *o = call("GET", u, NULL, NULL, &code);
	cr_assert_eq(code, 200);
	static const char *f[] = { "status.expectedPods", "status.desiredHealthy", "status.currentHealthy",
				   "status.disruptionsAllowed", "status.conditions.0.reason" };
	buf[0] = 0;
	for (int i = 0; i < 5; i++) /* str() has one buffer: one call at a time */
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i == 4 ? " " : i ? "/" : "", str(o, f[i]));
	cJSON_Delete(o);
	return buf;
}

static char rs_uid[64];

static void replicaset(int replicas)
{
	char b[512];
	snprintf(b, sizeof(b),
		 "{\"metadata\":{\"name\":\"web\"},\"spec\":{\"replicas\":%d,\"selector\":{\"matchLabels\":{\"app\":"
		 "\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{"
		 "\"name\":\"c\",\"image\":\"i\"}]}}}}",
		 replicas);
	int code;
	cJSON *o = call("POST", "/apis/apps/v1/namespaces/default/replicasets", b, JSON, &code);
	cr_assert_eq(code, 201);
	snprintf(rs_uid, sizeof(rs_uid), "%s", str(o, "metadata.uid"));
	cJSON_Delete(o);
}

Test(ctrl, pdb_min_available_counts_ready_pods)
{
	node("n1", "{}", NULL);
	web_pod("w1", NULL, NULL);
	web_pod("w2", NULL, NULL);
	web_pod("w3", NULL, ",\"annotations\":{\"kubesim.gpukmm.io/ready\":\"false\"}");
	pdb("min2", "\"minAvailable\":2");
	settle();
	cr_assert_str_eq(budget("min2"), "3/2/0/0 InsufficientPods", "not started yet: %s", budget("min2"));
	later(READY_MS);
	cr_assert_str_eq(budget("min2"), "3/2/2/0 InsufficientPods", "w3 never Ready: %s", budget("min2"));
	int code;
	cJSON *o = call("GET", PDBS "/min2", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "status.observedGeneration"), "1");
	cr_assert_str_eq(str(o, "status.conditions.0.type"), "DisruptionAllowed");
	cr_assert_str_eq(str(o, "status.conditions.0.status"), "False");
	cJSON_Delete(o);
	web_pod("w4", NULL, NULL);
	later(READY_MS);
	cr_assert_str_eq(budget("min2"), "4/2/3/1 SufficientPods");
	/* an eviction the API server recorded: not healthy until the controller sees it go */
	char ts[40], b[256];
	ks_now_rfc3339(ts, sizeof(ts));
	snprintf(b, sizeof(b), "{\"status\":{\"disruptedPods\":{\"w1\":\"%s\"},\"disruptionsAllowed\":0}}", ts);
	cr_assert_eq(do_("PATCH", PDBS "/min2/status", b, MERGE), 200);
	settle();
	cr_assert_str_eq(budget("min2"), "4/2/2/0 InsufficientPods");
	cr_assert_eq(do_("DELETE", PODS "/w1?gracePeriodSeconds=0", NULL, NULL), 200);
	settle();
	cr_assert_str_eq(budget("min2"), "3/2/2/0 InsufficientPods");
	o = call("GET", PDBS "/min2", NULL, NULL, &code);
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "disruptedPods"), "gone pod dropped");
	cJSON_Delete(o);
}

Test(ctrl, pdb_max_unavailable_and_percentages_use_the_controller_scale)
{
	node("n1", "{}", NULL);
	replicaset(4);
	char owner[256];
	snprintf(owner, sizeof(owner),
		 "{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web\",\"uid\":\"%s\",\"controller\":true}",
		 rs_uid);
	for (int i = 0; i < 3; i++) {
		char n[16];
		snprintf(n, sizeof(n), "r%d", i);
		web_pod(n, owner, NULL);
	}
	pdb("maxu", "\"maxUnavailable\":1");
	pdb("half", "\"minAvailable\":\"50%\"");
	int code;
	later(READY_MS);
	/* 4 replicas wanted, 3 healthy */
	cr_assert_str_eq(budget("maxu"), "4/3/3/0 InsufficientPods", "%s", budget("maxu"));
	cr_assert_str_eq(budget("half"), "4/2/3/1 SufficientPods", "%s", budget("half"));
	cr_assert_eq(do_("PATCH", "/apis/apps/v1/namespaces/default/replicasets/web", "{\"spec\":{\"replicas\":3}}", MERGE),
		     200);
	settle();
	cr_assert_str_eq(budget("maxu"), "3/2/3/1 SufficientPods", "a scale change re-checks: %s", budget("maxu"));
	/* a pod whose controller has no scale (it exists: no garbage collection): the sync fails safe */
	cJSON *cm = call("POST", "/api/v1/namespaces/default/configmaps", "{\"metadata\":{\"name\":\"x\"}}", JSON, &code);
	snprintf(owner, sizeof(owner), "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"x\",\"uid\":\"%s\","
		 "\"controller\":true}", str(cm, "metadata.uid"));
	cJSON_Delete(cm);
	web_pod("d0", owner, NULL);
	settle();
	cr_assert_str_eq(budget("maxu"), "3/2/3/0 SyncFailed", "%s", budget("maxu"));
	cJSON *o = call("GET", PDBS "/maxu", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "status.conditions.0.message"), "found no controllers for pod \"d0\"");
	cJSON_Delete(o);
}

Test(ctrl, pdb_without_matching_pods_allows_nothing)
{
	pdb("empty", "\"maxUnavailable\":1");
	settle();
	cr_assert_str_eq(budget("empty"), "0/0/0/0 InsufficientPods");
}

/* ---- graceful pod deletion and the eviction subresource ------------------------- */
static cJSON *evict(const char *pod, int *code)
{
	char u[256], b[256];
	snprintf(u, sizeof(u), PODS "/%s/eviction", pod);
	snprintf(b, sizeof(b), "{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":\"%s\","
			       "\"namespace\":\"default\"}}", pod);
	return call("POST", u, b, JSON, code);
}

static int pod_exists(const char *name)
{
	char u[256];
	snprintf(u, sizeof(u), PODS "/%s", name);
	return do_("GET", u, NULL, NULL) == 200;
}

Test(ctrl, graceful_pod_deletion)
{
	node("n1", "{}", NULL);
	web_pod("g1", NULL, NULL);
	web_pod("g2", NULL, ",\"finalizers\":[\"example.com/hold\"]");
	cr_assert_eq(do_("POST", PODS, "{\"metadata\":{\"name\":\"unbound\"},\"spec\":{\"containers\":[{\"name\":\"c\","
				       "\"image\":\"i\"}]}}", JSON), 201);
	later(READY_MS);
	int code;
	cJSON *o = call("DELETE", PODS "/g1", NULL, NULL, &code);
	cr_assert_eq(code, 200, "graceful: 200 with the pod");
	cr_assert_str_eq(str(o, "metadata.deletionGracePeriodSeconds"), "30");
	int64_t del = ks_rfc3339_parse(str(o, "metadata.deletionTimestamp"));
	cr_assert(del >= (int64_t)time(NULL) + 29, "deletionTimestamp is now + 30 s");
	cJSON_Delete(o);
	cr_assert(pod_exists("g1"), "still there while the kubelet stops it");
	cr_assert_eq(do_("DELETE", PODS "/g1", NULL, NULL), 200, "a second delete: still pending");
	o = call("GET", PODS "/g1", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "metadata.deletionGracePeriodSeconds"), "30", "a longer or equal period changes nothing");
	cJSON_Delete(o);
	later(STOP_MS);
	cr_assert_not(pod_exists("g1"), "the kubelet's final delete");
	/* unbound: at once */
	cr_assert_eq(do_("DELETE", PODS "/unbound", NULL, NULL), 200);
	cr_assert_not(pod_exists("unbound"));
	/* a finalizer holds it after the kubelet stopped it, with grace 0 */
	cr_assert_eq(do_("DELETE", PODS "/g2?gracePeriodSeconds=5", NULL, NULL), 200);
	later(STOP_MS);
	o = call("GET", PODS "/g2", NULL, NULL, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "metadata.deletionGracePeriodSeconds"), "0");
	cJSON_Delete(o);
	cr_assert_eq(do_("PATCH", PODS "/g2", "{\"metadata\":{\"finalizers\":null}}", MERGE), 200);
	cr_assert_not(pod_exists("g2"), "the last finalizer gone: the pod goes");
	/* --grace-period=0 --force: at once */
	web_pod("g3", NULL, NULL);
	later(READY_MS);
	cr_assert_eq(do_("DELETE", PODS "/g3", "{\"gracePeriodSeconds\":0}", JSON), 200);
	cr_assert_not(pod_exists("g3"));
	/* shortening a pending graceful deletion */
	web_pod("g4", NULL, NULL);
	later(READY_MS);
	cr_assert_eq(do_("DELETE", PODS "/g4?gracePeriodSeconds=60", NULL, NULL), 200);
	cr_assert_eq(do_("DELETE", PODS "/g4?gracePeriodSeconds=10", NULL, NULL), 200);
	o = call("GET", PODS "/g4", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "metadata.deletionGracePeriodSeconds"), "10");
	cJSON_Delete(o);
}

Test(ctrl, eviction_honours_the_budget)
{
	node("n1", "{}", NULL);
	web_pod("e1", NULL, NULL);
	web_pod("e2", NULL, NULL);
	web_pod("e3", NULL, NULL);
	pdb("web", "\"minAvailable\":2");
	later(READY_MS);
	cr_assert_str_eq(budget("web"), "3/2/3/1 SufficientPods");
	int code;
	cJSON *o = evict("e1", &code);
	cr_assert_eq(code, 201);
	cr_assert_str_eq(str(o, "kind"), "Status");
	cr_assert_str_eq(str(o, "status"), "Success");
	cJSON_Delete(o);
	o = call("GET", PDBS "/web", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "status.disruptionsAllowed"), "0");
	cr_assert(str(o, "status.disruptedPods.e1")[0], "the eviction is recorded");
	cJSON_Delete(o);
	o = call("GET", PODS "/e1", NULL, NULL, &code);
	cr_assert(str(o, "metadata.deletionTimestamp")[0], "deleted gracefully");
	cJSON_Delete(o);
	settle(); /* the disruption controller sees e1 going */
	/* the budget is used up: 429 with the API server's message and cause */
	o = evict("e2", &code);
	cr_assert_eq(code, 429);
	cr_assert_str_eq(str(o, "reason"), "TooManyRequests");
	cr_assert_str_eq(str(o, "message"), "Cannot evict pod as it would violate the pod's disruption budget.");
	cr_assert_str_eq(str(o, "details.causes.0.reason"), "DisruptionBudget");
	cr_assert_str_eq(str(o, "details.causes.0.message"), "The disruption budget web needs 2 healthy pods and has 2 currently");
	cJSON_Delete(o);
	cr_assert(pod_exists("e2"));
	later(STOP_MS); /* e1 gone */
	cr_assert_str_eq(budget("web"), "2/2/2/0 InsufficientPods");
	web_pod("e4", NULL, NULL); /* the replacement */
	later(READY_MS);
	cr_assert_str_eq(budget("web"), "3/2/3/1 SufficientPods");
	o = evict("e2", &code);
	cr_assert_eq(code, 201);
	cJSON_Delete(o);
	/* a spec change the controller has not seen yet: 429, retry after 10 s */
	cr_assert_eq(do_("PATCH", PDBS "/web", "{\"spec\":{\"minAvailable\":1}}", MERGE), 200);
	char u[64] = PODS "/e3/eviction";
	ks_req r = { .method = "POST", .path = u, .content_type = JSON,
		     .body = "{\"kind\":\"Eviction\",\"metadata\":{\"name\":\"e3\"}}" };
	r.body_len = strlen(r.body);
	ks_resp out;
	ks_handle(S, &r, &out);
	cr_assert_eq(out.code, 429);
	cr_assert_eq(out.retry_after, 10);
	cr_assert(strstr(out.body, "The disruption budget web is still being processed by the server."), "%s", out.body);
	cr_assert(strstr(out.body, "\"retryAfterSeconds\":10"), "%s", out.body);
	ks_resp_free(&out);
}

Test(ctrl, eviction_edge_cases)
{
	node("n1", "{}", NULL);
	web_pod("p1", NULL, NULL);
	cr_assert_eq(do_("POST", PODS, "{\"metadata\":{\"name\":\"pending\",\"labels\":{\"app\":\"web\"}},\"spec\":{"
				       "\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}", JSON), 201);
	pdb("a", "\"minAvailable\":5");
	pdb("b", "\"maxUnavailable\":0");
	later(READY_MS);
	int code;
	cJSON *o = evict("p1", &code);
	cr_assert_eq(code, 500);
	cr_assert_str_eq(str(o, "message"), "This pod has more than one PodDisruptionBudget, which the eviction "
					    "subresource does not support.");
	cJSON_Delete(o);
	o = evict("pending", &code);
	cr_assert_eq(code, 201, "a Pending pod is evicted without a budget check");
	cJSON_Delete(o);
	cr_assert_not(pod_exists("pending"), "not bound: deleted at once");
	o = evict("nope", &code);
	cr_assert_eq(code, 404);
	cr_assert_str_eq(str(o, "message"), "pods \"nope\" not found");
	cJSON_Delete(o);
	cr_assert_eq(do_("POST", PODS "/p1/eviction", "{\"kind\":\"Eviction\",\"metadata\":{\"name\":\"other\"}}", JSON), 400);
	cr_assert_eq(do_("GET", PODS "/p1/eviction", NULL, NULL), 405);
	/* discovery lists pods/eviction as policy/v1 Eviction */
	o = call("GET", "/api/v1", NULL, NULL, &code);
	int found = 0;
	const cJSON *res;
	cJSON_ArrayForEach(res, cJSON_GetObjectItem(o, "resources")) found |= strcmp(str(res, "name"), "pods/eviction") == 0 &&
									   strcmp(str(res, "group"), "policy") == 0 &&
									   strcmp(str(res, "kind"), "Eviction") == 0;
	cr_assert(found);
	cJSON_Delete(o);
}
