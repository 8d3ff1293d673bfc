/* kubesim — the DaemonSet controller (pkg/controller/daemon's behaviour).
 *
 * Per DaemonSet it keeps one record per node that should run its pod, may keep
 * running it, or has one of its pods: the node's verdict (ks_ds_should_run: node
 * selector, required node affinity, taints against the template's tolerations plus
 * the DaemonSet ones), the pods there, and what the record adds to the status
 * counters. A node event re-checks that node for each DaemonSet, a pod event the
 * record of its node, a template change every node of that DaemonSet; the counters
 * move by the difference, so no event costs nodes x DaemonSets.
 *
 * Pods are created bound to their node (spec.nodeName, the node-name affinity the
 * controller writes, the DaemonSet tolerations, labels controller-revision-hash and
 * pod-template-generation, a controller ownerReference) and deleted where they may
 * no longer run (an untolerated NoExecute taint, a selector that stopped matching),
 * failed, or duplicated. RollingUpdate (maxUnavailable, int or percent; maxSurge is
 * treated as 0) replaces pods of an older template: unavailable old pods first, then
 * up to maxUnavailable at a time; OnDelete leaves them. status: desired/current/
 * ready/updated/available/misscheduled/unavailable and observedGeneration, as
 * updateDaemonSetStatus computes them from the oldest pod of each node. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "api.h"
#include "ctrl.h"
#include "gpukmm/log.h"
#include "jsonutil.h"
#include "sched.h"

struct contrib {
	int desired, current, ready, avail, updated, mis, old_live;
};

struct dsrec {
	char *node;
	int exists, run, cont;
	int npods, cap;
	char **pods; /* pod names (the DaemonSet's namespace) */
	struct contrib c;
	int live_new, live_old, new_avail, old_avail;
	char new_pod[256], old_pod[256];
};

struct dsstate {
	char *key, *ns, *name, *uid;
	double generation;
	char hash[32];
	int min_ready;
	gk_kmap recs;    /* node -> struct dsrec */
	gk_kmap pending; /* nodes whose record is refreshed and managed */
	struct contrib tot;
	int status_dirty, roll_dirty;
};

struct podref {
	char *ds, *uid, *node;
};

typedef struct ks_dsc {
	gk_kmap ds;     /* "ns/name" -> struct dsstate */
	gk_kmap podidx; /* "ns/name" of a DaemonSet's pod -> struct podref */
	gk_kmap busy;   /* DaemonSets with pending records, a status or a rollout to do */
} ks_dsc;

/* ---- state ---------------------------------------------------------------- */
static void rec_free(struct dsrec *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->npods; i++)
		free(r->pods[i]);
	free(r->pods);
	free(r->node);
	free(r);
}

static void recs_clear(gk_kmap *m)
{
	for (size_t i = 0; i < m->nb; i++)
		for (gk_kmap_ent *e = m->b[i]; e; e = e->next)
			rec_free(e->ptr);
	gk_kmap_clear(m);
}

static void state_free(struct dsstate *d)
{
	if (!d)
		return;
	recs_clear(&d->recs);
	gk_kmap_clear(&d->pending);
	free(d->key);
	free(d->ns);
	free(d->name);
	free(d->uid);
	free(d);
}

int ks_dsc_init(ks_ctrl *c)
{
	ks_dsc *d = calloc(1, sizeof(*d));
	if (!d)
		return GK_RESOURCE_EXHAUSTED;
	gk_kmap_init(&d->ds);
	gk_kmap_init(&d->podidx);
	gk_kmap_init(&d->busy);
	c->dsc = d;
	return 0;
}

static void podref_free(struct podref *p)
{
	if (!p)
		return;
	free(p->ds);
	free(p->uid);
	free(p->node);
	free(p);
}

void ks_dsc_free(ks_ctrl *c)
{
	ks_dsc *d = c->dsc;
	if (!d)
		return;
	for (size_t i = 0; i < d->ds.nb; i++)
		for (gk_kmap_ent *e = d->ds.b[i]; e; e = e->next)
			state_free(e->ptr);
	for (size_t i = 0; i < d->podidx.nb; i++)
		for (gk_kmap_ent *e = d->podidx.b[i]; e; e = e->next)
			podref_free(e->ptr);
	gk_kmap_clear(&d->ds);
	gk_kmap_clear(&d->podidx);
	gk_kmap_clear(&d->busy);
	free(d);
	c->dsc = NULL;
}

static struct dsrec *rec_get(struct dsstate *d, const char *node, int create)
{
	gk_kmap_ent *e = gk_kmap_get(&d->recs, node);
	if (e)
		return e->ptr;
	if (!create)
		return NULL;
	struct dsrec *r = calloc(1, sizeof(*r));
	if (!r || !(r->node = strdup(node)) || !(e = gk_kmap_put(&d->recs, node, NULL, NULL))) {
		rec_free(r);
		return NULL;
	}
	e->ptr = r;
	return r;
}

