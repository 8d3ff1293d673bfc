/* Starting one child. Everything the child needs (argv, envp, fds) is built in
 * the parent before fork(); between fork() and execve() the child makes only
 * system calls, so the threads of nng and libmicrohttpd in the parent cannot
 * leave it holding a lock. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sup.h"

enum step { ST_SIGNALS = 1, ST_SETSID, ST_PDEATHSIG, ST_PARENT_GONE, ST_FDS, ST_GID, ST_UID, ST_NNP, ST_EXEC };

static const char *step_name(int st)
{
	switch (st) {
	case ST_SIGNALS: return "reset signals";
	case ST_SETSID: return "setsid";
	case ST_PDEATHSIG: return "PR_SET_PDEATHSIG";
	case ST_PARENT_GONE: return "supervisor gone";
	case ST_FDS: return "set up stdin/stdout/stderr";
	case ST_GID: return "drop group";
	case ST_UID: return "drop user";
	case ST_NNP: return "PR_SET_NO_NEW_PRIVS";
	case ST_EXEC: return "exec";
	}
	return "?";
}

static _Noreturn void child_fail(int fd, int st)
{
	int msg[2] = { st, errno };
	ssize_t w = write(fd, msg, sizeof(msg));
	(void)w;
	_exit(127);
}

static _Noreturn void child(const gk_sup_spawn *sp, int errfd, pid_t parent)
{
	sigset_t none;
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);   /* fails harmlessly for the RT signals glibc reserves */
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		child_fail(errfd, ST_SIGNALS);
	if (setsid() < 0)
		child_fail(errfd, ST_SETSID);
	if (prctl(PR_SET_PDEATHSIG, sp->pdeath_signal, 0, 0, 0) < 0)
		child_fail(errfd, ST_PDEATHSIG);
	if (getppid() != parent) {     /* the supervisor died before PDEATHSIG was armed */
		errno = ESRCH;
		child_fail(errfd, ST_PARENT_GONE);
	}
	if (dup2(sp->null_fd, 0) < 0 || dup2(sp->out_fd, 1) < 0 || dup2(sp->out_fd, 2) < 0)
		child_fail(errfd, ST_FDS);
	/* every other descriptor disappears at exec (the error pipe must live until then) */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	/* a user without a group gets the group of the same number, and never
	 * keeps the supervisor's (root's) supplementary groups.
	 * Raw system calls, not glibc's setgroups/setgid/setuid: those broadcast
	 * the change to every thread of the process (__nptl_setxid), and in a
	 * child forked from our multithreaded supervisor (nng, libmicrohttpd)
	 * they can wait forever for a thread that only existed in the parent
	 * (seen: the child stuck in setxid_mark_thread). After fork this thread
	 * is the whole process, so the raw calls are exactly right. */
	long gid = sp->gid >= 0 ? sp->gid : sp->uid;
	if (gid >= 0 && (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setgid, (gid_t)gid) < 0))
		child_fail(errfd, ST_GID);
	if (sp->uid >= 0 && syscall(SYS_setuid, (uid_t)sp->uid) < 0)
		child_fail(errfd, ST_UID);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(errfd, ST_NNP);
	execve(sp->path, sp->argv, sp->envp);
	child_fail(errfd, ST_EXEC);
}

int gk_sup_spawn_child(const gk_sup_spawn *sp, pid_t *pid, gk_err *err)
{
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "pipe: %s", strerror(errno));
	pid_t parent = getpid();
	/* _Fork: no atfork handlers, no malloc locks taken in the parent (glibc >= 2.34):
	 * the child only makes system calls until exec */
	pid_t p = _Fork();
	if (p < 0) {
		int e = errno;
		close(ep[0]);
		close(ep[1]);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "fork: %s", strerror(e));
	}
	if (p == 0)
		child(sp, ep[1], parent);
	close(ep[1]);
	int msg[2];
	ssize_t n;
	do
		n = read(ep[0], msg, sizeof(msg));
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	if (n == (ssize_t)sizeof(msg)) {
		/* the child reported a failure and exits 127: reap it here */
		while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
			;
		return gk_err_set(err, msg[0] == ST_EXEC && msg[1] == ENOENT ? GK_NOT_FOUND : GK_INTERNAL,
				  "%s %s: %s", step_name(msg[0]), sp->path, strerror(msg[1]));
	}
	*pid = p;
	return 0;
}

/* ---- argv and environment ----------------------------------------------------- */

