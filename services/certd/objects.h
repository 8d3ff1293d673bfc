/* gpukmm-certd — the API objects: the Secret and the webhook configurations
 * read into decide.h's terms, the certificate material made, and the patches
 * written (pure: JSON in, JSON text out; the randomness of key generation
 * aside). */
#ifndef GPUKMM_CERTD_OBJECTS_H
#define GPUKMM_CERTD_OBJECTS_H

#include <cJSON.h>
#include <stdint.h>

#include "decide.h"
#include "gpukmm/err.h"

#define CD_MANAGED_BY "gpukmm.io/managed-by"      /* = "gpukmm-certd": the Secret is ours */
#define CD_MANAGER "gpukmm-certd"
#define CD_PUBLISHED "gpukmm.io/ca-published"
#define CD_SWITCHED "gpukmm.io/switched"
#define CD_CM_CERT "cert-manager.io/certificate-name"  /* on the Secrets cert-manager issues */
#define CD_CM_INJECT "cert-manager.io/inject-ca-from"
#define CD_CM_INJECT_SECRET "cert-manager.io/inject-ca-from-secret"

/* A Secret read, with the PEM texts it owns. */
typedef struct cd_secret_obj {
	cd_secret s;
	char rv[64];
	char *own[5];
} cd_secret_obj;

/* obj: the API's answer (NULL: 404). A data value that is not base64 counts
 * as absent. -1 with err when obj is not a Secret. */
int cd_secret_read(cd_secret_obj *o, const cJSON *obj, gk_err *err);
void cd_secret_obj_free(cd_secret_obj *o);

/* A webhook configuration read: exists/injected/current against ca_crt (the
 * Secret's, PEM; NULL = none: nothing is current), trusts against tls_crt
 * (NULL: trusts nothing), its resourceVersion and the names of its webhooks
 * (the patch checks both). */
typedef struct cd_conf_obj {
	cd_conf c;
	char name[256];
	char rv[64];
	cJSON *webhooks;         /* the names, in order (a JSON array of strings) */
} cd_conf_obj;
int cd_conf_read(cd_conf_obj *o, const char *name, const cJSON *obj, const char *ca_crt, const char *tls_crt,
		 gk_err *err);
void cd_conf_obj_free(cd_conf_obj *o);
/* A JSON patch setting every webhook's clientConfig.caBundle to base64(ca_crt),
 * guarded by tests of the resourceVersion and each webhook's name (malloc'd). */
char *cd_conf_patch(const cd_conf_obj *o, const char *ca_crt);

/* What a write makes: a new CA and serving pair (the CA's key is dropped). */
typedef struct cd_material {
	char *ca, *crt, *key;
} cd_material;
int cd_make(const cd_cfg *c, int64_t now, cd_material *m, gk_err *err);
void cd_material_free(cd_material *m);

/* The JSON merge patch of the Secret for plan p (ISSUE, STAGE, MARK, SWITCH,
 * PRUNE), with the resourceVersion read as a precondition; m: the material of
 * ISSUE and STAGE. malloc'd, NULL on OOM. */
char *cd_secret_patch(const cd_secret_obj *o, const cd_plan *p, const cd_material *m, int64_t now);

/* base64 of a text (malloc'd). */
char *cd_b64(const char *s);

#endif
