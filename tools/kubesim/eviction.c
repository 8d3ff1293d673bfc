/* kubesim — the pods/eviction subresource (policy/v1 Eviction), as the API server's
 * EvictionREST does it: a pod that is Pending, terminated or already being deleted is
 * deleted without looking at budgets; otherwise the one PodDisruptionBudget whose
 * selector matches the pod decides (more than one: 500). A budget whose status is
 * behind its spec (observedGeneration < generation) or allows no disruption answers
 * 429 TooManyRequests "Cannot evict pod as it would violate the pod's disruption
 * budget." with a DisruptionBudget cause (kubectl drain retries on it); an unready pod
 * goes without using the budget while the budget is healthy (or with
 * unhealthyPodEvictionPolicy AlwaysAllow). Otherwise disruptionsAllowed is decremented,
 * the pod recorded in status.disruptedPods, and the pod deleted with the eviction's
 * deleteOptions (gracefully: see ks_api_delete_grace_locked). 201 with a Success
 * Status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "ctrl.h"
#include "jsonutil.h"
#include "sched.h"

#define KS_MAX_DISRUPTED_PODS 2000 /* MaxDisruptedPodSize */

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = ks_jget(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static int can_ignore_pdb(const cJSON *pod)
{
	const char *ph = ks_jstr(ks_jget(pod, "status"), "phase");
	return ks_jget(ks_jget(pod, "metadata"), "deletionTimestamp") || !ph || /* no phase yet: Pending */
	       strcmp(ph, "Succeeded") == 0 || strcmp(ph, "Failed") == 0 || strcmp(ph, "Pending") == 0;
}

static void too_many(ks_resp *out, const char *cause_fmt, const char *a, int b, int c, int retry)
{
	cJSON *causes = cJSON_CreateArray(), *cause = cJSON_CreateObject();
	char msg[512];
	snprintf(msg, sizeof(msg), cause_fmt, a, b, c);
	if (causes && cause) {
		cJSON_AddStringToObject(cause, "reason", "DisruptionBudget");
		cJSON_AddStringToObject(cause, "message", msg);
		cJSON_AddItemToArray(causes, cause);
	} else {
		cJSON_Delete(cause);
	}
	ks_resp_status(out, 429, "TooManyRequests", NULL, NULL, NULL, causes,
		       "Cannot evict pod as it would violate the pod's disruption budget.");
	out->retry_after = retry;
	if (retry && out->body) { /* details.retryAfterSeconds, like NewTooManyRequests */
		cJSON *j = cJSON_Parse(out->body);
		cJSON *d = j ? cJSON_GetObjectItemCaseSensitive(j, "details") : NULL;
		if (d) {
			cJSON_AddNumberToObject(d, "retryAfterSeconds", retry);
			char *b2 = cJSON_PrintUnformatted(j);
			if (b2) {
				free(out->body);
				out->body = b2;
			}
		}
		cJSON_Delete(j);
	}
}

/* The pod's budget, checked and used (mu held): 0 to go on deleting, -1 with out set. */
static int use_budget(ks_server *s, const char *ns, const cJSON *pod, int dry_run, ks_resp *out)
{
	ks_bucket *b = ks_store_bucket(&s->store, "policy", "poddisruptionbudgets", 0);
	int lo = 0, hi = 0, n = 0;
	ks_ns_range(b, ns, &lo, &hi);
	ks_item *pdb = NULL;
	const cJSON *labels = ks_jget(ks_jget(pod, "metadata"), "labels");
	for (int i = lo; i < hi; i++)
		if (ks_labelsel_match(ks_jget(ks_jget(b->items[i].obj, "spec"), "selector"), labels)) {
			pdb = &b->items[i];
			n++;
		}
	if (n > 1) {
		ks_resp_status(out, 500, "", NULL, NULL, NULL, NULL,
			       "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
			       "support.");
		return -1;
	}
	if (!pdb)
		return 0;
	const cJSON *st = ks_jget(pdb->obj, "status"), *spec = ks_jget(pdb->obj, "spec");
	int healthy = (int)num(st, "currentHealthy"), desired = (int)num(st, "desiredHealthy");
	if (!ks_pod_ready(pod, NULL)) {
		/* an unready pod does not count towards healthy: no decrement */
		const char *pol = ks_jstr(spec, "unhealthyPodEvictionPolicy");
		if ((healthy >= desired && desired > 0) || (pol && strcmp(pol, "AlwaysAllow") == 0))
			return 0;
	}
	const char *pname = pdb->name;
	if (num(st, "observedGeneration") < num(ks_jget(pdb->obj, "metadata"), "generation")) {
		too_many(out, "The disruption budget %s is still being processed by the server.", pname, 0, 0, 10);
		return -1;
	}
	int allowed = (int)num(st, "disruptionsAllowed");
	if (allowed < 0 || cJSON_GetArraySize(ks_jget(st, "disruptedPods")) > KS_MAX_DISRUPTED_PODS) {
		ks_resp_status(out, 403, "Forbidden", "poddisruptionbudget", pname, "policy", NULL,
			       "poddisruptionbudget.policy \"%s\" is forbidden: %s", pname,
			       allowed < 0 ? "pdb disruptions allowed is negative"
					   : "DisruptedPods map too big - too many evictions not confirmed by PDB controller");
		return -1;
	}
	if (allowed == 0) {
		too_many(out, "The disruption budget %s needs %d healthy pods and has %d currently", pname, desired, healthy, 0);
		return -1;
	}
	if (dry_run)
		return 0;
	cJSON *np = cJSON_Duplicate(pdb->obj, 1);
	cJSON *nst = np ? cJSON_GetObjectItemCaseSensitive(np, "status") : NULL;
	if (!nst) {
		cJSON_Delete(np);
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return -1;
	}
	cJSON_ReplaceItemInObjectCaseSensitive(nst, "disruptionsAllowed", cJSON_CreateNumber(allowed - 1));
	if (allowed - 1 == 0) {
		cJSON *c;
		cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(nst, "conditions")) {
			const char *t = ks_jstr(c, "type");
			if (!t || strcmp(t, "DisruptionAllowed") != 0 || strcmp(ks_jstr(c, "status") ? ks_jstr(c, "status") : "", "False") == 0)
				continue;
			char ts[40];
			ks_now_rfc3339(ts, sizeof(ts));
			cJSON_ReplaceItemInObjectCaseSensitive(c, "status", cJSON_CreateString("False"));
			cJSON_ReplaceItemInObjectCaseSensitive(c, "reason", cJSON_CreateString("InsufficientPods"));
			if (cJSON_HasObjectItem(c, "lastTransitionTime"))
				cJSON_ReplaceItemInObjectCaseSensitive(c, "lastTransitionTime", cJSON_CreateString(ts));
		}
	}
	cJSON *dp = cJSON_GetObjectItemCaseSensitive(nst, "disruptedPods");
	if (!cJSON_IsObject(dp)) {
		cJSON_DeleteItemFromObjectCaseSensitive(nst, "disruptedPods");
		dp = cJSON_AddObjectToObject(nst, "disruptedPods");
	}
	char ts[40];
	ks_now_rfc3339(ts, sizeof(ts));
	const char *podname = ks_meta_str(pod, "name");
	if (dp && podname) {
		cJSON_DeleteItemFromObjectCaseSensitive(dp, podname);
		cJSON_AddStringToObject(dp, podname, ts);
	}
	ks_store_put(&s->store, "policy", "poddisruptionbudgets", ns, pdb->name, np);
	s->dirty = 1;
	return 0;
}

