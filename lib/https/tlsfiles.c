/* gpukmm — serving certificate files (see include/gpukmm/https.h). */
#include "gpukmm/https.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gk_tls_fileid_get(const char *path, gk_tls_fileid *id)
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

bool gk_tls_fileid_eq(const gk_tls_fileid *a, const gk_tls_fileid *b)
{
	return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

void gk_tls_free_secret(char *s)
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

int gk_tls_load_pair(const char *cert_path, const char *key_path, char **cert, char **key, char *msg, size_t cap)
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
	char why[128];
	int rc = gk_tls_pair_check(c, k, why, sizeof(why));
	if (rc == -1)
		snprintf(msg, cap, "%s: no PEM certificate", cert_path);
	else if (rc == -2)
		snprintf(msg, cap, "%s: no PEM private key (or it is encrypted)", key_path);
	else if (rc)
		snprintf(msg, cap, "%s does not match the certificate in %s", key_path, cert_path);
	if (rc) {
		free(c);
		gk_tls_free_secret(k);
		return -1;
	}
	*cert = c;
	*key = k;
	return 0;
}

int64_t gk_tls_not_after(const char *cert_pem)
{
	BIO *b = cert_pem ? BIO_new_mem_buf(cert_pem, -1) : NULL;
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	struct tm tm;
	int64_t t = -1;
	if (x && ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) == 1)
		t = (int64_t)timegm(&tm);
	ERR_clear_error();
	X509_free(x);
	BIO_free(b);
	return t;
}

/* an ASN1_TIME as "2026-01-02 03:04:05 UTC" */
static void asn1_str(const ASN1_TIME *t, char *buf, size_t cap)
{
	struct tm tm;
	if (ASN1_TIME_to_tm(t, &tm) == 1)
		strftime(buf, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
	else
		snprintf(buf, cap, "an unreadable time");
}

int gk_tls_cert_current(const char *cert_pem, const char *cert_path, time_t now, char *msg, size_t cap)
{
	BIO *b = BIO_new_mem_buf(cert_pem, -1);
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	int rc = -1;
	char when[64];
	if (!x) {
		snprintf(msg, cap, "%s: no PEM certificate", cert_path);
	} else if (X509_cmp_time(X509_get0_notAfter(x), &now) <= 0) {
		asn1_str(X509_get0_notAfter(x), when, sizeof(when));
		snprintf(msg, cap, "the certificate in %s expired at %s", cert_path, when);
	} else if (X509_cmp_time(X509_get0_notBefore(x), &now) >= 0) {
		asn1_str(X509_get0_notBefore(x), when, sizeof(when));
		snprintf(msg, cap, "the certificate in %s is not valid before %s", cert_path, when);
	} else {
		rc = 0;
	}
	ERR_clear_error();
	X509_free(x);
	return rc;
}

/* ---- a pair of files, watched ---------------------------------------------------- */

int gk_tls_files_load(gk_tls_files *f, char **cert, char **key, char *msg, size_t cap)
{
	gk_tls_fileid_get(f->cert_path, &f->cand_cert);
	gk_tls_fileid_get(f->key_path, &f->cand_key);
	int rc = gk_tls_load_pair(f->cert_path, f->key_path, cert, key, msg, cap);
	if (rc == 0)
		gk_tls_files_served(f);
	return rc;
}

int gk_tls_files_check(gk_tls_files *f, char **cert, char **key, char *msg, size_t cap)
{
	*cert = *key = NULL;
	gk_tls_fileid_get(f->cert_path, &f->cand_cert);
	gk_tls_fileid_get(f->key_path, &f->cand_key);
	if (gk_tls_fileid_eq(&f->cand_cert, &f->cert_id) && gk_tls_fileid_eq(&f->cand_key, &f->key_id))
		return 0;
	if (gk_tls_load_pair(f->cert_path, f->key_path, cert, key, msg, cap) != 0)
		return -1;
	return 1;
}

void gk_tls_files_served(gk_tls_files *f)
{
	f->cert_id = f->cand_cert;
	f->key_id = f->cand_key;
	f->refused = false;
}

bool gk_tls_files_refuse(gk_tls_files *f, const char *msg)
{
	if (f->refused && gk_tls_fileid_eq(&f->cand_cert, &f->bad_cert) && gk_tls_fileid_eq(&f->cand_key, &f->bad_key) &&
	    strcmp(msg, f->bad_msg) == 0)
		return false;
	f->refused = true;
	f->bad_cert = f->cand_cert;
	f->bad_key = f->cand_key;
	snprintf(f->bad_msg, sizeof(f->bad_msg), "%s", msg);
	return true;
}
