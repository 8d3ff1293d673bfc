/* gpukmm-statusd: merge of modmgr's, opmgr's, gater's and upgrader's reports into one status. */
#include "gpukmm/kobj.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/policy.h"
#include "merge.h"

/* A string field owned by one component: the report's value when it has one,
 * else the current value (absent stays absent). */
static int own_string(cJSON *want, const cJSON *cur, const char *key, const char *val)
{
	if (val)
		return cJSON_AddStringToObject(want, key, val) ? 0 : -1;
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(cur, key);
	if (cJSON_IsString(c))
		return cJSON_AddStringToObject(want, key, c->valuestring) ? 0 : -1;
	return 0;
}

static bool in_list(char **v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

/* errors: modmgr's, then opmgr's, then gater's, deduplicated, at most GK_SD_MAX_ERRORS. A
 * component without a report (before the grace period ends) contributes the
 * current errors the other component did not report. */
static int merge_errors(cJSON *want, const cJSON *cur, const gk_sd_inputs *in)
{
	char *v[GK_SD_MAX_ERRORS];
	size_t n = 0;
	const Gpukmm__StatusReport *rs[3] = { in->modmgr, in->opmgr, in->gater };
	bool keep_cur = !in->missing_is_empty && (!in->modmgr || !in->gater || !in->opmgr);
	for (int k = 0; k < 3; k++) {
		if (!rs[k])
			continue;
		for (size_t i = 0; i < rs[k]->n_errors && n < GK_SD_MAX_ERRORS; i++) {
			char *e = rs[k]->errors[i];
			if (e && *e && !in_list(v, n, e))
				v[n++] = e;
		}
	}
	if (keep_cur) {
		const cJSON *ce = cJSON_GetObjectItemCaseSensitive(cur, "errors");
		const cJSON *it;
		cJSON_ArrayForEach(it, ce)
		{
			if (n >= GK_SD_MAX_ERRORS)
				break;
			if (!cJSON_IsString(it) || !*it->valuestring || in_list(v, n, it->valuestring))
				continue;
			v[n++] = it->valuestring;
		}
	}
	if (n == 0)
		return 0;
	cJSON *a = cJSON_AddArrayToObject(want, "errors");
	if (!a)
		return -1;
	for (size_t i = 0; i < n; i++) {
		cJSON *s = cJSON_CreateString(v[i]);
		if (!s)
			return -1;
		cJSON_AddItemToArray(a, s);
	}
	return 0;
}

/* "a/b" with both decimal: 1 and the numbers, else 0. */
static int ratio(const char *s, long *a, long *b)
{
	if (!s)
		return 0;
	char *end;
	*a = strtol(s, &end, 10);
	if (end == s || *end != '/')
		return 0;
	const char *p = end + 1;
	*b = strtol(p, &end, 10);
	return end != p && !*end;
}

typedef struct cond {
	const char *type, *status, *reason;
	char message[GK_SD_MAX_MESSAGE];
	char reasonbuf[128];
} cond;

static int add_cond(cJSON *arr, const cJSON *cur, const cond *c, int64_t gen, const char *now)
{
	const char *ltt = now;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(cur, "conditions"))
	{
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "type");
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(it, "status");
		const cJSON *l = cJSON_GetObjectItemCaseSensitive(it, "lastTransitionTime");
		if (cJSON_IsString(t) && strcmp(t->valuestring, c->type) == 0 && cJSON_IsString(s) &&
		    strcmp(s->valuestring, c->status) == 0 && cJSON_IsString(l) && *l->valuestring)
			ltt = l->valuestring; /* no transition: keep the time */
	}
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return -1;
	cJSON_AddItemToArray(arr, o);
	if (!cJSON_AddStringToObject(o, "type", c->type) || !cJSON_AddStringToObject(o, "status", c->status) ||
	    !cJSON_AddStringToObject(o, "reason", c->reason) || !cJSON_AddStringToObject(o, "message", c->message) ||
	    !cJSON_AddStringToObject(o, "lastTransitionTime", ltt ? ltt : ""))
		return -1;
	if (gen > 0 && !cJSON_AddNumberToObject(o, "observedGeneration", (double)gen))
		return -1;
	return 0;
}

static const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(c) ? c->valuestring : NULL;
}

