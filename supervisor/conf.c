/* The service table: profile defaults and the JSON config file.
 *
 * Validation is strict and all-or-nothing: the first problem is reported with
 * the path of the field ("services[2].stop.signal: unknown signal 'SIGFOO'")
 * and the caller exits 2 before anything is started. Unknown keys are errors
 * too, so a typo never silently falls back to a default. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "sup.h"

#define MAX_CONF_BYTES (1 << 20)
#define MAX_LIST 64
#define MAX_STR 4096

static const gk_sup_svc_conf svc_defaults = {
	.restart = GK_SUP_PERMANENT,
	.backoff = { .initial_ms = 500, .max_ms = 300000, .jitter = 0.2, .reset_after_ms = 600000 },
	.stop_signal = SIGTERM,
	.stop_timeout_ms = 5000,
	.required = true,
	.ready_timeout_ms = 300000,
	.heartbeat_ms = 1000,
	.heartbeat_timeout_ms = 10000,
	.credentials = false,
	.uid = -1,
	.gid = -1,
};

const char *gk_sup_restart_name(enum gk_sup_restart r)
{
	switch (r) {
	case GK_SUP_PERMANENT: return "permanent";
	case GK_SUP_TRANSIENT: return "transient";
	case GK_SUP_TEMPORARY: return "temporary";
	}
	return "?";
}

int gk_sup_signal_parse(const char *s)
{
	static const struct { const char *n; int v; } sigs[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "ALRM", SIGALRM },
		{ "WINCH", SIGWINCH },
	};
	if (!s || !*s)
		return -1;
	if (isdigit((unsigned char)*s)) {
		char *end;
		long v = strtol(s, &end, 10);
		return (*end || v <= 0 || v >= NSIG) ? -1 : (int)v;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcasecmp(s, sigs[i].n) == 0)
			return sigs[i].v;
	return -1;
}

static void svc_free(gk_sup_svc_conf *s)
{
	free(s->name);
	free(s->binary);
	free(s->path);
	for (size_t i = 0; i < s->n_args; i++)
		free(s->args[i]);
	free(s->args);
	for (size_t i = 0; i < s->n_env; i++)
		free(s->env[i]);
	free(s->env);
	memset(s, 0, sizeof(*s));
}

void gk_sup_conf_free(gk_sup_conf *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_svcs; i++)
		svc_free(&c->svcs[i]);
	free(c->svcs);
	memset(c, 0, sizeof(*c));
}

int gk_sup_conf_remove(gk_sup_conf *c, const char *name)
{
	for (size_t i = 0; i < c->n_svcs; i++) {
		if (strcmp(c->svcs[i].name, name) != 0)
			continue;
		svc_free(&c->svcs[i]);
		memmove(&c->svcs[i], &c->svcs[i + 1], (c->n_svcs - i - 1) * sizeof(c->svcs[0]));
		memset(&c->svcs[--c->n_svcs], 0, sizeof(c->svcs[0]));
		return 0;
	}
	return -1;
}

static void conf_init(gk_sup_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->intensity_max = 5;
	c->intensity_window_ms = 60000;
}

static int oom(gk_err *err)
{
	return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
}

static bool valid_name(const char *n)
{
	size_t len = strlen(n);
	if (len == 0 || len > GK_SUP_NAME_MAX || n[0] == '-')
		return false;
	for (const char *p = n; *p; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-'))
			return false;
	return strcmp(n, "control") != 0;   /* control.sock is the supervisor's */
}

/* Append a service with defaults; args given as a NULL-terminated list. */
static int add_default(gk_sup_conf *c, const char *name, const char *binary, bool cred,
		       const char *const *args, gk_err *err)
{
	gk_sup_svc_conf *s = &c->svcs[c->n_svcs];
	*s = svc_defaults;
	s->credentials = cred;
	s->name = strdup(name);
	s->binary = strdup(binary);
	size_t n = 0;
	while (args && args[n])
		n++;
	s->args = calloc(n + 1, sizeof(char *));
	if (!s->name || !s->binary || !s->args) {
		c->n_svcs++;
		return oom(err);
	}
	c->n_svcs++;
	for (size_t i = 0; i < n; i++) {
		if (!(s->args[i] = strdup(args[i])))
			return oom(err);
		s->n_args++;
	}
	return 0;
}

