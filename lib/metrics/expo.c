/* gpukmm — Prometheus text exposition (format 0.0.4) of metric families
 * (see gk_metrics_render in include/gpukmm/metrics.h). Pure: families in,
 * text out. What comes from a service is checked here, so a service cannot
 * inject lines or break the page. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/metrics.h"

/* The shortest of %.15g..%.17g that reads back as v. */
static void fmt_double(char *buf, size_t cap, double v)
{
	for (int p = 15; p <= 17; p++) {
		snprintf(buf, cap, "%.*g", p, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

static void put_value(FILE *f, double v)
{
	char b[40];
	if (isnan(v))
		fputs("NaN", f);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", f);
	else {
		fmt_double(b, sizeof(b), v);
		fputs(b, f);
	}
}

/* Length of the valid UTF-8 sequence at s (1..4), 0 when invalid. */
static size_t utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	size_t n = (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (!n || (n == 2 && s[0] < 0xc2))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* Escaped for a label value (quote) or HELP text; bytes that are not UTF-8 become '?'. */
static void put_escaped(FILE *f, const char *s, bool quote)
{
	while (s && *s) {
		size_t n = utf8_len((const unsigned char *)s);
		if (n > 1) {
			fwrite(s, 1, n, f);
			s += n;
			continue;
		}
		if (!n)
			fputc('?', f);
		else if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else if (quote && *s == '"')
			fputs("\\\"", f);
		else
			fputc(*s, f);
		s++;
	}
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static const char *type_name(int t)
{
	switch (t) {
	case GPUKMM__METRIC_TYPE__METRIC_COUNTER: return "counter";
	case GPUKMM__METRIC_TYPE__METRIC_GAUGE: return "gauge";
	case GPUKMM__METRIC_TYPE__METRIC_HISTOGRAM: return "histogram";
	}
	return NULL;
}

/* Is the family well-formed for rendering with `extra` as an added label? */
static bool valid(const Gpukmm__MetricFamily *m, const char *extra)
{
	if (!m || !gk_metrics_name_ok(m->name) || !type_name(m->type))
		return false;
	bool hist = m->type == GPUKMM__METRIC_TYPE__METRIC_HISTOGRAM;
	/* a histogram's derived names must not read as another family's */
	if (!hist && (ends_with(m->name, "_bucket") || ends_with(m->name, "_count") || ends_with(m->name, "_sum")))
		return false;
	for (size_t i = 0; i < m->n_label_names; i++) {
		const char *l = m->label_names[i];
		if (!gk_metrics_label_ok(l) || (extra && !strcmp(l, extra)) || !strcmp(l, "le"))
			return false;
		for (size_t k = 0; k < i; k++)
			if (!strcmp(l, m->label_names[k]))
				return false;
	}
	for (size_t i = 0; hist && i < m->n_bounds; i++)
		if (!isfinite(m->bounds[i]) || (i && m->bounds[i] <= m->bounds[i - 1]))
			return false;
	for (size_t s = 0; s < m->n_samples; s++) {
		const Gpukmm__MetricSample *x = m->samples[s];
		if (!x || x->n_label_values != m->n_label_names)
			return false;
		if (hist && x->n_bucket_counts != m->n_bounds + 1)
			return false;
	}
	return true;
}

/* The label block: {extra="v",a="x",...,le="b"} (nothing when empty). */
static void put_labels(FILE *f, const char *extra, const char *extra_value, const Gpukmm__MetricFamily *m,
		       const Gpukmm__MetricSample *x, const char *le)
{
	bool any = false;
	if (extra) {
		fprintf(f, "{%s=\"", extra);
		put_escaped(f, extra_value, true);
		fputc('"', f);
		any = true;
	}
	for (size_t i = 0; i < m->n_label_names; i++) {
		fprintf(f, "%s%s=\"", any ? "," : "{", m->label_names[i]);
		put_escaped(f, x->label_values[i], true);
		fputc('"', f);
		any = true;
	}
	if (le) {
		fprintf(f, "%sle=\"%s\"", any ? "," : "{", le);
		any = true;
	}
	if (any)
		fputc('}', f);
}

static void put_samples(FILE *f, const gk_metrics_source *src, const Gpukmm__MetricFamily *m)
{
	for (size_t s = 0; s < m->n_samples; s++) {
		const Gpukmm__MetricSample *x = m->samples[s];
		if (m->type != GPUKMM__METRIC_TYPE__METRIC_HISTOGRAM) {
			fputs(m->name, f);
			put_labels(f, src->extra_name, src->extra_value, m, x, NULL);
			fputc(' ', f);
			put_value(f, x->value);
			fputc('\n', f);
			continue;
		}
		uint64_t cum = 0;
		for (size_t b = 0; b <= m->n_bounds; b++) {
			char le[40];
			if (b < m->n_bounds)
				fmt_double(le, sizeof(le), m->bounds[b]);
			else
				snprintf(le, sizeof(le), "+Inf");
			cum += x->bucket_counts[b];
			fprintf(f, "%s_bucket", m->name);
			put_labels(f, src->extra_name, src->extra_value, m, x, le);
			fprintf(f, " %llu\n", (unsigned long long)cum);
		}
		fprintf(f, "%s_sum", m->name);
		put_labels(f, src->extra_name, src->extra_value, m, x, NULL);
		fputc(' ', f);
		put_value(f, x->sum);
		fprintf(f, "\n%s_count", m->name);
		put_labels(f, src->extra_name, src->extra_value, m, x, NULL);
		fprintf(f, " %llu\n", (unsigned long long)cum);
	}
}

typedef struct fam_ref {
	size_t src, idx;
} fam_ref;

int gk_metrics_render(FILE *f, const gk_metrics_source *src, size_t n_src, size_t *skipped)
{
	size_t total = 0, skip = 0;
	for (size_t s = 0; s < n_src; s++)
		total += src[s].n;
	/* done[s][i]: family i of source s rendered or skipped */
	bool *done = calloc(total ? total : 1, sizeof(bool));
	size_t *base = calloc(n_src ? n_src : 1, sizeof(size_t));
	if (!done || !base) {
		free(done);
		free(base);
		return -1;
	}
	for (size_t s = 0, b = 0; s < n_src; s++) {
		base[s] = b;
		b += src[s].n;
	}
	for (size_t s = 0; s < n_src; s++) {
		for (size_t i = 0; i < src[s].n; i++) {
			if (done[base[s] + i])
				continue;
			const Gpukmm__MetricFamily *m = src[s].families[i];
			done[base[s] + i] = true;
			if (!valid(m, src[s].extra_name)) {
				skip++;
				continue;
			}
			/* the first valid family of this name fixes HELP and TYPE */
			fprintf(f, "# HELP %s ", m->name);
			put_escaped(f, m->help && *m->help ? m->help : "(no help)", false);
			fprintf(f, "\n# TYPE %s %s\n", m->name, type_name(m->type));
			put_samples(f, &src[s], m);
			for (size_t t = s; t < n_src; t++) {
				bool put = t == s;
				for (size_t k = t == s ? i + 1 : 0; k < src[t].n; k++) {
					const Gpukmm__MetricFamily *o = src[t].families[k];
					if (done[base[t] + k] || !o || !o->name || strcmp(o->name, m->name))
						continue;
					done[base[t] + k] = true;
					/* one family per name and source; a name owned by
					 * another source; another type; malformed */
					if (put || src[s].owner || src[t].owner || o->type != m->type ||
					    !valid(o, src[t].extra_name)) {
						skip++;
						continue;
					}
					put_samples(f, &src[t], o);
					put = true;
				}
			}
		}
	}
	free(done);
	free(base);
	if (skipped)
		*skipped = skip;
	return ferror(f) ? -1 : 0;
}
