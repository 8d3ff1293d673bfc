/* fake-kmm — the controller. Level-triggered: every Module or Node event only
 * schedules one reconcile pass; the pass recomputes, for every (module, node),
 * the plan (plan.c) from the cached API objects and converges: label patches
 * now, loads/unloads after their delay (gk_loop timers), finalizer, status.
 * All state lives in the API (labels, the loaded annotation, Module status),
 * so a restart resumes where the last run stopped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/epoll.h>

#include "gpukmm/kube.h"
#include "gpukmm/log.h"

#include "ctrl.h"
#include "fakekmm.h"

#define MAX_OBJECTS 10000
#define RETRY_MS 1000

static const gk_kube_ref MODULES = { "kmm.sigs.x-k8s.io", "v1beta1", "modules", NULL, NULL, NULL };
static const gk_kube_ref NODES = { "", "v1", "nodes", NULL, NULL, NULL };

typedef struct cache {
	char **keys;
	cJSON **objs;
	size_t n, cap;
} cache;

/* A timed operation for one (module, node) pair. */
typedef struct pending {
	char *module;            /* "ns/name" */
	char *node;
	enum fk_op op;
	char target[FK_IMAGE_MAX];      /* loaded-annotation value the load writes; the image a sign job signs */
	gk_timer_id tid;
	int seen;                /* still wanted in the current pass */
} pending;

static int cache_put(cache *c, const char *key, const cJSON *obj);

/* API responses to fold into the cache once no view borrows from it. */
typedef struct update {
	cache *k;
	cJSON *obj;
} update;

struct fk_ctrl {
	gk_loop *loop;
	gk_kube_client *cl;     /* blocking writes */
	gk_kube_client *wcl;    /* watches */
	gk_kube_mux *mux;
	gk_kube_watch *wm, *wn;
	gk_timer_id pass_timer, reg_timer;
	cache modules, nodes;
	pending *pend;
	size_t npend, cappend;
	fk_ctrl_opts o;
	char *webhook_url, *ca_pem, *webhook_config;
	update *upd;
	size_t nupd, capupd;
	int synced_modules, synced_nodes, announced;
};

static void defer_update(fk_ctrl *c, cache *k, cJSON *obj)
{
	if (!obj)
		return;
	if (c->nupd == c->capupd) {
		size_t nc = c->capupd ? c->capupd * 2 : 16;
		update *nu = realloc(c->upd, nc * sizeof *nu);
		if (!nu) {
			cJSON_Delete(obj); /* the watch brings it anyway */
			return;
		}
		c->upd = nu;
		c->capupd = nc;
	}
	c->upd[c->nupd++] = (update){ k, obj };
}

static void apply_updates(fk_ctrl *c)
{
	for (size_t i = 0; i < c->nupd; i++) {
		char *key = gk_kube_obj_key(c->upd[i].obj);
		if (key)
			cache_put(c->upd[i].k, key, c->upd[i].obj);
		free(key);
		cJSON_Delete(c->upd[i].obj);
	}
	c->nupd = 0;
}

/* ---- cache ------------------------------------------------------------------ */
static long cache_find(const cache *c, const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->keys[i], key))
			return (long)i;
	return -1;
}

/* metadata.resourceVersion as a number (kube-apiserver and kubesim use
 * increasing integers), 0 when absent or not numeric. */
