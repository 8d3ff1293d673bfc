/* gpukmm-gater — the pass's ops over lib/kube: merge patch and get of apps/v1
 * DaemonSets. API errors are surfaced as the API's Status message. */
#ifndef GPUKMM_GATER_KOPS_H
#define GPUKMM_GATER_KOPS_H

#include "gpukmm/err.h"
#include "pass.h"

typedef struct gk_gater_kops gk_gater_kops;

/* kubeconfig NULL = the usual chain (lib/kube); qps 0 = 50 (burst 100), < 0 = none. */
int gk_gater_kops_new(gk_gater_kops **out, const char *kubeconfig, double qps, gk_err *err);
void gk_gater_kops_free(gk_gater_kops *k);
void gk_gater_kops_ops(gk_gater_kops *k, gk_gater_ops *ops);

#endif
