/* gpukmm — what the watcher cannot vouch for, as a view keeps it (see wsub.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/wsub.h"

static void topic_clear(gk_wsub_unconf_topic *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->keys[i]);
		free(t->errs[i]);
	}
	free(t->keys);
	free(t->errs);
	free(t->reason);
	t->keys = t->errs = NULL;
	t->reason = NULL;
	t->n = 0;
}

void gk_wsub_unconf_init(gk_wsub_unconf *u, const char *const *topics, const bool *whole, size_t n)
{
	memset(u, 0, sizeof(*u));
	u->n = n < GK_WSUB_UNCONF_MAX ? n : GK_WSUB_UNCONF_MAX;
	for (size_t i = 0; i < u->n; i++) {
		u->t[i].topic = topics[i];
		u->t[i].whole = whole && whole[i];
	}
}

void gk_wsub_unconf_free(gk_wsub_unconf *u)
{
	for (size_t i = 0; i < u->n; i++)
		topic_clear(&u->t[i]);
}

static bool topic_same(const gk_wsub_unconf_topic *a, const gk_wsub_unconf_topic *b)
{
	if ((a->reason != NULL) != (b->reason != NULL) || a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->keys[i], b->keys[i]) != 0)
			return false;
	return true;
}

/* Fill x from the watcher's entry u. On OOM x says "out of memory" (unconfirmed). */
static void topic_load(gk_wsub_unconf_topic *x, const Gpukmm__Unconfirmed *u)
{
	bool all = u->reason && *u->reason;
	bool partial = u->has_unreadable_count && u->unreadable_count > u->n_unreadable;
	if (all || partial || (x->whole && u->n_unreadable)) {
		char buf[GK_ERR_MSG_MAX];
		unsigned count = u->unreadable_count > u->n_unreadable ? u->unreadable_count : (unsigned)u->n_unreadable;
		if (all)
			snprintf(buf, sizeof(buf), "%s", u->reason);
		else if (u->n_unreadable)
			snprintf(buf, sizeof(buf), "%u %s object%s could not be read, e.g. %.250s: %.200s", count, x->topic,
				 count == 1 ? "" : "s", u->unreadable[0] ? u->unreadable[0] : "",
				 u->n_unreadable_errors && u->unreadable_errors[0] ? u->unreadable_errors[0] : "unreadable");
		else
			snprintf(buf, sizeof(buf), "%u %s objects could not be read", count, x->topic);
		x->reason = strdup(buf);
		if (!x->reason)
			x->reason = strdup("out of memory");
	}
	if (!u->n_unreadable)
		return;
	x->keys = calloc(u->n_unreadable, sizeof(char *));
	x->errs = calloc(u->n_unreadable, sizeof(char *));
	for (size_t k = 0; x->keys && x->errs && k < u->n_unreadable; k++) {
		x->keys[k] = strdup(u->unreadable[k] ? u->unreadable[k] : "");
		x->errs[k] = strdup(k < u->n_unreadable_errors && u->unreadable_errors[k] ? u->unreadable_errors[k]
											 : "unreadable");
		if (!x->keys[k] || !x->errs[k]) {
			free(x->keys[k]);
			free(x->errs[k]);
			break;
		}
		x->n++;
	}
	if (x->n != u->n_unreadable && !x->reason)
		x->reason = strdup("out of memory"); /* fail closed: the whole topic */
}

bool gk_wsub_unconf_load(gk_wsub_unconf *u, const Gpukmm__Discovery *d)
{
	bool changed = false;
	for (size_t t = 0; t < u->n; t++) {
		gk_wsub_unconf_topic nt = { .topic = u->t[t].topic, .whole = u->t[t].whole };
		for (size_t i = 0; d && i < d->n_unconfirmed; i++) {
			const Gpukmm__Unconfirmed *e = d->unconfirmed[i];
			if (e && e->topic && strcmp(e->topic, nt.topic) == 0)
				topic_load(&nt, e);
		}
		changed = changed || !topic_same(&u->t[t], &nt);
		topic_clear(&u->t[t]);
		u->t[t] = nt;
	}
	return changed;
}

const char *gk_wsub_unconf_reason(const gk_wsub_unconf *u, size_t topic)
{
	return topic < u->n ? u->t[topic].reason : NULL;
}

const char *gk_wsub_unconf_unreadable(const gk_wsub_unconf *u, size_t topic, const char *key)
{
	if (topic >= u->n || !key)
		return NULL;
	for (size_t i = 0; i < u->t[topic].n; i++)
		if (strcmp(u->t[topic].keys[i], key) == 0)
			return u->t[topic].errs[i];
	return NULL;
}

const char *gk_wsub_unconf_unreadable_under(const gk_wsub_unconf *u, size_t topic, const char *prefix)
{
	if (topic >= u->n || !prefix)
		return NULL;
	size_t l = strlen(prefix);
	for (size_t i = 0; i < u->t[topic].n; i++)
		if (strncmp(u->t[topic].keys[i], prefix, l) == 0)
			return u->t[topic].errs[i];
	return NULL;
}

unsigned gk_wsub_unconf_bits(const gk_wsub_unconf *u)
{
	unsigned b = 0;
	for (size_t t = 0; t < u->n; t++)
		if (u->t[t].reason || u->t[t].n)
			b |= 1u << t;
	return b;
}