static unsigned long long rv_of(const cJSON *obj)
{
	const char *rv = fk_obj_str(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");
	char *end;
	if (!rv || !*rv)
		return 0;
	unsigned long long v = strtoull(rv, &end, 10);
	return *end ? 0 : v;
}

/* Keeps the newer of the cached and the given object: a write's response may
 * be cached before the watch delivers the older events of the same object. */
static int cache_put(cache *c, const char *key, const cJSON *obj)
{
	long i = cache_find(c, key);
	if (i >= 0) {
		unsigned long long have = rv_of(c->objs[i]), got = rv_of(obj);
		if (have && got && got < have)
			return 0;
	}
	cJSON *dup = cJSON_Duplicate(obj, 1);
	if (!dup)
		return GK_RESOURCE_EXHAUSTED;
	if (i >= 0) {
		cJSON_Delete(c->objs[i]);
		c->objs[i] = dup;
		return 0;
	}
	if (c->n == MAX_OBJECTS) {
		cJSON_Delete(dup);
		return GK_RESOURCE_EXHAUSTED;
	}
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 64;
		char **nk = realloc(c->keys, nc * sizeof *nk);
		if (!nk) {
			cJSON_Delete(dup);
			return GK_RESOURCE_EXHAUSTED;
		}
		c->keys = nk;
		cJSON **no = realloc(c->objs, nc * sizeof *no);
		if (!no) {
			cJSON_Delete(dup);
			return GK_RESOURCE_EXHAUSTED;
		}
		c->objs = no;
		c->cap = nc;
	}
	char *k = strdup(key);
	if (!k) {
		cJSON_Delete(dup);
		return GK_RESOURCE_EXHAUSTED;
	}
	c->keys[c->n] = k;
	c->objs[c->n] = dup;
	c->n++;
	return 0;
}

static void cache_del(cache *c, const char *key)
{
	long i = cache_find(c, key);
	if (i < 0)
		return;
	free(c->keys[i]);
	cJSON_Delete(c->objs[i]);
	c->n--;
	c->keys[i] = c->keys[c->n];
	c->objs[i] = c->objs[c->n];
}

static void cache_free(cache *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->keys[i]);
		cJSON_Delete(c->objs[i]);
	}
	free(c->keys);
	free(c->objs);
	memset(c, 0, sizeof *c);
}

/* ---- loop plumbing -------------------------------------------------------------- */
static void pass_schedule(fk_ctrl *c);
static void pass(gk_loop *l, gk_timer_id id, void *u);

/* ---- API writes ------------------------------------------------------------------- */
/* Merge patch; on success *out (if non-NULL) gets the object the API returned. */
static int patch(fk_ctrl *c, const gk_kube_ref *r, const cJSON *body, const char *what, cJSON **out)
{
	char *s = cJSON_PrintUnformatted(body);
	gk_err err = { 0 };
	gk_kube_status st;
	if (!s) {
		GK_ERROR("%s: out of memory", what);
		return GK_RESOURCE_EXHAUSTED;
	}
	int rc = gk_kube_patch(c->cl, r, GK_PATCH_MERGE, s, NULL, false, out, &st, &err);
	free(s);
	if (rc)
		GK_WARN("%s: %s", what, err.msg);
	return rc;
}

static cJSON *node_patch_body(cJSON **body, const char *section)
{
	if (!*body) {
		*body = cJSON_CreateObject();
		if (!*body || !cJSON_AddObjectToObject(*body, "metadata"))
			return NULL;
	}
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(*body, "metadata");
	cJSON *sec = cJSON_GetObjectItemCaseSensitive(meta, section);
	return sec ? sec : cJSON_AddObjectToObject(meta, section);
}

/* Adds "key": value (NULL → null) to the node patch's labels/annotations. */
static int patch_set(cJSON **body, const char *section, const char *key, const char *value)
{
	cJSON *sec = node_patch_body(body, section);
	if (!sec)
		return -1;
	cJSON_DeleteItemFromObjectCaseSensitive(sec, key);
	cJSON *it = value ? cJSON_AddStringToObject(sec, key, value) : cJSON_AddNullToObject(sec, key);
	return it ? 0 : -1;
}

static int patch_labels(cJSON **body, const fk_module *m, const fk_pair_plan *p)
{
	char k[FK_KEY_MAX];
	fk_key_ready(k, m);
	if (patch_set(body, "labels", k, p->ready ? "" : NULL))
		return -1;
	fk_key_version_ready(k, m);
	return patch_set(body, "labels", k, p->version_ready);
}

