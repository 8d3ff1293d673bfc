/* gpukmm-watcher runtime (see watcher.h). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "gpukmm/kobj.h"
#include "gpukmm/log.h"
#include "watcher.h"

const char *const wr_topic_names[WT_N] = {"clusterpolicy", "module", "node",
					  "resourceclaim", "daemonset", "pod", "operand",
					  "resourceslice"};

/* ---- the kinds --------------------------------------------------------------
 * Pods: the API cannot select pods by the resources they request, so we narrow
 * by phase (terminated pods hold no devices) and keep only pods that request a
 * gpu.intel.com/... resource; every other pod is converted and dropped at once
 * (nothing cached, no event). */
typedef struct src_def {
	int topic;
	const char *group, *version, *resource;
	bool in_operator_ns;
	const char *label_selector, *field_selector;
	int gate;                /* WG_DRAV, WG_KSLICE: version = the newest served resource.k8s.io one */
} src_def;

/* Operands (gpukmm-opmgr): the objects gpukmm deploys carry this label; every
 * ConfigMap of the operator namespace is kept (a configMapOverride is the user's). */
#define OPERAND_SEL "app.kubernetes.io/managed-by=gpukmm"
/* Kueue objects by upstream's label, which ours carry too: the queues the Go
 * operator left are seen (adopted or removed), not only ours */
#define KUEUE_SEL "app=gpu.intel.com-kueue-queue"

/* ResourceClaims: resource.k8s.io is served as v1alpha3 (Kubernetes 1.31),
 * v1beta1 (1.32), v1beta1+v1beta2 (1.33), v1 (1.34); the allocation results'
 * `driver` has the same place in all four. One source per version: the newest
 * served one runs; on a switch the old one stops only once the new one has
 * listed (no window where the claims are unknown). */
static const src_def srcs[WR_NSRC] = {
	{WT_CP, "intel.com", "v1alpha1", "clusterpolicies", false, NULL, NULL, WG_CP},
	{WT_MODULE, "kmm.sigs.x-k8s.io", "v1beta1", "modules", true, NULL, NULL, WG_KMM},
	{WT_NODE, "", "v1", "nodes", false, NULL, NULL, WG_NONE},
	{WT_RC, "resource.k8s.io", "v1", "resourceclaims", false, NULL, NULL, WG_DRA + 0},
	{WT_RC, "resource.k8s.io", "v1beta2", "resourceclaims", false, NULL, NULL, WG_DRA + 1},
	{WT_RC, "resource.k8s.io", "v1beta1", "resourceclaims", false, NULL, NULL, WG_DRA + 2},
	{WT_RC, "resource.k8s.io", "v1alpha3", "resourceclaims", false, NULL, NULL, WG_DRA + 3},
	{WT_DS, "apps", "v1", "daemonsets", true, NULL, NULL, WG_NONE},
	{WT_DS, "apps", "v1", "daemonsets", false, "gpukmm.io/gate", NULL, WG_NONE},
	{WT_POD, "", "v1", "pods", false, NULL, "status.phase!=Succeeded,status.phase!=Failed",
	 WG_NONE},
	{WT_OP, "apps", "v1", "daemonsets", true, OPERAND_SEL, NULL, WG_NONE},
	{WT_OP, "", "v1", "configmaps", true, NULL, NULL, WG_NONE},
	{WT_OP, "", "v1", "serviceaccounts", true, OPERAND_SEL, NULL, WG_NONE},
	{WT_OP, "", "v1", "services", true, OPERAND_SEL, NULL, WG_NONE},
	{WT_OP, "rbac.authorization.k8s.io", "v1", "clusterroles", false, OPERAND_SEL, NULL, WG_NONE},
	{WT_OP, "rbac.authorization.k8s.io", "v1", "clusterrolebindings", false, OPERAND_SEL, NULL, WG_NONE},
	{WT_OP, "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", false, OPERAND_SEL, NULL, WG_VAP},
	{WT_OP, "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", false, OPERAND_SEL, NULL,
	 WG_VAP},
	{WT_OP, "resource.k8s.io", NULL, "deviceclasses", false, OPERAND_SEL, NULL, WG_DRAV},
	{WT_OP, "resource.k8s.io", NULL, "resourceclaimtemplates", true, OPERAND_SEL, NULL, WG_DRAV},
	{WT_OP, "monitoring.coreos.com", "v1", "servicemonitors", true, OPERAND_SEL, NULL, WG_PROM},
	{WT_OP, "nfd.k8s-sigs.io", "v1alpha1", "nodefeaturerules", false, OPERAND_SEL, NULL, WG_NFD},
	{WT_OP, "security.openshift.io", "v1", "securitycontextconstraints", false, OPERAND_SEL, NULL,
	 WG_OPENSHIFT},
	{WT_OP, "kueue.x-k8s.io", "v1beta2", "resourceflavors", false, KUEUE_SEL, NULL, WG_KUEUE},
	{WT_OP, "kueue.x-k8s.io", "v1beta2", "clusterqueues", false, KUEUE_SEL, NULL, WG_KUEUE},
	{WT_OP, "kueue.x-k8s.io", "v1beta2", "localqueues", false, KUEUE_SEL, NULL, WG_KUEUE},
	{WT_RS, "resource.k8s.io", NULL, "resourceslices", false, NULL, "spec.driver=gpu.intel.com", WG_KSLICE},
};

/* the source index of the ResourceSlices */
#define SRC_RS (WR_NSRC - 1)

static int convert(int topic, const cJSON *obj, ProtobufCMessage **out, gk_err *err)
{
	void *m = NULL;
	int rc;
	switch (topic) {
	case WT_CP: rc = gk_kobj_cluster_policy_from_json(obj, (Gpukmm__ClusterPolicy **)&m, err); break;
	case WT_MODULE: rc = gk_kobj_module_from_json(obj, (Gpukmm__Module **)&m, err); break;
	case WT_NODE: rc = gk_kobj_node_from_json(obj, (Gpukmm__Node **)&m, err); break;
	case WT_RC: rc = gk_kobj_resource_claim_from_json(obj, (Gpukmm__ResourceClaim **)&m, err); break;
	case WT_DS: rc = gk_kobj_daemon_set_from_json(obj, (Gpukmm__DaemonSet **)&m, err); break;
	case WT_POD: rc = gk_kobj_pod_from_json(obj, (Gpukmm__Pod **)&m, err); break;
	case WT_OP: rc = gk_kobj_object_from_json(obj, (Gpukmm__Object **)&m, err); break;
	case WT_RS: rc = gk_kobj_resource_slice_from_json(obj, (Gpukmm__ResourceSlice **)&m, err); break;
	default: rc = gk_err_set(err, GK_INTERNAL, "unknown topic %d", topic);
	}
	*out = m;
	return rc;
}

