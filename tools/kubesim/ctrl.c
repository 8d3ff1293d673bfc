/* kubesim — the controllers' thread: follows the store's history, marks what
 * changed, runs the controllers' passes and their timers (see ctrl.h). */
#include "ctrl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpukmm/log.h"

#define KS_CTRL_BUDGET 200 /* writes per pass before requests get the lock */

static const struct {
	const char *name;
	unsigned bit;
} names[] = {
	{ "daemonset", KS_CTRL_DAEMONSET },
	{ "disruption", KS_CTRL_DISRUPTION },
	{ "kubelet", KS_CTRL_KUBELET },
};

int ks_ctrl_parse(const char *list, unsigned *enabled, gk_err *err)
{
	unsigned on = 0;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", list ? list : "*");
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int neg = t[0] == '-';
		const char *n = neg ? t + 1 : t;
		unsigned bit = 0;
		if (strcmp(n, "*") == 0)
			bit = KS_CTRL_ALL;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strcmp(n, names[i].name) == 0)
				bit = names[i].bit;
		if (!bit || (neg && bit == KS_CTRL_ALL))
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "--controllers: unknown controller '%s' (known: *, daemonset, disruption, kubelet)", t);
		on = neg ? on & ~bit : on | bit;
	}
	*enabled = on;
	return 0;
}

int ks_ctrl_mark(gk_kmap *set, const char *key)
{
	return gk_kmap_put(set, key, NULL, NULL) ? 0 : GK_RESOURCE_EXHAUSTED;
}

char **ks_ctrl_take(gk_kmap *set, size_t *n)
{
	*n = 0;
	if (set->n == 0)
		return NULL;
	const char **keys = gk_kmap_keys(set);
	size_t k = set->n;
	char **out = keys ? calloc(k, sizeof(char *)) : NULL;
	for (size_t i = 0; out && i < k; i++)
		if (!(out[i] = strdup(keys[i]))) {
			while (i--)
				free(out[i]);
			free(out);
			out = NULL;
		}
	free(keys);
	if (!out)
		return NULL;
	gk_kmap_clear(set);
	*n = k;
	return out;
}

/* ---- timers: a binary min-heap on due -------------------------------------- */
static void heap_swap(ks_ctrl *c, int i, int j)
{
	ks_timer t = c->heap[i];
	c->heap[i] = c->heap[j];
	c->heap[j] = t;
}

