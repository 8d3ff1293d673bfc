/* lib/metrics: the registry (declaration rules, samples, bounds, snapshot) and
 * the text exposition (HELP/TYPE once, sources merged with their label, the
 * supervisor's names kept its own, escaping, malformed families skipped);
 * lib/kube's request verbs; lib/review's verdict cache. The pages rendered
 * here are also what tests/e2e/metrics.sh checks with promtool. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kube.h"
#include "gpukmm/metrics.h"
#include "gpukmm/review.h"

static gk_metric *fam(gk_metrics *r, const char *name, enum gk_metric_type t, const char *labels)
{
	gk_metric_desc d = { .name = name, .help = "help", .type = t, .labels = labels };
	static const double b[] = { 0.1, 1, 10 };
	if (t == GK_METRIC_HISTOGRAM) {
		d.bounds = b;
		d.n_bounds = 3;
	}
	return gk_metrics_family(r, &d);
}

/* The text of a registry's snapshot as one source (with extra label or not). */
static char *render(gk_metrics_source *src, size_t n, size_t *skipped)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_eq(gk_metrics_render(f, src, n, skipped), 0);
	fclose(f);
	return buf;
}

static char *render_reg(gk_metrics *r, const char *extra, const char *value)
{
	Gpukmm__MetricSet *s = gk_metrics_snapshot(r);
	cr_assert_not_null(s);
	gk_metrics_source src = { .extra_name = extra, .extra_value = value, .families = s->families,
				  .n = s->n_families };
	char *t = render(&src, 1, NULL);
	gpukmm__metric_set__free_unpacked(s, NULL);
	return t;
}

Test(metrics, declaration_follows_the_naming_rules)
{
	gk_metrics *r = gk_metrics_new();
	cr_assert_not_null(fam(r, "gpukmm_a_total", GK_METRIC_COUNTER, NULL));
	cr_assert_null(fam(r, "gpukmm_b", GK_METRIC_COUNTER, NULL), "a counter ends in _total");
	cr_assert_null(fam(r, "gpukmm_c_total", GK_METRIC_GAUGE, NULL), "only counters end in _total");
	cr_assert_null(fam(r, "other_d", GK_METRIC_GAUGE, NULL), "the gpukmm_ prefix");
	cr_assert_null(fam(r, "gpukmm_bad-name", GK_METRIC_GAUGE, NULL));
	cr_assert_null(fam(r, "gpukmm_e", GK_METRIC_GAUGE, "ok,bad-label"));
	cr_assert_null(fam(r, "gpukmm_f", GK_METRIC_HISTOGRAM, "le"), "le is the histogram's");
	cr_assert_null(fam(r, "gpukmm_g", GK_METRIC_GAUGE, "a,b,c,d,e"), "at most 4 labels");
	gk_metric_desc nob = { .name = "gpukmm_i", .help = "h", .type = GK_METRIC_HISTOGRAM };
	cr_assert_null(gk_metrics_family(r, &nob), "a histogram needs buckets");
	static const double desc[] = { 1, 0.5 };
	gk_metric_desc bad = { .name = "gpukmm_j", .help = "h", .type = GK_METRIC_HISTOGRAM, .bounds = desc,
			       .n_bounds = 2 };
	cr_assert_null(gk_metrics_family(r, &bad), "ascending buckets");
	/* the same declaration again is the same family; another shape is refused */
	gk_metric *g = fam(r, "gpukmm_k", GK_METRIC_GAUGE, "x");
	cr_assert_not_null(g);
	cr_assert_eq(fam(r, "gpukmm_k", GK_METRIC_GAUGE, "x"), g);
	cr_assert_null(fam(r, "gpukmm_k", GK_METRIC_GAUGE, "y"));
	/* "service" is the supervisor's label: refused in the heartbeat registry only */
	cr_assert_not_null(fam(r, "gpukmm_l", GK_METRIC_GAUGE, "service"));
	cr_assert_null(gk_metric_gauge("gpukmm_m", "h", "service"));
	/* a NULL family is a no-op */
	gk_metric_add(NULL, 1, NULL);
	gk_metric_set(NULL, 1, NULL);
	gk_metric_observe(NULL, 1, NULL);
	cr_assert_eq(gk_metric_value(NULL, NULL), 0);
	gk_metrics_free(r);
}

