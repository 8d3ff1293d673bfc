/* fake-kmm — which nodes a Module targets and what should be loaded there
 * (KMM: module_reconciler.go prepareSchedulingData, utils.IsNodeSchedulable,
 * kernelmapper.go findKernelMapping). Pure. */
#include <stdio.h>
#include <string.h>

#include "fakekmm.h"

int fk_toleration_tolerates(const fk_toleration *t, const fk_taint *taint)
{
	if (*t->effect && strcmp(t->effect, taint->effect) != 0)
		return 0;
	if (*t->key && strcmp(t->key, taint->key) != 0)
		return 0;
	if (!*t->op || !strcmp(t->op, "Equal"))
		return strcmp(t->value, taint->value) == 0;
	if (!strcmp(t->op, "Exists"))
		return 1;
	return 0;
}

/* KMM always tolerates these NoSchedule taints (its worker pods do). */
static const fk_toleration internal_tols[] = {
	{ "node.kubernetes.io/disk-pressure", "Exists", "", "NoSchedule" },
	{ "node.kubernetes.io/memory-pressure", "Exists", "", "NoSchedule" },
	{ "node.kubernetes.io/pid-pressure", "Exists", "", "NoSchedule" },
};

static int tolerated(const fk_module *m, const fk_taint *taint)
{
	for (size_t i = 0; i < m->ntols; i++)
		if (fk_toleration_tolerates(&m->tols[i], taint))
			return 1;
	for (size_t i = 0; i < sizeof internal_tols / sizeof internal_tols[0]; i++)
		if (fk_toleration_tolerates(&internal_tols[i], taint))
			return 1;
	return 0;
}

int fk_node_schedulable(const fk_module *m, const fk_node *n)
{
	int has_cordon_taint = 0;
	for (size_t i = 0; i < n->ntaints; i++) {
		const fk_taint *t = &n->taints[i];
		if (!strcmp(t->key, "node.kubernetes.io/unschedulable") && !strcmp(t->effect, "NoSchedule"))
			has_cordon_taint = 1;
		if (strcmp(t->effect, "NoSchedule") != 0 && strcmp(t->effect, "NoExecute") != 0)
			continue;
		if (!tolerated(m, t))
			return 0;
	}
	/* kubectl cordon sets spec.unschedulable; the node lifecycle controller
	 * turns that into this taint. Without such a controller, imply it. */
	if (n->unschedulable && !has_cordon_taint) {
		const fk_taint cordon = { "node.kubernetes.io/unschedulable", "", "NoSchedule" };
		if (!tolerated(m, &cordon))
			return 0;
	}
	return 1;
}

int fk_selector_matches(const fk_module *m, const fk_node *n)
{
	for (size_t i = 0; i < m->nselector; i++) {
		const char *v = fk_obj_str(n->labels, m->selector[i].key);
		if (!v || strcmp(v, m->selector[i].val) != 0)
			return 0;
	}
	return 1;
}

int fk_mapping_find(const fk_module *m, const char *kernel)
{
	for (size_t i = 0; i < m->nmaps; i++) {
		const fk_mapping *mp = &m->maps[i];
		if (mp->literal && !mp->regexp) {
			if (!strcmp(mp->literal, kernel))
				return (int)i;
		} else if (mp->regexp && !mp->literal) {
			if (gk_policy_re2go_match(mp->regexp, kernel) == 1)
				return (int)i;
		}
	}
	return -1;
}

void fk_want_compute(const fk_module *m, const fk_node *n, fk_want *w)
{
	char key[FK_KEY_MAX];
	memset(w, 0, sizeof *w);
	w->mapping = -1;
	w->version = m->version;
	size_t kl = strlen(n->kernel);
	if (kl >= sizeof w->kernel)
		kl = sizeof w->kernel - 1;
	memcpy(w->kernel, n->kernel, kl);
	if (kl && w->kernel[kl - 1] == '+')
		kl--;
	w->kernel[kl] = 0;
	if (*m->version) {
		fk_key_version_module(key, m);
		w->node_version = fk_obj_str(n->labels, key);
	}
	if (m->deleting) {
		w->state = FK_WANT_DELETING;
		return;
	}
	if (!fk_selector_matches(m, n)) {
		w->state = FK_WANT_NOT_SELECTED;
		return;
	}
	if (!fk_node_schedulable(m, n)) {
		w->state = FK_WANT_UNSCHEDULABLE;
		return;
	}
	if (!m->has_loader) {
		w->state = FK_WANT_NO_LOADER;
		return;
	}
	w->mapping = fk_mapping_find(m, w->kernel);
	if (w->mapping < 0) {
		w->state = FK_WANT_NO_MAPPING;
		return;
	}
	if (*m->version) {
		if (!w->node_version) {
			w->state = FK_WANT_VERSION_MISSING;
			return;
		}
		if (strcmp(w->node_version, m->version) != 0) {
			w->state = FK_WANT_VERSION_OTHER;
			return;
		}
	}
	w->state = FK_WANT_LOAD;
}

const char *fk_want_state_name(enum fk_want_state s)
{
	switch (s) {
	case FK_WANT_NOT_SELECTED: return "not-selected";
	case FK_WANT_UNSCHEDULABLE: return "unschedulable";
	case FK_WANT_NO_LOADER: return "no-module-loader";
	case FK_WANT_NO_MAPPING: return "no-kernel-mapping";
	case FK_WANT_VERSION_MISSING: return "version-label-missing";
	case FK_WANT_VERSION_OTHER: return "other-version";
	case FK_WANT_DELETING: return "deleting";
	case FK_WANT_LOAD: return "load";
	}
	return "?";
}
