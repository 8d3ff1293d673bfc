/* lib/operands: Kueue (operands.md §8.3) — the cluster totals, their even
 * division into the policy's ClusterQueues, and the ResourceFlavor,
 * ClusterQueues and LocalQueues.
 *
 * As upstream: dp mode counts node allocatable gpu.intel.com/i915 and
 * gpu.intel.com/xe and the cpu and memory of the nodes that have either (the
 * key present, whatever its value); dra mode counts the devices (with
 * attributes or capacity) of the ResourceSlices of driver gpu.intel.com of
 * known nodes as dra.gpu.intel.com, plus the cpu and memory of those nodes.
 * Sums are exact, then rounded up to whole units (Quantity.Value()). Each
 * queue gets total / n, the first total % n queues one more; a resource whose
 * total is 0 is left out; a share below 1 is upstream's error.
 *
 * Unlike upstream: in dra mode a node's cpu and memory count once however many
 * slices it publishes, and only the slices of a pool's newest generation count
 * (a driver republishing its pool does not double the quota for a moment);
 * resources are listed in name order (upstream's order is a Go map's, random). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/quantity.h"
#include "internal.h"

const char *const gk_op_kres_names[GK_OP_KR_N] = {
	"cpu", "dra.gpu.intel.com", "gpu.intel.com/i915", "gpu.intel.com/xe", "memory",
};

static void add(gk_qty *sum, const char *q)
{
	gk_qty v;
	if (q && gk_qty_parse(q, &v))
		*sum += v;
}

static int by_name(const void *a, const void *b)
{
	const gk_op_knode *x = *(const gk_op_knode *const *)a, *y = *(const gk_op_knode *const *)b;
	return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

static int by_pool(const void *a, const void *b)
{
	const gk_op_kslice *x = *(const gk_op_kslice *const *)a, *y = *(const gk_op_kslice *const *)b;
	int c = strcmp(x->pool ? x->pool : "", y->pool ? y->pool : "");
	if (c)
		return c;
	return x->generation > y->generation ? -1 : x->generation < y->generation ? 1 : 0;
}

static const gk_op_knode *find(const gk_op_knode **sorted, size_t n, const char *name)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(sorted[mid]->name ? sorted[mid]->name : "", name);
		if (c == 0)
			return sorted[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static bool same(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

int gk_op_kueue_totals(bool dra, const gk_op_knode *nodes, size_t n, const gk_op_kslice *slices, size_t ns,
		       gk_op_ktotals *out)
{
	memset(out, 0, sizeof(*out));
	gk_qty sum[GK_OP_KR_N] = { 0 };
	if (!dra) {
		for (size_t i = 0; i < n; i++) {
			const gk_op_knode *nd = &nodes[i];
			if (!nd->i915 && !nd->xe)
				continue;
			add(&sum[GK_OP_KR_I915], nd->i915);
			add(&sum[GK_OP_KR_XE], nd->xe);
			add(&sum[GK_OP_KR_CPU], nd->cpu);
			add(&sum[GK_OP_KR_MEMORY], nd->memory);
		}
	} else {
		const gk_op_knode **sorted = calloc(n ? n : 1, sizeof(*sorted));
		const gk_op_kslice **sl = calloc(ns ? ns : 1, sizeof(*sl));
		bool *counted = calloc(n ? n : 1, sizeof(*counted));
		if (!sorted || !sl || !counted) {
			free(sorted);
			free(sl);
			free(counted);
			return -1;
		}
		for (size_t i = 0; i < n; i++)
			sorted[i] = &nodes[i];
		qsort(sorted, n, sizeof(*sorted), by_name);
		size_t m = 0;
		for (size_t i = 0; i < ns; i++)
			if (same(slices[i].driver, GK_OP_GPU_DRIVER) && slices[i].node && slices[i].devices > 0)
				sl[m++] = &slices[i];
		/* by pool, newest generation first: a pool's older generation is on its way out */
		qsort(sl, m, sizeof(*sl), by_pool);
		for (size_t i = 0; i < m; i++) {
			const gk_op_kslice *s = sl[i];
			if (i > 0 && same(sl[i - 1]->pool, s->pool) && sl[i - 1]->generation > s->generation) {
				sl[i] = sl[i - 1]; /* carries the pool's newest generation on */
				continue;
			}
			const gk_op_knode *nd = find(sorted, n, s->node);
			if (!nd)
				continue; /* a node we do not know: upstream skips it too */
			sum[GK_OP_KR_DRA] += (gk_qty)s->devices * GK_QTY_ONE;
			size_t k = (size_t)(nd - nodes);
			if (!counted[k]) {
				counted[k] = true;
				add(&sum[GK_OP_KR_CPU], nd->cpu);
				add(&sum[GK_OP_KR_MEMORY], nd->memory);
			}
		}
		free(sorted);
		free(sl);
		free(counted);
	}
	for (int r = 0; r < GK_OP_KR_N; r++)
		out->value[r] = sum[r] > 0 ? gk_qty_value(sum[r]) : 0;
	return 0;
}

