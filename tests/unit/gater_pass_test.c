/* gpukmm-gater: view (dirty keys from events and snapshots) and one pass
 * against a fake writer — only gated DaemonSets get a write, only when wrong,
 * a write in flight is not asked twice and holds the report back, a
 * DaemonSet's last write error is reported (while backing off and while its
 * retry is in flight), a write that lands (or a 404) updates the view and
 * marks its policies, not the leader → nothing, report values. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../services/gater/decide.h"
#include "../../services/gater/pass.h"
#include "../../services/gater/view.h"
#include "gpukmm/kobj.h"

#define NS "intel-gpu-base-operator"
#define KEY "kmm.node.kubernetes.io/intel-gpu-base-operator.gpu-gpu.ready"
#define KM "\"kernelModule\":{\"moduleName\":\"xe\",\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":\"r/x:1\"}]}"

typedef struct fake {
	char calls[32][600];
	char ns[32][64], name[32][64];
	int n;
	enum gk_gater_wr wr;            /* what the writer answers */
	const char *last_err;           /* its last error for every DaemonSet */
} fake;
static fake FK;

static char dirty[32][64];
static int n_dirty;
static void on_dirty(void *u, const char *p)
{
	(void)u;
	for (int i = 0; i < n_dirty; i++)
		if (strcmp(dirty[i], p) == 0)
			return;
	cr_assert_lt(n_dirty, 32);
	snprintf(dirty[n_dirty++], 64, "%s", p);
}
static bool is_dirty(const char *p)
{
	for (int i = 0; i < n_dirty; i++)
		if (strcmp(dirty[i], p) == 0)
			return true;
	return false;
}

static Gpukmm__DaemonSet *mkds(const char *json)
{
	cJSON *o = cJSON_Parse(json);
	cr_assert_not_null(o, "%s", json);
	Gpukmm__DaemonSet *d = NULL;
	gk_err e;
	cr_assert_eq(gk_kobj_daemon_set_from_json(o, &d, &e), 0, "%s", e.msg);
	cJSON_Delete(o);
	return d;
}

static char *dsjson(const char *name, const char *ns, const char *sel, const char *labels, const char *rv)
{
	static char buf[4][2048];
	static int k;
	char *b = buf[k++ % 4];
	snprintf(b, 2048,
		 "{\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"resourceVersion\":\"%s\","
		 "\"labels\":%s},\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":%s}}},"
		 "\"status\":{\"numberReady\":2,\"desiredNumberScheduled\":3}}",
		 name, ns, rv ? rv : "1", labels ? labels : "{}", sel ? sel : "{\"kubernetes.io/arch\":\"amd64\"}");
	return b;
}

static enum gk_gater_wr f_write(void *u, const char *ns, const char *name, const char *body,
				const char **last_err)
{
	cr_assert_lt(FK.n, 32);
	snprintf(FK.ns[FK.n], 64, "%s", ns);
	snprintf(FK.name[FK.n], 64, "%s", name);
	snprintf(FK.calls[FK.n++], 600, "patch %s/%s %s", ns, name, body);
	*last_err = FK.last_err;
	return FK.wr;
}

static const gk_gater_ops OPS = { .user = NULL, .write = f_write };

/* The writes asked for land as the writer does it: the API applies the
 * patch's one key and the object as returned goes into the view. */
static void land_all(gk_gtv *v)
{
	for (int i = 0; i < FK.n; i++) {
		cJSON *p = cJSON_Parse(strchr(strchr(FK.calls[i], ' ') + 1, ' ') + 1);
		const cJSON *sel = cJSON_GetObjectItem(
			cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "template"), "spec"),
			"nodeSelector");
		const char *s = cJSON_IsString(cJSON_GetObjectItem(sel, KEY))
					? "{\"kubernetes.io/arch\":\"amd64\",\"" KEY "\":\"\"}"
					: "{\"kubernetes.io/arch\":\"amd64\"}";
		cJSON_Delete(p);
		const char *ns = FK.ns[i], *name = FK.name[i];
		Gpukmm__DaemonSet *d =
			mkds(dsjson(name, ns, s, strcmp(ns, NS) ? "{\"gpukmm.io/gate\":\"gpu\"}" : NULL, "99"));
		cr_assert_eq(gk_gtv_put_ds(v, ns, name, d, NULL), 0);
		gk_kobj_free(d);
	}
	FK.n = 0;
}

