/* kubesim — server state: creation with the namespaces every cluster has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim.h"
#include "versions.h"
#include "ctrl.h"

static int add_namespace(ks_server *s, const char *name)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return GK_RESOURCE_EXHAUSTED;
	char uid[40], ts[40];
	ks_new_uid(s, uid, sizeof(uid));
	ks_now_rfc3339(ts, sizeof(ts));
	cJSON_AddStringToObject(o, "apiVersion", "v1");
	cJSON_AddStringToObject(o, "kind", "Namespace");
	cJSON *m = cJSON_AddObjectToObject(o, "metadata");
	cJSON *spec = cJSON_AddObjectToObject(o, "spec");
	cJSON *st = cJSON_AddObjectToObject(o, "status");
	if (!m || !spec || !st) {
		cJSON_Delete(o);
		return GK_RESOURCE_EXHAUSTED;
	}
	cJSON_AddStringToObject(m, "name", name);
	cJSON_AddStringToObject(m, "uid", uid);
	cJSON_AddStringToObject(m, "creationTimestamp", ts);
	cJSON *labels = cJSON_AddObjectToObject(m, "labels");
	if (labels)
		cJSON_AddStringToObject(labels, "kubernetes.io/metadata.name", name);
	const char *fin[] = { "kubernetes" };
	cJSON_AddItemToObject(spec, "finalizers", cJSON_CreateStringArray(fin, 1));
	cJSON_AddStringToObject(st, "phase", "Active");
	return ks_store_put(&s->store, "", "namespaces", "", name, o);
}

int ks_server_init(ks_server *s, int history)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&s->cond, &ca);
	pthread_cond_init(&s->gc_cond, &ca);
	pthread_condattr_destroy(&ca);
	s->bookmark_ms = 1000;
	snprintf(s->server_addr, sizeof(s->server_addr), "127.0.0.1:0");
	gk_err e = { 0 };
	if (ks_versions_set(s, NULL, NULL, &e) || ks_store_init(&s->store, history))
		return GK_RESOURCE_EXHAUSTED;
	return 0;
}

int ks_server_seed(ks_server *s)
{
	const char *ns[] = { "default", "kube-system", "kube-public", "kube-node-lease" };
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		if (!ks_store_get(&s->store, "", "namespaces", "", ns[i]) && add_namespace(s, ns[i]))
			return GK_RESOURCE_EXHAUSTED;
	return 0;
}

void ks_server_free(ks_server *s)
{
	ks_ctrl_free(s);
	ks_store_free(&s->store);
	ks_registry_free(&s->reg);
	for (int i = 0; i < s->nsvc_urls; i++) {
		free(s->svc_urls[i].ns_name);
		free(s->svc_urls[i].url);
	}
	free(s->svc_urls);
	free(s->token_file);
	free(s->token_buf);
	ks_auth_free(s);
	pthread_cond_destroy(&s->cond);
	pthread_cond_destroy(&s->gc_cond);
	pthread_mutex_destroy(&s->mu);
}
