/* gpukmm-statusd controller mode: node digests and the per-policy node summary. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/ipc.h"
#include "gpukmm/policy.h"
#include "gpukmm/probe.h"
#include "gpukmm/strpool.h"
#include "nodes.h"
#include "status.pb-c.h"

#define REPORT_ANNOTATION "gpukmm.io/node-report"

/* every digest's strings (nodes.h); the loop thread's */
static gk_strpool pool;

/* the pooled copy of at most max bytes of s; false on OOM */
static bool pooled(const char **dst, const char *s, size_t max)
{
	*dst = gk_strpool_get(&pool, s, max);
	return *dst != NULL;
}

size_t gk_sd_node_pooled(void)
{
	return gk_strpool_size(&pool);
}

static void copy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

static const char *annotation(const Gpukmm__Node *n, const char *key)
{
	if (!n->metadata)
		return NULL;
	for (size_t i = 0; i < n->metadata->n_annotations; i++) {
		const Gpukmm__KeyValue *kv = n->metadata->annotations[i];
		if (kv && kv->key && strcmp(kv->key, key) == 0)
			return kv->value;
	}
	return NULL;
}

static bool add_mod(gk_sd_node *d, const Gpukmm__KernelModuleInfo *m)
{
	if (!m || !m->name || !*m->name || d->n_mods >= GK_SD_NODE_MODS)
		return true;
	for (size_t i = 0; i < d->n_mods; i++)
		if (strncmp(d->mods[i].name, m->name, GK_SD_MOD_NAME_MAX) == 0 &&
		    strlen(d->mods[i].name) == strnlen(m->name, GK_SD_MOD_NAME_MAX))
			return true; /* the first entry for a name wins */
	gk_sd_mod *o = &d->mods[d->n_mods];
	if (!pooled(&o->name, m->name, GK_SD_MOD_NAME_MAX))
		return false;
	d->n_mods++;
	o->loaded = m->has_loaded && m->loaded;
	o->source = m->has_source ? (int)m->source : GPUKMM__MODULE_SOURCE__SOURCE_UNKNOWN;
	o->ko_unsigned = m->ko_path && *m->ko_path && !m->ko_signer;
	return true;
}

/* The report: the gpukmm.io/v1alpha1 JSON (lib/probe rjson, summarized ones
 * included), or the format of the release before (proto JSON, snake_case,
 * without apiVersion): nodes not yet upgraded keep that annotation until their
 * node profile hands in a new report, so it is read for one release. */
static Gpukmm__NodeReport *parse_report(const char *json, gk_probe_json_info *info)
{
	Gpukmm__NodeReport *r = NULL;
	gk_err e;
	cJSON *o = cJSON_Parse(json);
	bool legacy = cJSON_IsObject(o) && !cJSON_GetObjectItemCaseSensitive(o, "apiVersion");
	cJSON_Delete(o);
	memset(info, 0, sizeof(*info));
	if (!legacy) {
		if (gk_probe_report_parse(json, strlen(json), &r, info, &e) != GK_OK)
			return NULL;
		return r;
	}
	ProtobufCMessage *msg = NULL;
	if (gk_pb_from_json(&gpukmm__node_report__descriptor, json, &msg, &e) != GK_OK || !msg)
		return NULL;
	r = (Gpukmm__NodeReport *)msg;
	gk_probe_counts(r, &info->pfs, &info->vfs);
	return r;
}

/* false on OOM */
static bool digest_report(gk_sd_node *d, const char *json)
{
	if (!json)
		return true;
	d->report = GK_SD_REPORT_BAD;
	if (strlen(json) > GK_SD_NODE_REPORT_MAX)
		return true;
	gk_probe_json_info info;
	Gpukmm__NodeReport *r = parse_report(json, &info);
	if (!r)
		return true;
	d->report = GK_SD_REPORT_OK;
	bool ok = pooled(&d->report_kernel, r->kernel_version, GK_SD_KERNEL_MAX);
	d->gpus = info.pfs;
	d->vfs = info.vfs;
	if (info.form != GK_PROBE_JSON_FULL) {
		d->summarized = true;
		ok = ok && pooled(&d->summary, info.reason, GK_SD_SUMMARY_MAX);
	}
	d->secure_boot = r->has_secure_boot && r->secure_boot == GPUKMM__TRI_STATE__TRI_YES;
	d->secure = d->secure_boot || (r->lockdown && (strcmp(r->lockdown, "integrity") == 0 ||
						       strcmp(r->lockdown, "confidentiality") == 0));
	Gpukmm__KernelModuleInfo *m = r->module;
	if (m && !m->name && r->module_name) {
		/* the configured module's info without its name: name it */
		m->name = r->module_name;
		ok = ok && add_mod(d, m);
		m->name = NULL;
	} else {
		ok = ok && add_mod(d, m);
	}
	for (size_t i = 0; ok && i < r->n_related; i++)
		ok = add_mod(d, r->related[i]);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return ok;
}