static void ev_ds(gk_gtv *v, int type, const char *json)
{
	Gpukmm__DaemonSet *d = mkds(json);
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.has_type = 1;
	ev.type = type;
	ev.object_case = GPUKMM__EVENT__OBJECT_DAEMON_SET;
	ev.daemon_set = d;
	cr_assert_eq(gk_gtv_apply(v, "daemonset", &ev, NULL), 0);
	gk_kobj_free(d);
}

static void ev_cp(gk_gtv *v, int type, const char *name, bool km, const char *deleting)
{
	char buf[1024];
	snprintf(buf, sizeof(buf),
		 "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"%s\","
		 "\"generation\":3%s%s%s},\"spec\":{\"resourceRegistration\":\"dp\"%s%s}}",
		 name, deleting ? ",\"deletionTimestamp\":\"" : "", deleting ? deleting : "", deleting ? "\"" : "",
		 km ? "," : "", km ? KM : "");
	cJSON *o = cJSON_Parse(buf);
	cr_assert_not_null(o);
	Gpukmm__ClusterPolicy *cp = NULL;
	gk_err e;
	cr_assert_eq(gk_kobj_cluster_policy_from_json(o, &cp, &e), 0, "%s", e.msg);
	cJSON_Delete(o);
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.has_type = 1;
	ev.type = type;
	ev.object_case = GPUKMM__EVENT__OBJECT_CLUSTER_POLICY;
	ev.cluster_policy = cp;
	cr_assert_eq(gk_gtv_apply(v, "clusterpolicy", &ev, NULL), 0);
	gk_kobj_free(cp);
}

static void ev_disc(gk_gtv *v, bool kmm)
{
	Gpukmm__Discovery d = GPUKMM__DISCOVERY__INIT;
	d.has_kmm = 1;
	d.kmm = kmm;
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.object_case = GPUKMM__EVENT__OBJECT_DISCOVERY;
	ev.discovery = &d;
	cr_assert_eq(gk_gtv_apply(v, "discovery", &ev, NULL), 0);
}

static void ev_leader(gk_gtv *v, bool leader)
{
	Gpukmm__Leadership l = GPUKMM__LEADERSHIP__INIT;
	l.has_leader = 1;
	l.leader = leader;
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.object_case = GPUKMM__EVENT__OBJECT_LEADERSHIP;
	ev.leadership = &l;
	cr_assert_eq(gk_gtv_apply(v, "leadership", &ev, NULL), 0);
}

static gk_gtv *V;

static void setup(void)
{
	memset(&FK, 0, sizeof(FK));
	n_dirty = 0;
	gk_gtv_opts o = { .ns = NS };
	cr_assert_eq(gk_gtv_new(&V, &o, on_dirty, NULL, NULL), 0);
	ev_disc(V, true);
}
static void teardown(void)
{
	gk_gtv_free(V);
}

static void pass(gk_gater_result *r)
{
	gk_err e;
	cr_assert_eq(gk_gater_pass(V, "gpu", &OPS, r, NULL, &e), 0);
}

TestSuite(gater_pass, .init = setup, .fini = teardown);

Test(gater_pass, gates_the_three_and_the_opt_in_only)
{
	ev_cp(V, 1, "gpu", true, NULL);
	ev_ds(V, 1, dsjson("gpu-device-plugin", NS, NULL, NULL, "1"));
	ev_ds(V, 1, dsjson("gpu-gpu-dra", NS, NULL, NULL, "1"));
	ev_ds(V, 1, dsjson("gpu-node-exporter", NS, NULL, NULL, "1"));
	ev_ds(V, 1, dsjson("app", "user", NULL, "{\"gpukmm.io/gate\":\"gpu\"}", "1"));
	ev_ds(V, 1, dsjson("other-device-plugin", NS, NULL, NULL, "1"));
	cr_assert(is_dirty("gpu"));
	cr_assert(is_dirty("other"), "a DaemonSet named for another policy marks that policy");
	gk_gater_result r;
	pass(&r);
	cr_assert_eq(FK.n, 3, "device plugin, DRA, opt-in: %d calls", FK.n);
	for (int i = 0; i < FK.n; i++) {
		cr_assert(strstr(FK.calls[i], "\"" KEY "\":\"\""), "%s", FK.calls[i]);
		cr_assert(strstr(FK.calls[i], "\"resourceVersion\":\"1\""), "precondition: %s", FK.calls[i]);
		cr_assert_null(strstr(FK.calls[i], "amd64"), "only our key: %s", FK.calls[i]);
	}
	cr_assert_not(r.failed);
	cr_assert_not(r.deleted);
	cr_assert_eq(r.writes, 3);
	cr_assert_eq(r.pending, 3, "the writes are in flight: the report waits for them");
	cr_assert_eq(r.generation, 3);
	cr_assert_str_eq(r.dp, "2/3");
	cr_assert_str_eq(r.dra, "2/3");
	cr_assert_str_eq(r.xpu, "N/A");
	cr_assert_eq(r.n_gated, 0, "nothing has landed yet");
	cr_assert_eq(r.n_errors, 0);
	gk_gater_result_free(&r);
	/* the writes land: the policy is marked, and its next pass writes nothing */
	n_dirty = 0;
	land_all(V);
	cr_assert(is_dirty("gpu"), "a landed write marks its policy");
	pass(&r);
	cr_assert_eq(FK.n, 0, "no write when already right");
	cr_assert_eq(r.pending, 0);
	cr_assert_eq(r.n_gated, 3);
	cr_assert_str_eq(r.gated[0], NS "/gpu-device-plugin");
	cr_assert_str_eq(r.gated[1], NS "/gpu-gpu-dra");
	cr_assert_str_eq(r.gated[2], "user/app");
	gk_gater_result_free(&r);
}

