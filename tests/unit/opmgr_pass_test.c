/* gpukmm-opmgr: one pass on a view built from a snapshot, with fake writes —
 * protection first, create / nothing / patch, the ordered teardown with the DRA
 * claim guard, finalizers released (ours and upstream's), nothing deleted on an
 * absence or when the object is not ours, foreign controllers left alone; Kueue
 * (quotas from the view, not installed, unlisted kinds delete nothing); what
 * gpu-base-operator left read before it is deleted. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/operands.h"
#include "../../services/opmgr/pass.h"
#include "../../services/opmgr/view.h"

#define NS "intel-gpu-base-operator"

typedef struct fake {
	char log[64][256];
	size_t n;
} fake;
static fake F;

static int rec(const char *verb, const gk_opp_ref *r)
{
	if (F.n < 64)
		snprintf(F.log[F.n++], 256, "%s %s %s", verb, r->kind, r->name);
	return GK_OPP_WR_STARTED;
}
static char CREATED_QA[2048]; /* the body of ClusterQueue q-a, when created */
static int f_create(void *u, const gk_opp_ref *r, const cJSON *o, const char **l)
{
	*l = NULL;
	if (!strcmp(r->kind, "ClusterQueue") && !strcmp(r->name, "q-a")) {
		char *t = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "spec"));
		snprintf(CREATED_QA, sizeof(CREATED_QA), "%s", t ? t : "");
		free(t);
	}
	return rec("create", r);
}
static int f_patch(void *u, const gk_opp_ref *r, const char *b, const char **l) { *l = NULL; return rec("patch", r); }
static int DEL_ANSWER = GK_OPP_WR_STARTED; /* what the fake delete answers */
static int f_del(void *u, const gk_opp_ref *r, const char *uid, const char **l)
{
	*l = NULL;
	rec("delete", r);
	return DEL_ANSWER;
}
static int f_fin(void *u, const char *p, const char *rv, char *const *f, size_t n, const char **l)
{
	*l = NULL;
	if (F.n < 64) {
		size_t o = (size_t)snprintf(F.log[F.n], 256, "finalizers");
		for (size_t i = 0; i < n; i++)
			o += (size_t)snprintf(F.log[F.n] + o, 256 - o, " %s", f[i]);
		F.n++;
	}
	return GK_OPP_WR_STARTED;
}
static int PROBE = -1; /* what the fake probe answers (-1: no probe in the ops) */
static int f_probe(void *u, const gk_opp_ref *r, const char **l)
{
	*l = NULL;
	rec("probe", r);
	return PROBE;
}
static const gk_opp_ops OPS = { NULL, f_create, f_patch, f_del, NULL, f_fin };
static const gk_opp_ops OPS_PROBE = { NULL, f_create, f_patch, f_del, f_probe, f_fin };

static bool logged(const char *s)
{
	for (size_t i = 0; i < F.n; i++)
		if (strcmp(F.log[i], s) == 0)
			return true;
	return false;
}

/* ---- a snapshot ------------------------------------------------------------------------- */
static Gpukmm__SnapshotReply SNAP;
static Gpukmm__ClusterPolicy *CPS[2];
static Gpukmm__Object *OBJS[32];
static Gpukmm__DaemonSet *DSS[4];
static Gpukmm__ResourceClaim *RCS[2];
static Gpukmm__Node *NODES[4];
static Gpukmm__Discovery DISC;
static gk_opv *V;

static void dirty(void *u, const char *p) {}

static void reset(void)
{
	for (size_t i = 0; i < SNAP.n_cluster_policies; i++)
		gk_kobj_free(CPS[i]);
	for (size_t i = 0; i < SNAP.n_operands; i++)
		gk_kobj_free(OBJS[i]);
	for (size_t i = 0; i < SNAP.n_daemon_sets; i++)
		gk_kobj_free(DSS[i]);
	for (size_t i = 0; i < SNAP.n_resource_claims; i++)
		gk_kobj_free(RCS[i]);
	for (size_t i = 0; i < SNAP.n_nodes; i++)
		gk_kobj_free(NODES[i]);
	gpukmm__snapshot_reply__init(&SNAP);
	SNAP.nodes = NODES;
	CREATED_QA[0] = 0;
	PROBE = -1;
	DEL_ANSWER = GK_OPP_WR_STARTED;
	SNAP.cluster_policies = CPS;
	SNAP.operands = OBJS;
	SNAP.daemon_sets = DSS;
	SNAP.resource_claims = RCS;
	gpukmm__discovery__init(&DISC);
	DISC.has_kmm = DISC.kmm = 1;
	DISC.has_dra = DISC.dra = 1;
	DISC.dra_version = "v1";
	SNAP.discovery = &DISC;
	SNAP.has_synced = SNAP.synced = 1;
	memset(&F, 0, sizeof(F));
}

static void setup(void)
{
	gpukmm__snapshot_reply__init(&SNAP);
	reset();
	cr_assert_eq(gk_opv_new(&V, NS, 0, dirty, NULL, NULL), 0);
}
static void teardown(void)
{
	reset();
	gk_opv_free(V);
}

static void add_policy(const char *json)
{
	cJSON *j = cJSON_Parse(json);
	cr_assert_not_null(j, "%s", json);
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &CPS[SNAP.n_cluster_policies++], NULL), 0);
	cJSON_Delete(j);
}

