/* gpukmm-statusd controller mode: the watcher bus ("clusterpolicy", "node",
 * "discovery", "leadership") and Watcher.Snapshot on start and after a gap,
 * feeding the view (view.h). Events that arrive while a snapshot is in
 * flight are buffered (bounded) and replayed when newer than it. */
#ifndef GPUKMM_STATUSD_WATCH_H
#define GPUKMM_STATUSD_WATCH_H

#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/loop.h"
#include "view.h"

typedef struct gk_sd_watch gk_sd_watch;

typedef struct gk_sd_watch_stats {
	uint64_t snapshots, gaps, events, event_errors;
} gk_sd_watch_stats;

int gk_sd_watch_open(gk_sd_watch **out, gk_loop *loop, const char *events_url, const char *watcher_url,
		     gk_sd_view *view, gk_err *err);
/* Cancels an outstanding snapshot; call before the view is freed. */
void gk_sd_watch_close(gk_sd_watch *w);
const gk_sd_watch_stats *gk_sd_watch_stats_get(const gk_sd_watch *w);

#endif