/* every string field "" (static), nothing pooled yet */
static void blank(gk_sd_node *d)
{
	const char *none = gk_strpool_get(&pool, NULL, 0); /* the pool's static "" */
	memset(d, 0, sizeof(*d));
	d->name = d->kernel = d->report_kernel = d->summary = none;
	for (size_t i = 0; i < GK_SD_NODE_MODS; i++)
		d->mods[i].name = none;
}

int gk_sd_node_digest(const Gpukmm__Node *n, gk_sd_node *out, gk_err *err)
{
	blank(out);
	size_t count = 0, bytes = 0;
	if (n->metadata) {
		for (size_t i = 0; i < n->metadata->n_labels; i++) {
			const Gpukmm__KeyValue *kv = n->metadata->labels[i];
			if (!kv || !kv->key)
				continue;
			size_t l = strlen(kv->key) + strlen(kv->value ? kv->value : "") + 2;
			if (count >= GK_SD_NODE_LABELS_MAX || bytes + l > GK_SD_NODE_LABEL_BYTES) {
				out->labels_truncated = true;
				break;
			}
			bytes += l;
			count++;
		}
	}
	bool ok = pooled(&out->name, n->metadata ? n->metadata->name : NULL, GK_SD_NODE_NAME_MAX - 1) &&
		  pooled(&out->kernel, n->kernel_version, GK_SD_KERNEL_MAX);
	if (ok && count) {
		ok = (out->labels = calloc(2 * count, sizeof(*out->labels))) != NULL;
		for (size_t i = 0, k = 0; ok && k < count; i++) {
			const Gpukmm__KeyValue *kv = n->metadata->labels[i];
			if (!kv || !kv->key)
				continue;
			/* n_labels counts the pairs held, so a clear after OOM puts only those */
			ok = pooled(&out->labels[2 * k], kv->key, SIZE_MAX) &&
			     pooled(&out->labels[2 * k + 1], kv->value, SIZE_MAX);
			if (!ok && out->labels[2 * k] && !out->labels[2 * k + 1])
				out->labels[2 * k + 1] = "";
			out->n_labels = (uint32_t)++k;
		}
	}
	ok = ok && digest_report(out, annotation(n, REPORT_ANNOTATION));
	if (!ok) {
		gk_sd_node_clear(out);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	}
	return GK_OK;
}

void gk_sd_node_clear(gk_sd_node *d)
{
	gk_strpool_put(&pool, d->name);
	gk_strpool_put(&pool, d->kernel);
	gk_strpool_put(&pool, d->report_kernel);
	gk_strpool_put(&pool, d->summary);
	for (size_t i = 0; i < d->n_mods; i++)
		gk_strpool_put(&pool, d->mods[i].name);
	for (size_t i = 0; d->labels && i < 2 * (size_t)d->n_labels; i++)
		gk_strpool_put(&pool, d->labels[i]);
	free(d->labels);
	blank(d);
}

/* pooled strings: equal iff the same pointer ("" is one static string too) */
bool gk_sd_node_equal(const gk_sd_node *a, const gk_sd_node *b)
{
	if (a->n_labels != b->n_labels ||
	    (a->n_labels && memcmp(a->labels, b->labels, 2 * (size_t)a->n_labels * sizeof(*a->labels)) != 0))
		return false;
	/* every other field is plain data or a pooled pointer, the padding
	 * zero-filled by memset in the digest */
	gk_sd_node x, y;
	memcpy(&x, a, sizeof(x));
	memcpy(&y, b, sizeof(y));
	x.labels = y.labels = NULL;
	return memcmp(&x, &y, sizeof(x)) == 0;
}

const char *gk_sd_node_label(const gk_sd_node *d, const char *key)
{
	for (size_t i = 0; i < d->n_labels; i++)
		if (strcmp(d->labels[2 * i], key) == 0)
			return d->labels[2 * i + 1];
	return NULL;
}

/* ---- summary ------------------------------------------------------------------ */

static bool selected(const gk_sd_node *d, const gk_policy_selector *sel)
{
	for (size_t i = 0; i < sel->n; i++) {
		const char *v = gk_sd_node_label(d, sel->kv[i]->key);
		if (!v || strcmp(v, sel->kv[i]->value ? sel->kv[i]->value : "") != 0)
			return false;
	}
	return true;
}