static void add_obj(cJSON *j)
{
	cr_assert_eq(gk_kobj_object_from_json(j, &OBJS[SNAP.n_operands++], NULL), 0);
	cJSON_Delete(j);
}

/* every object the policy renders, as the API would hold it (optionally only one kind) */
static void add_rendered(const char *policy_json, const gk_op_opts *o, const char *only_kind)
{
	cJSON *j = cJSON_Parse(policy_json);
	Gpukmm__ClusterPolicy *cp;
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, NULL), 0);
	cJSON_Delete(j);
	gk_policy_default(cp);
	if (cp->metadata->deletion_timestamp) {
		free(cp->metadata->deletion_timestamp);
		cp->metadata->deletion_timestamp = NULL;
	}
	gk_op_set s;
	cr_assert_eq(gk_op_render(cp, o, &s, NULL), 0);
	for (size_t i = 0; i < s.n; i++) {
		if (only_kind && strcmp(s.v[i].kind, only_kind))
			continue;
		cJSON *x = cJSON_Duplicate(s.v[i].obj, 1);
		cJSON *md = cJSON_GetObjectItem(x, "metadata");
		cJSON_AddStringToObject(md, "resourceVersion", "7");
		cJSON_AddStringToObject(md, "uid", "obj-uid");
		add_obj(x);
	}
	gk_op_set_free(&s);
	gk_kobj_free(cp);
}

static void load(void)
{
	cr_assert_eq(gk_opv_load_snapshot(V, &SNAP, NULL), 0);
	memset(&F, 0, sizeof(F));
}

static gk_opp_result R;
static void pass(void)
{
	gk_opp_result_free(&R);
	cr_assert_eq(gk_opp_pass(V, "gpu", NULL, PROBE < 0 ? &OPS : &OPS_PROBE, &R, NULL), 0);
}

#define CP_DP(fins, extra) "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"gpu\"," \
	"\"uid\":\"u1\",\"resourceVersion\":\"5\",\"generation\":2,\"finalizers\":[" fins "]" extra "},\"spec\":{\"resourceRegistration\":\"dp\"}}"
#define OURS "\"gpukmm.io/operand-protection\""
#define DELETING ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\""

TestSuite(opmgr_pass, .init = setup, .fini = teardown);

Test(opmgr_pass, protection_first_then_create_then_nothing)
{
	add_policy(CP_DP("", ""));
	load();
	pass();
	cr_assert_eq(F.n, 1);
	cr_assert_str_eq(F.log[0], "finalizers gpukmm.io/operand-protection");
	reset();
	add_policy(CP_DP(OURS, ""));
	load();
	pass();
	cr_assert(logged("create DaemonSet gpu-device-plugin"));
	cr_assert_eq(F.n, 1);
	cr_assert_eq(R.pending, 1);
	/* as the API holds it: nothing to write; the counts from the DaemonSet's status */
	reset();
	add_policy(CP_DP(OURS, ""));
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1" };
	add_rendered(CP_DP(OURS, ""), &o, NULL);
	cJSON *dj = cJSON_Parse("{\"metadata\":{\"name\":\"gpu-device-plugin\",\"namespace\":\"" NS "\"},"
				"\"status\":{\"numberReady\":1,\"desiredNumberScheduled\":2}}");
	cr_assert_eq(gk_kobj_daemon_set_from_json(dj, &DSS[SNAP.n_daemon_sets++], NULL), 0);
	cJSON_Delete(dj);
	load();
	pass();
	cr_assert_eq(F.n, 0, "%s", F.log[0]);
	cr_assert_str_eq(R.dp, "1/2");
	cr_assert_str_eq(R.dra, "N/A");
	cr_assert_eq(R.generation, 2);
}

Test(opmgr_pass, absence_deletes_nothing)
{
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1" };
	add_rendered(CP_DP(OURS, ""), &o, NULL);
	load();
	pass();
	cr_assert(R.deleted);
	cr_assert_eq(F.n, 0);
}

Test(opmgr_pass, not_the_leader_writes_nothing)
{
	add_policy(CP_DP("", ""));
	Gpukmm__Leadership l = GPUKMM__LEADERSHIP__INIT;
	l.has_leader = 1;
	l.leader = 0;
	SNAP.leadership = &l;
	load();
	pass();
	cr_assert(R.idle);
	cr_assert_eq(F.n, 0);
	SNAP.leadership = NULL;
}