static void event_set(Gpukmm__Event *ev, int topic, ProtobufCMessage *m)
{
	switch (topic) {
	case WT_CP: ev->object_case = GPUKMM__EVENT__OBJECT_CLUSTER_POLICY; ev->cluster_policy = (void *)m; break;
	case WT_MODULE: ev->object_case = GPUKMM__EVENT__OBJECT_MODULE; ev->module = (void *)m; break;
	case WT_NODE: ev->object_case = GPUKMM__EVENT__OBJECT_NODE; ev->node = (void *)m; break;
	case WT_RC: ev->object_case = GPUKMM__EVENT__OBJECT_RESOURCE_CLAIM; ev->resource_claim = (void *)m; break;
	case WT_DS: ev->object_case = GPUKMM__EVENT__OBJECT_DAEMON_SET; ev->daemon_set = (void *)m; break;
	case WT_POD: ev->object_case = GPUKMM__EVENT__OBJECT_POD; ev->pod = (void *)m; break;
	case WT_OP: ev->object_case = GPUKMM__EVENT__OBJECT_OPERAND; ev->operand = (void *)m; break;
	case WT_RS: ev->object_case = GPUKMM__EVENT__OBJECT_RESOURCE_SLICE; ev->resource_slice = (void *)m; break;
	}
}

/* An object event goes on the bus once the first lists have all completed, not
 * before: no consumer can use one earlier. A consumer builds its view from a
 * snapshot, which it takes only from a synced watcher (lib/wsub), and the events
 * up to that snapshot's numbers are dropped; at a cold start of 5,000 nodes and
 * claims, every consumer unpacked 10,000 events during the lists only to drop
 * them (with the refused snapshots below, the consumers spent twice the
 * watcher's own CPU while it listed). Not published, they take no number: the
 * topic's numbers start at the snapshot's, and the cache, which the snapshot
 * is, has them all. */
static void publish(wr *w, int topic, Gpukmm__EventType type, ProtobufCMessage *m)
{
	w->c_events++;
	if (!w->pub || !w->ready_sent)
		return;
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.has_type = 1;
	ev.type = type;
	event_set(&ev, topic, m);
	gk_ipc_pub_send(w->pub, wr_topic_names[topic], &ev.base);
	w->c_published++;
}

/* ---- what the watcher can vouch for (the safety rule, ARCHITECTURE.md §4) ---- */

/* The API each gate is (group, version, resource); WG_DRAV, WG_KUEUE and WG_KSLICE are not
 * one (they follow others: gates_derive). */
static const struct { const char *g, *v, *r; } gate_api[WG_N] = {
	[WG_CP] = {"intel.com", "v1alpha1", "clusterpolicies"},
	[WG_KMM] = {"kmm.sigs.x-k8s.io", "v1beta1", "modules"},
	[WG_OPENSHIFT] = {"security.openshift.io", "v1", "securitycontextconstraints"},
	[WG_NFD] = {"nfd.k8s-sigs.io", "v1alpha1", "nodefeaturerules"},
	[WG_PROM] = {"monitoring.coreos.com", "v1", "servicemonitors"},
	[WG_VAP] = {"admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"},
	[WG_KRF] = {"kueue.x-k8s.io", "v1beta2", "resourceflavors"},
	[WG_KCQ] = {"kueue.x-k8s.io", "v1beta2", "clusterqueues"},
	[WG_KLQ] = {"kueue.x-k8s.io", "v1beta2", "localqueues"},
	[WG_DRA + 0] = {"resource.k8s.io", "v1", "resourceclaims"},
	[WG_DRA + 1] = {"resource.k8s.io", "v1beta2", "resourceclaims"},
	[WG_DRA + 2] = {"resource.k8s.io", "v1beta1", "resourceclaims"},
	[WG_DRA + 3] = {"resource.k8s.io", "v1alpha3", "resourceclaims"},
};

static const char *gate_gv(int g, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s", gate_api[g].g ? gate_api[g].g : "resource.k8s.io",
		 gate_api[g].v ? gate_api[g].v : "(newest)");
	return buf;
}

static int64_t span_ms(const wr *w)
{
	return w->o.discovery_confirm_ms > 0 ? w->o.discovery_confirm_ms : WD_SPAN_MS;
}

/* Can the watcher vouch for what gate g starts? 1: served, confirmed (its
 * sources must run and be current); 0: confirmed not served (nothing of it
 * exists), or WG_KSLICE off (no policy wants Kueue in dra mode: nobody reads
 * the slices, Discovery.resource_slices is false); -1: not confirmed (why in buf). */
static int gate_state(const wr *w, int g, char *buf, size_t cap)
{
	char gv[64];
	int64_t now = gk_mono_ms();
	buf[0] = 0;
	switch (g) {
	case WG_NONE:
		return 1;
	case WG_DRAV: {
		/* follows the newest served resource.k8s.io version */
		const wd_gate *dg = &w->gates[WG_DRA];
		if (wd_dra_none(dg))
			return 0;
		int pick = wd_dra_pick(dg);
		for (int v = 0; v < WD_DRA_N && !buf[0] && pick < 0; v++)
			wd_why(&dg[v], gate_gv(WG_DRA + v, gv, sizeof gv), now, span_ms(w), buf, cap);
		if (pick >= 0)
			wd_why(&dg[pick], gate_gv(WG_DRA + pick, gv, sizeof gv), now, span_ms(w), buf, cap);
		return buf[0] || pick < 0 ? -1 : 1;
	}
	case WG_KUEUE:
		/* the three CRDs: a Kueue kind being debounced is not an absence */
		for (int k = WG_KRF; k <= WG_KLQ && !buf[0]; k++)
			wd_why(&w->gates[k], gate_gv(k, gv, sizeof gv), now, span_ms(w), buf, cap);
		if (buf[0])
			return -1;
		return w->gates[WG_KUEUE].state == WD_SERVED ? 1 : 0;
	case WG_KSLICE: {
		if (!w->kueue_dra_wanted)
			return 0;
		int k = gate_state(w, WG_KUEUE, buf, cap);
		return k <= 0 ? k : gate_state(w, WG_DRAV, buf, cap);
	}
	default:
		wd_why(&w->gates[g], gate_gv(g, gv, sizeof gv), now, span_ms(w), buf, cap);
		if (buf[0])
			return -1;
		return w->gates[g].state == WD_ABSENT ? 0 : 1;
	}
}

/* Is the whole kind `topic` confirmed (its API's discovery, its lists and
 * watches)? If not, why (buf). Unreadable objects are reported apart. */
static bool topic_confirmed(const wr *w, int topic, char *buf, size_t cap)
{
	char gv[64];
	int64_t now = gk_mono_ms();
	buf[0] = 0;
	if (!w->disc_known) {
		snprintf(buf, cap, "API discovery has not answered yet");
		return false;
	}
	if (topic == WT_RC) {
		const wd_gate *dg = &w->gates[WG_DRA];
		if (wd_dra_none(dg))
			return true; /* DRA is confirmed not served: no claim can exist */
		for (int i = 0; i < WR_NSRC; i++) {
			const wr_src *s = &w->src[i];
			int g = srcs[i].gate;
			if (srcs[i].topic == WT_RC && s->kw && s->current && w->gates[g].state == WD_SERVED &&
			    wd_confirmed(&w->gates[g]))
				return true;
		}
		int pick = wd_dra_pick(dg);
		if (pick < 0) {
			for (int v = 0; v < WD_DRA_N && !buf[0]; v++)
				wd_why(&dg[v], gate_gv(WG_DRA + v, gv, sizeof gv), now, span_ms(w), buf, cap);
			return false;
		}
		wd_why(&dg[pick], gate_gv(WG_DRA + pick, gv, sizeof gv), now, span_ms(w), buf, cap);
		for (int i = 0; i < WR_NSRC && !buf[0]; i++)
			if (srcs[i].gate == WG_DRA + pick)
				snprintf(buf, cap, "%s", w->src[i].kw ? w->src[i].why : "the claims watch is not running");
		if (!buf[0])
			snprintf(buf, cap, "resourceclaims (%s) not current", wd_dra_versions[pick]);
		return false;
	}
	for (int i = 0; i < WR_NSRC; i++) {
		const wr_src *s = &w->src[i];
		if (srcs[i].topic != topic)
			continue;
		int st = gate_state(w, srcs[i].gate, buf, cap);
		if (st < 0)
			return false;
		if (st == 0)
			continue; /* confirmed not served: nothing of this kind exists (or nobody reads it) */
		if (!s->kw) {
			snprintf(buf, cap, "%s are not watched", srcs[i].resource);
			return false;
		}
		if (!s->current) {
			snprintf(buf, cap, "%s", s->why[0] ? s->why : "not current");
			return false;
		}
	}
	return true;
}

