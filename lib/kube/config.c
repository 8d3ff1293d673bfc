/* Client configuration: in-cluster service account, or a kubeconfig (libyaml).
 * Certificate/key `*-data` stay in memory (handed to curl as BLOBs), never in
 * temp files. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "gpukmm/kube.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBECONFIG_MAX (4u << 20)

void gk_kube_config_free(gk_kube_config *c)
{
	if (!c)
		return;
	free(c->server);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->token_file);
	free(c->tls_server_name);
	gk_kube_exec_free(c->exec);
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	free(c->ca.data);
	free(c->cert.data);
	if (c->key.data) {
		explicit_bzero(c->key.data, c->key.len);
		free(c->key.data);
	}
	memset(c, 0, sizeof *c);
}

static int oom(gk_err *err)
{
	return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
}

/* ---- in-cluster ---------------------------------------------------------- */

int gk_kube_config_in_cluster(gk_kube_config *c, const char *sa_dir, gk_err *err)
{
	memset(c, 0, sizeof *c);
	const char *host = secure_getenv("KUBERNETES_SERVICE_HOST");
	const char *port = secure_getenv("KUBERNETES_SERVICE_PORT");
	if (!host || !*host || !port || !*port)
		return gk_err_set(err, GK_FAILED_PRECONDITION,
				  "not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "KUBERNETES_SERVICE_PORT is not a number: \"%.20s\"", port);
	if (!sa_dir)
		sa_dir = SA_DIR;
	bool v6 = strchr(host, ':') != NULL && host[0] != '[';
	if (asprintf(&c->server, v6 ? "https://[%s]:%s" : "https://%s:%s", host, port) < 0 ||
	    asprintf(&c->token_file, "%s/token", sa_dir) < 0 ||
	    asprintf(&c->ca_file, "%s/ca.crt", sa_dir) < 0) {
		c->server = c->token_file = c->ca_file = NULL;
		gk_kube_config_free(c);
		return oom(err);
	}
	if (access(c->token_file, R_OK) != 0) {
		int e = errno;
		gk_err_set(err, GK_FAILED_PRECONDITION, "in-cluster: cannot read token %s: %s",
			   c->token_file, strerror(e));
		gk_kube_config_free(c);
		return err ? err->code : GK_FAILED_PRECONDITION;
	}
	if (access(c->ca_file, R_OK) != 0) {
		int e = errno;
		gk_err_set(err, GK_FAILED_PRECONDITION, "in-cluster: cannot read CA %s: %s",
			   c->ca_file, strerror(e));
		gk_kube_config_free(c);
		return err ? err->code : GK_FAILED_PRECONDITION;
	}
	return 0;
}

/* ---- YAML → cJSON (scalars as strings) -------------------------------------- */

static cJSON *node_to_json(yaml_document_t *d, yaml_node_t *n, int depth)
{
	if (!n || depth > 64)
		return NULL;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return cJSON_CreateString((const char *)n->data.scalar.value);
	case YAML_SEQUENCE_NODE: {
		cJSON *a = cJSON_CreateArray();
		for (yaml_node_item_t *it = n->data.sequence.items.start;
		     a && it < n->data.sequence.items.top; it++) {
			cJSON *v = node_to_json(d, yaml_document_get_node(d, *it), depth + 1);
			if (!v || !cJSON_AddItemToArray(a, v)) {
				cJSON_Delete(v);
				cJSON_Delete(a);
				return NULL;
			}
		}
		return a;
	}
	case YAML_MAPPING_NODE: {
		cJSON *o = cJSON_CreateObject();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     o && p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(d, p->key);
			if (!k || k->type != YAML_SCALAR_NODE)
				continue;
			cJSON *v = node_to_json(d, yaml_document_get_node(d, p->value), depth + 1);
			if (!v || !cJSON_AddItemToObject(o, (const char *)k->data.scalar.value, v)) {
				cJSON_Delete(v);
				cJSON_Delete(o);
				return NULL;
			}
		}
		return o;
	}
	default:
		return NULL;
	}
}

