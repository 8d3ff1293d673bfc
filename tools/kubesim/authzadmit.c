/* kubesim — RBAC checks at admission (see api.h: ks_authz_admit). Messages are the
 * API server's: the escalation check of the rbac registry (policybased storage)
 * and the gc admission plugin (OwnerReferencesPermissionEnforcement). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "auth.h"

static const char *sget(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int same_json(const cJSON *a, const cJSON *b)
{
	return (!a && !b) || (a && b && cJSON_Compare(a, b, 1));
}

static void resource_attrs(ks_attrs *a, const char *verb, const char *group, const char *resource, const char *sub,
			   const char *ns, const char *name)
{
	memset(a, 0, sizeof(*a));
	a->resource_request = 1;
	snprintf(a->verb, sizeof(a->verb), "%s", verb);
	snprintf(a->group, sizeof(a->group), "%s", group ? group : "");
	snprintf(a->resource, sizeof(a->resource), "%s", resource ? resource : "");
	snprintf(a->sub, sizeof(a->sub), "%s", sub ? sub : "");
	snprintf(a->ns, sizeof(a->ns), "%s", ns ? ns : "");
	snprintf(a->name, sizeof(a->name), "%s", name ? name : "");
}

static int allowed(ks_server *s, const ks_user *u, const ks_attrs *a, char *reason, size_t cap)
{
	pthread_mutex_lock(&s->mu);
	int ok = ks_authz_allowed(s, u, a, reason, cap);
	pthread_mutex_unlock(&s->mu);
	return ok;
}

/* NewForbidden(<resource>.<group>, name, msg), kept in the record as the user's. */
static void forbid(ks_server *s, const ks_user *u, ks_resp *out, const ks_rtype *t, const char *name, const char *msg)
{
	ks_resp_status(out, 403, "Forbidden", t->resource, name, t->group, NULL, "%s%s%s \"%s\" is forbidden: %s",
		       t->resource, t->group[0] ? "." : "", t->group, name ? name : "", msg);
	char line[1100];
	snprintf(line, sizeof(line), "User \"%s\" at admission: %s%s%s \"%s\" is forbidden: %.700s", u->name, t->resource,
		 t->group[0] ? "." : "", t->group, name ? name : "", msg);
	ks_authz_note_denial(s, line);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ConfirmNoEscalation: the user's rules in ns cover `rules`? 0, or the 403. */
static int no_escalation(ks_server *s, const ks_user *u, const char *ns, const cJSON *rules, const ks_rtype *t,
			 const char *name, ks_resp *out)
{
	char errs[1024] = "";
	pthread_mutex_lock(&s->mu);
	cJSON *owner = ks_authz_rules_for(s, u, ns, errs, sizeof(errs));
	pthread_mutex_unlock(&s->mu);
	cJSON *missing = NULL;
	int ok = owner && ks_rbac_covers(owner, rules, &missing);
	cJSON_Delete(owner);
	if (ok)
		return 0;
	int n = cJSON_GetArraySize(missing);
	char **lines = n ? calloc((size_t)n, sizeof(char *)) : NULL;
	const cJSON *m;
	int k = 0;
	cJSON_ArrayForEach(m, missing) {
		char buf[1024];
		ks_rbac_compact_string(m, buf, sizeof(buf));
		if (lines && (lines[k] = strdup(buf)))
			k++;
	}
	cJSON_Delete(missing);
	if (k > 1)
		qsort(lines, (size_t)k, sizeof(char *), cmp_str);
	const char *gv[KS_USER_MAX_GROUPS];
	for (int i = 0; i < u->ngroups; i++)
		gv[i] = u->groups[i];
	char groups[1200], msg[4096];
	ks_rbac_quote_list(gv, u->ngroups, groups, sizeof(groups));
	size_t o = (size_t)snprintf(msg, sizeof(msg),
				    "user \"%s\" (groups=%s) is attempting to grant RBAC permissions not currently held:",
				    u->name, groups);
	for (int i = 0; i < k; i++) {
		if (o < sizeof(msg))
			o += (size_t)snprintf(msg + o, sizeof(msg) - o, "%s%s", i ? "\n" : "\n", lines[i]);
		free(lines[i]);
	}
	free(lines);
	if (!owner)
		snprintf(msg, sizeof(msg), "out of memory");
	if (errs[0] && o < sizeof(msg))
		snprintf(msg + o, sizeof(msg) - o, "; resolution errors: [%s]", errs);
	forbid(s, u, out, t, name, msg);
	return -1;
}

static int role_admit(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const cJSON *obj,
		      const cJSON *old, const ks_user *u, ks_resp *out)
{
	const cJSON *rules = cJSON_GetObjectItemCaseSensitive(obj, "rules");
	if (old && same_json(cJSON_GetObjectItemCaseSensitive(old, "rules"), rules))
		return 0;
	ks_attrs a;
	char reason[1100];
	resource_attrs(&a, "escalate", t->group, t->resource, NULL, ns, name);
	if (allowed(s, u, &a, reason, sizeof(reason)))
		return 0;
	return no_escalation(s, u, ns, rules, t, name, out);
}

static int binding_admit(ks_server *s, const ks_rtype *t, const char *ns, const char *name, const cJSON *obj,
			 const cJSON *old, const ks_user *u, ks_resp *out)
{
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(obj, "roleRef");
	if (old && same_json(cJSON_GetObjectItemCaseSensitive(old, "roleRef"), ref))
		return 0;
	const char *kind = sget(ref, "kind");
	ks_attrs a;
	char reason[1100];
	resource_attrs(&a, "bind", KS_RBAC_GROUP, kind && strcmp(kind, "Role") == 0 ? "roles" : "clusterroles", NULL,
		       ns, sget(ref, "name"));
	if (allowed(s, u, &a, reason, sizeof(reason)))
		return 0;
	const cJSON *rules;
	char err[600];
	pthread_mutex_lock(&s->mu);
	int found = ks_authz_role_rules(s, ref, ns, &rules, err, sizeof(err));
	cJSON *copy = found && rules ? cJSON_Duplicate(rules, 1) : NULL;
	pthread_mutex_unlock(&s->mu);
	if (!found) {
		forbid(s, u, out, t, name, err);
		return -1;
	}
	int rc = no_escalation(s, u, ns, copy, t, name, out);
	cJSON_Delete(copy);
	return rc;
}

static const cJSON *owner_refs(const cJSON *o)
{
	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "ownerReferences");
}

