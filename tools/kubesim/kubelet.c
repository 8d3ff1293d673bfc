/* kubesim — a kubelet for every node, as far as the API sees one:
 *   - a pod bound to an existing node (spec.nodeName) and still Pending starts
 *     --pod-ready-ms later: phase Running, its containers running, conditions
 *     Initialized, PodReadyToStartContainers, ContainersReady, Ready (True; False with
 *     ContainersNotReady when the pod carries the annotation
 *     kubesim.gpukmm.io/ready: "false"), PodScheduled. A pod whose node does not exist
 *     yet waits for it. Pods whose phase the client set already are left alone.
 *   - a pod being deleted gracefully (deletionTimestamp with a grace period) stops
 *     --pod-stop-ms later, or when its grace period ends if that is sooner; then the
 *     kubelet's final delete: the pod is gone, or, while finalizers hold it, stays
 *     with deletionGracePeriodSeconds 0 until they are removed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jsonutil.h"
#include "ctrl.h"
#include "sched.h"

typedef struct ks_kubelet {
	gk_kmap starting; /* "ns/name" with a start timer */
	gk_kmap stopping; /* "ns/name" with a stop timer */
	gk_kmap waiting;  /* "ns/name" -> val: the node it waits for */
	int removed;      /* pods removed this pass: GC may have work */
} ks_kubelet;

#define KS_ANN_READY "kubesim.gpukmm.io/ready"

int ks_kubelet_init(ks_ctrl *c)
{
	ks_kubelet *k = calloc(1, sizeof(*k));
	if (!k)
		return GK_RESOURCE_EXHAUSTED;
	gk_kmap_init(&k->starting);
	gk_kmap_init(&k->stopping);
	gk_kmap_init(&k->waiting);
	c->kl = k;
	return 0;
}

void ks_kubelet_free(ks_ctrl *c)
{
	ks_kubelet *k = c->kl;
	if (!k)
		return;
	gk_kmap_clear(&k->starting);
	gk_kmap_clear(&k->stopping);
	gk_kmap_clear(&k->waiting);
	free(k);
	c->kl = NULL;
}

static int split(const char *key, char *ns, size_t cap, const char **name)
{
	const char *slash = strchr(key, '/');
	if (!slash)
		return -1;
	snprintf(ns, cap, "%.*s", (int)(slash - key), key);
	*name = slash + 1;
	return 0;
}

static int pending_unstarted(const cJSON *pod)
{
	const char *phase = ks_jstr(ks_jget(pod, "status"), "phase");
	return !ks_jget(ks_jget(pod, "metadata"), "deletionTimestamp") && (!phase || strcmp(phase, "Pending") == 0);
}

static int64_t grace_of(const cJSON *pod)
{
	const cJSON *g = ks_jget(ks_jget(pod, "metadata"), "deletionGracePeriodSeconds");
	return cJSON_IsNumber(g) ? (int64_t)g->valuedouble : 0;
}

static void look_at(ks_server *s, ks_ctrl *c, const char *key)
{
	ks_kubelet *k = c->kl;
	char ns[256];
	const char *name;
	if (split(key, ns, sizeof(ns), &name))
		return;
	ks_item *it = ks_store_get(&s->store, "", "pods", ns, name);
	if (!it) {
		gk_kmap_del(&k->waiting, key);
		return;
	}
	const cJSON *pod = it->obj;
	if (ks_jget(ks_jget(pod, "metadata"), "deletionTimestamp")) {
		gk_kmap_del(&k->waiting, key);
		int64_t grace = grace_of(pod);
		if (grace <= 0 || gk_kmap_get(&k->stopping, key))
			return;
		int64_t until = ks_rfc3339_parse(ks_meta_str(pod, "deletionTimestamp")) - (int64_t)time(NULL);
		int64_t ms = c->o.pod_stop_ms;
		if (until * 1000 < ms)
			ms = until > 0 ? until * 1000 : 0;
		ks_ctrl_mark(&k->stopping, key);
		ks_ctrl_timer(c, c->now + ms, KS_T_POD_STOP, key);
		return;
	}
	const char *node = ks_jstr(ks_jget(pod, "spec"), "nodeName");
	if (!node || !*node || !pending_unstarted(pod) || gk_kmap_get(&k->starting, key))
		return;
	if (!ks_store_get(&s->store, "", "nodes", "", node)) {
		gk_kmap_put(&k->waiting, key, node, NULL);
		return;
	}
	gk_kmap_del(&k->waiting, key);
	ks_ctrl_mark(&k->starting, key);
	ks_ctrl_timer(c, c->now + c->o.pod_ready_ms, KS_T_POD_START, key);
}

