/* fake-kmm node targeting, per-node plan and status counts. */
#include <criterion/criterion.h>
#include <string.h>

#include "../../tools/fake-kmm/fakekmm.h"

static cJSON *js(const char *s)
{
	cJSON *o = cJSON_Parse(s);
	cr_assert_not_null(o, "bad JSON: %s", s);
	return o;
}

static void mod(const char *s, cJSON **o, fk_module *m)
{
	gk_err e;
	*o = js(s);
	cr_assert_eq(fk_module_parse(*o, m, &e), 0, "%s", e.msg);
}

static void node(const char *s, cJSON **o, fk_node *n)
{
	gk_err e;
	*o = js(s);
	cr_assert_eq(fk_node_parse(*o, n, &e), 0, "%s", e.msg);
}

#define MODJ(extra_spec, container_extra)                                                                     \
	"{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"kmm\"},\"spec\":{\"selector\":{\"gpu\":\"yes\"}" extra_spec \
	",\"moduleLoader\":{\"container\":{\"modprobe\":{\"moduleName\":\"xe\"},\"kernelMappings\":["            \
	"{\"literal\":\"6.1.0-lit\",\"containerImage\":\"i:1\"},{\"regexp\":\"^6\\\\.8\\\\.\",\"containerImage\":\"i:2\"}]" \
	container_extra "}}}}"
#define NODEJ(labels, spec, kernel, annotations)                                                       \
	"{\"metadata\":{\"name\":\"n1\",\"labels\":{\"gpu\":\"yes\"" labels "},\"annotations\":{" annotations \
	"}},\"spec\":{" spec "},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"" kernel "\"}}}"

static enum fk_want_state want_of(const char *mj, const char *nj)
{
	cJSON *mo, *no;
	fk_module m;
	fk_node n;
	fk_want w;
	mod(mj, &mo, &m);
	node(nj, &no, &n);
	fk_want_compute(&m, &n, &w);
	cJSON_Delete(mo);
	cJSON_Delete(no);
	return w.state;
}

Test(target, selector_kernel_and_mapping)
{
	cr_expect_eq(want_of(MODJ("", ""), NODEJ("", "", "6.8.0-31-generic", "")), FK_WANT_LOAD);
	cr_expect_eq(want_of(MODJ("", ""), NODEJ("", "", "6.1.0-lit", "")), FK_WANT_LOAD);
	cr_expect_eq(want_of(MODJ("", ""), NODEJ("", "", "6.1.0-lit+", "")), FK_WANT_LOAD); /* '+' trimmed */
	cr_expect_eq(want_of(MODJ("", ""), NODEJ("", "", "6.1.0-lit-x", "")), FK_WANT_NO_MAPPING); /* literal exact */
	cr_expect_eq(want_of(MODJ("", ""), NODEJ("", "", "5.15.0", "")), FK_WANT_NO_MAPPING);
	cr_expect_eq(want_of(MODJ("", ""), NODEJ("", "", "", "")), FK_WANT_NO_MAPPING);
	cr_expect_eq(want_of(MODJ("", ""), "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"gpu\":\"no\"}}}"), FK_WANT_NOT_SELECTED);
	cr_expect_eq(want_of(MODJ("", ""), "{\"metadata\":{\"name\":\"n1\"}}"), FK_WANT_NOT_SELECTED);
	/* empty selector selects every node */
	cr_expect_eq(want_of("{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"kmm\"},\"spec\":{\"selector\":{},\"moduleLoader\":{\"container\":"
			     "{\"kernelMappings\":[{\"regexp\":\"generic\"}]}}}}",
			     "{\"metadata\":{\"name\":\"n\"},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.8.0-31-generic\"}}}"),
		     FK_WANT_LOAD);
	cr_expect_eq(want_of("{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"kmm\"},\"spec\":{\"selector\":{}}}",
			     NODEJ("", "", "6.8.0", "")),
		     FK_WANT_NO_LOADER);
	cr_expect_eq(want_of("{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"kmm\",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},"
			     "\"spec\":{\"selector\":{}}}",
			     NODEJ("", "", "6.8.0", "")),
		     FK_WANT_DELETING);
	/* first matching mapping wins, invalid regexps never match */
	cJSON *mo;
	fk_module m;
	mod("{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"},\"spec\":{\"selector\":{},\"moduleLoader\":{\"container\":{\"kernelMappings\":["
	    "{\"regexp\":\"(\"},{\"regexp\":\"6\"},{\"literal\":\"6.1\"}]}}}}",
	    &mo, &m);
	cr_expect_eq(fk_mapping_find(&m, "6.1"), 1);
	cr_expect_eq(fk_mapping_find(&m, "5.1"), -1);
	cJSON_Delete(mo);
}