static cJSON *yaml_to_json(const char *text, size_t len, gk_err *err)
{
	yaml_parser_t p;
	yaml_document_t d;
	if (!yaml_parser_initialize(&p)) {
		oom(err);
		return NULL;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	if (!yaml_parser_load(&p, &d)) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: YAML error at line %zu: %s",
			   p.problem_mark.line + 1, p.problem ? p.problem : "unknown");
		yaml_parser_delete(&p);
		return NULL;
	}
	yaml_node_t *root = yaml_document_get_root_node(&d);
	cJSON *j = root ? node_to_json(&d, root, 0) : NULL;
	if (!j)
		gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: empty or not a mapping");
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	return j;
}

/* ---- kubeconfig ------------------------------------------------------------- */

static const char *str_at(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* Find the entry `name` in a named list (clusters/contexts/users) → its `field`. */
static const cJSON *named(const cJSON *root, const char *list, const char *field, const char *name)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, list), *it;
	cJSON_ArrayForEach(it, a) {
		const char *n = str_at(it, "name");
		if (n && !strcmp(n, name))
			return cJSON_GetObjectItemCaseSensitive(it, field);
	}
	return NULL;
}

static int b64_val(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z') return ch - 'A';
	if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9') return ch - '0' + 52;
	if (ch == '+' || ch == '-') return 62;
	if (ch == '/' || ch == '_') return 63;
	return -1;
}

static int b64_decode(const char *in, gk_kube_blob *out)
{
	size_t n = strlen(in);
	unsigned char *o = malloc(n / 4 * 3 + 4);
	if (!o)
		return -1;
	size_t olen = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)in[i];
		if (ch == '=' ) break;
		if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
			continue;
		int v = b64_val(ch);
		if (v < 0) {
			free(o);
			return -2;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			o[olen++] = (unsigned char)(acc >> bits);
		}
	}
	if (olen == 0) {
		free(o);
		return -2;
	}
	out->data = o;
	out->len = olen;
	return 0;
}

static int set_path(char **dst, const char *v)
{
	*dst = strdup(v);
	return *dst ? 0 : -1;
}

static int set_blob(gk_kube_blob *b, const char *v, const char *what, gk_err *err)
{
	int r = b64_decode(v, b);
	if (r == -1)
		return oom(err);
	if (r)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: %s is not valid base64", what);
	return 0;
}

/* ---- exec plugin stanza ------------------------------------------------------ */

#define EXEC_V1 "client.authentication.k8s.io/v1"
#define EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"