static void patch_node(fk_ctrl *c, const char *node, cJSON *body, const char *why)
{
	gk_kube_ref r = NODES;
	char what[320];
	cJSON *out = NULL;
	r.name = node;
	snprintf(what, sizeof what, "node %s: %s", node, why);
	if (patch(c, &r, body, what, &out) == 0)
		defer_update(c, &c->nodes, out);
	else
		cJSON_Delete(out);
}

static void set_finalizer(fk_ctrl *c, const cJSON *obj, const fk_module *m, int add)
{
	cJSON *body = cJSON_CreateObject();
	cJSON *meta = body ? cJSON_AddObjectToObject(body, "metadata") : NULL;
	cJSON *fins = meta ? cJSON_AddArrayToObject(meta, "finalizers") : NULL;
	if (!fins || !cJSON_AddStringToObject(meta, "resourceVersion", m->rv))
		goto out;
	const cJSON *f;
	cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "finalizers")) {
		if (!cJSON_IsString(f) || !strcmp(f->valuestring, FK_FINALIZER))
			continue;
		cJSON *d = cJSON_Duplicate(f, 0);
		if (!d)
			goto out;
		cJSON_AddItemToArray(fins, d);
	}
	if (add && !cJSON_AddItemToArray(fins, cJSON_CreateString(FK_FINALIZER)))
		goto out;
	gk_kube_ref r = MODULES;
	char what[256];
	r.ns = m->ns;
	r.name = m->name;
	snprintf(what, sizeof what, "module %s/%s: %s finalizer", m->ns, m->name, add ? "add" : "remove");
	cJSON *resp = NULL;
	if (patch(c, &r, body, what, &resp) == 0) {
		GK_INFO("module %s/%s: %s finalizer %s", m->ns, m->name, add ? "added" : "removed", FK_FINALIZER);
		defer_update(c, &c->modules, resp);
	} else {
		cJSON_Delete(resp);
	}
out:
	cJSON_Delete(body);
}

static void write_status(fk_ctrl *c, const fk_module *m, const fk_counts *k)
{
	cJSON *body = fk_status_body(m, k);
	if (!body) {
		GK_ERROR("module %s/%s: status: out of memory", m->ns, m->name);
		return;
	}
	gk_kube_ref r = MODULES;
	char what[256];
	r.ns = m->ns;
	r.name = m->name;
	r.subresource = "status";
	snprintf(what, sizeof what, "module %s/%s: status", m->ns, m->name);
	cJSON *resp = NULL;
	if (patch(c, &r, body, what, &resp) == 0) {
		GK_INFO("module %s/%s: status matching=%d desired=%d available=%d", m->ns, m->name, k->matching,
			k->desired, k->available);
		defer_update(c, &c->modules, resp);
	} else {
		cJSON_Delete(resp);
	}
	cJSON_Delete(body);
}

/* ---- signing ------------------------------------------------------------------------------ */
static void sign_event(fk_ctrl *c, const fk_module *m, const char *kernel, const char *reason)
{
	char ts[64];
	gk_kube_time(ts, sizeof ts, (int64_t)time(NULL));
	cJSON *ev = fk_sign_event(m, kernel, reason, ts);
	if (!ev) {
		GK_ERROR("module %s/%s: event %s: out of memory", m->ns, m->name, reason);
		return;
	}
	gk_kube_ref r = { "", "v1", "events", m->ns, NULL, NULL };
	gk_kube_status st;
	gk_err err = { 0 };
	if (gk_kube_create(c->cl, &r, ev, NULL, &st, &err) != 0)
		GK_WARN("module %s/%s: event %s: %s", m->ns, m->name, reason, err.msg);
	cJSON_Delete(ev);
}