void ks_ctrl_timer(ks_ctrl *c, int64_t due, int kind, const char *key)
{
	if (c->nheap == c->capheap) {
		int nc = c->capheap ? c->capheap * 2 : 64;
		ks_timer *nh = realloc(c->heap, sizeof(*nh) * (size_t)nc);
		if (!nh)
			return; /* the object is rechecked at the next resync */
		c->heap = nh;
		c->capheap = nc;
	}
	char *k = strdup(key);
	if (!k)
		return;
	int i = c->nheap++;
	c->heap[i] = (ks_timer){ due, kind, k };
	while (i > 0 && c->heap[(i - 1) / 2].due > c->heap[i].due) {
		heap_swap(c, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static ks_timer heap_pop(ks_ctrl *c)
{
	ks_timer top = c->heap[0];
	c->heap[0] = c->heap[--c->nheap];
	int i = 0;
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < c->nheap && c->heap[l].due < c->heap[m].due)
			m = l;
		if (r < c->nheap && c->heap[r].due < c->heap[m].due)
			m = r;
		if (m == i)
			break;
		heap_swap(c, i, m);
		i = m;
	}
	return top;
}

int ks_ctrl_put(ks_server *s, const char *group, const char *resource, const char *ns, const char *name, cJSON *obj)
{
	int rc = ks_store_put(&s->store, group, resource, ns, name, obj);
	s->dirty = 1;
	s->ctrl->writes++;
	s->ctrl->budget--;
	return rc;
}

/* ---- the pass ---------------------------------------------------------------- */
static void mark_event(ks_ctrl *c, const ks_event *e)
{
	char key[600];
	const char *gr = e->gr;
	if (strcmp(gr, "/nodes") == 0) {
		ks_ctrl_mark(&c->dirty_nodes, e->cur->name);
		return;
	}
	snprintf(key, sizeof(key), "%s/%s", e->cur->ns, e->cur->name);
	if (strcmp(gr, "/pods") == 0) {
		ks_ctrl_mark(&c->dirty_pods, key);
		ks_ctrl_mark(&c->dirty_pdb_ns, e->cur->ns);
	} else if (strcmp(gr, "apps/daemonsets") == 0) {
		ks_ctrl_mark(&c->dirty_ds, key);
	} else if (strcmp(gr, "policy/poddisruptionbudgets") == 0) {
		ks_ctrl_mark(&c->dirty_pdbs, key);
	} else if (strcmp(gr, "apps/replicasets") == 0 || strcmp(gr, "apps/statefulsets") == 0 ||
		   strcmp(gr, "apps/deployments") == 0 || strcmp(gr, "/replicationcontrollers") == 0) {
		ks_ctrl_mark(&c->dirty_pdb_ns, e->cur->ns); /* their scale is the PDBs' expected count */
	}
}

/* Every object of a kind into a dirty set (resync). */
static void mark_all(ks_server *s, const char *group, const char *resource, gk_kmap *set, int with_ns)
{
	ks_bucket *b = ks_store_bucket(&s->store, group, resource, 0);
	for (int i = 0; b && i < b->n; i++) {
		char key[600];
		if (with_ns)
			snprintf(key, sizeof(key), "%s/%s", b->items[i].ns, b->items[i].name);
		else
			snprintf(key, sizeof(key), "%s", b->items[i].name);
		ks_ctrl_mark(set, key);
	}
}

int64_t ks_ctrl_pass_locked(ks_server *s, int64_t now)
{
	ks_ctrl *c = s->ctrl;
	if (!c)
		return -1;
	c->budget = KS_CTRL_BUDGET;
	c->now = now;
	int idx = ks_store_history_from(&s->store, c->cursor);
	if (idx < 0 || c->resync) {
		/* the history we follow is gone (or first pass): everything is dirty */
		c->resync = 0;
		mark_all(s, "", "nodes", &c->dirty_nodes, 0);
		mark_all(s, "", "pods", &c->dirty_pods, 1);
		mark_all(s, "apps", "daemonsets", &c->dirty_ds, 1);
		mark_all(s, "policy", "poddisruptionbudgets", &c->dirty_pdbs, 1);
		if (c->o.enabled & KS_CTRL_DAEMONSET)
			ks_dsc_resync(s, c);
		idx = s->store.count;
	}
	for (; idx < s->store.count; idx++)
		mark_event(c, ks_store_event(&s->store, idx));
	c->cursor = s->store.rv;
	/* the controllers take the dirty marks into their own state; writes they could
	 * not make within the budget stay pending there (c->more) */
	c->more = 0;
	if (c->o.enabled & KS_CTRL_KUBELET)
		ks_kubelet_pass(s, c);
	if (c->o.enabled & KS_CTRL_DAEMONSET)
		ks_dsc_pass(s, c);
	if (c->o.enabled & KS_CTRL_DISRUPTION)
		ks_pdb_pass(s, c);
	gk_kmap_clear(&c->dirty_nodes);
	gk_kmap_clear(&c->dirty_ds);
	gk_kmap_clear(&c->dirty_pods);
	gk_kmap_clear(&c->dirty_pdbs);
	gk_kmap_clear(&c->dirty_pdb_ns);
	while (c->nheap > 0 && c->heap[0].due <= now && c->budget > 0) {
		ks_timer t = heap_pop(c);
		if (t.kind == KS_T_DS_NODE && (c->o.enabled & KS_CTRL_DAEMONSET))
			ks_dsc_timer(s, c, t.key);
		else if ((t.kind == KS_T_POD_START || t.kind == KS_T_POD_STOP) && (c->o.enabled & KS_CTRL_KUBELET))
			ks_kubelet_timer(s, c, t.kind, t.key);
		else if (t.kind == KS_T_PDB && (c->o.enabled & KS_CTRL_DISRUPTION))
			ks_pdb_timer(s, c, t.key);
		free(t.key);
	}
	if (ks_kubelet_take_removed(c))
		ks_gc_run(s); /* a foreground deletion may wait for those pods */
	if (c->budget < KS_CTRL_BUDGET)
		pthread_cond_broadcast(&s->cond); /* watchers: new events */
	if (c->budget <= 0 || c->more)
		return 0;
	if (c->nheap == 0)
		return -1;
	return c->heap[0].due > now ? c->heap[0].due - now : 0;
}

static void *run(void *arg)
{
	ks_server *s = arg;
	ks_ctrl *c = s->ctrl;
	pthread_mutex_lock(&s->mu);
	while (!s->shutting_down) {
		int64_t wait = ks_ctrl_pass_locked(s, ks_mono_ms());
		if (s->shutting_down)
			break;
		if (wait == 0 || c->cursor != s->store.rv) {
			/* more to do: let the requests waiting for the lock in first */
			pthread_mutex_unlock(&s->mu);
			sched_yield();
			pthread_mutex_lock(&s->mu);
			continue;
		}
		if (wait < 0 || wait > 1000)
			wait = 1000;
		ks_cond_wait_ms(&s->cond, &s->mu, wait);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

void ks_ctrl_stats(ks_server *s, cJSON *stats)
{
	ks_ctrl *c = s->ctrl;
	cJSON *o = stats && c ? cJSON_AddObjectToObject(stats, "controllers") : NULL;
	if (!o)
		return;
	cJSON_AddNumberToObject(o, "seen", (double)c->cursor);
	cJSON_AddBoolToObject(o, "busy", c->more || c->budget <= 0);
	cJSON_AddNumberToObject(o, "writes", (double)c->writes);
}

int ks_ctrl_init(ks_server *s, const ks_ctrl_opts *o)
{
	ks_ctrl *c = calloc(1, sizeof(*c));
	if (!c)
		return GK_RESOURCE_EXHAUSTED;
	c->o = *o;
	c->resync = 1;
	gk_kmap_init(&c->dirty_nodes);
	gk_kmap_init(&c->dirty_pods);
	gk_kmap_init(&c->dirty_ds);
	gk_kmap_init(&c->dirty_pdbs);
	gk_kmap_init(&c->dirty_pdb_ns);
	gk_kmap_init(&c->pdb_pending);
	s->ctrl = c;
	if (ks_dsc_init(c) || ks_kubelet_init(c)) {
		ks_ctrl_free(s);
		return GK_RESOURCE_EXHAUSTED;
	}
	return 0;
}

int ks_ctrl_start(ks_server *s)
{
	ks_ctrl *c = s->ctrl;
	if (!c || !c->o.enabled)
		return 0;
	if (pthread_create(&c->thread, NULL, run, s))
		return GK_UNAVAILABLE;
	c->running = 1;
	return 0;
}

void ks_ctrl_stop(ks_server *s)
{
	ks_ctrl *c = s->ctrl;
	if (!c || !c->running)
		return;
	pthread_mutex_lock(&s->mu);
	s->shutting_down = 1;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	pthread_join(c->thread, NULL);
	c->running = 0;
}

void ks_ctrl_free(ks_server *s)
{
	ks_ctrl *c = s->ctrl;
	if (!c)
		return;
	ks_ctrl_stop(s);
	ks_dsc_free(c);
	ks_kubelet_free(c);
	gk_kmap_clear(&c->dirty_nodes);
	gk_kmap_clear(&c->dirty_pods);
	gk_kmap_clear(&c->dirty_ds);
	gk_kmap_clear(&c->dirty_pdbs);
	gk_kmap_clear(&c->dirty_pdb_ns);
	gk_kmap_clear(&c->pdb_pending);
	for (int i = 0; i < c->nheap; i++)
		free(c->heap[i].key);
	free(c->heap);
	free(c);
	s->ctrl = NULL;
}
