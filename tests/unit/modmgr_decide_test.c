/* gpukmm-modmgr: the pure reconcile decision, every §8.1 scenario that is a
 * decision (reference gpu-base-operator §2.1, §2.5, §2.6, §4, §5.2, §7.3) and
 * our fixes (DESIGN §5). Objects are built as typed protobuf, as the watcher
 * delivers them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../../services/modmgr/decide.h"

#define NS "intel-gpu-base-operator"

/* ---- fixtures --------------------------------------------------------------- */

typedef struct fx {
	Gpukmm__ObjectMeta cp_md, m_md;
	Gpukmm__ClusterPolicySpec cp_spec;
	Gpukmm__KernelModuleSpec km;
	Gpukmm__ClusterPolicy cp;
	Gpukmm__OwnerReference owner;
	Gpukmm__OwnerReference *owners[1];
	char *fins[2];
	Gpukmm__ModuleLoaderContainer cont;
	Gpukmm__ModuleLoader loader;
	Gpukmm__ModuleSpec m_spec;
	Gpukmm__ModuleLoaderStatus m_st;
	Gpukmm__Module m;
	gk_mm_view v;
	gk_mm_plan p;
} fx;

static fx F;

/* ClusterPolicy "gpu" (mode dra), kernelModule set, our finalizer present, KMM
 * and DRA discovered, leader, no Module yet. */
static void setup(void)
{
	memset(&F, 0, sizeof(F));
	gpukmm__object_meta__init(&F.cp_md);
	F.cp_md.name = "gpu";
	F.cp_md.uid = "uid-cp";
	F.cp_md.has_generation = 1;
	F.cp_md.generation = 3;
	F.fins[0] = GK_MM_FINALIZER;
	F.cp_md.finalizers = F.fins;
	F.cp_md.n_finalizers = 1;
	gpukmm__kernel_module_spec__init(&F.km);
	F.km.module_name = "xe";
	gpukmm__cluster_policy_spec__init(&F.cp_spec);
	F.cp_spec.resource_registration = "dra";
	F.cp_spec.kernel_module = &F.km;
	gpukmm__cluster_policy__init(&F.cp);
	F.cp.metadata = &F.cp_md;
	F.cp.spec = &F.cp_spec;

	gpukmm__owner_reference__init(&F.owner);
	F.owner.api_version = "intel.com/v1alpha1";
	F.owner.kind = "ClusterPolicy";
	F.owner.name = "gpu";
	F.owner.uid = "uid-cp";
	F.owner.has_controller = F.owner.controller = 1;
	F.owners[0] = &F.owner;
	gpukmm__object_meta__init(&F.m_md);
	F.m_md.name = "gpu-gpu";
	F.m_md.namespace_ = NS;
	F.m_md.uid = "uid-m1";
	F.m_md.owner_references = F.owners;
	F.m_md.n_owner_references = 1;
	gpukmm__module_loader_container__init(&F.cont);
	gpukmm__module_loader__init(&F.loader);
	F.loader.container = &F.cont;
	gpukmm__module_spec__init(&F.m_spec);
	F.m_spec.module_loader = &F.loader;
	gpukmm__module_loader_status__init(&F.m_st);
	gpukmm__module__init(&F.m);
	F.m.metadata = &F.m_md;
	F.m.spec = &F.m_spec;

	F.v = (gk_mm_view){
		.policy_name = "gpu", .policy = &F.cp, .module = NULL, .ns = NS, .leader = true,
		.kmm = true, .dra = true,
	};
}

static void module_exists(int avail, int desired)
{
	F.v.module = &F.m;
	F.v.module_up_to_date = true;
	if (avail >= 0) {
		F.m.module_loader_status = &F.m_st;
		F.m_st.has_available_number = F.m_st.has_desired_number = 1;
		F.m_st.available_number = avail;
		F.m_st.desired_number = desired;
	}
}

static const gk_mm_plan *run(void)
{
	gk_mm_decide(&F.v, &F.p);
	return &F.p;
}

static bool has_error(const gk_mm_plan *p, const char *s)
{
	for (size_t i = 0; i < p->n_errors; i++)
		if (strcmp(p->errors[i], s) == 0)
			return true;
	return false;
}