/* dp -> dra: the DRA objects rendered; a dra -> dp switch deletes them only without allocated claims */
Test(opmgr_pass, mode_switch_and_the_claim_guard)
{
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1" };
	const char *dra = "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"gpu\","
			  "\"uid\":\"u1\",\"finalizers\":[" OURS "]},\"spec\":{\"resourceRegistration\":\"dra\"}}";
	add_policy(CP_DP(OURS, ""));
	add_rendered(dra, &o, NULL);
	cJSON *cj = cJSON_Parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"apps\"},\"status\":{\"allocation\":{\"devices\":"
				"{\"results\":[{\"driver\":\"gpu.intel.com\"}]}}}}");
	cr_assert_eq(gk_kobj_resource_claim_from_json(cj, &RCS[SNAP.n_resource_claims++], NULL), 0);
	cJSON_Delete(cj);
	load();
	pass();
	cr_assert(logged("create DaemonSet gpu-device-plugin"));
	cr_assert_not(logged("delete DaemonSet gpu-gpu-dra"), "claims allocated: the DRA driver stays");
	cr_assert_eq(R.requeue_ms, GK_OPP_REQUEUE_MS);
	cr_assert_str_eq(R.errors[0], "allocated GPU ResourceClaims blocking the removal of the DRA driver gpu-gpu-dra");
	/* claims released */
	gk_kobj_free(RCS[0]);
	SNAP.n_resource_claims = 0;
	load();
	pass();
	cr_assert(logged("delete DaemonSet gpu-gpu-dra"));
	cr_assert(logged("delete DeviceClass gpu.intel.com"));
	cr_assert(logged("delete ClusterRole gpu-gpu-dra"));
	cr_assert_eq(R.requeue_ms, 0);
}

/* A claim the view could not keep (over its bound) is not an absent claim: once the
 * table refused one, the claims are unconfirmed and the DRA driver stays even when every
 * claim the table holds is released. */
static void ev_claim(int type, const char *name)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"apps\"},\"status\":{\"allocation\":"
		 "{\"devices\":{\"results\":[{\"driver\":\"gpu.intel.com\"}]}}}}", name);
	cJSON *cj = cJSON_Parse(buf);
	Gpukmm__ResourceClaim *c;
	cr_assert_eq(gk_kobj_resource_claim_from_json(cj, &c, NULL), 0);
	cJSON_Delete(cj);
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.has_type = 1;
	ev.type = type;
	ev.object_case = GPUKMM__EVENT__OBJECT_RESOURCE_CLAIM;
	ev.resource_claim = c;
	gk_opv_apply(V, "resourceclaim", &ev, NULL); /* the refused one returns an error, as in the service */
	gk_kobj_free(c);
}

Test(opmgr_pass, a_claim_the_view_could_not_keep_holds_the_dra_driver)
{
	gk_opv_free(V);
	cr_assert_eq(gk_opv_new(&V, NS, 16, dirty, NULL, NULL), 0); /* room for 16 objects of each kind */
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1" };
	const char *dra = "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"gpu\","
			  "\"uid\":\"u1\",\"finalizers\":[" OURS "]},\"spec\":{\"resourceRegistration\":\"dra\"}}";
	add_policy(CP_DP(OURS, ""));
	add_rendered(dra, &o, NULL);
	load();
	char name[32];
	for (int i = 0; i < 17; i++) { /* the 17th does not fit */
		snprintf(name, sizeof(name), "c%d", i);
		ev_claim(GPUKMM__EVENT_TYPE__ADDED, name);
	}
	for (int i = 0; i < 16; i++) { /* every claim the view holds is released; c16 still holds a GPU */
		snprintf(name, sizeof(name), "c%d", i);
		ev_claim(GPUKMM__EVENT_TYPE__DELETED, name);
	}
	memset(&F, 0, sizeof(F));
	pass();
	cr_assert(logged("create DaemonSet gpu-device-plugin"));
	cr_assert_not(logged("delete DaemonSet gpu-gpu-dra"), "a claim was dropped from the view: the DRA driver stays");
	cr_assert(R.n_errors > 0 && strstr(R.errors[0], "the view could not keep every ResourceClaim"), "%s",
		  R.n_errors ? R.errors[0] : "(no error)");
	/* a fresh snapshot (every claim released) confirms them again */
	load();
	pass();
	cr_assert(logged("delete DaemonSet gpu-gpu-dra"));
}

/* upstream §9.3: device plugin and XPU Manager first, DRA next (guarded), misc after; finalizers last */
Test(opmgr_pass, ordered_teardown_then_finalizers)
{
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1", .nfd = true };
	DISC.has_nfd = DISC.nfd = 1;
	const char *cpj = CP_DP(OURS ",\"gpu.intel.com/clusterpolicy-protection\",\"gpukmm.io/module-protection\"", DELETING);
	add_policy(cpj);
	add_rendered("{\"metadata\":{\"name\":\"gpu\",\"uid\":\"u1\"},\"spec\":{\"resourceRegistration\":\"dp\","
		     "\"resourceMonitoring\":true,\"useNFDLabeling\":true}}", &o, NULL);
	add_rendered("{\"metadata\":{\"name\":\"gpu\",\"uid\":\"u1\"},\"spec\":{\"resourceRegistration\":\"dra\"}}", &o,
		     "DeviceClass");
	load();
	pass();
	cr_assert(logged("delete DaemonSet gpu-device-plugin"));
	cr_assert(logged("delete DaemonSet gpu-xpu-manager"));
	cr_assert(logged("delete ConfigMap gpu-xpumanager-otel-config"));
	cr_assert_not(logged("delete DeviceClass gpu.intel.com"), "DRA waits for the first stage");
	cr_assert_not(logged("delete NodeFeatureRule intel-gpu-devices"));
	cr_assert_eq(R.n_errors, 0);
	/* the first stage gone: DRA next */
	reset();
	DISC.has_nfd = DISC.nfd = 1;
	add_policy(cpj);
	add_rendered("{\"metadata\":{\"name\":\"gpu\",\"uid\":\"u1\"},\"spec\":{\"resourceRegistration\":\"dp\","
		     "\"useNFDLabeling\":true}}", &o, "NodeFeatureRule");
	add_rendered("{\"metadata\":{\"name\":\"gpu\",\"uid\":\"u1\"},\"spec\":{\"resourceRegistration\":\"dra\"}}", &o,
		     "DeviceClass");
	load();
	pass();
	cr_assert(logged("delete DeviceClass gpu.intel.com"));
	cr_assert_not(logged("delete NodeFeatureRule intel-gpu-devices"));
	/* only the rule left */
	reset();
	DISC.has_nfd = DISC.nfd = 1;
	add_policy(cpj);
	add_rendered("{\"metadata\":{\"name\":\"gpu\",\"uid\":\"u1\"},\"spec\":{\"resourceRegistration\":\"dp\","
		     "\"useNFDLabeling\":true}}", &o, "NodeFeatureRule");
	load();
	pass();
	cr_assert(logged("delete NodeFeatureRule intel-gpu-devices"));
	cr_assert_eq(F.n, 1, "no finalizer change while something is left");
	/* nothing left: ours and upstream's finalizers go, modmgr's stays */
	reset();
	add_policy(cpj);
	load();
	pass();
	cr_assert_eq(F.n, 1);
	cr_assert_str_eq(F.log[0], "finalizers gpukmm.io/module-protection");
}