Test(target, taints_tolerations_and_cordon)
{
	const char *k = "6.8.0-1";
	cr_expect_eq(want_of(MODJ("", ""), NODEJ("", "\"unschedulable\":true", "6.8.0-1", "")), FK_WANT_UNSCHEDULABLE);
	cr_expect_eq(want_of(MODJ("", ""),
			     NODEJ("", "\"taints\":[{\"key\":\"node.kubernetes.io/unschedulable\",\"effect\":\"NoSchedule\"}]", "6.8.0-1", "")),
		     FK_WANT_UNSCHEDULABLE);
	/* PreferNoSchedule does not count */
	cr_expect_eq(want_of(MODJ("", ""), NODEJ("", "\"taints\":[{\"key\":\"x\",\"effect\":\"PreferNoSchedule\"}]", "6.8.0-1", "")),
		     FK_WANT_LOAD);
	cr_expect_eq(want_of(MODJ("", ""), NODEJ("", "\"taints\":[{\"key\":\"x\",\"value\":\"1\",\"effect\":\"NoExecute\"}]", "6.8.0-1", "")),
		     FK_WANT_UNSCHEDULABLE);
	/* internal tolerations: pressure NoSchedule tolerated, not NoExecute */
	cr_expect_eq(want_of(MODJ("", ""),
			     NODEJ("", "\"taints\":[{\"key\":\"node.kubernetes.io/memory-pressure\",\"effect\":\"NoSchedule\"}]", "6.8.0-1", "")),
		     FK_WANT_LOAD);
	cr_expect_eq(want_of(MODJ("", ""),
			     NODEJ("", "\"taints\":[{\"key\":\"node.kubernetes.io/memory-pressure\",\"effect\":\"NoExecute\"}]", "6.8.0-1", "")),
		     FK_WANT_UNSCHEDULABLE);
	/* cordon tolerated by an Exists toleration on the key */
	cr_expect_eq(want_of(MODJ(",\"tolerations\":[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]", ""),
			     NODEJ("", "\"unschedulable\":true", "6.8.0-1", "")),
		     FK_WANT_LOAD);
	/* wildcard toleration (empty key, Exists) tolerates everything */
	cr_expect_eq(want_of(MODJ(",\"tolerations\":[{\"operator\":\"Exists\"}]", ""),
			     NODEJ("", "\"unschedulable\":true,\"taints\":[{\"key\":\"a\",\"effect\":\"NoExecute\"}]", "6.8.0-1", "")),
		     FK_WANT_LOAD);
	/* Equal needs the value; the effect must match when set */
	cr_expect_eq(want_of(MODJ(",\"tolerations\":[{\"key\":\"a\",\"operator\":\"Equal\",\"value\":\"1\"}]", ""),
			     NODEJ("", "\"taints\":[{\"key\":\"a\",\"value\":\"2\",\"effect\":\"NoSchedule\"}]", "6.8.0-1", "")),
		     FK_WANT_UNSCHEDULABLE);
	cr_expect_eq(want_of(MODJ(",\"tolerations\":[{\"key\":\"a\",\"value\":\"1\"}]", ""),
			     NODEJ("", "\"taints\":[{\"key\":\"a\",\"value\":\"1\",\"effect\":\"NoSchedule\"}]", "6.8.0-1", "")),
		     FK_WANT_LOAD);
	cr_expect_eq(want_of(MODJ(",\"tolerations\":[{\"key\":\"a\",\"operator\":\"Exists\",\"effect\":\"NoExecute\"}]", ""),
			     NODEJ("", "\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"}]", "6.8.0-1", "")),
		     FK_WANT_UNSCHEDULABLE);
	(void)k;
	fk_toleration t = { "k", "Lt", "1", "" };
	fk_taint tt = { "k", "1", "NoSchedule" };
	cr_expect_eq(fk_toleration_tolerates(&t, &tt), 0); /* unknown operator tolerates nothing */
}

Test(target, version_gating)
{
	const char *mj = MODJ("", ",\"version\":\"v2\"");
	cr_expect_eq(want_of(mj, NODEJ("", "", "6.8.0-1", "")), FK_WANT_VERSION_MISSING);
	cr_expect_eq(want_of(mj, NODEJ(",\"kmm.node.kubernetes.io/version-module.kmm.gpu\":\"v2\"", "", "6.8.0-1", "")), FK_WANT_LOAD);
	cr_expect_eq(want_of(mj, NODEJ(",\"kmm.node.kubernetes.io/version-module.kmm.gpu\":\"v1\"", "", "6.8.0-1", "")), FK_WANT_VERSION_OTHER);
	/* another module's version label does not count */
	cr_expect_eq(want_of(mj, NODEJ(",\"kmm.node.kubernetes.io/version-module.kmm.other\":\"v2\"", "", "6.8.0-1", "")),
		     FK_WANT_VERSION_MISSING);
}

