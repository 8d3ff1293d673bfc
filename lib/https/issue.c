/* gpukmm — making certificates with OpenSSL: a CA, a serving certificate it
 * signs, a self-signed one; and reading what a certificate says (validity,
 * names, issuer). See include/gpukmm/https.h. */
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static X509 *pem_cert(const char *pem)
{
	BIO *b = pem ? BIO_new_mem_buf(pem, -1) : NULL;
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	ERR_clear_error();
	return x;
}

static EVP_PKEY *pem_key(const char *pem)
{
	BIO *b = pem ? BIO_new_mem_buf(pem, -1) : NULL;
	EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	ERR_clear_error();
	return k;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	int ok = e && X509_add_ext(x, e, -1) == 1;
	X509_EXTENSION_free(e);
	return ok ? 0 : -1;
}

/* "DNS:a,DNS:b,IP:1.2.3.4" (malloc'd) */
static char *san_list(const char *const *sans, size_t n)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);
	if (!f)
		return NULL;
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%s%s", i ? "," : "", strncmp(sans[i], "IP:", 3) == 0 ? "" : "DNS:", sans[i]);
	if (fclose(f) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

static int set_time(ASN1_TIME *t, int64_t unix_s)
{
	return ASN1_TIME_set(t, (time_t)unix_s) ? 0 : -1;
}

int gk_tls_issue_cert(const gk_tls_issue *o, char **cert, char **key, gk_err *err)
{
	*cert = *key = NULL;
	int rc = GK_INTERNAL;
	const char *why = "";
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new(), *ix = NULL;
	EVP_PKEY *ik = NULL;
	BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_mem());
	char *san = NULL;
	unsigned char serial[16];
	BIGNUM *bn = NULL;
	if (!o->cn || !*o->cn || o->not_after <= o->not_before) {
		rc = GK_INVALID_ARGUMENT;
		why = ": no subject name, or notAfter is not after notBefore";
		goto out;
	}
	if ((o->issuer_cert != NULL) != (o->issuer_key != NULL)) {
		rc = GK_INVALID_ARGUMENT;
		why = ": the issuer needs its certificate and its key";
		goto out;
	}
	if (o->issuer_cert) {
		ix = pem_cert(o->issuer_cert);
		ik = pem_key(o->issuer_key);
		if (!ix || !ik || X509_check_private_key(ix, ik) != 1) {
			rc = GK_INVALID_ARGUMENT;
			why = ": the issuer's certificate and key do not load or do not match";
			goto out;
		}
	}
	if (!pk || !x || !cb || !kb || RAND_bytes(serial, sizeof(serial)) != 1)
		goto out;
	serial[0] &= 0x7f; /* positive */
	serial[0] |= 0x01; /* and never a short one */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) || X509_set_version(x, 2) != 1 ||
	    set_time(X509_getm_notBefore(x), o->not_before) || set_time(X509_getm_notAfter(x), o->not_after) ||
	    X509_set_pubkey(x, pk) != 1)
		goto out;
	X509_NAME *name = X509_get_subject_name(x);
	if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)o->cn, -1, -1, 0) != 1 ||
	    X509_set_issuer_name(x, ix ? X509_get_subject_name(ix) : name) != 1)
		goto out;
	X509 *signer = ix ? ix : x;
	if (add_ext(x, signer, NID_subject_key_identifier, "hash"))
		goto out;
	if (ix && add_ext(x, signer, NID_authority_key_identifier, "keyid:always"))
		goto out;
	if (o->ca) {
		if (add_ext(x, signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
		    add_ext(x, signer, NID_key_usage, "critical,keyCertSign,cRLSign"))
			goto out;
	} else {
		if (o->n_sans && (!(san = san_list(o->sans, o->n_sans)) ||
				  add_ext(x, signer, NID_subject_alt_name, san)))
			goto out;
		if (add_ext(x, signer, NID_basic_constraints, "critical,CA:FALSE") ||
		    add_ext(x, signer, NID_key_usage, "critical,digitalSignature") ||
		    add_ext(x, signer, NID_ext_key_usage, "serverAuth"))
			goto out;
	}
	if (X509_sign(x, ik ? ik : pk, EVP_sha256()) == 0)
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
		why = ": out of memory";
		goto out;
	}
	rc = GK_OK;
