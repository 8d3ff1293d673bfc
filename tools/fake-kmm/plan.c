/* fake-kmm — the per-(module, node) decision: which labels must be on the
 * node now, which timed operation (load/unload) is due, and what the node
 * contributes to status.moduleLoader. Pure: views in, plan out.
 *
 * "loaded" is the fake NodeModulesConfig status (the loaded annotation). A
 * signed mapping's node waits for its image to be signed (sign.c); a Secure
 * Boot node never loads an unsigned module. As in KMM, the ready label follows it: present while a load is recorded and the
 * node is schedulable for the Module; it keeps its state while a reload for a
 * new kernel is pending. A node that becomes unschedulable for the Module
 * (cordon, an untolerated taint) is dropped from its targets and unloaded; the
 * ready label goes when that unload completes (KMM's module reconciler removes
 * the node's NodeModulesConfig entry first: the labels follow the unload). An
 * unload fails while a pod on the node holds the GPU (fk_pod_holds: a GPU
 * workload, or the device plugin gated on the ready label — the drain
 * deadlock: a DaemonSet pod tolerates the cordon, the ready label it is gated
 * on stays, the unload never succeeds). */
#include <stdio.h>
#include <string.h>

#include "fakekmm.h"

void fk_loaded_parse(const char *v, fk_loaded *l)
{
	memset(l, 0, sizeof *l);
	if (!v || !*v)
		return;
	l->present = 1;
	size_t k = strcspn(v, " ");
	if (k >= sizeof l->kernel)
		k = sizeof l->kernel - 1;
	memcpy(l->kernel, v, k);
	l->kernel[k] = 0;
	if (v[k] == ' ')
		snprintf(l->version, sizeof l->version, "%s", v + k + 1);
}

void fk_loaded_format(char *buf, size_t cap, const char *kernel, const char *version)
{
	if (version && *version)
		snprintf(buf, cap, "%s %s", kernel, version);
	else
		snprintf(buf, cap, "%s", kernel);
}

void fk_plan_pair(const fk_module *m, const fk_node *n, fk_pair_plan *p)
{
	char key[FK_KEY_MAX];
	memset(p, 0, sizeof *p);
	fk_want_compute(m, n, &p->want);
	fk_key_loaded(key, m);
	fk_loaded_parse(fk_obj_str(n->annotations, key), &p->loaded);
	fk_key_ready(key, m);
	p->has_ready = fk_obj_str(n->labels, key);
	fk_key_version_ready(key, m);
	p->has_version_ready = fk_obj_str(n->labels, key);
	fk_key_unload_failed(key, m);
	p->has_unload_failed = fk_obj_str(n->annotations, key);

	const fk_want *w = &p->want;
	const fk_loaded *l = &p->loaded;
	int schedulable = fk_node_schedulable(m, n);
	p->matching = fk_selector_matches(m, n) && schedulable;
	p->ready = l->present;
	p->version_ready = p->ready && *l->version ? l->version : NULL;

	switch (w->state) {
	case FK_WANT_LOAD:
		if (fk_mapping_signed(m, w->mapping)) {
			/* KMM configures the node once the signed image exists */
			char msg[256];
			p->signed_image = 1;
			if (fk_mapping_image(m, w->mapping, w->kernel, p->image, sizeof p->image, msg, sizeof msg) != 0) {
				p->image[0] = 0; /* KMM cannot map this kernel: nothing happens */
				break;
			}
			if (fk_image_state(m, w->kernel, p->image) != FK_IMAGE_EXISTS) {
				p->sign_needed = 1;
				break;
			}
		}
		p->desired = 1;
		if (l->present && !strcmp(l->kernel, w->kernel) && !strcmp(l->version, w->version)) {
			p->available = 1;
		} else if (l->present && *w->version && strcmp(l->version, w->version) != 0) {
			/* ordered upgrade: the old version is unloaded before the new loads */
			p->op = FK_OP_UNLOAD;
			p->blocked = (n->faults & FK_FAULT_UNLOAD) != 0;
		} else {
			p->op = FK_OP_LOAD;
			/* a Secure Boot node's kernel refuses an unsigned module ("Key was rejected by service") */
			p->unsigned_refused = n->secure && !p->signed_image;
			p->blocked = (n->faults & (FK_FAULT_PULL | FK_FAULT_LOAD)) != 0 || p->unsigned_refused;
		}
		break;
	case FK_WANT_VERSION_OTHER:
		/* the node stays on the version it is labelled for */
		p->desired = p->available = l->present && w->node_version && !strcmp(l->version, w->node_version);
		break;
	default:
		if (l->present) {
			p->op = FK_OP_UNLOAD;
			p->blocked = (n->faults & FK_FAULT_UNLOAD) != 0;
		}
		break;
	}
	if (p->op == FK_OP_UNLOAD) {
		const char *mod = *m->module_name ? m->module_name : "the module";
		/* loaded for another kernel than the one running: the node rebooted, the
		 * module is not in memory and nothing can hold it (modprobe -r finds nothing) */
		int rebooted = *w->kernel && strcmp(l->kernel, w->kernel) != 0;
		for (size_t i = 0; !rebooted && i < n->npods && !p->holder[0]; i++)
			if (fk_pod_holds(m, n->pods[i])) {
				const cJSON *md = cJSON_GetObjectItemCaseSensitive(n->pods[i], "metadata");
				snprintf(p->holder, sizeof p->holder, "pod %s/%s", fk_obj_str(md, "namespace") ? fk_obj_str(md, "namespace") : "",
					 fk_obj_str(md, "name") ? fk_obj_str(md, "name") : "");
			}
		if (p->holder[0])
			p->blocked = 1;
		if (p->blocked)
			snprintf(p->unload_failed, sizeof p->unload_failed, "modprobe: FATAL: Module %s is in use (%s)", mod,
				 p->holder[0] ? p->holder : "fault unload-refused");
	}
}