/* the Module annotation that stands for KMM's ModuleImagesConfig status */
static int set_image_state(fk_ctrl *c, const fk_module *m, const char *kernel, enum fk_image_state st,
			   const char *image)
{
	char key[FK_KEY_MAX], val[FK_IMAGE_MAX + 32], what[FK_KEY_MAX + 64];
	fk_key_image(key, kernel);
	fk_image_value(val, sizeof val, st, image);
	cJSON *body = cJSON_CreateObject();
	cJSON *md = body ? cJSON_AddObjectToObject(body, "metadata") : NULL;
	cJSON *ann = md ? cJSON_AddObjectToObject(md, "annotations") : NULL;
	if (!ann || !cJSON_AddStringToObject(ann, key, val)) {
		cJSON_Delete(body);
		GK_ERROR("module %s/%s: image state: out of memory", m->ns, m->name);
		return GK_RESOURCE_EXHAUSTED;
	}
	gk_kube_ref r = MODULES;
	r.ns = m->ns;
	r.name = m->name;
	snprintf(what, sizeof what, "module %s/%s: %s", m->ns, m->name, key);
	cJSON *resp = NULL;
	int rc = patch(c, &r, body, what, &resp);
	if (rc == 0) {
		GK_INFO("module %s/%s: image %s for kernel %s: %s", m->ns, m->name, image, kernel, val);
		defer_update(c, &c->modules, resp);
	} else {
		cJSON_Delete(resp);
	}
	cJSON_Delete(body);
	return rc;
}

/* ---- timed operations --------------------------------------------------------------- */
static void pending_remove(fk_ctrl *c, size_t i)
{
	if (c->pend[i].tid)
		gk_loop_cancel(c->loop, c->pend[i].tid);
	free(c->pend[i].module);
	free(c->pend[i].node);
	c->pend[i] = c->pend[--c->npend];
}

static long pending_find(fk_ctrl *c, const char *module, const char *node)
{
	for (size_t i = 0; i < c->npend; i++)
		if (!strcmp(c->pend[i].module, module) && !strcmp(c->pend[i].node, node))
			return (long)i;
	return -1;
}

static void pending_fire(gk_loop *l, gk_timer_id id, void *u);
static void pending_add(fk_ctrl *c, const char *mkey, const char *node, enum fk_op op, const char *target,
			int64_t delay);

static void op_target(const fk_pair_plan *p, char *buf, size_t cap)
{
	if (p->op == FK_OP_LOAD)
		fk_loaded_format(buf, cap, p->want.kernel, p->want.version);
	else
		buf[0] = 0;
}

/* Makes sure the pair has exactly the pending op the plan asks for. */
static void pending_want(fk_ctrl *c, const char *mkey, const char *node, const fk_pair_plan *p)
{
	char target[sizeof c->pend[0].target];
	long i = pending_find(c, mkey, node);
	int want = p->op != FK_OP_NONE && !p->blocked;
	op_target(p, target, sizeof target);
	if (i >= 0 && (!want || c->pend[i].op != p->op || strcmp(c->pend[i].target, target) != 0)) {
		pending_remove(c, (size_t)i);
		i = -1;
	}
	if (i >= 0) {
		c->pend[i].seen = 1;
		return;
	}
	if (!want)
		return;
	int64_t delay = p->op == FK_OP_LOAD ? c->o.load_delay_ms : c->o.unload_delay_ms;
	pending_add(c, mkey, node, p->op, target, delay);
	GK_INFO("module %s on node %s: %s %s in %lld ms", mkey, node, p->op == FK_OP_LOAD ? "load" : "unload",
		target, (long long)delay);
}

/* pending sign jobs are keyed (module, "image/<kernel>"): no node name has a '/' */
#define SIGN_KEY_PREFIX "image/"

static void pending_add(fk_ctrl *c, const char *mkey, const char *node, enum fk_op op, const char *target, int64_t delay)
{
	if (c->npend == c->cappend) {
		size_t nc = c->cappend ? c->cappend * 2 : 32;
		pending *np = realloc(c->pend, nc * sizeof *np);
		if (!np) {
			GK_ERROR("out of memory");
			return;
		}
		c->pend = np;
		c->cappend = nc;
	}
	pending *e = &c->pend[c->npend];
	memset(e, 0, sizeof *e);
	e->module = strdup(mkey);
	e->node = strdup(node);
	if (!e->module || !e->node) {
		free(e->module);
		free(e->node);
		GK_ERROR("out of memory");
		return;
	}
	e->op = op;
	snprintf(e->target, sizeof e->target, "%s", target);
	e->seen = 1;
	/* the timer callback finds the entry by (module, node): entries move */
	e->tid = gk_loop_timer(c->loop, delay, pending_fire, c);
	c->npend++;
}