static void mark_pending(ks_dsc *dsc, struct dsstate *d, const char *node)
{
	ks_ctrl_mark(&d->pending, node);
	ks_ctrl_mark(&dsc->busy, d->key);
}

static void tot_add(struct contrib *t, const struct contrib *c, int sign)
{
	t->desired += sign * c->desired;
	t->current += sign * c->current;
	t->ready += sign * c->ready;
	t->avail += sign * c->avail;
	t->updated += sign * c->updated;
	t->mis += sign * c->mis;
	t->old_live += sign * c->old_live;
}

/* ---- the template hash (controller-revision-hash) ------------------------- */
static void template_hash(const cJSON *ds, char *out, size_t cap)
{
	char *js = cJSON_PrintUnformatted(ks_jget(ks_jget(ds, "spec"), "template"));
	uint32_t h = 2166136261u;
	for (const char *p = js; p && *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	free(js);
	/* rand.SafeEncodeString of the decimal hash, like ComputeHash */
	static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789";
	char dec[16];
	snprintf(dec, sizeof(dec), "%" PRIu32, h);
	size_t i = 0;
	for (; dec[i] && i + 1 < cap; i++)
		out[i] = alnum[(unsigned char)dec[i] % (sizeof(alnum) - 1)];
	out[i] = 0;
}

/* ---- records ---------------------------------------------------------------- */
struct podinfo {
	const cJSON *obj;
	const char *created;
	int deleting, failed, ready, avail, updated;
	int64_t ready_since;
};

static void pod_info(const struct dsstate *d, const cJSON *pod, int64_t wall, struct podinfo *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->obj = pod;
	pi->created = ks_jstr(ks_jget(pod, "metadata"), "creationTimestamp");
	pi->deleting = ks_jget(ks_jget(pod, "metadata"), "deletionTimestamp") != NULL;
	const char *phase = ks_jstr(ks_jget(pod, "status"), "phase");
	pi->failed = phase && strcmp(phase, "Failed") == 0;
	pi->ready = ks_pod_ready(pod, &pi->ready_since);
	pi->avail = pi->ready && (d->min_ready <= 0 || (pi->ready_since && pi->ready_since + d->min_ready <= wall));
	const char *h = ks_jstr(ks_jget(ks_jget(pod, "metadata"), "labels"), "controller-revision-hash");
	pi->updated = h && strcmp(h, d->hash) == 0;
}

static int older(const struct podinfo *a, const struct podinfo *b)
{
	int c = strcmp(a->created ? a->created : "", b->created ? b->created : "");
	if (c)
		return c < 0;
	return strcmp(ks_jstr(ks_jget(a->obj, "metadata"), "name"), ks_jstr(ks_jget(b->obj, "metadata"), "name")) < 0;
}

/* Recomputes what the record adds to the counters (and the rollout view). */
static void rec_refresh(ks_server *s, ks_ctrl *c, struct dsstate *d, struct dsrec *r)
{
	int64_t wall = (int64_t)time(NULL);
	struct podinfo oldest = { 0 };
	int have = 0;
	r->live_new = r->live_old = r->new_avail = r->old_avail = 0;
	r->new_pod[0] = r->old_pod[0] = 0;
	int j = 0;
	for (int i = 0; i < r->npods; i++) {
		ks_item *it = ks_store_get(&s->store, "", "pods", d->ns, r->pods[i]);
		if (!it) {
			free(r->pods[i]);
			continue;
		}
		r->pods[j++] = r->pods[i];
		struct podinfo pi;
		pod_info(d, it->obj, wall, &pi);
		if (!have || older(&pi, &oldest)) {
			oldest = pi;
			have = 1;
		}
		if (pi.deleting)
			continue;
		if (pi.updated) {
			r->live_new++;
			r->new_avail = pi.avail;
			snprintf(r->new_pod, sizeof(r->new_pod), "%s", r->pods[j - 1]);
		} else {
			r->live_old++;
			r->old_avail = pi.avail;
			snprintf(r->old_pod, sizeof(r->old_pod), "%s", r->pods[j - 1]);
		}
	}
	r->npods = j;
	struct contrib n = { 0 };
	if (r->exists) {
		if (r->run) {
			n.desired = 1;
			if (have) {
				n.current = 1;
				n.ready = oldest.ready;
				n.avail = oldest.avail;
				n.updated = oldest.updated;
			}
		} else if (have) {
			n.mis = 1;
		}
		n.old_live = r->live_old;
	}
	if (memcmp(&n, &r->c, sizeof(n)) != 0) {
		tot_add(&d->tot, &r->c, -1);
		tot_add(&d->tot, &n, 1);
		r->c = n;
		d->status_dirty = 1;
		ks_ctrl_mark(&c->dsc->busy, d->key);
	}
	d->roll_dirty = 1;
	if (have && oldest.ready && !oldest.avail && oldest.ready_since) {
		/* minReadySeconds: look again once the pod counts as available */
		char key[700];
		snprintf(key, sizeof(key), "%s\x1f%s", d->key, r->node);
		ks_ctrl_timer(c, c->now + (oldest.ready_since + d->min_ready - wall) * 1000 + 1, KS_T_DS_NODE, key);
	}
}

/* The node's verdict for the DaemonSet (the node object or NULL if gone). */
static void rec_verdict(struct dsrec *r, const cJSON *ds, const cJSON *node)
{
	r->exists = node != NULL;
	if (!node) {
		r->run = r->cont = 0;
		return;
	}
	ks_ds_should_run(ks_jget(ks_jget(ks_jget(ds, "spec"), "template"), "spec"), node, &r->run, &r->cont);
}

/* ---- pods ------------------------------------------------------------------- */
static const ks_rtype *pod_type(ks_server *s)
{
	return ks_registry_find(&s->reg, "", "v1", "pods");
}

static void pod_index(ks_server *s, ks_ctrl *c, const char *ns, const char *name);

static int rand_suffix(char *out)
{
	static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
	unsigned char r[5];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -1;
	for (int i = 0; i < 5; i++)
		out[i] = alphabet[r[i] % (sizeof(alphabet) - 1)];
	out[5] = 0;
	return 0;
}

/* The pod the DaemonSet wants on node (util.CreatePodTemplate + the scheduler's bind). */
static cJSON *pod_for(ks_server *s, const struct dsstate *d, const cJSON *ds, const char *node, char *name, size_t cap)
{
	const cJSON *tmpl = ks_jget(ks_jget(ds, "spec"), "template");
	cJSON *pod = cJSON_CreateObject();
	cJSON *md = cJSON_Duplicate(ks_jget(tmpl, "metadata"), 1);
	cJSON *spec = cJSON_Duplicate(ks_jget(tmpl, "spec"), 1);
	if (!pod || !spec || (!md && !(md = cJSON_CreateObject()))) {
		cJSON_Delete(pod);
		cJSON_Delete(md);
		cJSON_Delete(spec);
		return NULL;
	}
	if (!cJSON_IsObject(md)) {
		cJSON_Delete(md);
		md = cJSON_CreateObject();
	}
	for (int tries = 0; tries < 8; tries++) {
		char suf[8];
		if (rand_suffix(suf))
			break;
		snprintf(name, cap, "%.57s-%s", d->name, suf);
		if (!ks_store_get(&s->store, "", "pods", d->ns, name))
			break;
	}
	char uid[40], ts[40], gen[32], gname[300];
	ks_new_uid(s, uid, sizeof(uid));
	ks_now_rfc3339(ts, sizeof(ts));
	snprintf(gen, sizeof(gen), "%.0f", d->generation);
	snprintf(gname, sizeof(gname), "%.57s-", d->name);
	cJSON_AddStringToObject(pod, "apiVersion", "v1");
	cJSON_AddStringToObject(pod, "kind", "Pod");
	cJSON_AddItemToObject(pod, "metadata", md);
	ks_jset(md, "name", cJSON_CreateString(name));
	ks_jset(md, "generateName", cJSON_CreateString(gname));
	ks_jset(md, "namespace", cJSON_CreateString(d->ns));
	ks_jset(md, "uid", cJSON_CreateString(uid));
	ks_jset(md, "creationTimestamp", cJSON_CreateString(ts));
	cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
	if (!cJSON_IsObject(labels)) {
		cJSON_DeleteItemFromObjectCaseSensitive(md, "labels");
		labels = cJSON_AddObjectToObject(md, "labels");
	}
	if (labels) {
		ks_jset(labels, "controller-revision-hash", cJSON_CreateString(d->hash));
		ks_jset(labels, "pod-template-generation", cJSON_CreateString(gen));
	}
	cJSON *refs = cJSON_AddArrayToObject(md, "ownerReferences");
	cJSON *ref = cJSON_CreateObject();
	if (refs && ref) {
		cJSON_AddStringToObject(ref, "apiVersion", "apps/v1");
		cJSON_AddStringToObject(ref, "kind", "DaemonSet");
		cJSON_AddStringToObject(ref, "name", d->name);
		cJSON_AddStringToObject(ref, "uid", d->uid);
		cJSON_AddBoolToObject(ref, "controller", 1);
		cJSON_AddBoolToObject(ref, "blockOwnerDeletion", 1);
		cJSON_AddItemToArray(refs, ref);
	} else {
		cJSON_Delete(ref);
	}
	cJSON_AddItemToObject(pod, "spec", spec);
	ks_jset(spec, "tolerations", ks_ds_tolerations(ks_jget(tmpl, "spec")));
	/* ReplaceDaemonSetPodNodeNameNodeAffinity */
	cJSON *aff = cJSON_GetObjectItemCaseSensitive(spec, "affinity");
	if (!cJSON_IsObject(aff)) {
		cJSON_DeleteItemFromObjectCaseSensitive(spec, "affinity");
		aff = cJSON_AddObjectToObject(spec, "affinity");
	}
	cJSON *na = aff ? cJSON_Parse("{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{"
				      "\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[]}]}]}}")
			: NULL;
	if (na) {
		const cJSON *terms = ks_jget(ks_jget(na, "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms");
		cJSON *v = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetArrayItem(ks_jget(cJSON_GetArrayItem(terms, 0), "matchFields"), 0), "values");
		cJSON_AddItemToArray(v, cJSON_CreateString(node));
		cJSON *old = cJSON_GetObjectItemCaseSensitive(aff, "nodeAffinity");
		if (cJSON_IsObject(old)) {
			ks_jset(old, "requiredDuringSchedulingIgnoredDuringExecution",
			    cJSON_DetachItemFromObjectCaseSensitive(na, "requiredDuringSchedulingIgnoredDuringExecution"));
			cJSON_Delete(na);
		} else {
			ks_jset(aff, "nodeAffinity", na);
		}
	}
	ks_jset(spec, "nodeName", cJSON_CreateString(node));
	if (!ks_jget(spec, "restartPolicy"))
		cJSON_AddStringToObject(spec, "restartPolicy", "Always");
	if (!ks_jget(spec, "terminationGracePeriodSeconds"))
		cJSON_AddNumberToObject(spec, "terminationGracePeriodSeconds", 30);
	if (!ks_jget(spec, "schedulerName"))
		cJSON_AddStringToObject(spec, "schedulerName", "default-scheduler");
	if (!ks_jget(spec, "serviceAccountName"))
		cJSON_AddStringToObject(spec, "serviceAccountName", "default");
	cJSON *st = cJSON_AddObjectToObject(pod, "status");
	if (st) {
		cJSON_AddStringToObject(st, "phase", "Pending");
		cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
		cJSON *sc = cJSON_CreateObject();
		if (conds && sc) {
			cJSON_AddStringToObject(sc, "type", "PodScheduled");
			cJSON_AddStringToObject(sc, "status", "True");
			cJSON_AddStringToObject(sc, "lastTransitionTime", ts);
			cJSON_AddItemToArray(conds, sc);
		} else {
			cJSON_Delete(sc);
		}
	}
	return pod;
}

static void create_pod(ks_server *s, ks_ctrl *c, struct dsstate *d, const cJSON *ds, struct dsrec *r)
{
	char name[300];
	cJSON *pod = pod_for(s, d, ds, r->node, name, sizeof(name));
	if (!pod)
		return;
	if (ks_ctrl_put(s, "", "pods", d->ns, name, pod) == 0)
		pod_index(s, c, d->ns, name);
}

static void delete_pod(ks_server *s, ks_ctrl *c, const char *ns, const char *name)
{
	const ks_rtype *t = pod_type(s);
	if (!t)
		return;
	char nm[256];
	snprintf(nm, sizeof(nm), "%s", name); /* the record's copy may go while we index */
	ks_api_delete_locked(s, t, ns, nm, "Background");
	s->dirty = 1;
	c->writes++;
	c->budget--;
	pod_index(s, c, ns, nm);
}

/* syncNodes for one record: create the missing pod, delete the ones that must go. */
static void rec_manage(ks_server *s, ks_ctrl *c, struct dsstate *d, const cJSON *ds, struct dsrec *r)
{
	if (!r->exists)
		return;
	if (r->run && r->npods == 0) {
		create_pod(s, c, d, ds, r);
		return;
	}
	/* names first: deleting re-indexes the record */
	char *victims[16];
	int nv = 0;
	int64_t wall = (int64_t)time(NULL);
	struct podinfo keep = { 0 };
	int have_keep = 0;
	for (int i = 0; i < r->npods && nv < 16; i++) {
		ks_item *it = ks_store_get(&s->store, "", "pods", d->ns, r->pods[i]);
		if (!it)
			continue;
		struct podinfo pi;
		pod_info(d, it->obj, wall, &pi);
		if (pi.deleting)
			continue;
		if (!r->cont || pi.failed) {
			victims[nv++] = strdup(r->pods[i]);
			continue;
		}
		/* more than one running pod: keep the oldest */
		if (!have_keep) {
			keep = pi;
			have_keep = 1;
		} else if (older(&pi, &keep)) {
			victims[nv++] = strdup(ks_jstr(ks_jget(keep.obj, "metadata"), "name"));
			keep = pi;
		} else {
			victims[nv++] = strdup(r->pods[i]);
		}
	}
	for (int i = 0; i < nv; i++) {
		if (victims[i] && c->budget > 0)
			delete_pod(s, c, d->ns, victims[i]);
		free(victims[i]);
	}
}

/* The record the pod belongs to changes (or it is gone). */
static void pod_index(ks_server *s, ks_ctrl *c, const char *ns, const char *name)
{
	ks_dsc *dsc = c->dsc;
	char key[600];
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	ks_item *it = ks_store_get(&s->store, "", "pods", ns, name);
	const char *ds = NULL, *uid = NULL, *node = NULL;
	char dskey[600];
	if (it) {
		const cJSON *ref;
		cJSON_ArrayForEach(ref, ks_jget(ks_jget(it->obj, "metadata"), "ownerReferences")) {
			const char *k = ks_jstr(ref, "kind"), *av = ks_jstr(ref, "apiVersion");
			if (cJSON_IsTrue(ks_jget(ref, "controller")) && k && strcmp(k, "DaemonSet") == 0 && av &&
			    strcmp(av, "apps/v1") == 0 && ks_jstr(ref, "name")) {
				snprintf(dskey, sizeof(dskey), "%s/%s", ns, ks_jstr(ref, "name"));
				ds = dskey;
				uid = ks_jstr(ref, "uid");
			}
		}
		node = ks_jstr(ks_jget(it->obj, "spec"), "nodeName");
	}
	if (!uid)
		uid = "";
	gk_kmap_ent *e = gk_kmap_get(&dsc->podidx, key);
	struct podref *old = e ? e->ptr : NULL;
	int same = old && ds && node && strcmp(old->ds, ds) == 0 && strcmp(old->uid, uid) == 0 &&
		   strcmp(old->node, node) == 0;
	if (old && !same) {
		gk_kmap_ent *de = gk_kmap_get(&dsc->ds, old->ds);
		struct dsstate *d = de ? de->ptr : NULL;
		struct dsrec *r = d && strcmp(d->uid, old->uid) == 0 ? rec_get(d, old->node, 0) : NULL;
		for (int i = 0; r && i < r->npods; i++)
			if (strcmp(r->pods[i], name) == 0) {
				free(r->pods[i]);
				r->pods[i] = r->pods[--r->npods];
				break;
			}
		if (d)
			mark_pending(dsc, d, old->node);
		podref_free(old);
		gk_kmap_del(&dsc->podidx, key);
		old = NULL;
	}
	if (!ds || !node || !*node)
		return;
	if (!old) {
		struct podref *p = calloc(1, sizeof(*p));
		gk_kmap_ent *ne = p ? gk_kmap_put(&dsc->podidx, key, NULL, NULL) : NULL;
		if (!ne || !(p->ds = strdup(ds)) || !(p->uid = strdup(uid)) || !(p->node = strdup(node))) {
			if (ne)
				gk_kmap_del(&dsc->podidx, key);
			podref_free(p);
			return;
		}
		ne->ptr = p;
	}
	gk_kmap_ent *de = gk_kmap_get(&dsc->ds, ds);
	struct dsstate *d = de ? de->ptr : NULL;
	if (!d || strcmp(d->uid, uid) != 0)
		return; /* its DaemonSet is not (yet) known: attached when it is */
	struct dsrec *r = rec_get(d, node, 1);
	if (!r)
		return;
	int found = 0;
	for (int i = 0; i < r->npods; i++)
		found |= strcmp(r->pods[i], name) == 0;
	if (!found) {
		if (r->npods == r->cap) {
			int nc = r->cap ? r->cap * 2 : 2;
			char **np = realloc(r->pods, sizeof(*np) * (size_t)nc);
			if (!np)
				return;
			r->pods = np;
			r->cap = nc;
		}
		if (!(r->pods[r->npods] = strdup(name)))
			return;
		r->npods++;
	}
	mark_pending(dsc, d, node);
}

/* ---- DaemonSets ------------------------------------------------------------- */
/* Records from scratch: the pods indexed for it, then every node's verdict. */
static void ds_rebuild(ks_server *s, ks_ctrl *c, struct dsstate *d, const cJSON *ds)
{
	ks_dsc *dsc = c->dsc;
	recs_clear(&d->recs);
	gk_kmap_clear(&d->pending);
	memset(&d->tot, 0, sizeof(d->tot));
	for (size_t i = 0; i < dsc->podidx.nb; i++)
		for (gk_kmap_ent *e = dsc->podidx.b[i]; e; e = e->next) {
			struct podref *p = e->ptr;
			if (strcmp(p->ds, d->key) != 0 || strcmp(p->uid, d->uid) != 0)
				continue;
			struct dsrec *r = rec_get(d, p->node, 1);
			const char *slash = strchr(e->key, '/');
			if (!r || !slash)
				continue;
			if (r->npods == r->cap) {
				int nc = r->cap ? r->cap * 2 : 2;
				char **np = realloc(r->pods, sizeof(*np) * (size_t)nc);
				if (!np)
					continue;
				r->pods = np;
				r->cap = nc;
			}
			if ((r->pods[r->npods] = strdup(slash + 1)))
				r->npods++;
		}
	ks_bucket *nodes = ks_store_bucket(&s->store, "", "nodes", 0);
	for (int i = 0; nodes && i < nodes->n; i++) {
		struct dsrec probe = { 0 };
		rec_verdict(&probe, ds, nodes->items[i].obj);
		struct dsrec *r = rec_get(d, nodes->items[i].name, probe.run || probe.cont);
		if (!r)
			continue;
		r->exists = 1;
		r->run = probe.run;
		r->cont = probe.cont;
	}
	for (size_t i = 0; i < d->recs.nb; i++)
		for (gk_kmap_ent *e = d->recs.b[i]; e; e = e->next)
			mark_pending(dsc, d, e->key);
	d->status_dirty = d->roll_dirty = 1;
	ks_ctrl_mark(&dsc->busy, d->key);
}

static void ds_changed(ks_server *s, ks_ctrl *c, const char *key)
{
	ks_dsc *dsc = c->dsc;
	const char *slash = strchr(key, '/');
	char ns[256];
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
	ks_item *it = ks_store_get(&s->store, "apps", "daemonsets", ns, slash + 1);
	gk_kmap_ent *e = gk_kmap_get(&dsc->ds, key);
	struct dsstate *d = e ? e->ptr : NULL;
	if (!it) {
		if (d) {
			state_free(d);
			gk_kmap_del(&dsc->ds, key);
			gk_kmap_del(&dsc->busy, key);
		}
		return;
	}
	const char *uid = ks_meta_str(it->obj, "uid");
	const cJSON *g = ks_jget(ks_jget(it->obj, "metadata"), "generation");
	double gen = cJSON_IsNumber(g) ? g->valuedouble : 0;
	char hash[32];
	template_hash(it->obj, hash, sizeof(hash));
	const cJSON *mr = ks_jget(ks_jget(it->obj, "spec"), "minReadySeconds");
	int min_ready = cJSON_IsNumber(mr) ? (int)mr->valuedouble : 0;
	if (d && uid && strcmp(d->uid, uid) == 0 && d->generation == gen && strcmp(d->hash, hash) == 0 &&
	    d->min_ready == min_ready) {
		/* nothing for the pods; the status is ours, whoever wrote it last */
		d->status_dirty = 1;
		ks_ctrl_mark(&dsc->busy, key);
		return;
	}
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d || !(d->key = strdup(key)) || !(d->ns = strdup(ns)) || !(d->name = strdup(slash + 1)) ||
		    !(e = gk_kmap_put(&dsc->ds, key, NULL, NULL))) {
			state_free(d);
			return;
		}
		gk_kmap_init(&d->recs);
		gk_kmap_init(&d->pending);
		e->ptr = d;
	}
	free(d->uid);
	d->uid = strdup(uid ? uid : "");
	d->generation = gen;
	d->min_ready = min_ready;
	snprintf(d->hash, sizeof(d->hash), "%s", hash);
	if (!d->uid)
		return;
	ds_rebuild(s, c, d, it->obj);
}