Test(gater_pass, ungates_when_kernel_module_removed_kmm_gone_policy_deleting_or_gone)
{
	const char *sel = "{\"kubernetes.io/arch\":\"amd64\",\"" KEY "\":\"\"}";
	ev_ds(V, 1, dsjson("gpu-device-plugin", NS, sel, NULL, "5"));
	gk_gater_result r;
	/* 1. kernelModule not set */
	ev_cp(V, 1, "gpu", false, NULL);
	pass(&r);
	cr_assert_eq(FK.n, 1);
	cr_assert(strstr(FK.calls[0], "\"" KEY "\":null"), "%s", FK.calls[0]);
	cr_assert_eq(r.n_gated, 1, "still gated until the write lands");
	gk_gater_result_free(&r);
	land_all(V);
	pass(&r);
	cr_assert_eq(FK.n, 0);
	cr_assert_eq(r.n_gated, 0);
	gk_gater_result_free(&r);
	/* 2. KMM uninstalled */
	ev_ds(V, 2, dsjson("gpu-device-plugin", NS, sel, NULL, "6"));
	ev_cp(V, 2, "gpu", true, NULL);
	n_dirty = 0;
	ev_disc(V, false);
	cr_assert(is_dirty("gpu"), "discovery change marks every policy");
	FK.n = 0;
	pass(&r);
	cr_assert_eq(FK.n, 1);
	cr_assert(strstr(FK.calls[0], "null"));
	cr_assert_eq(r.n_errors, 0, "KMM-not-installed is modmgr's error, not repeated here");
	gk_gater_result_free(&r);
	/* 3. policy being deleted */
	ev_disc(V, true);
	ev_ds(V, 2, dsjson("gpu-device-plugin", NS, sel, NULL, "7"));
	ev_cp(V, 2, "gpu", true, "2026-12-02T12:00:00Z");
	FK.n = 0;
	pass(&r);
	cr_assert_eq(FK.n, 1);
	cr_assert(strstr(FK.calls[0], "null"));
	gk_gater_result_free(&r);
	/* 4. policy gone: report deleted, key removed */
	ev_ds(V, 2, dsjson("gpu-device-plugin", NS, sel, NULL, "8"));
	ev_cp(V, 3, "gpu", true, NULL);
	FK.n = 0;
	pass(&r);
	cr_assert(r.deleted);
	cr_assert_eq(FK.n, 1);
	cr_assert(strstr(FK.calls[0], "null"));
	gk_gater_result_free(&r);
}