/* fk_plan_labels_differ of the last plan_of (computed while the JSON lives) */
static int last_differ;

static fk_pair_plan plan_of(const char *mj, const char *nj)
{
	cJSON *mo, *no;
	fk_module m;
	fk_node n;
	fk_pair_plan p;
	mod(mj, &mo, &m);
	node(nj, &no, &n);
	fk_plan_pair(&m, &n, &p);
	last_differ = fk_plan_labels_differ(&p);
	/* borrowed strings die with the JSON: keep only what the tests read */
	p.version_ready = p.version_ready ? "set" : NULL;
	p.has_ready = p.has_ready ? "set" : NULL;
	p.has_version_ready = p.has_version_ready ? "set" : NULL;
	cJSON_Delete(mo);
	cJSON_Delete(no);
	return p;
}

#define LOADED(v) "\"fake-kmm.gpukmm.io/loaded.kmm.gpu\":\"" v "\""
#define READY ",\"kmm.node.kubernetes.io/kmm.gpu.ready\":\"\""

Test(plan, load_then_ready)
{
	fk_pair_plan p = plan_of(MODJ("", ""), NODEJ("", "", "6.8.0-1", ""));
	cr_expect_eq(p.op, FK_OP_LOAD);
	cr_expect_eq(p.ready, 0);
	cr_expect_eq(p.desired, 1);
	cr_expect_eq(p.available, 0);
	cr_expect_eq(p.matching, 1);
	cr_expect_eq(last_differ, 0);
	/* loaded for this kernel: no op, ready label wanted, available */
	p = plan_of(MODJ("", ""), NODEJ("", "", "6.8.0-1", LOADED("6.8.0-1")));
	cr_expect_eq(p.op, FK_OP_NONE);
	cr_expect_eq(p.ready, 1);
	cr_expect_eq(p.available, 1);
	cr_expect_eq(last_differ, 1);
	p = plan_of(MODJ("", ""), NODEJ(READY, "", "6.8.0-1", LOADED("6.8.0-1")));
	cr_expect_eq(last_differ, 0);
	/* stale ready label without a load: removed */
	p = plan_of(MODJ("", ""), NODEJ(READY, "", "6.8.0-1", ""));
	cr_expect_eq(p.ready, 0);
	cr_expect_eq(last_differ, 1);
}

Test(plan, kernel_upgrade)
{
	/* new kernel with a mapping: reload, ready label keeps its state meanwhile */
	fk_pair_plan p = plan_of(MODJ("", ""), NODEJ(READY, "", "6.8.0-2", LOADED("6.8.0-1")));
	cr_expect_eq(p.op, FK_OP_LOAD);
	cr_expect_eq(p.ready, 1);
	cr_expect_eq(p.desired, 1);
	cr_expect_eq(p.available, 0);
	/* new kernel without a mapping: unload */
	p = plan_of(MODJ("", ""), NODEJ(READY, "", "5.10.0", LOADED("6.8.0-1")));
	cr_expect_eq(p.op, FK_OP_UNLOAD);
	cr_expect_eq(p.desired, 0);
	cr_expect_eq(p.matching, 1);
}

Test(plan, cordon_unloads_and_the_ready_label_follows_the_unload)
{
	/* KMM drops the cordoned node and unloads; its labels go when the unload has run */
	fk_pair_plan p = plan_of(MODJ("", ""), NODEJ(READY, "\"unschedulable\":true", "6.8.0-1", LOADED("6.8.0-1")));
	cr_expect_eq(p.ready, 1);
	cr_expect_eq(last_differ, 0);
	cr_expect_eq(p.op, FK_OP_UNLOAD);
	cr_expect_eq(p.blocked, 0);
	cr_expect_eq(p.matching, 0);
	cr_expect_eq(p.desired, 0);
	/* unload refused: blocked, the label stays, KMM's unloader fails */
	p = plan_of(MODJ("", ""),
		    NODEJ(READY, "\"unschedulable\":true", "6.8.0-1", LOADED("6.8.0-1") ",\"fake-kmm.gpukmm.io/fault\":\"unload-refused\""));
	cr_expect_eq(p.ready, 1);
	cr_expect_eq(p.op, FK_OP_UNLOAD);
	cr_expect_eq(p.blocked, 1);
	cr_expect_str_eq(p.unload_failed, "modprobe: FATAL: Module xe is in use (fault unload-refused)");
	cr_expect_eq(last_differ, 1, "the unload-failed annotation is wanted");
	/* the Module tolerates the cordon: nothing happens at all */
	p = plan_of(MODJ(",\"tolerations\":[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]", ""),
		    NODEJ(READY, "\"unschedulable\":true", "6.8.0-1", LOADED("6.8.0-1")));
	cr_expect_eq(p.op, FK_OP_NONE);
	cr_expect_eq(p.ready, 1);
	cr_expect_eq(p.matching, 1);
	cr_expect_eq(p.available, 1);
}

