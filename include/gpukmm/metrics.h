/* gpukmm — metrics: a registry of typed families (counter, gauge, histogram)
 * per process, sent to the supervisor with every heartbeat (lib/svc) and
 * rendered there as Prometheus text on /metrics (each sample labelled with
 * service="<name>").
 *
 * Names follow the Prometheus conventions (`promtool check metrics` is clean,
 * tests/e2e/metrics.sh): the gpukmm_ prefix, snake_case, base units in the
 * name (_seconds, _bytes), counters end in _total, and nothing else does.
 *
 * A service declares a family once and updates it in one line:
 *
 *     static gk_metric *passes;
 *     passes = gk_metric_counter("gpukmm_gater_passes_total", "Gating passes.", "result");
 *     gk_metric_add(passes, 1, GK_LV("success"));
 *
 * or binds a variable it already keeps, read at each heartbeat:
 *
 *     gk_metric_counter_var("gpukmm_gater_writes_total", "DaemonSet patches sent.", &ks->writes);
 *     gk_metric_gauge_var("gpukmm_gater_queue_depth", "Keys ready or waiting.", &g->qs.depth);
 *
 * Label sets are bounded: a family keeps at most max_series label sets (128
 * unless its descriptor says otherwise); a new set past that is dropped and
 * counted (gpukmm_metrics_series_dropped_total). Label values are copied and
 * escaped when rendered, so any string is safe as a value; pick values from
 * bounded sets (verbs, codes, kinds, reasons, policy names).
 *
 * Thread-safe: one mutex per registry (the webhook counts from its HTTP
 * thread). A NULL family (declaration failed: bad name, a different shape
 * under the same name, out of memory) makes every operation a no-op. */
#ifndef GPUKMM_METRICS_H
#define GPUKMM_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "metrics.pb-c.h"

enum gk_metric_type { GK_METRIC_COUNTER = 0, GK_METRIC_GAUGE = 1, GK_METRIC_HISTOGRAM = 2 };

#define GK_METRIC_MAX_LABELS 4
#define GK_METRIC_MAX_BUCKETS 20
#define GK_METRIC_MAX_SERIES 128
#define GK_METRIC_VALUE_MAX 128        /* label values longer than this are cut */

typedef struct gk_metrics gk_metrics;  /* a registry */
typedef struct gk_metric gk_metric;    /* one family */

typedef struct gk_metric_desc {
	const char *name;
	const char *help;
	enum gk_metric_type type;
	const char *labels;            /* comma-separated label names ("verb,code"), NULL = none */
	const double *bounds;          /* histogram: bucket upper bounds, ascending (+Inf implied) */
	size_t n_bounds;
	size_t max_series;             /* 0 = GK_METRIC_MAX_SERIES */
} gk_metric_desc;

/* Label values of one series, in the declared order: GK_LV("GET", "200"). */
#define GK_LV(...) ((const char *const[]){ __VA_ARGS__ })

/* ---- registries ------------------------------------------------------------ */

/* The process's registry: what heartbeats send. Created on first use. */
gk_metrics *gk_metrics_default(void);
gk_metrics *gk_metrics_new(void);
void gk_metrics_free(gk_metrics *r);

/* Declare a family (idempotent: the same name with the same type, labels and
 * buckets returns the family already there). NULL on a bad name, a label
 * name that is not [a-zA-Z_][a-zA-Z0-9_]* (or is "le", "service", "__*"), a
 * counter not ending in _total or another type ending in it, a name already
 * taken by another shape, or OOM; the reason is logged once. */
gk_metric *gk_metrics_family(gk_metrics *r, const gk_metric_desc *d);

/* In the default registry. */
gk_metric *gk_metric_counter(const char *name, const char *help, const char *labels);
gk_metric *gk_metric_gauge(const char *name, const char *help, const char *labels);
gk_metric *gk_metric_histogram(const char *name, const char *help, const char *labels, const double *bounds,
			       size_t n_bounds);