void ks_kubelet_pass(ks_server *s, ks_ctrl *c)
{
	ks_kubelet *k = c->kl;
	for (size_t i = 0; i < c->dirty_pods.nb; i++)
		for (gk_kmap_ent *e = c->dirty_pods.b[i]; e; e = e->next)
			look_at(s, c, e->key);
	if (k->waiting.n == 0 || c->dirty_nodes.n == 0)
		return;
	/* pods waiting for a node that now exists */
	const char **keys = gk_kmap_keys(&k->waiting);
	size_t n = k->waiting.n;
	char **ready = keys ? calloc(n, sizeof(char *)) : NULL;
	size_t nr = 0;
	for (size_t i = 0; ready && i < n; i++) {
		gk_kmap_ent *w = gk_kmap_get(&k->waiting, keys[i]);
		if (w && w->val && gk_kmap_get(&c->dirty_nodes, w->val) &&
		    ks_store_get(&s->store, "", "nodes", "", w->val))
			ready[nr++] = strdup(keys[i]);
	}
	free(keys);
	for (size_t i = 0; i < nr; i++) {
		if (ready[i]) {
			gk_kmap_del(&k->waiting, ready[i]);
			look_at(s, c, ready[i]);
		}
		free(ready[i]);
	}
	free(ready);
}

static cJSON *condition(const char *type, int ok, const char *ts, const char *reason, const char *msg)
{
	cJSON *c = cJSON_CreateObject();
	if (!c)
		return NULL;
	cJSON_AddStringToObject(c, "type", type);
	cJSON_AddStringToObject(c, "status", ok ? "True" : "False");
	cJSON_AddNullToObject(c, "lastProbeTime");
	cJSON_AddStringToObject(c, "lastTransitionTime", ts);
	if (!ok && reason) {
		cJSON_AddStringToObject(c, "reason", reason);
		cJSON_AddStringToObject(c, "message", msg);
	}
	return c;
}

