/* Exec credential plugins (client.authentication.k8s.io ExecCredential):
 * run the command a kubeconfig user names, read its credential. No shell:
 * posix_spawn(p) with an argv; stdin /dev/null (we are never interactive),
 * stdout read (bounded) as the ExecCredential, stderr forwarded line by line
 * to our log; the run is bounded in time and the plugin killed past it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "gpukmm/kube.h"
#include "gpukmm/log.h"

extern char **environ;

#define OUT_MAX (1u << 20)
#define ERRLINE_MAX 512

void gk_kube_cred_free(gk_kube_cred *c)
{
	if (!c)
		return;
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	free(c->cert.data);
	if (c->key.data) {
		explicit_bzero(c->key.data, c->key.len);
		free(c->key.data);
	}
	memset(c, 0, sizeof *c);
}

/* ---- time ------------------------------------------------------------------- */

int64_t gk_kube_parse_time(const char *s)
{
	struct tm tm = {0};
	if (!s)
		return -1;
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -1;
	int64_t ms = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (digits < 3) {
				ms = ms * 10 + (*p - '0');
				digits++;
			}
		if (!digits)
			return -1;
		while (digits++ < 3)
			ms *= 10;
	}
	int64_t off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
			return -1;
		off = (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	int64_t t = (int64_t)timegm(&tm);
	return (t - off) * 1000 + ms;
}

/* ---- the plugin's answer (pure) -------------------------------------------- */

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

static int pem_blob(gk_kube_blob *b, const char *pem)
{
	b->len = strlen(pem);
	b->data = malloc(b->len + 1);
	if (!b->data)
		return -1;
	memcpy(b->data, pem, b->len + 1);
	return 0;
}

int gk_kube_exec_parse(const gk_kube_exec *x, const char *out, size_t len, gk_kube_cred *cred,
		       gk_err *err)
{
	memset(cred, 0, sizeof *cred);
#define BAD(...) gk_err_set(err, GK_INVALID_ARGUMENT, "exec plugin \"%s\" of user \"%s\": " __VA_ARGS__)
	cJSON *j = cJSON_ParseWithLength(out, len);
	int rc = 0;
	if (!cJSON_IsObject(j)) {
		rc = BAD("its output is not a JSON ExecCredential", x->command, x->user);
		goto out;
	}
	const char *kind = jstr(j, "kind"), *api = jstr(j, "apiVersion");
	if (!kind || strcmp(kind, "ExecCredential")) {
		rc = BAD("its output is kind \"%s\", not ExecCredential", x->command, x->user,
			 kind ? kind : "");
		goto out;
	}
	if (!api || strcmp(api, x->api_version)) {
		rc = BAD("its output has apiVersion \"%s\", the kubeconfig asks for \"%s\"", x->command,
			 x->user, api ? api : "", x->api_version);
		goto out;
	}
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
	if (!cJSON_IsObject(st)) {
		rc = BAD("its output has no status", x->command, x->user);
		goto out;
	}
	const char *tok = jstr(st, "token"), *crt = jstr(st, "clientCertificateData"),
		   *key = jstr(st, "clientKeyData"), *exp = jstr(st, "expirationTimestamp");
	if (!!crt != !!key) {
		rc = BAD("status has clientCertificateData and clientKeyData only together", x->command,
			 x->user);
		goto out;
	}
	if (!tok && !crt) {
		rc = BAD("status has neither a token nor clientCertificateData/clientKeyData", x->command,
			 x->user);
		goto out;
	}
	if (tok && strpbrk(tok, "\r\n")) {
		rc = BAD("the token spans lines", x->command, x->user);
		goto out;
	}
	if (exp && (cred->expiry_ms = gk_kube_parse_time(exp)) < 0) {
		cred->expiry_ms = 0;
		rc = BAD("expirationTimestamp \"%.40s\" is not an RFC 3339 time", x->command, x->user, exp);
		goto out;
	}
	if ((tok && !(cred->token = strdup(tok))) || (crt && (pem_blob(&cred->cert, crt) || pem_blob(&cred->key, key))))
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
out:
#undef BAD
	if (j) {
		/* the credential was in it */
		cJSON *st2 = cJSON_GetObjectItemCaseSensitive(j, "status");
		cJSON *t = cJSON_GetObjectItemCaseSensitive(st2, "token");
		if (cJSON_IsString(t))
			explicit_bzero(t->valuestring, strlen(t->valuestring));
		t = cJSON_GetObjectItemCaseSensitive(st2, "clientKeyData");
		if (cJSON_IsString(t))
			explicit_bzero(t->valuestring, strlen(t->valuestring));
	}
	cJSON_Delete(j);
	if (rc)
		gk_kube_cred_free(cred);
	return rc;
}