/* an object of an operand's name that is not ours (no label, no owner) is never deleted;
 * one owned by another controller is not patched */
Test(opmgr_pass, not_ours_is_left_alone)
{
	add_policy(CP_DP(OURS, ""));
	add_obj(cJSON_Parse("{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"gpu-xpu-manager\","
			    "\"namespace\":\"" NS "\",\"uid\":\"x\",\"resourceVersion\":\"3\"}}"));
	add_obj(cJSON_Parse("{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"gpu-device-plugin\","
			    "\"namespace\":\"" NS "\",\"uid\":\"y\",\"resourceVersion\":\"3\",\"ownerReferences\":[{"
			    "\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"d\",\"uid\":\"z\",\"controller\":true}]}}"));
	load();
	pass();
	cr_assert_eq(F.n, 0, "%s", F.log[0]);
	cr_assert_eq(R.n_errors, 1);
	cr_assert(strstr(R.errors[0], "controlled by Deployment d") != NULL, "%s", R.errors[0]);
}

/* A DeviceClass has one name for every policy: another policy's (our label, its controller
 * reference) is not this policy's. A teardown neither deletes it (the other policy made it
 * again, the two deleted and created it in turn and the teardown waited for it) nor guards
 * it as its DRA driver: the finalizers go. */
Test(opmgr_pass, teardown_leaves_another_policys_object_alone)
{
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1" };
	/* then with GPU claims allocated: they guard the other policy's DRA driver, not this one's */
	for (int claims = 0; claims < 2; claims++) {
		reset();
		add_policy(CP_DP(OURS, DELETING));
		add_rendered("{\"metadata\":{\"name\":\"other\",\"uid\":\"u2\"},\"spec\":{\"resourceRegistration\":\"dra\"}}",
			     &o, "DeviceClass");
		cJSON *cj = cJSON_Parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"apps\"},\"status\":{\"allocation\":"
					"{\"devices\":{\"results\":[{\"driver\":\"gpu.intel.com\"}]}}}}");
		if (claims)
			cr_assert_eq(gk_kobj_resource_claim_from_json(cj, &RCS[SNAP.n_resource_claims++], NULL), 0);
		cJSON_Delete(cj);
		load();
		pass();
		cr_assert_not(logged("delete DeviceClass gpu.intel.com"));
		cr_assert_eq(R.n_errors, 0, "claims %d: %s", claims, R.errors[0]);
		cr_assert(logged("finalizers"), "nothing of this policy's left: its finalizer goes");
	}
}

/* A delete that finds a call on the object in flight or backing off (perhaps another
 * policy's: the end of that call re-runs the object's owner, maybe not this policy):
 * the pass looks again later instead of waiting for an event that may never come. */
Test(opmgr_pass, a_write_it_did_not_start_is_looked_at_again)
{
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1" };
	int answers[] = { GK_OPP_WR_BUSY, GK_OPP_WR_WAIT, GK_OPP_WR_STARTED };
	for (size_t i = 0; i < 3; i++) {
		reset();
		DEL_ANSWER = answers[i];
		add_policy(CP_DP(OURS, DELETING));
		add_rendered("{\"metadata\":{\"name\":\"gpu\",\"uid\":\"u1\"},\"spec\":{\"resourceRegistration\":\"dp\"}}", &o,
			     "DaemonSet");
		load();
		pass();
		cr_assert(logged("delete DaemonSet gpu-device-plugin"));
		cr_assert_eq(R.requeue_ms, i < 2 ? GK_OPP_REQUEUE_MS : 0, "answer %d: requeue %lld", answers[i],
			     (long long)R.requeue_ms);
	}
}

