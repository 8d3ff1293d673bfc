/* kubesim — bearer-token authentication: who sends a request (see kubesim.h).
 * With --token-file the admin token file is checked on every request (one stat)
 * and re-read when it changed (device, inode, size or mtime), so a test can rotate
 * the server's token like a real cluster rotates service-account tokens: from then
 * on only the new token is accepted. A file that is empty or unreadable at that
 * moment (being rewritten) keeps the old token. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpukmm/log.h"
#include "auth.h"
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

static int admin_token(ks_server *s, const char *tok)
{
	if (!s->token_file)
		return token_eq(tok, s->token);
	pthread_mutex_lock(&s->mu);
	refresh(s);
	int ok = token_eq(tok, s->token);
	pthread_mutex_unlock(&s->mu);
	return ok;
}

static void user_set(ks_user *u, const char *name, const char *g1, const char *g2)
{
	memset(u, 0, sizeof(*u));
	snprintf(u->name, sizeof(u->name), "%s", name);
	snprintf(u->groups[u->ngroups++], sizeof(u->groups[0]), "%s", g1);
	if (g2)
		snprintf(u->groups[u->ngroups++], sizeof(u->groups[0]), "%s", g2);
}

int ks_authenticate(ks_server *s, const char *authorization, ks_user *u)
{
	int configured = s->token || s->token_file;
	const char *a = authorization;
	if (a && strncmp(a, "Bearer ", 7) == 0) {
		const char *tok = a + 7;
		if (configured && admin_token(s, tok)) {
			user_set(u, "kubesim-admin", "system:masters", "system:authenticated");
			return 0;
		}
		if (ks_token_user(s, tok, u) == 0)
			return 0;
		if (s->rbac || configured)
			return -1;
	} else if (s->rbac) {
		user_set(u, "system:anonymous", "system:unauthenticated", NULL);
		return 0;
	} else if (configured) {
		return -1;
	}
	/* no authentication configured: anyone is the admin */
	user_set(u, "kubesim-admin", "system:masters", "system:authenticated");
	return 0;
}

/* ---- --token-auth-file ------------------------------------------------------ */

/* One CSV field (a "quoted" field may hold commas); *p moves past it and its comma. */
static int csv_field(char **p, char *out, size_t cap)
{
	char *s = *p;
	size_t n = 0;
	int q = *s == '"';
	if (q)
		s++;
	while (*s && (q ? *s != '"' : *s != ',')) {
		if (n + 1 >= cap)
			return -1;
		out[n++] = *s++;
	}
	out[n] = 0;
	if (q) {
		if (*s != '"')
			return -1;
		s++;
	}
	if (*s == ',')
		s++;
	else if (*s)
		return -1;
	*p = s;
	return 0;
}

static int users_line(ks_static_user *su, char *line, gk_err *err, const char *path, int lno)
{
	char tok[KS_TOKEN_MAX], name[256], uid[64], groups[1024] = "";
	char *p = line;
	if (csv_field(&p, tok, sizeof(tok)) || csv_field(&p, name, sizeof(name)) || csv_field(&p, uid, sizeof(uid)) ||
	    (*p && csv_field(&p, groups, sizeof(groups))) || !tok[0] || !name[0])
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s:%d: want token,user,uid[,\"group1,group2\"]", path, lno);
	memset(su, 0, sizeof(*su));
	snprintf(su->u.name, sizeof(su->u.name), "%s", name);
	snprintf(su->u.uid, sizeof(su->u.uid), "%s", uid);
	char *save = NULL;
	for (char *g = strtok_r(groups, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
		if (su->u.ngroups >= KS_USER_MAX_GROUPS - 1)
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s:%d: more than %d groups", path, lno,
					  KS_USER_MAX_GROUPS - 1);
		snprintf(su->u.groups[su->u.ngroups++], sizeof(su->u.groups[0]), "%s", g);
	}
	snprintf(su->u.groups[su->u.ngroups++], sizeof(su->u.groups[0]), "system:authenticated");
	if (!(su->token = strdup(tok)))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	return 0;
}

int ks_users_load(ks_server *s, const char *path, gk_err *err)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return gk_err_set(err, GK_NOT_FOUND, "--token-auth-file %s: %s", path, strerror(errno));
	char line[KS_TOKEN_MAX + 2048];
	int lno = 0, rc = 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		lno++;
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		ks_static_user *nu = realloc(s->auth->users, sizeof(*nu) * (size_t)(s->auth->nusers + 1));
		if (!nu) {
			rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
			break;
		}
		s->auth->users = nu;
		if (!(rc = users_line(&nu[s->auth->nusers], line, err, path, lno)))
			s->auth->nusers++;
	}
	fclose(f);
	return rc;
}

int ks_token_user(ks_server *s, const char *tok, ks_user *u)
{
	if (ks_satoken_verify(s, tok, u) == 0)
		return 0;
	for (int i = 0; s->auth && i < s->auth->nusers; i++)
		if (token_eq(tok, s->auth->users[i].token)) {
			*u = s->auth->users[i].u;
			return 0;
		}
	return -1;
}