static int exec_fill(gk_kube_config *c, const cJSON *x, const char *user, gk_err *err)
{
	const char *cmd = str_at(x, "command"), *api = str_at(x, "apiVersion");
	if (!cmd)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: user \"%s\": exec has no command",
				  user);
	if (!api || (strcmp(api, EXEC_V1) && strcmp(api, EXEC_V1BETA1)))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "kubeconfig: user \"%s\": exec apiVersion \"%s\" is not supported (use "
				  EXEC_V1 " or " EXEC_V1BETA1 ")", user, api ? api : "");
	const char *im = str_at(x, "interactiveMode");
	if (!im && !strcmp(api, EXEC_V1))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "kubeconfig: user \"%s\": exec interactiveMode must be set for " EXEC_V1
				  " (Never or IfAvailable)", user);
	if (im && !strcmp(im, "Always"))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "kubeconfig: user \"%s\": exec plugin \"%s\" has interactiveMode Always, but "
				  "gpukmm never runs interactively (no terminal): use a plugin mode or a "
				  "credential that needs no prompt", user, cmd);
	if (im && strcmp(im, "Never") && strcmp(im, "IfAvailable"))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "kubeconfig: user \"%s\": exec interactiveMode \"%s\" is not Never, "
				  "IfAvailable or Always", user, im);
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(x, "args");
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(x, "env");
	if (args && !cJSON_IsArray(args) && !cJSON_IsString(args))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: user \"%s\": exec args is not a list",
				  user);
	if (env && !cJSON_IsArray(env) && !cJSON_IsString(env))
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: user \"%s\": exec env is not a list",
				  user);
	gk_kube_exec *e = calloc(1, sizeof *e);
	if (!e)
		return oom(err);
	c->exec = e;
	int na = cJSON_IsArray(args) ? cJSON_GetArraySize(args) : 0;
	int ne = cJSON_IsArray(env) ? cJSON_GetArraySize(env) : 0;
	const char *v;
	if (!(e->user = strdup(user)) || !(e->command = strdup(cmd)) || !(e->api_version = strdup(api)) ||
	    !(e->args = calloc((size_t)na + 1, sizeof *e->args)) ||
	    !(e->env = calloc((size_t)ne + 1, sizeof *e->env)) ||
	    ((v = str_at(x, "installHint")) && !(e->install_hint = strdup(v))))
		return oom(err);
	v = str_at(x, "provideClusterInfo");
	e->provide_cluster_info = v && (!strcmp(v, "true") || !strcmp(v, "True"));
	int n = 0;
	const cJSON *it, *al = cJSON_IsArray(args) ? args : NULL, *el = cJSON_IsArray(env) ? env : NULL;
	cJSON_ArrayForEach(it, al) {
		if (!cJSON_IsString(it))
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "kubeconfig: user \"%s\": exec args[%d] is not a string", user, n);
		if (!(e->args[n++] = strdup(it->valuestring)))
			return oom(err);
	}
	n = 0;
	cJSON_ArrayForEach(it, el) {
		const char *name = str_at(it, "name");
		const cJSON *val = cJSON_GetObjectItemCaseSensitive(it, "value");
		if (!name || strchr(name, '=') || (val && !cJSON_IsString(val)))
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "kubeconfig: user \"%s\": exec env[%d] needs a name and a string value",
					  user, n);
		if (asprintf(&e->env[n], "%s=%s", name, val ? val->valuestring : "") < 0) {
			e->env[n] = NULL;
			return oom(err);
		}
		n++;
	}
	return 0;
}

void gk_kube_exec_free(gk_kube_exec *x)
{
	if (!x)
		return;
	for (char **p = x->args; p && *p; p++)
		free(*p);
	for (char **p = x->env; p && *p; p++)
		free(*p);
	free(x->args);
	free(x->env);
	free(x->user);
	free(x->command);
	free(x->api_version);
	free(x->install_hint);
	free(x);
}

static char **strv_dup(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **d = calloc(n + 1, sizeof *d);
	for (size_t i = 0; d && i < n; i++)
		if (!(d[i] = strdup(v[i]))) {
			while (i--)
				free(d[i]);
			free(d);
			return NULL;
		}
	return d;
}

int gk_kube_exec_dup(gk_kube_exec **dst, const gk_kube_exec *s)
{
	*dst = NULL;
	if (!s)
		return 0;
	gk_kube_exec *d = calloc(1, sizeof *d);
	if (!d)
		return -1;
	d->provide_cluster_info = s->provide_cluster_info;
	d->timeout_ms = s->timeout_ms;
	d->user = strdup(s->user);
	d->command = strdup(s->command);
	d->api_version = strdup(s->api_version);
	d->install_hint = s->install_hint ? strdup(s->install_hint) : NULL;
	d->args = strv_dup(s->args);
	d->env = strv_dup(s->env);
	if (!d->user || !d->command || !d->api_version || (s->install_hint && !d->install_hint) ||
	    !d->args || !d->env) {
		gk_kube_exec_free(d);
		return -1;
	}
	*dst = d;
	return 0;
}

