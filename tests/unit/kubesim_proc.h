/* Test helper (header-only, included by Criterion tests): run kubesim on an
 * ephemeral port as a child process, talk to it raw with libcurl. kubesim is
 * found through $GPUKMM_BIN (tests/run.sh) or build/bin. */
#ifndef GPUKMM_TEST_KUBESIM_PROC_H
#define GPUKMM_TEST_KUBESIM_PROC_H

#include <criterion/criterion.h>
#include <cJSON.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct ksim {
	pid_t pid;
	char url[256];
	char dir[256];   /* temp dir for files of the test */
} ksim;

static inline int64_t ksim_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void ksim_tmpdir(ksim *s)
{
	const char *t = getenv("TMPDIR");
	snprintf(s->dir, sizeof s->dir, "%s/gk-kubetest.XXXXXX", t && *t ? t : P_tmpdir);
	cr_assert(mkdtemp(s->dir), "mkdtemp");
}

static inline void ksim_path(const ksim *s, char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", s->dir, name);
}

static inline void ksim_write(const ksim *s, const char *name, const char *content)
{
	char p[512];
	ksim_path(s, p, sizeof p, name);
	char tmp[520];
	snprintf(tmp, sizeof tmp, "%s.new", p);
	FILE *f = fopen(tmp, "w");
	cr_assert(f);
	fputs(content, f);
	fclose(f);
	cr_assert_eq(rename(tmp, p), 0); /* atomic, like the kubelet's symlink swap */
}

/* extra: NULL-terminated kubesim arguments. */
static inline void ksim_start(ksim *s, const char *const *extra)
{
	if (!s->dir[0])
		ksim_tmpdir(s);
	char bin[512];
	const char *b = getenv("GPUKMM_BIN");
	snprintf(bin, sizeof bin, "%s/kubesim", b && *b ? b : "build/bin");
	const char *argv[32] = {bin, "--listen", "127.0.0.1:0", "--log-level", "warn"};
	int n = 5;
	for (int i = 0; extra && extra[i] && n < 30; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	int pfd[2];
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	char log[512];
	ksim_path(s, log, sizeof log, "kubesim.log");
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int rc = posix_spawn(&s->pid, bin, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	cr_assert_eq(rc, 0, "spawn %s: %s", bin, strerror(rc));
	char line[256] = "";
	size_t len = 0;
	int64_t deadline = ksim_now_ms() + 20000;
	while (!strchr(line, '\n') && ksim_now_ms() < deadline && len < sizeof line - 1) {
		struct pollfd p = {pfd[0], POLLIN, 0};
		if (poll(&p, 1, 200) <= 0)
			continue;
		ssize_t r = read(pfd[0], line + len, sizeof line - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		line[len] = 0;
	}
	close(pfd[0]);
	const char *pre = "kubesim: listening on ";
	cr_assert(!strncmp(line, pre, strlen(pre)), "kubesim did not start: \"%s\"", line);
	snprintf(s->url, sizeof s->url, "%.200s", line + strlen(pre));
	s->url[strcspn(s->url, "\r\n")] = 0;
}

static inline void ksim_stop(ksim *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		int st;
		int64_t deadline = ksim_now_ms() + 10000;
		while (waitpid(s->pid, &st, WNOHANG) == 0) {
			if (ksim_now_ms() > deadline) {
				kill(s->pid, SIGKILL);
				waitpid(s->pid, &st, 0);
				break;
			}
			poll(NULL, 0, 20);
		}
		s->pid = 0;
	}
}

static inline void ksim_cleanup(ksim *s)
{
	ksim_stop(s);
	if (s->dir[0]) {
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cleanup of %s failed\n", s->dir);
		s->dir[0] = 0;
	}
}

static inline size_t ksim_sink(char *p, size_t sz, size_t n, void *u)
{
	char **acc = u;
	size_t old = *acc ? strlen(*acc) : 0;
	char *nb = realloc(*acc, old + sz * n + 1);
	if (!nb)
		return 0;
	memcpy(nb + old, p, sz * n);
	nb[old + sz * n] = 0;
	*acc = nb;
	return sz * n;
}

/* Raw request to kubesim (no auth, plain http); returns the body (malloc'd). */
static inline char *ksim_raw(const ksim *s, const char *method, const char *path, const char *body,
			     long *code, const char *token)
{
	CURL *e = curl_easy_init();
	char url[1024], auth[256];
	snprintf(url, sizeof url, "%s%s", s->url, path);
	char *out = NULL;
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	if (token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
		h = curl_slist_append(h, auth);
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, ksim_sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &out);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
	if (body)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	CURLcode cc = curl_easy_perform(e);
	long c = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &c);
	if (code)
		*code = cc == CURLE_OK ? c : 0;
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	return out;
}

static inline void ksim_faults(const ksim *s, const char *json)
{
	long code = 0;
	char *b = ksim_raw(s, "PUT", "/kubesim/faults", json, &code, NULL);
	cr_assert_eq(code, 200, "faults %s: %ld %s", json, code, b ? b : "");
	free(b);
}

/* Requests kubesim counted for verb+resource (from /kubesim/stats), -1 if absent. */
static inline long ksim_count(const ksim *s, const char *verb, const char *resource)
{
	char *b = ksim_raw(s, "GET", "/kubesim/stats", NULL, NULL, NULL);
	long n = -1;
	cJSON *j = b ? cJSON_Parse(b) : NULL;
	free(b);
	/* {"byVerb":{"list":{"nodes":3}, ...}} */
	const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "byVerb"), verb),
					     resource);
	if (cJSON_IsNumber(v))
		n = (long)v->valuedouble;
	cJSON_Delete(j);
	return n;
}

#endif