bool gk_op_kueue_any(const gk_op_ktotals *t)
{
	for (int r = 0; r < GK_OP_KR_N; r++)
		if (t->value[r] > 0)
			return true;
	return false;
}

int gk_op_kueue_divide(const gk_op_ktotals *t, size_t queues, int64_t (*quota)[GK_OP_KR_N], char *msg, size_t cap)
{
	/* upstream goes queue by queue and stops at the first share below 1: that is
	 * queue `total` of the smallest total below the queue count */
	int worst = -1;
	for (int r = 0; r < GK_OP_KR_N; r++)
		if (t->value[r] > 0 && (uint64_t)t->value[r] < queues && (worst < 0 || t->value[r] < t->value[worst]))
			worst = r;
	if (worst >= 0) {
		snprintf(msg, cap, "unable to create %zu queues using %lld '%s' reources", queues,
			 (long long)t->value[worst], gk_op_kres_names[worst]);
		return -1;
	}
	for (size_t q = 0; q < queues; q++)
		for (int r = 0; r < GK_OP_KR_N; r++) {
			int64_t v = t->value[r];
			quota[q][r] = v > 0 ? v / (int64_t)queues + ((int64_t)q < v % (int64_t)queues ? 1 : 0) : 0;
		}
	return 0;
}

/* ---- objects -------------------------------------------------------------------------- */

static void labels(gk_opr *r, gk_op_obj *o)
{
	if (!o)
		return;
	gk_opr_set_str(r, o->obj, "/metadata/labels/app", GK_OP_KUEUE_APP);
	gk_opr_set_str(r, o->obj, "/metadata/labels/owner", r->cpn);
	/* upstream adds its two labels and keeps the others */
	gk_opr_rule(r, o, GK_OP_SUBSET, "/metadata/labels/app");
	gk_opr_rule(r, o, GK_OP_SUBSET, "/metadata/labels/owner");
}

static cJSON *groups(gk_opr *r, const int64_t *quota)
{
	cJSON *g = gk_opr_template(r, "[{coveredResources: [], flavors: [{name: " GK_OP_KUEUE_FLAVOR ", resources: []}]}]");
	if (!g)
		return NULL;
	cJSON *cov = gk_op_pointer(g, "/0/coveredResources", false, &r->oom);
	cJSON *res = gk_op_pointer(g, "/0/flavors/0/resources", false, &r->oom);
	for (int k = 0; k < GK_OP_KR_N; k++) {
		if (quota[k] <= 0)
			continue;
		gk_opr_push(r, cov, gk_opr_str(r, gk_op_kres_names[k]));
		cJSON *q = cJSON_CreateObject();
		if (q && (!cJSON_AddStringToObject(q, "name", gk_op_kres_names[k]) ||
			  !cJSON_AddItemToObject(q, "nominalQuota", gk_opr_strf(r, "%lld", (long long)quota[k])))) {
			cJSON_Delete(q);
			q = NULL;
		}
		gk_opr_push(r, res, q);
	}
	return g;
}

