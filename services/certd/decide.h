/* gpukmm-certd — what to do with the webhook's serving certificate, decided
 * from what the API said (pure: no I/O, time passed in).
 *
 * The Secret (ARCHITECTURE.md §5, "The webhook's certificate") holds:
 *   tls.crt, tls.key    the serving pair every replica serves
 *   ca.crt              the CAs the webhook configurations trust (caBundle)
 *   next.crt, next.key  during a rotation: the pair that will serve next
 * and the annotations gpukmm.io/ca-published (the caBundle of every webhook
 * configuration held next.crt's CA from then on) and gpukmm.io/switched (when
 * tls.* became the new pair). Each serving certificate has a CA of its own,
 * made with it; the CA's key is dropped once it signed (nothing can sign
 * another certificate with it later).
 *
 * A rotation, one step per decision, each confirmed by a read before the next:
 *   STAGE    a new CA and pair into next.*, ca.crt = old CA + new CA
 *   PUBLISH  every webhook configuration's caBundle = ca.crt
 *   MARK     gpukmm.io/ca-published = now
 *   (wait `propagation`: API servers pick the new caBundle up)
 *   SWITCH   tls.* = next.*, gpukmm.io/switched = now
 *   (wait `grace`: every replica reads the Secret and serves the new pair)
 *   PRUNE    ca.crt = the new CA only; then PUBLISH again
 * so an API server always trusts the certificate any replica serves. */
#ifndef GPUKMM_CERTD_DECIDE_H
#define GPUKMM_CERTD_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CD_MAX_CONFS 4
#define CD_MAX_CAS 8
#define CD_MAX_DNS 4

/* The Secret as read (a successful GET). PEM texts; NULL = the key is absent. */
typedef struct cd_secret {
	bool exists;             /* false: the API answered 404 */
	bool ours;               /* annotation gpukmm.io/managed-by: gpukmm-certd */
	const char *tls_crt, *tls_key, *ca_crt, *next_crt, *next_key;
	int64_t published;       /* gpukmm.io/ca-published, unix seconds; 0 = none */
	int64_t switched;        /* gpukmm.io/switched */
} cd_secret;

/* A webhook configuration as read. */
typedef struct cd_conf {
	const char *name;
	bool exists;             /* false: 404 */
	bool injected;           /* cert-manager's CA injector owns its caBundle */
	bool current;            /* every webhook's caBundle is the Secret's ca.crt */
	bool trusts;             /* every webhook's caBundle has the CA of the Secret's tls.crt */
} cd_conf;

typedef struct cd_cfg {
	const char *cn;                      /* the serving certificate's subject */
	const char *dns[CD_MAX_DNS];         /* its DNS names; dns[0] is what the API server checks */
	size_t n_dns;
	int64_t validity_s;                  /* of a new CA and pair */
	int64_t renew_before_s;              /* rotate when less than this is left */
	int64_t propagation_s;               /* ca-published → switch */
	int64_t grace_s;                     /* switched → prune */
} cd_cfg;

enum cd_act {
	CD_NOTHING,
	CD_ISSUE,     /* no usable pair: a new CA and pair, ca.crt = that CA alone */
	CD_STAGE,     /* rotation: a new CA and pair into next.*, the CA added to ca.crt */
	CD_PUBLISH,   /* caBundle of the configurations in patch[] = ca.crt */
	CD_MARK,      /* gpukmm.io/ca-published = now */
	CD_SWITCH,    /* tls.* = next.*, gpukmm.io/switched = now */
	CD_PRUNE,     /* ca.crt = bundle (the CAs of tls.crt and next.crt) */
};

typedef struct cd_plan {
	enum cd_act act;
	bool serve;              /* tls.* is a usable pair: serve it (write the files) */
	bool patch[CD_MAX_CONFS];
	char *bundle;            /* CD_STAGE: the CAs to keep (the new one is added); CD_PRUNE:
				  * the new ca.crt. malloc'd: cd_plan_free */
	int64_t wake;            /* decide again at this time at the latest (unix s; 0 = no need) */
	char why[320];           /* for the log and /readyz: what and why */
} cd_plan;

/* The leader decides and writes; a follower (leader false) only serves.
 * n_confs <= CD_MAX_CONFS. Returns 0, or -1 out of memory. */
int cd_decide(const cd_cfg *c, const cd_secret *s, const cd_conf *confs, size_t n_confs, bool leader,
	      int64_t now, cd_plan *p);
void cd_plan_free(cd_plan *p);
const char *cd_act_name(enum cd_act a);

/* A pair is usable: the key matches, the certificate is valid at now and
 * names every DNS name of c (names false: not checked), and it was issued by
 * one of the CAs of bundle (NULL: not checked). why (may be NULL) says what is
 * wrong. */
bool cd_pair_ok(const cd_cfg *c, const char *crt, const char *key, const char *bundle, bool names, int64_t now,
		char *why, size_t cap);

#endif