/* the DRA kinds served but claims not watched (an older resource.k8s.io): fail closed */
Test(opmgr_pass, unknown_claims_block_the_dra_removal)
{
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1beta1" };
	DISC.dra = 0;
	DISC.dra_version = "v1beta1";
	add_policy(CP_DP(OURS, ""));
	add_rendered("{\"metadata\":{\"name\":\"gpu\",\"uid\":\"u1\"},\"spec\":{\"resourceRegistration\":\"dra\"}}", &o, NULL);
	load();
	pass();
	cr_assert_not(logged("delete DaemonSet gpu-gpu-dra"));
	cr_assert(strstr(R.errors[0], "cannot tell whether a ResourceClaim holds a GPU") != NULL, "%s", R.errors[0]);
	cr_assert_eq(R.requeue_ms, GK_OPP_REQUEUE_MS);
}

/* a ClusterRoleBinding waits for its ClusterRole (the API server's escalation check
 * of a binding refuses it while the role does not exist) */
Test(opmgr_pass, binding_after_its_role)
{
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1" };
	const char *dra = "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"gpu\","
			  "\"uid\":\"u1\",\"finalizers\":[" OURS "]},\"spec\":{\"resourceRegistration\":\"dra\"}}";
	add_policy(dra);
	load();
	pass();
	cr_assert(logged("create ClusterRole gpu-gpu-dra"));
	cr_assert_not(logged("create ClusterRoleBinding gpu-gpu-dra"));
	reset();
	add_policy(dra);
	add_rendered(dra, &o, "ClusterRole");
	load();
	pass();
	cr_assert(logged("create ClusterRoleBinding gpu-gpu-dra"));
}

/* ---- Kueue ------------------------------------------------------------------------------- */

#define CP_KUEUE(fins, extra, rr, on) "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{" \
	"\"name\":\"gpu\",\"uid\":\"u1\",\"resourceVersion\":\"5\",\"finalizers\":[" fins "]" extra "},\"spec\":{" \
	"\"resourceRegistration\":\"" rr "\",\"enableKueue\":" on ",\"kueue\":{\"equalResources\":[{\"name\":\"q-a\"," \
	"\"localQueues\":[{\"name\":\"lq\",\"namespace\":\"team\"}]},{\"name\":\"q-b\",\"localQueues\":[]}]}}}"

static void kueue_disc(bool served, bool listed)
{
	DISC.has_kueue = DISC.has_kueue_listed = 1;
	DISC.kueue = served;
	DISC.kueue_listed = listed;
}

static void add_node(const char *name, const char *alloc)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"%s\"},\"status\":{\"allocatable\":{%s}}}", name, alloc);
	cJSON *j = cJSON_Parse(buf);
	cr_assert_not_null(j);
	cr_assert_eq(gk_kobj_node_from_json(j, &NODES[SNAP.n_nodes++], NULL), 0);
	cJSON_Delete(j);
}

/* every Kueue object the policy renders with these totals, as the API holds it */
static void add_kueue_rendered(const char *cpj, int64_t xe)
{
	gk_op_ktotals t = { 0 };
	t.value[GK_OP_KR_XE] = xe;
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1", .kueue = true, .kueue_totals = &t };
	add_rendered(cpj, &o, "ResourceFlavor");
	add_rendered(cpj, &o, "ClusterQueue");
	add_rendered(cpj, &o, "LocalQueue");
}

static bool has_error(const char *s)
{
	for (size_t i = 0; i < R.n_errors; i++)
		if (strstr(R.errors[i], s))
			return true;
	return false;
}

static bool kueue_written(void)
{
	for (size_t i = 0; i < F.n; i++)
		if (strstr(F.log[i], "Queue ") || strstr(F.log[i], "ResourceFlavor "))
			return true;
	return false;
}

/* dp mode: the quotas are the GPU nodes' allocatable (from the view), halved */
Test(opmgr_pass, kueue_quotas_from_the_nodes)
{
	kueue_disc(true, true);
	add_policy(CP_KUEUE(OURS, "", "dp", "true"));
	add_node("n1", "\"cpu\":\"8\",\"memory\":\"2Gi\",\"gpu.intel.com/xe\":\"3\"");
	add_node("n2", "\"cpu\":\"4\",\"memory\":\"1Gi\",\"gpu.intel.com/xe\":\"2\"");
	add_node("cpu-only", "\"cpu\":\"64\",\"memory\":\"64Gi\"");
	load();
	pass();
	cr_assert(logged("create ResourceFlavor gpu.intel.com-kueue-flavor"));
	cr_assert(logged("create ClusterQueue q-b"));
	cr_assert(logged("create LocalQueue lq"));
	cr_assert_str_eq(CREATED_QA,
			 "{\"namespaceSelector\":{},\"resourceGroups\":[{\"coveredResources\":[\"cpu\",\"gpu.intel.com/xe\","
			 "\"memory\"],\"flavors\":[{\"name\":\"gpu.intel.com-kueue-flavor\",\"resources\":[{\"name\":\"cpu\","
			 "\"nominalQuota\":\"6\"},{\"name\":\"gpu.intel.com/xe\",\"nominalQuota\":\"3\"},{\"name\":\"memory\","
			 "\"nominalQuota\":\"1610612736\"}]}]}]}");
	cr_assert_eq(R.n_errors, 0, "%s", R.errors[0]);
	/* the live queues hold the quotas of xe=4 (2+2): the cluster's 5 patch the first (3) */
	reset();
	kueue_disc(true, true);
	add_policy(CP_KUEUE(OURS, "", "dp", "true"));
	add_kueue_rendered(CP_KUEUE(OURS, "", "dp", "true"), 4);
	add_node("n1", "\"gpu.intel.com/xe\":\"3\"");
	add_node("n2", "\"gpu.intel.com/xe\":\"2\"");
	load();
	pass();
	cr_assert(logged("patch ClusterQueue q-a"));
	cr_assert_not(logged("patch ClusterQueue q-b"), "its share is the same");
	cr_assert_not(logged("create ResourceFlavor gpu.intel.com-kueue-flavor"));
	/* the same totals: nothing written */
	reset();
	kueue_disc(true, true);
	add_policy(CP_KUEUE(OURS, "", "dp", "true"));
	add_kueue_rendered(CP_KUEUE(OURS, "", "dp", "true"), 4);
	add_node("n1", "\"gpu.intel.com/xe\":\"4\"");
	load();
	pass();
	cr_assert_eq(F.n, 1, "only the device plugin: %s", F.log[1]);
}