Test(metrics, samples_counters_gauges_histograms_and_bound_variables)
{
	gk_metrics *r = gk_metrics_new();
	gk_metric *c = fam(r, "gpukmm_req_total", GK_METRIC_COUNTER, "verb,code");
	gk_metric *g = fam(r, "gpukmm_depth", GK_METRIC_GAUGE, NULL);
	gk_metric *h = fam(r, "gpukmm_lat_seconds", GK_METRIC_HISTOGRAM, "verb");
	gk_metric *v = fam(r, "gpukmm_var_total", GK_METRIC_COUNTER, NULL);
	gk_metric_add(c, 1, GK_LV("GET", "200"));
	gk_metric_add(c, 2, GK_LV("GET", "200"));
	gk_metric_add(c, 1, GK_LV("PUT", "409"));
	gk_metric_add(c, -1, GK_LV("GET", "200")); /* a counter never goes down */
	cr_assert_eq(gk_metric_value(c, GK_LV("GET", "200")), 3);
	cr_assert_eq(gk_metric_value(c, GK_LV("PUT", "409")), 1);
	cr_assert_eq(gk_metric_value(c, GK_LV("PUT", "200")), 0);
	gk_metric_set(g, 7, NULL);
	gk_metric_add(g, -2, NULL);
	cr_assert_eq(gk_metric_value(g, NULL), 5);
	gk_metric_observe(h, 0.05, GK_LV("GET"));
	gk_metric_observe(h, 0.1, GK_LV("GET")); /* le is inclusive */
	gk_metric_observe(h, 5, GK_LV("GET"));
	gk_metric_observe(h, 50, GK_LV("GET"));
	gk_metric_observe(h, NAN, GK_LV("GET")); /* ignored */
	cr_assert_eq(gk_metric_value(h, GK_LV("GET")), 4);
	uint64_t x = 41;
	gk_metric_bind(v, &x, NULL);
	x++;
	cr_assert_eq(gk_metric_value(v, NULL), 42, "read when collected");
	char *t = render_reg(r, NULL, NULL);
	cr_assert(strstr(t, "# HELP gpukmm_req_total help\n# TYPE gpukmm_req_total counter\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_req_total{verb=\"GET\",code=\"200\"} 3\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_depth 5\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_var_total 42\n"), "%s", t);
	cr_assert(strstr(t, "# TYPE gpukmm_lat_seconds histogram\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_lat_seconds_bucket{verb=\"GET\",le=\"0.1\"} 2\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_lat_seconds_bucket{verb=\"GET\",le=\"1\"} 2\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_lat_seconds_bucket{verb=\"GET\",le=\"10\"} 3\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_lat_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 4\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_lat_seconds_sum{verb=\"GET\"} 55.15\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_lat_seconds_count{verb=\"GET\"} 4\n"), "%s", t);
	free(t);
	gk_metrics_free(r);
}

