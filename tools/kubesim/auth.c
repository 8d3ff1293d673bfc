/* kubesim — bearer-token authentication. With --token-file the file is checked on
 * every request (one stat) and re-read when it changed (device, inode, size or
 * mtime), so a test can rotate the server's token like a real cluster rotates
 * service-account tokens: from then on only the new token is accepted. A file that
 * is empty or unreadable at that moment (being rewritten) keeps the old token. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpukmm/log.h"
#include "kubesim.h"

#define KS_TOKEN_MAX 4096

static void file_sig(const struct stat *st, uint64_t sig[4])
{
	sig[0] = (uint64_t)st->st_dev;
	sig[1] = (uint64_t)st->st_ino;
	sig[2] = (uint64_t)st->st_size;
	sig[3] = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
}

/* Reads the first line of the file; NULL with err set if unreadable, too big or empty. */
static char *read_token(const char *path, gk_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		gk_err_set(err, GK_NOT_FOUND, "token file %s: %s", path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(KS_TOKEN_MAX + 1);
	if (!buf) {
		fclose(f);
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		return NULL;
	}
	size_t n = fread(buf, 1, KS_TOKEN_MAX, f);
	int big = n == KS_TOKEN_MAX && fgetc(f) != EOF;
	fclose(f);
	buf[n] = 0;
	buf[strcspn(buf, "\r\n")] = 0;
	if (big || !buf[0]) {
		free(buf);
		gk_err_set(err, GK_INVALID_ARGUMENT, "token file %s is %s", path, big ? "larger than 4096 bytes" : "empty");
		return NULL;
	}
	return buf;
}

int ks_token_file_load(ks_server *s, const char *path, gk_err *err)
{
	struct stat st;
	if (stat(path, &st)) {
		gk_err_set(err, GK_NOT_FOUND, "token file %s: %s", path, strerror(errno));
		return GK_NOT_FOUND;
	}
	char *tok = read_token(path, err);
	if (!tok)
		return err->code;
	free(s->token_buf);
	free(s->token_file);
	s->token_buf = tok;
	s->token = tok;
	if (!(s->token_file = strdup(path))) {
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		return GK_RESOURCE_EXHAUSTED;
	}
	file_sig(&st, s->token_sig);
	return 0;
}

/* mu held. */
static void refresh(ks_server *s)
{
	struct stat st;
	uint64_t sig[4];
	if (stat(s->token_file, &st))
		return; /* being replaced: keep the current token */
	file_sig(&st, sig);
	if (memcmp(sig, s->token_sig, sizeof(sig)) == 0)
		return;
	gk_err e = { 0 };
	char *tok = read_token(s->token_file, &e);
	if (!tok) {
		GK_WARN("%s; keeping the previous token", e.msg);
		memcpy(s->token_sig, sig, sizeof(sig)); /* warn once per change */
		return;
	}
	free(s->token_buf);
	s->token_buf = tok;
	s->token = tok;
	memcpy(s->token_sig, sig, sizeof(sig));
	GK_INFO("token file %s changed: new token in force", s->token_file);
}

static int token_eq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;
	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

int ks_auth_ok(ks_server *s, const char *authorization)
{
	if (!s->token && !s->token_file)
		return 1;
	const char *a = authorization;
	if (!a || strncmp(a, "Bearer ", 7) != 0)
		return 0;
	if (!s->token_file)
		return token_eq(a + 7, s->token);
	pthread_mutex_lock(&s->mu);
	refresh(s);
	int ok = token_eq(a + 7, s->token);
	pthread_mutex_unlock(&s->mu);
	return ok;
}