/* the three Kueue watches have completed their initial list */
static bool kueue_listed(const wr *w)
{
	for (int i = 0; i < WR_NSRC; i++)
		if (srcs[i].gate == WG_KUEUE && !(w->src[i].kw && w->src[i].synced))
			return false;
	return true;
}

void wr_state_fill(wr *w, Gpukmm__Discovery *d)
{
	gpukmm__discovery__init(d);
	d->has_kmm = d->has_dra = d->has_cluster_policy = 1;
	d->has_openshift = d->has_nfd = d->has_prometheus = 1;
	d->kmm = w->gates[WG_KMM].state == WD_SERVED;
	d->cluster_policy = w->gates[WG_CP].state == WD_SERVED;
	d->openshift = w->gates[WG_OPENSHIFT].state == WD_SERVED;
	d->nfd = w->gates[WG_NFD].state == WD_SERVED;
	d->prometheus = w->gates[WG_PROM].state == WD_SERVED;
	d->dra = w->dra_version[0] != 0;
	d->dra_version = strdup(w->dra_version);
	d->has_nfd_namespaced = d->has_kueue = d->has_kueue_listed = d->has_resource_slices = 1;
	d->nfd_namespaced = d->nfd && w->nfd_namespaced;
	d->kueue = w->gates[WG_KUEUE].state == WD_SERVED;
	d->kueue_listed = d->kueue && kueue_listed(w);
	d->resource_slices = w->src[SRC_RS].kw && w->src[SRC_RS].synced;
	d->unconfirmed = calloc(WT_N, sizeof *d->unconfirmed);
	for (int t = 0; d->unconfirmed && t < WT_N; t++) {
		char why[512];
		bool ok = topic_confirmed(w, t, why, sizeof why);
		const wr_bad *b = &w->bad[t];
		if (ok && !b->n && !b->overflow)
			continue;
		Gpukmm__Unconfirmed *u = calloc(1, sizeof *u);
		if (!u)
			break;
		gpukmm__unconfirmed__init(u);
		u->topic = strdup(wr_topic_names[t]);
		if (b->overflow && ok)
			snprintf(why, sizeof why, "more than %d %s objects could not be read", WR_BAD_MAX,
				 wr_topic_names[t]);
		u->reason = strdup(why);
		size_t n = b->n < 32 ? b->n : 32;
		u->unreadable = calloc(n + 1, sizeof(char *));
		u->unreadable_errors = calloc(n + 1, sizeof(char *));
		for (size_t i = 0; u->unreadable && u->unreadable_errors && i < n; i++) {
			u->unreadable[i] = strdup(b->keys[i]);
			u->unreadable_errors[i] = strdup(b->errs[i]);
			u->n_unreadable = u->n_unreadable_errors = i + 1;
		}
		u->has_unreadable_count = 1;
		u->unreadable_count = (uint32_t)b->n;
		d->unconfirmed[d->n_unconfirmed++] = u;
	}
}

void wr_state_free(Gpukmm__Discovery *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_unconfirmed; i++) {
		Gpukmm__Unconfirmed *u = d->unconfirmed[i];
		for (size_t k = 0; k < u->n_unreadable; k++) {
			free(u->unreadable[k]);
			free(u->unreadable_errors[k]);
		}
		free(u->unreadable);
		free(u->unreadable_errors);
		free(u->topic);
		free(u->reason);
		free(u);
	}
	free(d->unconfirmed);
	free(d->dra_version);
	d->unconfirmed = NULL;
	d->n_unconfirmed = 0;
	d->dra_version = NULL;
}

/* Publish the state on "discovery" when it changed; log the topics that
 * became unconfirmed or confirmed. */
static void publish_state(wr *w)
{
	Gpukmm__Discovery d;
	wr_state_fill(w, &d);
	size_t len = protobuf_c_message_get_packed_size(&d.base);
	uint8_t *buf = malloc(len ? len : 1);
	if (buf)
		protobuf_c_message_pack(&d.base, buf);
	bool same = buf && w->state_sent && len == w->state_sent_len && !memcmp(buf, w->state_sent, len);
	if (!same) {
		uint32_t now_bad = 0;
		for (size_t i = 0; i < d.n_unconfirmed; i++)
			for (int t = 0; t < WT_N; t++)
				if (!strcmp(d.unconfirmed[i]->topic, wr_topic_names[t])) {
					now_bad |= 1u << t;
					if (!(w->unconfirmed_bits & (1u << t)) && w->ready_sent)
						GK_WARN("%s state unconfirmed: %s%s%u unreadable", wr_topic_names[t],
							d.unconfirmed[i]->reason, d.unconfirmed[i]->reason[0] ? "; " : "",
							d.unconfirmed[i]->unreadable_count);
				}
		for (int t = 0; t < WT_N; t++)
			if ((w->unconfirmed_bits & (1u << t)) && !(now_bad & (1u << t)) && w->ready_sent)
				GK_INFO("%s state confirmed again", wr_topic_names[t]);
		w->unconfirmed_bits = now_bad;
		w->c_unconfirmed = (uint64_t)__builtin_popcount(now_bad);
		Gpukmm__Event ev = GPUKMM__EVENT__INIT;
		ev.has_type = 1;
		ev.type = GPUKMM__EVENT_TYPE__MODIFIED;
		ev.object_case = GPUKMM__EVENT__OBJECT_DISCOVERY;
		ev.discovery = &d;
		if (w->pub)
			gk_ipc_pub_send(w->pub, "discovery", &ev.base);
		free(w->state_sent);
		w->state_sent = buf;
		w->state_sent_len = buf ? len : 0;
		buf = NULL;
	}
	free(buf);
	wr_state_free(&d);
}

/* ---- unreadable objects ---------------------------------------------------------- */

static bool bad_del(wr *w, int topic, const char *key)
{
	wr_bad *b = &w->bad[topic];
	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->keys[i], key)) {
			free(b->keys[i]);
			free(b->errs[i]);
			b->keys[i] = b->keys[b->n - 1];
			b->errs[i] = b->errs[b->n - 1];
			b->n--;
			return true;
		}
	return false;
}

