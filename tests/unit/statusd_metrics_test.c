/* gpukmm-statusd: the per-policy metrics follow the status statusd computes
 * (services/statusd/metrics.c): values, conditions one-hot, reasons replaced,
 * "N/A" and a forgotten policy leave no stale series. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpukmm/metrics.h"
#include "../../services/statusd/metrics.h"

static gk_metric *f(const char *name, const char *labels)
{
	gk_metric_desc d = { .name = name, .help = "x", .type = GK_METRIC_GAUGE, .labels = labels };
	gk_metric *m = gk_metrics_family(gk_metrics_default(), &d); /* the same family statusd declared */
	cr_assert_not_null(m, "%s", name);
	return m;
}

static double v(const char *name, const char *labels, const char *const *lv)
{
	return gk_metric_value(f(name, labels), lv);
}

/* Present at all? (a value of 0 and an absent series read the same) */
static bool present(const char *name, const char *needle)
{
	Gpukmm__MetricSet *s = gk_metrics_snapshot(gk_metrics_default());
	bool found = false;
	for (size_t i = 0; i < s->n_families; i++) {
		if (strcmp(s->families[i]->name, name))
			continue;
		for (size_t k = 0; k < s->families[i]->n_samples; k++)
			for (size_t l = 0; l < s->families[i]->samples[k]->n_label_values; l++)
				found |= strcmp(s->families[i]->samples[k]->label_values[l], needle) == 0;
	}
	gpukmm__metric_set__free_unpacked(s, NULL);
	return found;
}

Test(statusd_metrics, ratio)
{
	double a, d;
	cr_assert(gk_sd_metrics_ratio("2/3", &a, &d));
	cr_assert_eq(a, 2);
	cr_assert_eq(d, 3);
	cr_assert_not(gk_sd_metrics_ratio("N/A", &a, &d));
	cr_assert_not(gk_sd_metrics_ratio("Recreating", &a, &d));
	cr_assert_not(gk_sd_metrics_ratio("2/", &a, &d));
	cr_assert_not(gk_sd_metrics_ratio("2/3x", &a, &d));
	cr_assert_not(gk_sd_metrics_ratio(NULL, &a, &d));
}

Test(statusd_metrics, the_status_in_numbers)
{
	cJSON *st = cJSON_Parse("{\"kmmStatus\":\"1/3\",\"devicePluginStatus\":\"2/3\",\"draStatus\":\"N/A\","
				"\"errors\":[\"a\",\"b\"],\"conditions\":["
				"{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"ModuleNotLoaded\"},"
				"{\"type\":\"ModuleLoaded\",\"status\":\"False\",\"reason\":\"DeletionBlocked\"}]}");
	gk_sd_nodes n = { .selected = 4, .oot_loaded = 1, .in_tree_loaded = 1, .not_loaded = 1, .unknown = 1 };
	n.by_reason[0].reason = "NotLoaded";
	n.by_reason[0].nodes = 1;
	n.by_reason[1].reason = "NoReport";
	n.by_reason[1].nodes = 1;
	n.n_reasons = 2;
	gk_sd_metrics_policy("p", st, &n);
	cr_assert_eq(v("gpukmm_policy_kmm_desired_nodes", "policy", GK_LV("p")), 3);
	cr_assert_eq(v("gpukmm_policy_kmm_available_nodes", "policy", GK_LV("p")), 1);
	cr_assert_eq(v("gpukmm_policy_operand_desired_pods", "policy,operand", GK_LV("p", "device-plugin")), 3);
	cr_assert_eq(v("gpukmm_policy_operand_ready_pods", "policy,operand", GK_LV("p", "device-plugin")), 2);
	cr_assert_not(present("gpukmm_policy_operand_ready_pods", "dra"), "N/A: no series");
	cr_assert_eq(v("gpukmm_policy_errors", "policy", GK_LV("p")), 2);
	cr_assert_eq(v("gpukmm_policy_condition", "policy,type,status", GK_LV("p", "Ready", "False")), 1);
	cr_assert_eq(v("gpukmm_policy_condition", "policy,type,status", GK_LV("p", "Ready", "True")), 0);
	cr_assert(present("gpukmm_policy_condition", "Unknown"), "every status of a condition is there (0 or 1)");
	cr_assert_eq(v("gpukmm_policy_condition_reason", "policy,type,reason", GK_LV("p", "ModuleLoaded", "DeletionBlocked")), 1);
	cr_assert_eq(v("gpukmm_policy_selected_nodes", "policy", GK_LV("p")), 4);
	cr_assert_eq(v("gpukmm_policy_gpu_nodes", "policy,module_source", GK_LV("p", "oot")), 1);
	cr_assert_eq(v("gpukmm_policy_gpu_nodes", "policy,module_source", GK_LV("p", "none")), 1);
	cr_assert_eq(v("gpukmm_policy_unknown_nodes", "policy", GK_LV("p")), 1);
	cr_assert_eq(v("gpukmm_policy_problem_nodes", "policy,reason", GK_LV("p", "NoReport")), 1);
	cJSON_Delete(st);

	/* the next status: KMM recreating, the deletion no longer blocked, one reason gone */
	st = cJSON_Parse("{\"kmmStatus\":\"Recreating\",\"conditions\":["
			 "{\"type\":\"ModuleLoaded\",\"status\":\"False\",\"reason\":\"Recreating\"}]}");
	n.n_reasons = 1;
	gk_sd_metrics_policy("p", st, &n);
	cJSON_Delete(st);
	cr_assert_not(present("gpukmm_policy_kmm_desired_nodes", "p"), "Recreating: no numbers, not stale ones");
	cr_assert_not(present("gpukmm_policy_condition_reason", "DeletionBlocked"));
	cr_assert_eq(v("gpukmm_policy_condition_reason", "policy,type,reason", GK_LV("p", "ModuleLoaded", "Recreating")), 1);
	cr_assert_not(present("gpukmm_policy_problem_nodes", "NoReport"));
	cr_assert_eq(v("gpukmm_policy_errors", "policy", GK_LV("p")), 0);

	/* the policy is gone (or another instance leads): every series goes */
	gk_sd_metrics_operand("q", "device-plugin", 1, 1);
	gk_sd_metrics_forget("p");
	cr_assert_not(present("gpukmm_policy_condition", "p"));
	cr_assert_not(present("gpukmm_policy_selected_nodes", "p"));
	cr_assert_not(present("gpukmm_policy_gpu_nodes", "p"));
	cr_assert(present("gpukmm_policy_operand_ready_pods", "q"), "another policy's stay");
}