static bool has_event(const gk_mm_plan *p, const char *reason)
{
	for (size_t i = 0; i < p->n_events; i++)
		if (strcmp(p->events[i].reason, reason) == 0)
			return true;
	return false;
}

TestSuite(decide, .init = setup);

/* ---- §8.1 scenarios ------------------------------------------------------------ */

Test(decide, s1_creates_module_with_owner_and_finalizer_first)
{
	F.cp_md.n_finalizers = 0;
	const gk_mm_plan *p = run();
	cr_assert_not(p->idle);
	cr_assert_str_eq(p->module, "gpu-gpu");
	cr_assert_eq(p->module_op, GK_MM_MOD_CREATE);
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_ADD);
	cr_assert(p->has_kmm_status);
	cr_assert_str_eq(p->kmm_status, "0/0");
	cr_assert_eq(p->n_errors, 0);
	cr_assert_eq(p->requeue_after_ms, 0);
	cr_assert(p->report);
	cr_assert_not(p->report_deleted);
	cr_assert_eq(p->generation, 3);
	cr_assert(p->has_success_event);
	cr_assert_str_eq(p->success_event.reason, "ModuleCreated");
	cr_assert_str_eq(p->success_event.message, "Created KMM Module " NS "/gpu-gpu");
	cr_assert_not(p->ordered_upgrade);
}

Test(decide, s2_s12_kernel_module_nil_no_module_status_na)
{
	F.cp_spec.kernel_module = NULL;
	F.cp_md.n_finalizers = 0;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_NONE);
	cr_assert(p->has_kmm_status);
	cr_assert_str_eq(p->kmm_status, "N/A");
	cr_assert_eq(p->n_errors, 0);
	cr_assert_str_eq(p->cond_reason, "InTreeDriver");
	cr_assert_eq(p->n_events, 0);
}

Test(decide, s3_kmm_not_installed_error_no_module_status_untouched)
{
	F.v.kmm = false;
	F.cp_md.n_finalizers = 0;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert(has_error(p, "KMM is not installed in the cluster."));
	cr_assert_eq(p->n_errors, 1);
	cr_assert_not(p->has_kmm_status, "kmmStatus untouched when KMM is absent (§1.5)");
	cr_assert_not(p->failed, "not an error return");
	cr_assert_eq(p->requeue_after_ms, 0);
	cr_assert_str_eq(p->cond_reason, "KMMNotInstalled");
}

Test(decide, s4_stale_error_clears_once_cause_is_gone)
{
	F.v.kmm = false;
	cr_assert_eq(run()->n_errors, 1);
	F.cp_spec.kernel_module = NULL;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->n_errors, 0, "errors are recomputed every pass");
	cr_assert_not(p->has_kmm_status);
}

Test(decide, kmm_uninstalled_releases_our_finalizer)
{
	F.v.kmm = false;
	cr_assert_eq(run()->finalizer_op, GK_MM_FIN_REMOVE);
}

Test(decide, s5_kernel_module_removed_deletes_module)
{
	module_exists(1, 1);
	F.cp_spec.kernel_module = NULL;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_DELETE);
	cr_assert_not(p->delete_for_version_change);
	cr_assert_not(p->has_kmm_status, "kmmStatus left as it was in the pass that deletes (§1.5)");
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_NONE, "finalizer stays until the Module is gone");
	cr_assert_eq(p->n_errors, 0);
	cr_assert_str_eq(p->success_event.reason, "ModuleDeleted");
	/* next pass: the Module is gone */
	F.v.module = NULL;
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_str_eq(p->kmm_status, "N/A");
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_REMOVE);
}

Test(decide, s6_policy_gone_deletes_module_and_reports_deleted)
{
	module_exists(1, 1);
	F.v.policy = NULL;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_DELETE);
	cr_assert(p->report_deleted);
	cr_assert_eq(p->n_errors, 0);
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_NONE);
	F.v.module = NULL;
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_not(p->has_kmm_status, "no status for a policy that is gone");
}

Test(decide, s6_policy_gone_guard_still_applies_without_errors)
{
	module_exists(1, 1);
	F.v.policy = NULL;
	F.v.claims_allocated = true;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_eq(p->requeue_after_ms, GK_MM_REQUEUE_MS);
	cr_assert_eq(p->n_errors, 0, "errors only when the ClusterPolicy still exists (§4.3)");
	cr_assert(has_event(p, "ModuleDeletionBlocked"));
}