/* A signed mapping's image for `kernel` is not there yet: KMM's sign job, once
 * per (module, kernel, image). NeedsSigning is recorded and SignimageCreated
 * sent when the job starts; a restarted fake-kmm picks a recorded job up. */
static void sign_want(fk_ctrl *c, const char *mkey, const fk_module *m, const char *kernel, const char *image)
{
	char node[FK_KERNEL_MAX + 16];
	snprintf(node, sizeof node, SIGN_KEY_PREFIX "%s", kernel);
	long i = pending_find(c, mkey, node);
	if (i >= 0 && strcmp(c->pend[i].target, image) != 0) {
		pending_remove(c, (size_t)i);
		i = -1;
	}
	if (i >= 0) {
		c->pend[i].seen = 1;
		return;
	}
	if (fk_image_state(m, kernel, image) == FK_IMAGE_NONE) {
		if (set_image_state(c, m, kernel, FK_IMAGE_NEEDS_SIGNING, image) != 0) {
			if (!c->pass_timer) /* a pass again later, with or without a new event */
				c->pass_timer = gk_loop_timer(c->loop, RETRY_MS, pass, c);
			return;
		}
		sign_event(c, m, kernel, "SignimageCreated");
	}
	pending_add(c, mkey, node, FK_OP_SIGN, image, c->o.sign_delay_ms);
	GK_INFO("module %s: signing %s for kernel %s in %lld ms", mkey, image, kernel, (long long)c->o.sign_delay_ms);
}

static void sign_fire(fk_ctrl *c, size_t i)
{
	long mi = cache_find(&c->modules, c->pend[i].module);
	fk_module *m = malloc(sizeof *m);
	gk_err err = { 0 };
	const char *kernel = c->pend[i].node + strlen(SIGN_KEY_PREFIX);
	if (m && mi >= 0 && fk_module_parse(c->modules.objs[mi], m, &err) == 0 && !m->deleting) {
		if (set_image_state(c, m, kernel, FK_IMAGE_EXISTS, c->pend[i].target) == 0)
			sign_event(c, m, kernel, "SignimageSucceeded");
		/* else the image stays NeedsSigning: the next pass starts the job again */
	}
	free(m);
	pending_remove(c, i);
	apply_updates(c);
	pass_schedule(c);
}

static void pending_fire(gk_loop *l, gk_timer_id id, void *u)
{
	fk_ctrl *c = u;
	size_t i;
	for (i = 0; i < c->npend; i++)
		if (c->pend[i].tid == id)
			break;
	if (i == c->npend)
		return;
	c->pend[i].tid = 0;
	if (c->pend[i].op == FK_OP_SIGN) {
		sign_fire(c, i);
		return;
	}
	long mi = cache_find(&c->modules, c->pend[i].module), ni = cache_find(&c->nodes, c->pend[i].node);
	if (mi < 0 || ni < 0) {
		pending_remove(c, i);
		return;
	}
	fk_module m;
	fk_node n;
	fk_pair_plan p;
	gk_err err = { 0 };
	if (fk_module_parse(c->modules.objs[mi], &m, &err) || fk_node_parse(c->nodes.objs[ni], &n, &err)) {
		GK_WARN("%s", err.msg);
		pending_remove(c, i);
		return;
	}
	fk_plan_pair(&m, &n, &p);
	char target[sizeof c->pend[0].target];
	op_target(&p, target, sizeof target);
	if (p.op == c->pend[i].op && !p.blocked && !strcmp(target, c->pend[i].target)) {
		char k[FK_KEY_MAX];
		cJSON *body = NULL;
		int bad = 0;
		fk_key_loaded(k, &m);
		if (p.op == FK_OP_LOAD) {
			/* what the loaded state will be: ready when schedulable */
			p.loaded.present = 1;
			snprintf(p.loaded.kernel, sizeof p.loaded.kernel, "%s", p.want.kernel);
			snprintf(p.loaded.version, sizeof p.loaded.version, "%s", p.want.version);
			p.ready = fk_node_schedulable(&m, &n);
			p.version_ready = p.ready && *p.want.version ? p.want.version : NULL;
			bad |= patch_set(&body, "annotations", k, target);
		} else {
			p.ready = 0;
			p.version_ready = NULL;
			bad |= patch_set(&body, "annotations", k, NULL);
		}
		bad |= patch_labels(&body, &m, &p);
		GK_INFO("module %s/%s on node %s: %s", m.ns, m.name, n.name,
			p.op == FK_OP_LOAD ? "loaded" : "unloaded");
		if (bad)
			GK_ERROR("out of memory");
		else
			patch_node(c, n.name, body, p.op == FK_OP_LOAD ? "load" : "unload");
		cJSON_Delete(body);
	}
	pending_remove(c, i);
	apply_updates(c);
	pass_schedule(c);
}