/* The first earlier queue listing the same LocalQueue (validation refuses it; a
 * policy stored before that still renders: the first one wins). */
static int lq_taken(const Gpukmm__KueueSpec *k, size_t cq, size_t lq)
{
	const Gpukmm__KueueLocalQueue *a = k->equal_resources[cq]->local_queues[lq];
	for (size_t i = 0; i <= cq; i++)
		for (size_t j = 0; j < k->equal_resources[i]->n_local_queues && (i < cq || j < lq); j++) {
			const Gpukmm__KueueLocalQueue *b = k->equal_resources[i]->local_queues[j];
			if (same(a->name, b->name) && same(a->namespace_, b->namespace_))
				return (int)i;
		}
	return -1;
}

void gk_opr_kueue(gk_opr *r)
{
	const Gpukmm__KueueSpec *k = r->spec->kueue;
	size_t n = k ? k->n_equal_resources : 0;
	if (!r->o->kueue) {
		/* upstream skips Kueue silently; we say so (once per pass, no retry: discovery
		 * brings the policy back when the CRDs appear). Nothing can be there to delete. */
		gk_opr_error(r, "%s", GK_OP_MSG_KUEUE_ABSENT);
		r->s->held |= 1u << GK_OP_KUEUE;
		return;
	}
	if (n == 0)
		return; /* no queue: nothing to own (what we had goes) */
	const gk_op_ktotals *t = r->o->kueue_totals;
	if (!t) {
		/* the inputs are not known yet (dra mode: the ResourceSlices are being listed) */
		r->s->held |= 1u << GK_OP_KUEUE;
		return;
	}
	if (!gk_op_kueue_any(t)) {
		/* upstream logs "Kueue enabled, but cluster has no resources" and changes nothing */
		gk_opr_error(r, "%s", GK_OP_MSG_KUEUE_NO_RESOURCES);
		r->s->held |= 1u << GK_OP_KUEUE;
		return;
	}
	int64_t (*quota)[GK_OP_KR_N] = calloc(n, sizeof(*quota));
	if (!quota) {
		r->oom = true;
		return;
	}
	char msg[256];
	if (gk_op_kueue_divide(t, n, quota, msg, sizeof(msg))) {
		gk_opr_error(r, "%s", msg);
		r->s->held |= 1u << GK_OP_KUEUE;
		free(quota);
		return;
	}
	gk_op_obj *o = gk_opr_add(r, GK_OP_KUEUE, GK_OP_KUEUE_API_VERSION, "ResourceFlavor", "resourceflavors", NULL,
				  GK_OP_KUEUE_FLAVOR, NULL);
	labels(r, o);
	for (size_t i = 0; i < n && !r->oom; i++) {
		const Gpukmm__KueueClusterQueue *cq = k->equal_resources[i];
		o = gk_opr_add(r, GK_OP_KUEUE, GK_OP_KUEUE_API_VERSION, "ClusterQueue", "clusterqueues", NULL, cq->name,
			       "spec: {namespaceSelector: {}}");
		labels(r, o);
		if (o) {
			gk_opr_set(r, o->obj, "/spec/resourceGroups", groups(r, quota[i]));
			gk_opr_rule(r, o, GK_OP_EXACT, "/spec/namespaceSelector");
			gk_opr_rule(r, o, GK_OP_QUOTAS, "/spec/resourceGroups");
		}
		for (size_t j = 0; j < cq->n_local_queues && !r->oom; j++) {
			const Gpukmm__KueueLocalQueue *lq = cq->local_queues[j];
			int other = lq_taken(k, i, j);
			if (other >= 0) {
				gk_opr_error(r, "kueue.equalResources[%zu]: localQueue \"%s/%s\" is already in "
						"equalResources[%d]", i, lq->namespace_ ? lq->namespace_ : "",
					     lq->name ? lq->name : "", other);
				continue;
			}
			o = gk_opr_add(r, GK_OP_KUEUE, GK_OP_KUEUE_API_VERSION, "LocalQueue", "localqueues",
				       lq->namespace_ ? lq->namespace_ : "", lq->name, NULL);
			labels(r, o);
			if (o) {
				gk_opr_set_str(r, o->obj, "/spec/clusterQueue", cq->name);
				/* immutable in Kueue: another queue means a new LocalQueue */
				gk_opr_rule(r, o, GK_OP_REPLACE, "/spec/clusterQueue");
			}
		}
	}
	free(quota);
}

