/* gpukmm-modmgr — deduplicated Kubernetes Events (see evrec.h). */
#include "evrec.h"
#include "gpukmm/kobj.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ev_ent {
	uint64_t hash;
	char name[GK_MM_NAME_MAX + 20];
	int32_t count;           /* written so far */
	int32_t pending;         /* repeats not written yet */
	int64_t last_write_ms;
	uint64_t used;           /* LRU clock */
} ev_ent;

struct gk_mm_evrec {
	ev_ent *v;
	size_t n, max;
	int64_t min_interval;
	uint64_t clock;
};

int gk_mm_evrec_new(gk_mm_evrec **out, size_t max, int64_t min_interval_ms, gk_err *err)
{
	*out = NULL;
	gk_mm_evrec *r = calloc(1, sizeof(*r));
	if (!r)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "events: out of memory");
	r->max = max ? max : 256;
	r->min_interval = min_interval_ms > 0 ? min_interval_ms : 60000;
	r->v = calloc(r->max, sizeof(*r->v));
	if (!r->v) {
		free(r);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "events: out of memory");
	}
	*out = r;
	return GK_OK;
}

void gk_mm_evrec_free(gk_mm_evrec *r)
{
	if (!r)
		return;
	free(r->v);
	free(r);
}

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; s && *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	h ^= 0xff; /* field separator */
	h *= 1099511628211ull;
	return h;
}

void gk_mm_evrec_note(gk_mm_evrec *r, const char *policy, const char *uid, const gk_mm_event *ev,
		      int64_t now_ms, gk_mm_evwrite *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t h = 14695981039346656037ull;
	h = fnv(h, policy);
	h = fnv(h, uid);
	h = fnv(h, ev->warning ? "Warning" : "Normal");
	h = fnv(h, ev->reason);
	h = fnv(h, ev->message);
	ev_ent *e = NULL, *lru = NULL;
	for (size_t i = 0; i < r->n; i++) {
		if (r->v[i].hash == h) {
			e = &r->v[i];
			break;
		}
		if (!lru || r->v[i].used < lru->used)
			lru = &r->v[i];
	}
	r->clock++;
	if (e) {
		e->used = r->clock;
		e->pending++;
		if (now_ms - e->last_write_ms < r->min_interval) {
			out->op = GK_MM_EV_SKIP;
			return;
		}
		e->count += e->pending;
		e->pending = 0;
		e->last_write_ms = now_ms;
		out->op = GK_MM_EV_BUMP;
		out->count = e->count;
		memcpy(out->name, e->name, sizeof(out->name));
		return;
	}
	e = r->n < r->max ? &r->v[r->n++] : lru;
	memset(e, 0, sizeof(*e));
	e->hash = h;
	e->used = r->clock;
	e->count = 1;
	e->last_write_ms = now_ms;
	snprintf(e->name, sizeof(e->name), "%s.%016llx", policy ? policy : "", (unsigned long long)h);
	out->op = GK_MM_EV_CREATE;
	out->count = 1;
	memcpy(out->name, e->name, sizeof(out->name));
}

cJSON *gk_mm_event_json(const char *ns, const char *policy, const char *uid, const gk_mm_event *ev,
			const gk_mm_evwrite *w, const char *ts, const char *instance)
{
	const gk_kobj_event e = { .name = w->name, .ns = ns, .api_version = "intel.com/v1alpha1",
				  .kind = "ClusterPolicy", .object = policy, .uid = uid, .warning = ev->warning,
				  .reason = ev->reason, .message = ev->message, .count = w->count, .ts = ts,
				  .component = "gpukmm-modmgr", .reporting_component = "gpukmm.io/modmgr",
				  .instance = instance };
	return gk_kobj_event_json(&e);
}

char *gk_mm_event_bump_patch(int32_t count, const char *ts)
{
	char *s = NULL;
	if (asprintf(&s, "{\"count\":%d,\"lastTimestamp\":\"%s\"}", count, ts) < 0)
		return NULL;
	return s;
}