/* ---- the reconcile pass --------------------------------------------------------------- */
static void pass(gk_loop *l, gk_timer_id id, void *u)
{
	fk_ctrl *c = u;
	gk_err err = { 0 };
	c->pass_timer = 0;
	/* Until both lists are in, the view is partial: counts would be wrong and
	 * a deleting Module could lose its finalizer. on_synced schedules a pass. */
	if (!c->synced_modules || !c->synced_nodes)
		return;
	fk_node *nodes = calloc(c->nodes.n ? c->nodes.n : 1, sizeof *nodes);
	cJSON **npatch = calloc(c->nodes.n ? c->nodes.n : 1, sizeof *npatch);
	fk_module *m = malloc(sizeof *m);
	if (!nodes || !npatch || !m) {
		GK_ERROR("reconcile: out of memory; retrying");
		free(nodes);
		free(npatch);
		free(m);
		c->pass_timer = gk_loop_timer(c->loop, RETRY_MS, pass, c);
		return;
	}
	size_t nn = 0;
	for (size_t i = 0; i < c->nodes.n; i++) {
		if (fk_node_parse(c->nodes.objs[i], &nodes[nn], &err) != 0) {
			GK_WARN("%s", err.msg);
			continue;
		}
		nn++;
	}
	for (size_t i = 0; i < c->npend; i++)
		c->pend[i].seen = 0;
	for (size_t mi = 0; mi < c->modules.n; mi++) {
		const cJSON *mo = c->modules.objs[mi];
		if (fk_module_parse(mo, m, &err) != 0) {
			GK_WARN("%s", err.msg);
			continue;
		}
		if (!m->deleting && !m->has_finalizer)
			set_finalizer(c, mo, m, 1);
		fk_counts k = { 0, 0, 0 };
		int loaded = 0;
		for (size_t ni = 0; ni < nn; ni++) {
			fk_pair_plan p;
			fk_plan_pair(m, &nodes[ni], &p);
			k.matching += p.matching;
			k.desired += p.desired;
			k.available += p.available;
			loaded |= p.loaded.present;
			if (fk_plan_labels_differ(&p) && patch_labels(&npatch[ni], m, &p))
				GK_ERROR("out of memory");
			pending_want(c, c->modules.keys[mi], nodes[ni].name, &p);
			if (p.sign_needed && p.image[0] && !m->deleting)
				sign_want(c, c->modules.keys[mi], m, p.want.kernel, p.image);
		}
		if (!m->deleting && fk_status_needs_write(m, &k))
			write_status(c, m, &k);
		if (m->deleting && m->has_finalizer && !loaded)
			set_finalizer(c, mo, m, 0);
	}
	for (size_t ni = 0; ni < nn; ni++) {
		if (npatch[ni])
			patch_node(c, nodes[ni].name, npatch[ni], "ready labels");
		cJSON_Delete(npatch[ni]);
	}
	for (size_t i = 0; i < c->npend;) {
		if (!c->pend[i].seen)
			pending_remove(c, i);
		else
			i++;
	}
	free(nodes);
	free(npatch);
	free(m);
	apply_updates(c);
	if (c->synced_modules && c->synced_nodes && !c->announced) {
		/* tests wait for this line: the first full pass over listed state is done */
		c->announced = 1;
		GK_INFO("in sync: %zu modules, %zu nodes, %zu operations pending", c->modules.n, c->nodes.n, c->npend);
	}
}

