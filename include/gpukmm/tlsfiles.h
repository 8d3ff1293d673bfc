/* Serving certificate files (gpukmm-webhook; the supervisor checks them before it starts anything) — load and check a cert/key pair,
 * notice when the files change (Secret volume updates swap a symlink). */
#ifndef GPUKMM_TLSFILES_H
#define GPUKMM_TLSFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>

typedef struct gk_wh_fileid {
	bool ok;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
} gk_wh_fileid;

void gk_wh_fileid_get(const char *path, gk_wh_fileid *id);
bool gk_wh_fileid_eq(const gk_wh_fileid *a, const gk_wh_fileid *b);

/* Reads both PEM files (each at most 1 MiB) and checks that the key belongs to
 * the first certificate. 0 ok (*cert, *key malloc'd; free the key with
 * gk_wh_free_secret), else -1 with a message (never containing key material). */
int gk_wh_load_pair(const char *cert_path, const char *key_path, char **cert, char **key, char *msg, size_t cap);
void gk_wh_free_secret(char *s);
/* The validity period of the first certificate of cert_pem at `now`: 0 valid,
 * else -1 with a message ("... expired at ..." / "... not valid before ..."). */
int gk_wh_cert_current(const char *cert_pem, const char *cert_path, time_t now, char *msg, size_t cap);

#endif