/* Kueue not installed: the status says so, nothing is written or retried */
Test(opmgr_pass, kueue_not_installed_says_so_once)
{
	kueue_disc(false, false);
	add_policy(CP_KUEUE(OURS, "", "dp", "true"));
	add_node("n1", "\"gpu.intel.com/xe\":\"4\"");
	load();
	pass();
	cr_assert(has_error(GK_OP_MSG_KUEUE_ABSENT));
	cr_assert_not(kueue_written());
	cr_assert_not(R.failed, "not an error loop");
	cr_assert_eq(R.requeue_ms, 0);
	cr_assert(logged("create DaemonSet gpu-device-plugin"), "the rest goes on");
}

/* dra mode: nothing decided before the ResourceSlices are listed (an empty view is not an empty cluster) */
Test(opmgr_pass, kueue_dra_waits_for_the_slices)
{
	kueue_disc(true, true);
	add_policy(CP_KUEUE(OURS, "", "dra", "true"));
	add_kueue_rendered(CP_KUEUE(OURS, "", "dra", "true"), 4);
	load();
	pass();
	cr_assert_not(kueue_written(), "%s", F.log[0]);
	cr_assert(has_error("waiting for the ResourceSlices"));
	cr_assert_not(R.failed);
}

/* enableKueue off: ours go, but only once the Kueue kinds are listed */
Test(opmgr_pass, kueue_off_deletes_only_what_was_listed)
{
	const char *cpj = CP_KUEUE(OURS, "", "dp", "false");
	kueue_disc(true, false);
	add_policy(cpj);
	add_kueue_rendered(CP_KUEUE(OURS, "", "dp", "true"), 4);
	load();
	pass();
	cr_assert_not(kueue_written(), "served, not listed: %s", F.log[0]);
	kueue_disc(true, true);
	load();
	pass();
	cr_assert(logged("delete LocalQueue lq"));
	cr_assert(logged("delete ClusterQueue q-a"));
	cr_assert(logged("delete ClusterQueue q-b"));
	cr_assert(logged("delete ResourceFlavor gpu.intel.com-kueue-flavor"));
}

/* the teardown: the Kueue objects in the last stage; an unconfirmed list keeps the finalizer */
Test(opmgr_pass, kueue_teardown_fails_closed)
{
	const char *cpj = CP_KUEUE(OURS, DELETING, "dp", "true");
	kueue_disc(true, false);
	add_policy(cpj);
	add_kueue_rendered(CP_KUEUE(OURS, "", "dp", "true"), 4);
	load();
	pass();
	cr_assert_eq(F.n, 0, "not listed: nothing deleted, the finalizer stays: %s", F.log[0]);
	cr_assert(has_error("waiting for the ResourceFlavors, ClusterQueues and LocalQueues to be listed"));
	kueue_disc(true, true);
	load();
	pass();
	cr_assert(logged("delete LocalQueue lq"));
	cr_assert(logged("delete ResourceFlavor gpu.intel.com-kueue-flavor"));
	cr_assert_not(logged("finalizers"), "objects left: the finalizer stays");
	/* listed and none left: the finalizer goes */
	reset();
	kueue_disc(true, true);
	add_policy(cpj);
	load();
	pass();
	cr_assert(logged("finalizers"));
}

/* ---- what gpu-base-operator left --------------------------------------------------------- */

/* A NodeFeatureRule the watcher cannot show (no label of ours): read once before anything is
 * decided; deleted only when the read shows upstream's markers for this policy. */