static int profile_fill(gk_sup_conf *c, const char *profile, gk_err *err)
{
	bool ctl = strcmp(profile, "controller") == 0, node = strcmp(profile, "node") == 0;
	bool all = strcmp(profile, "all") == 0, wh = strcmp(profile, "webhook") == 0;
	if (!ctl && !node && !all && !wh)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "--profile: unknown profile '%s' (controller, node, all or webhook)", profile);
	c->svcs = calloc(GK_SUP_MAX_SERVICES, sizeof(*c->svcs));
	if (!c->svcs)
		return oom(err);
	int rc = 0;
	if (ctl || all) {
		if ((rc = add_default(c, "watcher", "gpukmm-watcher", true, NULL, err)) ||
		    (rc = add_default(c, "modmgr", "gpukmm-modmgr", true, NULL, err)) ||
		    (rc = add_default(c, "gater", "gpukmm-gater", true, NULL, err)) ||
		    (rc = add_default(c, "opmgr", "gpukmm-opmgr", true, NULL, err)) ||
		    (rc = add_default(c, "statusd", "gpukmm-statusd", true, NULL, err)) ||
		    (rc = add_default(c, "certd", "gpukmm-certd", true, NULL, err)) ||
		    (rc = add_default(c, "webhook", "gpukmm-webhook", false, NULL, err)))
			return rc;
	}
	if (wh && (rc = add_default(c, "webhook", "gpukmm-webhook", false, NULL, err)))
		return rc;
	if (node) {
		static const char *const st[] = { "--mode", "node", NULL };
		if ((rc = add_default(c, "prober", "gpukmm-prober", false, NULL, err)) ||
		    (rc = add_default(c, "statusd", "gpukmm-statusd", true, st, err)))
			return rc;
	}
	if (all) {
		/* both statusd modes side by side: the node one gets its own socket */
		static const char *const pr[] = { "--statusd", "ipc://{runtime_dir}/node-statusd.sock", NULL };
		static const char *const st[] = { "--mode", "node", "--listen",
						   "ipc://{runtime_dir}/node-statusd.sock", NULL };
		if ((rc = add_default(c, "prober", "gpukmm-prober", false, pr, err)) ||
		    (rc = add_default(c, "node-statusd", "gpukmm-statusd", true, st, err)))
			return rc;
	}
	return 0;
}

int gk_sup_conf_profile(gk_sup_conf *c, const char *profile, gk_err *err)
{
	conf_init(c);
	int rc = profile_fill(c, profile ? profile : "", err);
	if (rc)
		gk_sup_conf_free(c);
	return rc;
}

/* ---- JSON ------------------------------------------------------------------ */

static int check_keys(const cJSON *obj, const char *path, const char *const *allowed, gk_err *err)
{
	for (const cJSON *it = obj->child; it; it = it->next) {
		bool ok = false;
		for (const char *const *a = allowed; *a; a++)
			if (it->string && strcmp(it->string, *a) == 0)
				ok = true;
		if (!ok)
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s%s%s: unknown field", path,
					  *path ? "." : "", it->string ? it->string : "?");
	}
	return 0;
}

static int get_int(const cJSON *obj, const char *key, const char *path, int64_t min, int64_t max,
		   int64_t *out, gk_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v)
		return 0;
	double d = v->valuedouble;
	if (!cJSON_IsNumber(v) || d != floor(d) || d < (double)min || d > (double)max)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "%s.%s: must be an integer from %lld to %lld", path, key,
				  (long long)min, (long long)max);
	*out = (int64_t)d;
	return 0;
}

static int get_bool(const cJSON *obj, const char *key, const char *path, bool *out, gk_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v)
		return 0;
	if (!cJSON_IsBool(v))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.%s: must be true or false", path, key);
	*out = cJSON_IsTrue(v);
	return 0;
}

static int get_obj(const cJSON *obj, const char *key, const char *path, const cJSON **out,
		   const char *const *allowed, char *sub, size_t subcap, gk_err *err)
{
	*out = cJSON_GetObjectItemCaseSensitive(obj, key);
	snprintf(sub, subcap, "%s.%s", path, key);
	if (!*out)
		return 0;
	if (!cJSON_IsObject(*out))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: must be an object", sub);
	return check_keys(*out, sub, allowed, err);
}