static void bad_put(wr *w, int topic, const char *key, const char *msg)
{
	wr_bad *b = &w->bad[topic];
	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->keys[i], key)) {
			char *m = strdup(msg);
			if (m) {
				free(b->errs[i]);
				b->errs[i] = m;
			}
			return;
		}
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 8;
		char **nk = nc <= WR_BAD_MAX ? realloc(b->keys, nc * sizeof *nk) : NULL;
		if (nk)
			b->keys = nk;
		char **ne = nk ? realloc(b->errs, nc * sizeof *ne) : NULL;
		if (ne)
			b->errs = ne;
		if (!nk || !ne) {
			b->overflow = true; /* fail closed: the whole topic is unconfirmed */
			return;
		}
		b->cap = nc;
	}
	char *k = strdup(key), *m = strdup(msg);
	if (!k || !m) {
		free(k);
		free(m);
		b->overflow = true;
		return;
	}
	b->keys[b->n] = k;
	b->errs[b->n++] = m;
}

static void bad_clear(wr_bad *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->keys[i]);
		free(b->errs[i]);
	}
	free(b->keys);
	free(b->errs);
	memset(b, 0, sizeof *b);
}

static void publish_leadership(wr *w)
{
	Gpukmm__Leadership l = GPUKMM__LEADERSHIP__INIT;
	l.has_leader = 1;
	l.leader = w->ls.leader;
	l.identity = w->identity;
	l.holder = w->holder;
	l.has_term = 1;
	l.term = w->term;
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.has_type = 1;
	ev.type = GPUKMM__EVENT_TYPE__MODIFIED;
	ev.object_case = GPUKMM__EVENT__OBJECT_LEADERSHIP;
	ev.leadership = &l;
	if (w->pub)
		gk_ipc_pub_send(w->pub, "leadership", &ev.base);
}

/* ---- reflector callbacks ------------------------------------------------------ */

static void kueue_dra_update(wr *w);

static void drop_key(wr *w, int topic, const char *key, uint32_t bit)
{
	ProtobufCMessage *gone;
	if (bad_del(w, topic, key))
		publish_state(w); /* deleted: confirmed gone, no longer unreadable */
	if (ws_drop(&w->store[topic], key, bit, &gone) == 1) {
		w->c_size[topic] = w->store[topic].n;
		if (!gone) {
			w->c_errors++;
			GK_ERROR("%s %s: out of memory unpacking the deleted object", wr_topic_names[topic], key);
			return;
		}
		publish(w, topic, GPUKMM__EVENT_TYPE__DELETED, gone);
		protobuf_c_message_free_unpacked(gone, NULL);
	}
}

static void on_event(void *user, enum gk_kube_event type, const char *key0, const cJSON *obj)
{
	wr_src *s = user;
	wr *w = s->w;
	const src_def *d = &srcs[s->idx];
	uint32_t bit = 1u << s->idx;
	/* operands of several kinds share one store: the resource is part of the key */
	char kbuf[700];
	const char *key = key0;
	if (d->topic == WT_OP) {
		snprintf(kbuf, sizeof kbuf, "%s/%s", d->resource, key0);
		key = kbuf;
	}
	if (type == GK_KUBE_DELETED || !obj) {
		drop_key(w, d->topic, key, bit);
		if (d->topic == WT_CP)
			kueue_dra_update(w);
		return;
	}
	ProtobufCMessage *m;
	gk_err err = {0};
	if (convert(d->topic, obj, &m, &err)) {
		/* it exists but cannot be read: not an absence. Its last readable
		 * version (if any) stays cached; consumers are told it is unreadable */
		w->c_convert_errors++;
		GK_WARN("%s %s: cannot convert (%s); marked unreadable", wr_topic_names[d->topic], key, err.msg);
		bad_put(w, d->topic, key, err.msg);
		publish_state(w);
		return;
	}
	if (bad_del(w, d->topic, key)) {
		GK_INFO("%s %s: readable again", wr_topic_names[d->topic], key);
		publish_state(w);
	}
	if (d->topic == WT_POD && ((Gpukmm__Pod *)m)->n_gpu_resources == 0) {
		protobuf_c_message_free_unpacked(m, NULL);
		drop_key(w, d->topic, key, bit); /* not a GPU pod (any more) */
		return;
	}
	int r = ws_put(&w->store[d->topic], key, m, bit);
	if (r < 0) {
		w->c_errors++;
		GK_ERROR("%s %s: out of memory caching the object", wr_topic_names[d->topic], key);
		protobuf_c_message_free_unpacked(m, NULL);
		return;
	}
	w->c_size[d->topic] = w->store[d->topic].n;
	publish(w, d->topic, r == 1 ? GPUKMM__EVENT_TYPE__ADDED : GPUKMM__EVENT_TYPE__MODIFIED, m);
	protobuf_c_message_free_unpacked(m, NULL);
	if (d->topic == WT_CP)
		kueue_dra_update(w);
}

static void check_ready(wr *w)
{
	if (w->ready_sent || !wr_synced(w))
		return;
	w->ready_sent = true;
	GK_INFO("initial lists synced: %zu nodes, %zu daemonsets, %zu policies, %zu modules, "
		"%zu claims, %zu gpu pods",
		w->store[WT_NODE].n, w->store[WT_DS].n, w->store[WT_CP].n, w->store[WT_MODULE].n,
		w->store[WT_RC].n, w->store[WT_POD].n);
	if (w->on_ready)
		w->on_ready(w->on_ready_user);
}

static void apply_gates(wr *w);

static void on_synced(void *user)
{
	wr_src *s = user;
	s->synced = s->current = true;
	s->why[0] = 0;
	check_ready(s->w);
	if (srcs[s->idx].topic == WT_RC)
		apply_gates(s->w); /* a newer claims version listed: the older one may stop */
	publish_state(s->w);
	/* a list's JSON (pages of up to 500 objects) is parsed and freed at once:
	 * hand those pages back, only the typed cache stays */
	malloc_trim(0);
}

static void on_error(void *user, int code, const char *msg)
{
	wr_src *s = user;
	if (code != GK_OUT_OF_RANGE)
		s->w->c_errors++;
	s->current = false;
	snprintf(s->why, sizeof s->why, "%s (%s): %s", srcs[s->idx].resource, s->w->src_version[s->idx], msg);
	publish_state(s->w);
}

static void on_resumed(void *user)
{
	wr_src *s = user;
	s->current = true;
	s->why[0] = 0;
	publish_state(s->w);
}

bool wr_synced(const wr *w)
{
	for (int i = 0; i < WR_NSRC; i++)
		if (w->src[i].kw && !w->src[i].synced)
			return false;
	return w->disc_known;
}

/* ---- watches on and off ---------------------------------------------------------- */

static void src_start(wr *w, int i)
{
	wr_src *s = &w->src[i];
	const src_def *d = &srcs[i];
	if (s->kw)
		return;
	const char *ver = d->gate == WG_DRAV || d->gate == WG_KSLICE ? w->dra_version : d->version;
	if (!ver || !*ver)
		return;
	snprintf(w->src_version[i], sizeof w->src_version[i], "%s", ver);
	gk_kube_ref r = {d->group, ver, d->resource, d->in_operator_ns ? w->o.ns : NULL,
			 NULL, NULL};
	gk_kube_watch_opts o = {.label_selector = d->label_selector,
				.page_limit = 250,
				.field_selector = d->field_selector,
				.min_timeout_s = w->o.watch_min_timeout_s,
				.max_timeout_s = w->o.watch_max_timeout_s};
	gk_kube_watch_cbs cbs = {.on_event = on_event, .on_synced = on_synced, .on_error = on_error,
				 .on_resumed = on_resumed};
	gk_err err = {0};
	s->synced = s->current = false;
	snprintf(s->why, sizeof s->why, "the first list of %s (%s) has not completed", d->resource, ver);
	if (gk_kube_watch_start(&s->kw, w->mux, &r, &o, &cbs, s, &err)) {
		w->c_errors++;
		GK_ERROR("cannot start the %s watch: %s", d->resource, err.msg);
		return;
	}
	GK_INFO("watching %s%s%s%s%s%s%s", d->resource, d->group[0] ? "." : "", d->group[0] ? ver : "",
		d->in_operator_ns ? " in " : "", d->in_operator_ns ? w->o.ns : "",
		d->label_selector ? " labelled " : "", d->label_selector ? d->label_selector : "");
}