Test(decide, s10_version_added_recreates)
{
	module_exists(1, 1);
	F.km.version = "1.0";
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_DELETE);
	cr_assert(p->delete_for_version_change);
	cr_assert_str_eq(p->kmm_status, "Recreating");
	cr_assert_gt(p->requeue_after_ms, 0);
	cr_assert(p->ordered_upgrade);
	cr_assert(strstr(p->success_event.message, "version \"\" -> \"1.0\""), "%s", p->success_event.message);
	/* while KMM holds it: still Recreating, requeued, no second delete */
	F.m_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_str_eq(p->kmm_status, "Recreating");
	cr_assert_eq(p->requeue_after_ms, GK_MM_REQUEUE_MS, "honoured (upstream drops it, §10.3)");
	/* gone: created again with the version */
	F.v.module = NULL;
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_CREATE);
	cr_assert_str_eq(p->kmm_status, "0/0");
}

Test(decide, s10_version_removed_recreates)
{
	module_exists(1, 1);
	F.cont.version = "1.0";
	F.km.version = NULL;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_DELETE);
	cr_assert(p->delete_for_version_change);
	cr_assert_str_eq(p->kmm_status, "Recreating");
	F.km.version = "";
	cr_assert_eq(run()->module_op, GK_MM_MOD_DELETE, "empty string is the same as unset");
}

Test(decide, s10_version_change_between_non_empty_values_patches_in_place)
{
	module_exists(1, 1);
	F.cont.version = "1.0";
	F.km.version = "2.0";
	F.v.module_up_to_date = false;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_PATCH);
	cr_assert_eq(p->requeue_after_ms, 0);
	cr_assert_str_eq(p->kmm_status, "1/1");
	cr_assert_str_eq(p->success_event.reason, "ModuleUpdated");
}

Test(decide, s10_recreate_blocked_by_allocated_claims_then_released)
{
	module_exists(1, 1);
	F.km.version = "1.0";
	F.v.claims_allocated = true;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE, "the Module is kept");
	cr_assert_eq(p->requeue_after_ms, GK_MM_REQUEUE_MS);
	cr_assert(has_error(p, "allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/gpu-gpu "
			       "recreation for version change"));
	cr_assert(has_event(p, "ModuleRecreationBlocked"));
	cr_assert(p->events[0].warning);
	cr_assert_not(p->failed, "a requeue, not an error with backoff");
	F.v.claims_allocated = false;
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_DELETE);
	cr_assert_eq(p->n_errors, 0);
}

Test(decide, s11_deletion_blocked_by_allocated_claims_then_released)
{
	module_exists(1, 1);
	F.cp_spec.kernel_module = NULL;
	F.v.claims_allocated = true;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_eq(p->requeue_after_ms, 5000);
	cr_assert(has_error(p, "allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/gpu-gpu deletion"));
	cr_assert_not(p->failed);
	cr_assert_str_eq(p->cond_reason, "DeletionBlocked");
	F.v.claims_allocated = false;
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_DELETE);
	cr_assert_eq(p->requeue_after_ms, 0);
}

Test(decide, claims_guard_only_when_dra_is_served)
{
	module_exists(1, 1);
	F.cp_spec.kernel_module = NULL;
	F.v.claims_allocated = true;
	F.v.dra = false;
	cr_assert_eq(run()->module_op, GK_MM_MOD_DELETE, "§4.2: no DRA, no claim guard");
}

Test(decide, guard_runs_before_the_pending_deletion_check)
{
	module_exists(1, 1);
	F.cp_spec.kernel_module = NULL;
	F.m_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	F.v.claims_allocated = true;
	const gk_mm_plan *p = run();
	cr_assert(has_error(p, "allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/gpu-gpu deletion"));
	cr_assert_not(has_error(p, "modules.kmm.sigs.x-k8s.io/gpu-gpu is pending deletion"));
}

Test(decide, pending_deletion_reports_removing_and_requeues)
{
	module_exists(1, 1);
	F.cp_spec.kernel_module = NULL;
	F.m_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_str_eq(p->kmm_status, "Removing");
	cr_assert(has_error(p, "modules.kmm.sigs.x-k8s.io/gpu-gpu is pending deletion"));
	cr_assert_eq(p->requeue_after_ms, GK_MM_REQUEUE_MS, "honoured (upstream drops it, §10.3)");
	cr_assert_not(p->failed);
}

