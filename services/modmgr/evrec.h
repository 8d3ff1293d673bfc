/* gpukmm-modmgr — Kubernetes Events on the ClusterPolicy, deduplicated like
 * client-go's event correlator: a repeated (type, reason, message) on the same
 * object bumps `count` and `lastTimestamp` of the existing Event instead of
 * creating a new one, and repeats are coalesced to at most one write per
 * min_interval (a guard that blocks every 5 s must not write every 5 s).
 *
 * Pure: decides what to write; main.c does the API call. Event names are
 * deterministic ("<policy>.<16 hex of a hash of uid/type/reason/message>") so a
 * restarted manager finds its Event again (create → 409 → read and bump). */
#ifndef GPUKMM_MODMGR_EVREC_H
#define GPUKMM_MODMGR_EVREC_H

#include <cJSON.h>
#include <stdint.h>

#include "decide.h"
#include "gpukmm/err.h"

typedef struct gk_mm_evrec gk_mm_evrec;

enum gk_mm_evop { GK_MM_EV_SKIP = 0, GK_MM_EV_CREATE, GK_MM_EV_BUMP };

typedef struct gk_mm_evwrite {
	int op;                  /* enum gk_mm_evop */
	char name[GK_MM_NAME_MAX + 20];
	int32_t count;           /* the count to write */
} gk_mm_evwrite;

/* max: cached (object, event) pairs, 0 = 256 (least recently used evicted);
 * min_interval_ms: between two writes of the same Event, 0 = 60000. */
int gk_mm_evrec_new(gk_mm_evrec **out, size_t max, int64_t min_interval_ms, gk_err *err);
void gk_mm_evrec_free(gk_mm_evrec *r);

/* An event happened now: what to write. */
void gk_mm_evrec_note(gk_mm_evrec *r, const char *policy, const char *uid, const gk_mm_event *ev,
		      int64_t now_ms, gk_mm_evwrite *out);

/* The core/v1 Event object for a create, in namespace `ns` ("default" for a
 * cluster-scoped object, like client-go). `ts` RFC 3339; `instance` the
 * reporting instance (host name). NULL on out-of-memory. */
cJSON *gk_mm_event_json(const char *ns, const char *policy, const char *uid, const gk_mm_event *ev,
			const gk_mm_evwrite *w, const char *ts, const char *instance);
/* The merge patch for a bump: {"count":n,"lastTimestamp":ts}. malloc'd. */
char *gk_mm_event_bump_patch(int32_t count, const char *ts);

#endif