Test(metrics, label_sets_are_bounded_and_removable)
{
	gk_metrics *r = gk_metrics_new();
	gk_metric_desc d = { .name = "gpukmm_p", .help = "h", .type = GK_METRIC_GAUGE, .labels = "policy,kind",
			     .max_series = 3 };
	gk_metric *m = gk_metrics_family(r, &d);
	gk_metric_set(m, 1, GK_LV("a", "x"));
	gk_metric_set(m, 2, GK_LV("a", "y"));
	gk_metric_set(m, 3, GK_LV("b", "x"));
	gk_metric_set(m, 4, GK_LV("c", "x")); /* past the bound: dropped */
	cr_assert_eq(gk_metric_value(m, GK_LV("c", "x")), 0);
	gk_metric_remove_matching(m, "policy", "a");
	cr_assert_eq(gk_metric_value(m, GK_LV("a", "x")), 0);
	cr_assert_eq(gk_metric_value(m, GK_LV("b", "x")), 3);
	gk_metric_set(m, 4, GK_LV("c", "x")); /* room again */
	cr_assert_eq(gk_metric_value(m, GK_LV("c", "x")), 4);
	gk_metric_remove(m, GK_LV("b", "x"));
	char *t = render_reg(r, NULL, NULL);
	cr_assert_null(strstr(t, "policy=\"b\""), "%s", t);
	cr_assert(strstr(t, "gpukmm_p{policy=\"c\",kind=\"x\"} 4\n"), "%s", t);
	free(t);
	gk_metrics_free(r);
	/* the heartbeat registry reports what it dropped */
	gk_metric_desc d2 = { .name = "gpukmm_unit_bounded", .help = "h", .type = GK_METRIC_GAUGE, .labels = "k",
			      .max_series = 1 };
	gk_metric *b = gk_metrics_family(gk_metrics_default(), &d2);
	gk_metric_set(b, 1, GK_LV("one"));
	gk_metric_set(b, 1, GK_LV("two"));
	char *t2 = render_reg(gk_metrics_default(), NULL, NULL);
	cr_assert(strstr(t2, "# TYPE gpukmm_metrics_series_dropped_total counter\ngpukmm_metrics_series_dropped_total 1\n"),
		  "%s", t2);
	free(t2);
}

Test(metrics, values_and_help_are_escaped_and_utf8_safe)
{
	gk_metrics *r = gk_metrics_new();
	gk_metric_desc d = { .name = "gpukmm_esc", .help = "a \\ b\nline two", .type = GK_METRIC_GAUGE, .labels = "v" };
	gk_metric *m = gk_metrics_family(r, &d);
	gk_metric_set(m, 1, GK_LV("q\"uote\\back\nnl"));
	gk_metric_set(m, 2, GK_LV("bad\xff\xfe utf8 \xc3\xa9"));
	char *t = render_reg(r, "service", "s\"1");
	cr_assert(strstr(t, "# HELP gpukmm_esc a \\\\ b\\nline two\n"), "%s", t);
	cr_assert(strstr(t, "gpukmm_esc{service=\"s\\\"1\",v=\"q\\\"uote\\\\back\\nnl\"} 1\n"), "%s", t);
	cr_assert(strstr(t, "v=\"bad?? utf8 \xc3\xa9\"} 2\n"), "%s", t);
	/* every line is a comment or one sample: nothing broke out of a value */
	for (char *l = t; *l; l = strchr(l, '\n') + 1)
		cr_assert(l[0] == '#' || strncmp(l, "gpukmm_esc{", 11) == 0, "%s", l);
	free(t);
	gk_metrics_free(r);
}

/* A hand-made family, as a (possibly misbehaving) service could send it. */
static Gpukmm__MetricFamily *mk(const char *name, Gpukmm__MetricType t, const char *label, double v)
{
	Gpukmm__MetricFamily *f = calloc(1, sizeof(*f));
	gpukmm__metric_family__init(f);
	f->name = (char *)name;
	f->help = "h";
	f->has_type = true;
	f->type = t;
	char **lv = calloc(1, sizeof(char *)), **ln = calloc(1, sizeof(char *));
	Gpukmm__MetricSample *s = calloc(1, sizeof(*s));
	gpukmm__metric_sample__init(s);
	s->has_value = true;
	s->value = v;
	if (label) {
		ln[0] = (char *)label;
		lv[0] = "x";
		f->label_names = ln;
		f->n_label_names = 1;
		s->label_values = lv;
		s->n_label_values = 1;
	}
	Gpukmm__MetricSample **sp = calloc(1, sizeof(*sp));
	sp[0] = s;
	f->samples = sp;
	f->n_samples = 1;
	if (!label) {
		free(ln);
		free(lv);
	}
	return f;
}