Test(decide, not_fully_available_error_and_status)
{
	module_exists(2, 3);
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_str_eq(p->kmm_status, "2/3");
	cr_assert(has_error(p, "module loader not fully available (2/3) for modules.kmm.sigs.x-k8s.io/gpu-gpu"));
	cr_assert_not(p->failed);
	cr_assert_str_eq(p->cond_status, "False");
	cr_assert_str_eq(p->cond_reason, "ModuleLoading");
	module_exists(3, 3);
	p = run();
	cr_assert_eq(p->n_errors, 0);
	cr_assert_str_eq(p->cond_status, "True");
	cr_assert_str_eq(p->cond_reason, "ModuleLoaded");
	module_exists(0, 0);
	p = run();
	cr_assert_str_eq(p->kmm_status, "0/0");
	cr_assert_eq(p->n_errors, 0, "desired 0 is not an error");
}

Test(decide, missing_counts_count_as_zero)
{
	module_exists(-1, -1);
	const gk_mm_plan *p = run();
	cr_assert_str_eq(p->kmm_status, "0/0");
	F.m.module_loader_status = &F.m_st;
	F.m_st.has_desired_number = 1;
	F.m_st.desired_number = 4;
	p = run();
	cr_assert_str_eq(p->kmm_status, "0/4");
}

Test(decide, up_to_date_module_writes_nothing)
{
	module_exists(1, 1);
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_NONE);
	cr_assert_not(p->has_success_event);
	cr_assert_eq(p->n_events, 0);
	cr_assert_str_eq(p->kmm_status, "1/1");
	cr_assert_eq(p->requeue_after_ms, 0);
}

Test(decide, changed_spec_patches)
{
	module_exists(1, 1);
	F.v.module_up_to_date = false;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_PATCH);
	cr_assert_str_eq(p->kmm_status, "1/1", "kmmStatus computed from the Module either way");
}

Test(decide, missing_finalizer_added_even_when_module_exists)
{
	module_exists(1, 1);
	F.cp_md.n_finalizers = 0;
	cr_assert_eq(run()->finalizer_op, GK_MM_FIN_ADD);
}

Test(decide, other_finalizers_are_not_ours)
{
	F.fins[0] = "gpu.intel.com/clusterpolicy-protection";
	cr_assert_eq(run()->finalizer_op, GK_MM_FIN_ADD);
}

Test(decide, not_leader_does_nothing)
{
	module_exists(1, 1);
	F.v.leader = false;
	F.v.module_up_to_date = false;
	const gk_mm_plan *p = run();
	cr_assert(p->idle);
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_NONE);
	cr_assert_not(p->report);
	cr_assert_eq(p->n_events, 0);
}

/* ---- our fixes: deletion through the finalizer (DESIGN §5.4) --------------------- */

Test(decide, policy_deleting_with_kernel_module_deletes_under_guard)
{
	module_exists(1, 1);
	F.cp_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_DELETE, "not left to garbage collection (§10.4)");
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_NONE);
	F.v.claims_allocated = true;
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert(has_error(p, "allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/gpu-gpu deletion"));
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_NONE, "the finalizer holds the policy");
	F.v.claims_allocated = false;
	F.v.module = NULL;
	p = run();
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_REMOVE);
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
}

Test(decide, policy_deleting_never_adds_the_finalizer)
{
	F.cp_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	F.cp_md.n_finalizers = 0;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_NONE);
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE, "no create for a policy being deleted");
}

/* ---- our fixes: dp-mode pod guard (DESIGN §5.5) ------------------------------- */

Test(decide, dp_mode_pods_guard_deletion)
{
	module_exists(1, 1);
	F.cp_spec.resource_registration = "dp";
	F.cp_spec.kernel_module = NULL;
	F.v.gpu_pods = true;
	F.v.dra = false;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_eq(p->requeue_after_ms, GK_MM_REQUEUE_MS);
	cr_assert(has_error(p, "pods requesting gpu.intel.com resources blocking modules.kmm.sigs.x-k8s.io/gpu-gpu deletion"));
	cr_assert(has_event(p, "ModuleDeletionBlocked"));
	F.v.gpu_pods = false;
	cr_assert_eq(run()->module_op, GK_MM_MOD_DELETE);
}