/* ---- comparing quotas ------------------------------------------------------------------------ */

static bool qty_of(const cJSON *v, gk_qty *out)
{
	char buf[64];
	if (cJSON_IsNumber(v)) {
		snprintf(buf, sizeof(buf), "%.0f", v->valuedouble);
		if (v->valuedouble != (double)(long long)v->valuedouble)
			return false;
		return gk_qty_parse(buf, out);
	}
	return cJSON_IsString(v) && gk_qty_parse(v->valuestring, out);
}

static const cJSON *named_item(const cJSON *arr, const char *name)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, arr) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
			return e;
	}
	return NULL;
}

static bool same_set(const cJSON *a, const cJSON *b)
{
	if (!cJSON_IsArray(a) || !cJSON_IsArray(b) || cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
		return false;
	const cJSON *x, *y;
	cJSON_ArrayForEach(x, a) {
		bool found = false;
		cJSON_ArrayForEach(y, b) found |= cJSON_Compare(x, y, 1);
		if (!found)
			return false;
	}
	return true;
}

/* One flavor's quotas: the same resources (any order), numerically equal, nothing else set. */
static bool same_resources(const cJSON *w, const cJSON *l)
{
	if (!cJSON_IsArray(w) || !cJSON_IsArray(l) || cJSON_GetArraySize(w) != cJSON_GetArraySize(l))
		return false;
	const cJSON *e;
	cJSON_ArrayForEach(e, w) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
		const cJSON *le = cJSON_IsString(n) ? named_item(l, n->valuestring) : NULL;
		gk_qty a, b;
		if (!le || cJSON_GetArraySize(le) != cJSON_GetArraySize(e) ||
		    !qty_of(cJSON_GetObjectItemCaseSensitive(e, "nominalQuota"), &a) ||
		    !qty_of(cJSON_GetObjectItemCaseSensitive(le, "nominalQuota"), &b) || a != b)
			return false;
	}
	return true;
}

bool gk_op_kueue_groups_equal(const cJSON *want, const cJSON *live)
{
	if (!cJSON_IsArray(want) || !cJSON_IsArray(live) || cJSON_GetArraySize(want) != cJSON_GetArraySize(live))
		return false;
	for (const cJSON *w = want->child, *l = live->child; w && l; w = w->next, l = l->next) {
		if (!cJSON_IsObject(l) || cJSON_GetArraySize(l) != cJSON_GetArraySize(w) ||
		    !same_set(cJSON_GetObjectItemCaseSensitive(w, "coveredResources"),
			      cJSON_GetObjectItemCaseSensitive(l, "coveredResources")))
			return false;
		const cJSON *wf = cJSON_GetObjectItemCaseSensitive(w, "flavors");
		const cJSON *lf = cJSON_GetObjectItemCaseSensitive(l, "flavors");
		if (!cJSON_IsArray(lf) || cJSON_GetArraySize(wf) != cJSON_GetArraySize(lf))
			return false;
		for (const cJSON *a = wf->child, *b = lf->child; a && b; a = a->next, b = b->next)
			if (!cJSON_IsObject(b) || cJSON_GetArraySize(a) != cJSON_GetArraySize(b) ||
			    !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(a, "name"),
					   cJSON_GetObjectItemCaseSensitive(b, "name"), 1) ||
			    !same_resources(cJSON_GetObjectItemCaseSensitive(a, "resources"),
					    cJSON_GetObjectItemCaseSensitive(b, "resources")))
				return false;
	}
	return true;
}