static int fill(gk_kube_config *c, const cJSON *root, const char *context, gk_err *err)
{
	const char *ctx_name = context ? context : str_at(root, "current-context");
	if (!ctx_name)
		return gk_err_set(err, GK_FAILED_PRECONDITION,
				  "kubeconfig: no current-context and no context given");
	const cJSON *ctx = named(root, "contexts", "context", ctx_name);
	if (!cJSON_IsObject(ctx))
		return gk_err_set(err, GK_NOT_FOUND, "kubeconfig: context \"%s\" not found", ctx_name);
	const char *cl_name = str_at(ctx, "cluster");
	if (!cl_name)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: context \"%s\" names no cluster",
				  ctx_name);
	const cJSON *cl = named(root, "clusters", "cluster", cl_name);
	if (!cJSON_IsObject(cl))
		return gk_err_set(err, GK_NOT_FOUND, "kubeconfig: cluster \"%s\" not found", cl_name);
	const char *server = str_at(cl, "server");
	if (!server)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: cluster \"%s\" has no server",
				  cl_name);
	if (strncmp(server, "https://", 8) && strncmp(server, "http://", 7))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "kubeconfig: cluster \"%s\": server \"%.200s\" is not an http(s) URL",
				  cl_name, server);
	c->server = strdup(server);
	if (!c->server)
		return oom(err);
	size_t sl = strlen(c->server);
	while (sl > 8 && c->server[sl - 1] == '/')
		c->server[--sl] = 0;
	const char *v;
	if ((v = str_at(cl, "certificate-authority-data"))) {
		if (set_blob(&c->ca, v, "certificate-authority-data", err))
			return err ? err->code : GK_INVALID_ARGUMENT;
	} else if ((v = str_at(cl, "certificate-authority"))) {
		if (set_path(&c->ca_file, v))
			return oom(err);
	}
	if ((v = str_at(cl, "insecure-skip-tls-verify")))
		c->insecure = !strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "yes");
	if ((v = str_at(cl, "tls-server-name"))) {
		/* a host name (or an IP address) and nothing else: it goes into a curl
		 * connect-to rule and a URL */
		if (strpbrk(v, ":/@?#[] \t"))
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "kubeconfig: cluster \"%s\": tls-server-name \"%.200s\" is not a host name",
					  cl_name, v);
		if (!(c->tls_server_name = strdup(v)))
			return oom(err);
	}

	const char *user_name = str_at(ctx, "user");
	if (!user_name)
		return 0; /* anonymous */
	const cJSON *u = named(root, "users", "user", user_name);
	if (!cJSON_IsObject(u))
		return gk_err_set(err, GK_NOT_FOUND, "kubeconfig: user \"%s\" not found", user_name);
	if (cJSON_GetObjectItemCaseSensitive(u, "auth-provider"))
		return gk_err_set(err, GK_UNIMPLEMENTED,
				  "kubeconfig: user \"%s\" uses an auth-provider plugin (removed from "
				  "kubectl in 1.26), which gpukmm does not run; use an exec plugin, a "
				  "token, tokenFile or client certificate", user_name);
	if ((v = str_at(u, "client-certificate-data"))) {
		if (set_blob(&c->cert, v, "client-certificate-data", err))
			return err ? err->code : GK_INVALID_ARGUMENT;
	} else if ((v = str_at(u, "client-certificate"))) {
		if (set_path(&c->cert_file, v))
			return oom(err);
	}
	if ((v = str_at(u, "client-key-data"))) {
		if (set_blob(&c->key, v, "client-key-data", err))
			return err ? err->code : GK_INVALID_ARGUMENT;
	} else if ((v = str_at(u, "client-key"))) {
		if (set_path(&c->key_file, v))
			return oom(err);
	}
	bool has_cert = c->cert.data || c->cert_file, has_key = c->key.data || c->key_file;
	if (has_cert != has_key)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "kubeconfig: user \"%s\" has a client %s without a %s", user_name,
				  has_cert ? "certificate" : "key", has_cert ? "key" : "certificate");
	if ((v = str_at(u, "token")) && !(c->token = strdup(v)))
		return oom(err);
	if ((v = str_at(u, "tokenFile")) && set_path(&c->token_file, v))
		return oom(err);
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(u, "exec");
	/* a static credential wins over the plugin, as in client-go */
	if (cJSON_IsObject(x) && !has_cert && !c->token && !c->token_file)
		return exec_fill(c, x, user_name, err);
	return 0;
}

/* ---- files, lists, merging -------------------------------------------------- */

/* Make a relative path absolute against dir (kubectl resolves every path of a
 * kubeconfig against the file that names it). */
static int resolve(cJSON *o, const char *key, const char *dir, bool only_with_slash)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsString(v) || !v->valuestring[0] || v->valuestring[0] == '/' || !dir || !*dir)
		return 0;
	if (only_with_slash && !strchr(v->valuestring, '/'))
		return 0; /* an exec command looked up in $PATH */
	char *p = NULL;
	if (asprintf(&p, "%s/%s", dir, v->valuestring) < 0)
		return -1;
	char *ok = cJSON_SetValuestring(v, p);
	free(p);
	return ok ? 0 : -1;
}