Test(decide, dp_mode_pods_guard_recreation)
{
	module_exists(1, 1);
	F.cp_spec.resource_registration = "dp";
	F.km.version = "1.0";
	F.v.gpu_pods = true;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert(has_error(p, "pods requesting gpu.intel.com resources blocking modules.kmm.sigs.x-k8s.io/gpu-gpu "
			       "recreation for version change"));
}

Test(decide, dra_mode_ignores_device_plugin_pods)
{
	module_exists(1, 1);
	F.cp_spec.kernel_module = NULL;
	F.v.gpu_pods = true;
	cr_assert_eq(run()->module_op, GK_MM_MOD_DELETE);
}

Test(decide, both_guards_report_both_messages)
{
	module_exists(1, 1);
	F.cp_spec.resource_registration = "dp";
	F.cp_spec.kernel_module = NULL;
	F.v.gpu_pods = true;
	F.v.claims_allocated = true;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->n_errors, 2);
	cr_assert(strstr(p->events[0].message, "ResourceClaims and pods"), "%s", p->events[0].message);
}

Test(decide, policy_gone_pods_guard_fail_safe)
{
	module_exists(1, 1);
	F.v.policy = NULL;
	F.v.gpu_pods = true;
	cr_assert_eq(run()->module_op, GK_MM_MOD_NONE);
}

/* ---- ownership ---------------------------------------------------------------- */

Test(decide, module_owned_by_another_controller_is_an_apply_error)
{
	module_exists(1, 1);
	F.owner.name = "other";
	F.v.module_up_to_date = false;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert(p->failed);
	cr_assert(has_error(p, "failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: failed to set "
			       "controller reference: Object " NS "/gpu-gpu is already owned by another "
			       "ClusterPolicy controller other"), "%s", p->errors[0]);
	cr_assert_str_eq(p->kmm_status, "1/1");
}

Test(decide, module_owned_by_another_controller_is_never_deleted)
{
	module_exists(1, 1);
	F.owner.kind = "Deployment";
	F.cp_spec.kernel_module = NULL;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_REMOVE);
	F.v.policy = NULL;
	cr_assert_eq(run()->module_op, GK_MM_MOD_NONE);
}

Test(decide, same_name_new_uid_is_still_ours)
{
	module_exists(1, 1);
	F.owner.uid = "uid-old"; /* recreated policy: controller-runtime compares kind+name */
	cr_assert_not(run()->failed);
	F.owner.has_controller = 0; /* a non-controller reference does not own it */
	F.owner.name = "other";
	cr_assert_not(run()->failed);
}

Test(decide, module_deleted_by_someone_else_waits_then_recreates)
{
	module_exists(1, 1);
	F.m_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	F.v.module_up_to_date = false;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE, "never patch an object being deleted");
	cr_assert_eq(p->requeue_after_ms, GK_MM_REQUEUE_MS);
}

/* ---- failures while executing ------------------------------------------------- */

Test(decide, fail_strings_are_exact)
{
	const gk_mm_plan *p = run();
	gk_mm_plan_fail(&F.p, GK_MM_FAIL_APPLY,
			"admission webhook \"vmodule.kb.io\" denied the request: missing spec.moduleLoader.container.kernelMappings[0].containerImage");
	cr_assert(has_error(p, "failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: admission webhook "
			       "\"vmodule.kb.io\" denied the request: missing "
			       "spec.moduleLoader.container.kernelMappings[0].containerImage"));
	cr_assert(p->failed);
	cr_assert_not(p->has_success_event, "no success event after a failure");
	cr_assert(has_event(p, "ModuleApplyFailed"));
	gk_mm_plan_fail(&F.p, GK_MM_FAIL_GET, "boom");
	cr_assert(has_error(p, "failed to get KMM Module gpu-gpu: boom"));
	gk_mm_plan_fail(&F.p, GK_MM_FAIL_DELETE, "boom");
	cr_assert(has_error(p, "failed to delete KMM Module gpu-gpu: boom"));
	gk_mm_plan_fail(&F.p, GK_MM_FAIL_DELETE_VERSION, "boom");
	cr_assert(has_error(p, "failed to delete KMM Module gpu-gpu for version change: boom"));
	gk_mm_plan_fail(&F.p, GK_MM_FAIL_FINALIZER, "boom");
	cr_assert(has_error(p, "failed to update finalizer gpukmm.io/module-protection on ClusterPolicy gpu: boom"));
	cr_assert_str_eq(p->cond_reason, "FinalizerFailed");
	gk_mm_plan_fail(&F.p, GK_MM_FAIL_APPLY, NULL);
	cr_assert(has_error(p, "failed to reconcile KMM Module gpu-gpu for ClusterPolicy gpu: unknown error"));
}