static const char *get_str(const cJSON *obj, const char *key, const char *path, int *rc, gk_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v)
		return NULL;
	if (!cJSON_IsString(v) || !*v->valuestring || strlen(v->valuestring) > MAX_STR) {
		*rc = gk_err_set(err, GK_INVALID_ARGUMENT, "%s.%s: must be a non-empty string", path, key);
		return NULL;
	}
	return v->valuestring;
}

static int parse_svc(gk_sup_svc_conf *s, const cJSON *o, const char *path, gk_err *err)
{
	static const char *const keys[] = { "name", "binary", "args", "env", "restart", "backoff", "stop",
					     "ready", "heartbeat", "credentials", "user", "group", NULL };
	static const char *const bkeys[] = { "initial_ms", "max_ms", "jitter", "reset_after_ms", NULL };
	static const char *const skeys[] = { "signal", "timeout_ms", NULL };
	static const char *const rkeys[] = { "required", "timeout_ms", NULL };
	static const char *const hkeys[] = { "interval_ms", "timeout_ms", NULL };
	char sub[96];
	int rc = 0;
	*s = svc_defaults;
	if (!cJSON_IsObject(o))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s: must be an object", path);
	if ((rc = check_keys(o, path, keys, err)))
		return rc;

	const char *name = get_str(o, "name", path, &rc, err);
	if (rc)
		return rc;
	if (!name)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.name: required", path);
	if (!valid_name(name))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "%s.name: '%s' must be 1-%d characters of a-z, 0-9 and '-' (not 'control')",
				  path, name, GK_SUP_NAME_MAX);
	if (!(s->name = strdup(name)))
		return oom(err);
	const char *bin = get_str(o, "binary", path, &rc, err);
	if (rc)
		return rc;
	if (bin)
		s->binary = strdup(bin);
	else if (asprintf(&s->binary, "gpukmm-%s", name) < 0)
		s->binary = NULL;
	if (!s->binary)
		return oom(err);

	const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
	size_t na = args ? (size_t)cJSON_GetArraySize(args) : 0;
	if (args && (!cJSON_IsArray(args) || na > MAX_LIST))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.args: must be an array of at most %d strings",
				  path, MAX_LIST);
	if (!(s->args = calloc(na + 1, sizeof(char *))))
		return oom(err);
	if (args) {
		const cJSON *a;
		cJSON_ArrayForEach(a, args) {
			if (!cJSON_IsString(a) || strlen(a->valuestring) > MAX_STR)
				return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.args[%zu]: must be a string",
						  path, s->n_args);
			if (!(s->args[s->n_args] = strdup(a->valuestring)))
				return oom(err);
			s->n_args++;
		}
	}

	const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "env");
	size_t ne = env ? (size_t)cJSON_GetArraySize(env) : 0;
	if (env && (!cJSON_IsObject(env) || ne > MAX_LIST))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "%s.env: must be an object of at most %d string values", path, MAX_LIST);
	if (!(s->env = calloc(ne + 1, sizeof(char *))))
		return oom(err);
	if (env) {
		const cJSON *e;
		cJSON_ArrayForEach(e, env) {
			const char *k = e->string;
			if (!k || !*k || strchr(k, '=') || strlen(k) > 256)
				return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.env: invalid variable name '%s'",
						  path, k ? k : "");
			if (!cJSON_IsString(e) || strlen(e->valuestring) > MAX_STR)
				return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.env.%s: must be a string", path, k);
			if (asprintf(&s->env[s->n_env], "%s=%s", k, e->valuestring) < 0) {
				s->env[s->n_env] = NULL;
				return oom(err);
			}
			s->n_env++;
		}
	}

	const char *restart = get_str(o, "restart", path, &rc, err);
	if (rc)
		return rc;
	if (restart) {
		if (strcmp(restart, "permanent") == 0)
			s->restart = GK_SUP_PERMANENT;
		else if (strcmp(restart, "transient") == 0)
			s->restart = GK_SUP_TRANSIENT;
		else if (strcmp(restart, "temporary") == 0)
			s->restart = GK_SUP_TEMPORARY;
		else
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "%s.restart: '%s' is not permanent, transient or temporary", path, restart);
	}

	const cJSON *b;
	if ((rc = get_obj(o, "backoff", path, &b, bkeys, sub, sizeof(sub), err)))
		return rc;
	if (b) {
		if ((rc = get_int(b, "initial_ms", sub, 0, 86400000, &s->backoff.initial_ms, err)) ||
		    (rc = get_int(b, "max_ms", sub, 0, 86400000, &s->backoff.max_ms, err)) ||
		    (rc = get_int(b, "reset_after_ms", sub, 0, INT32_MAX, &s->backoff.reset_after_ms, err)))
			return rc;
		const cJSON *j = cJSON_GetObjectItemCaseSensitive(b, "jitter");
		if (j) {
			if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > 1)
				return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.jitter: must be a number from 0 to 1", sub);
			s->backoff.jitter = j->valuedouble;
		}
		if (s->backoff.max_ms < s->backoff.initial_ms)
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.max_ms: must be >= initial_ms (%lld)",
					  sub, (long long)s->backoff.initial_ms);
	}

	const cJSON *st;
	if ((rc = get_obj(o, "stop", path, &st, skeys, sub, sizeof(sub), err)))
		return rc;
	if (st) {
		const char *sig = get_str(st, "signal", sub, &rc, err);
		if (rc)
			return rc;
		if (sig && (s->stop_signal = gk_sup_signal_parse(sig)) < 0)
			return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.signal: unknown signal '%s'", sub, sig);
		if ((rc = get_int(st, "timeout_ms", sub, 1, 3600000, &s->stop_timeout_ms, err)))
			return rc;
	}

	const cJSON *r;
	if ((rc = get_obj(o, "ready", path, &r, rkeys, sub, sizeof(sub), err)))
		return rc;
	if (r && ((rc = get_bool(r, "required", sub, &s->required, err)) ||
		  (rc = get_int(r, "timeout_ms", sub, 0, 86400000, &s->ready_timeout_ms, err))))
		return rc;

	const cJSON *h;
	if ((rc = get_obj(o, "heartbeat", path, &h, hkeys, sub, sizeof(sub), err)))
		return rc;
	if (h) {
		if ((rc = get_int(h, "interval_ms", sub, 10, 3600000, &s->heartbeat_ms, err)) ||
		    (rc = get_int(h, "timeout_ms", sub, 0, 86400000, &s->heartbeat_timeout_ms, err)))
			return rc;
		if (s->heartbeat_timeout_ms && s->heartbeat_timeout_ms <= s->heartbeat_ms)
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "%s.timeout_ms: must be 0 (no check) or more than interval_ms (%lld)",
					  sub, (long long)s->heartbeat_ms);
	}

	if ((rc = get_bool(o, "credentials", path, &s->credentials, err)))
		return rc;
	int64_t v = -1;
	if ((rc = get_int(o, "user", path, 0, INT32_MAX, &v, err)))
		return rc;
	s->uid = (long)v;
	v = -1;
	if ((rc = get_int(o, "group", path, 0, INT32_MAX, &v, err)))
		return rc;
	s->gid = (long)v;
	return 0;
}