static int resolve_paths(cJSON *root, const char *dir)
{
	cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "clusters")) {
		cJSON *cl = cJSON_GetObjectItemCaseSensitive(it, "cluster");
		if (cJSON_IsObject(cl) && resolve(cl, "certificate-authority", dir, false))
			return -1;
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "users")) {
		cJSON *u = cJSON_GetObjectItemCaseSensitive(it, "user");
		if (!cJSON_IsObject(u))
			continue;
		cJSON *x = cJSON_GetObjectItemCaseSensitive(u, "exec");
		if (resolve(u, "client-certificate", dir, false) || resolve(u, "client-key", dir, false) ||
		    resolve(u, "tokenFile", dir, false) ||
		    (cJSON_IsObject(x) && resolve(x, "command", dir, true)))
			return -1;
	}
	return 0;
}

/* Append src's named entries that dst does not have yet (the first file wins). */
static int merge_list(cJSON *dst, cJSON *src, const char *list)
{
	cJSON *s = cJSON_GetObjectItemCaseSensitive(src, list);
	if (!cJSON_IsArray(s))
		return 0;
	cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, list);
	if (!cJSON_IsArray(d)) {
		cJSON_DeleteItemFromObjectCaseSensitive(dst, list);
		if (!(d = cJSON_AddArrayToObject(dst, list)))
			return -1;
	}
	cJSON *it;
	cJSON_ArrayForEach(it, s) {
		const char *n = str_at(it, "name");
		if (!n)
			continue;
		bool have = false;
		const cJSON *x;
		cJSON_ArrayForEach(x, d) {
			const char *m = str_at(x, "name");
			if (m && !strcmp(m, n))
				have = true;
		}
		cJSON *dup;
		if (!have && (!(dup = cJSON_Duplicate(it, true)) || !cJSON_AddItemToArray(d, dup)))
			return -1;
	}
	return 0;
}

static int merge(cJSON *dst, cJSON *src)
{
	if (merge_list(dst, src, "clusters") || merge_list(dst, src, "contexts") ||
	    merge_list(dst, src, "users"))
		return -1;
	const char *cur = str_at(src, "current-context");
	if (cur && !str_at(dst, "current-context")) {
		cJSON_DeleteItemFromObjectCaseSensitive(dst, "current-context");
		if (!cJSON_AddStringToObject(dst, "current-context", cur))
			return -1;
	}
	return 0;
}

static cJSON *parse_root(const char *yaml, size_t len, const char *base_dir, gk_err *err)
{
	cJSON *root = yaml_to_json(yaml, len, err);
	if (!root)
		return NULL;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: top level is not a mapping");
		return NULL;
	}
	if (resolve_paths(root, base_dir)) {
		cJSON_Delete(root);
		oom(err);
		return NULL;
	}
	return root;
}

static int fill_root(gk_kube_config *c, cJSON *root, const char *context, gk_err *err)
{
	int rc = fill(c, root, context, err);
	cJSON_Delete(root);
	if (rc)
		gk_kube_config_free(c);
	return rc;
}

int gk_kube_config_parse(gk_kube_config *c, const char *yaml, size_t len, const char *context,
			 const char *base_dir, gk_err *err)
{
	memset(c, 0, sizeof *c);
	cJSON *root = parse_root(yaml, len, base_dir, err);
	if (!root)
		return err ? err->code : GK_INVALID_ARGUMENT;
	return fill_root(c, root, context, err);
}