/* the drain deadlock: a pod on the node holding the GPU makes the unload fail */
static fk_pair_plan plan_with_pods(const char *mj, const char *nj, const char *pods_json)
{
	cJSON *mo, *no, *po = js(pods_json);
	fk_module m;
	fk_node n;
	fk_pair_plan p;
	const cJSON *pods[8];
	size_t np = 0;
	const cJSON *it;
	mod(mj, &mo, &m);
	node(nj, &no, &n);
	cJSON_ArrayForEach(it, po) pods[np++] = it;
	n.pods = pods;
	n.npods = np;
	fk_plan_pair(&m, &n, &p);
	last_differ = fk_plan_labels_differ(&p);
	p.version_ready = p.version_ready ? "set" : NULL;
	p.has_ready = p.has_ready ? "set" : NULL;
	p.has_version_ready = p.has_version_ready ? "set" : NULL;
	p.has_unload_failed = p.has_unload_failed ? "set" : NULL;
	cJSON_Delete(mo);
	cJSON_Delete(no);
	cJSON_Delete(po);
	return p;
}

#define CORDONED NODEJ(READY, "\"unschedulable\":true", "6.8.0-1", LOADED("6.8.0-1"))
#define POD(name, spec) "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"w\"},\"spec\":{\"nodeName\":\"n1\"," spec "}}"

Test(plan, a_pod_holding_the_gpu_blocks_the_unload)
{
	/* a GPU workload */
	fk_pair_plan p = plan_with_pods(MODJ("", ""), CORDONED,
					"[" POD("web", "\"containers\":[{\"name\":\"c\"}]") ","
					POD("train", "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"gpu.intel.com/xe\":\"1\"}}}]") "]");
	cr_expect_eq(p.op, FK_OP_UNLOAD);
	cr_expect_eq(p.blocked, 1);
	cr_expect_str_eq(p.holder, "pod w/train");
	cr_expect_str_eq(p.unload_failed, "modprobe: FATAL: Module xe is in use (pod w/train)");
	cr_expect_eq(p.ready, 1, "the ready label stays");
	/* the device plugin: a DaemonSet pod gated on the ready label (drain leaves it) */
	p = plan_with_pods(MODJ("", ""), CORDONED,
			   "[" POD("dp", "\"nodeSelector\":{\"kmm.node.kubernetes.io/kmm.gpu.ready\":\"\"},\"containers\":[{\"name\":\"p\"}]") "]");
	cr_expect_eq(p.blocked, 1);
	cr_expect_str_eq(p.holder, "pod w/dp");
	/* a pod holding a ResourceClaim, in an init container's request */
	p = plan_with_pods(MODJ("", ""), CORDONED, "[" POD("claim", "\"resourceClaims\":[{\"name\":\"g\",\"resourceClaimName\":\"c\"}]") "]");
	cr_expect_eq(p.blocked, 1);
	p = plan_with_pods(MODJ("", ""), CORDONED,
			   "[" POD("init", "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"requests\":{\"gpu.intel.com/i915\":\"1\"}}}]") "]");
	cr_expect_eq(p.blocked, 1);
	/* pods that do not hold it */
	p = plan_with_pods(MODJ("", ""), CORDONED,
			   "[" POD("cpu", "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]") ","
			   POD("otherdp", "\"nodeSelector\":{\"kmm.node.kubernetes.io/kmm.other.ready\":\"\"}") "]");
	cr_expect_eq(p.op, FK_OP_UNLOAD);
	cr_expect_eq(p.blocked, 0);
	cr_expect_str_eq(p.unload_failed, "");
	/* the ordered upgrade's unload is blocked the same way */
	p = plan_with_pods(MODJ("", ",\"version\":\"v2\""),
			   NODEJ(READY ",\"kmm.node.kubernetes.io/version-module.kmm.gpu\":\"v2\"", "", "6.8.0-1",
				 LOADED("6.8.0-1 v1")),
			   "[" POD("dp", "\"nodeSelector\":{\"kmm.node.kubernetes.io/kmm.gpu.ready\":\"\"}") "]");
	cr_expect_eq(p.op, FK_OP_UNLOAD);
	cr_expect_eq(p.blocked, 1);
	cr_expect_eq(p.ready, 1);
	/* the node rebooted into a kernel no mapping matches: the module recorded for the
	 * old kernel is not in memory, the gated device plugin cannot hold it */
	p = plan_with_pods(MODJ("", ""), NODEJ(READY, "", "6.1.0-99", LOADED("6.8.0-1")),
			   "[" POD("dp", "\"nodeSelector\":{\"kmm.node.kubernetes.io/kmm.gpu.ready\":\"\"}") "]");
	cr_expect_eq(p.op, FK_OP_UNLOAD);
	cr_expect_eq(p.blocked, 0);
	cr_expect_str_eq(p.unload_failed, "");
	/* loads are not blocked by pods */
	p = plan_with_pods(MODJ("", ""), NODEJ("", "", "6.8.0-1", ""),
			   "[" POD("train", "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"gpu.intel.com/xe\":\"1\"}}}]") "]");
	cr_expect_eq(p.op, FK_OP_LOAD);
	cr_expect_eq(p.blocked, 0);
	/* a stale unload-failed annotation goes once nothing is blocked */
	p = plan_with_pods(MODJ("", ""), NODEJ(READY, "", "6.8.0-1", LOADED("6.8.0-1") ",\"fake-kmm.gpukmm.io/unload-failed.kmm.gpu\":\"x\""), "[]");
	cr_expect_eq(p.op, FK_OP_NONE);
	cr_expect_eq(last_differ, 1);
}