/* "node c: <message>" (+ how many more), for condition messages */
static void node_part(char *buf, size_t cap, const gk_sd_problem *p, uint32_t n)
{
	if (n > 1)
		snprintf(buf, cap, "node %s: %s (and %u more node%s, see status.nodes)", p->node, p->message, n - 1,
			 n > 2 ? "s" : "");
	else
		snprintf(buf, cap, "node %s: %s", p->node, p->message);
}

/* cur's condition of that type, NULL if none (or malformed) */
static const cJSON *cur_cond(const cJSON *cur, const char *type)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(cur, "conditions"))
	{
		const char *t = str_of(it, "type");
		if (t && strcmp(t, type) == 0 && str_of(it, "status") && str_of(it, "reason") && str_of(it, "message"))
			return it;
	}
	return NULL;
}

static int conditions(cJSON *want, const cJSON *cur, const gk_sd_inputs *in, int64_t gen)
{
	cond ml = { .type = "ModuleLoaded" }, dg = { .type = "Degraded" }, rd = { .type = "Ready" },
	     up = { .type = "Upgraded" };
	/* the upgrader's condition (a versioned rollout), or the one it left while silent */
	const Gpukmm__Condition *uc = NULL;
	if (in->upgrader)
		for (size_t i = 0; i < in->upgrader->n_conditions; i++) {
			const Gpukmm__Condition *c = in->upgrader->conditions[i];
			if (c->type && !strcmp(c->type, "Upgraded") && c->status && c->reason)
				uc = c;
		}
	const cJSON *ukept = !in->upgrader && !in->missing_is_empty ? cur_cond(cur, "Upgraded") : NULL;
	if (uc) {
		up.status = !strcmp(uc->status, "True") ? "True" : !strcmp(uc->status, "False") ? "False" : "Unknown";
		up.reason = uc->reason;
		snprintf(up.message, sizeof(up.message), "%s", uc->message ? uc->message : "");
	} else if (ukept) {
		const char *ks = str_of(ukept, "status");
		up.status = !strcmp(ks, "True") ? "True" : !strcmp(ks, "False") ? "False" : "Unknown";
		snprintf(up.reasonbuf, sizeof(up.reasonbuf), "%s", str_of(ukept, "reason"));
		up.reason = up.reasonbuf;
		snprintf(up.message, sizeof(up.message), "%s", str_of(ukept, "message"));
	}
	const char *kmm = str_of(want, "kmmStatus");
	long a, b;
	const Gpukmm__Condition *mc = NULL;
	if (in->modmgr)
		for (size_t i = 0; i < in->modmgr->n_conditions; i++) {
			const Gpukmm__Condition *c = in->modmgr->conditions[i];
			if (c->type && strcmp(c->type, "ModuleLoaded") == 0 && c->status)
				mc = c;
		}
	bool no_module = false;
	const cJSON *kept = !in->modmgr ? cur_cond(cur, "ModuleLoaded") : NULL;
	const gk_sd_nodes *nd = in->nodes;
	if (kept) {
		/* modmgr has not reported since our start: its condition stays */
		const char *ks = str_of(kept, "status");
		ml.status = strcmp(ks, "True") == 0 ? "True" : strcmp(ks, "False") == 0 ? "False" : "Unknown";
		snprintf(ml.reasonbuf, sizeof(ml.reasonbuf), "%s", str_of(kept, "reason"));
		ml.reason = ml.reasonbuf;
		snprintf(ml.message, sizeof(ml.message), "%s", str_of(kept, "message"));
		no_module = !kmm || strcmp(kmm, "N/A") == 0;
	} else if (mc) {
		ml.status = strcmp(mc->status, "True") == 0	 ? "True"
			    : strcmp(mc->status, "False") == 0 ? "False"
							       : "Unknown";
		ml.reason = mc->reason && *mc->reason ? mc->reason : "Reported";
		snprintf(ml.message, sizeof(ml.message), "%s", mc->message ? mc->message : "");
		no_module = kmm && strcmp(kmm, "N/A") == 0;
	} else if (ratio(kmm, &a, &b)) {
		ml.status = a == b && b > 0 ? "True" : "False";
		ml.reason = a == b && b > 0 ? "ModuleAvailable" : "ModuleNotAvailable";
		snprintf(ml.message, sizeof(ml.message), "module loaded on %ld of %ld nodes", a, b);
	} else if (kmm && strcmp(kmm, "N/A") == 0) {
		ml.status = "False";
		ml.reason = "NoKernelModule";
		snprintf(ml.message, sizeof(ml.message), "spec.kernelModule is not set");
		no_module = true;
	} else if (kmm) {
		ml.status = "False";
		ml.reason = kmm; /* Recreating | Removing */
		snprintf(ml.message, sizeof(ml.message), "kmmStatus is %s", kmm);
	} else {
		ml.status = "Unknown";
		ml.reason = "KMMNotDiscovered";
		snprintf(ml.message, sizeof(ml.message), "no KMM status reported");
		no_module = true;
	}
	char np[640] = "";
	bool blocking = nd && nd->wants_oot && nd->blocking > 0;
	if (blocking && !kept) {
		/* KMM's count covers the nodes it targets; a GPU node it cannot
		 * serve (no mapping) or where another module holds on is named */
		node_part(np, sizeof(np), &nd->first_blocking, nd->blocking);
		if (strcmp(ml.status, "True") == 0) {
			ml.status = "False";
			ml.reason = nd->first_blocking.reason;
		}
		size_t l = strlen(ml.message);
		snprintf(ml.message + l, sizeof(ml.message) - l, "%s%s", l ? "; " : "", np);
	}
	const cJSON *errs = cJSON_GetObjectItemCaseSensitive(want, "errors");
	int ne = cJSON_GetArraySize(errs);
	if (ne > 0) {
		dg.status = "True";
		dg.reason = "ReconcileErrors";
		const cJSON *e0 = cJSON_GetArrayItem(errs, 0);
		if (ne == 1)
			snprintf(dg.message, sizeof(dg.message), "%s", e0->valuestring);
		else
			snprintf(dg.message, sizeof(dg.message), "%s (and %d more)", e0->valuestring, ne - 1);
	} else if (uc && uc->reason && (!strcmp(uc->reason, "UpgradeHalted") || !strcmp(uc->reason, "UpgradeFailed"))) {
		dg.status = "True";
		dg.reason = uc->reason;
		snprintf(dg.message, sizeof(dg.message), "%s", uc->message ? uc->message : "");
	} else if (nd && nd->attention > 0) {
		dg.status = "True";
		dg.reason = "NodeProblems";
		node_part(dg.message, sizeof(dg.message), &nd->first_attention, nd->attention);
	} else {
		dg.status = "False";
		dg.reason = "AsExpected";
	}
	/* Ready: no errors, module loaded everywhere (or none wanted), every
	 * deployed DaemonSet fully ready. */
	static const char *const ds[] = { "devicePluginStatus", "draStatus", "xpuManagerStatus" };
	const char *notready = NULL;
	char nrbuf[128] = "";
	for (int i = 0; i < 3; i++) {
		const char *v = str_of(want, ds[i]);
		if (ratio(v, &a, &b) && a != b) {
			notready = ds[i];
			snprintf(nrbuf, sizeof(nrbuf), "%s is %s", ds[i], v);
			break;
		}
	}
	if (ne > 0) {
		rd.status = "False";
		rd.reason = "Degraded";
		snprintf(rd.message, sizeof(rd.message), "%s", dg.message);
	} else if (strcmp(ml.status, "True") != 0 && !no_module) {
		rd.status = "False";
		rd.reason = blocking ? nd->first_blocking.reason : "ModuleNotLoaded";
		snprintf(rd.message, sizeof(rd.message), "%s", ml.message);
	} else if (blocking) {
		rd.status = "False";
		rd.reason = nd->first_blocking.reason;
		node_part(rd.message, sizeof(rd.message), &nd->first_blocking, nd->blocking);
	} else if (notready) {
		rd.status = "False";
		rd.reason = "DaemonSetsNotReady";
		snprintf(rd.message, sizeof(rd.message), "%s", nrbuf);
	} else {
		rd.status = "True";
		rd.reason = "Ready";
		snprintf(rd.message, sizeof(rd.message), "%s", kmm ? kmm : "");
		if (kmm && ratio(kmm, &a, &b))
			snprintf(rd.message, sizeof(rd.message), "module loaded on %ld of %ld nodes", a, b);
		else
			rd.message[0] = 0;
	}
	cJSON *arr = cJSON_AddArrayToObject(want, "conditions");
	if (!arr)
		return -1;
	if (add_cond(arr, cur, &rd, gen, in->now) || add_cond(arr, cur, &ml, gen, in->now) ||
	    add_cond(arr, cur, &dg, gen, in->now) || (up.status && add_cond(arr, cur, &up, gen, in->now)))
		return -1;
	return 0;
}