typedef struct drop_ctx {
	wr *w;
	int topic;
	uint32_t bit;
	char **keys;
	size_t n;
} drop_ctx;

static void collect_keys(void *user, ws_ent *e)
{
	drop_ctx *c = user;
	if (c->keys && (e->sources & c->bit))
		c->keys[c->n++] = strdup(e->key);
}

static void src_stop(wr *w, int i)
{
	wr_src *s = &w->src[i];
	if (!s->kw)
		return;
	gk_kube_watch_stop(s->kw);
	s->kw = NULL;
	s->synced = false;
	/* the kind is gone from the API: so are its objects */
	int topic = srcs[i].topic;
	drop_ctx c = {w, topic, 1u << i, calloc(w->store[topic].n + 1, sizeof(char *)), 0};
	ws_each(&w->store[topic], collect_keys, &c);
	for (size_t k = 0; k < c.n; k++) {
		if (c.keys[k])
			drop_key(w, topic, c.keys[k], c.bit);
		free(c.keys[k]);
	}
	free(c.keys);
	bool other = false;
	for (int j = 0; j < WR_NSRC; j++)
		other = other || (j != i && srcs[j].topic == topic && w->src[j].kw);
	if (!other)
		bad_clear(&w->bad[topic]); /* the kind is gone: so are its unreadable objects */
	GK_INFO("stopped watching %s.%s", srcs[i].resource, w->src_version[i]);
	publish_state(w);
}

/* Start what is served, stop what is confirmed gone, leave what is unknown
 * or being debounced as it is (a discovery blip stops nothing). Claims: the
 * newest served version runs; another one stops once it has listed. */
static void apply_gates(wr *w)
{
	if (!w->disc_known)
		return;
	int pick = wd_dra_pick(&w->gates[WG_DRA]);
	bool none = wd_dra_none(&w->gates[WG_DRA]);
	bool pick_synced = false;
	for (int i = 0; i < WR_NSRC; i++)
		if (pick >= 0 && srcs[i].gate == WG_DRA + pick && w->src[i].kw && w->src[i].synced)
			pick_synced = true;
	for (int i = 0; i < WR_NSRC; i++) {
		int g = srcs[i].gate;
		if (g == WG_DRAV) {
			/* an operand source at an older version than the newest served: restart */
			if (w->src[i].kw && (none || strcmp(w->src_version[i], w->dra_version)))
				src_stop(w, i);
			if (pick >= 0)
				src_start(w, i);
		} else if (g == WG_KSLICE) {
			/* the slices follow the newest served version too */
			if (w->src[i].kw && (w->gates[g].state == WD_ABSENT || strcmp(w->src_version[i], w->dra_version)))
				src_stop(w, i);
			if (w->gates[g].state == WD_SERVED)
				src_start(w, i);
		} else if (g >= WG_DRA && g < WG_DRAV) {
			if (pick >= 0 && g == WG_DRA + pick)
				src_start(w, i);
			else if (w->src[i].kw && (none || pick_synced))
				src_stop(w, i);
		} else if (g == WG_NONE || w->gates[g].state == WD_SERVED) {
			src_start(w, i);
		} else if (w->gates[g].state == WD_ABSENT) {
			src_stop(w, i);
		}
	}
	check_ready(w);
}

/* WG_KUEUE and WG_KSLICE from what they follow (WG_KSLICE also from
 * kueue_dra_wanted); true when one changed. Kueue: served once its three CRDs
 * are, absent once one is confirmed absent, else unknown (nothing starts or
 * stops). */
static bool gates_derive(wr *w)
{
	enum wd_state k = WD_SERVED, sl;
	for (int g = WG_KRF; g <= WG_KLQ; g++)
		if (w->gates[g].state == WD_ABSENT)
			k = WD_ABSENT;
		else if (w->gates[g].state != WD_SERVED && k == WD_SERVED)
			k = WD_UNKNOWN;
	if (!w->kueue_dra_wanted || k == WD_ABSENT || wd_dra_none(&w->gates[WG_DRA]))
		sl = WD_ABSENT;
	else if (k == WD_SERVED && w->dra_version[0])
		sl = WD_SERVED;
	else
		sl = WD_UNKNOWN;
	bool changed = k != w->gates[WG_KUEUE].state || sl != w->gates[WG_KSLICE].state;
	w->gates[WG_KUEUE].state = k;
	w->gates[WG_KSLICE].state = sl;
	return changed;
}

/* ---- the ResourceSlice watch: only while some policy needs it ---------------------- */

typedef struct kw_ctx {
	const ws_store *s;
	bool any;
} kw_ctx;

static void kueue_dra_one(void *user, ws_ent *e)
{
	kw_ctx *c = user;
	if (c->any)
		return;
	Gpukmm__ClusterPolicy *cp = (Gpukmm__ClusterPolicy *)ws_obj(c->s, e);
	const Gpukmm__ClusterPolicySpec *sp = cp ? cp->spec : NULL;
	c->any = sp && sp->has_enable_kueue && sp->enable_kueue && sp->resource_registration &&
		 !strcmp(sp->resource_registration, "dra");
	if (cp)
		protobuf_c_message_free_unpacked(&cp->base, NULL);
}

/* A ClusterPolicy changed: does some policy want Kueue in dra mode now? Decided
 * from the loop, not in the watch callback: a watch is not started or stopped
 * while curl delivers another one's data. */
static void kueue_dra_cb(gk_loop *l, gk_timer_id id, void *user)
{
	wr *w = user;
	w->kslice_timer = 0;
	kw_ctx c = {&w->store[WT_CP], false};
	ws_each(&w->store[WT_CP], kueue_dra_one, &c);
	if (c.any == w->kueue_dra_wanted)
		return;
	w->kueue_dra_wanted = c.any;
	if (gates_derive(w)) {
		apply_gates(w);
		publish_state(w); /* resource_slices: off, or on once listed */
	}
}

static void kueue_dra_update(wr *w)
{
	if (!w->loop)
		kueue_dra_cb(NULL, 0, w); /* no loop (tests of the logic): now */
	else if (!w->kslice_timer)
		w->kslice_timer = gk_loop_timer(w->loop, 0, kueue_dra_cb, w);
}

/* ---- discovery (async: the loop never waits for the API) ------------------------ */

