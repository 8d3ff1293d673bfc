/* kubesim — the disruption controller: PodDisruptionBudget status
 * (pkg/controller/disruption's behaviour).
 *
 * For a PDB: the pods of its namespace its selector matches (no selector: none; {}:
 * all); expectedPods and desiredHealthy from minAvailable (an integer: that many of
 * the matching pods) or from a percentage / maxUnavailable against the scale of the
 * pods' controllers (ReplicaSet, its Deployment, StatefulSet, ReplicationController:
 * spec.replicas; pods without a controller are left out; any other controller fails
 * the sync: disruptionsAllowed 0, condition SyncFailed); currentHealthy the Ready
 * pods not being deleted and not recently evicted (status.disruptedPods, kept for
 * 2 minutes while the pod is not deleted); disruptionsAllowed currentHealthy -
 * desiredHealthy (0 when negative or no pod is expected); condition DisruptionAllowed
 * (SufficientPods / InsufficientPods). A pod, controller or PDB change in a namespace
 * re-checks that namespace's PDBs only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrl.h"
#include "jsonutil.h"
#include "sched.h"

#define KS_PDB_DELETION_TIMEOUT_S 120 /* DeletionTimeout of the disruption controller */

/* [lo, hi) of the bucket's items in namespace ns (items are sorted by ns, name) */
void ks_ns_range(const ks_bucket *b, const char *ns, int *lo, int *hi)
{
	int l = 0, h = b ? b->n : 0;
	while (l < h) {
		int m = (l + h) / 2;
		if (strcmp(b->items[m].ns, ns) < 0)
			l = m + 1;
		else
			h = m;
	}
	*lo = l;
	h = b ? b->n : 0;
	int l2 = l;
	while (l2 < h) {
		int m = (l2 + h) / 2;
		if (strcmp(b->items[m].ns, ns) <= 0)
			l2 = m + 1;
		else
			h = m;
	}
	*hi = l2;
}

/* The scale of the pod's controller: 0 and *ok=1 for a pod without one (ignored),
 * *ok=0 when the controller has no scale kubesim knows. *uid: the controller's. */
static int controller_scale(ks_server *s, const char *ns, const cJSON *pod, int *ok, char *uid, size_t cap)
{
	*ok = 1;
	uid[0] = 0;
	const cJSON *ref, *ctl = NULL;
	cJSON_ArrayForEach(ref, ks_jget(ks_jget(pod, "metadata"), "ownerReferences")) if (cJSON_IsTrue(ks_jget(ref, "controller"))) ctl = ref;
	if (!ctl)
		return 0;
	const char *kind = ks_jstr(ctl, "kind"), *name = ks_jstr(ctl, "name"), *av = ks_jstr(ctl, "apiVersion");
	const char *group = NULL, *resource = NULL;
	if (kind && av && strcmp(av, "apps/v1") == 0 && strcmp(kind, "ReplicaSet") == 0)
		group = "apps", resource = "replicasets";
	else if (kind && av && strcmp(av, "apps/v1") == 0 && strcmp(kind, "StatefulSet") == 0)
		group = "apps", resource = "statefulsets";
	else if (kind && av && strcmp(av, "v1") == 0 && strcmp(kind, "ReplicationController") == 0)
		group = "", resource = "replicationcontrollers";
	ks_item *it = group && name ? ks_store_get(&s->store, group, resource, ns, name) : NULL;
	if (!it) {
		*ok = 0;
		return 0;
	}
	const cJSON *obj = it->obj;
	if (strcmp(resource, "replicasets") == 0) {
		/* a Deployment's ReplicaSet: the Deployment's scale */
		cJSON_ArrayForEach(ref, ks_jget(ks_jget(obj, "metadata"), "ownerReferences")) {
			const char *k = ks_jstr(ref, "kind"), *n = ks_jstr(ref, "name");
			if (cJSON_IsTrue(ks_jget(ref, "controller")) && k && n && strcmp(k, "Deployment") == 0) {
				ks_item *d = ks_store_get(&s->store, "apps", "deployments", ns, n);
				if (d)
					obj = d->obj;
			}
		}
	}
	snprintf(uid, cap, "%s", ks_meta_str(obj, "uid") ? ks_meta_str(obj, "uid") : "");
	const cJSON *r = ks_jget(ks_jget(obj, "spec"), "replicas");
	return cJSON_IsNumber(r) ? (int)r->valuedouble : 1; /* replicas defaults to 1 */
}

/* Sum of the scales of the distinct controllers of the pods; -1: a pod's
 * controller has no scale (err names it). */