/* The pod's status once its containers run. */
static cJSON *started(const cJSON *pod)
{
	cJSON *n = cJSON_Duplicate(pod, 1);
	if (!n)
		return NULL;
	cJSON *st = cJSON_GetObjectItemCaseSensitive(n, "status");
	if (!cJSON_IsObject(st)) {
		cJSON_DeleteItemFromObjectCaseSensitive(n, "status");
		st = cJSON_AddObjectToObject(n, "status");
	}
	if (!st) {
		cJSON_Delete(n);
		return NULL;
	}
	char ts[40];
	ks_now_rfc3339(ts, sizeof(ts));
	const char *ann = ks_jstr(ks_jget(ks_jget(pod, "metadata"), "annotations"), KS_ANN_READY);
	int ready = !(ann && strcmp(ann, "false") == 0);
	char names[512] = "";
	cJSON *cs = cJSON_CreateArray();
	const cJSON *ctr;
	int i = 0;
	cJSON_ArrayForEach(ctr, ks_jget(ks_jget(pod, "spec"), "containers")) {
		const char *cn = ks_jstr(ctr, "name");
		cJSON *x = cJSON_CreateObject();
		if (!cs || !x) {
			cJSON_Delete(x);
			break;
		}
		char cid[96];
		snprintf(cid, sizeof(cid), "containerd://%.36s%04d", ks_meta_str(pod, "uid") ? ks_meta_str(pod, "uid") : "", i++);
		cJSON_AddStringToObject(x, "name", cn ? cn : "");
		cJSON *state = cJSON_AddObjectToObject(x, "state");
		cJSON *running = state ? cJSON_AddObjectToObject(state, "running") : NULL;
		if (running)
			cJSON_AddStringToObject(running, "startedAt", ts);
		cJSON_AddObjectToObject(x, "lastState");
		cJSON_AddBoolToObject(x, "ready", ready);
		cJSON_AddNumberToObject(x, "restartCount", 0);
		cJSON_AddStringToObject(x, "image", ks_jstr(ctr, "image") ? ks_jstr(ctr, "image") : "");
		cJSON_AddStringToObject(x, "imageID", "");
		cJSON_AddStringToObject(x, "containerID", cid);
		cJSON_AddBoolToObject(x, "started", 1);
		cJSON_AddItemToArray(cs, x);
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", names[0] ? " " : "", cn ? cn : "");
	}
	char msg[600];
	snprintf(msg, sizeof(msg), "containers with unready status: [%s]", names);
	cJSON *conds = cJSON_CreateArray();
	if (conds) {
		cJSON_AddItemToArray(conds, condition("PodReadyToStartContainers", 1, ts, NULL, NULL));
		cJSON_AddItemToArray(conds, condition("Initialized", 1, ts, NULL, NULL));
		cJSON_AddItemToArray(conds, condition("Ready", ready, ts, "ContainersNotReady", msg));
		cJSON_AddItemToArray(conds, condition("ContainersReady", ready, ts, "ContainersNotReady", msg));
		cJSON_AddItemToArray(conds, condition("PodScheduled", 1, ts, NULL, NULL));
	}
	ks_jset(st, "phase", cJSON_CreateString("Running"));
	ks_jset(st, "conditions", conds);
	ks_jset(st, "startTime", cJSON_CreateString(ts));
	ks_jset(st, "containerStatuses", cs);
	return n;
}

void ks_kubelet_timer(ks_server *s, ks_ctrl *c, int kind, const char *key)
{
	ks_kubelet *k = c->kl;
	char ns[256];
	const char *name;
	if (split(key, ns, sizeof(ns), &name))
		return;
	gk_kmap_del(kind == KS_T_POD_START ? &k->starting : &k->stopping, key);
	ks_item *it = ks_store_get(&s->store, "", "pods", ns, name);
	if (!it)
		return;
	if (kind == KS_T_POD_START) {
		const char *node = ks_jstr(ks_jget(it->obj, "spec"), "nodeName");
		if (!pending_unstarted(it->obj) || !node || !ks_store_get(&s->store, "", "nodes", "", node))
			return;
		cJSON *n = started(it->obj);
		if (n)
			ks_ctrl_put(s, "", "pods", ns, name, n);
		return;
	}
	if (!ks_jget(ks_jget(it->obj, "metadata"), "deletionTimestamp") || grace_of(it->obj) <= 0)
		return;
	/* the kubelet's final delete (grace period 0) */
	if (cJSON_GetArraySize(ks_jget(ks_jget(it->obj, "metadata"), "finalizers")) == 0) {
		ks_store_remove(&s->store, "", "pods", ns, name);
		s->dirty = 1;
		c->writes++;
		c->budget--;
		k->removed = 1;
		return;
	}
	cJSON *n = cJSON_Duplicate(it->obj, 1);
	if (!n)
		return;
	ks_jset(ks_meta(n), "deletionGracePeriodSeconds", cJSON_CreateNumber(0));
	ks_ctrl_put(s, "", "pods", ns, name, n);
}

int ks_kubelet_take_removed(ks_ctrl *c)
{
	int r = c->kl && c->kl->removed;
	if (c->kl)
		c->kl->removed = 0;
	return r;
}