static void node_changed(ks_server *s, ks_ctrl *c, const char *node)
{
	ks_dsc *dsc = c->dsc;
	ks_item *n = ks_store_get(&s->store, "", "nodes", "", node);
	for (size_t i = 0; i < dsc->ds.nb; i++)
		for (gk_kmap_ent *e = dsc->ds.b[i]; e; e = e->next) {
			struct dsstate *d = e->ptr;
			ks_item *ds = ks_store_get(&s->store, "apps", "daemonsets", d->ns, d->name);
			if (!ds)
				continue;
			struct dsrec probe = { 0 };
			rec_verdict(&probe, ds->obj, n ? n->obj : NULL);
			struct dsrec *r = rec_get(d, node, probe.run || probe.cont);
			if (!r || (r->exists == probe.exists && r->run == probe.run && r->cont == probe.cont))
				continue;
			r->exists = probe.exists;
			r->run = probe.run;
			r->cont = probe.cont;
			mark_pending(dsc, d, node);
		}
}

/* RollingUpdate with maxSurge 0 (daemon/update.go rollingUpdate). */
static void ds_roll(ks_server *s, ks_ctrl *c, struct dsstate *d, const cJSON *ds)
{
	const cJSON *strat = ks_jget(ks_jget(ds, "spec"), "updateStrategy");
	const char *type = ks_jstr(strat, "type");
	if ((type && strcmp(type, "RollingUpdate") != 0) || d->tot.old_live == 0)
		return;
	int max_unav = ks_intstr_scaled(ks_jget(ks_jget(strat, "rollingUpdate"), "maxUnavailable"), d->tot.desired, 1);
	int unavailable = 0, ncand = 0, nrepl = 0;
	char **cand = calloc((size_t)d->tot.old_live + 1, sizeof(char *));
	char **repl = calloc((size_t)d->tot.old_live + 1, sizeof(char *));
	if (!cand || !repl) {
		free(cand);
		free(repl);
		return;
	}
	for (size_t i = 0; i < d->recs.nb; i++)
		for (gk_kmap_ent *e = d->recs.b[i]; e; e = e->next) {
			struct dsrec *r = e->ptr;
			if (r->npods == 0 || !r->exists)
				continue;
			if (r->live_new > 1 || r->live_old > 1 || (r->live_new == 0 && r->live_old == 0) ||
			    (r->live_new == 1 && r->live_old == 1))
				unavailable++;
			else if (r->live_new == 1)
				unavailable += !r->new_avail;
			else if (!r->old_avail) {
				if (nrepl < d->tot.old_live)
					repl[nrepl++] = r->old_pod;
			} else if (unavailable < max_unav && ncand < d->tot.old_live) {
				cand[ncand++] = r->old_pod;
			}
		}
	int room = max_unav - unavailable;
	if (room < 0)
		room = 0;
	if (room > ncand)
		room = ncand;
	/* copies: deleting re-indexes records */
	char *victims[256];
	int nv = 0;
	for (int i = 0; i < nrepl && nv < 256; i++)
		victims[nv++] = strdup(repl[i]);
	for (int i = 0; i < room && nv < 256; i++)
		victims[nv++] = strdup(cand[i]);
	free(cand);
	free(repl);
	for (int i = 0; i < nv; i++) {
		if (victims[i] && c->budget > 0)
			delete_pod(s, c, d->ns, victims[i]);
		else if (victims[i])
			c->more = 1;
		free(victims[i]);
	}
}