Test(gater_pass, a_write_in_flight_or_backing_off_is_not_asked_twice)
{
	ev_cp(V, 1, "gpu", true, NULL);
	ev_ds(V, 1, dsjson("gpu-device-plugin", NS, NULL, NULL, "1"));
	gk_gater_stats st = { 0 };
	gk_gater_result r;
	/* a call (a patch, or the re-read after a 409) is in flight */
	FK.wr = GK_GATER_WR_BUSY;
	cr_assert_eq(gk_gater_pass(V, "gpu", &OPS, &r, &st, NULL), 0);
	cr_assert_eq(r.writes, 0);
	cr_assert_eq(r.pending, 1);
	cr_assert_not(r.failed, "its end runs the pass again: no queue backoff");
	cr_assert_eq(r.n_errors, 0, "a conflict is not a status error");
	gk_gater_result_free(&r);
	/* backing off after an error: not pending (the report goes out), the error is reported */
	FK.wr = GK_GATER_WR_WAIT;
	FK.last_err = "api says no";
	cr_assert_eq(gk_gater_pass(V, "gpu", &OPS, &r, &st, NULL), 0);
	cr_assert_eq(r.pending, 0);
	cr_assert_not(r.failed, "the writer wakes the policy when the retry is due");
	cr_assert_eq(r.n_errors, 1);
	cr_assert_str_eq(r.errors[0], "failed to gate DaemonSet " NS "/gpu-device-plugin: api says no");
	gk_gater_result_free(&r);
	/* the retry in flight: the error stays until a write succeeds */
	FK.wr = GK_GATER_WR_STARTED;
	cr_assert_eq(gk_gater_pass(V, "gpu", &OPS, &r, &st, NULL), 0);
	cr_assert_eq(r.writes, 1);
	cr_assert_eq(r.pending, 1);
	cr_assert_eq(r.n_errors, 1);
	gk_gater_result_free(&r);
	/* the writer could not even start it: the pass is retried by the queue */
	FK.wr = GK_GATER_WR_FAILED;
	FK.last_err = NULL;
	cr_assert_eq(gk_gater_pass(V, "gpu", &OPS, &r, &st, NULL), 0);
	cr_assert(r.failed);
	cr_assert_eq(r.pending, 0);
	cr_assert_eq(r.n_errors, 0);
	gk_gater_result_free(&r);
	cr_assert_eq(st.passes, 4);
	cr_assert_eq(st.failures, 1);
}

Test(gater_pass, a_reread_or_not_found_updates_the_view_and_marks)
{
	ev_cp(V, 1, "gpu", true, NULL);
	ev_ds(V, 1, dsjson("gpu-device-plugin", NS, NULL, NULL, "1"));
	ev_ds(V, 1, dsjson("gpu-xpu-manager", NS, NULL, NULL, "1"));
	ev_ds(V, 1, dsjson("app", "user", NULL, "{\"gpukmm.io/gate\":\"gpu\"}", "1"));
	/* a 409 re-read: someone else already added the key */
	n_dirty = 0;
	Gpukmm__DaemonSet *d = mkds(dsjson("gpu-device-plugin", NS, "{\"" KEY "\":\"\",\"theirs\":\"x\"}", NULL, "2"));
	cr_assert_eq(gk_gtv_put_ds(V, NS, "gpu-device-plugin", d, NULL), 0);
	gk_kobj_free(d);
	cr_assert(is_dirty("gpu"));
	/* a 404: gone from the view, its policy (by label) marked */
	n_dirty = 0;
	cr_assert_eq(gk_gtv_put_ds(V, "user", "app", NULL, NULL), 0);
	cr_assert(is_dirty("gpu"));
	cr_assert_null(gk_gtv_ds(V, "user", "app"));
	/* the pass decides on the fresh objects: only the xpu manager is left */
	gk_gater_result r;
	pass(&r);
	cr_assert_eq(FK.n, 1);
	cr_assert(strstr(FK.calls[0], "gpu-xpu-manager"), "%s", FK.calls[0]);
	cr_assert_eq(r.n_gated, 1);
	cr_assert_str_eq(r.gated[0], NS "/gpu-device-plugin");
	gk_gater_result_free(&r);
	/* the writer's retry timer wakes the policies of a DaemonSet */
	n_dirty = 0;
	gk_gtv_touch_ds(V, NS, "gpu-xpu-manager");
	cr_assert(is_dirty("gpu"));
	n_dirty = 0;
	gk_gtv_touch_ds(V, NS, "no-such");
	cr_assert_eq(n_dirty, 0);
}

Test(gater_pass, follower_does_nothing)
{
	ev_cp(V, 1, "gpu", true, NULL);
	ev_ds(V, 1, dsjson("gpu-device-plugin", NS, NULL, NULL, "1"));
	n_dirty = 0;
	ev_leader(V, false);
	cr_assert(is_dirty("gpu"));
	gk_gater_result r;
	pass(&r);
	cr_assert(r.idle);
	cr_assert_eq(FK.n, 0);
	gk_gater_result_free(&r);
	ev_leader(V, true);
	pass(&r);
	cr_assert_not(r.idle);
	cr_assert_eq(FK.n, 1);
	gk_gater_result_free(&r);
}