/* Every answer of the round is in: feed the debounce, then start/stop watches. */
static void disc_apply(wr *w)
{
	int64_t now = gk_mono_ms();
	char gv[64];
	for (int i = 0; i < WR_NDISC; i++) {
		int g = i + 1, r = w->disc_res[i];
		enum wd_state before = w->gates[g].state;
		int streak = w->gates[g].absent_reads;
		if (wd_note(&w->gates[g], r, now, span_ms(w))) {
			if (w->gates[g].state == WD_SERVED)
				GK_INFO("API %s is served%s", gate_gv(g, gv, sizeof gv), before ? " now" : "");
			else if (w->gates[g].state == WD_ABSENT)
				GK_INFO("API %s is not served (absent in %d reads over %lld ms)%s", gate_gv(g, gv, sizeof gv),
					w->gates[g].absent_reads, (long long)(now - w->gates[g].first_absent_ms),
					before == WD_SERVED ? ": stopping its watch" : "");
		} else if (r == 0 && before == WD_SERVED && streak == 0) {
			GK_WARN("API %s answered absent; kept as served until that is confirmed",
				gate_gv(g, gv, sizeof gv));
		}
	}
	if (!w->disc_known && w->gates[WG_CP].answered && w->gates[WG_KMM].answered)
		w->disc_known = true;
	int pick = wd_dra_pick(&w->gates[WG_DRA]);
	const char *drav = pick >= 0 ? wd_dra_versions[pick] : "";
	if (strcmp(drav, w->dra_version)) {
		GK_INFO("resource.k8s.io: %s%s", *drav ? "read in " : "not served", drav);
		snprintf(w->dra_version, sizeof w->dra_version, "%s", drav);
	}
	/* the NFD CRD's scope: where the NodeFeatureRule goes (upstream reads spec.scope) */
	if (w->disc_res[WG_NFD - 1] == 1) {
		int ns = gk_kube_disc_namespaced(w->kc, gate_api[WG_NFD].g, gate_api[WG_NFD].v, gate_api[WG_NFD].r);
		if (ns >= 0 && (ns == 1) != w->nfd_namespaced) {
			GK_INFO("nodefeaturerules are %s", ns ? "namespaced" : "cluster-scoped");
			w->nfd_namespaced = ns == 1;
		}
	}
	gates_derive(w);
	apply_gates(w);
	publish_state(w);
}

static void disc_done(void *user, int r, const gk_err *err)
{
	struct wr_disc_slot *slot = user;
	wr *w = slot->w;
	int i = slot->i;
	char gv[64];
	w->disc_calls[i] = NULL;
	w->disc_res[i] = r;
	if (r < 0) {
		w->c_errors++;
		GK_WARN("discovery of %s: %s (changes nothing)", gate_gv(i + 1, gv, sizeof gv),
			err ? err->msg : "failed");
	}
	if (--w->disc_pending == 0)
		disc_apply(w);
}

/* Start one round of discovery (if none is in flight). */
static void disc_start(wr *w)
{
	if (w->disc_pending)
		return; /* the API is slow: the round in flight answers first */
	for (int i = 0; i < WR_NDISC; i++) {
		gk_err err = {0};
		int g = i + 1;
		w->disc_res[i] = -GK_UNAVAILABLE;
		if (gk_kube_discover_async(w->mux, gate_api[g].g, gate_api[g].v, gate_api[g].r, disc_done,
					   &w->disc_slot[i], &w->disc_calls[i], &err)) {
			w->c_errors++;
			GK_WARN("discovery of %s/%s: %s", gate_api[g].g, gate_api[g].v, err.msg);
			continue;
		}
		w->disc_pending++;
	}
	if (!w->disc_pending)
		disc_apply(w);
}

/* While an API's state is being debounced (or never answered), discovery is
 * re-read more often: a quarter of the span, so the WD_READS reads fit in it. */
static int64_t disc_period(const wr *w)
{
	for (int g = 1; g < WG_DRAV; g++) {
		const wd_gate *x = &w->gates[g];
		if (!x->answered || (x->absent_reads > 0 && x->state != WD_ABSENT)) {
			int64_t fast = span_ms(w) / 4 > 250 ? span_ms(w) / 4 : 250;
			return fast < w->o.discovery_ms ? fast : w->o.discovery_ms;
		}
	}
	return w->o.discovery_ms;
}

static void disc_timer_cb(gk_loop *l, gk_timer_id id, void *user)
{
	wr *w = user;
	disc_start(w);
	w->disc_timer = gk_loop_timer(w->loop, disc_period(w), disc_timer_cb, w);
}

static void tick_cb(gk_loop *l, gk_timer_id id, void *user)
{
	wr *w = user;
	if (w->pub)
		gk_ipc_pub_tick(w->pub);
	w->tick_timer = gk_loop_timer(w->loop, 1000, tick_cb, w);
}

/* ---- leader election -------------------------------------------------------------- */

static void now_micro(char *buf, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	char b[32];
	strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, cap, "%s.%06ldZ", b, ts.tv_nsec / 1000);
}

static gk_kube_ref lease_ref(const wr *w)
{
	return (gk_kube_ref){"coordination.k8s.io", "v1", "leases", w->o.ns, w->o.lease_name, NULL};
}

/* Each lease request may take at most the renew deadline: a leader whose
 * renewal hangs has stepped down by then anyway (lease_deadline). */
static gk_kube_call_opts lease_call_opts(const wr *w)
{
	return (gk_kube_call_opts){.timeout_ms = (int)w->o.lease.renew_deadline_ms,
				   .unthrottled = true};
}

/* A new term each time we become the leader: the wall clock in µs, above every
 * term before it (a report stamped with an earlier term is never taken for
 * one of this term, also across a restart of the watcher). */
static void new_term(wr *w)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t t = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	w->term = w->last_term = t > w->last_term ? t : w->last_term + 1;
}

static void lease_changed(wr *w, bool changed)
{
	if (!changed)
		return;
	if (w->ls.leader && !w->term)
		new_term(w);
	else if (!w->ls.leader)
		w->term = 0;
	w->c_leader = w->ls.leader;
	GK_INFO("leadership: %s (holder \"%s\")", w->ls.leader ? "leader" : "follower", w->holder);
	publish_leadership(w);
}

static void lease_write_done(void *user, int rc, cJSON *out, const gk_kube_status *st,
			     const gk_err *err)
{
	wr *w = user;
	cJSON_Delete(out);
	w->lease_call = NULL;
	bool ok = rc == 0;
	if (rc && rc != GK_ABORTED && rc != GK_ALREADY_EXISTS)
		GK_WARN("lease %s/%s: %s", w->o.ns, w->o.lease_name, err ? err->msg : "failed");
	bool was = w->ls.leader;
	/* a renewal counts from when it was sent, not from when it was answered */
	bool changed = wl_result(&w->ls, w->lease_act, ok, &w->o.lease,
				 ok ? w->lease_write_ms : gk_mono_ms()) ||
		       was != w->ls.leader;
	const char *h = ok ? w->identity : w->lease_cur.holder;
	if (strcmp(h, w->holder)) {
		snprintf(w->holder, sizeof w->holder, "%s", h);
		changed = true;
	}
	lease_changed(w, changed);
}