static void ds_status(ks_server *s, ks_ctrl *c, struct dsstate *d, const cJSON *ds)
{
	cJSON *st = cJSON_CreateObject();
	if (!st)
		return;
	/* the four required fields always, the rest omitted when 0 (apps/v1 omitempty) */
	cJSON_AddNumberToObject(st, "currentNumberScheduled", d->tot.current);
	cJSON_AddNumberToObject(st, "numberMisscheduled", d->tot.mis);
	cJSON_AddNumberToObject(st, "desiredNumberScheduled", d->tot.desired);
	cJSON_AddNumberToObject(st, "numberReady", d->tot.ready);
	if (d->generation)
		cJSON_AddNumberToObject(st, "observedGeneration", d->generation);
	if (d->tot.updated)
		cJSON_AddNumberToObject(st, "updatedNumberScheduled", d->tot.updated);
	if (d->tot.avail)
		cJSON_AddNumberToObject(st, "numberAvailable", d->tot.avail);
	if (d->tot.desired - d->tot.avail > 0)
		cJSON_AddNumberToObject(st, "numberUnavailable", d->tot.desired - d->tot.avail);
	const cJSON *cur = ks_jget(ds, "status");
	/* fields we do not compute (conditions, collisionCount) stay */
	const cJSON *keep;
	cJSON_ArrayForEach(keep, cur) {
		static const char *ours[] = { "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled",
					      "numberReady", "observedGeneration", "updatedNumberScheduled",
					      "numberAvailable", "numberUnavailable" };
		int mine = 0;
		for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
			mine |= strcmp(keep->string, ours[i]) == 0;
		if (!mine)
			cJSON_AddItemToObject(st, keep->string, cJSON_Duplicate(keep, 1));
	}
	if (cur && ks_json_equal(cur, st)) {
		cJSON_Delete(st);
		return;
	}
	cJSON *n = cJSON_Duplicate(ds, 1);
	if (!n) {
		cJSON_Delete(st);
		return;
	}
	ks_jset(n, "status", st);
	ks_ctrl_put(s, "apps", "daemonsets", d->ns, d->name, n);
}

