/* gpukmm-statusd controller mode: report table and the status writer.
 *
 * Writes are JSON merge patches of the status subresource carrying
 * metadata.resourceVersion as a precondition: the API server answers 409 when
 * the object changed since we read it, and we re-read and recompute (so a
 * concurrent status writer is never overwritten blindly). Nothing is written
 * when the merged status equals the current one, so a restart (reports
 * arriving again with the same content) writes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrl.h"
#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "merge.h"
#include "nodes.h"

#define ATTEMPTS 5
#define RETRY_MS 1000
/* API calls block the loop: after this much work in one timer run the rest
 * waits for the next run, so RPCs and heartbeats are served in between */
#define BUDGET_MS 2000

typedef struct entry {
	char name[GK_SD_NAME_MAX];
	Gpukmm__StatusReport *rep[2]; /* 0 modmgr, 1 gater */
	bool dirty;
} entry;

struct gk_sd_ctrl {
	gk_loop *loop;
	gk_kube_client *kc;
	gk_sd_ctrl_opts o;
	entry *e;
	size_t n;
	gk_timer_id timer, grace_timer;
	int64_t start_ms;
	bool grace_over;
	gk_sd_stats st;
	const gk_sd_view *view;
	gk_sd_nodes sum; /* scratch */
};

static void arm(gk_sd_ctrl *c, int ms);

static void count_pending(gk_sd_ctrl *c)
{
	uint64_t n = 0;
	for (size_t i = 0; i < c->n; i++)
		n += c->e[i].dirty;
	c->st.pending = n;
}

static void rfc3339(char *buf, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static Gpukmm__StatusReport *dup_report(const Gpukmm__StatusReport *r)
{
	size_t len = protobuf_c_message_get_packed_size(&r->base);
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return NULL;
	protobuf_c_message_pack(&r->base, buf);
	Gpukmm__StatusReport *d = gpukmm__status_report__unpack(NULL, len, buf);
	free(buf);
	return d;
}

static entry *find(gk_sd_ctrl *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->e[i].name, name) == 0)
			return &c->e[i];
	return NULL;
}

static void drop(gk_sd_ctrl *c, entry *e)
{
	for (int k = 0; k < 2; k++)
		if (e->rep[k])
			gpukmm__status_report__free_unpacked(e->rep[k], NULL);
	*e = c->e[--c->n];
}