Test(plan, faults)
{
	fk_pair_plan p = plan_of(MODJ("", ""), NODEJ("", "", "6.8.0-1", "\"fake-kmm.gpukmm.io/fault\":\"image-pull-failure\""));
	cr_expect_eq(p.op, FK_OP_LOAD);
	cr_expect_eq(p.blocked, 1);
	cr_expect_eq(p.desired, 1);
	cr_expect_eq(p.available, 0);
	p = plan_of(MODJ("", ""), NODEJ("", "", "6.8.0-1", "\"fake-kmm.gpukmm.io/fault\":\"x, load-failure\""));
	cr_expect_eq(p.blocked, 1);
	p = plan_of(MODJ("", ""), NODEJ("", "", "6.8.0-1", "\"fake-kmm.gpukmm.io/fault\":\"unload-refused\""));
	cr_expect_eq(p.blocked, 0);
	cr_expect_eq(fk_faults_parse("image-pull-failure,unload-refused"), FK_FAULT_PULL | FK_FAULT_UNLOAD);
	cr_expect_eq(fk_faults_parse("load-failures"), 0);
	cr_expect_eq(fk_faults_parse(NULL), 0);
}

Test(plan, versions)
{
	const char *mj = MODJ("", ",\"version\":\"v2\"");
	fk_pair_plan p = plan_of(mj, NODEJ(",\"kmm.node.kubernetes.io/version-module.kmm.gpu\":\"v2\"", "", "6.8.0-1", ""));
	cr_expect_eq(p.op, FK_OP_LOAD);
	p = plan_of(mj, NODEJ(",\"kmm.node.kubernetes.io/version-module.kmm.gpu\":\"v2\"", "", "6.8.0-1", LOADED("6.8.0-1 v2")));
	cr_expect_eq(p.op, FK_OP_NONE);
	cr_expect_eq(p.available, 1);
	cr_expect_str_eq(p.version_ready, "set");
	/* node moved from v1 to v2: unload v1 first */
	p = plan_of(mj, NODEJ(",\"kmm.node.kubernetes.io/version-module.kmm.gpu\":\"v2\"", "", "6.8.0-1", LOADED("6.8.0-1 v1")));
	cr_expect_eq(p.op, FK_OP_UNLOAD);
	/* node still labelled v1 while the Module says v2: keeps v1 */
	p = plan_of(mj, NODEJ(",\"kmm.node.kubernetes.io/version-module.kmm.gpu\":\"v1\"", "", "6.8.0-1", LOADED("6.8.0-1 v1")));
	cr_expect_eq(p.op, FK_OP_NONE);
	cr_expect_eq(p.desired, 1);
	cr_expect_eq(p.available, 1);
	cr_expect_eq(p.ready, 1);
	/* label removed: unload */
	p = plan_of(mj, NODEJ("", "", "6.8.0-1", LOADED("6.8.0-1 v1")));
	cr_expect_eq(p.op, FK_OP_UNLOAD);
	/* never labelled: nothing */
	p = plan_of(mj, NODEJ("", "", "6.8.0-1", ""));
	cr_expect_eq(p.op, FK_OP_NONE);
	cr_expect_eq(p.desired, 0);
	cr_expect_eq(p.matching, 1);
	fk_loaded l;
	fk_loaded_parse("6.8.0-1 v1", &l);
	cr_expect_str_eq(l.kernel, "6.8.0-1");
	cr_expect_str_eq(l.version, "v1");
	char buf[64];
	fk_loaded_format(buf, sizeof buf, "k", "");
	cr_expect_str_eq(buf, "k");
	fk_loaded_format(buf, sizeof buf, "k", "v");
	cr_expect_str_eq(buf, "k v");
}