/* An unlabelled counter / gauge whose value is *p, read at each collection
 * (the variable must outlive the registry's use: static or the service's
 * own state until exit). */
gk_metric *gk_metric_counter_var(const char *name, const char *help, const uint64_t *p);
gk_metric *gk_metric_gauge_var(const char *name, const char *help, const uint64_t *p);

/* ---- samples (lv: the family's label values; NULL when it has none) ---------- */

void gk_metric_add(gk_metric *m, double v, const char *const *lv);      /* counter (v >= 0), gauge */
/* gauge; or a counter mirrored from a count kept elsewhere (never lower it) */
void gk_metric_set(gk_metric *m, double v, const char *const *lv);
void gk_metric_observe(gk_metric *m, double v, const char *const *lv);  /* histogram */
/* The series' value is *p at each collection (counter or gauge). */
void gk_metric_bind(gk_metric *m, const uint64_t *p, const char *const *lv);
/* Drop one series / every series whose label `label` is `value` (a policy
 * deleted, leadership lost: its gauges must vanish, not freeze). */
void gk_metric_remove(gk_metric *m, const char *const *lv);
void gk_metric_remove_matching(gk_metric *m, const char *label, const char *value);
/* The current value (counter/gauge) or count (histogram) of a series; 0 when
 * absent. For tests and logs. */
double gk_metric_value(gk_metric *m, const char *const *lv);

/* Seconds since `start_us` (gk_metric_now_us()), for durations. */
uint64_t gk_metric_now_us(void);
double gk_metric_since(uint64_t start_us);

/* ---- bucket sets ------------------------------------------------------------ */

/* 1 ms .. 10 s: API requests, admissions. */
extern const double GK_METRIC_LATENCY_BUCKETS[];
extern const size_t GK_METRIC_N_LATENCY_BUCKETS;
/* 100 µs .. 60 s: reconcile passes (decisions are fast, API chains are not). */
extern const double GK_METRIC_RECONCILE_BUCKETS[];
extern const size_t GK_METRIC_N_RECONCILE_BUCKETS;

/* ---- shared families ------------------------------------------------------------ */

/* gpukmm_reconcile_duration_seconds{result}: one reconcile pass of a
 * controller (modmgr, gater; the service label tells which), from the key
 * handed out to the pass's end. result: "success", "error" or "requeue". */
void gk_metric_reconcile(uint64_t start_us, const char *result);

/* ---- collection and rendering --------------------------------------------------- */

/* A deep copy of the registry (free with gpukmm__metric_set__free_unpacked).
 * NULL on OOM. Bound variables are read now. */
Gpukmm__MetricSet *gk_metrics_snapshot(gk_metrics *r);
/* A deep copy of families (e.g. a heartbeat's, to keep). NULL on OOM or none. */
Gpukmm__MetricSet *gk_metrics_copy(Gpukmm__MetricFamily *const *f, size_t n);

/* One source of families for the text exposition: its samples get the
 * label extra_name="extra_value" (unless extra_name is NULL). A source marked
 * `owner` owns its names: a later source's family of the same name is
 * skipped (a service cannot add samples to the supervisor's families). */
typedef struct gk_metrics_source {
	const char *extra_name, *extra_value;
	Gpukmm__MetricFamily *const *families;
	size_t n;
	bool owner;
} gk_metrics_source;

/* The Prometheus text exposition (format 0.0.4) of the sources: families in
 * first-seen order, HELP and TYPE once per name, the samples of every source
 * with that name together. Skipped (and counted in *skipped, may be NULL): a
 * family with an invalid metric or label name, a label "le" or the extra
 * label, a type other than the first source's for that name, a histogram
 * whose buckets do not match its bounds, label values not matching its label
 * names. Label values and HELP text are escaped. Returns 0, -1 on write error. */
int gk_metrics_render(FILE *f, const gk_metrics_source *src, size_t n_src, size_t *skipped);

/* Is `name` a valid metric name / label name (Prometheus data model)? */
bool gk_metrics_name_ok(const char *name);
bool gk_metrics_label_ok(const char *name);

#endif