/* Refresh and manage the pending records of one DaemonSet; 0 when done. */
static int ds_work(ks_server *s, ks_ctrl *c, struct dsstate *d)
{
	ks_item *it = ks_store_get(&s->store, "apps", "daemonsets", d->ns, d->name);
	if (!it)
		return 0;
	while (d->pending.n > 0) {
		size_t n;
		char **nodes = ks_ctrl_take(&d->pending, &n);
		if (!nodes)
			return 1;
		size_t i = 0;
		for (; i < n; i++) {
			if (c->budget <= 0)
				break;
			struct dsrec *r = nodes[i] ? rec_get(d, nodes[i], 0) : NULL;
			if (!r)
				continue;
			rec_refresh(s, c, d, r);
			it = ks_store_get(&s->store, "apps", "daemonsets", d->ns, d->name);
			if (it)
				rec_manage(s, c, d, it->obj, r);
			if (r->npods == 0 && !(r->exists && (r->run || r->cont))) {
				/* nothing left to remember: its share of the counters goes with it */
				static const struct contrib zero;
				if (memcmp(&r->c, &zero, sizeof(zero)) != 0)
					d->status_dirty = 1;
				tot_add(&d->tot, &r->c, -1);
				gk_kmap_del(&d->recs, r->node);
				rec_free(r);
			}
		}
		for (size_t j = i; j < n; j++)
			if (nodes[j])
				ks_ctrl_mark(&d->pending, nodes[j]);
		for (size_t j = 0; j < n; j++)
			free(nodes[j]);
		free(nodes);
		if (c->budget <= 0)
			return 1;
	}
	it = ks_store_get(&s->store, "apps", "daemonsets", d->ns, d->name);
	if (it && d->roll_dirty) {
		d->roll_dirty = 0;
		ds_roll(s, c, d, it->obj);
	}
	if (d->pending.n > 0)
		return 1;
	it = ks_store_get(&s->store, "apps", "daemonsets", d->ns, d->name);
	if (it && d->status_dirty && c->budget > 0) {
		d->status_dirty = 0;
		ds_status(s, c, d, it->obj);
	}
	return d->status_dirty || c->budget <= 0;
}

