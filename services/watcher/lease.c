/* gpukmm-watcher leader election decisions (see lease.h). */
#include <stdio.h>
#include <string.h>

#include "lease.h"

static void copy(char *dst, size_t cap, const cJSON *v)
{
	dst[0] = 0;
	if (cJSON_IsString(v))
		snprintf(dst, cap, "%s", v->valuestring);
}

void wl_lease_parse(wl_lease *l, const cJSON *obj)
{
	memset(l, 0, sizeof *l);
	if (!cJSON_IsObject(obj))
		return;
	l->exists = true;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	copy(l->rv, sizeof l->rv, cJSON_GetObjectItemCaseSensitive(md, "resourceVersion"));
	copy(l->holder, sizeof l->holder, cJSON_GetObjectItemCaseSensitive(sp, "holderIdentity"));
	copy(l->renew_time, sizeof l->renew_time, cJSON_GetObjectItemCaseSensitive(sp, "renewTime"));
	copy(l->acquire_time, sizeof l->acquire_time, cJSON_GetObjectItemCaseSensitive(sp, "acquireTime"));
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(sp, "leaseDurationSeconds");
	if (cJSON_IsNumber(d) && d->valuedouble > 0 && d->valuedouble < 86400)
		l->duration_s = (int)d->valuedouble;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(sp, "leaseTransitions");
	if (cJSON_IsNumber(t) && t->valuedouble >= 0 && t->valuedouble < 2e9)
		l->transitions = (int)t->valuedouble;
}

enum wl_action wl_decide(wl_state *s, const wl_lease *l, const char *me, const wl_config *c,
			 int64_t now_ms)
{
	if (!l->exists)
		return WL_CREATE;
	if (strcmp(s->seen_holder, l->holder) || strcmp(s->seen_renew, l->renew_time) ||
	    !s->observed_ms) {
		snprintf(s->seen_holder, sizeof s->seen_holder, "%s", l->holder);
		snprintf(s->seen_renew, sizeof s->seen_renew, "%s", l->renew_time);
		s->observed_ms = now_ms;
	}
	if (!strcmp(l->holder, me))
		return WL_RENEW;
	if (s->leader)
		s->leader = false; /* someone else holds it now */
	int64_t dur = l->duration_s > 0 ? (int64_t)l->duration_s * 1000 : c->lease_ms;
	if (!l->holder[0] || now_ms - s->observed_ms > dur)
		return WL_TAKE;
	return WL_WAIT;
}

bool wl_result(wl_state *s, enum wl_action a, bool ok, const wl_config *c, int64_t now_ms)
{
	bool was = s->leader;
	if (a == WL_WAIT)
		return wl_check_deadline(s, c, now_ms) || was != s->leader;
	if (ok) {
		s->leader = true;
		s->last_renew_ms = now_ms;
	} else {
		wl_check_deadline(s, c, now_ms);
		if (a != WL_RENEW)
			s->leader = false;
	}
	return was != s->leader;
}

bool wl_check_deadline(wl_state *s, const wl_config *c, int64_t now_ms)
{
	if (s->leader && now_ms - s->last_renew_ms > c->renew_deadline_ms) {
		s->leader = false;
		return true;
	}
	return false;
}

cJSON *wl_lease_body(const char *ns, const char *name, const wl_lease *cur, enum wl_action a,
		     const char *holder, const wl_config *c, const char *now)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *md = cJSON_AddObjectToObject(o, "metadata");
	cJSON *sp = cJSON_AddObjectToObject(o, "spec");
	if (!o || !md || !sp)
		goto fail;
	int transitions = cur && cur->exists ? cur->transitions : 0;
	if (a == WL_TAKE && cur && cur->holder[0] && strcmp(cur->holder, holder))
		transitions++;
	if (!cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1") ||
	    !cJSON_AddStringToObject(o, "kind", "Lease") ||
	    !cJSON_AddStringToObject(md, "name", name) || !cJSON_AddStringToObject(md, "namespace", ns) ||
	    (cur && cur->exists && cur->rv[0] &&
	     !cJSON_AddStringToObject(md, "resourceVersion", cur->rv)) ||
	    !cJSON_AddStringToObject(sp, "holderIdentity", holder) ||
	    !cJSON_AddNumberToObject(sp, "leaseDurationSeconds",
				     (double)((c->lease_ms + 999) / 1000)) ||
	    !cJSON_AddStringToObject(sp, "renewTime", now) ||
	    !cJSON_AddNumberToObject(sp, "leaseTransitions", transitions))
		goto fail;
	if (a == WL_CREATE || a == WL_TAKE) {
		if (!cJSON_AddStringToObject(sp, "acquireTime", now))
			goto fail;
	} else if (cur && cur->acquire_time[0]) {
		/* PUT replaces the spec: carry acquireTime over */
		if (!cJSON_AddStringToObject(sp, "acquireTime", cur->acquire_time))
			goto fail;
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}
