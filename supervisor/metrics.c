/* /metrics: the Prometheus text exposition of the supervisor and its services.
 * Rendered on the loop thread from the live state, then handed to the HTTP
 * thread as a finished buffer (http.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sup.h"

uint64_t gk_sup_rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long size, rss;
	uint64_t out = 0;
	if (f) {
		if (fscanf(f, "%lu %lu", &size, &rss) == 2)
			out = (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
		fclose(f);
	}
	return out;
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *gk_sup_metrics_render(const gk_sup *s, int64_t now_ms, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	family(f, "gpukmm_ready", "gauge", "1 when every required service is ready.");
	fprintf(f, "gpukmm_ready %d\n", s->ready ? 1 : 0);
	family(f, "gpukmm_uptime_seconds", "gauge", "Seconds since the supervisor started.");
	fprintf(f, "gpukmm_uptime_seconds %.3f\n", (double)(now_ms - s->start_ms) / 1000.0);
	family(f, "gpukmm_process_resident_memory_bytes", "gauge", "Resident memory of the supervisor.");
	fprintf(f, "gpukmm_process_resident_memory_bytes %llu\n", (unsigned long long)gk_sup_rss_bytes());
	family(f, "gpukmm_log_lines_total", "counter", "Service output lines forwarded.");
	fprintf(f, "gpukmm_log_lines_total %llu\n", (unsigned long long)s->out.lines);
	family(f, "gpukmm_log_lines_dropped_total", "counter",
	       "Output lines dropped because our own output was too slow.");
	fprintf(f, "gpukmm_log_lines_dropped_total %llu\n", (unsigned long long)s->out.dropped);
	family(f, "gpukmm_reaped_unknown_total", "counter", "Reaped children that were no service's main process.");
	fprintf(f, "gpukmm_reaped_unknown_total %llu\n", (unsigned long long)s->unknown_reaped);

	static const struct { const char *name, *type, *help; } fam[] = {
		{ "gpukmm_service_up", "gauge", "1 when the service has a running process." },
		{ "gpukmm_service_ready", "gauge", "1 when the service said Ready (and is not stopping)." },
		{ "gpukmm_service_restarts_total", "counter", "Restarts of the service." },
		{ "gpukmm_service_last_exit_code", "gauge", "Exit code of the last exit (-1: none or a signal)." },
		{ "gpukmm_service_last_exit_signal", "gauge", "Signal of the last exit (0: none)." },
		{ "gpukmm_service_uptime_seconds", "gauge", "Seconds since the current process started (0: none)." },
		{ "gpukmm_service_state", "gauge", "1 for the state the service is in." },
	};
	for (size_t k = 0; k < sizeof(fam) / sizeof(fam[0]); k++) {
		family(f, fam[k].name, fam[k].type, fam[k].help);
		for (size_t i = 0; i < s->n; i++) {
			const gk_sup_svc *v = &s->svcs[i];
			const char *nm = v->conf->name;
			switch (k) {
			case 0: fprintf(f, "%s{service=\"%s\"} %d\n", fam[k].name, nm, v->pid > 0); break;
			case 1: fprintf(f, "%s{service=\"%s\"} %d\n", fam[k].name, nm, v->state == GK_SUP_READY); break;
			case 2: fprintf(f, "%s{service=\"%s\"} %u\n", fam[k].name, nm, v->restarts); break;
			case 3: fprintf(f, "%s{service=\"%s\"} %d\n", fam[k].name, nm, v->last_exit_code); break;
			case 4: fprintf(f, "%s{service=\"%s\"} %d\n", fam[k].name, nm, v->last_signal); break;
			case 5:
				fprintf(f, "%s{service=\"%s\"} %.3f\n", fam[k].name, nm,
					v->pid > 0 ? (double)(now_ms - v->spawned_ms) / 1000.0 : 0.0);
				break;
			case 6:
				for (int st = 0; st < GK_SUP_NSTATES; st++)
					fprintf(f, "%s{service=\"%s\",state=\"%s\"} %d\n", fam[k].name, nm,
						gk_sup_state_name(st), (int)v->state == st);
				break;
			}
		}
	}
	/* the counters services send with their heartbeats: one family per name,
	 * HELP/TYPE once, a sample per service that reports it */
	for (size_t i = 0; i < s->n; i++) {
		for (size_t c = 0; c < s->svcs[i].n_counters; c++) {
			const gk_sup_counter *ct = &s->svcs[i].counters[c];
			bool seen = false;
			for (size_t j = 0; j < i && !seen; j++)
				for (size_t d = 0; d < s->svcs[j].n_counters && !seen; d++)
					seen = strcmp(s->svcs[j].counters[d].name, ct->name) == 0;
			for (size_t d = 0; d < c && !seen; d++)
				seen = strcmp(s->svcs[i].counters[d].name, ct->name) == 0;
			if (seen)
				continue;
			fprintf(f, "# HELP gpukmm_svc_%s %s\n# TYPE gpukmm_svc_%s counter\n", ct->name,
				ct->help[0] ? ct->help : "Counter reported by the service.", ct->name);
			for (size_t j = i; j < s->n; j++)
				for (size_t d = 0; d < s->svcs[j].n_counters; d++)
					if (strcmp(s->svcs[j].counters[d].name, ct->name) == 0) {
						fprintf(f, "gpukmm_svc_%s{service=\"%s\"} %llu\n", ct->name,
							s->svcs[j].conf->name,
							(unsigned long long)s->svcs[j].counters[d].value);
						break;
					}
		}
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}