static void unmk(Gpukmm__MetricFamily **f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i]->samples[0]->label_values);
		free(f[i]->samples[0]);
		free(f[i]->samples);
		free(f[i]->label_names);
		free(f[i]);
	}
}

Test(metrics, sources_merge_by_name_and_bad_families_are_skipped)
{
	Gpukmm__MetricFamily *own[] = { mk("gpukmm_ready", GPUKMM__METRIC_TYPE__METRIC_GAUGE, NULL, 1) };
	Gpukmm__MetricFamily *a[] = {
		mk("gpukmm_api_requests_total", GPUKMM__METRIC_TYPE__METRIC_COUNTER, "verb", 3),
		mk("gpukmm_ready", GPUKMM__METRIC_TYPE__METRIC_GAUGE, NULL, 0),  /* the supervisor's name */
		mk("gpukmm_x", GPUKMM__METRIC_TYPE__METRIC_GAUGE, "service", 1), /* the added label */
		mk("gpukmm bad", GPUKMM__METRIC_TYPE__METRIC_GAUGE, NULL, 1),    /* not a name */
		mk("gpukmm_y_count", GPUKMM__METRIC_TYPE__METRIC_GAUGE, NULL, 1), /* reads as a histogram's */
	};
	Gpukmm__MetricFamily *b[] = {
		mk("gpukmm_api_requests_total", GPUKMM__METRIC_TYPE__METRIC_COUNTER, "verb", 5),
		mk("gpukmm_api_requests_total", GPUKMM__METRIC_TYPE__METRIC_COUNTER, "verb", 6), /* twice */
		mk("gpukmm_z", GPUKMM__METRIC_TYPE__METRIC_COUNTER, NULL, 1),
	};
	Gpukmm__MetricFamily *c[] = { mk("gpukmm_z", GPUKMM__METRIC_TYPE__METRIC_GAUGE, NULL, 2) }; /* other type */
	gk_metrics_source src[] = {
		{ .families = own, .n = 1, .owner = true },
		{ .extra_name = "service", .extra_value = "watcher", .families = a, .n = 5 },
		{ .extra_name = "service", .extra_value = "gater", .families = b, .n = 3 },
		{ .extra_name = "service", .extra_value = "statusd", .families = c, .n = 1 },
	};
	size_t skipped = 0;
	char *t = render(src, 4, &skipped);
	cr_assert_eq(skipped, 6, "%zu skipped:\n%s", skipped, t);
	cr_assert(strstr(t, "# TYPE gpukmm_ready gauge\ngpukmm_ready 1\n#"), "%s", t);
	cr_assert(strstr(t, "# TYPE gpukmm_api_requests_total counter\n"
			    "gpukmm_api_requests_total{service=\"watcher\",verb=\"x\"} 3\n"
			    "gpukmm_api_requests_total{service=\"gater\",verb=\"x\"} 5\n#"),
		  "one family, both services, together:\n%s", t);
	cr_assert(strstr(t, "# TYPE gpukmm_z counter\ngpukmm_z{service=\"gater\"} 1\n"), "%s", t);
	cr_assert_null(strstr(t, "service=\"statusd\""), "%s", t);
	cr_assert_null(strstr(t, "gpukmm bad"), "%s", t);
	cr_assert_null(strstr(t, "gpukmm_y_count"), "%s", t);
	const char *p = t;
	int helps = 0;
	while ((p = strstr(p, "# HELP gpukmm_api_requests_total ")))
		helps++, p++;
	cr_assert_eq(helps, 1);
	free(t);
	unmk(own, 1);
	unmk(a, 5);
	unmk(b, 3);
	unmk(c, 1);
}

