/* gpukmm-modmgr: the view (snapshot + events → cache + dirty keys). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../../services/modmgr/view.h"

#define NS "intel-gpu-base-operator"

static char dirty[64][64];
static int n_dirty;

static void on_dirty(void *user, const char *p)
{
	(void)user;
	for (int i = 0; i < n_dirty; i++)
		if (strcmp(dirty[i], p) == 0)
			return;
	cr_assert_lt(n_dirty, 64);
	snprintf(dirty[n_dirty++], 64, "%s", p);
}

static bool is_dirty(const char *p)
{
	for (int i = 0; i < n_dirty; i++)
		if (strcmp(dirty[i], p) == 0)
			return true;
	return false;
}

static void reset_dirty(void)
{
	n_dirty = 0;
}

static gk_mmv *mk(size_t max)
{
	gk_mmv *v;
	gk_mmv_opts o = { .ns = NS, .max_objects = max };
	cr_assert_eq(gk_mmv_new(&v, &o, on_dirty, NULL, NULL), 0);
	reset_dirty();
	return v;
}

/* typed objects */
typedef struct cpfx {
	Gpukmm__ObjectMeta md;
	Gpukmm__ClusterPolicy cp;
} cpfx;
static void mkcp(cpfx *f, const char *name)
{
	gpukmm__object_meta__init(&f->md);
	f->md.name = (char *)name;
	gpukmm__cluster_policy__init(&f->cp);
	f->cp.metadata = &f->md;
}

typedef struct mfx {
	Gpukmm__ObjectMeta md;
	Gpukmm__OwnerReference o;
	Gpukmm__OwnerReference *os[1];
	Gpukmm__Module m;
} mfx;
static void mkmod(mfx *f, const char *name, const char *ns, const char *owner)
{
	gpukmm__object_meta__init(&f->md);
	f->md.name = (char *)name;
	f->md.namespace_ = (char *)ns;
	gpukmm__owner_reference__init(&f->o);
	if (owner) {
		f->o.kind = "ClusterPolicy";
		f->o.name = (char *)owner;
		f->o.has_controller = f->o.controller = 1;
		f->os[0] = &f->o;
		f->md.owner_references = f->os;
		f->md.n_owner_references = 1;
	}
	gpukmm__module__init(&f->m);
	f->m.metadata = &f->md;
}

static Gpukmm__Event ev_of(int type)
{
	Gpukmm__Event e;
	gpukmm__event__init(&e);
	e.has_type = 1;
	e.type = type;
	return e;
}

Test(view, policy_events_cache_and_mark)
{
	gk_mmv *v = mk(0);
	cpfx a;
	mkcp(&a, "gpu");
	Gpukmm__Event e = ev_of(GPUKMM__EVENT_TYPE__ADDED);
	e.object_case = GPUKMM__EVENT__OBJECT_CLUSTER_POLICY;
	e.cluster_policy = &a.cp;
	cr_assert_eq(gk_mmv_apply(v, "clusterpolicy", &e, NULL), 0);
	cr_assert(is_dirty("gpu"));
	cr_assert_not_null(gk_mmv_policy(v, "gpu"));
	cr_assert_neq(gk_mmv_policy(v, "gpu"), &a.cp, "the view keeps a copy");
	gk_mm_view mv;
	gk_mmv_view(v, "gpu", &mv);
	cr_assert_not_null(mv.policy);
	cr_assert_null(mv.module);
	cr_assert_str_eq(mv.ns, NS);
	cr_assert(mv.leader, "no leadership information: we lead");
	cr_assert_not(mv.kmm);
	reset_dirty();
	e.type = GPUKMM__EVENT_TYPE__DELETED;
	gk_mmv_apply(v, "clusterpolicy", &e, NULL);
	cr_assert(is_dirty("gpu"));
	cr_assert_null(gk_mmv_policy(v, "gpu"));
	gk_mmv_free(v);
}