static void pass_schedule(fk_ctrl *c)
{
	if (!c->pass_timer)
		c->pass_timer = gk_loop_timer(c->loop, 0, pass, c);
}

/* ---- watches ------------------------------------------------------------------------------ */
static void on_event(fk_ctrl *c, cache *k, enum gk_kube_event type, const char *key, const cJSON *obj)
{
	if (type == GK_KUBE_DELETED) {
		cache_del(k, key);
	} else if (cache_put(k, key, obj) != 0) {
		GK_ERROR("cache: cannot keep %s (out of memory or more than %d objects)", key, MAX_OBJECTS);
		return;
	}
	pass_schedule(c);
}

static void on_module(void *u, enum gk_kube_event type, const char *key, const cJSON *obj)
{
	fk_ctrl *c = u;
	on_event(c, &c->modules, type, key, obj);
}

static void on_node(void *u, enum gk_kube_event type, const char *key, const cJSON *obj)
{
	fk_ctrl *c = u;
	on_event(c, &c->nodes, type, key, obj);
}

static void on_synced_modules(void *u)
{
	fk_ctrl *c = u;
	c->synced_modules = 1;
	pass_schedule(c);
}

static void on_synced_nodes(void *u)
{
	fk_ctrl *c = u;
	c->synced_nodes = 1;
	pass_schedule(c);
}

static void on_error(void *u, int code, const char *msg)
{
	GK_DEBUG("watch: %s (%s)", msg, gk_code_name(code));
}

/* ---- webhook registration ------------------------------------------------------------------- */
static void reg_try(gk_loop *l, gk_timer_id id, void *u)
{
	fk_ctrl *c = u;
	gk_err err = { 0 };
	gk_kube_status st;
	c->reg_timer = 0;
	cJSON *obj = fk_webhook_config_object(c->webhook_config, c->webhook_url, c->ca_pem);
	if (!obj)
		goto retry;
	gk_kube_ref r = { "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", NULL, NULL, NULL };
	int rc = gk_kube_create(c->cl, &r, obj, NULL, &st, &err);
	if (rc == GK_ALREADY_EXISTS) {
		cJSON *cur = NULL;
		r.name = c->webhook_config;
		rc = gk_kube_get(c->cl, &r, &cur, &st, &err);
		if (rc == 0) {
			const char *rv = fk_obj_str(cJSON_GetObjectItemCaseSensitive(cur, "metadata"), "resourceVersion");
			cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
			if (rv && !cJSON_AddStringToObject(meta, "resourceVersion", rv))
				rc = GK_RESOURCE_EXHAUSTED;
			else
				rc = gk_kube_update(c->cl, &r, obj, NULL, &st, &err);
		}
		cJSON_Delete(cur);
	}
	cJSON_Delete(obj);
	if (rc == 0) {
		GK_INFO("registered ValidatingWebhookConfiguration %s → %s", c->webhook_config, c->webhook_url);
		return;
	}
	GK_WARN("registering the webhook configuration: %s; retrying", err.msg);
retry:
	c->reg_timer = gk_loop_timer(c->loop, RETRY_MS, reg_try, c);
}

/* ---- start / stop ---------------------------------------------------------------------------- */
static char *dup_or_null(const char *s, int *bad)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*bad = 1;
	return d;
}