/* One policy: read, merge, write if different. 0 done, 1 retry later. */
static int write_one(gk_sd_ctrl *c, entry *e)
{
	gk_kube_ref ref = { .group = "intel.com", .version = "v1alpha1", .resource = "clusterpolicies",
			    .name = e->name };
	const gk_sd_nodes *nodes = NULL;
	if (c->view) {
		const Gpukmm__ClusterPolicy *cp = gk_sd_view_policy(c->view, e->name);
		size_t n;
		const gk_sd_node *const *v = gk_sd_view_nodes(c->view, &n);
		gk_err err;
		if (cp) {
			if (gk_sd_nodes_summarize(cp, v, n, &c->sum, &err) != GK_OK)
				return 1;
			nodes = &c->sum;
		}
	}
	/* nothing reported since our start: before the grace period ends the
	 * current status is the best there is (a restart writes nothing) */
	if (!e->rep[0] && !e->rep[1] && (!c->grace_over || !nodes))
		return 0;
	for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
		cJSON *obj = NULL;
		gk_kube_status ks;
		gk_err err;
		int rc = gk_kube_get(c->kc, &ref, &obj, &ks, &err);
		if (rc == GK_NOT_FOUND) {
			GK_DEBUG("ClusterPolicy %s is gone: nothing to write", e->name);
			return 0;
		}
		if (rc != GK_OK) {
			GK_WARN("read ClusterPolicy %s: %s", e->name, err.msg);
			c->st.write_errors++;
			return 1;
		}
		const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
		const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
		const cJSON *cur = cJSON_GetObjectItemCaseSensitive(obj, "status");
		char now[40];
		rfc3339(now, sizeof(now));
		gk_sd_inputs in = { .modmgr = e->rep[0], .gater = e->rep[1], .missing_is_empty = c->grace_over,
				    .now = now, .nodes = nodes };
		bool oom = false;
		cJSON *want = gk_sd_merge(cur, &in, &oom);
		cJSON *patch = want ? gk_sd_status_patch(cur, want, &oom) : NULL;
		if (want && !patch && !oom)
			GK_DEBUG("ClusterPolicy %s: status unchanged", e->name);
		cJSON_Delete(want);
		if (oom) {
			cJSON_Delete(obj);
			cJSON_Delete(patch);
			return 1;
		}
		if (!patch) {
			c->st.unchanged++;
			cJSON_Delete(obj);
			return 0;
		}
		cJSON *pm = cJSON_AddObjectToObject(patch, "metadata");
		if (!pm || !cJSON_IsString(rv) || !cJSON_AddStringToObject(pm, "resourceVersion", rv->valuestring)) {
			cJSON_Delete(obj);
			cJSON_Delete(patch);
			return 1;
		}
		cJSON_Delete(obj);
		char *body = cJSON_PrintUnformatted(patch);
		cJSON_Delete(patch);
		if (!body)
			return 1;
		ref.subresource = "status";
		rc = gk_kube_patch(c->kc, &ref, GK_PATCH_MERGE, body, NULL, false, NULL, &ks, &err);
		ref.subresource = NULL;
		free(body);
		if (rc == GK_OK) {
			c->st.writes++;
			GK_INFO("ClusterPolicy %s: status written", e->name);
			return 0;
		}
		if (rc == GK_ABORTED || rc == GK_ALREADY_EXISTS) {
			c->st.write_conflicts++;
			GK_DEBUG("ClusterPolicy %s: conflict, re-reading", e->name);
			continue;
		}
		if (rc == GK_NOT_FOUND)
			return 0;
		c->st.write_errors++;
		GK_WARN("write status of ClusterPolicy %s: %s", e->name, err.msg);
		return 1;
	}
	return 1;
}

static void on_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sd_ctrl *c = user;
	c->timer = 0;
	if (c->view && !gk_sd_view_synced(c->view))
		return; /* the first snapshot marks everything dirty again */
	bool leader = !c->view || gk_sd_view_leader(c->view);
	bool again = false, more = false;
	int64_t start = gk_mono_ms();
	for (size_t i = 0; i < c->n; i++) {
		entry *e = &c->e[i];
		if (!e->dirty)
			continue;
		if (gk_mono_ms() - start > BUDGET_MS) {
			more = true;
			break;
		}
		e->dirty = false;
		if (!leader) {
			/* gaining leadership marks everything dirty again */
			c->st.not_leader++;
			c->st.passes++;
			continue;
		}
		if (write_one(c, e)) {
			e->dirty = true;
			again = true;
		} else {
			c->st.passes++;
		}
	}
	/* policies gone from the view and from the reports */
	for (size_t i = 0; c->view && i < c->n;) {
		entry *e = &c->e[i];
		if (!e->dirty && !e->rep[0] && !e->rep[1] && !gk_sd_view_policy(c->view, e->name))
			drop(c, e);
		else
			i++;
	}
	if (more)
		arm(c, 1);
	else if (again)
		arm(c, RETRY_MS);
	count_pending(c);
}

