/* lib/probe — bounded, defensive reads below the probe root. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe_int.h"

static int join(char *out, size_t cap, const char *root, const char *rel)
{
	while (*rel == '/')
		rel++;
	size_t rl = strlen(root);
	while (rl > 1 && root[rl - 1] == '/')
		rl--;
	int n;
	if (rl == 1 && root[0] == '/')
		n = snprintf(out, cap, "/%s", rel);
	else
		n = snprintf(out, cap, "%.*s/%s", (int)rl, root, rel);
	return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

static int open_error(int e, gk_err *err)
{
	if (e == ENOENT || e == ENOTDIR)
		return gk_err_set(err, GK_NOT_FOUND, "does not exist");
	return gk_err_set(err, e == EACCES || e == EPERM ? GK_PERMISSION_DENIED : GK_UNAVAILABLE,
			  "cannot be opened: %s", strerror(e));
}

/* O_NONBLOCK: a FIFO planted in an untrusted tree must not hang us. */
#define READ_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)

/* Reads the regular file open on fd (closed here) up to cap bytes. Small
 * files (sysfs attributes) are read into a stack buffer first, so the common
 * case costs one exact allocation instead of cap + 1 bytes. */
static int read_fd(int fd, size_t cap, char **buf, size_t *len, gk_err *err)
{
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return gk_err_set(err, GK_FAILED_PRECONDITION, "is not a regular file");
	}
	char small[4096];
	size_t scap = cap + 1 < sizeof small ? cap + 1 : sizeof small;
	char *b = small;
	size_t bcap = scap, got = 0;
	for (;;) {
		if (got == bcap) {
			if (b != small) /* a big buffer is cap + 1 bytes: full means oversized (checked below) */
				break;
			/* the small buffer is full: continue in a buffer of the whole cap */
			char *nb = malloc(cap + 1);
			if (!nb) {
				close(fd);
				return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
			}
			memcpy(nb, small, got);
			b = nb;
			bcap = cap + 1;
		}
		/* read one byte beyond the cap to detect an oversized file */
		ssize_t n = read(fd, b + got, bcap - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			if (b != small)
				free(b);
			return gk_err_set(err, GK_UNAVAILABLE, "read failed: %s", strerror(e));
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > cap) {
			close(fd);
			if (b != small)
				free(b);
			return gk_err_set(err, GK_FAILED_PRECONDITION, "is larger than %zu bytes", cap);
		}
	}
	close(fd);
	if (b == small) {
		b = malloc(got + 1);
		if (!b)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		memcpy(b, small, got);
	}
	b[got] = 0;
	*buf = b;
	*len = got;
	return GK_OK;
}

int gk_probe_read(const char *root, const char *rel, size_t cap, char **buf, size_t *len, gk_err *err)
{
	char path[PATH_MAX];
	*buf = NULL;
	*len = 0;
	if (join(path, sizeof path, root ? root : "/", rel))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "path too long");
	int fd = open(path, READ_FLAGS);
	if (fd < 0)
		return open_error(errno, err);
	return read_fd(fd, cap, buf, len, err);
}

/* The name of rel below the open directory of gkp_dir_enter, or NULL when rel
 * is not below it. */
static const char *in_dir(const gk_probe_run_t *pr, const char *rel)
{
	if (pr->dir_fd < 0 || strncmp(rel, pr->dir_rel, pr->dir_len) || rel[pr->dir_len] != '/')
		return NULL;
	const char *name = rel + pr->dir_len + 1;
	return *name && !strchr(name, '/') ? name : NULL;
}

void gkp_dir_enter(gk_probe_run_t *pr, const char *rel)
{
	gkp_dir_leave(pr);
	char p[PATH_MAX];
	size_t n = strlen(rel);
	if (n >= sizeof pr->dir_rel || gkp_path(pr, p, sizeof p, rel))
		return;
	pr->dir_fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pr->dir_fd < 0)
		return; /* every read below it then reports its own error by path */
	memcpy(pr->dir_rel, rel, n + 1);
	pr->dir_len = n;
}

void gkp_dir_leave(gk_probe_run_t *pr)
{
	if (pr->dir_fd >= 0)
		close(pr->dir_fd);
	pr->dir_fd = -1;
	pr->dir_len = 0;
}

static int probe_read(const gk_probe_run_t *pr, const char *rel, size_t cap, char **buf, size_t *len, gk_err *err)
{
	const char *name = in_dir(pr, rel);
	if (!name)
		return gk_probe_read(pr->root, rel, cap, buf, len, err);
	*buf = NULL;
	*len = 0;
	int fd = openat(pr->dir_fd, name, READ_FLAGS);
	if (fd < 0)
		return open_error(errno, err);
	return read_fd(fd, cap, buf, len, err);
}

int gkp_path(const gk_probe_run_t *pr, char *out, size_t cap, const char *rel)
{
	return join(out, cap, pr->root, rel);
}

