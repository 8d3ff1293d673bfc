/* fake-kmm — the controller: API I/O around the pure plan (fakekmm.h). */
#ifndef GPUKMM_FAKEKMM_CTRL_H
#define GPUKMM_FAKEKMM_CTRL_H

#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/loop.h"

typedef struct fk_ctrl_opts {
	const char *kubeconfig;     /* NULL = the usual chain */
	const char *webhook_url;    /* full URL the API server calls, NULL = no registration */
	const char *ca_pem;         /* caBundle for https, or NULL */
	const char *webhook_config; /* ValidatingWebhookConfiguration name */
	int64_t load_delay_ms, unload_delay_ms;
	int64_t sign_delay_ms;      /* time KMM's sign job takes */
} fk_ctrl_opts;

typedef struct fk_ctrl fk_ctrl;

/* Connects (kubeconfig), registers the webhook configuration and starts the
 * Module and Node watches on loop. */
int fk_ctrl_start(fk_ctrl **out, gk_loop *loop, const fk_ctrl_opts *o, gk_err *err);
void fk_ctrl_stop(fk_ctrl *c);
/* Kubernetes version from the API's /version (for the webhook's DRA gate). */
int fk_ctrl_kube_version(const char *kubeconfig, int *major, int *minor, gk_err *err);

#endif