Test(opmgr_pass, upstream_leftover_read_before_any_delete)
{
	DISC.has_nfd = DISC.nfd = 1;
	add_policy(CP_DP(OURS, ""));
	PROBE = GK_OPP_WR_STARTED;
	load();
	pass();
	cr_assert(logged("probe NodeFeatureRule intel-gpu-devices"));
	cr_assert_not(logged("delete NodeFeatureRule intel-gpu-devices"));
	cr_assert_gt(R.pending, 0, "being read: decided on the next pass");
	/* the read said 404 (remembered by the writer): nothing to do */
	PROBE = GK_OPP_WR_ABSENT;
	load();
	pass();
	cr_assert_not(logged("delete NodeFeatureRule intel-gpu-devices"));
	/* the read found upstream's rule (its labels, no managed-by): deleted by uid */
	add_obj(cJSON_Parse("{\"apiVersion\":\"nfd.k8s-sigs.io/v1alpha1\",\"kind\":\"NodeFeatureRule\",\"metadata\":{"
			    "\"name\":\"intel-gpu-devices\",\"uid\":\"r1\",\"resourceVersion\":\"3\",\"labels\":{\"app\":"
			    "\"nfd-gpu\",\"owner\":\"gpu\"}}}"));
	load();
	pass();
	cr_assert(logged("delete NodeFeatureRule intel-gpu-devices"));
	/* another policy's rule of that name is left alone */
	gk_kobj_free(OBJS[--SNAP.n_operands]);
	add_obj(cJSON_Parse("{\"apiVersion\":\"nfd.k8s-sigs.io/v1alpha1\",\"kind\":\"NodeFeatureRule\",\"metadata\":{"
			    "\"name\":\"intel-gpu-devices\",\"uid\":\"r1\",\"resourceVersion\":\"3\",\"labels\":{\"app\":"
			    "\"nfd-gpu\",\"owner\":\"other\"}}}"));
	load();
	pass();
	cr_assert_not(logged("delete NodeFeatureRule intel-gpu-devices"));
}

/* the teardown keeps the finalizer while such a read is in flight or failed */
Test(opmgr_pass, upstream_leftover_unread_keeps_the_finalizer)
{
	DISC.has_nfd = DISC.nfd = 1;
	add_policy(CP_DP(OURS, DELETING));
	PROBE = GK_OPP_WR_FAILED;
	load();
	pass();
	cr_assert(logged("probe ResourceClaimTemplate gpu-monitor-claim"), "the first stage's leftover is read first");
	cr_assert_not(logged("probe NodeFeatureRule intel-gpu-devices"), "the next stages wait");
	cr_assert_not(logged("finalizers"), "a failed read is not an absence");
	cr_assert(R.failed);
	PROBE = GK_OPP_WR_ABSENT;
	load();
	pass();
	cr_assert(logged("probe NodeFeatureRule intel-gpu-devices"));
	cr_assert(logged("finalizers"), "every read said 404: the finalizers go");
}

/* ---- fail closed on what the watcher cannot vouch for (ARCHITECTURE.md §4) ---------------- */
static Gpukmm__Unconfirmed UC[3];
static Gpukmm__Unconfirmed *UCP[3];
static char *UC_KEYS[3][2], *UC_ERRS[3][2];

/* topic unconfirmed as a whole (reason) or with one unreadable object (key) */
static void unconfirmed(const char *topic, const char *reason, const char *key)
{
	size_t i = DISC.n_unconfirmed;
	gpukmm__unconfirmed__init(&UC[i]);
	UC[i].topic = (char *)topic;
	UC[i].reason = (char *)(reason ? reason : "");
	if (key) {
		UC_KEYS[i][0] = (char *)key;
		UC_ERRS[i][0] = "spec: not an object";
		UC[i].unreadable = UC_KEYS[i];
		UC[i].n_unreadable = 1;
		UC[i].unreadable_errors = UC_ERRS[i];
		UC[i].n_unreadable_errors = 1;
		UC[i].has_unreadable_count = 1;
		UC[i].unreadable_count = 1;
	}
	UCP[i] = &UC[i];
	DISC.unconfirmed = UCP;
	DISC.n_unconfirmed = i + 1;
}

#define DRA_SPEC "{\"metadata\":{\"name\":\"gpu\",\"uid\":\"u1\"},\"spec\":{\"resourceRegistration\":\"dra\"}}"

/* dra -> dp with the claims' list failing: no claim is seen, none is known free */
Test(opmgr_pass, unconfirmed_claims_block_the_dra_removal)
{
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1" };
	add_policy(CP_DP(OURS, ""));
	add_rendered(DRA_SPEC, &o, NULL);
	unconfirmed("resourceclaim", "resourceclaims (v1): list failed: the body is null", NULL);
	load();
	pass();
	cr_assert_not(logged("delete DaemonSet gpu-gpu-dra"), "the claims cannot be vouched for: the DRA driver stays");
	cr_assert_not(logged("delete DeviceClass gpu.intel.com"));
	cr_assert_eq(R.requeue_ms, GK_OPP_REQUEUE_MS);
	cr_assert(strstr(R.errors[0], "GPU ResourceClaims that could not be confirmed (resourceclaims (v1): list failed") &&
			  strstr(R.errors[0], "blocking the removal of the DRA driver gpu-gpu-dra"),
		  "%s", R.errors[0]);
	/* one unreadable claim makes all of them unconfirmed (they are read as a set) */
	reset();
	add_policy(CP_DP(OURS, ""));
	add_rendered(DRA_SPEC, &o, NULL);
	unconfirmed("resourceclaim", NULL, "apps/c");
	load();
	pass();
	cr_assert_not(logged("delete DaemonSet gpu-gpu-dra"));
	/* the policy deleted: the DRA stage and the finalizers wait too */
	reset();
	add_policy(CP_DP(OURS ",\"gpukmm.io/module-protection\"", DELETING));
	add_rendered(DRA_SPEC, &o, NULL);
	unconfirmed("resourceclaim", "resourceclaims (v1): watch failed: 503", NULL);
	load();
	pass();
	cr_assert_eq(F.n, 0, "%s", F.log[0]);
	/* confirmed again, none allocated: removed */
	reset();
	add_policy(CP_DP(OURS, ""));
	add_rendered(DRA_SPEC, &o, NULL);
	load();
	pass();
	cr_assert(logged("delete DaemonSet gpu-gpu-dra"));
}