static int parse_root(gk_sup_conf *c, const char *profile, const cJSON *root, gk_err *err)
{
	static const char *const keys[] = { "intensity", "services", NULL };
	static const char *const ikeys[] = { "max_restarts", "window_ms", NULL };
	int rc;
	if (!cJSON_IsObject(root))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "(top level): must be an object");
	if ((rc = check_keys(root, "", keys, err)))
		return rc;
	const cJSON *in;
	char sub[32];
	if ((rc = get_obj(root, "intensity", "", &in, ikeys, sub, sizeof(sub), err)))
		return rc;
	int64_t imax = c->intensity_max;
	if (in && ((rc = get_int(in, "max_restarts", "intensity", 0, GK_SUP_INTENSITY_CAP - 1, &imax, err)) ||
		   (rc = get_int(in, "window_ms", "intensity", 0, 86400000, &c->intensity_window_ms, err))))
		return rc;
	c->intensity_max = (int)imax;

	const cJSON *svcs = cJSON_GetObjectItemCaseSensitive(root, "services");
	if (!svcs) {
		if (!profile)
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "services: required when no --profile is given");
		return profile_fill(c, profile, err);
	}
	int n = cJSON_GetArraySize(svcs);
	if (!cJSON_IsArray(svcs) || n < 1 || n > GK_SUP_MAX_SERVICES)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "services: must be an array of 1 to %d services",
				  GK_SUP_MAX_SERVICES);
	if (!(c->svcs = calloc(GK_SUP_MAX_SERVICES, sizeof(*c->svcs))))
		return oom(err);
	const cJSON *o;
	cJSON_ArrayForEach(o, svcs) {
		char path[32];
		snprintf(path, sizeof(path), "services[%zu]", c->n_svcs);
		rc = parse_svc(&c->svcs[c->n_svcs], o, path, err);
		c->n_svcs++;
		if (rc)
			return rc;
		for (size_t i = 0; i + 1 < c->n_svcs; i++)
			if (strcmp(c->svcs[i].name, c->svcs[c->n_svcs - 1].name) == 0)
				return gk_err_set(err, GK_INVALID_ARGUMENT, "%s.name: '%s' is used twice", path,
						  c->svcs[i].name);
	}
	return 0;
}