Test(view, module_events_mark_owner_and_name_policy)
{
	gk_mmv *v = mk(0);
	mfx m;
	mkmod(&m, "gpu-gpu", NS, "owner");
	Gpukmm__Event e = ev_of(GPUKMM__EVENT_TYPE__MODIFIED);
	e.object_case = GPUKMM__EVENT__OBJECT_MODULE;
	e.module = &m.m;
	gk_mmv_apply(v, "module", &e, NULL);
	cr_assert(is_dirty("gpu"));
	cr_assert(is_dirty("owner"));
	cr_assert_not_null(gk_mmv_module(v, "gpu-gpu"));
	gk_mm_view mv;
	gk_mmv_view(v, "gpu", &mv);
	cr_assert_not_null(mv.module);
	/* other namespaces are ignored */
	reset_dirty();
	mfx o;
	mkmod(&o, "x-gpu", "elsewhere", NULL);
	e.module = &o.m;
	gk_mmv_apply(v, "module", &e, NULL);
	cr_assert_eq(n_dirty, 0);
	cr_assert_null(gk_mmv_module(v, "x-gpu"));
	gk_mmv_state st;
	gk_mmv_state_get(v, &st);
	cr_assert_eq(st.ignored, 1);
	/* delete */
	e.module = &m.m;
	e.type = GPUKMM__EVENT_TYPE__DELETED;
	gk_mmv_apply(v, "module", &e, NULL);
	cr_assert_null(gk_mmv_module(v, "gpu-gpu"));
	gk_mmv_free(v);
}

Test(view, an_event_of_the_version_already_held_changes_nothing)
{
	gk_mmv *v = mk(0);
	/* our write's answer is folded in; then its watch event arrives */
	mfx m;
	mkmod(&m, "gpu-gpu", NS, "gpu");
	m.md.resource_version = "7";
	cr_assert_eq(gk_mmv_put_module(v, "gpu-gpu", &m.m, NULL), 0);
	cpfx c;
	mkcp(&c, "gpu");
	c.md.resource_version = "5";
	cr_assert_eq(gk_mmv_put_policy(v, "gpu", &c.cp, NULL), 0);
	reset_dirty();
	Gpukmm__Event e = ev_of(GPUKMM__EVENT_TYPE__MODIFIED);
	e.object_case = GPUKMM__EVENT__OBJECT_MODULE;
	e.module = &m.m;
	gk_mmv_apply(v, "module", &e, NULL);
	e.object_case = GPUKMM__EVENT__OBJECT_CLUSTER_POLICY;
	e.cluster_policy = &c.cp;
	gk_mmv_apply(v, "clusterpolicy", &e, NULL);
	cr_assert_eq(n_dirty, 0, "the echo of our own write runs no pass");
	/* a newer version does */
	m.md.resource_version = "8";
	e.object_case = GPUKMM__EVENT__OBJECT_MODULE;
	e.module = &m.m; /* (a oneof: one pointer at a time) */
	gk_mmv_apply(v, "module", &e, NULL);
	cr_assert(is_dirty("gpu"));
	cr_assert_str_eq(gk_mmv_module(v, "gpu-gpu")->metadata->resource_version, "8");
	/* and a delete of the same version is still a delete */
	reset_dirty();
	e.type = GPUKMM__EVENT_TYPE__DELETED;
	gk_mmv_apply(v, "module", &e, NULL);
	cr_assert(is_dirty("gpu"));
	cr_assert_null(gk_mmv_module(v, "gpu-gpu"));
	/* objects without a resourceVersion are always taken */
	c.md.resource_version = NULL;
	cr_assert_eq(gk_mmv_put_policy(v, "gpu", &c.cp, NULL), 0);
	reset_dirty();
	e.type = GPUKMM__EVENT_TYPE__MODIFIED;
	e.object_case = GPUKMM__EVENT__OBJECT_CLUSTER_POLICY;
	e.cluster_policy = &c.cp;
	gk_mmv_apply(v, "clusterpolicy", &e, NULL);
	cr_assert(is_dirty("gpu"));
	gk_mmv_free(v);
}

Test(view, claims_mark_all_only_when_any_flips)
{
	gk_mmv *v = mk(0);
	cpfx a, b;
	mkcp(&a, "a");
	mkcp(&b, "b");
	gk_mmv_put_policy(v, "a", &a.cp, NULL);
	gk_mmv_put_policy(v, "b", &b.cp, NULL);
	Gpukmm__ObjectMeta md;
	gpukmm__object_meta__init(&md);
	md.name = "c1";
	md.namespace_ = "user";
	Gpukmm__ResourceClaim c;
	gpukmm__resource_claim__init(&c);
	c.metadata = &md;
	char *drv[] = { "gpu.intel.com" };
	c.has_allocated = c.allocated = 1;
	c.allocated_drivers = drv;
	c.n_allocated_drivers = 1;
	Gpukmm__Event e = ev_of(GPUKMM__EVENT_TYPE__ADDED);
	e.object_case = GPUKMM__EVENT__OBJECT_RESOURCE_CLAIM;
	e.resource_claim = &c;
	reset_dirty();
	gk_mmv_apply(v, "resourceclaim", &e, NULL);
	cr_assert(is_dirty("a") && is_dirty("b"));
	gk_mm_view mv;
	gk_mmv_view(v, "a", &mv);
	cr_assert(mv.claims_allocated);
	/* a second claim: no flip, nobody dirty */
	reset_dirty();
	md.name = "c2";
	gk_mmv_apply(v, "resourceclaim", &e, NULL);
	cr_assert_eq(n_dirty, 0);
	/* c1 deallocated: still c2 */
	md.name = "c1";
	c.allocated = 0;
	e.type = GPUKMM__EVENT_TYPE__MODIFIED;
	gk_mmv_apply(v, "resourceclaim", &e, NULL);
	cr_assert_eq(n_dirty, 0);
	gk_mmv_view(v, "a", &mv);
	cr_assert(mv.claims_allocated);
	/* c2 deleted: flips */
	md.name = "c2";
	c.allocated = 1;
	e.type = GPUKMM__EVENT_TYPE__DELETED;
	gk_mmv_apply(v, "resourceclaim", &e, NULL);
	cr_assert(is_dirty("a") && is_dirty("b"));
	gk_mmv_view(v, "a", &mv);
	cr_assert_not(mv.claims_allocated);
	gk_mmv_free(v);
}