/* the teardown reads "gone" from the view: only when the watcher can vouch for the operands */
Test(opmgr_pass, teardown_absence_must_be_confirmed)
{
	const char *cpj = CP_DP(OURS ",\"gpukmm.io/module-protection\"", DELETING);
	add_policy(cpj);
	unconfirmed("operand", "daemonsets: list failed: 503 Service Unavailable", NULL);
	load();
	pass();
	cr_assert_eq(F.n, 0, "an operand list failing is not an absence: %s", F.log[0]);
	cr_assert_eq(R.requeue_ms, GK_OPP_REQUEUE_MS);
	cr_assert(strstr(R.errors[0], "deletion of ClusterPolicy gpu waits: DaemonSet " NS "/gpu-device-plugin could "
				      "not be confirmed gone (daemonsets: list failed: 503") != NULL,
		  "%s", R.errors[0]);
	/* one operand of ours unreadable (it exists): it is not gone */
	reset();
	add_policy(cpj);
	unconfirmed("operand", NULL, "daemonsets/" NS "/gpu-gpu-dra");
	load();
	pass();
	cr_assert_eq(F.n, 0, "%s", F.log[0]);
	cr_assert(strstr(R.errors[0], "DaemonSet " NS "/gpu-gpu-dra could not be confirmed gone (spec: not an object)"),
		  "%s", R.errors[0]);
	/* someone else's unreadable object: not ours to wait for */
	reset();
	add_policy(cpj);
	unconfirmed("operand", NULL, "configmaps/" NS "/users-own");
	load();
	pass();
	cr_assert_eq(F.n, 1);
	cr_assert_str_eq(F.log[0], "finalizers gpukmm.io/module-protection");
}

/* a live policy we cannot read: the copy we hold may be stale, no operand is removed on it */
Test(opmgr_pass, unreadable_policy_removes_nothing)
{
	gk_op_opts o = { .namespace_ = NS, .kmm = true, .dra_version = "v1" };
	add_policy(CP_DP(OURS, ""));
	add_rendered(DRA_SPEC, &o, NULL);
	unconfirmed("clusterpolicy", NULL, "gpu");
	load();
	pass();
	cr_assert_not(logged("delete DaemonSet gpu-gpu-dra"));
	cr_assert_not(logged("delete ClusterRole gpu-gpu-dra"));
	cr_assert(logged("create DaemonSet gpu-device-plugin"), "creation is not held");
	cr_assert(strstr(R.errors[0], "removal of operands of ClusterPolicy gpu waits: the ClusterPolicy could not be "
				      "confirmed (spec: not an object)"),
		  "%s", R.errors[0]);
	/* another policy unreadable: not this one's business */
	reset();
	add_policy(CP_DP(OURS, ""));
	add_rendered(DRA_SPEC, &o, NULL);
	unconfirmed("clusterpolicy", NULL, "other");
	load();
	pass();
	cr_assert(logged("delete DaemonSet gpu-gpu-dra"));
}

/* Kueue removals obey the same gates: an unreadable LocalQueue or an operand watch gap is not
 * an absence (the finalizers stay), a policy we cannot read removes no queue */
Test(opmgr_pass, kueue_removal_fails_closed_on_the_unconfirmed)
{
	const char *dying = CP_KUEUE(OURS, DELETING, "dp", "true");
	kueue_disc(true, true);
	add_policy(dying);
	unconfirmed("operand", NULL, "localqueues/team/lq");
	load();
	pass();
	cr_assert_eq(F.n, 0, "an unreadable LocalQueue is not gone: %s", F.log[0]);
	cr_assert(has_error("deletion of ClusterPolicy gpu waits: its LocalQueues could not be confirmed gone "
			    "(spec: not an object)"));
	cr_assert_eq(R.requeue_ms, GK_OPP_REQUEUE_MS);
	/* the Kueue watches in a gap */
	reset();
	kueue_disc(true, true);
	add_policy(dying);
	unconfirmed("operand", "clusterqueues (v1beta2): watch failed: 503", NULL);
	load();
	pass();
	cr_assert_not(logged("finalizers"), "%s", F.log[0]);
	/* confirmed, none there: the finalizers go */
	reset();
	kueue_disc(true, true);
	add_policy(dying);
	load();
	pass();
	cr_assert(logged("finalizers"));
	/* a live policy with enableKueue off that we cannot read: its queues stay */
	reset();
	kueue_disc(true, true);
	add_policy(CP_KUEUE(OURS, "", "dp", "false"));
	add_kueue_rendered(CP_KUEUE(OURS, "", "dp", "true"), 4);
	unconfirmed("clusterpolicy", NULL, "gpu");
	load();
	pass();
	cr_assert_not(kueue_written(), "%s", F.log[0]);
	cr_assert(has_error("removal of operands of ClusterPolicy gpu waits"));
}