/* ---- KUBERNETES_EXEC_INFO ---------------------------------------------------- */

static char *b64(const unsigned char *d, size_t n)
{
	char *o = malloc(4 * ((n + 2) / 3) + 1);
	if (o)
		EVP_EncodeBlock((unsigned char *)o, d, (int)n);
	return o;
}

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	unsigned char *buf = malloc(OUT_MAX);
	*n = buf ? fread(buf, 1, OUT_MAX, f) : 0;
	fclose(f);
	return buf;
}

char *gk_kube_exec_info(const gk_kube_config *c)
{
	const gk_kube_exec *x = c->exec;
	cJSON *j = cJSON_CreateObject(), *spec = NULL, *cl = NULL;
	bool ok = j && cJSON_AddStringToObject(j, "apiVersion", x->api_version) &&
		  cJSON_AddStringToObject(j, "kind", "ExecCredential") &&
		  (spec = cJSON_AddObjectToObject(j, "spec")) && cJSON_AddFalseToObject(spec, "interactive");
	if (ok && x->provide_cluster_info) {
		ok = (cl = cJSON_AddObjectToObject(spec, "cluster")) &&
		     cJSON_AddStringToObject(cl, "server", c->server);
		if (ok && c->tls_server_name)
			ok = cJSON_AddStringToObject(cl, "tls-server-name", c->tls_server_name);
		if (ok && c->insecure)
			ok = cJSON_AddTrueToObject(cl, "insecure-skip-tls-verify");
		size_t n = 0;
		unsigned char *ca = c->ca.data ? c->ca.data : c->ca_file ? slurp(c->ca_file, &n) : NULL;
		if (c->ca.data)
			n = c->ca.len;
		if (ok && ca) {
			char *e = b64(ca, n);
			ok = e && cJSON_AddStringToObject(cl, "certificate-authority-data", e);
			free(e);
		}
		if (ca != c->ca.data)
			free(ca);
	}
	char *s = ok ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	return s;
}

/* ---- running it --------------------------------------------------------------- */

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* environ + the plugin's env (which wins) + KUBERNETES_EXEC_INFO. */
static char **build_env(const gk_kube_exec *x, const char *info)
{
	size_t nb = 0, nx = 0;
	while (environ && environ[nb])
		nb++;
	while (x->env && x->env[nx])
		nx++;
	char **v = calloc(nb + nx + 2, sizeof *v);
	if (!v)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < nb; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t kl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		bool over = !strncmp(environ[i], "KUBERNETES_EXEC_INFO=", 21);
		for (size_t k = 0; !over && k < nx; k++)
			over = !strncmp(environ[i], x->env[k], kl + 1);
		if (!over)
			v[n++] = environ[i];
	}
	for (size_t k = 0; k < nx; k++)
		v[n++] = x->env[k];
	v[n++] = (char *)info;
	return v;
}

/* Forward whole lines of the plugin's stderr to our log. */
static void err_lines(const gk_kube_exec *x, char *buf, size_t *len, bool flush)
{
	char *start = buf, *nl;
	while ((nl = memchr(start, '\n', *len - (size_t)(start - buf)))) {
		*nl = 0;
		if (nl > start)
			GK_WARN("exec plugin %s (user %s): %s", x->command, x->user, start);
		start = nl + 1;
	}
	size_t rest = *len - (size_t)(start - buf);
	if (flush || rest == ERRLINE_MAX) {
		if (rest)
			GK_WARN("exec plugin %s (user %s): %.*s", x->command, x->user, (int)rest, start);
		rest = 0;
	}
	memmove(buf, start, rest);
	*len = rest;
}

