/* /metrics: the Prometheus text exposition of the supervisor and its services.
 * The supervisor's own families live in its registry (s->reg, lib/metrics),
 * set from the live state at each render; each service's families are those
 * of its latest heartbeat, rendered with service="<name>". Rendered on the
 * loop thread, then handed to the HTTP threads as a finished buffer (http.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpukmm/metrics.h"
#include "gpukmm/version.h"
#include "sup.h"


static uint64_t statm_rss(const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned long size, rss;
	uint64_t out = 0;
	if (f) {
		if (fscanf(f, "%lu %lu", &size, &rss) == 2)
			out = (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
		fclose(f);
	}
	return out;
}

uint64_t gk_sup_rss_bytes(void)
{
	return statm_rss("/proc/self/statm");
}

enum {
	F_BUILD, F_READY, F_UPTIME, F_RSS, F_LINES, F_DROPPED, F_REAPED, F_SPAWN_ERR, F_UP, F_SREADY, F_RESTARTS,
	F_EXIT, F_SIGNAL, F_SUPTIME, F_STATE, F_SRSS, F_HB_AGE, F_SKIPPED, F_MREQ, F_MREV, F_N
};

static const gk_metric_desc families[F_N] = {
	[F_BUILD] = { "gpukmm_build_info", "Always 1: the version of the running gpukmm (git describe).",
		      GK_METRIC_GAUGE, "version" },
	[F_READY] = { "gpukmm_ready", "1 when every required service is ready.", GK_METRIC_GAUGE },
	[F_UPTIME] = { "gpukmm_uptime_seconds", "Seconds since the supervisor started.", GK_METRIC_GAUGE },
	[F_RSS] = { "gpukmm_process_resident_memory_bytes", "Resident memory of the supervisor.", GK_METRIC_GAUGE },
	[F_LINES] = { "gpukmm_log_lines_total", "Service output lines forwarded.", GK_METRIC_COUNTER },
	[F_DROPPED] = { "gpukmm_log_lines_dropped_total", "Output lines dropped because our own output was too slow.",
			GK_METRIC_COUNTER },
	[F_REAPED] = { "gpukmm_reaped_unknown_total", "Reaped children that were no service's main process.",
		       GK_METRIC_COUNTER },
	[F_SPAWN_ERR] = { "gpukmm_spawn_errors_total", "Service starts that failed before the exec.",
			  GK_METRIC_COUNTER },
	[F_UP] = { "gpukmm_service_up", "1 when the service has a running process.", GK_METRIC_GAUGE, "service" },
	[F_SREADY] = { "gpukmm_service_ready", "1 when the service said Ready (and is not stopping).", GK_METRIC_GAUGE,
		       "service" },
	[F_RESTARTS] = { "gpukmm_service_restarts_total", "Restarts of the service.", GK_METRIC_COUNTER, "service" },
	[F_EXIT] = { "gpukmm_service_last_exit_code", "Exit code of the last exit (-1: none or a signal).",
		     GK_METRIC_GAUGE, "service" },
	[F_SIGNAL] = { "gpukmm_service_last_exit_signal", "Signal of the last exit (0: none).", GK_METRIC_GAUGE,
		       "service" },
	[F_SUPTIME] = { "gpukmm_service_uptime_seconds", "Seconds since the current process started (0: none).",
			GK_METRIC_GAUGE, "service" },
	[F_STATE] = { "gpukmm_service_state",
		      "1 for the state the service is in (down, starting, ready, stopping, backoff, failed).",
		      GK_METRIC_GAUGE, "service,state" },
	[F_SRSS] = { "gpukmm_service_resident_memory_bytes", "Resident memory of the service's process (0: none).",
		     GK_METRIC_GAUGE, "service" },
	[F_HB_AGE] = { "gpukmm_service_heartbeat_age_seconds",
		       "Seconds since the service's last heartbeat (0: not running or none yet).", GK_METRIC_GAUGE,
		       "service" },
	[F_SKIPPED] = { "gpukmm_metrics_families_skipped",
			"Service metric families left out of the previous page: malformed, a name the supervisor "
			"owns, or a type that differs from another service's family of that name.",
			GK_METRIC_GAUGE },
	[F_MREQ] = { "gpukmm_metrics_requests_total",
		     "Requests to the /metrics server, by HTTP status code (401: no or a bad token, 403: not "
		     "allowed, 503: the review could not be done).",
		     GK_METRIC_COUNTER, "code" },
	[F_MREV] = { "gpukmm_metrics_reviews_total",
		     "Bearer tokens reviewed (TokenReview + SubjectAccessReview through the reviewer service), "
		     "by result: allowed, denied, unauthenticated, error. Cached verdicts are not counted.",
		     GK_METRIC_COUNTER, "result" },
};

struct gk_metric *gk_sup_metric(gk_sup *s, int which)
{
	return s->fam[which == GK_SUP_M_REQUESTS ? F_MREQ : F_MREV];
}

int gk_sup_metrics_init(gk_sup *s)
{
	if (!(s->reg = gk_metrics_new()))
		return -1;
	_Static_assert(F_N <= sizeof(s->fam) / sizeof(s->fam[0]), "gk_sup.fam too small");
	for (int i = 0; i < F_N; i++) {
		gk_metric_desc d = families[i];
		d.max_series = GK_SUP_MAX_SERVICES * GK_SUP_NSTATES;
		if (!(s->fam[i] = gk_metrics_family(s->reg, &d)))
			return -1;
	}
	gk_metric_set(s->fam[F_BUILD], 1, GK_LV(gk_version));
	return 0;
}

void gk_sup_metrics_fini(gk_sup *s)
{
	gk_metrics_free(s->reg);
	s->reg = NULL;
}

void gk_sup_svc_set_metrics(gk_sup_svc *v, struct Gpukmm__MetricSet *m)
{
	if (v->metrics)
		gpukmm__metric_set__free_unpacked(v->metrics, NULL);
	v->metrics = m;
}

/* The supervisor's families from the live state. */
static void update(const gk_sup *s, int64_t now_ms)
{
	gk_metric *const *f = s->fam;
	gk_metric_set(f[F_READY], s->ready ? 1 : 0, NULL);
	gk_metric_set(f[F_UPTIME], (double)(now_ms - s->start_ms) / 1000.0, NULL);
	gk_metric_set(f[F_RSS], (double)gk_sup_rss_bytes(), NULL);
	gk_metric_bind(f[F_LINES], &s->out.lines, NULL);
	gk_metric_bind(f[F_DROPPED], &s->out.dropped, NULL);
	gk_metric_bind(f[F_REAPED], &s->unknown_reaped, NULL);
	gk_metric_bind(f[F_SPAWN_ERR], &s->spawn_errors, NULL);
	gk_metric_set(f[F_SKIPPED], (double)s->metrics_skipped, NULL);
	for (size_t i = 0; i < s->n; i++) {
		const gk_sup_svc *v = &s->svcs[i];
		const char *nm = v->conf->name;
		bool running = v->pid > 0;
		gk_metric_set(f[F_UP], running, GK_LV(nm));
		gk_metric_set(f[F_SREADY], v->state == GK_SUP_READY, GK_LV(nm));
		gk_metric_set(f[F_RESTARTS], v->restarts, GK_LV(nm));
		gk_metric_set(f[F_EXIT], v->last_exit_code, GK_LV(nm));
		gk_metric_set(f[F_SIGNAL], v->last_signal, GK_LV(nm));
		gk_metric_set(f[F_SUPTIME], running ? (double)(now_ms - v->spawned_ms) / 1000.0 : 0, GK_LV(nm));
		for (int st = 0; st < GK_SUP_NSTATES; st++)
			gk_metric_set(f[F_STATE], (int)v->state == st, GK_LV(nm, gk_sup_state_name(st)));
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/statm", (int)v->pid);
		gk_metric_set(f[F_SRSS], running ? (double)statm_rss(path) : 0, GK_LV(nm));
		gk_metric_set(f[F_HB_AGE], running && v->last_hb_ms ? (double)(now_ms - v->last_hb_ms) / 1000.0 : 0,
			      GK_LV(nm));
	}
}