static void lease_get_done(void *user, int rc, cJSON *j, const gk_kube_status *st,
			   const gk_err *err)
{
	wr *w = user;
	w->lease_call = NULL;
	int64_t now = gk_mono_ms();
	if (rc && rc != GK_NOT_FOUND) {
		GK_WARN("lease %s/%s: %s", w->o.ns, w->o.lease_name, err ? err->msg : "failed");
		cJSON_Delete(j);
		lease_changed(w, wl_check_deadline(&w->ls, &w->o.lease, now));
		return;
	}
	wl_lease_parse(&w->lease_cur, rc ? NULL : j);
	cJSON_Delete(j);
	bool was = w->ls.leader;
	enum wl_action a = wl_decide(&w->ls, &w->lease_cur, w->identity, &w->o.lease, now);
	if (a == WL_WAIT) {
		bool changed = wl_result(&w->ls, a, false, &w->o.lease, now) || was != w->ls.leader;
		if (strcmp(w->lease_cur.holder, w->holder)) {
			snprintf(w->holder, sizeof w->holder, "%s", w->lease_cur.holder);
			changed = true;
		}
		lease_changed(w, changed);
		return;
	}
	char ts[64];
	now_micro(ts, sizeof ts);
	cJSON *body = wl_lease_body(w->o.ns, w->o.lease_name, &w->lease_cur, a, w->identity,
				    &w->o.lease, ts);
	gk_kube_ref r = lease_ref(w);
	gk_kube_call_opts o = lease_call_opts(w);
	gk_err e = {0};
	w->lease_act = a;
	w->lease_write_ms = now;
	int wrc = !body ? gk_err_set(&e, GK_RESOURCE_EXHAUSTED, "out of memory")
		  : a == WL_CREATE
			  ? gk_kube_call_create(w->mux, &r, body, &o, lease_write_done, w,
						&w->lease_call, &e)
			  : gk_kube_call_update(w->mux, &r, body, &o, lease_write_done, w,
						&w->lease_call, &e);
	cJSON_Delete(body);
	if (wrc) {
		GK_WARN("lease %s/%s: %s", w->o.ns, w->o.lease_name, e.msg);
		lease_changed(w, wl_result(&w->ls, a, false, &w->o.lease, now) || was != w->ls.leader);
	}
}

/* One retry period: step down if the renew deadline passed (even while a
 * request hangs), then read the Lease unless a request is still in flight. */
static void lease_tick(wr *w)
{
	int64_t now = gk_mono_ms();
	lease_changed(w, wl_check_deadline(&w->ls, &w->o.lease, now));
	if (w->lease_call)
		return;
	gk_kube_ref r = lease_ref(w);
	gk_kube_call_opts o = lease_call_opts(w);
	gk_err err = {0};
	if (gk_kube_call_get(w->mux, &r, &o, lease_get_done, w, &w->lease_call, &err))
		GK_WARN("lease %s/%s: %s", w->o.ns, w->o.lease_name, err.msg);
}

static void lease_timer_cb(gk_loop *l, gk_timer_id id, void *user)
{
	wr *w = user;
	lease_tick(w);
	w->lease_timer = gk_loop_timer(w->loop, w->o.lease.retry_ms, lease_timer_cb, w);
}

void wr_release(wr *w)
{
	gk_kube_call_cancel(w->lease_call);
	w->lease_call = NULL;
	if (!w->o.leader_elect || !w->ls.leader || !w->lc)
		return;
	gk_kube_ref r = lease_ref(w);
	cJSON *j = NULL;
	if (gk_kube_get(w->lc, &r, &j, NULL, NULL) == 0) {
		wl_lease l;
		wl_lease_parse(&l, j);
		bool ok = false;
		if (!strcmp(l.holder, w->identity)) {
			/* shutting down: one short blocking write is fine here */
			char ts[64];
			now_micro(ts, sizeof ts);
			cJSON *body = wl_lease_body(w->o.ns, w->o.lease_name, &l, WL_RENEW, "",
						    &w->o.lease, ts);
			ok = body && gk_kube_update(w->lc, &r, body, NULL, NULL, NULL) == 0;
			cJSON_Delete(body);
		}
		if (ok)
			GK_INFO("released lease %s/%s", w->o.ns, w->o.lease_name);
	}
	cJSON_Delete(j);
	w->ls.leader = false;
}

/* ---- RPC: Watcher.Snapshot / Watcher.Get ------------------------------------------- */

static bool wants(const Gpukmm__SnapshotRequest *req, const char *topic)
{
	if (!req || !req->n_topics)
		return true;
	for (size_t i = 0; i < req->n_topics; i++)
		if (req->topics[i] && !strcmp(req->topics[i], topic))
			return true;
	return false;
}

/* The cached objects go into the reply as they are stored, packed: each one
 * becomes a length-delimited "unknown field" with the number of the reply's
 * repeated field for its kind, which is exactly how protobuf encodes a
 * repeated message field, so the receiver decodes ordinary SnapshotReply
 * objects. Nothing is unpacked: a snapshot of 10,000 objects costs the reply
 * buffer only, not 10,000 unpacked structs (tens of MB, fragmenting the heap). */
typedef struct raw_ctx {
	ProtobufCMessageUnknownField *f;
	size_t n, cap;
	uint32_t tag;
} raw_ctx;

static void raw_one(void *user, ws_ent *e)
{
	raw_ctx *r = user;
	if (r->n == r->cap)
		return;
	r->f[r->n++] = (ProtobufCMessageUnknownField){
		.tag = r->tag, .wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, .len = e->len,
		.data = e->buf};
}

static const char *const rep_field[WT_N] = {"cluster_policies", "modules", "nodes",
					    "resource_claims", "daemon_sets", "pods", "operands",
					    "resource_slices"};

void wr_snapshot_fill(wr *w, const Gpukmm__SnapshotRequest *req, Gpukmm__SnapshotReply *rep,
		      Gpukmm__Discovery *disc, Gpukmm__Leadership *lead)
{
	gpukmm__snapshot_reply__init(rep);
	static const char *const extra[] = {"discovery", "leadership"};
	size_t total = 0;
	/* before the first lists completed the objects are left out: the reply says
	 * synced=false, and a consumer takes no snapshot from an unsynced watcher
	 * (lib/wsub retries until it is); its retries cost a packed cache each */
	for (int t = 0; w->ready_sent && t < WT_N; t++)
		if (wants(req, wr_topic_names[t]))
			total += w->store[t].n;
	raw_ctx r = {calloc(total + 1, sizeof *r.f), 0, total, 0};
	rep->seqs = calloc(WT_N + 2, sizeof *rep->seqs);
	if (w->pub) {
		rep->has_epoch = 1;
		rep->epoch = gk_ipc_pub_epoch(w->pub);
	}
	for (int t = 0; rep->seqs && t < WT_N + 2; t++) {
		const char *name = t < WT_N ? wr_topic_names[t] : extra[t - WT_N];
		if (!wants(req, name))
			continue;
		Gpukmm__TopicSeq *ts = malloc(sizeof *ts);
		if (!ts)
			break;
		gpukmm__topic_seq__init(ts);
		ts->topic = (char *)name;
		ts->has_seq = 1;
		ts->seq = w->pub ? gk_ipc_pub_seq(w->pub, name) : 0;
		rep->seqs[rep->n_seqs++] = ts;
		if (t >= WT_N || !r.f || !w->ready_sent)
			continue;
		const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field_by_name(
			&gpukmm__snapshot_reply__descriptor, rep_field[t]);
		if (!fd)
			continue;
		r.tag = fd->id;
		ws_each(&w->store[t], raw_one, &r);
	}
	if (r.f && r.n) {
		rep->base.unknown_fields = r.f;
		rep->base.n_unknown_fields = r.n;
	} else {
		free(r.f);
	}
	wr_state_fill(w, disc);
	rep->discovery = disc;
	gpukmm__leadership__init(lead);
	lead->has_leader = 1;
	lead->leader = w->o.leader_elect ? w->ls.leader : true;
	lead->identity = w->identity;
	lead->holder = w->holder;
	lead->has_term = 1;
	lead->term = w->term;
	rep->leadership = lead;
	rep->has_synced = 1;
	rep->synced = wr_synced(w);
}