static const gk_sd_mod *find_mod(const gk_sd_node *d, const char *name)
{
	for (size_t i = 0; i < d->n_mods; i++)
		if (strcmp(d->mods[i].name, name) == 0)
			return &d->mods[i];
	return NULL;
}

enum { P_LIST = 0, P_BLOCKING = 1, P_ATTENTION = 2 };

static void problem(gk_sd_nodes *s, const gk_sd_node *d, const char *reason, int flags, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void problem(gk_sd_nodes *s, const gk_sd_node *d, const char *reason, int flags, const char *fmt, ...)
{
	gk_sd_problem p;
	copy(p.node, sizeof(p.node), d->name);
	p.reason = reason;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p.message, sizeof(p.message), fmt, ap);
	va_end(ap);
	s->problem_nodes++;
	size_t r = 0;
	while (r < s->n_reasons && strcmp(s->by_reason[r].reason, reason))
		r++;
	if (r == s->n_reasons && r < GK_SD_MAX_REASONS)
		s->by_reason[s->n_reasons++].reason = reason;
	if (r < s->n_reasons)
		s->by_reason[r].nodes++;
	if (s->n_problems < GK_SD_MAX_PROBLEMS)
		s->problems[s->n_problems++] = p;
	if ((flags & P_BLOCKING) && s->blocking++ == 0)
		s->first_blocking = p;
	if ((flags & P_ATTENTION) && s->attention++ == 0)
		s->first_attention = p;
}

static void one_node(gk_sd_nodes *s, const gk_sd_node *d, const Gpukmm__KernelModuleSpec *km, const char *mod)
{
	s->selected++;
	const char *kernel = d->kernel[0] ? d->kernel : d->report_kernel;
	/* KMM matches the Node's kernel against the mappings */
	int mapping = km && kernel[0] ? gk_policy_kernel_mapping(km, kernel) : -1;
	bool no_mapping = km && kernel[0] && mapping < 0;
	bool signs = mapping >= 0 && gk_policy_mapping_signed(km, (size_t)mapping);
	if (d->report != GK_SD_REPORT_OK) {
		s->unknown++;
		if (no_mapping) /* the node's GPUs are unknown, KMM's view is not */
			problem(s, d, "NoKernelMapping", P_LIST | P_ATTENTION, "no kernelMapping matches kernel %s",
				kernel);
		else if (d->report == GK_SD_REPORT_NONE)
			problem(s, d, "NoReport", P_LIST, "no node report");
		else
			problem(s, d, "ReportUnreadable", P_LIST, "node report unreadable");
		return;
	}
	if (d->summarized) {
		/* not a problem: the reason the report lists less is in status.nodes.summarized */
		if (s->n_summarized < GK_SD_MAX_PROBLEMS) {
			gk_sd_problem *p = &s->summarized[s->n_summarized++];
			copy(p->node, sizeof(p->node), d->name);
			p->reason = "ReportSummarized";
			copy(p->message, sizeof(p->message), d->summary);
		}
		s->summarized_nodes++;
	}
	if (d->gpus == 0)
		return; /* not a GPU node */
	const gk_sd_mod *m = find_mod(d, mod);
	if (!m) {
		s->unknown++;
		problem(s, d, "ModuleNotReported", P_LIST, "node report does not cover module %s", mod);
		return;
	}
	bool builtin = m->source == GPUKMM__MODULE_SOURCE__SOURCE_BUILTIN; /* always "loaded" */
	bool oot = m->loaded && m->source == GPUKMM__MODULE_SOURCE__SOURCE_OOT;
	bool in_tree = builtin || (m->loaded && m->source == GPUKMM__MODULE_SOURCE__SOURCE_IN_TREE);
	if (m->loaded && !oot && !in_tree) {
		s->unknown++;
		problem(s, d, "ModuleSourceUnknown", P_LIST, "%s loaded, source unknown", mod);
		return;
	}
	s->gpu_nodes++;
	if (oot)
		s->oot_loaded++;
	else if (in_tree)
		s->in_tree_loaded++;
	else
		s->not_loaded++;
	if (!km) {
		/* in-tree driver wanted */
		if (oot)
			problem(s, d, "OutOfTreeLoaded", P_LIST | P_ATTENTION,
				"out-of-tree %s loaded although the policy has no kernelModule", mod);
		else if (!in_tree)
			problem(s, d, "NotLoaded", P_LIST | P_ATTENTION, "%s not loaded", mod);
		return;
	}
	if (no_mapping)
		problem(s, d, "NoKernelMapping", P_LIST | P_ATTENTION | (oot ? 0 : P_BLOCKING),
			"no kernelMapping matches kernel %s", kernel);
	else if (oot && d->vfs)
		/* loaded as wanted; the next version cannot replace it (KMM unloads first) */
		problem(s, d, "VFsActive", P_LIST | P_ATTENTION, "VFs active: %s cannot be unloaded for an update", mod);
	else if (oot)
		return;
	else if (builtin)
		problem(s, d, "BuiltIn", P_LIST | P_ATTENTION | P_BLOCKING,
			"%s is built into the kernel: the out-of-tree module cannot replace it", mod);
	else if (in_tree && d->vfs)
		problem(s, d, "VFsActive", P_LIST | P_ATTENTION | P_BLOCKING,
			"VFs active: %s cannot be unloaded for an update", mod);
	else if (in_tree)
		problem(s, d, "InTreeLoaded", P_LIST | P_ATTENTION | P_BLOCKING,
			"in-tree %s still loaded although the policy wants OoT", mod);
	else if (d->secure && m->ko_unsigned && !signs)
		problem(s, d, "SecureBootUnsigned", P_LIST | P_ATTENTION | P_BLOCKING,
			"%s on and module unsigned: set spec.kernelModule.sign so that KMM signs it",
			d->secure_boot ? "Secure Boot" : "kernel lockdown");
	else if (d->secure && signs)
		problem(s, d, "NotLoaded", P_LIST | P_BLOCKING,
			"%s not loaded (signed per spec.kernelModule.sign: the node must trust its certificate)", mod);
	else
		problem(s, d, "NotLoaded", P_LIST | P_BLOCKING, "%s not loaded", mod);
}