Test(metrics, api_request_verbs)
{
	cr_assert_str_eq(gk_kube_verb("GET", "/api/v1/nodes"), "LIST");
	cr_assert_str_eq(gk_kube_verb("GET", "/api/v1/nodes?limit=500"), "LIST");
	cr_assert_str_eq(gk_kube_verb("GET", "/api/v1/nodes/n1"), "GET");
	cr_assert_str_eq(gk_kube_verb("GET", "/api/v1/nodes?watch=true&resourceVersion=5"), "WATCH");
	cr_assert_str_eq(gk_kube_verb("GET", "/api/v1/namespaces/ns/pods"), "LIST");
	cr_assert_str_eq(gk_kube_verb("GET", "/api/v1/namespaces/ns/pods/p"), "GET");
	cr_assert_str_eq(gk_kube_verb("GET", "/api/v1/namespaces/ns"), "GET");
	cr_assert_str_eq(gk_kube_verb("GET", "/api/v1/namespaces"), "LIST");
	cr_assert_str_eq(gk_kube_verb("GET", "/apis/intel.com/v1alpha1/clusterpolicies"), "LIST");
	cr_assert_str_eq(gk_kube_verb("GET", "/apis/intel.com/v1alpha1/clusterpolicies/cp/status"), "GET");
	cr_assert_str_eq(gk_kube_verb("GET", "/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/o/modules"), "LIST");
	cr_assert_str_eq(gk_kube_verb("GET", "/apis/apps/v1/watch/namespaces/o/daemonsets"), "WATCH");
	cr_assert_str_eq(gk_kube_verb("GET", "/apis/intel.com/v1alpha1"), "GET");
	cr_assert_str_eq(gk_kube_verb("GET", "/version"), "GET");
	cr_assert_str_eq(gk_kube_verb("PATCH", "/apis/apps/v1/namespaces/o/daemonsets/d"), "PATCH");
	cr_assert_str_eq(gk_kube_verb("POST", "/apis/authentication.k8s.io/v1/tokenreviews"), "POST");
	cr_assert_str_eq(gk_kube_verb("BREW", "/x"), "OTHER");
}

Test(metrics, review_verdicts_are_kept_briefly)
{
	gk_review_cache c;
	gk_review_cache_init(&c, 60000, 10000);
	gk_review_key a, b, x;
	gk_review_key_of("token-a", &a);
	gk_review_key_of("token-b", &b);
	gk_review_key_of("token-a ", &x);
	cr_assert_neq(memcmp(a.d, x.d, sizeof(a.d)), 0);
	cr_assert_eq(gk_review_cache_get(&c, &a, 0), GK_REVIEW_UNKNOWN);
	gk_review_cache_put(&c, &a, GK_REVIEW_ALLOWED, 1000);
	gk_review_cache_put(&c, &b, GK_REVIEW_DENIED, 1000);
	cr_assert_eq(gk_review_cache_get(&c, &a, 60999), GK_REVIEW_ALLOWED);
	cr_assert_eq(gk_review_cache_get(&c, &x, 2000), GK_REVIEW_UNKNOWN);
	cr_assert_eq(gk_review_cache_get(&c, &b, 10999), GK_REVIEW_DENIED);
	cr_assert_eq(gk_review_cache_get(&c, &b, 11000), GK_REVIEW_UNKNOWN, "a denial is kept 10 s");
	cr_assert_eq(gk_review_cache_get(&c, &a, 61000), GK_REVIEW_UNKNOWN, "an allowance 60 s");
	/* bounded: the one expiring first makes room */
	for (int i = 0; i < GK_REVIEW_MAX + 5; i++) {
		char t[32];
		snprintf(t, sizeof(t), "t%d", i);
		gk_review_key k;
		gk_review_key_of(t, &k);
		gk_review_cache_put(&c, &k, GK_REVIEW_ALLOWED, 100000 + i);
	}
	cr_assert_eq(c.n, GK_REVIEW_MAX);
	gk_review_key last;
	gk_review_key_of("t68", &last);
	cr_assert_eq(gk_review_cache_get(&c, &last, 100100), GK_REVIEW_ALLOWED);
}
