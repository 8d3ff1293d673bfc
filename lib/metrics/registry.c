/* gpukmm — the metrics registry (see include/gpukmm/metrics.h). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "gpukmm/wsub.h"

const double GK_METRIC_LATENCY_BUCKETS[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
					     0.25,  0.5,    1,     2.5,  5,     10 };
const size_t GK_METRIC_N_LATENCY_BUCKETS = sizeof(GK_METRIC_LATENCY_BUCKETS) / sizeof(double);
const double GK_METRIC_RECONCILE_BUCKETS[] = { 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1,
					       0.5,    1,      5,     10,    30,   60 };
const size_t GK_METRIC_N_RECONCILE_BUCKETS = sizeof(GK_METRIC_RECONCILE_BUCKETS) / sizeof(double);

typedef struct series {
	char *lv[GK_METRIC_MAX_LABELS];
	double value;            /* counter, gauge */
	const uint64_t *ptr;     /* bound: value read at collection */
	uint64_t *buckets;       /* histogram: n_bounds + 1 */
	double sum;
} series;

struct gk_metric {
	gk_metrics *r;
	char *name, *help;
	enum gk_metric_type type;
	size_t n_labels;
	char *labels[GK_METRIC_MAX_LABELS];
	double bounds[GK_METRIC_MAX_BUCKETS];
	size_t n_bounds, max_series;
	series *s;
	size_t n, cap;
};

struct gk_metrics {
	pthread_mutex_t mu;
	gk_metric **f;
	size_t n, cap;
	uint64_t dropped;        /* label sets refused past a family's max_series */
};

gk_metrics *gk_metrics_new(void)
{
	gk_metrics *r = calloc(1, sizeof(*r));
	if (r)
		pthread_mutex_init(&r->mu, NULL);
	return r;
}

static void series_free(series *s)
{
	for (size_t i = 0; i < GK_METRIC_MAX_LABELS; i++)
		free(s->lv[i]);
	free(s->buckets);
}

static void family_free(gk_metric *m)
{
	for (size_t i = 0; i < m->n; i++)
		series_free(&m->s[i]);
	free(m->s);
	for (size_t i = 0; i < m->n_labels; i++)
		free(m->labels[i]);
	free(m->name);
	free(m->help);
	free(m);
}