static int expected_scale(ks_server *s, const char *ns, const cJSON **pods, int n, char *err, size_t cap)
{
	int total = 0;
	char (*seen)[64] = calloc((size_t)n + 1, 64);
	int nseen = 0;
	if (!seen) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		int ok;
		char uid[64];
		int sc = controller_scale(s, ns, pods[i], &ok, uid, sizeof(uid));
		if (!ok) {
			snprintf(err, cap, "found no controllers for pod \"%s\"", ks_meta_str(pods[i], "name"));
			free(seen);
			return -1;
		}
		if (!uid[0])
			continue; /* no controller: not part of any scale */
		int dup = 0;
		for (int j = 0; j < nseen; j++)
			dup |= strcmp(seen[j], uid) == 0;
		if (dup)
			continue;
		snprintf(seen[nseen++], 64, "%s", uid);
		total += sc;
	}
	free(seen);
	return total;
}

static cJSON *condition(const cJSON *old_status, int ok, const char *reason, const char *msg, double gen)
{
	cJSON *c = cJSON_CreateObject();
	if (!c)
		return NULL;
	const char *st = ok ? "True" : "False";
	char ts[40];
	ks_now_rfc3339(ts, sizeof(ts));
	const cJSON *oc;
	cJSON_ArrayForEach(oc, ks_jget(old_status, "conditions")) {
		const char *t = ks_jstr(oc, "type"), *os = ks_jstr(oc, "status");
		if (t && strcmp(t, "DisruptionAllowed") == 0 && os && strcmp(os, st) == 0 && ks_jstr(oc, "lastTransitionTime"))
			snprintf(ts, sizeof(ts), "%s", ks_jstr(oc, "lastTransitionTime"));
	}
	cJSON_AddStringToObject(c, "type", "DisruptionAllowed");
	cJSON_AddStringToObject(c, "status", st);
	if (gen)
		cJSON_AddNumberToObject(c, "observedGeneration", gen);
	cJSON_AddStringToObject(c, "lastTransitionTime", ts);
	cJSON_AddStringToObject(c, "reason", reason);
	cJSON_AddStringToObject(c, "message", msg);
	return c;
}

static void pdb_sync(ks_server *s, ks_ctrl *c, const char *ns, const char *name)
{
	ks_item *it = ks_store_get(&s->store, "policy", "poddisruptionbudgets", ns, name);
	if (!it)
		return;
	const cJSON *pdb = it->obj, *spec = ks_jget(pdb, "spec"), *ostatus = ks_jget(pdb, "status");
	const cJSON *g = ks_jget(ks_jget(pdb, "metadata"), "generation");
	double gen = cJSON_IsNumber(g) ? g->valuedouble : 0;
	ks_bucket *b = ks_store_bucket(&s->store, "", "pods", 0);
	int lo = 0, hi = 0;
	ks_ns_range(b, ns, &lo, &hi);
	const cJSON **pods = calloc((size_t)(hi - lo) + 1, sizeof(*pods));
	if (!pods)
		return;
	int n = 0;
	const cJSON *sel = ks_jget(spec, "selector");
	for (int i = lo; i < hi; i++)
		if (ks_labelsel_match(sel, ks_jget(ks_jget(b->items[i].obj, "metadata"), "labels")))
			pods[n++] = b->items[i].obj;
	char err[512] = "";
	int expected = 0, desired = 0, failed = 0;
	const cJSON *maxu = ks_jget(spec, "maxUnavailable"), *mina = ks_jget(spec, "minAvailable");
	if (maxu) {
		expected = expected_scale(s, ns, pods, n, err, sizeof(err));
		if (expected < 0)
			failed = 1;
		else {
			desired = expected - ks_intstr_scaled(maxu, expected, 0);
			if (desired < 0)
				desired = 0;
		}
	} else if (cJSON_IsNumber(mina)) {
		desired = (int)mina->valuedouble;
		expected = n;
	} else if (mina) {
		expected = expected_scale(s, ns, pods, n, err, sizeof(err));
		if (expected < 0)
			failed = 1;
		else
			desired = ks_intstr_scaled(mina, expected, 0);
	}
	/* evictions the controller has not seen complete yet */
	int64_t wall = (int64_t)time(NULL), recheck = 0;
	cJSON *disrupted = cJSON_CreateObject();
	int healthy = 0;
	for (int i = 0; i < n; i++) {
		const char *pn = ks_meta_str(pods[i], "name");
		if (ks_jget(ks_jget(pods[i], "metadata"), "deletionTimestamp"))
			continue;
		const cJSON *when = ks_jget(ks_jget(ostatus, "disruptedPods"), pn ? pn : "");
		int64_t t = cJSON_IsString(when) ? ks_rfc3339_parse(when->valuestring) : -1;
		if (t >= 0 && t + KS_PDB_DELETION_TIMEOUT_S > wall) {
			if (disrupted)
				cJSON_AddItemToObject(disrupted, pn, cJSON_Duplicate(when, 1));
			if (!recheck || t + KS_PDB_DELETION_TIMEOUT_S < recheck)
				recheck = t + KS_PDB_DELETION_TIMEOUT_S;
			continue;
		}
		healthy += ks_pod_ready(pods[i], NULL);
	}
	free(pods);
	if (recheck) {
		char key[600];
		snprintf(key, sizeof(key), "%s/%s", ns, name);
		ks_ctrl_timer(c, c->now + (recheck - wall) * 1000 + 1, KS_T_PDB, key);
	}
	int allowed = healthy - desired;
	if (expected <= 0 || allowed <= 0)
		allowed = 0;
	cJSON *st = cJSON_CreateObject();
	if (!st || !disrupted) {
		cJSON_Delete(st);
		cJSON_Delete(disrupted);
		return;
	}
	cJSON *conds = cJSON_CreateArray();
	if (failed) {
		/* failSafe: only the condition and disruptionsAllowed change */
		const cJSON *og = ks_jget(ostatus, "observedGeneration");
		double ogen = cJSON_IsNumber(og) ? og->valuedouble : 0;
		const cJSON *f;
		cJSON_ArrayForEach(f, ostatus) {
			if (strcmp(f->string, "disruptionsAllowed") && strcmp(f->string, "conditions"))
				cJSON_AddItemToObject(st, f->string, cJSON_Duplicate(f, 1));
		}
		cJSON_AddNumberToObject(st, "disruptionsAllowed", 0);
		if (conds)
			cJSON_AddItemToArray(conds, condition(ostatus, 0, "SyncFailed", err, ogen));
		cJSON_Delete(disrupted);
	} else {
		if (gen)
			cJSON_AddNumberToObject(st, "observedGeneration", gen);
		if (cJSON_GetArraySize(disrupted))
			cJSON_AddItemToObject(st, "disruptedPods", disrupted);
		else
			cJSON_Delete(disrupted);
		cJSON_AddNumberToObject(st, "disruptionsAllowed", allowed);
		cJSON_AddNumberToObject(st, "currentHealthy", healthy);
		cJSON_AddNumberToObject(st, "desiredHealthy", desired);
		cJSON_AddNumberToObject(st, "expectedPods", expected);
		if (conds)
			cJSON_AddItemToArray(conds, condition(ostatus, allowed > 0, allowed > 0 ? "SufficientPods" : "InsufficientPods",
							      "", gen));
	}
	if (conds)
		cJSON_AddItemToObject(st, "conditions", conds);
	if (ostatus && ks_json_equal(ostatus, st)) {
		cJSON_Delete(st);
		return;
	}
	cJSON *nobj = cJSON_Duplicate(pdb, 1);
	if (!nobj) {
		cJSON_Delete(st);
		return;
	}
	if (cJSON_HasObjectItem(nobj, "status"))
		cJSON_ReplaceItemInObjectCaseSensitive(nobj, "status", st);
	else
		cJSON_AddItemToObject(nobj, "status", st);
	ks_ctrl_put(s, "policy", "poddisruptionbudgets", ns, name, nobj);
}

