/* Profile options: the few service flags a real Deployment needs (webhook TLS
 * files and listen address, the watcher's leader election, services left out),
 * given to the supervisor as flags or env and appended to the args of the service
 * of that name. A flag whose service is not in the table is an error, never
 * ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup.h"

static gk_sup_svc_conf *find(gk_sup_conf *c, const char *name)
{
	for (size_t i = 0; i < c->n_svcs; i++)
		if (strcmp(c->svcs[i].name, name) == 0)
			return &c->svcs[i];
	return NULL;
}

/* Append the given (flag, value) pairs (value NULL = a flag alone) to s->args. */
static int append(gk_sup_svc_conf *s, const char *const *kv, size_t n, gk_err *err)
{
	char **a = realloc(s->args, (s->n_args + 2 * n + 1) * sizeof(char *));
	if (!a)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	s->args = a;
	for (size_t i = 0; i < 2 * n; i++) {
		if (!kv[i])
			continue;
		if (!(a[s->n_args] = strdup(kv[i]))) {
			a[s->n_args] = NULL;
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		}
		s->n_args++;
	}
	a[s->n_args] = NULL;
	return 0;
}

static bool set(const char *v) { return v && *v; }

static bool has_arg(const gk_sup_svc_conf *s, const char *a)
{
	for (size_t i = 0; i < s->n_args; i++)
		if (strcmp(s->args[i], a) == 0)
			return true;
	return false;
}

/* The webhook binary (not any service someone named "webhook"). */
static bool is_webhook(const gk_sup_svc_conf *s)
{
	const char *b = strrchr(s->binary, '/');
	return strcmp(b ? b + 1 : s->binary, "gpukmm-webhook") == 0;
}

/* A webhook without a serving certificate cannot serve (the API server only
 * calls HTTPS): it is not started, and the controller runs without it, saying
 * so once and in /readyz. A usage error restarted in a loop would stop the
 * healthy services too (ARCHITECTURE.md §5). */
static int webhook_without_tls(gk_sup_conf *c, const gk_sup_pflags *f, gk_err *err)
{
	for (size_t i = 0; i < c->n_svcs; i++) {
		gk_sup_svc_conf *s = &c->svcs[i];
		if (!is_webhook(s) || has_arg(s, "--tls-cert") || has_arg(s, "--insecure-http"))
			continue;
		if (set(f->webhook_listen))
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "--webhook-listen: the webhook has no serving certificate (give "
					  "--webhook-tls-cert and --webhook-tls-key)");
		snprintf(c->note, sizeof(c->note),
			 "%s: off: no serving certificate (--webhook-cert-dir, --webhook-tls-cert/--webhook-tls-key "
			 "or $GPUKMM_WEBHOOK_TLS_CERT/_KEY); ClusterPolicies are not defaulted or validated "
			 "by gpukmm", s->name);
		gk_sup_conf_remove(c, s->name);
		i--;
	}
	if (!c->n_svcs)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "the webhook has no serving certificate (give --webhook-tls-cert and "
				  "--webhook-tls-key) and nothing else is left to run");
	return 0;
}

/* --without a,b: each name must be in the table. */
static int without(gk_sup_conf *c, const char *list, gk_err *err)
{
	char buf[256];
	if (strlen(list) >= sizeof(buf))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "--without: too long");
	snprintf(buf, sizeof(buf), "%s", list);
	char *save = NULL;
	for (char *n = strtok_r(buf, ",", &save); n; n = strtok_r(NULL, ",", &save))
		if (gk_sup_conf_remove(c, n))
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "--without: no service named '%s' in this profile/config", n);
	if (!c->n_svcs)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "--without: no service left");
	return 0;
}

/* --webhook-cert-dir: certd writes the pair there, the webhook waits for it and
 * serves it. Without it, certd has nowhere to write: the profile's certd (not
 * one a config file gave a --dir) is left out. */
static int cert_dir(gk_sup_conf *c, const gk_sup_pflags *f, gk_err *err)
{
	gk_sup_svc_conf *cd = find(c, "certd");
	if (!set(f->webhook_cert_dir)) {
		if (cd && !has_arg(cd, "--dir"))
			gk_sup_conf_remove(c, "certd");
		return 0;
	}
	if (set(f->webhook_tls_cert) || set(f->webhook_tls_key))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "--webhook-cert-dir and --webhook-tls-cert/--webhook-tls-key exclude each other");
	gk_sup_svc_conf *w = find(c, "webhook");
	if (!cd && !w)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "--webhook-cert-dir: no service named 'certd' or 'webhook' in this profile/config");
	char crt[4096], key[4096];
	if ((size_t)snprintf(crt, sizeof(crt), "%s/tls.crt", f->webhook_cert_dir) >= sizeof(crt) ||
	    (size_t)snprintf(key, sizeof(key), "%s/tls.key", f->webhook_cert_dir) >= sizeof(key))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "--webhook-cert-dir: too long");
	int rc = 0;
	if (cd) {
		const char *kv[] = { "--dir", f->webhook_cert_dir };
		rc = append(cd, kv, 1, err);
	}
	if (!rc && w) {
		const char *kv[] = { "--tls-cert", crt, "--tls-key", key, "--tls-wait", NULL };
		rc = append(w, kv, 3, err);
	}
	return rc;
}

int gk_sup_conf_apply_pflags(gk_sup_conf *c, const gk_sup_pflags *f, gk_err *err)
{
	if (set(f->without)) {
		int rc = without(c, f->without, err);
		if (rc)
			return rc;
	}
	int rc0 = cert_dir(c, f, err);
	if (rc0)
		return rc0;
	bool wh = set(f->webhook_tls_cert) || set(f->webhook_tls_key) || set(f->webhook_listen);
	bool le = f->leader_elect || set(f->lease_name);
	if (set(f->webhook_tls_cert) != set(f->webhook_tls_key))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "--webhook-tls-cert and --webhook-tls-key go together");
	if (set(f->lease_name) && !f->leader_elect)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "--lease-name needs --leader-elect");
	gk_sup_svc_conf *w = wh ? find(c, "webhook") : NULL, *r = le ? find(c, "watcher") : NULL;
	if (wh && !w)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "--webhook-*: no service named 'webhook' in this profile/config");
	if (le && !r)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "--leader-elect: no service named 'watcher' in this profile/config");
	int rc = 0;
	if (w) {
		const char *kv[] = {
			set(f->webhook_tls_cert) ? "--tls-cert" : NULL, set(f->webhook_tls_cert) ? f->webhook_tls_cert : NULL,
			set(f->webhook_tls_key) ? "--tls-key" : NULL, set(f->webhook_tls_key) ? f->webhook_tls_key : NULL,
			set(f->webhook_listen) ? "--listen" : NULL, set(f->webhook_listen) ? f->webhook_listen : NULL,
		};
		if ((rc = append(w, kv, 3, err)))
			return rc;
	}
	if (r) {
		const char *kv[] = { "--leader-elect", NULL,
				     set(f->lease_name) ? "--lease-name" : NULL, set(f->lease_name) ? f->lease_name : NULL };
		if ((rc = append(r, kv, 2, err)))
			return rc;
	}
	return webhook_without_tls(c, f, err);
}