Test(decide, errors_dedup_and_keep_the_last_ten)
{
	run();
	for (int i = 0; i < 15; i++) {
		gk_mm_plan_add_error(&F.p, "e%d", i);
		gk_mm_plan_add_error(&F.p, "e%d", i);
	}
	cr_assert_eq(F.p.n_errors, GK_MM_MAX_ERRORS);
	cr_assert_str_eq(F.p.errors[0], "e5");
	cr_assert_str_eq(F.p.errors[9], "e14");
}

Test(decide, long_names_are_truncated_not_overflowed)
{
	char name[600];
	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	F.v.policy_name = name;
	const gk_mm_plan *p = run();
	cr_assert_lt(strlen(p->module), GK_MM_NAME_MAX);
	gk_mm_plan_fail(&F.p, GK_MM_FAIL_APPLY, name);
	cr_assert_lt(strlen(p->errors[0]), GK_ERR_MSG_MAX);
}

/* ---- guard helpers -------------------------------------------------------------- */

Test(decide, claim_blocks_only_allocated_gpu_driver)
{
	Gpukmm__ResourceClaim c;
	gpukmm__resource_claim__init(&c);
	char *drivers[] = { "other.example.com", "gpu.intel.com" };
	cr_assert_not(gk_mm_claim_blocks(NULL));
	cr_assert_not(gk_mm_claim_blocks(&c), "not allocated");
	c.allocated_drivers = drivers;
	c.n_allocated_drivers = 2;
	cr_assert_not(gk_mm_claim_blocks(&c), "allocation absent");
	c.has_allocated = c.allocated = 1;
	cr_assert(gk_mm_claim_blocks(&c));
	c.n_allocated_drivers = 1;
	cr_assert_not(gk_mm_claim_blocks(&c), "other driver");
	c.n_allocated_drivers = 0;
	cr_assert_not(gk_mm_claim_blocks(&c), "no results");
}

Test(decide, pod_blocks_while_running_with_gpu_resources)
{
	Gpukmm__Pod p;
	gpukmm__pod__init(&p);
	char *res[] = { "gpu.intel.com/i915" };
	cr_assert_not(gk_mm_pod_blocks(NULL));
	cr_assert_not(gk_mm_pod_blocks(&p));
	p.gpu_resources = res;
	p.n_gpu_resources = 1;
	cr_assert(gk_mm_pod_blocks(&p), "phase unknown counts");
	p.phase = "Running";
	cr_assert(gk_mm_pod_blocks(&p));
	p.phase = "Pending";
	cr_assert(gk_mm_pod_blocks(&p));
	p.phase = "Succeeded";
	cr_assert_not(gk_mm_pod_blocks(&p));
	p.phase = "Failed";
	cr_assert_not(gk_mm_pod_blocks(&p));
}

/* ---- the safety rule (ARCHITECTURE.md §4, issue #15) ------------------------------ */

static bool finalizer_kept(const gk_mm_plan *p)
{
	return p->finalizer_op != GK_MM_FIN_REMOVE && p->module_op != GK_MM_MOD_DELETE;
}

Test(decide, deleting_policy_keeps_its_finalizer_while_claims_are_allocated_even_without_a_module)
{
	/* "Module missing from the view": the Module has an owner reference to
	 * the policy; removing the finalizer would let the garbage collector
	 * delete a Module the view does not see, under allocated GPUs */
	F.cp_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	F.v.claims_allocated = true;
	const gk_mm_plan *p = run();
	cr_assert(finalizer_kept(p));
	cr_assert(has_error(p, "allocated GPU ResourceClaims blocking modules.kmm.sigs.x-k8s.io/gpu-gpu deletion"));
	cr_assert_eq(p->requeue_after_ms, GK_MM_REQUEUE_MS);
	F.v.claims_allocated = false;
	cr_assert_eq(run()->finalizer_op, GK_MM_FIN_REMOVE, "released once the claims are");
}