static int str_differs(const char *a, const char *b)
{
	if (!a || !b)
		return a != b;
	return strcmp(a, b) != 0;
}

int fk_plan_labels_differ(const fk_pair_plan *p)
{
	return str_differs(p->ready ? "" : NULL, p->has_ready) ||
	       str_differs(p->version_ready, p->has_version_ready) ||
	       str_differs(p->unload_failed[0] ? p->unload_failed : NULL, p->has_unload_failed);
}

int fk_plan_module(const fk_module *m, const fk_node *nodes, size_t nnodes, fk_counts *c)
{
	int loaded = 0;
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < nnodes; i++) {
		fk_pair_plan p;
		fk_plan_pair(m, &nodes[i], &p);
		c->matching += p.matching;
		c->desired += p.desired;
		c->available += p.available;
		loaded |= p.loaded.present;
	}
	return loaded;
}

int fk_status_needs_write(const fk_module *m, const fk_counts *c)
{
	if (!m->has_loader)
		return m->st_present;
	return !m->st_present || m->st_matching != c->matching || m->st_desired != c->desired ||
	       m->st_available != c->available;
}

cJSON *fk_status_body(const fk_module *m, const fk_counts *c)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *st = root ? cJSON_AddObjectToObject(root, "status") : NULL;
	if (!st)
		goto fail;
	if (!m->has_loader) {
		if (!cJSON_AddNullToObject(st, "moduleLoader"))
			goto fail;
		return root;
	}
	cJSON *ml = cJSON_AddObjectToObject(st, "moduleLoader");
	if (!ml)
		goto fail;
	/* merge patch: null removes a count that became 0 (omitempty) */
	const struct {
		const char *k;
		int v;
	} f[] = { { "nodesMatchingSelectorNumber", c->matching },
		  { "desiredNumber", c->desired },
		  { "availableNumber", c->available } };
	for (size_t i = 0; i < 3; i++) {
		cJSON *it = f[i].v ? cJSON_AddNumberToObject(ml, f[i].k, f[i].v) : cJSON_AddNullToObject(ml, f[i].k);
		if (!it)
			goto fail;
	}
	return root;
fail:
	cJSON_Delete(root);
	return NULL;
}
