/* gpukmm-webhook: certificate files (see tlsfiles.h). */
#include "gpukmm/tlsfiles.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gk_wh_fileid_get(const char *path, gk_wh_fileid *id)
{
	struct stat st;
	memset(id, 0, sizeof(*id));
	if (!path || stat(path, &st) != 0)
		return;
	id->ok = true;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->size = st.st_size;
	id->mtime = st.st_mtim;
}

bool gk_wh_fileid_eq(const gk_wh_fileid *a, const gk_wh_fileid *b)
{
	return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

void gk_wh_free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

#define PEM_MAX (1u << 20)

static char *slurp(const char *path, char *msg, size_t cap)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(msg, cap, "%s: %s", path, strerror(errno));
		return NULL;
	}
	char *b = malloc(PEM_MAX + 1);
	size_t n = b ? fread(b, 1, PEM_MAX + 1, f) : 0;
	fclose(f);
	if (!b) {
		snprintf(msg, cap, "out of memory");
		return NULL;
	}
	if (n > PEM_MAX || n == 0) {
		snprintf(msg, cap, "%s: %s", path, n ? "larger than 1 MiB" : "empty");
		explicit_bzero(b, n > PEM_MAX ? PEM_MAX : n);
		free(b);
		return NULL;
	}
	b[n] = 0;
	return b;
}

int gk_wh_load_pair(const char *cert_path, const char *key_path, char **cert, char **key, char *msg, size_t cap)
{
	*cert = *key = NULL;
	char *c = slurp(cert_path, msg, cap);
	if (!c)
		return -1;
	char *k = slurp(key_path, msg, cap);
	if (!k) {
		free(c);
		return -1;
	}
	int rc = -1;
	BIO *cb = BIO_new_mem_buf(c, -1), *kb = BIO_new_mem_buf(k, -1);
	X509 *x = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
	EVP_PKEY *pk = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
	if (!x)
		snprintf(msg, cap, "%s: no PEM certificate", cert_path);
	else if (!pk)
		snprintf(msg, cap, "%s: no PEM private key (or it is encrypted)", key_path);
	else if (X509_check_private_key(x, pk) != 1)
		snprintf(msg, cap, "%s does not match the certificate in %s", key_path, cert_path);
	else
		rc = 0;
	ERR_clear_error();
	X509_free(x);
	EVP_PKEY_free(pk);
	BIO_free(cb);
	BIO_free(kb);
	if (rc) {
		free(c);
		gk_wh_free_secret(k);
		return -1;
	}
	*cert = c;
	*key = k;
	return 0;
}
