/* The runtime directory: where every service's socket lives. 0700 and ours,
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

int gk_sup_rundir_prepare(const char *dir, int *lock_fd, gk_err *err)
{
	*lock_fd = -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return gk_err_set(err, GK_PERMISSION_DENIED, "runtime dir %s: %s", dir, strerror(errno));
	struct stat st;
	if (lstat(dir, &st) < 0)
		return gk_err_set(err, GK_INTERNAL, "runtime dir %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return gk_err_set(err, GK_FAILED_PRECONDITION, "runtime dir %s: not a directory", dir);
	if (st.st_uid != geteuid())
		return gk_err_set(err, GK_PERMISSION_DENIED, "runtime dir %s: owned by uid %u, not by us",
				  dir, (unsigned)st.st_uid);
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