int gk_sup_conf_parse(gk_sup_conf *c, const char *profile, const char *json, size_t len, gk_err *err)
{
	conf_init(c);
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
	if (!root) {
		size_t off = end && end >= json ? (size_t)(end - json) : 0;
		size_t line = 1;
		for (size_t i = 0; i < off && i < len; i++)
			line += json[i] == '\n';
		return gk_err_set(err, GK_INVALID_ARGUMENT, "not valid JSON (near line %zu)", line);
	}
	int rc = parse_root(c, profile, root, err);
	cJSON_Delete(root);
	if (rc)
		gk_sup_conf_free(c);
	return rc;
}

int gk_sup_conf_load(gk_sup_conf *c, const char *profile, const char *file, gk_err *err)
{
	conf_init(c);
	FILE *f = fopen(file, "re");
	if (!f)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "config %s: %s", file, strerror(errno));
	char *buf = malloc(MAX_CONF_BYTES + 1);
	if (!buf) {
		fclose(f);
		return oom(err);
	}
	size_t n = fread(buf, 1, MAX_CONF_BYTES + 1, f);
	int rerr = ferror(f);
	fclose(f);
	int rc;
	if (rerr)
		rc = gk_err_set(err, GK_INVALID_ARGUMENT, "config %s: read error", file);
	else if (n > MAX_CONF_BYTES)
		rc = gk_err_set(err, GK_INVALID_ARGUMENT, "config %s: larger than %d bytes", file, MAX_CONF_BYTES);
	else if ((rc = gk_sup_conf_parse(c, profile, buf, n, err)))
		gk_err_wrap(err, "config %s", file);
	free(buf);
	return rc;
}

static bool is_exec(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int gk_sup_conf_resolve(gk_sup_conf *c, const char *self_dir, const char *path_env, gk_err *err)
{
	for (size_t i = 0; i < c->n_svcs; i++) {
		gk_sup_svc_conf *s = &c->svcs[i];
		char cand[PATH_MAX];
		free(s->path);
		s->path = NULL;
		if (strchr(s->binary, '/')) {
			if (is_exec(s->binary))
				s->path = strdup(s->binary);
		} else {
			if (self_dir && snprintf(cand, sizeof(cand), "%s/%s", self_dir, s->binary) < (int)sizeof(cand) &&
			    is_exec(cand))
				s->path = strdup(cand);
			for (const char *p = path_env; !s->path && p && *p;) {
				const char *colon = strchrnul(p, ':');
				int dl = (int)(colon - p);
				if (dl > 0 && snprintf(cand, sizeof(cand), "%.*s/%s", dl, p, s->binary) < (int)sizeof(cand) &&
				    is_exec(cand))
					s->path = strdup(cand);
				p = *colon ? colon + 1 : colon;
			}
		}
		if (!s->path)
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "services[%zu].binary: '%s' (service %s) is not an executable file%s", i,
					  s->binary, s->name,
					  strchr(s->binary, '/') ? "" : " next to gpukmm or in $PATH");
	}
	return 0;
}
