/* gpukmm-watcher — what discovery makes us believe about one API (a
 * group/version/resource), debounced (ARCHITECTURE.md §4). Pure: time is passed in.
 *
 *   served   believed at once: one well-formed answer that lists the resource
 *            (appearing is safe: a watch starts, nothing is deleted);
 *   absent   believed only after WD_READS consecutive well-formed absent
 *            answers (a 404 of the group-version, or an APIResourceList without
 *            the resource) spanning at least span_ms; until then an API that
 *            was served stays served ("suspect") and one never seen stays
 *            unknown: both are unconfirmed, and nothing is deleted, stopped or
 *            un-finalized on them;
 *   a failed read (5xx, 403, timeout, a 200 that is not an APIResourceList)
 *            changes nothing: it neither counts as absent nor breaks the streak.
 *
 * Why 3 reads over 20 s (the default span): an API server restarting or rolling
 * out (two replicas answering from different discovery caches), a CRD being
 * re-established or an aggregated API server's discovery refresh all produce a
 * few seconds of 404s; 20 s is two default discovery periods, so one stray 404,
 * or a burst of them shorter than that, is never believed. Believing an
 * uninstall 20-30 s late costs nothing (KMM being uninstalled is rare and the
 * state is kept meanwhile); believing a blip unloads GPU drivers. */
#ifndef GPUKMM_WATCHER_DISC_H
#define GPUKMM_WATCHER_DISC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WD_READS 3
#define WD_SPAN_MS 20000

enum wd_state { WD_UNKNOWN = 0, WD_SERVED, WD_ABSENT };

typedef struct wd_gate {
	enum wd_state state;
	int absent_reads;           /* consecutive well-formed absent answers */
	int64_t first_absent_ms;    /* when the streak began */
	bool answered;              /* one well-formed answer at least */
} wd_gate;

/* One discovery answer: r = 1 served, 0 absent, < 0 failed. Returns true when
 * the believed state (served/absent/unknown) changed. */
bool wd_note(wd_gate *g, int r, int64_t now_ms, int64_t span_ms);
/* Served, or confirmed absent (not unknown, not a served API being debounced). */
bool wd_confirmed(const wd_gate *g);
/* Why g is not confirmed, for the status ("" when it is): gv names the API. */
void wd_why(const wd_gate *g, const char *gv, int64_t now_ms, int64_t span_ms, char *buf, size_t cap);

/* resource.k8s.io versions, newest first, and which one to read claims in:
 * the newest believed served, -1 if none is. */
#define WD_DRA_N 4
extern const char *const wd_dra_versions[WD_DRA_N]; /* v1, v1beta2, v1beta1, v1alpha3 */
int wd_dra_pick(const wd_gate g[WD_DRA_N]);
/* Every version confirmed absent: DRA is not enabled. */
bool wd_dra_none(const wd_gate g[WD_DRA_N]);

#endif