Test(gater_pass, label_moves_mark_old_and_new_policy)
{
	ev_ds(V, 1, dsjson("app", "user", NULL, "{\"gpukmm.io/gate\":\"a\"}", "1"));
	n_dirty = 0;
	ev_ds(V, 2, dsjson("app", "user", NULL, "{\"gpukmm.io/gate\":\"b\"}", "2"));
	cr_assert(is_dirty("a"));
	cr_assert(is_dirty("b"));
	n_dirty = 0;
	ev_ds(V, 3, dsjson("app", "user", NULL, "{\"gpukmm.io/gate\":\"b\"}", "3"));
	cr_assert(is_dirty("b"));
	cr_assert_not(is_dirty("a"));
	cr_assert_null(gk_gtv_ds(V, "user", "app"));
}

Test(gater_pass, snapshot_rebuilds_and_marks_old_and_new)
{
	ev_cp(V, 1, "old", true, NULL);
	Gpukmm__SnapshotReply s = GPUKMM__SNAPSHOT_REPLY__INIT;
	Gpukmm__DaemonSet *d = mkds(dsjson("new-gpu-dra", NS, NULL, NULL, "1"));
	Gpukmm__DaemonSet *ds[] = { d };
	s.daemon_sets = ds;
	s.n_daemon_sets = 1;
	Gpukmm__Discovery disc = GPUKMM__DISCOVERY__INIT;
	disc.has_kmm = 1;
	disc.kmm = 1;
	s.discovery = &disc;
	s.has_synced = 1;
	s.synced = 1;
	n_dirty = 0;
	cr_assert_eq(gk_gtv_load_snapshot(V, &s, NULL), 0);
	gk_kobj_free(d);
	cr_assert(is_dirty("old"), "a policy gone meanwhile is passed once more");
	cr_assert(is_dirty("new"));
	gk_gtv_state st;
	gk_gtv_state_get(V, &st);
	cr_assert_eq(st.policies, 0);
	cr_assert_eq(st.daemonsets, 1);
	cr_assert(st.kmm && st.leader && st.synced);
}

Test(gater_pass, bounded_view)
{
	gk_gtv *v;
	gk_gtv_opts o = { .ns = NS, .max_objects = 2 };
	cr_assert_eq(gk_gtv_new(&v, &o, NULL, NULL, NULL), 0);
	gk_gtv *save = V;
	V = v;
	ev_ds(V, 1, dsjson("a", NS, NULL, NULL, "1"));
	ev_ds(V, 1, dsjson("b", NS, NULL, NULL, "1"));
	Gpukmm__DaemonSet *d = mkds(dsjson("c", NS, NULL, NULL, "1"));
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.object_case = GPUKMM__EVENT__OBJECT_DAEMON_SET;
	ev.daemon_set = d;
	gk_err e;
	cr_assert_eq(gk_gtv_apply(V, "daemonset", &ev, &e), GK_RESOURCE_EXHAUSTED);
	gk_kobj_free(d);
	V = save;
	gk_gtv_free(v);
}

Test(gater_pass, garbage_events_are_ignored)
{
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	cr_assert_eq(gk_gtv_apply(V, "daemonset", &ev, NULL), 0);
	cr_assert_eq(gk_gtv_apply(V, NULL, &ev, NULL), 0);
	cr_assert_eq(gk_gtv_apply(V, "x", NULL, NULL), 0);
	Gpukmm__DaemonSet d = GPUKMM__DAEMON_SET__INIT; /* no metadata */
	ev.object_case = GPUKMM__EVENT__OBJECT_DAEMON_SET;
	ev.daemon_set = &d;
	cr_assert_eq(gk_gtv_apply(V, "daemonset", &ev, NULL), 0);
	gk_gtv_state st;
	gk_gtv_state_get(V, &st);
	cr_assert_eq(st.ignored, 4);
	cr_assert_eq(st.daemonsets, 0);
}

/* ---- the safety rule: nothing ungates on a state the watcher cannot vouch for ---- */