cJSON *gk_sd_merge(const cJSON *cur, const gk_sd_inputs *in, bool *oom)
{
	*oom = false;
	if (!in->modmgr && !in->gater && !in->opmgr && !in->upgrader && !in->nodes)
		return NULL;
	if (cur && !cJSON_IsObject(cur))
		cur = NULL;
	cJSON *want = cJSON_CreateObject();
	if (!want)
		goto fail;
	/* fields we do not own (e.g. nodes) stay as they are */
	static const char *const owned[] = { "kmmStatus", "devicePluginStatus", "draStatus", "xpuManagerStatus",
					     "errors", "observedGeneration", "conditions" };
	const cJSON *it;
	cJSON_ArrayForEach(it, cur)
	{
		bool mine = false;
		for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
			mine |= it->string && strcmp(it->string, owned[i]) == 0;
		mine |= in->nodes && it->string && strcmp(it->string, "nodes") == 0;
		/* status.upgrade: the upgrader's once it reports (or, after the grace period, nobody's) */
		mine |= (in->upgrader || in->missing_is_empty) && it->string && strcmp(it->string, "upgrade") == 0;
		if (mine || !it->string)
			continue;
		cJSON *d = cJSON_Duplicate(it, 1);
		if (!d)
			goto fail;
		cJSON_AddItemToObject(want, it->string, d);
	}
	const Gpukmm__StatusReport *m = in->modmgr, *g = in->gater, *o = in->opmgr;
	/* the operand counts are opmgr's; a gater that still reports them is heard where opmgr is silent */
#define DS_FIELD(f) (o && o->f ? o->f : g ? g->f : NULL)
	if (own_string(want, cur, "kmmStatus", m ? m->kmm_status : NULL) ||
	    own_string(want, cur, "devicePluginStatus", DS_FIELD(device_plugin_status)) ||
	    own_string(want, cur, "draStatus", DS_FIELD(dra_status)) ||
	    own_string(want, cur, "xpuManagerStatus", DS_FIELD(xpu_manager_status)) || merge_errors(want, cur, in))
		goto fail;
#undef DS_FIELD
	int64_t gen = 0;
	if (m && m->has_generation && m->generation > gen)
		gen = m->generation;
	if (g && g->has_generation && g->generation > gen)
		gen = g->generation;
	if (o && o->has_generation && o->generation > gen)
		gen = o->generation;
	if (in->upgrader && in->upgrader->has_generation && in->upgrader->generation > gen)
		gen = in->upgrader->generation;
	if (gen <= 0) {
		const cJSON *og = cJSON_GetObjectItemCaseSensitive(cur, "observedGeneration");
		if (cJSON_IsNumber(og))
			gen = (int64_t)og->valuedouble;
	}
	if (gen > 0 && !cJSON_AddNumberToObject(want, "observedGeneration", (double)gen))
		goto fail;
	if (in->nodes) {
		cJSON *nj = gk_sd_nodes_json(in->nodes);
		if (!nj)
			goto fail;
		cJSON_AddItemToObject(want, "nodes", nj);
	}
	if (in->upgrader && in->upgrader->upgrade) {
		cJSON *uj = gk_kobj_upgrade_status_to_json(in->upgrader->upgrade);
		if (!uj)
			goto fail;
		cJSON_AddItemToObject(want, "upgrade", uj);
	}
	if (conditions(want, cur, in, gen))
		goto fail;
	return want;
fail:
	*oom = true;
	cJSON_Delete(want);
	return NULL;
}

cJSON *gk_sd_status_patch(const cJSON *cur, const cJSON *want, bool *oom)
{
	/* a recursive diff: a nested key statusd no longer wants (status.nodes.problems
	 * once no node has a problem) must become null, or the merge patch keeps it */
	*oom = false;
	if (cur && !cJSON_IsObject(cur))
		cur = NULL;
	cJSON *st = NULL;
	if (!gk_policy_merge_diff(cur, want, &st)) {
		*oom = true;
		return NULL;
	}
	if (!st)
		return NULL;
	cJSON *p = cJSON_CreateObject();
	if (!p) {
		*oom = true;
		cJSON_Delete(st);
		return NULL;
	}
	cJSON_AddItemToObject(p, "status", st);
	return p;
}