int gk_sd_nodes_summarize(const Gpukmm__ClusterPolicy *cp, const gk_sd_node *const *nodes, size_t n,
			  gk_sd_nodes *out, gk_err *err)
{
	memset(out, 0, sizeof(*out));
	const Gpukmm__ClusterPolicySpec *spec = cp ? cp->spec : NULL;
	const Gpukmm__KernelModuleSpec *km = spec ? spec->kernel_module : NULL;
	const char *mod = km && km->module_name && *km->module_name ? km->module_name : GK_POLICY_DEFAULT_MODULE;
	out->wants_oot = km != NULL;
	Gpukmm__ClusterPolicySpec empty = GPUKMM__CLUSTER_POLICY_SPEC__INIT;
	gk_policy_selector sel = { 0 };
	if (gk_policy_node_selector(spec ? spec : &empty, NULL, &sel) != GK_OK)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "statusd: out of memory");
	for (size_t i = 0; i < n; i++)
		if (nodes[i] && selected(nodes[i], &sel))
			one_node(out, nodes[i], km, mod);
	gk_policy_selector_free(&sel);
	return GK_OK;
}

/* key: [{node, reason (with_reason), message}...]; nothing when n is 0. false on OOM. */
static bool node_list(cJSON *o, const char *key, const gk_sd_problem *l, size_t n, bool with_reason)
{
	cJSON *a = n ? cJSON_AddArrayToObject(o, key) : NULL;
	if (n && !a)
		return false;
	for (size_t i = 0; i < n; i++) {
		cJSON *p = cJSON_CreateObject();
		if (!p || !cJSON_AddItemToArray(a, p)) {
			cJSON_Delete(p);
			return false;
		}
		if (!cJSON_AddStringToObject(p, "node", l[i].node) ||
		    (with_reason && !cJSON_AddStringToObject(p, "reason", l[i].reason)) ||
		    !cJSON_AddStringToObject(p, "message", l[i].message))
			return false;
	}
	return true;
}

cJSON *gk_sd_nodes_json(const gk_sd_nodes *s)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	if (!cJSON_AddNumberToObject(o, "gpuNodes", s->gpu_nodes) ||
	    !cJSON_AddNumberToObject(o, "ootLoaded", s->oot_loaded) ||
	    !cJSON_AddNumberToObject(o, "inTreeLoaded", s->in_tree_loaded) ||
	    !cJSON_AddNumberToObject(o, "notLoaded", s->not_loaded) ||
	    !cJSON_AddNumberToObject(o, "unknown", s->unknown) ||
	    !cJSON_AddNumberToObject(o, "problemNodes", s->problem_nodes) ||
	    (s->summarized_nodes && !cJSON_AddNumberToObject(o, "summarizedNodes", s->summarized_nodes)) ||
	    !node_list(o, "summarized", s->summarized, s->n_summarized, false) ||
	    !node_list(o, "problems", s->problems, s->n_problems, true)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}