Test(view, pods_and_saturation_fail_safe)
{
	gk_mmv *v = mk(2);
	Gpukmm__ObjectMeta md;
	gpukmm__object_meta__init(&md);
	md.namespace_ = "user";
	Gpukmm__Pod p;
	gpukmm__pod__init(&p);
	p.metadata = &md;
	char *res[] = { "gpu.intel.com/i915" };
	p.gpu_resources = res;
	p.n_gpu_resources = 1;
	Gpukmm__Event e = ev_of(GPUKMM__EVENT_TYPE__ADDED);
	e.object_case = GPUKMM__EVENT__OBJECT_POD;
	e.pod = &p;
	const char *names[] = { "p1", "p2", "p3" };
	for (int i = 0; i < 3; i++) {
		md.name = (char *)names[i];
		gk_mmv_apply(v, "pod", &e, NULL);
	}
	e.type = GPUKMM__EVENT_TYPE__DELETED;
	for (int i = 0; i < 3; i++) {
		md.name = (char *)names[i];
		gk_mmv_apply(v, "pod", &e, NULL);
	}
	gk_mm_view mv;
	gk_mmv_view(v, "a", &mv);
	cr_assert(mv.gpu_pods, "a saturated set answers 'in use' until the next snapshot");
	Gpukmm__SnapshotReply s;
	gpukmm__snapshot_reply__init(&s);
	gk_mmv_load_snapshot(v, &s, NULL);
	gk_mmv_view(v, "a", &mv);
	cr_assert_not(mv.gpu_pods);
	gk_mmv_free(v);
}

Test(view, snapshot_replaces_and_marks_old_and_new_keys)
{
	gk_mmv *v = mk(0);
	cpfx old, a;
	mkcp(&old, "old");
	mkcp(&a, "a");
	gk_mmv_put_policy(v, "old", &old.cp, NULL);
	mfx m, orphan;
	mkmod(&m, "a-gpu", NS, "a");
	mkmod(&orphan, "gone-gpu", NS, "gone");
	Gpukmm__SnapshotReply s;
	gpukmm__snapshot_reply__init(&s);
	Gpukmm__ClusterPolicy *cps[] = { &a.cp };
	Gpukmm__Module *ms[] = { &m.m, &orphan.m };
	s.cluster_policies = cps;
	s.n_cluster_policies = 1;
	s.modules = ms;
	s.n_modules = 2;
	Gpukmm__Discovery d;
	gpukmm__discovery__init(&d);
	d.has_kmm = d.kmm = 1;
	s.discovery = &d;
	Gpukmm__Leadership l;
	gpukmm__leadership__init(&l);
	l.has_leader = 1;
	l.leader = 0;
	s.leadership = &l;
	s.has_synced = s.synced = 1;
	reset_dirty();
	cr_assert_eq(gk_mmv_load_snapshot(v, &s, NULL), 0);
	cr_assert(is_dirty("old"), "vanished policy reconciled once more");
	cr_assert(is_dirty("a"));
	cr_assert(is_dirty("gone"), "orphan Module's policy reconciled (delete it)");
	cr_assert_null(gk_mmv_policy(v, "old"));
	gk_mmv_state st;
	gk_mmv_state_get(v, &st);
	cr_assert(st.synced && st.kmm && !st.dra && !st.leader);
	cr_assert_eq(st.policies, 1);
	cr_assert_eq(st.modules, 2);
	gk_mm_view mv;
	gk_mmv_view(v, "gone", &mv);
	cr_assert_null(mv.policy);
	cr_assert_not_null(mv.module);
	cr_assert_not(mv.leader);
	gk_mmv_free(v);
}