void ks_dsc_resync(ks_server *s, ks_ctrl *c)
{
	ks_dsc *dsc = c->dsc;
	/* pods are re-indexed from the dirty marks; DaemonSets rebuilt */
	for (size_t i = 0; i < dsc->ds.nb; i++)
		for (gk_kmap_ent *e = dsc->ds.b[i]; e; e = e->next) {
			struct dsstate *d = e->ptr;
			d->generation = -1; /* forces the rebuild */
		}
	(void)s;
}

void ks_dsc_pass(ks_server *s, ks_ctrl *c)
{
	ks_dsc *dsc = c->dsc;
	/* pods first: a new DaemonSet's rebuild finds them indexed */
	for (size_t i = 0; i < c->dirty_pods.nb; i++)
		for (gk_kmap_ent *e = c->dirty_pods.b[i]; e; e = e->next) {
			const char *slash = strchr(e->key, '/');
			char ns[256];
			snprintf(ns, sizeof(ns), "%.*s", (int)(slash - e->key), e->key);
			pod_index(s, c, ns, slash + 1);
		}
	for (size_t i = 0; i < c->dirty_ds.nb; i++)
		for (gk_kmap_ent *e = c->dirty_ds.b[i]; e; e = e->next)
			ds_changed(s, c, e->key);
	for (size_t i = 0; i < c->dirty_nodes.nb; i++)
		for (gk_kmap_ent *e = c->dirty_nodes.b[i]; e; e = e->next)
			node_changed(s, c, e->key);
	if (dsc->busy.n == 0)
		return;
	size_t n;
	char **dss = ks_ctrl_take(&dsc->busy, &n);
	if (!dss) {
		c->more = 1;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		gk_kmap_ent *e = dss[i] ? gk_kmap_get(&dsc->ds, dss[i]) : NULL;
		if (e && ds_work(s, c, e->ptr)) {
			ks_ctrl_mark(&dsc->busy, dss[i]);
			c->more = 1;
		}
		free(dss[i]);
	}
	free(dss);
}

void ks_dsc_timer(ks_server *s, ks_ctrl *c, const char *key)
{
	const char *sep = strchr(key, '\x1f');
	if (!sep)
		return;
	char dskey[600];
	snprintf(dskey, sizeof(dskey), "%.*s", (int)(sep - key), key);
	gk_kmap_ent *e = gk_kmap_get(&c->dsc->ds, dskey);
	if (!e)
		return;
	mark_pending(c->dsc, e->ptr, sep + 1);
	c->more = 1;
	(void)s;
}