Test(plan, module_counts_and_status)
{
	cJSON *mo;
	fk_module m;
	mod("{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"kmm\"},\"spec\":{\"selector\":{\"gpu\":\"yes\"},\"moduleLoader\":{\"container\":"
	    "{\"kernelMappings\":[{\"regexp\":\"^6\"}]}}},\"status\":{\"moduleLoader\":{\"nodesMatchingSelectorNumber\":4,\"desiredNumber\":3}}}",
	    &mo, &m);
	const char *nj[] = {
		"{\"metadata\":{\"name\":\"a\",\"labels\":{\"gpu\":\"yes\"},\"annotations\":{" LOADED("6.1") "}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.1\"}}}",
		"{\"metadata\":{\"name\":\"b\",\"labels\":{\"gpu\":\"yes\"}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.2\"}}}",
		"{\"metadata\":{\"name\":\"c\",\"labels\":{\"gpu\":\"yes\"}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"5.2\"}}}",
		"{\"metadata\":{\"name\":\"d\",\"labels\":{\"gpu\":\"yes\"}},\"spec\":{\"unschedulable\":true},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.2\"}}}",
		"{\"metadata\":{\"name\":\"e\"},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.2\"}}}",
	};
	cJSON *no[5];
	fk_node n[5];
	for (int i = 0; i < 5; i++)
		node(nj[i], &no[i], &n[i]);
	fk_counts c;
	cr_expect_eq(fk_plan_module(&m, n, 5, &c), 1);
	cr_expect_eq(c.matching, 3);
	cr_expect_eq(c.desired, 2);
	cr_expect_eq(c.available, 1);
	cr_expect_eq(fk_status_needs_write(&m, &c), 1);
	cJSON *b = fk_status_body(&m, &c);
	char *s = cJSON_PrintUnformatted(b);
	cr_expect_str_eq(s, "{\"status\":{\"moduleLoader\":{\"nodesMatchingSelectorNumber\":3,\"desiredNumber\":2,\"availableNumber\":1}}}");
	cJSON_free(s);
	cJSON_Delete(b);
	m.st_matching = 3, m.st_desired = 2, m.st_available = 1;
	cr_expect_eq(fk_status_needs_write(&m, &c), 0);
	/* zero counts are omitted (merge-patch null) */
	fk_counts z = { 0, 0, 0 };
	b = fk_status_body(&m, &z);
	s = cJSON_PrintUnformatted(b);
	cr_expect_str_eq(s, "{\"status\":{\"moduleLoader\":{\"nodesMatchingSelectorNumber\":null,\"desiredNumber\":null,\"availableNumber\":null}}}");
	cJSON_free(s);
	cJSON_Delete(b);
	/* no moduleLoader: status cleared once */
	m.has_loader = 0;
	cr_expect_eq(fk_status_needs_write(&m, &z), 1);
	m.st_present = 0;
	cr_expect_eq(fk_status_needs_write(&m, &z), 0);
	for (int i = 0; i < 5; i++)
		cJSON_Delete(no[i]);
	cJSON_Delete(mo);
}

Test(model, parse_errors_and_limits)
{
	gk_err e;
	fk_module m;
	fk_node n;
	cJSON *o = js("{\"metadata\":{}}");
	cr_expect_neq(fk_module_parse(o, &m, &e), 0);
	cr_expect_neq(fk_node_parse(o, &n, &e), 0);
	cJSON_Delete(o);
	cJSON *big = js("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"taints\":[]}}");
	cJSON *arr = cJSON_GetObjectItem(cJSON_GetObjectItem(big, "spec"), "taints");
	for (int i = 0; i <= FK_MAX_ITEMS; i++)
		cJSON_AddItemToArray(arr, js("{\"key\":\"k\",\"effect\":\"NoSchedule\"}"));
	cr_expect_eq(fk_node_parse(big, &n, &e), GK_RESOURCE_EXHAUSTED);
	cJSON_Delete(big);
	o = js("{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\",\"finalizers\":[\"a\",\"kmm.node.kubernetes.io/module-finalizer\"],"
	       "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},\"spec\":{\"selector\":{\"a\":\"b\",\"bad\":1}}}");
	cr_expect_eq(fk_module_parse(o, &m, &e), 0);
	cr_expect_eq(m.has_finalizer, 1);
	cr_expect_eq(m.deleting, 1);
	cr_expect_eq(m.nselector, 1);
	cr_expect_eq(m.has_loader, 0);
	char k[FK_KEY_MAX];
	fk_key_ready(k, &m);
	cr_expect_str_eq(k, "kmm.node.kubernetes.io/y.x.ready");
	fk_key_version_ready(k, &m);
	cr_expect_str_eq(k, "kmm.node.kubernetes.io/y.x.version.ready");
	fk_key_version_module(k, &m);
	cr_expect_str_eq(k, "kmm.node.kubernetes.io/version-module.y.x");
	cJSON_Delete(o);
}