out:
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
	X509_free(ix);
	EVP_PKEY_free(pk);
	EVP_PKEY_free(ik);
	ERR_clear_error();
	if (rc != GK_OK)
		return gk_err_set(err, rc, "cannot make the certificate %s%s", o->cn ? o->cn : "", why);
	return GK_OK;
}

int gk_tls_self_signed(const char *cn, const char *const *sans, size_t n_sans, int days, char **cert, char **key,
		       gk_err *err)
{
	int64_t now = (int64_t)time(NULL);
	const gk_tls_issue o = { .cn = cn, .sans = sans, .n_sans = n_sans, .not_before = now - 3600,
				 .not_after = now + (int64_t)days * 86400 };
	return gk_tls_issue_cert(&o, cert, key, err);
}

/* ---- reading certificates ------------------------------------------------------ */

static int64_t asn1_unix(const ASN1_TIME *t)
{
	struct tm tm;
	return ASN1_TIME_to_tm(t, &tm) == 1 ? (int64_t)timegm(&tm) : -1;
}

int gk_tls_cert_info(const char *pem, gk_tls_info *info)
{
	memset(info, 0, sizeof(*info));
	X509 *x = pem_cert(pem);
	if (!x)
		return -1;
	info->not_before = asn1_unix(X509_get0_notBefore(x));
	info->not_after = asn1_unix(X509_get0_notAfter(x));
	info->ca = X509_check_ca(x) > 0;
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, info->cn, sizeof(info->cn));
	unsigned int n = 0;
	unsigned char md[EVP_MAX_MD_SIZE];
	if (X509_digest(x, EVP_sha256(), md, &n) == 1)
		for (unsigned int i = 0; i < n && 2 * i + 2 < sizeof(info->sha256); i++)
			snprintf(info->sha256 + 2 * i, 3, "%02x", md[i]);
	ERR_clear_error();
	X509_free(x);
	return info->not_before < 0 || info->not_after < 0 ? -1 : 0;
}

bool gk_tls_cert_has_dns(const char *pem, const char *dns)
{
	X509 *x = pem_cert(pem);
	bool yes = x && X509_check_host(x, dns, strlen(dns), X509_CHECK_FLAG_NO_WILDCARDS, NULL) == 1;
	ERR_clear_error();
	X509_free(x);
	return yes;
}

bool gk_tls_cert_issued_by(const char *leaf_pem, const char *ca_pem)
{
	X509 *l = pem_cert(leaf_pem), *c = pem_cert(ca_pem);
	EVP_PKEY *ck = c ? X509_get0_pubkey(c) : NULL;
	bool yes = l && c && ck && X509_check_issued(c, l) == X509_V_OK && X509_verify(l, ck) == 1;
	ERR_clear_error();
	X509_free(l);
	X509_free(c);
	return yes;
}

int gk_tls_pair_check(const char *cert_pem, const char *key_pem, char *msg, size_t cap)
{
	X509 *x = pem_cert(cert_pem);
	EVP_PKEY *pk = pem_key(key_pem);
	int rc = 0;
	if (!x)
		rc = -1, snprintf(msg, cap, "no PEM certificate");
	else if (!pk)
		rc = -2, snprintf(msg, cap, "no PEM private key (or it is encrypted)");
	else if (X509_check_private_key(x, pk) != 1)
		rc = -3, snprintf(msg, cap, "the key does not match the certificate");
	ERR_clear_error();
	X509_free(x);
	EVP_PKEY_free(pk);
	return rc;
}

size_t gk_tls_pem_split(const char *bundle, char **out, size_t max)
{
	static const char BEGIN[] = "-----BEGIN CERTIFICATE-----", END[] = "-----END CERTIFICATE-----";
	size_t n = 0;
	const char *p = bundle;
	while (p && n < max && (p = strstr(p, BEGIN))) {
		const char *e = strstr(p, END);
		if (!e)
			break;
		e += sizeof(END) - 1;
		size_t len = (size_t)(e - p);
		char *s = malloc(len + 2);
		if (!s)
			break;
		memcpy(s, p, len);
		s[len] = '\n';
		s[len + 1] = 0;
		out[n++] = s;
		p = e;
	}
	return n;
}