int fk_ctrl_start(fk_ctrl **out, gk_loop *loop, const fk_ctrl_opts *o, gk_err *err)
{
	gk_kube_config cfg = { 0 };
	int rc, bad = 0;
	*out = NULL;
	fk_ctrl *c = calloc(1, sizeof *c);
	if (!c)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	c->loop = loop;
	c->o = *o;
	c->webhook_url = dup_or_null(o->webhook_url, &bad);
	c->ca_pem = dup_or_null(o->ca_pem, &bad);
	c->webhook_config = dup_or_null(o->webhook_config ? o->webhook_config : "fake-kmm-validating-webhook-configuration", &bad);
	if (bad) {
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		goto fail;
	}
	if ((rc = gk_kube_config_load(&cfg, o->kubeconfig, err)) != 0)
		goto fail;
	gk_kube_opts ko = { .qps = -1, .user_agent = "fake-kmm" };
	if ((rc = gk_kube_client_new(&c->cl, &cfg, &ko, err)) != 0 ||
	    (rc = gk_kube_client_new(&c->wcl, &cfg, &ko, err)) != 0 || (rc = gk_kube_mux_new(&c->mux, c->wcl, err)) != 0)
		goto fail;
	gk_kube_config_free(&cfg);
	if ((rc = gk_kube_mux_attach(c->mux, loop, err)) != 0)
		goto fail;
	if (c->webhook_url)
		reg_try(loop, 0, c);
	gk_kube_watch_cbs mcb = { .on_event = on_module, .on_synced = on_synced_modules, .on_error = on_error },
			  ncb = { .on_event = on_node, .on_synced = on_synced_nodes, .on_error = on_error };
	gk_kube_watch_opts wo = { 0 };
	if ((rc = gk_kube_watch_start(&c->wm, c->mux, &MODULES, &wo, &mcb, c, err)) != 0 ||
	    (rc = gk_kube_watch_start(&c->wn, c->mux, &NODES, &wo, &ncb, c, err)) != 0)
		goto fail;
	*out = c;
	return 0;
fail:
	gk_kube_config_free(&cfg);
	fk_ctrl_stop(c);
	return rc;
}

void fk_ctrl_stop(fk_ctrl *c)
{
	if (!c)
		return;
	if (c->wm)
		gk_kube_watch_stop(c->wm);
	if (c->wn)
		gk_kube_watch_stop(c->wn);
	gk_kube_mux_free(c->mux); /* detaches from the loop */
	gk_kube_client_free(c->cl);
	gk_kube_client_free(c->wcl);
	while (c->npend)
		pending_remove(c, c->npend - 1);
	free(c->pend);
	if (c->pass_timer)
		gk_loop_cancel(c->loop, c->pass_timer);
	if (c->reg_timer)
		gk_loop_cancel(c->loop, c->reg_timer);
	apply_updates(c);
	free(c->upd);
	cache_free(&c->modules);
	cache_free(&c->nodes);
	free(c->webhook_url);
	free(c->ca_pem);
	free(c->webhook_config);
	free(c);
}

int fk_ctrl_kube_version(const char *kubeconfig, int *major, int *minor, gk_err *err)
{
	gk_kube_config cfg = { 0 };
	gk_kube_client *cl = NULL;
	cJSON *v = NULL;
	gk_kube_opts ko = { .qps = -1, .user_agent = "fake-kmm", .timeout_ms = 5000 };
	int rc = gk_kube_config_load(&cfg, kubeconfig, err);
	if (!rc)
		rc = gk_kube_client_new(&cl, &cfg, &ko, err);
	if (!rc)
		rc = gk_kube_request(cl, "GET", "/version", NULL, NULL, 0, &v, NULL, err);
	if (!rc) {
		const char *ma = fk_obj_str(v, "major"), *mi = fk_obj_str(v, "minor");
		if (!ma || !mi)
			rc = gk_err_set(err, GK_INTERNAL, "/version without major/minor");
		else {
			*major = atoi(ma); /* "1", "32+" */
			*minor = atoi(mi);
		}
	}
	cJSON_Delete(v);
	gk_kube_client_free(cl);
	gk_kube_config_free(&cfg);
	return rc;
}
