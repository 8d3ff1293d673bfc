/* The files the options name, checked before anything starts (and by
 * --check): a wrong path is a configuration error the operator fixes, never
 * a service that exits and is restarted until the restart intensity stops
 * everything. Read-only: nothing here is used afterwards. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpukmm/kube.h"
#include "gpukmm/https.h"
#include "sup.h"

static int readable(const char *what, const char *path, gk_err *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s %s: %s", what, path, strerror(errno));
	int rc = fstat(fd, &st);
	close(fd);
	if (rc == 0 && S_ISDIR(st.st_mode))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s %s: is a directory", what, path);
	return 0;
}

static bool executable(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

static int exec_found(const gk_kube_exec *x, const char *path_env, gk_err *err)
{
	if (strchr(x->command, '/')) {
		if (executable(x->command))
			return 0;
	} else {
		for (const char *p = path_env; p && *p;) {
			const char *colon = strchrnul(p, ':');
			char cand[4096];
			if (colon > p && snprintf(cand, sizeof(cand), "%.*s/%s", (int)(colon - p), p, x->command) <
					     (int)sizeof(cand) && executable(cand))
				return 0;
			p = *colon ? colon + 1 : colon;
		}
	}
	return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig user \"%s\": exec plugin \"%s\" is not an executable%s%s%s",
			  x->user, x->command, strchr(x->command, '/') ? "" : " in $PATH",
			  x->install_hint ? ". " : "", x->install_hint ? x->install_hint : "");
}

static int check_kubeconfig(const char *kubeconfig, const char *path_env, gk_err *err)
{
	gk_kube_config c;
	/* one file or a ':'-separated list, exactly as the services will read it */
	int rc = strchr(kubeconfig, ':') ? gk_kube_config_files(&c, kubeconfig, NULL, err)
					 : gk_kube_config_file(&c, kubeconfig, NULL, err);
	if (rc) {
		char m[sizeof(err->msg)];
		snprintf(m, sizeof(m), "%s", err->msg);
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s", m);
	}
	if (c.ca_file)
		rc = readable("kubeconfig certificate-authority", c.ca_file, err);
	if (!rc && c.cert_file)
		rc = readable("kubeconfig client-certificate", c.cert_file, err);
	if (!rc && c.key_file)
		rc = readable("kubeconfig client-key", c.key_file, err);
	if (!rc && c.token_file)
		rc = readable("kubeconfig tokenFile", c.token_file, err);
	if (!rc && c.exec)
		rc = exec_found(c.exec, path_env, err);
	gk_kube_config_free(&c);
	return rc;
}

static int check_pair(const char *cert_flag, const char *key_flag, const char *cert_path, const char *key_path,
		      gk_err *err)
{
	char msg[512];
	char *cert = NULL, *key = NULL;
	int rc;
	if ((rc = readable(cert_flag, cert_path, err)) || (rc = readable(key_flag, key_path, err)))
		return rc;
	if (gk_tls_load_pair(cert_path, key_path, &cert, &key, msg, sizeof(msg)))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s/%s: %s", cert_flag, key_flag, msg);
	free(cert);
	gk_tls_free_secret(key);
	return 0;
}

int gk_sup_check_files(const gk_sup_pflags *f, const char *token_file, const char *kubeconfig,
		       const char *path_env, gk_err *err)
{
	int rc;
	if (f && f->webhook_tls_cert && *f->webhook_tls_cert &&
	    (rc = check_pair("--webhook-tls-cert", "--webhook-tls-key", f->webhook_tls_cert, f->webhook_tls_key, err)))
		return rc;
	if (f && f->metrics_tls_cert && *f->metrics_tls_cert &&
	    (rc = check_pair("--metrics-tls-cert", "--metrics-tls-key", f->metrics_tls_cert, f->metrics_tls_key, err)))
		return rc;
	if (token_file && *token_file && (rc = readable("--token-file", token_file, err)))
		return rc;
	/* the pair is made later (certd): only the directory must be there */
	struct stat st;
	if (f && f->webhook_cert_dir && *f->webhook_cert_dir &&
	    (stat(f->webhook_cert_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "--webhook-cert-dir %s: not a directory", f->webhook_cert_dir);
	if (kubeconfig && *kubeconfig && (rc = check_kubeconfig(kubeconfig, path_env, err)))
		return rc;
	return 0;
}