Test(view, discovery_and_leadership_changes_mark_all)
{
	gk_mmv *v = mk(0);
	cpfx a;
	mkcp(&a, "a");
	gk_mmv_put_policy(v, "a", &a.cp, NULL);
	Gpukmm__Discovery d;
	gpukmm__discovery__init(&d);
	d.has_kmm = d.kmm = 1;
	Gpukmm__Event e = ev_of(GPUKMM__EVENT_TYPE__MODIFIED);
	e.object_case = GPUKMM__EVENT__OBJECT_DISCOVERY;
	e.discovery = &d;
	reset_dirty();
	gk_mmv_apply(v, "discovery", &e, NULL);
	cr_assert(is_dirty("a"));
	reset_dirty();
	gk_mmv_apply(v, "discovery", &e, NULL);
	cr_assert_eq(n_dirty, 0, "no change, no work");
	Gpukmm__Leadership l;
	gpukmm__leadership__init(&l);
	l.has_leader = 1;
	e.object_case = GPUKMM__EVENT__OBJECT_LEADERSHIP;
	e.leadership = &l;
	gk_mmv_apply(v, "leadership", &e, NULL);
	cr_assert(is_dirty("a"));
	gk_mm_view mv;
	gk_mmv_view(v, "a", &mv);
	cr_assert_not(mv.leader);
	cr_assert(mv.kmm);
	gk_mmv_free(v);
}

Test(view, garbage_events_are_ignored)
{
	gk_mmv *v = mk(1);
	Gpukmm__Event e = ev_of(GPUKMM__EVENT_TYPE__ADDED);
	cr_assert_eq(gk_mmv_apply(v, "clusterpolicy", &e, NULL), 0, "no object");
	cr_assert_eq(gk_mmv_apply(v, "x", NULL, NULL), 0);
	cpfx noname;
	mkcp(&noname, NULL);
	e.object_case = GPUKMM__EVENT__OBJECT_CLUSTER_POLICY;
	e.cluster_policy = &noname.cp;
	cr_assert_eq(gk_mmv_apply(v, "clusterpolicy", &e, NULL), 0);
	gk_mmv_state st;
	gk_mmv_state_get(v, &st);
	cr_assert_eq(st.ignored, 3);
	cr_assert_eq(st.policies, 0);
	/* bound */
	cpfx a, b;
	mkcp(&a, "a");
	mkcp(&b, "b");
	gk_err err;
	e.cluster_policy = &a.cp;
	cr_assert_eq(gk_mmv_apply(v, "clusterpolicy", &e, &err), 0);
	e.cluster_policy = &b.cp;
	cr_assert_eq(gk_mmv_apply(v, "clusterpolicy", &e, &err), GK_RESOURCE_EXHAUSTED);
	cr_assert(strstr(err.msg, "more than 1"), "%s", err.msg);
	gk_mmv_free(v);
}

/* ---- the safety rule: what the watcher cannot vouch for ---- */

static void discovery_with(gk_mmv *v, Gpukmm__Unconfirmed **u, size_t n)
{
	Gpukmm__Discovery d;
	gpukmm__discovery__init(&d);
	d.has_kmm = d.kmm = d.has_dra = d.dra = 1;
	d.unconfirmed = u;
	d.n_unconfirmed = n;
	Gpukmm__Event e = ev_of(GPUKMM__EVENT_TYPE__MODIFIED);
	e.object_case = GPUKMM__EVENT__OBJECT_DISCOVERY;
	e.discovery = &d;
	cr_assert_eq(gk_mmv_apply(v, "discovery", &e, NULL), 0);
}