char *gk_sup_metrics_render(gk_sup *s, int64_t now_ms, size_t *len)
{
	update(s, now_ms);
	Gpukmm__MetricSet *own = gk_metrics_snapshot(s->reg);
	if (!own)
		return NULL;
	gk_metrics_source src[1 + GK_SUP_MAX_SERVICES];
	size_t n = 0;
	src[n++] = (gk_metrics_source){ .families = own->families, .n = own->n_families, .owner = true };
	for (size_t i = 0; i < s->n && n < sizeof(src) / sizeof(src[0]); i++)
		if (s->svcs[i].metrics)
			src[n++] = (gk_metrics_source){ .extra_name = "service",
							.extra_value = s->svcs[i].conf->name,
							.families = s->svcs[i].metrics->families,
							.n = s->svcs[i].metrics->n_families };
	char *buf = NULL;
	size_t blen = 0, skipped = 0;
	FILE *f = open_memstream(&buf, &blen);
	int rc = f ? gk_metrics_render(f, src, n, &skipped) : -1;
	if (f && fclose(f) != 0)
		rc = -1;
	gpukmm__metric_set__free_unpacked(own, NULL);
	if (rc) {
		free(buf);
		return NULL;
	}
	s->metrics_skipped = skipped;
	*len = blen;
	return buf;
}
