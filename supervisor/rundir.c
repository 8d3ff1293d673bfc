/* The runtime directory: where every service's socket lives. 0700, ours or
 * handed to the one service user (see gk_sup_rundir_owner in sup.h for why),
 * locked against a second supervisor, emptied of stale sockets before any
 * service starts (a socket file left by a crash would make bind fail). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sup.h"

static bool is_sock_name(const char *n)
{
	size_t l = strlen(n);
	return l > 5 && strcmp(n + l - 5, ".sock") == 0;
}

void gk_sup_rundir_clean(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (is_sock_name(e->d_name))
			unlinkat(dfd, e->d_name, 0);
	closedir(d);
}

int gk_sup_rundir_owner(const gk_sup_conf *c, long *uid, long *gid, gk_err *err)
{
	*uid = *gid = -1;
	const char *first = NULL;
	for (size_t i = 0; i < c->n_svcs; i++) {
		const gk_sup_svc_conf *s = &c->svcs[i];
		if (s->uid < 0)
			continue;   /* keeps the supervisor's uid: reaches the dir anyway */
		long g = s->gid >= 0 ? s->gid : s->uid;   /* as the spawn drops it */
		if (!first) {
			first = s->name;
			*uid = s->uid;
			*gid = g;
		} else if (s->uid != *uid || g != *gid) {
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "services[%zu].user: service '%s' runs as %ld:%ld but '%s' as %ld:%ld; "
					  "services that drop privileges must share one uid:gid (the runtime "
					  "dir is handed to it)", i, s->name, s->uid, g, first, *uid, *gid);
		}
	}
	return 0;
}

int gk_sup_rundir_prepare(const char *dir, long owner_uid, long owner_gid, int *lock_fd, gk_err *err)
{
	*lock_fd = -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return gk_err_set(err, GK_PERMISSION_DENIED, "runtime dir %s: %s", dir, strerror(errno));
	struct stat st;
	if (lstat(dir, &st) < 0)
		return gk_err_set(err, GK_INTERNAL, "runtime dir %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return gk_err_set(err, GK_FAILED_PRECONDITION, "runtime dir %s: not a directory", dir);
	if (st.st_uid != geteuid() && (owner_uid < 0 || st.st_uid != (uid_t)owner_uid))
		return gk_err_set(err, GK_PERMISSION_DENIED, "runtime dir %s: owned by uid %u, not by us%s",
				  dir, (unsigned)st.st_uid, owner_uid >= 0 ? " nor by the services' user" : "");
	if (owner_uid >= 0 && (st.st_uid != (uid_t)owner_uid || st.st_gid != (gid_t)owner_gid) &&
	    lchown(dir, (uid_t)owner_uid, (gid_t)owner_gid) < 0)
		return gk_err_set(err, GK_PERMISSION_DENIED, "runtime dir %s: chown %ld:%ld (services' user): %s",
				  dir, owner_uid, owner_gid, strerror(errno));
	if ((st.st_mode & 07777) != 0700 && chmod(dir, 0700) < 0)
		return gk_err_set(err, GK_PERMISSION_DENIED, "runtime dir %s: chmod 0700: %s", dir,
				  strerror(errno));
	char lock[PATH_MAX];
	if (snprintf(lock, sizeof(lock), "%s/gpukmm.lock", dir) >= (int)sizeof(lock))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "runtime dir %s: path too long", dir);
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return gk_err_set(err, GK_PERMISSION_DENIED, "%s: %s", lock, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(fd);
		if (e == EWOULDBLOCK)
			return gk_err_set(err, GK_ALREADY_EXISTS,
					  "runtime dir %s is in use by another gpukmm", dir);
		return gk_err_set(err, GK_INTERNAL, "%s: flock: %s", lock, strerror(e));
	}
	gk_sup_rundir_clean(dir);
	*lock_fd = fd;
	return 0;
}

char *gk_sup_rundir_default(void)
{
	const char *rd = getenv("RUNTIME_DIRECTORY");   /* systemd RuntimeDirectory= */
	char *out = NULL;
	if (rd && *rd) {
		const char *colon = strchr(rd, ':');   /* several: the first */
		return strndup(rd, colon ? (size_t)(colon - rd) : strlen(rd));
	}
	if (geteuid() == 0)
		return strdup("/run/gpukmm");
	const char *x = getenv("XDG_RUNTIME_DIR");
	if (x && *x) {
		if (asprintf(&out, "%s/gpukmm", x) < 0)
			return NULL;
		return out;
	}
	const char *t = getenv("TMPDIR");
	if (asprintf(&out, "%s/gpukmm-%u", t && *t ? t : P_tmpdir, (unsigned)geteuid()) < 0)
		return NULL;
	return out;
}
