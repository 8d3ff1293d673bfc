/* gpukmm-watcher — debounced discovery (see disc.h). */
#include "disc.h"

#include <stdio.h>

const char *const wd_dra_versions[WD_DRA_N] = {"v1", "v1beta2", "v1beta1", "v1alpha3"};

bool wd_note(wd_gate *g, int r, int64_t now_ms, int64_t span_ms)
{
	enum wd_state before = g->state;
	if (r < 0)
		return false; /* a failed read says nothing */
	g->answered = true;
	if (r > 0) {
		g->state = WD_SERVED;
		g->absent_reads = 0;
		g->first_absent_ms = 0;
		return g->state != before;
	}
	if (g->absent_reads++ == 0)
		g->first_absent_ms = now_ms;
	if (g->absent_reads >= WD_READS && now_ms - g->first_absent_ms >= span_ms)
		g->state = WD_ABSENT;
	return g->state != before;
}

bool wd_confirmed(const wd_gate *g)
{
	return g->state == WD_ABSENT || (g->state == WD_SERVED && g->absent_reads == 0);
}

void wd_why(const wd_gate *g, const char *gv, int64_t now_ms, int64_t span_ms, char *buf, size_t cap)
{
	if (wd_confirmed(g)) {
		snprintf(buf, cap, "%s", "");
		return;
	}
	if (!g->answered) {
		snprintf(buf, cap, "discovery of %s has not answered yet", gv);
		return;
	}
	long secs = (long)((now_ms - g->first_absent_ms) / 1000);
	snprintf(buf, cap,
		 "%s %s absent in %d discovery read%s over %ld s; believed gone only after %d reads over %ld s",
		 gv, g->state == WD_SERVED ? "was served, but is" : "is", g->absent_reads,
		 g->absent_reads == 1 ? "" : "s", secs, WD_READS, (long)(span_ms / 1000));
}

int wd_dra_pick(const wd_gate g[WD_DRA_N])
{
	for (int i = 0; i < WD_DRA_N; i++)
		if (g[i].state == WD_SERVED)
			return i;
	return -1;
}

bool wd_dra_none(const wd_gate g[WD_DRA_N])
{
	for (int i = 0; i < WD_DRA_N; i++)
		if (g[i].state != WD_ABSENT)
			return false;
	return true;
}
