/* gpukmm-gater — ops over lib/kube (see kops.h). */
#include "kops.h"

#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/kube.h"

struct gk_gater_kops {
	gk_kube_config cfg;
	gk_kube_client *kc;
};

static gk_kube_ref ds_ref(const char *ns, const char *name)
{
	return (gk_kube_ref){ .group = "apps", .version = "v1", .resource = "daemonsets", .ns = ns, .name = name };
}

static int api_err(int rc, const gk_kube_status *st, gk_err *err)
{
	if (st->message[0])
		return gk_err_set(err, rc, "%s", st->message);
	return rc;
}

static int ds_out(cJSON *obj, Gpukmm__DaemonSet **out, gk_err *err)
{
	int rc = GK_OK;
	*out = NULL;
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
	/* kubesim and the API server both answer with the object; be strict anyway */
	if (obj && (!kind || (cJSON_IsString(kind) && strcmp(kind->valuestring, "DaemonSet") == 0)))
		rc = gk_kobj_daemon_set_from_json(obj, out, err);
	cJSON_Delete(obj);
	return rc;
}

int gk_gater_kops_new(gk_gater_kops **out, const char *kubeconfig, double qps, gk_err *err)
{
	*out = NULL;
	gk_gater_kops *k = calloc(1, sizeof(*k));
	if (!k)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	int rc = gk_kube_config_load(&k->cfg, kubeconfig, err);
	if (rc == GK_OK) {
		/* writes are few (one per real change); reads come from the watcher */
		gk_kube_opts ko = { .qps = qps ? qps : 50, .burst = 100, .timeout_ms = 15000,
				    .user_agent = "gpukmm-gater" };
		rc = gk_kube_client_new(&k->kc, &k->cfg, &ko, err);
	}
	if (rc) {
		gk_gater_kops_free(k);
		return rc;
	}
	*out = k;
	return GK_OK;
}

void gk_gater_kops_free(gk_gater_kops *k)
{
	if (!k)
		return;
	gk_kube_client_free(k->kc);
	gk_kube_config_free(&k->cfg);
	free(k);
}

static int op_patch(void *user, const char *ns, const char *name, const char *body, Gpukmm__DaemonSet **out,
		    gk_err *err)
{
	gk_gater_kops *k = user;
	gk_kube_ref r = ds_ref(ns, name);
	gk_kube_status st = { 0 };
	cJSON *res = NULL;
	*out = NULL;
	int rc = gk_kube_patch(k->kc, &r, GK_PATCH_MERGE, body, NULL, false, &res, &st, err);
	if (rc)
		return api_err(rc, &st, err);
	/* written: an answer we cannot read only costs the cache update (the
	 * watch brings the object anyway) */
	ds_out(res, out, NULL);
	return GK_OK;
}

static int op_get(void *user, const char *ns, const char *name, Gpukmm__DaemonSet **out, gk_err *err)
{
	gk_gater_kops *k = user;
	gk_kube_ref r = ds_ref(ns, name);
	gk_kube_status st = { 0 };
	cJSON *res = NULL;
	*out = NULL;
	int rc = gk_kube_get(k->kc, &r, &res, &st, err);
	if (rc)
		return api_err(rc, &st, err);
	return ds_out(res, out, err);
}

void gk_gater_kops_ops(gk_gater_kops *k, gk_gater_ops *ops)
{
	*ops = (gk_gater_ops){ .user = k, .patch = op_patch, .get = op_get };
}