/* One file → its tree with paths resolved. NULL + err (NOT_FOUND if absent). */
static cJSON *read_root(const char *path, gk_err *err)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		gk_err_set(err, errno == ENOENT ? GK_NOT_FOUND : GK_PERMISSION_DENIED, "kubeconfig %s: %s",
			   path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(KUBECONFIG_MAX);
	if (!buf) {
		fclose(f);
		oom(err);
		return NULL;
	}
	size_t n = fread(buf, 1, KUBECONFIG_MAX, f);
	bool too_big = n == KUBECONFIG_MAX, rerr = ferror(f);
	fclose(f);
	if (too_big || rerr) {
		free(buf);
		if (too_big)
			gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig %s: larger than %u bytes", path,
				   KUBECONFIG_MAX);
		else
			gk_err_set(err, GK_PERMISSION_DENIED, "kubeconfig %s: read error", path);
		return NULL;
	}
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = 0;
	else
		snprintf(dir, sizeof dir, ".");
	cJSON *root = parse_root(buf, n, dir, err);
	free(buf);
	if (!root)
		gk_err_wrap(err, "%s", path);
	return root;
}

int gk_kube_config_file(gk_kube_config *c, const char *path, const char *context, gk_err *err)
{
	memset(c, 0, sizeof *c);
	cJSON *root = read_root(path, err);
	if (!root)
		return err ? err->code : GK_INVALID_ARGUMENT;
	int rc = fill_root(c, root, context, err);
	if (rc)
		gk_err_wrap(err, "%s", path);
	return rc;
}

int gk_kube_config_files(gk_kube_config *c, const char *list, const char *context, gk_err *err)
{
	memset(c, 0, sizeof *c);
	char *l = strdup(list ? list : ""), *save = NULL;
	if (!l)
		return oom(err);
	cJSON *merged = NULL;
	int rc = 0, n = 0;
	for (char *p = strtok_r(l, ":", &save); p && !rc; p = strtok_r(NULL, ":", &save)) {
		gk_err e = {0};
		cJSON *r = read_root(p, &e);
		if (!r && e.code == GK_NOT_FOUND)
			continue; /* kubectl skips files of the list that do not exist */
		if (!r) {
			rc = gk_err_set(err, e.code, "$KUBECONFIG: %s", e.msg);
			break;
		}
		n++;
		if (!merged) {
			merged = r;
			continue;
		}
		if (merge(merged, r))
			rc = oom(err);
		cJSON_Delete(r);
	}
	if (!rc && !merged)
		rc = gk_err_set(err, GK_NOT_FOUND, "no file of $KUBECONFIG (%.300s) exists", list ? list : "");
	if (rc) {
		cJSON_Delete(merged);
		free(l);
		return rc;
	}
	rc = fill_root(c, merged, context, err);
	if (rc && n > 1)
		gk_err_wrap(err, "$KUBECONFIG (%d files merged)", n);
	else if (rc)
		gk_err_wrap(err, "$KUBECONFIG");
	free(l);
	return rc;
}

static const char *token_override;

void gk_kube_config_token_override(const char *path)
{
	token_override = path && *path ? path : NULL;
}

static int config_chain(gk_kube_config *c, const char *kubeconfig, gk_err *err)
{
	if (kubeconfig && *kubeconfig)
		return gk_kube_config_file(c, kubeconfig, NULL, err);
	const char *env = secure_getenv("KUBECONFIG");
	if (env && *env)
		return gk_kube_config_files(c, env, NULL, err);
	if (secure_getenv("KUBERNETES_SERVICE_HOST"))
		return gk_kube_config_in_cluster(c, NULL, err);
	const char *home = secure_getenv("HOME");
	char path[PATH_MAX];
	if (home && snprintf(path, sizeof path, "%s/.kube/config", home) < (int)sizeof path &&
	    access(path, F_OK) == 0)
		return gk_kube_config_file(c, path, NULL, err);
	memset(c, 0, sizeof *c);
	return gk_err_set(err, GK_FAILED_PRECONDITION,
			  "no Kubernetes configuration: give --kubeconfig, set $KUBECONFIG, or run "
			  "in a pod (KUBERNETES_SERVICE_HOST)");
}

int gk_kube_config_load(gk_kube_config *c, const char *kubeconfig, gk_err *err)
{
	int rc = config_chain(c, kubeconfig, err);
	if (rc || !token_override)
		return rc;
	char *t = strdup(token_override);
	if (!t) {
		gk_kube_config_free(c);
		return oom(err);
	}
	free(c->token_file);
	c->token_file = t;
	return GK_OK;
}