Test(view, unconfirmed_topics_and_unreadable_objects)
{
	gk_mmv *v = mk(0);
	cpfx a, b;
	mkcp(&a, "gpu");
	mkcp(&b, "other");
	gk_mmv_put_policy(v, "gpu", &a.cp, NULL);
	gk_mmv_put_policy(v, "other", &b.cp, NULL);
	discovery_with(v, NULL, 0);
	gk_mm_view mv;
	gk_mmv_view(v, "gpu", &mv);
	cr_assert_null(mv.policy_unconfirmed);
	cr_assert_null(mv.module_unconfirmed);
	cr_assert_null(mv.claims_unconfirmed);
	cr_assert_null(mv.pods_unconfirmed);

	/* the claims' list fails, Module gpu-gpu and policy "gpu" cannot be read */
	char *mk_[] = { NS "/gpu-gpu" }, *me[] = { "spec.selector: expected object, got string" };
	char *pk[] = { "gpu" }, *pe[] = { "spec: expected object, got array" };
	Gpukmm__Unconfirmed uc, um, up;
	gpukmm__unconfirmed__init(&uc);
	uc.topic = "resourceclaim";
	uc.reason = "resourceclaims: list failed: the resource.k8s.io/v1 list answer is not a list: items is nothing";
	gpukmm__unconfirmed__init(&um);
	um.topic = "module";
	um.reason = "";
	um.unreadable = mk_;
	um.unreadable_errors = me;
	um.n_unreadable = um.n_unreadable_errors = 1;
	um.has_unreadable_count = 1;
	um.unreadable_count = 1;
	gpukmm__unconfirmed__init(&up);
	up.topic = "clusterpolicy";
	up.reason = "";
	up.unreadable = pk;
	up.unreadable_errors = pe;
	up.n_unreadable = up.n_unreadable_errors = 1;
	Gpukmm__Unconfirmed *all[] = { &uc, &um, &up };
	reset_dirty();
	discovery_with(v, all, 3);
	cr_assert(is_dirty("gpu") && is_dirty("other"), "a change of what is unconfirmed marks every policy");
	gk_mmv_view(v, "gpu", &mv);
	cr_assert_not_null(mv.claims_unconfirmed);
	cr_assert(strstr(mv.claims_unconfirmed, "items is nothing"), "%s", mv.claims_unconfirmed);
	cr_assert(mv.module_unreadable && mv.policy_unreadable);
	cr_assert(strstr(mv.module_unconfirmed, "KMM Module " NS "/gpu-gpu could not be read: spec.selector"), "%s",
		  mv.module_unconfirmed);
	cr_assert(strstr(mv.policy_unconfirmed, "ClusterPolicy gpu could not be read"), "%s", mv.policy_unconfirmed);
	/* another policy: only the kind-level reasons apply to it */
	gk_mmv_view(v, "other", &mv);
	cr_assert_null(mv.policy_unconfirmed);
	cr_assert_null(mv.module_unconfirmed, "other-gpu is not the unreadable Module");
	cr_assert_not_null(mv.claims_unconfirmed);
	/* the same state again: nothing to do */
	reset_dirty();
	discovery_with(v, all, 3);
	cr_assert_eq(n_dirty, 0);
	/* one unreadable pod: the pods are unconfirmed as a whole */
	char *podk[] = { "user/p" }, *pode[] = { "spec: expected object" };
	Gpukmm__Unconfirmed upod;
	gpukmm__unconfirmed__init(&upod);
	upod.topic = "pod";
	upod.reason = "";
	upod.unreadable = podk;
	upod.unreadable_errors = pode;
	upod.n_unreadable = upod.n_unreadable_errors = 1;
	Gpukmm__Unconfirmed *pods[] = { &upod };
	discovery_with(v, pods, 1);
	gk_mmv_view(v, "gpu", &mv);
	cr_assert_not_null(mv.pods_unconfirmed);
	cr_assert(strstr(mv.pods_unconfirmed, "user/p"), "%s", mv.pods_unconfirmed);
	cr_assert_null(mv.claims_unconfirmed, "the claims are confirmed again");
	cr_assert_null(mv.policy_unconfirmed);
	gk_mmv_state st;
	gk_mmv_state_get(v, &st);
	cr_assert_eq(st.unconfirmed, 1u << 3);
	gk_mmv_free(v);
}

Test(view, snapshot_carries_the_unconfirmed_topics)
{
	gk_mmv *v = mk(0);
	Gpukmm__SnapshotReply s;
	gpukmm__snapshot_reply__init(&s);
	Gpukmm__Discovery d;
	gpukmm__discovery__init(&d);
	d.has_kmm = 1;
	d.kmm = 0;
	Gpukmm__Unconfirmed um;
	gpukmm__unconfirmed__init(&um);
	um.topic = "module";
	um.reason = "kmm.sigs.x-k8s.io/v1beta1 was served, but is absent in 1 discovery read over 0 s";
	Gpukmm__Unconfirmed *u[] = { &um };
	d.unconfirmed = u;
	d.n_unconfirmed = 1;
	s.discovery = &d;
	s.has_synced = s.synced = 1;
	cr_assert_eq(gk_mmv_load_snapshot(v, &s, NULL), 0);
	gk_mm_view mv;
	gk_mmv_view(v, "gpu", &mv);
	cr_assert_not(mv.kmm);
	cr_assert_not_null(mv.module_unconfirmed, "KMM absent but not confirmed: not believed");
	gk_mmv_free(v);
}