void wr_snapshot_free(Gpukmm__SnapshotReply *rep)
{
	for (size_t i = 0; i < rep->n_seqs; i++)
		free(rep->seqs[i]);
	free(rep->seqs);
	wr_state_free(rep->discovery);
	free(rep->base.unknown_fields); /* the data is the store's */
	rep->base.unknown_fields = NULL;
	rep->base.n_unknown_fields = 0;
}

static void h_snapshot(Gpukmm__Watcher_Service *svc, const Gpukmm__SnapshotRequest *in,
		       Gpukmm__SnapshotReply_Closure closure, void *cd)
{
	wr *w = gk_ipc_call_user(cd);
	Gpukmm__SnapshotReply rep;
	Gpukmm__Discovery d;
	Gpukmm__Leadership l;
	wr_snapshot_fill(w, in, &rep, &d, &l);
	size_t n = in->has_max_bytes && in->max_bytes ? protobuf_c_message_get_packed_size(&rep.base) : 0;
	if (n > in->max_bytes) {
		/* the caller's socket would drop it (and time out): say why instead */
		w->c_snapshots_refused++;
		gk_ipc_fail(cd, GK_RESOURCE_EXHAUSTED,
			    "snapshot of %zu bytes is over the %llu the caller can receive (the cache holds %llu nodes, "
			    "%llu claims, %llu pods)",
			    n, (unsigned long long)in->max_bytes, (unsigned long long)w->c_size[WT_NODE],
			    (unsigned long long)w->c_size[WT_RC], (unsigned long long)w->c_size[WT_POD]);
	} else {
		closure(&rep, cd);
	}
	wr_snapshot_free(&rep);
}

static void h_get(Gpukmm__Watcher_Service *svc, const Gpukmm__GetRequest *in,
		  Gpukmm__Event_Closure closure, void *cd)
{
	wr *w = gk_ipc_call_user(cd);
	int t = -1;
	for (int i = 0; i < WT_N; i++)
		if (in->topic && !strcmp(in->topic, wr_topic_names[i]))
			t = i;
	if (t < 0 || !in->name || !*in->name) {
		gk_ipc_fail(cd, GK_INVALID_ARGUMENT, "Get needs a topic (clusterpolicy, module, node, "
			    "resourceclaim, daemonset, pod, operand, resourceslice) and a name");
		return;
	}
	char key[600];
	if (in->namespace_ && *in->namespace_)
		snprintf(key, sizeof key, "%s/%s", in->namespace_, in->name);
	else
		snprintf(key, sizeof key, "%s", in->name);
	ws_ent *e = ws_get(&w->store[t], key);
	if (!e) {
		gk_ipc_fail(cd, GK_NOT_FOUND, "%s %s not found", wr_topic_names[t], key);
		return;
	}
	ProtobufCMessage *m = ws_obj(&w->store[t], e);
	if (!m) {
		gk_ipc_fail(cd, GK_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.has_type = 1;
	ev.type = GPUKMM__EVENT_TYPE__MODIFIED;
	event_set(&ev, t, m);
	closure(&ev, cd);
	protobuf_c_message_free_unpacked(m, NULL);
}

/* ---- lifecycle ------------------------------------------------------------------ */

int wr_init(wr *w, const wr_opts *o, gk_loop *loop, gk_kube_client *kc, gk_kube_client *lc,
	    gk_ipc_pub *pub, gk_ipc_server *srv, gk_err *err)
{
	memset(w, 0, sizeof *w);
	w->o = *o;
	if (!w->o.ns)
		w->o.ns = "intel-gpu-base-operator";
	if (w->o.discovery_ms <= 0)
		w->o.discovery_ms = 10000;
	if (!w->o.lease_name)
		w->o.lease_name = "gpukmm-controller";
	if (w->o.lease.lease_ms <= 0)
		w->o.lease.lease_ms = 15000;
	if (w->o.lease.renew_deadline_ms <= 0)
		w->o.lease.renew_deadline_ms = 10000;
	if (w->o.lease.retry_ms <= 0)
		w->o.lease.retry_ms = 2000;
	if (o->identity) {
		snprintf(w->identity, sizeof w->identity, "%s", o->identity);
	} else {
		char host[200] = "gpukmm";
		gethostname(host, sizeof host - 1);
		snprintf(w->identity, sizeof w->identity, "%s_%d", host, (int)getpid());
	}
	w->loop = loop;
	w->kc = kc;
	w->lc = lc;
	w->pub = pub;
	w->srv = srv;
	for (int i = 0; i < WT_N; i++)
		ws_init(&w->store[i]);
	for (int i = 0; i < WR_NSRC; i++) {
		w->src[i].w = w;
		w->src[i].idx = i;
	}
	for (int i = 0; i < WR_NDISC; i++)
		w->disc_slot[i] = (struct wr_disc_slot){w, i};
	if (!w->o.leader_elect) {
		w->ls.leader = true;
		w->c_leader = 1;
		snprintf(w->holder, sizeof w->holder, "%s", w->identity);
	}
	int rc = gk_kube_mux_new(&w->mux, kc, err);
	if (rc)
		return rc;
	rc = gk_kube_mux_attach(w->mux, loop, err);
	if (rc)
		return rc;
	if (srv) {
		Gpukmm__Watcher_Service init = GPUKMM__WATCHER__INIT(h_);
		w->rpc = init;
		rc = gk_ipc_server_add(srv, &w->rpc.base, w, NULL, err);
		if (rc)
			return rc;
	}
	return 0;
}

int wr_start(wr *w, gk_err *err)
{
	disc_start(w); /* watches start when it answers; retried every discovery period */
	w->disc_timer = gk_loop_timer(w->loop, w->o.discovery_ms, disc_timer_cb, w);
	w->tick_timer = gk_loop_timer(w->loop, 1000, tick_cb, w);
	if (w->o.leader_elect) {
		lease_tick(w);
		w->lease_timer = gk_loop_timer(w->loop, w->o.lease.retry_ms, lease_timer_cb, w);
	} else {
		publish_leadership(w);
	}
	return 0;
}

void wr_fini(wr *w)
{
	for (int i = 0; i < WR_NDISC; i++) {
		gk_kube_call_cancel(w->disc_calls[i]);
		w->disc_calls[i] = NULL;
	}
	w->disc_pending = 0;
	gk_kube_call_cancel(w->lease_call);
	w->lease_call = NULL;
	for (int i = 0; i < WR_NSRC; i++) {
		if (w->src[i].kw)
			gk_kube_watch_stop(w->src[i].kw);
		w->src[i].kw = NULL;
	}
	if (w->loop) {
		gk_timer_id *ts[] = {&w->disc_timer, &w->tick_timer, &w->lease_timer, &w->kslice_timer};
		for (size_t i = 0; i < 4; i++)
			if (*ts[i])
				gk_loop_cancel(w->loop, *ts[i]);
	}
	gk_kube_mux_free(w->mux);
	w->mux = NULL;
	for (int i = 0; i < WT_N; i++) {
		ws_clear(&w->store[i]);
		bad_clear(&w->bad[i]);
	}
	free(w->state_sent);
	w->state_sent = NULL;
}
