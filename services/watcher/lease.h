/* gpukmm-watcher: leader election on a coordination.k8s.io/v1 Lease (client-go's
 * leaderelection semantics). Pure: the caller reads the Lease, asks wl_decide()
 * what to do, writes, and reports the outcome. Expiry is judged on the local
 * monotonic clock from when we last saw the record change (no clock-skew
 * trust in the holder's renewTime), like client-go's observedTime. */
#ifndef GPUKMM_WATCHER_LEASE_H
#define GPUKMM_WATCHER_LEASE_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct wl_config {
	int64_t lease_ms, renew_deadline_ms, retry_ms; /* 15000, 10000, 2000 */
} wl_config;

typedef struct wl_lease {        /* what the API returned */
	bool exists;
	char holder[256];
	char renew_time[64];
	char acquire_time[64];
	char rv[64];
	int duration_s;
	int transitions;
} wl_lease;

typedef struct wl_state {
	char seen_holder[256], seen_renew[64];
	int64_t observed_ms;         /* monotonic ms when the record last changed */
	bool leader;
	int64_t last_renew_ms;       /* our last successful write */
} wl_state;

enum wl_action { WL_WAIT, WL_CREATE, WL_TAKE, WL_RENEW };

/* Parse a Lease object. */
void wl_lease_parse(wl_lease *l, const cJSON *obj);
enum wl_action wl_decide(wl_state *s, const wl_lease *l, const char *me, const wl_config *c,
			 int64_t now_ms);
/* After the write attempt: ok = the write succeeded. Returns true if the
 * leadership flag changed. */
bool wl_result(wl_state *s, enum wl_action a, bool ok, const wl_config *c, int64_t now_ms);
/* Time passes without a successful renew: drop leadership after the renew
 * deadline. Returns true if it changed. */
bool wl_check_deadline(wl_state *s, const wl_config *c, int64_t now_ms);
/* The Lease body to POST (create) or PUT (take/renew/release). `holder` ""
 * releases. now_rfc3339: MicroTime "2026-12-02T13:00:00.000000Z". */
cJSON *wl_lease_body(const char *ns, const char *name, const wl_lease *cur, enum wl_action a,
		     const char *holder, const wl_config *c, const char *now_rfc3339);

#endif