bool gkp_exists(const gk_probe_run_t *pr, const char *rel)
{
	char p[PATH_MAX];
	struct stat st;
	return gkp_path(pr, p, sizeof p, rel) == 0 && lstat(p, &st) == 0;
}

bool gkp_is_dir(const gk_probe_run_t *pr, const char *rel)
{
	char p[PATH_MAX];
	struct stat st;
	return gkp_path(pr, p, sizeof p, rel) == 0 && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int gkp_link_base(const gk_probe_run_t *pr, const char *rel, char *out, size_t cap)
{
	char p[PATH_MAX], t[PATH_MAX];
	const char *name = in_dir(pr, rel);
	ssize_t n;
	if (name)
		n = readlinkat(pr->dir_fd, name, t, sizeof t - 1);
	else if (gkp_path(pr, p, sizeof p, rel))
		return -1;
	else
		n = readlink(p, t, sizeof t - 1);
	if (n <= 0)
		return -1;
	t[n] = 0;
	while (n > 1 && t[n - 1] == '/')
		t[--n] = 0;
	const char *b = strrchr(t, '/');
	b = b ? b + 1 : t;
	if (!*b || strlen(b) >= cap)
		return -1;
	for (const char *q = b; *q; q++) /* a driver or device name: printable ASCII only */
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
			return -1;
	strcpy(out, b);
	return 0;
}

char *gkp_strdup(gk_probe_run_t *pr, const char *s)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		pr->oom = 1;
	return d;
}

int gkp_strv_add(gk_probe_run_t *pr, size_t *n, char ***v, size_t max, const char *s)
{
	if (*n >= max)
		return -1;
	char **nv = realloc(*v, (*n + 1) * sizeof **v);
	if (!nv) {
		pr->oom = 1;
		return -1;
	}
	*v = nv;
	char *d = gkp_strdup(pr, s);
	if (!d)
		return -1;
	nv[(*n)++] = d;
	return 0;
}

void gkp_problem(gk_probe_run_t *pr, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	Gpukmm__NodeReport *r = pr->r;
	if (r->n_problems + 1 == GK_PROBE_MAX_PROBLEMS) {
		gkp_strv_add(pr, &r->n_problems, &r->problems, GK_PROBE_MAX_PROBLEMS,
			     "more problems were found; only the first ones are listed");
		return;
	}
	gkp_strv_add(pr, &r->n_problems, &r->problems, GK_PROBE_MAX_PROBLEMS, msg);
}

int gkp_read(gk_probe_run_t *pr, const char *rel, char **buf, size_t *len, bool problem_if_missing)
{
	return gkp_read_cap(pr, rel, pr->file_max, buf, len, problem_if_missing);
}

int gkp_read_cap(gk_probe_run_t *pr, const char *rel, size_t cap, char **buf, size_t *len,
		 bool problem_if_missing)
{
	gk_err e;
	int rc = probe_read(pr, rel, cap, buf, len, &e);
	if (rc == GK_RESOURCE_EXHAUSTED)
		pr->oom = 1;
	if (rc && (rc != GK_NOT_FOUND || problem_if_missing))
		gkp_problem(pr, "/%s is unreadable: it %s", rel, e.msg);
	return rc;
}

int gkp_read_line(gk_probe_run_t *pr, const char *rel, char *out, size_t cap)
{
	char *b;
	size_t n;
	int rc = gkp_read(pr, rel, &b, &n, false);
	if (rc)
		return rc;
	gk_err e;
	rc = gk_probe_parse_line(b, n, out, cap, &e);
	free(b);
	if (rc)
		gkp_problem(pr, "/%s is unreadable: it %s", rel, e.msg);
	return rc;
}

static int read_hex(gk_probe_run_t *pr, const char *rel, uint32_t max, uint32_t *out, bool problem_if_missing)
{
	char *b;
	size_t n;
	int rc = gkp_read(pr, rel, &b, &n, problem_if_missing);
	if (rc)
		return rc;
	gk_err e;
	rc = gk_probe_parse_hex(b, n, max, out, &e);
	free(b);
	if (rc)
		gkp_problem(pr, "/%s is unreadable: it %s", rel, e.msg);
	return rc;
}

int gkp_read_hex(gk_probe_run_t *pr, const char *rel, uint32_t max, uint32_t *out)
{
	return read_hex(pr, rel, max, out, false);
}

int gkp_read_hex_req(gk_probe_run_t *pr, const char *rel, uint32_t max, uint32_t *out)
{
	return read_hex(pr, rel, max, out, true);
}

int gkp_read_int(gk_probe_run_t *pr, const char *rel, int64_t min, int64_t max, int64_t *out)
{
	char *b;
	size_t n;
	int rc = gkp_read(pr, rel, &b, &n, false);
	if (rc)
		return rc;
	gk_err e;
	rc = gk_probe_parse_int(b, n, min, max, out, &e);
	free(b);
	if (rc)
		gkp_problem(pr, "/%s is unreadable: it %s", rel, e.msg);
	return rc;
}
