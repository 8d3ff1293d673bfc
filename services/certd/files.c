/* gpukmm-certd — the serving pair as files (see files.h). */
#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATA "..data"

/* DIR/NAME into out[4096]; false when it does not fit: a path cut short names
 * another file, so nothing is ever read, written or removed through one. */
static bool join(char out[static 4096], const char *dir, const char *name)
{
	return (size_t)snprintf(out, 4096, "%s/%s", dir, name) < 4096;
}

static char *slurp(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap + 1);
	ssize_t r = 0;
	while (b && n < cap && (r = read(fd, b + n, cap - n)) > 0)
		n += (size_t)r;
	close(fd);
	if (!b || r < 0) {
		free(b);
		return NULL;
	}
	b[n] = 0;
	return b;
}

static bool same_file(const char *dir, const char *name, const char *want)
{
	char p[4096];
	if (!join(p, dir, name))
		return false;
	char *have = slurp(p);
	bool same = have && strcmp(have, want) == 0;
	if (have)
		explicit_bzero(have, strlen(have));
	free(have);
	return same;
}

bool cd_files_same(const char *dir, const char *crt, const char *key)
{
	return same_file(dir, "tls.crt", crt) && same_file(dir, "tls.key", key);
}

static int put(const char *dir, const char *name, const char *text, mode_t mode, gk_err *err)
{
	char p[4096];
	if (!join(p, dir, name))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s/%s: path too long", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0)
		return gk_err_set(err, GK_INTERNAL, "%s: %s", p, strerror(errno));
	size_t n = strlen(text), off = 0;
	while (off < n) {
		ssize_t w = write(fd, text + off, n - off);
		if (w <= 0) {
			int e = errno;
			close(fd);
			return gk_err_set(err, GK_INTERNAL, "%s: %s", p, strerror(e));
		}
		off += (size_t)w;
	}
	if (fsync(fd) != 0 || close(fd) != 0)
		return gk_err_set(err, GK_INTERNAL, "%s: %s", p, strerror(errno));
	return 0;
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char p[4096];
		if (join(p, dir, e->d_name))
			unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

/* DIR/name -> target, replacing whatever is there (atomically). */
static int link_over(const char *dir, const char *name, const char *target, gk_err *err)
{
	char p[4096], tmp[4096], tname[256];
	snprintf(tname, sizeof(tname), ".%s.tmp", name);
	if (!join(p, dir, name) || !join(tmp, dir, tname))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s/%s: path too long", dir, name);
	unlink(tmp);
	if (symlink(target, tmp) != 0 || rename(tmp, p) != 0) {
		int e = errno;
		unlink(tmp);
		return gk_err_set(err, GK_INTERNAL, "%s: %s", p, strerror(e));
	}
	return 0;
}

int cd_files_write(const char *dir, const char *crt, const char *key, const char *ca, gk_err *err)
{
	char nd[4096], old[4096] = "", data[4096];
	if (!join(nd, dir, "..pair-XXXXXX") || !join(data, dir, DATA))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: path too long", dir);
	if (!mkdtemp(nd))
		return gk_err_set(err, GK_INTERNAL, "%s: %s", dir, strerror(errno));
	int rc;
	if ((rc = put(nd, "tls.crt", crt, 0644, err)) || (rc = put(nd, "tls.key", key, 0600, err)) ||
	    (ca && (rc = put(nd, "ca.crt", ca, 0644, err)))) {
		rm_tree(nd);
		return rc;
	}
	ssize_t n = readlink(data, old, sizeof(old) - 1);
	old[n > 0 ? n : 0] = 0;
	const char *base = strrchr(nd, '/') + 1;
	/* the switch: one rename of ..data */
	if ((rc = link_over(dir, DATA, base, err))) {
		rm_tree(nd);
		return rc;
	}
	static const char *const names[] = { "tls.crt", "tls.key", "ca.crt" };
	for (size_t i = 0; i < (ca ? 3u : 2u); i++) {
		char want[64], p[4096], have[64];
		snprintf(want, sizeof(want), DATA "/%s", names[i]);
		if (!join(p, dir, names[i]))
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: path too long", dir);
		ssize_t l = readlink(p, have, sizeof(have) - 1);
		have[l > 0 ? l : 0] = 0;
		if (strcmp(have, want) != 0 && (rc = link_over(dir, names[i], want, err)))
			return rc;
	}
	if (old[0] && !strchr(old, '/') && strcmp(old, base) != 0) {
		char od[4096];
		if (join(od, dir, old))
			rm_tree(od);
	}
	return 0;
}