Test(decide, kmm_not_served_deleting_policy_keeps_its_finalizer_while_the_guard_blocks)
{
	F.v.kmm = false;
	F.cp_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	F.v.claims_allocated = true;
	cr_assert(finalizer_kept(run()));
	F.v.claims_allocated = false;
	F.cp_spec.resource_registration = "dp";
	F.v.gpu_pods = true;
	cr_assert(finalizer_kept(run()), "dp mode: GPU pods block too");
	F.v.gpu_pods = false;
	cr_assert_eq(run()->finalizer_op, GK_MM_FIN_REMOVE);
}

Test(decide, a_live_policy_without_a_module_releases_its_finalizer_whatever_the_claims)
{
	/* the finalizer only matters once the policy is deleted */
	F.cp_spec.kernel_module = NULL;
	F.v.claims_allocated = true;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_REMOVE);
	cr_assert_eq(p->n_errors, 0);
}

Test(decide, kmm_absent_but_unconfirmed_holds_everything)
{
	/* one 404 from discovery: not believed; nothing released or written */
	F.v.kmm = false;
	F.v.module_unconfirmed = "kmm.sigs.x-k8s.io/v1beta1 was served, but is absent in 1 discovery read over 0 s";
	F.cp_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	const gk_mm_plan *p = run();
	cr_assert(p->held);
	cr_assert(finalizer_kept(p));
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert(has_error(p, "deletion of ClusterPolicy gpu waits: the KMM API state could not be confirmed "
			       "(kmm.sigs.x-k8s.io/v1beta1 was served, but is absent in 1 discovery read over 0 s)"),
		  "%s", p->n_errors ? p->errors[0] : "");
	cr_assert_str_eq(p->cond_status, "Unknown");
	cr_assert_str_eq(p->cond_reason, "StateUnconfirmed");
	cr_assert_eq(p->requeue_after_ms, GK_MM_REQUEUE_MS);
	/* a live policy: held too, but its status is left alone (a blip passes) */
	F.cp_md.deletion_timestamp = NULL;
	p = run();
	cr_assert(p->held);
	cr_assert_not(p->report);
	cr_assert(!has_error(p, "KMM is not installed in the cluster."), "not claimed before it is confirmed");
}

Test(decide, module_state_unconfirmed_keeps_the_finalizer_of_a_deleted_policy)
{
	/* the Module missing from the view, but the Modules' list failed */
	F.cp_md.deletion_timestamp = "2026-12-02T12:00:00Z";
	F.v.module_unconfirmed = "modules (v1beta1): list failed: the kmm.sigs.x-k8s.io/v1beta1 list answer is not a list: "
				 "the body is null";
	const gk_mm_plan *p = run();
	cr_assert(p->held);
	cr_assert(finalizer_kept(p));
	cr_assert(p->n_errors == 1 && strstr(p->errors[0], "deletion of ClusterPolicy gpu waits: the state of KMM Module "
							   "intel-gpu-base-operator/gpu-gpu could not be confirmed"),
		  "%s", p->errors[0]);
	/* a Module that exists but cannot be read: not deleted either */
	module_exists(1, 1);
	F.v.module_unreadable = true;
	F.v.module_unconfirmed = "KMM Module intel-gpu-base-operator/gpu-gpu could not be read: spec: expected object";
	cr_assert(finalizer_kept(run()));
}

Test(decide, gpu_use_that_cannot_be_confirmed_blocks_deletion_and_recreation)
{
	module_exists(1, 1);
	F.cp_spec.kernel_module = NULL;
	F.v.claims_unconfirmed = "resourceclaims: list failed: HTTP 403 Forbidden";
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert(has_error(p, "modules.kmm.sigs.x-k8s.io/gpu-gpu deletion waits: GPU ResourceClaims could not be "
			       "confirmed (resourceclaims: list failed: HTTP 403 Forbidden)"),
		  "%s", p->n_errors ? p->errors[0] : "");
	cr_assert_str_eq(p->cond_reason, "DeletionBlocked");
	cr_assert(strstr(p->cond_message, "waits until GPU use can be confirmed"), "%s", p->cond_message);
	cr_assert(has_event(p, "ModuleDeletionBlocked"));
	/* even when DRA looks not served: unconfirmed is unconfirmed */
	F.v.dra = false;
	cr_assert_eq(run()->module_op, GK_MM_MOD_NONE);
	/* the version-toggle recreate waits the same way */
	F.cp_spec.kernel_module = &F.km;
	F.km.version = "1.2";
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_str_eq(p->cond_reason, "RecreationBlocked");
	/* pods that cannot be confirmed block in dp mode only */
	F.km.version = NULL;
	F.cp_spec.kernel_module = NULL;
	F.v.claims_unconfirmed = NULL;
	F.v.pods_unconfirmed = "pods: watch failed after 12 ms: Connection refused";
	cr_assert_eq(run()->module_op, GK_MM_MOD_DELETE, "dra mode: pods do not guard");
	F.cp_spec.resource_registration = "dp";
	cr_assert_eq(run()->module_op, GK_MM_MOD_NONE);
}