/* ---- signing and Secure Boot --------------------------------------------------------- */
#define SIGNJ "\"sign\":{\"keySecret\":{\"name\":\"k\"},\"certSecret\":{\"name\":\"c\"},\"unsignedImage\":\"u:1\"," \
	      "\"filesToSign\":[\"/opt/x.ko\"]}"
/* Module kmm/gpu with module annotations `ann`, container members `cont`, mapping `map0` members */
#define SMODJ(ann, cont, map0)                                                                                 \
	"{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"kmm\",\"annotations\":{" ann "}},\"spec\":{\"selector\":{}," \
	"\"moduleLoader\":{\"container\":{\"modprobe\":{\"moduleName\":\"xe\"}" cont ",\"kernelMappings\":["        \
	"{\"regexp\":\"^6\\\\.8\\\\.\",\"containerImage\":\"r.io/${MOD_NAMESPACE}/xe:${KERNEL_FULL_VERSION}\"" map0 "}]}}}}"
#define SECURE "\"gpukmm.io/node-report\":\"{\\\"secure_boot\\\":\\\"TRI_YES\\\"}\""

Test(sign, signed_image_waits_for_the_sign_job)
{
	/* signed at the container level: the image is checked, absent, the node waits (not desired) */
	fk_pair_plan p = plan_of(SMODJ("", "," SIGNJ, ""), NODEJ("", "", "6.8.0-1+", ""));
	cr_expect_eq(p.signed_image, 1);
	cr_expect_eq(p.sign_needed, 1);
	cr_expect_str_eq(p.image, "r.io/kmm/xe:6.8.0-1");
	cr_expect_eq(p.op, FK_OP_NONE);
	cr_expect_eq(p.desired, 0);
	cr_expect_eq(p.matching, 1);
	/* NeedsSigning: still waiting */
	p = plan_of(SMODJ("\"fake-kmm.gpukmm.io/image.6.8.0-1\":\"NeedsSigning r.io/kmm/xe:6.8.0-1\"", "," SIGNJ, ""),
		    NODEJ("", "", "6.8.0-1", ""));
	cr_expect_eq(p.sign_needed, 1);
	cr_expect_eq(p.op, FK_OP_NONE);
	/* Exists for another image (the policy changed): signed again */
	p = plan_of(SMODJ("\"fake-kmm.gpukmm.io/image.6.8.0-1\":\"Exists r.io/kmm/xe:old\"", "," SIGNJ, ""),
		    NODEJ("", "", "6.8.0-1", ""));
	cr_expect_eq(p.sign_needed, 1);
	/* Exists: the node loads; mapping-level sign works the same */
	p = plan_of(SMODJ("\"fake-kmm.gpukmm.io/image.6.8.0-1\":\"Exists r.io/kmm/xe:6.8.0-1\"", "", "," SIGNJ),
		    NODEJ("", "", "6.8.0-1", ""));
	cr_expect_eq(p.signed_image, 1);
	cr_expect_eq(p.sign_needed, 0);
	cr_expect_eq(p.op, FK_OP_LOAD);
	cr_expect_eq(p.blocked, 0);
	cr_expect_eq(p.desired, 1);
	/* an unsigned mapping never waits */
	p = plan_of(SMODJ("", "", ""), NODEJ("", "", "6.8.0-1", ""));
	cr_expect_eq(p.signed_image, 0);
	cr_expect_eq(p.sign_needed, 0);
	cr_expect_eq(p.op, FK_OP_LOAD);
}

