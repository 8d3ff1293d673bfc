/* gpukmm-certd — the serving pair as files in a directory shared with the
 * webhook's container (an emptyDir), switched atomically the way the kubelet
 * updates a Secret volume: the files live in a new hidden directory, the
 * symlink DIR/..data is renamed over to point at it, and DIR/tls.crt,
 * DIR/tls.key, DIR/ca.crt are symlinks through ..data. A reader never sees a
 * certificate with the other pair's key (gpukmm-webhook re-reads the files
 * when they change: gpukmm/https.h). */
#ifndef GPUKMM_CERTD_FILES_H
#define GPUKMM_CERTD_FILES_H

#include <stdbool.h>

#include "gpukmm/err.h"

/* DIR already holds exactly this pair (tls.crt and tls.key). */
bool cd_files_same(const char *dir, const char *crt, const char *key);
/* Writes crt, key (0600) and ca (may be NULL: not written) and switches to them. */
int cd_files_write(const char *dir, const char *crt, const char *key, const char *ca, gk_err *err);

#endif
