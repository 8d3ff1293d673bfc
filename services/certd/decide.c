/* gpukmm-certd — the decision (see decide.h). */
#include "decide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/https.h"

const char *cd_act_name(enum cd_act a)
{
	static const char *const n[] = { "nothing", "issue", "stage", "publish", "mark", "switch", "prune" };
	return (unsigned)a < sizeof(n) / sizeof(n[0]) ? n[a] : "?";
}

void cd_plan_free(cd_plan *p)
{
	free(p->bundle);
	p->bundle = NULL;
}

typedef struct cas {
	char *v[CD_MAX_CAS];
	size_t n;
} cas;

static void cas_free(cas *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->v[i]);
	b->n = 0;
}

/* The index of the CA of b that issued crt, or -1. */
static int issuer(const cas *b, const char *crt)
{
	for (size_t i = 0; crt && i < b->n; i++)
		if (gk_tls_cert_issued_by(crt, b->v[i]))
			return (int)i;
	return -1;
}

bool cd_pair_ok(const cd_cfg *c, const char *crt, const char *key, const char *bundle, bool names, int64_t now,
		char *why, size_t cap)
{
	char buf[160];
	gk_tls_info in;
	if (!why) {
		why = buf;
		cap = sizeof(buf);
	}
	if (!crt || !key) {
		snprintf(why, cap, "no %s", !crt ? "certificate" : "key");
		return false;
	}
	if (gk_tls_pair_check(crt, key, why, cap) != 0)
		return false;
	if (gk_tls_cert_info(crt, &in) != 0) {
		snprintf(why, cap, "the certificate does not parse");
		return false;
	}
	if (now >= in.not_after) {
		snprintf(why, cap, "the certificate has expired");
		return false;
	}
	if (now < in.not_before) {
		snprintf(why, cap, "the certificate is not valid yet");
		return false;
	}
	for (size_t i = 0; names && i < c->n_dns; i++)
		if (!gk_tls_cert_has_dns(crt, c->dns[i])) {
			snprintf(why, cap, "the certificate is not valid for %s", c->dns[i]);
			return false;
		}
	if (bundle) {
		cas b = { 0 };
		b.n = gk_tls_pem_split(bundle, b.v, CD_MAX_CAS);
		int i = issuer(&b, crt);
		cas_free(&b);
		if (i < 0) {
			snprintf(why, cap, "the certificate was not issued by a CA of ca.crt");
			return false;
		}
	}
	return true;
}

/* The CAs of b at the given indexes (-1 skipped, duplicates once), as one PEM text. */
static char *keep(const cas *b, int i, int j)
{
	size_t len = 1;
	if (i >= 0)
		len += strlen(b->v[i]);
	if (j >= 0 && j != i)
		len += strlen(b->v[j]);
	char *s = malloc(len);
	if (!s)
		return NULL;
	s[0] = 0;
	if (i >= 0)
		strcat(s, b->v[i]);
	if (j >= 0 && j != i)
		strcat(s, b->v[j]);
	return s;
}

