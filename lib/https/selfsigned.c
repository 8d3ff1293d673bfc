/* gpukmm — a self-signed serving certificate (see include/gpukmm/https.h). */
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/https.h"

static char *bio_text(BIO *b)
{
	char *data;
	long n = BIO_get_mem_data(b, &data);
	char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (s) {
		memcpy(s, data, (size_t)n);
		s[n] = 0;
	}
	return s;
}

static int add_ext(X509 *x, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	int ok = e && X509_add_ext(x, e, -1) == 1;
	X509_EXTENSION_free(e);
	return ok ? 0 : -1;
}

int gk_tls_self_signed(const char *cn, const char *const *sans, size_t n_sans, int days, char **cert, char **key,
		       gk_err *err)
{
	*cert = *key = NULL;
	int rc = GK_INTERNAL;
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_mem());
	char *san = NULL;
	size_t san_len = 0;
	FILE *sf = open_memstream(&san, &san_len);
	unsigned char serial[16];
	BIGNUM *bn = NULL;
	if (!pk || !x || !cb || !kb || !sf || RAND_bytes(serial, sizeof(serial)) != 1)
		goto out;
	serial[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) || X509_set_version(x, 2) != 1 ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400L) || X509_set_pubkey(x, pk) != 1)
		goto out;
	X509_NAME *name = X509_get_subject_name(x);
	if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0) != 1 ||
	    X509_set_issuer_name(x, name) != 1)
		goto out;
	for (size_t i = 0; i < n_sans; i++)
		fprintf(sf, "%s%s%s", i ? "," : "", strncmp(sans[i], "IP:", 3) == 0 ? "" : "DNS:", sans[i]);
	if (fclose(sf) != 0) {
		sf = NULL;
		goto out;
	}
	sf = NULL;
	if ((n_sans && add_ext(x, NID_subject_alt_name, san)) || add_ext(x, NID_basic_constraints, "critical,CA:FALSE") ||
	    add_ext(x, NID_key_usage, "critical,digitalSignature") || add_ext(x, NID_ext_key_usage, "serverAuth") ||
	    X509_sign(x, pk, EVP_sha256()) == 0)
		goto out;
	if (PEM_write_bio_X509(cb, x) != 1 || PEM_write_bio_PrivateKey(kb, pk, NULL, NULL, 0, NULL, NULL) != 1)
		goto out;
	*cert = bio_text(cb);
	*key = bio_text(kb);
	if (!*cert || !*key) {
		free(*cert);
		gk_tls_free_secret(*key);
		*cert = *key = NULL;
		rc = GK_RESOURCE_EXHAUSTED;
		goto out;
	}
	rc = GK_OK;
out:
	if (sf)
		fclose(sf);
	free(san);
	BN_free(bn);
	if (kb) {
		char *d;
		long n = BIO_get_mem_data(kb, &d);
		if (n > 0)
			OPENSSL_cleanse(d, (size_t)n);
	}
	BIO_free(cb);
	BIO_free(kb);
	X509_free(x);
	EVP_PKEY_free(pk);
	ERR_clear_error();
	if (rc != GK_OK)
		return gk_err_set(err, rc, "cannot generate a self-signed certificate%s",
				  rc == GK_RESOURCE_EXHAUSTED ? ": out of memory" : "");
	return GK_OK;
}