static entry *ensure(gk_sd_ctrl *c, const char *name)
{
	entry *e = find(c, name);
	if (e || strlen(name) >= GK_SD_NAME_MAX || c->n >= GK_SD_MAX_POLICIES)
		return e;
	e = &c->e[c->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	return e;
}

void gk_sd_ctrl_dirty(void *user, const char *policy)
{
	gk_sd_ctrl *c = user;
	if (policy) {
		entry *e = ensure(c, policy);
		if (e)
			e->dirty = true;
	} else {
		for (size_t i = 0; c->view && i < gk_sd_view_n_policies(c->view); i++) {
			const Gpukmm__ClusterPolicy *cp = gk_sd_view_policy_at(c->view, i);
			if (cp->metadata && cp->metadata->name)
				ensure(c, cp->metadata->name);
		}
		for (size_t i = 0; i < c->n; i++)
			c->e[i].dirty = true;
	}
	if (c->n)
		arm(c, c->o.debounce_ms);
	count_pending(c);
}

void gk_sd_ctrl_set_view(gk_sd_ctrl *c, const gk_sd_view *v)
{
	c->view = v;
}

static void arm(gk_sd_ctrl *c, int ms)
{
	if (c->timer)
		return; /* coalesced into the pending write */
	c->timer = gk_loop_timer(c->loop, ms, on_timer, c);
}

static void on_grace(gk_loop *l, gk_timer_id id, void *user)
{
	gk_sd_ctrl *c = user;
	c->grace_timer = 0;
	c->grace_over = true;
	for (size_t i = 0; i < c->n; i++)
		c->e[i].dirty = true;
	if (c->n)
		arm(c, c->o.debounce_ms);
	count_pending(c);
}

int gk_sd_ctrl_new(gk_sd_ctrl **out, gk_loop *loop, gk_kube_client *kc, const gk_sd_ctrl_opts *o, gk_err *err)
{
	gk_sd_ctrl *c = calloc(1, sizeof(*c));
	if (c)
		c->e = calloc(GK_SD_MAX_POLICIES, sizeof(entry));
	if (!c || !c->e) {
		if (c)
			free(c);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	c->loop = loop;
	c->kc = kc;
	c->o.debounce_ms = o && o->debounce_ms > 0 ? o->debounce_ms : 100;
	c->o.grace_ms = o && o->grace_ms > 0 ? o->grace_ms : 15000;
	c->grace_timer = gk_loop_timer(loop, c->o.grace_ms, on_grace, c);
	*out = c;
	return GK_OK;
}

void gk_sd_ctrl_free(gk_sd_ctrl *c)
{
	if (!c)
		return;
	if (c->timer)
		gk_loop_cancel(c->loop, c->timer);
	if (c->grace_timer)
		gk_loop_cancel(c->loop, c->grace_timer);
	while (c->n)
		drop(c, &c->e[0]);
	free(c->e);
	free(c);
}

int gk_sd_ctrl_report(gk_sd_ctrl *c, const Gpukmm__StatusReport *r, gk_err *err)
{
	int k;
	if (!r->component || !r->policy || !*r->policy || strlen(r->policy) >= GK_SD_NAME_MAX) {
		c->st.rejected++;
		return gk_err_set(err, GK_INVALID_ARGUMENT, "report needs component and policy (a name under %d bytes)",
				  GK_SD_NAME_MAX);
	}
	if (strcmp(r->component, "modmgr") == 0)
		k = 0;
	else if (strcmp(r->component, "gater") == 0)
		k = 1;
	else {
		c->st.rejected++;
		return gk_err_set(err, GK_INVALID_ARGUMENT, "unknown component \"%.32s\" (modmgr or gater)",
				  r->component);
	}
	c->st.reports++;
	entry *e = find(c, r->policy);
	if (r->has_deleted && r->deleted) {
		if (e) {
			if (e->rep[k])
				gpukmm__status_report__free_unpacked(e->rep[k], NULL);
			e->rep[k] = NULL;
			if (!e->rep[0] && !e->rep[1])
				drop(c, e);
		}
		return GK_OK;
	}
	if (!e) {
		if (c->n >= GK_SD_MAX_POLICIES)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: more than %d policies", GK_SD_MAX_POLICIES);
		e = &c->e[c->n++];
		memset(e, 0, sizeof(*e));
		snprintf(e->name, sizeof(e->name), "%s", r->policy);
	}
	Gpukmm__StatusReport *d = dup_report(r);
	if (!d) {
		if (!e->rep[0] && !e->rep[1])
			drop(c, e);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	if (e->rep[k])
		gpukmm__status_report__free_unpacked(e->rep[k], NULL);
	e->rep[k] = d;
	e->dirty = true;
	arm(c, c->o.debounce_ms);
	count_pending(c);
	return GK_OK;
}

const gk_sd_stats *gk_sd_ctrl_stats(const gk_sd_ctrl *c)
{
	return &c->st;
}