void gk_sup_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static char *expand(const char *in, const char *runtime_dir, const char *name)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	for (const char *p = in; *p;) {
		if (strncmp(p, "{runtime_dir}", 13) == 0) {
			fputs(runtime_dir, f);
			p += 13;
		} else if (strncmp(p, "{name}", 6) == 0) {
			fputs(name, f);
			p += 6;
		} else {
			fputc(*p++, f);
		}
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

char **gk_sup_build_argv(const gk_sup_svc_conf *s, const char *runtime_dir)
{
	char **v = calloc(s->n_args + 2, sizeof(char *));
	if (!v)
		return NULL;
	if (!(v[0] = strdup(s->path ? s->path : s->binary)))
		goto fail;
	for (size_t i = 0; i < s->n_args; i++)
		if (!(v[i + 1] = expand(s->args[i], runtime_dir, s->name)))
			goto fail;
	return v;
fail:
	gk_sup_strv_free(v);
	return NULL;
}

static bool has_key(const char *kv, const char *key)
{
	size_t n = strlen(key);
	return strncmp(kv, key, n) == 0 && kv[n] == '=';
}

static bool dropped(const char *kv, const gk_sup_svc_conf *s)
{
	/* systemd's: meant for the supervisor, never for a child */
	static const char *const sd[] = { "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
					  "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", NULL };
	/* set by the supervisor below */
	static const char *const ours[] = { "GPUKMM_RUNTIME_DIR", "GPUKMM_CONTROL", "GPUKMM_HEARTBEAT_MS",
					    "GPUKMM_TOKEN_FILE", "KUBECONFIG", NULL };
	for (const char *const *k = sd; *k; k++)
		if (has_key(kv, *k))
			return true;
	for (const char *const *k = ours; *k; k++)
		if (has_key(kv, *k))
			return true;
	for (size_t i = 0; i < s->n_env; i++) {
		const char *eq = strchr(s->env[i], '=');
		if (eq && strncmp(kv, s->env[i], (size_t)(eq - s->env[i]) + 1) == 0)
			return true;   /* the service's own env wins */
	}
	if (s->credentials)
		return false;
	/* no credentials: no path to any (HOME is replaced below) */
	static const char *const prefixes[] = { "AWS_", "AZURE_", "GOOGLE_", "CLOUDSDK_", NULL };
	for (const char *const *p = prefixes; *p; p++)
		if (strncmp(kv, *p, strlen(*p)) == 0)
			return true;
	return has_key(kv, "HOME") || has_key(kv, "XDG_CONFIG_HOME");
}

static bool own_env(const gk_sup_svc_conf *s, const char *key)
{
	for (size_t i = 0; i < s->n_env; i++)
		if (has_key(s->env[i], key))
			return true;
	return false;
}

char **gk_sup_build_env(const gk_sup_svc_conf *s, const gk_sup_env_in *in)
{
	size_t nb = 0;
	while (in->base && in->base[nb])
		nb++;
	char **v = calloc(nb + s->n_env + 7, sizeof(char *));
	if (!v)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < nb; i++)
		if (!dropped(in->base[i], s) && !(v[n++] = strdup(in->base[i])))
			goto fail;
	if (asprintf(&v[n++], "GPUKMM_RUNTIME_DIR=%s", in->runtime_dir) < 0 ||
	    asprintf(&v[n++], "GPUKMM_CONTROL=%s", in->control_url) < 0 ||
	    asprintf(&v[n++], "GPUKMM_HEARTBEAT_MS=%lld", (long long)s->heartbeat_ms) < 0)
		goto fail_last;
	if (s->credentials && in->token_file && asprintf(&v[n++], "GPUKMM_TOKEN_FILE=%s", in->token_file) < 0)
		goto fail_last;
	if (s->credentials && in->kubeconfig && asprintf(&v[n++], "KUBECONFIG=%s", in->kubeconfig) < 0)
		goto fail_last;
	/* not the runtime dir (writable, our sockets): a home nothing can be read from */
	if (!s->credentials && !own_env(s, "HOME") && !(v[n++] = strdup("HOME=/nonexistent")))
		goto fail;
	for (size_t i = 0; i < s->n_env; i++)
		if (!(v[n++] = strdup(s->env[i])))
			goto fail;
	return v;
fail_last:
	v[n - 1] = NULL;   /* asprintf leaves it undefined on failure */
fail:
	gk_sup_strv_free(v);
	return NULL;
}