static void ev_disc_unconfirmed(gk_gtv *v, bool kmm, const char *topic, const char *reason, const char *unreadable)
{
	Gpukmm__Discovery d = GPUKMM__DISCOVERY__INIT;
	d.has_kmm = 1;
	d.kmm = kmm;
	Gpukmm__Unconfirmed u = GPUKMM__UNCONFIRMED__INIT;
	Gpukmm__Unconfirmed *us[1] = { &u };
	char *k[1] = { (char *)unreadable }, *e[1] = { "spec: expected object, got string" };
	if (topic) {
		u.topic = (char *)topic;
		u.reason = (char *)(reason ? reason : "");
		if (unreadable) {
			u.unreadable = k;
			u.unreadable_errors = e;
			u.n_unreadable = u.n_unreadable_errors = 1;
		}
		d.unconfirmed = us;
		d.n_unconfirmed = 1;
	}
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.object_case = GPUKMM__EVENT__OBJECT_DISCOVERY;
	ev.discovery = &d;
	cr_assert_eq(gk_gtv_apply(v, "discovery", &ev, NULL), 0);
}

Test(gater_pass, a_kmm_discovery_blip_does_not_ungate)
{
	const char *sel = "{\"kubernetes.io/arch\":\"amd64\",\"" KEY "\":\"\"}";
	ev_ds(V, 1, dsjson("gpu-device-plugin", NS, sel, NULL, "5"));
	ev_cp(V, 1, "gpu", true, NULL);
	/* KMM answered absent once: not believed yet */
	n_dirty = 0;
	ev_disc_unconfirmed(V, false, "module", "kmm.sigs.x-k8s.io/v1beta1 is absent in 1 discovery read over 0 s", NULL);
	cr_assert(is_dirty("gpu"));
	gk_gater_result r;
	pass(&r);
	cr_assert_eq(FK.n, 0, "no ungating on an unconfirmed absence: %s", FK.n ? FK.calls[0] : "");
	cr_assert(r.held);
	cr_assert_eq(r.n_gated, 1, "still gated");
	cr_assert_eq(r.n_errors, 1);
	cr_assert(strstr(r.errors[0], "ungating of the DaemonSets of ClusterPolicy gpu waits: kmm.sigs.x-k8s.io"),
		  "%s", r.errors[0]);
	gk_gater_result_free(&r);
	/* confirmed gone: ungated */
	ev_disc_unconfirmed(V, false, NULL, NULL, NULL);
	pass(&r);
	cr_assert_eq(FK.n, 1);
	cr_assert(strstr(FK.calls[0], "\"" KEY "\":null"), "%s", FK.calls[0]);
	cr_assert_not(r.held);
	gk_gater_result_free(&r);
}

Test(gater_pass, a_policy_missing_from_an_unconfirmed_view_is_not_ungated_nor_reported_gone)
{
	const char *sel = "{\"kubernetes.io/arch\":\"amd64\",\"" KEY "\":\"\"}";
	ev_ds(V, 1, dsjson("gpu-device-plugin", NS, sel, NULL, "5"));
	/* the ClusterPolicies' list lied: "gpu" is not in the view */
	ev_disc_unconfirmed(V, true, "clusterpolicy", "clusterpolicies: list failed: items is nothing", NULL);
	gk_gater_result r;
	pass(&r);
	cr_assert_eq(FK.n, 0);
	cr_assert(r.held);
	cr_assert_not(r.deleted, "not reported gone");
	gk_gater_result_free(&r);
	ev_disc_unconfirmed(V, true, NULL, NULL, NULL);
	pass(&r);
	cr_assert_eq(FK.n, 1, "confirmed gone: ungated");
	cr_assert(r.deleted);
	gk_gater_result_free(&r);
}

Test(gater_pass, an_unreadable_policy_is_written_for_neither_way)
{
	ev_ds(V, 1, dsjson("gpu-device-plugin", NS, NULL, NULL, "5"));
	ev_cp(V, 1, "gpu", true, NULL);
	ev_disc_unconfirmed(V, true, "clusterpolicy", NULL, "gpu");
	gk_gater_result r;
	pass(&r);
	cr_assert_eq(FK.n, 0, "not gated from a stale copy either");
	cr_assert(r.held);
	cr_assert(strstr(r.errors[0], "ClusterPolicy gpu could not be read: spec"), "%s", r.errors[0]);
	gk_gater_result_free(&r);
	/* another policy is not held by it */
	ev_cp(V, 1, "other", true, NULL);
	ev_ds(V, 1, dsjson("other-device-plugin", NS, NULL, NULL, "5"));
	gk_err e;
	cr_assert_eq(gk_gater_pass(V, "other", &OPS, &r, NULL, &e), 0);
	cr_assert_eq(FK.n, 1);
	cr_assert_not(r.held);
	gk_gater_result_free(&r);
}