Test(sign, secure_boot_node_refuses_an_unsigned_module)
{
	fk_pair_plan p = plan_of(SMODJ("", "", ""), NODEJ("", "", "6.8.0-1", SECURE));
	cr_expect_eq(p.unsigned_refused, 1);
	cr_expect_eq(p.op, FK_OP_LOAD);
	cr_expect_eq(p.blocked, 1, "the load fails forever");
	cr_expect_eq(p.ready, 0);
	cr_expect_eq(p.desired, 1);
	cr_expect_eq(p.available, 0);
	/* lockdown integrity alone enforces signatures too */
	p = plan_of(SMODJ("", "", ""),
		    NODEJ("", "", "6.8.0-1", "\"gpukmm.io/node-report\":\"{\\\"secure_boot\\\":\\\"TRI_NO\\\",\\\"lockdown\\\":\\\"integrity\\\"}\""));
	cr_expect_eq(p.unsigned_refused, 1);
	/* Secure Boot off, or no/garbled report: loads */
	p = plan_of(SMODJ("", "", ""), NODEJ("", "", "6.8.0-1", "\"gpukmm.io/node-report\":\"{\\\"secure_boot\\\":\\\"TRI_NO\\\"}\""));
	cr_expect_eq(p.blocked, 0);
	p = plan_of(SMODJ("", "", ""), NODEJ("", "", "6.8.0-1", "\"gpukmm.io/node-report\":\"{garbage\""));
	cr_expect_eq(p.blocked, 0);
	/* the signed image loads on the Secure Boot node */
	p = plan_of(SMODJ("\"fake-kmm.gpukmm.io/image.6.8.0-1\":\"Exists r.io/kmm/xe:6.8.0-1\"", "," SIGNJ, ""),
		    NODEJ("", "", "6.8.0-1", SECURE));
	cr_expect_eq(p.unsigned_refused, 0);
	cr_expect_eq(p.blocked, 0);
	cr_expect_eq(p.op, FK_OP_LOAD);
	/* an unsigned module loaded before Secure Boot came on stays (nothing reloads it) */
	p = plan_of(SMODJ("", "", ""), NODEJ("", "", "6.8.0-1", SECURE "," LOADED("6.8.0-1")));
	cr_expect_eq(p.op, FK_OP_NONE);
	cr_expect_eq(p.available, 1);
}

Test(sign, kmm_events)
{
	char k[256];
	fk_dns_safe_kernel(k, sizeof k, "5.14.0-427.13.1.el9_4.x86_64");
	cr_expect_str_eq(k, "5-14-0-427-13-1-el9-4-x86-64");
	fk_dns_safe_kernel(k, sizeof k, "-6.8.0_RC+");
	cr_expect_str_eq(k, "6-8-0-rc");
	cJSON *mo;
	fk_module m;
	mod(SMODJ("", "", ""), &mo, &m);
	cJSON *ev = fk_sign_event(&m, "6.8.0-45-generic", "SignimageCreated", "2026-07-01T10:00:00Z");
	char *s = cJSON_PrintUnformatted(ev);
	cr_expect_str_eq(s, "{\"metadata\":{\"annotations\":{\"kernel-version\":\"6-8-0-45-generic\",\"pod-name\":"
			    "\"gpu-sign-6-8-0-45-generic\",\"pod-creation-timestamp\":\"2026-07-01 10:00:00 +0000 UTC\"},"
			    "\"generateName\":\"gpu.\",\"namespace\":\"kmm\"},\"involvedObject\":{\"apiVersion\":"
			    "\"kmm.sigs.x-k8s.io/v1beta1\",\"kind\":\"ModuleBuildSignConfig\",\"name\":\"gpu\",\"namespace\":\"kmm\"},"
			    "\"source\":{\"component\":\"kmm\"},\"apiVersion\":\"v1\",\"kind\":\"Event\",\"type\":\"Normal\","
			    "\"reason\":\"SignimageCreated\",\"message\":\"Signimage created for kernel 6-8-0-45-generic\","
			    "\"count\":1,\"firstTimestamp\":\"2026-07-01T10:00:00Z\",\"lastTimestamp\":\"2026-07-01T10:00:00Z\","
			    "\"reportingComponent\":\"kmm\"}");
	cJSON_free(s);
	cJSON_Delete(ev);
	ev = fk_sign_event(&m, "6.8.0-45-generic", "SignimageSucceeded", "2026-07-01T10:00:01Z");
	cr_expect_str_eq(cJSON_GetObjectItem(ev, "message")->valuestring, "Signimage job succeeded for kernel 6-8-0-45-generic");
	cr_expect_str_eq(cJSON_GetObjectItem(ev, "type")->valuestring, "Normal");
	cJSON_Delete(ev);
	ev = fk_sign_event(&m, "6.8.0-45-generic", "SignimageFailed", "2026-07-01T10:00:01Z");
	cr_expect_str_eq(cJSON_GetObjectItem(ev, "message")->valuestring, "Signimage job failed for kernel 6-8-0-45-generic");
	cr_expect_str_eq(cJSON_GetObjectItem(ev, "type")->valuestring, "Warning");
	cJSON_Delete(ev);
	char buf[128];
	fk_image_value(buf, sizeof buf, FK_IMAGE_NEEDS_SIGNING, "r.io/x:1");
	cr_expect_str_eq(buf, "NeedsSigning r.io/x:1");
	fk_key_image(buf, "6.8.0~1+");
	cr_expect_str_eq(buf, "fake-kmm.gpukmm.io/image.6.8.0_1");
	cJSON_Delete(mo);
}