void ks_pdb_pass(ks_server *s, ks_ctrl *c)
{
	/* a pod or controller change in a namespace: every PDB there */
	ks_bucket *b = ks_store_bucket(&s->store, "policy", "poddisruptionbudgets", 0);
	for (size_t i = 0; b && i < c->dirty_pdb_ns.nb; i++)
		for (gk_kmap_ent *e = c->dirty_pdb_ns.b[i]; e; e = e->next) {
			int lo, hi;
			ks_ns_range(b, e->key, &lo, &hi);
			for (int j = lo; j < hi; j++) {
				char key[600];
				snprintf(key, sizeof(key), "%s/%s", b->items[j].ns, b->items[j].name);
				ks_ctrl_mark(&c->pdb_pending, key);
			}
		}
	for (size_t i = 0; i < c->dirty_pdbs.nb; i++)
		for (gk_kmap_ent *e = c->dirty_pdbs.b[i]; e; e = e->next)
			ks_ctrl_mark(&c->pdb_pending, e->key);
	if (c->pdb_pending.n == 0)
		return;
	size_t n;
	char **todo = ks_ctrl_take(&c->pdb_pending, &n);
	if (!todo) {
		c->more = 1;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *slash = todo[i] ? strchr(todo[i], '/') : NULL;
		if (slash && c->budget > 0) {
			char ns[256];
			snprintf(ns, sizeof(ns), "%.*s", (int)(slash - todo[i]), todo[i]);
			pdb_sync(s, c, ns, slash + 1);
		} else if (slash) {
			ks_ctrl_mark(&c->pdb_pending, todo[i]);
			c->more = 1;
		}
		free(todo[i]);
	}
	free(todo);
}

void ks_pdb_timer(ks_server *s, ks_ctrl *c, const char *key)
{
	(void)s;
	ks_ctrl_mark(&c->pdb_pending, key);
	c->more = 1;
}