int gk_kube_exec_run(const gk_kube_config *c, gk_kube_cred *out, gk_err *err)
{
	const gk_kube_exec *x = c->exec;
	memset(out, 0, sizeof *out);
	if (!x)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "no exec plugin configured");
	int timeout = x->timeout_ms > 0 ? x->timeout_ms : GK_KUBE_EXEC_TIMEOUT_MS;
	char *info = NULL, *infoenv = NULL;
	char **envp = NULL, **argv = NULL;
	int po[2] = {-1, -1}, pe[2] = {-1, -1};
	int rc = 0;
	size_t na = 0;
	while (x->args && x->args[na])
		na++;
	if ((info = gk_kube_exec_info(c)) && asprintf(&infoenv, "KUBERNETES_EXEC_INFO=%s", info) < 0)
		infoenv = NULL; /* undefined after a failed asprintf */
	if (!infoenv || !(envp = build_env(x, infoenv)) || !(argv = calloc(na + 2, sizeof *argv))) {
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		goto done;
	}
	argv[0] = x->command;
	for (size_t i = 0; i < na; i++)
		argv[i + 1] = x->args[i];
	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "exec plugin: pipe: %s", strerror(errno));
		goto done;
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	/* our loops block signals for signalfd: the plugin gets a clean slate */
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	sigdelset(&all, SIGKILL);
	sigdelset(&all, SIGSTOP);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&at, 0);
	pid_t pid;
	int se = strchr(x->command, '/') ? posix_spawn(&pid, x->command, &fa, &at, argv, envp)
					 : posix_spawnp(&pid, x->command, &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(po[1]);
	close(pe[1]);
	po[1] = pe[1] = -1;
	if (se) {
		rc = gk_err_set(err, se == ENOENT ? GK_NOT_FOUND : GK_FAILED_PRECONDITION,
				"kubeconfig user \"%s\": cannot run exec plugin \"%s\": %s%s%s", x->user,
				x->command, strerror(se), x->install_hint ? ". " : "",
				x->install_hint ? x->install_hint : "");
		goto done;
	}
	char *buf = malloc(OUT_MAX + 1), ebuf[ERRLINE_MAX];
	size_t len = 0, elen = 0;
	bool big = false, timed_out = false, exited = false;
	int64_t deadline = mono_ms() + timeout;
	/* the plugin's end is an fd too: one poll for output, errors and exit */
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pollfd pf[3] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}, {pidfd, POLLIN, 0}};
	while (buf && (pf[0].fd >= 0 || pf[1].fd >= 0 || (pidfd >= 0 && !exited))) {
		int64_t left = deadline - mono_ms();
		if (left <= 0) {
			timed_out = true;
			break;
		}
		int n = poll(pf, 3, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (pf[0].fd >= 0 && pf[0].revents) {
			char tmp[4096];
			ssize_t r = read(po[0], tmp, sizeof tmp);
			if (r <= 0 && !(r < 0 && errno == EINTR)) {
				pf[0].fd = -1;
			} else if (r > 0) {
				if (len + (size_t)r > OUT_MAX)
					big = true;
				else
					memcpy(buf + len, tmp, (size_t)r), len += (size_t)r;
			}
		}
		if (pf[1].fd >= 0 && pf[1].revents) {
			ssize_t r = read(pe[0], ebuf + elen, sizeof ebuf - elen);
			if (r <= 0 && !(r < 0 && errno == EINTR))
				pf[1].fd = -1;
			else if (r > 0) {
				elen += (size_t)r;
				err_lines(x, ebuf, &elen, false);
			}
		}
		if (pf[2].fd >= 0 && pf[2].revents) {
			exited = true;
			pf[2].fd = -1;
		}
	}
	err_lines(x, ebuf, &elen, true);
	if (timed_out || !buf) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pidfd >= 0)
		close(pidfd);
	if (!buf)
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	else if (timed_out)
		rc = gk_err_set(err, GK_DEADLINE_EXCEEDED,
				"kubeconfig user \"%s\": exec plugin \"%s\" did not finish within %d ms: killed",
				x->user, x->command, timeout);
	else if (big)
		rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED,
				"kubeconfig user \"%s\": exec plugin \"%s\" wrote more than %u bytes", x->user,
				x->command, OUT_MAX);
	else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char how[64];
		if (WIFEXITED(st))
			snprintf(how, sizeof how, "exited with code %d", WEXITSTATUS(st));
		else
			snprintf(how, sizeof how, "was killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		rc = gk_err_set(err, GK_UNAUTHENTICATED, "kubeconfig user \"%s\": exec plugin \"%s\" %s%s%s",
				x->user, x->command, how,
				WIFEXITED(st) && WEXITSTATUS(st) == 127 && x->install_hint ? ". " : "",
				WIFEXITED(st) && WEXITSTATUS(st) == 127 && x->install_hint ? x->install_hint : "");
	} else
		rc = gk_kube_exec_parse(x, buf, len, out, err);
	if (buf) {
		explicit_bzero(buf, len);
		free(buf);
	}
done:
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
	}
	free(argv);
	free(envp);
	free(infoenv);
	free(info);
	return rc;
}