Test(decide, a_policy_absent_from_an_unconfirmed_view_deletes_nothing)
{
	/* the ClusterPolicies' list lied (`{}`): the policy vanished from the
	 * view while it exists; its Module must not be deleted */
	module_exists(1, 1);
	F.v.policy = NULL;
	F.v.policy_unconfirmed = "clusterpolicies: list failed: the intel.com/v1alpha1 list answer is not a list: "
				 "items is nothing";
	const gk_mm_plan *p = run();
	cr_assert(p->held);
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_not(p->report, "nor reported deleted");
	/* confirmed gone: the ordinary path */
	F.v.policy_unconfirmed = NULL;
	cr_assert_eq(run()->module_op, GK_MM_MOD_DELETE);
}

Test(decide, an_unreadable_module_is_neither_patched_nor_recreated)
{
	module_exists(1, 1);
	F.v.module_up_to_date = false;
	F.v.module_unreadable = true;
	F.v.module_unconfirmed = "KMM Module intel-gpu-base-operator/gpu-gpu could not be read: spec: expected object";
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert(p->report, "an unreadable object lasts: said in the status");
	cr_assert(p->n_errors == 1 && strstr(p->errors[0], "is left as it is"), "%s", p->errors[0]);
}


/* the ordered teardown: while gpukmm-opmgr's finalizer is on the deleted
 * policy, its operands are still there and the Module waits */
Test(decide, deletion_waits_for_the_operands)
{
	module_exists(3, 3);
	F.cp_md.deletion_timestamp = "2026-01-01T00:00:00Z";
	F.fins[1] = GK_MM_OPERAND_FINALIZER;
	F.cp_md.n_finalizers = 2;
	const gk_mm_plan *p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_NONE);
	cr_assert_eq(p->finalizer_op, GK_MM_FIN_NONE);
	cr_assert_str_eq(p->cond_reason, "WaitingForOperands");
	F.cp_md.n_finalizers = 1; /* operands gone */
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_DELETE);
	/* kernelModule removed from a live policy: no waiting */
	F.cp_md.deletion_timestamp = NULL;
	F.cp_md.n_finalizers = 2;
	F.cp_spec.kernel_module = NULL;
	p = run();
	cr_assert_eq(p->module_op, GK_MM_MOD_DELETE);
}

/* the dp-mode pod guard does not count gpukmm's own operand pods */
Test(decide, operand_pods_are_not_gpu_users)
{
	Gpukmm__Pod p;
	gpukmm__pod__init(&p);
	Gpukmm__ObjectMeta md = GPUKMM__OBJECT_META__INIT;
	Gpukmm__OwnerReference ref = GPUKMM__OWNER_REFERENCE__INIT, *refs[1] = { &ref };
	ref.kind = "DaemonSet";
	ref.name = "gpu-xpu-manager";
	ref.has_controller = ref.controller = 1;
	md.namespace_ = NS;
	md.owner_references = refs;
	md.n_owner_references = 1;
	p.metadata = &md;
	cr_assert(gk_mm_pod_is_operand(&p, NS));
	cr_assert_not(gk_mm_pod_is_operand(&p, "other-ns"));
	md.namespace_ = "apps";
	cr_assert_not(gk_mm_pod_is_operand(&p, NS), "a user's DaemonSet elsewhere counts");
	md.namespace_ = NS;
	ref.kind = "ReplicaSet";
	cr_assert_not(gk_mm_pod_is_operand(&p, NS));
}