void gk_metrics_free(gk_metrics *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		family_free(r->f[i]);
	free(r->f);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static gk_metrics *default_reg;

static void default_init(void)
{
	default_reg = gk_metrics_new();
}

gk_metrics *gk_metrics_default(void)
{
	pthread_once(&default_once, default_init);
	return default_reg;
}

/* ---- names ------------------------------------------------------------------ */

static bool alpha_(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

bool gk_metrics_name_ok(const char *n)
{
	if (!n || !(alpha_(n[0]) || n[0] == ':'))
		return false;
	for (const char *p = n; *p; p++)
		if (!(alpha_(*p) || digit(*p) || *p == ':'))
			return false;
	return strlen(n) < 200;
}

bool gk_metrics_label_ok(const char *n)
{
	if (!n || !alpha_(n[0]) || (n[0] == '_' && n[1] == '_'))
		return false;
	for (const char *p = n; *p; p++)
		if (!(alpha_(*p) || digit(*p)))
			return false;
	return strlen(n) < 100;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Split "a,b" into m->labels. -1 on a bad or reserved name, too many, OOM. */
static int parse_labels(gk_metric *m, const char *labels, const char **why)
{
	if (!labels || !*labels)
		return 0;
	const char *p = labels;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (m->n_labels == GK_METRIC_MAX_LABELS) {
			*why = "too many labels";
			return -1;
		}
		char *l = strndup(p, len);
		if (!l) {
			*why = "out of memory";
			return -1;
		}
		m->labels[m->n_labels++] = l;
		/* heartbeats carry the default registry: the supervisor adds "service" */
		if (!gk_metrics_label_ok(l) || !strcmp(l, "le") ||
		    (m->r == default_reg && !strcmp(l, "service"))) {
			*why = "bad or reserved label name";
			return -1;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

static bool same_shape(const gk_metric *a, const gk_metric *b)
{
	if (a->type != b->type || a->n_labels != b->n_labels || a->n_bounds != b->n_bounds)
		return false;
	for (size_t i = 0; i < a->n_labels; i++)
		if (strcmp(a->labels[i], b->labels[i]))
			return false;
	for (size_t i = 0; i < a->n_bounds; i++)
		if (a->bounds[i] != b->bounds[i])
			return false;
	return true;
}

gk_metric *gk_metrics_family(gk_metrics *r, const gk_metric_desc *d)
{
	if (!r || !d)
		return NULL;
	const char *why = NULL;
	gk_metric *m = calloc(1, sizeof(*m));
	if (!m) {
		why = "out of memory";
		goto bad;
	}
	m->r = r;
	m->type = d->type;
	m->max_series = d->max_series ? d->max_series : GK_METRIC_MAX_SERIES;
	m->name = d->name ? strdup(d->name) : NULL;
	m->help = strdup(d->help && *d->help ? d->help : "(no help)");
	if (!m->name || !m->help)
		why = d->name ? "out of memory" : "no name";
	else if (!gk_metrics_name_ok(d->name) || strncmp(d->name, "gpukmm_", 7) != 0)
		why = "not a valid name with the gpukmm_ prefix";
	else if ((d->type == GK_METRIC_COUNTER) != ends_with(d->name, "_total"))
		why = d->type == GK_METRIC_COUNTER ? "a counter's name must end in _total"
						   : "only counters end in _total";
	else if (d->type > GK_METRIC_HISTOGRAM)
		why = "unknown type";
	else if (d->type == GK_METRIC_HISTOGRAM && (!d->bounds || !d->n_bounds || d->n_bounds > GK_METRIC_MAX_BUCKETS))
		why = "a histogram needs 1..20 bucket bounds";
	if (why || parse_labels(m, d->labels, &why))
		goto bad;
	for (size_t i = 0; d->type == GK_METRIC_HISTOGRAM && i < d->n_bounds; i++) {
		if (!isfinite(d->bounds[i]) || (i && d->bounds[i] <= d->bounds[i - 1])) {
			why = "bucket bounds must be finite and ascending";
			goto bad;
		}
		m->bounds[m->n_bounds++] = d->bounds[i];
	}
	pthread_mutex_lock(&r->mu);
	for (size_t i = 0; i < r->n; i++) {
		if (strcmp(r->f[i]->name, m->name))
			continue;
		gk_metric *old = same_shape(r->f[i], m) ? r->f[i] : NULL;
		pthread_mutex_unlock(&r->mu);
		if (!old)
			why = "already declared with another type, labels or buckets";
		family_free(m);
		m = NULL;
		if (old)
			return old;
		goto bad;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 32;
		gk_metric **f = realloc(r->f, cap * sizeof(*f));
		if (!f) {
			pthread_mutex_unlock(&r->mu);
			why = "out of memory";
			goto bad;
		}
		r->f = f;
		r->cap = cap;
	}
	r->f[r->n++] = m;
	pthread_mutex_unlock(&r->mu);
	return m;
bad:
	GK_ERROR("metric %s: %s (not exported)", d->name ? d->name : "(null)", why);
	if (m)
		family_free(m);
	return NULL;
}

static gk_metric *declare(enum gk_metric_type t, const char *name, const char *help, const char *labels,
			  const double *bounds, size_t n_bounds)
{
	gk_metric_desc d = { .name = name, .help = help, .type = t, .labels = labels, .bounds = bounds,
			     .n_bounds = n_bounds };
	return gk_metrics_family(gk_metrics_default(), &d);
}

gk_metric *gk_metric_counter(const char *name, const char *help, const char *labels)
{
	return declare(GK_METRIC_COUNTER, name, help, labels, NULL, 0);
}

gk_metric *gk_metric_gauge(const char *name, const char *help, const char *labels)
{
	return declare(GK_METRIC_GAUGE, name, help, labels, NULL, 0);
}

gk_metric *gk_metric_histogram(const char *name, const char *help, const char *labels, const double *bounds,
			       size_t n_bounds)
{
	return declare(GK_METRIC_HISTOGRAM, name, help, labels, bounds, n_bounds);
}

gk_metric *gk_metric_counter_var(const char *name, const char *help, const uint64_t *p)
{
	gk_metric *m = gk_metric_counter(name, help, NULL);
	gk_metric_bind(m, p, NULL);
	return m;
}

gk_metric *gk_metric_gauge_var(const char *name, const char *help, const uint64_t *p)
{
	gk_metric *m = gk_metric_gauge(name, help, NULL);
	gk_metric_bind(m, p, NULL);
	return m;
}

/* ---- series ------------------------------------------------------------------ */

static bool lv_eq(const gk_metric *m, const series *s, const char *const *lv)
{
	for (size_t i = 0; i < m->n_labels; i++) {
		const char *v = lv && lv[i] ? lv[i] : "";
		if (strncmp(s->lv[i], v, GK_METRIC_VALUE_MAX) != 0)
			return false;
	}
	return true;
}

/* mu held. The series of lv, created when absent (NULL past max_series or on OOM). */
static series *get(gk_metric *m, const char *const *lv, bool create)
{
	for (size_t i = 0; i < m->n; i++)
		if (lv_eq(m, &m->s[i], lv))
			return &m->s[i];
	if (!create)
		return NULL;
	if (m->n >= m->max_series) {
		m->r->dropped++;
		return NULL;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 4;
		if (cap > m->max_series)
			cap = m->max_series;
		series *s = realloc(m->s, cap * sizeof(*s));
		if (!s)
			return NULL;
		m->s = s;
		m->cap = cap;
	}
	series s = { 0 };
	for (size_t i = 0; i < m->n_labels; i++) {
		const char *v = lv && lv[i] ? lv[i] : "";
		if (!(s.lv[i] = strndup(v, GK_METRIC_VALUE_MAX)))
			goto oom;
	}
	if (m->type == GK_METRIC_HISTOGRAM && !(s.buckets = calloc(m->n_bounds + 1, sizeof(uint64_t))))
		goto oom;
	m->s[m->n] = s;
	return &m->s[m->n++];
oom:
	series_free(&s);
	return NULL;
}

void gk_metric_add(gk_metric *m, double v, const char *const *lv)
{
	if (!m || m->type == GK_METRIC_HISTOGRAM || (m->type == GK_METRIC_COUNTER && !(v >= 0)))
		return;
	pthread_mutex_lock(&m->r->mu);
	series *s = get(m, lv, true);
	if (s && !s->ptr)
		s->value += v;
	pthread_mutex_unlock(&m->r->mu);
}

void gk_metric_set(gk_metric *m, double v, const char *const *lv)
{
	if (!m || m->type == GK_METRIC_HISTOGRAM)
		return;
	pthread_mutex_lock(&m->r->mu);
	series *s = get(m, lv, true);
	if (s) {
		s->value = v;
		s->ptr = NULL;
	}
	pthread_mutex_unlock(&m->r->mu);
}

void gk_metric_observe(gk_metric *m, double v, const char *const *lv)
{
	if (!m || m->type != GK_METRIC_HISTOGRAM || isnan(v))
		return;
	pthread_mutex_lock(&m->r->mu);
	series *s = get(m, lv, true);
	if (s) {
		size_t b = 0;
		while (b < m->n_bounds && v > m->bounds[b])
			b++;
		s->buckets[b]++;
		s->sum += v;
	}
	pthread_mutex_unlock(&m->r->mu);
}

void gk_metric_bind(gk_metric *m, const uint64_t *p, const char *const *lv)
{
	if (!m || m->type == GK_METRIC_HISTOGRAM || !p)
		return;
	pthread_mutex_lock(&m->r->mu);
	series *s = get(m, lv, true);
	if (s)
		s->ptr = p;
	pthread_mutex_unlock(&m->r->mu);
}

static void remove_at(gk_metric *m, size_t i)
{
	series_free(&m->s[i]);
	m->s[i] = m->s[--m->n];
}

void gk_metric_remove(gk_metric *m, const char *const *lv)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->r->mu);
	for (size_t i = 0; i < m->n; i++)
		if (lv_eq(m, &m->s[i], lv)) {
			remove_at(m, i);
			break;
		}
	pthread_mutex_unlock(&m->r->mu);
}

void gk_metric_remove_matching(gk_metric *m, const char *label, const char *value)
{
	if (!m || !label || !value)
		return;
	size_t k = 0;
	while (k < m->n_labels && strcmp(m->labels[k], label))
		k++;
	if (k == m->n_labels)
		return;
	pthread_mutex_lock(&m->r->mu);
	for (size_t i = 0; i < m->n;)
		if (strncmp(m->s[i].lv[k], value, GK_METRIC_VALUE_MAX) == 0)
			remove_at(m, i);
		else
			i++;
	pthread_mutex_unlock(&m->r->mu);
}

double gk_metric_value(gk_metric *m, const char *const *lv)
{
	if (!m)
		return 0;
	double v = 0;
	pthread_mutex_lock(&m->r->mu);
	series *s = get(m, lv, false);
	if (s && m->type == GK_METRIC_HISTOGRAM)
		for (size_t b = 0; b <= m->n_bounds; b++)
			v += (double)s->buckets[b];
	else if (s)
		v = s->ptr ? (double)*s->ptr : s->value;
	pthread_mutex_unlock(&m->r->mu);
	return v;
}

uint64_t gk_metric_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

double gk_metric_since(uint64_t start_us)
{
	uint64_t now = gk_metric_now_us();
	return now > start_us ? (double)(now - start_us) / 1e6 : 0;
}

void gk_metric_reconcile(uint64_t start_us, const char *result)
{
	static gk_metric *h;
	if (!h)
		h = gk_metric_histogram("gpukmm_reconcile_duration_seconds",
					"Duration of one reconcile pass of a policy, from the key handed out by the "
					"work queue to the pass's end (API calls included), by result: success, "
					"error (retried with backoff) or requeue.",
					"result", GK_METRIC_RECONCILE_BUCKETS, GK_METRIC_N_RECONCILE_BUCKETS);
	gk_metric_observe(h, gk_metric_since(start_us), GK_LV(result));
}

/* ---- collection ---------------------------------------------------------------- */

static Gpukmm__MetricSet *copy_set(const Gpukmm__MetricSet *set)
{
	return (Gpukmm__MetricSet *)gk_wsub_clone(&set->base); /* a deep copy by pack + unpack */
}

Gpukmm__MetricSet *gk_metrics_copy(Gpukmm__MetricFamily *const *f, size_t n)
{
	if (!f || !n)
		return NULL;
	Gpukmm__MetricSet set = GPUKMM__METRIC_SET__INIT;
	set.families = (Gpukmm__MetricFamily **)f;
	set.n_families = n;
	return copy_set(&set);
}

Gpukmm__MetricSet *gk_metrics_snapshot(gk_metrics *r)
{
	if (!r)
		return NULL;
	Gpukmm__MetricSet *out = NULL;
	pthread_mutex_lock(&r->mu);
	size_t nf = r->n + 1, ns = 1;
	for (size_t i = 0; i < r->n; i++)
		ns += r->f[i]->n;
	Gpukmm__MetricFamily *fam = calloc(nf, sizeof(*fam)), **fp = calloc(nf, sizeof(*fp));
	Gpukmm__MetricSample *smp = calloc(ns, sizeof(*smp)), **sp = calloc(ns, sizeof(*sp));
	if (!fam || !fp || !smp || !sp)
		goto done;
	size_t k = 0, j = 0;
	for (size_t i = 0; i < r->n; i++, k++) {
		gk_metric *m = r->f[i];
		gpukmm__metric_family__init(&fam[k]);
		fp[k] = &fam[k];
		fam[k].name = m->name;
		fam[k].help = m->help;
		fam[k].has_type = true;
		fam[k].type = (Gpukmm__MetricType)m->type;
		fam[k].label_names = m->labels;
		fam[k].n_label_names = m->n_labels;
		fam[k].bounds = m->bounds;
		fam[k].n_bounds = m->n_bounds;
		fam[k].samples = &sp[j];
		fam[k].n_samples = m->n;
		for (size_t s = 0; s < m->n; s++, j++) {
			gpukmm__metric_sample__init(&smp[j]);
			sp[j] = &smp[j];
			smp[j].label_values = m->s[s].lv;
			smp[j].n_label_values = m->n_labels;
			if (m->type == GK_METRIC_HISTOGRAM) {
				smp[j].bucket_counts = m->s[s].buckets;
				smp[j].n_bucket_counts = m->n_bounds + 1;
				smp[j].has_sum = true;
				smp[j].sum = m->s[s].sum;
			} else {
				smp[j].has_value = true;
				smp[j].value = m->s[s].ptr ? (double)*m->s[s].ptr : m->s[s].value;
			}
		}
	}
	/* the registry's own health (heartbeats: the supervisor's has none) */
	if (r != default_reg)
		goto pack;
	gpukmm__metric_family__init(&fam[k]);
	fp[k] = &fam[k];
	fam[k].name = "gpukmm_metrics_series_dropped_total";
	fam[k].help = "Label sets not recorded because their family already had its maximum number of series.";
	fam[k].has_type = true;
	fam[k].type = GPUKMM__METRIC_TYPE__METRIC_COUNTER;
	fam[k].samples = &sp[j];
	fam[k].n_samples = 1;
	gpukmm__metric_sample__init(&smp[j]);
	sp[j] = &smp[j];
	smp[j].has_value = true;
	smp[j].value = (double)r->dropped;
	k++;
pack:;
	Gpukmm__MetricSet set = GPUKMM__METRIC_SET__INIT;
	set.families = fp;
	set.n_families = k;
	out = copy_set(&set);
done:
	pthread_mutex_unlock(&r->mu);
	free(fam);
	free(fp);
	free(smp);
	free(sp);
	return out;
}