static int changing_owner_refs(const cJSON *obj, const cJSON *old)
{
	const cJSON *n = owner_refs(obj), *o = old ? owner_refs(old) : NULL;
	if (!old)
		return cJSON_GetArraySize(n) > 0;
	if (cJSON_GetArraySize(n) != cJSON_GetArraySize(o))
		return 1;
	for (int i = 0; i < cJSON_GetArraySize(n); i++)
		if (!cJSON_Compare(cJSON_GetArrayItem(n, i), cJSON_GetArrayItem(o, i), 1))
			return 1;
	return 0;
}

static int blocking(const cJSON *ref)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "blockOwnerDeletion"));
}

/* Was ref (by uid) already blocking in old? */
static int was_blocking(const cJSON *old, const cJSON *ref)
{
	const char *uid = sget(ref, "uid");
	const cJSON *o, *refs = old ? owner_refs(old) : NULL;
	cJSON_ArrayForEach(o, refs) {
		const char *ou = sget(o, "uid");
		if (uid && ou && strcmp(uid, ou) == 0)
			return blocking(o);
	}
	return 0;
}

static int gc_admit(ks_server *s, const ks_rtype *t, const char *sub, const char *ns, const char *name,
		    const cJSON *obj, const cJSON *old, const ks_user *u, ks_resp *out)
{
	if (!t->group[0] && strcmp(t->resource, "pods") == 0 && sub && strcmp(sub, "status") == 0)
		return 0;
	if (!changing_owner_refs(obj, old))
		return 0;
	ks_attrs a;
	char reason[1100], msg[1400];
	resource_attrs(&a, "delete", t->group, t->resource, sub, ns, name);
	if (!allowed(s, u, &a, reason, sizeof(reason))) {
		snprintf(msg, sizeof(msg), "cannot set an ownerRef on a resource you can't delete: %s, <nil>", reason);
		forbid(s, u, out, t, name, msg);
		return -1;
	}
	const cJSON *ref;
	cJSON_ArrayForEach(ref, owner_refs(obj)) {
		if (!blocking(ref) || was_blocking(old, ref))
			continue;
		const char *av = sget(ref, "apiVersion"), *kind = sget(ref, "kind");
		char group[128] = "", version[64] = "";
		const char *slash = av ? strchr(av, '/') : NULL;
		if (slash) {
			snprintf(group, sizeof(group), "%.*s", (int)(slash - av), av);
			snprintf(version, sizeof(version), "%s", slash + 1);
		} else {
			snprintf(version, sizeof(version), "%s", av ? av : "");
		}
		pthread_mutex_lock(&s->mu);
		const ks_rtype *ot = kind ? ks_registry_find_kind(&s->reg, group, version, kind) : NULL;
		char resource[128];
		snprintf(resource, sizeof(resource), "%s", ot ? ot->resource : "");
		pthread_mutex_unlock(&s->mu);
		if (!ot) {
			snprintf(msg, sizeof(msg),
				 "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion "
				 "%s Kind %s: no matches for kind \"%s\" in version \"%s\"",
				 av ? av : "", kind ? kind : "", kind ? kind : "", av ? av : "");
			forbid(s, u, out, t, name, msg);
			return -1;
		}
		resource_attrs(&a, "update", group, resource, "finalizers", ns, sget(ref, "name"));
		if (!allowed(s, u, &a, reason, sizeof(reason))) {
			snprintf(msg, sizeof(msg),
				 "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set "
				 "finalizers on: %s, <nil>",
				 reason);
			forbid(s, u, out, t, name, msg);
			return -1;
		}
	}
	return 0;
}

int ks_authz_admit(ks_server *s, const ks_rtype *t, const char *sub, const char *op, const char *ns, const char *name,
		   const cJSON *obj, const cJSON *old, const ks_opts *o, ks_resp *out)
{
	if (!s->rbac || !o || !o->user || ks_user_in_group(o->user, "system:masters") || strcmp(op, "DELETE") == 0 ||
	    !obj)
		return 0;
	const ks_user *u = o->user;
	const char *scope = t->namespaced ? (ns ? ns : "") : "";
	if (gc_admit(s, t, sub, scope, name, obj, old, u, out))
		return -1;
	if (strcmp(t->group, KS_RBAC_GROUP) != 0 || sub)
		return 0;
	if (strcmp(t->resource, "roles") == 0 || strcmp(t->resource, "clusterroles") == 0)
		return role_admit(s, t, scope, name, obj, old, u, out);
	if (strcmp(t->resource, "rolebindings") == 0 || strcmp(t->resource, "clusterrolebindings") == 0)
		return binding_admit(s, t, scope, name, obj, old, u, out);
	return 0;
}