void ks_evict(ks_server *s, const ks_rtype *pods, const char *ns, const char *name, const cJSON *body,
	      const ks_opts *o, ks_resp *out)
{
	const char *kind = ks_jstr(body, "kind"), *bname = ks_meta_str(body, "name");
	if (kind && strcmp(kind, "Eviction") != 0) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL, "not a Eviction object: %s", kind);
		return;
	}
	if (!bname || strcmp(bname, name) != 0) {
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "name in URL does not match name in Eviction object");
		return;
	}
	const cJSON *dopts = ks_jget(body, "deleteOptions");
	const cJSON *gps = ks_jget(dopts, "gracePeriodSeconds");
	long grace = cJSON_IsNumber(gps) ? (long)gps->valuedouble : -1;
	int dry_run = o->dry_run;
	const cJSON *dr;
	cJSON_ArrayForEach(dr, ks_jget(dopts, "dryRun")) dry_run |= cJSON_IsString(dr) && strcmp(dr->valuestring, "All") == 0;
	const cJSON *pre = ks_jget(dopts, "preconditions");
	pthread_mutex_lock(&s->mu);
	ks_item *it = ks_store_get(&s->store, "", "pods", ns, name);
	if (!it) {
		pthread_mutex_unlock(&s->mu);
		ks_resp_status(out, 404, "NotFound", "pods", name, "", NULL, "pods \"%s\" not found", name);
		return;
	}
	const char *puid = ks_jstr(pre, "uid"), *prv = ks_jstr(pre, "resourceVersion");
	const char *uid = ks_meta_str(it->obj, "uid"), *rv = ks_meta_str(it->obj, "resourceVersion");
	if ((puid && (!uid || strcmp(puid, uid) != 0)) || (prv && (!rv || strcmp(prv, rv) != 0))) {
		pthread_mutex_unlock(&s->mu);
		ks_resp_status(out, 409, "Conflict", "pods", name, "", NULL,
			       "Operation cannot be fulfilled on pods \"%s\": Precondition failed: %s in precondition: %s, "
			       "%s in object meta: %s",
			       name, puid ? "UID" : "ResourceVersion", puid ? puid : prv, puid ? "UID" : "ResourceVersion",
			       puid ? (uid ? uid : "") : (rv ? rv : ""));
		return;
	}
	if (!can_ignore_pdb(it->obj) && use_budget(s, ns, it->obj, dry_run, out)) {
		pthread_mutex_unlock(&s->mu);
		return;
	}
	if (!dry_run) {
		const cJSON *pp = ks_jget(dopts, "propagationPolicy");
		ks_api_delete_grace_locked(s, pods, ns, name, cJSON_IsString(pp) ? pp->valuestring : NULL, grace);
		ks_gc_run(s);
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	ks_resp_status(out, 201, "", NULL, NULL, NULL, NULL, "%s", "");
	/* a bare Status: {"status":"Success","code":201} */
	cJSON *j = out->body ? cJSON_Parse(out->body) : NULL;
	if (j) {
		cJSON_DeleteItemFromObjectCaseSensitive(j, "message");
		ks_resp_json(out, 201, j);
	}
}