int cd_decide(const cd_cfg *c, const cd_secret *s, const cd_conf *confs, size_t n_confs, bool leader,
	      int64_t now, cd_plan *p)
{
	memset(p, 0, sizeof(*p));
	if (!s->exists) {
		snprintf(p->why, sizeof(p->why), "the Secret does not exist (deploy/default ships it; with "
			 "cert-manager it comes from the Certificate)");
		return 0;
	}
	char why[160] = "";
	/* what any replica serves: the Secret's pair, whoever made it */
	bool usable = cd_pair_ok(c, s->tls_crt, s->tls_key, NULL, false, now, why, sizeof(why));
	p->serve = usable;
	if (!leader || !s->ours) {
		if (!usable)
			snprintf(p->why, sizeof(p->why), "tls.crt/tls.key not served: %s", why);
		else
			snprintf(p->why, sizeof(p->why), "serving the Secret's certificate%s",
				 s->ours ? "" : " (made by someone else: left alone)");
		return 0;
	}
	/* the leader, on a Secret that is ours */
	cas b = { 0 };
	b.n = s->ca_crt ? gk_tls_pem_split(s->ca_crt, b.v, CD_MAX_CAS) : 0;
	int rc = 0;
	bool stale_confs = false, trusted = true;
	for (size_t i = 0; i < n_confs && i < CD_MAX_CONFS; i++)
		if (confs[i].exists && !confs[i].injected) {
			if (!confs[i].current)
				p->patch[i] = stale_confs = true;
			trusted = trusted && confs[i].trusts;
		}
	bool cur_ok = cd_pair_ok(c, s->tls_crt, s->tls_key, s->ca_crt, false, now, why, sizeof(why));
	char nwhy[160] = "";
	bool has_next = s->next_crt || s->next_key;
	bool next_ok = has_next && cd_pair_ok(c, s->next_crt, s->next_key, s->ca_crt, true, now, nwhy, sizeof(nwhy));
	/* the leader serves a pair once the configurations trust it (a fresh one: after PUBLISH) */
	p->serve = cur_ok && trusted;
	if (!cur_ok) {
		if (next_ok) {
			p->act = CD_SWITCH;
			snprintf(p->why, sizeof(p->why), "the serving certificate is not usable (%s): switching to "
				 "the staged one", why);
		} else {
			p->act = CD_ISSUE;
			snprintf(p->why, sizeof(p->why), "no usable serving certificate (%s): making a CA and one", why);
		}
		goto out;
	}
	if (stale_confs) {
		p->act = CD_PUBLISH;
		snprintf(p->why, sizeof(p->why), "the webhook configurations' caBundle differs from ca.crt");
		goto out;
	}
	gk_tls_info cur;
	gk_tls_cert_info(s->tls_crt, &cur);
	int ci = issuer(&b, s->tls_crt);
	if (has_next) {
		if (!next_ok) {
			p->act = CD_STAGE;
			p->bundle = keep(&b, ci, -1);
			rc = p->bundle ? 0 : -1;
			snprintf(p->why, sizeof(p->why), "the staged certificate is not usable (%s): staging another",
				 nwhy);
		} else if (!s->published) {
			p->act = CD_MARK;
			snprintf(p->why, sizeof(p->why), "every webhook configuration trusts the staged certificate's CA");
		} else if (now < s->published + c->propagation_s) {
			p->wake = s->published + c->propagation_s;
			snprintf(p->why, sizeof(p->why), "rotating: the new CA propagates to the API servers until %lld",
				 (long long)p->wake);
		} else {
			p->act = CD_SWITCH;
			snprintf(p->why, sizeof(p->why), "rotating: serving the staged certificate");
		}
		goto out;
	}
	if (s->switched && now < s->switched + c->grace_s) {
		p->wake = s->switched + c->grace_s;
		snprintf(p->why, sizeof(p->why), "rotated: every replica picks the new certificate up until %lld, then "
			 "the old CA goes", (long long)p->wake);
		goto out;
	}
	if (s->switched || b.n > 1) {
		p->act = CD_PRUNE;
		p->bundle = keep(&b, ci, -1);
		rc = p->bundle ? 0 : -1;
		snprintf(p->why, sizeof(p->why), "ca.crt keeps only the CA of the serving certificate");
		goto out;
	}
	bool names = cd_pair_ok(c, s->tls_crt, s->tls_key, NULL, true, now, why, sizeof(why));
	int64_t due = cur.not_after - c->renew_before_s;
	if (now >= due || !names) {
		p->act = CD_STAGE;
		p->bundle = keep(&b, ci, -1);
		rc = p->bundle ? 0 : -1;
		if (!names)
			snprintf(p->why, sizeof(p->why), "rotating: %s", why);
		else
			snprintf(p->why, sizeof(p->why), "rotating: the serving certificate expires at %lld",
				 (long long)cur.not_after);
		goto out;
	}
	p->wake = due;
	snprintf(p->why, sizeof(p->why), "serving; the next rotation starts at %lld", (long long)due);
out:
	cas_free(&b);
	return rc;
}
